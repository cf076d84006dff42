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

"""The connections of healreq's MySQL engines share one TLS context.

PyMySQL 1.2 makes a context for every connection given no TLS option;
healreq's engines make one per process. Older releases make none, and
neither do healreq's connections there.
"""

import pymysql
import testtools

from healreq.db import engines
from healreq.db import tls
from healreq.tests.functional import backends


class SharedContextTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        url = self.useFixture(backends.MySQLBackend()).database_url('tls')
        self.engine = engines.create_engine(url)
        self.addCleanup(self.engine.dispose)

    def connections(self, count):
        opened = [self.engine.raw_connection() for _ in range(count)]
        for connection in opened:
            self.addCleanup(connection.close)
            cursor = connection.cursor()
            cursor.execute('SELECT 1')
            self.assertEqual(((1,),), cursor.fetchall())
        return [connection.dbapi_connection for connection in opened]

    def plain_context(self):
        """The context plain PyMySQL makes for a connection, or None."""
        args, kwargs = self.engine.dialect.create_connect_args(
            self.engine.url)
        connection = pymysql.connect(*args, **kwargs)
        self.addCleanup(connection.close)
        return getattr(connection, 'ctx', None)

    def test_connections_share_the_context_pymysql_would_make_each(self):
        opened = self.connections(3)
        for connection in opened:
            self.assertIsInstance(connection, tls.Connection)
        contexts = [getattr(c, 'ctx', None) for c in opened]
        plain = self.plain_context()
        if plain is None:  # this PyMySQL tries no TLS without options
            self.assertEqual([None] * 3, contexts)
            self.assertLess(pymysql.VERSION[:2], (1, 2))
        else:
            self.assertIsNotNone(contexts[0])
            self.assertEqual([contexts[0]] * 3, contexts)
            self.assertIsNot(plain, contexts[0])
            self.assertEqual((plain.verify_mode, plain.check_hostname),
                             (contexts[0].verify_mode,
                              contexts[0].check_hostname))
