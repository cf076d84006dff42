#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""Whether two database URLs name one database."""

import os

import fixtures
import testtools

from healreq.db import locations

API = 'mysql+pymysql://nova:secret@localhost/nova_api?charset=utf8'


class SameDatabaseTest(testtools.TestCase):

    def test_whatever_the_user_driver_and_query(self):
        for other in ('mysql://auditor@localhost/nova_api',
                      'mysql+mysqldb://a:b@localhost:3306/nova_api',
                      'mariadb+pymysql://x:y@localhost/nova_api?ssl=1',
                      'mysql+pymysql://nova@localhost/NOVA_API'):
            self.assertTrue(locations.same_database(API, other), other)

    def test_local_host_spellings(self):
        for host in ('127.0.0.1', '[::1]', 'LOCALHOST', ''):
            other = 'mysql+pymysql://u@%s/nova_api' % host
            self.assertTrue(locations.same_database(API, other), other)
        self.assertTrue(locations.same_database(
            API, 'mysql+pymysql://u@/nova_api?unix_socket=/run/mysqld.sock'))

    def test_default_ports(self):
        self.assertTrue(locations.same_database(
            'postgresql://u@db/nova', 'postgresql+psycopg2://v@db:5432/nova'))
        self.assertFalse(locations.same_database(
            'postgresql://u@db/nova', 'postgresql://u@db:5433/nova'))
        self.assertFalse(locations.same_database(
            API, 'mysql+pymysql://u@localhost:3307/nova_api'))

    def test_other_databases(self):
        for other in ('mysql+pymysql://nova@localhost/healreq',
                      'mysql+pymysql://nova@db.example.org/nova_api',
                      'postgresql://nova@localhost/nova_api',
                      'sqlite:////var/lib/nova/nova_api',
                      'sqlite://', 'not a url', ''):
            self.assertFalse(locations.same_database(API, other), other)

    def test_sqlite_files(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'nova_api.sqlite')
        with open(path, 'w'):
            pass
        link = os.path.join(self.useFixture(fixtures.TempDir()).path, 'l')
        os.symlink(directory, link)
        hard = os.path.join(directory, 'hard.sqlite')
        os.link(path, hard)
        url = 'sqlite:///%s' % path
        for other in ('sqlite:///%s/../%s/nova_api.sqlite' % (
                          directory, os.path.basename(directory)),
                      'sqlite:///%s/nova_api.sqlite' % link,
                      'sqlite:///%s' % hard,
                      'sqlite:///file:%s?mode=rw&uri=true' % path):
            self.assertTrue(locations.same_database(url, other), other)
        for other in ('sqlite:///%s/other.sqlite' % directory, 'sqlite://',
                      'sqlite:///:memory:'):
            self.assertFalse(locations.same_database(url, other), other)

    def test_sqlite_file(self):
        self.assertEqual('/var/lib/nova-heal/audit.sqlite',
                         locations.sqlite_file(
                             'sqlite:////var/lib/nova-heal/audit.sqlite'))
        self.assertEqual(os.path.abspath('audit.sqlite'),
                         locations.sqlite_file('sqlite:///audit.sqlite'))
        for url in ('sqlite://', 'sqlite:///:memory:', API, 'nonsense'):
            self.assertIsNone(locations.sqlite_file(url), url)
