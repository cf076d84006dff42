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

"""Database URLs the driver rejects: one line and exit 127, every command.

PyMySQL checks a URL's password and charset only when it connects, and
then fails with errors that are no database error (a UnicodeEncodeError,
an AttributeError). Every URL of the configuration goes through one
function that turns them into one line naming the option, never into a
traceback and exit 255, and never quoting the password.
"""

import json

from healreq.tests.functional import audit_case

# The password is 'sécret€': é is Latin-1, € is not.
SECRET = 's\u00e9cret\u20ac'
REJECTED = {
    'password': ('mysql+pymysql://nova:%s@127.0.0.1/nova' % SECRET,
                 'the pymysql driver cannot send its user or password'),
    'charset': ('mysql+pymysql://nova:pw@127.0.0.1/nova?charset=bogus',
                "the pymysql driver does not know charset 'bogus'"),
}
RUN_ID = '6a1e5c3c-2b9f-4e0b-9a63-7f3f0c6d2f11'


class RejectedUrlTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.add_drifted(self.cell1)
        self.plan = self.state_path + '/plan.json'
        result = self.heal('--dry-run', '--plan', self.plan)
        self.assertEqual(0, result.code, result.stderr)

    def commands(self):
        """Every command that reads the API database."""
        return [('request-specs', '--dry-run'), ('request-specs',),
                ('allocations',), ('hosts',), ('audit', 'list'),
                ('audit', 'show', RUN_ID), ('revert', RUN_ID),
                ('apply', self.plan)]

    def assert_one_line(self, argv, config, option, expected):
        for more in ([], ['--format', 'json']):
            result = self.run_cli(*(list(argv) + more), config_file=config)
            self.assertEqual(127, result.code, '%s: %s' % (
                argv, result.stdout + result.stderr))
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith(
                'nova-heal: error: invalid %s: %s' % (option, expected)),
                lines[0])
            self.assertNotIn(SECRET, result.stdout + result.stderr)
            if more:
                document = json.loads(result.stdout)
                self.assertEqual(127, document['error']['exit_code'])

    def placement(self, url):
        return '\n[placement_database]\nconnection = %s\n' % url

    def test_api_database(self):
        for url, expected in REJECTED.values():
            config = self.write_config_text(
                '[api_database]\nconnection = %s\n%s[healreq]\nstate_path = '
                '%s\n' % (url, self.placement('sqlite://'), self.state_path))
            for argv in self.commands():
                self.assert_one_line(argv, config, '[api_database]/connection',
                                     expected)

    def test_placement_database(self):
        for url, expected in REJECTED.values():
            config = self.write_config(self.placement(url))
            for argv in (('allocations',), ('hosts',)):
                self.assert_one_line(argv, config,
                                     '[placement_database]/connection',
                                     expected)


class MysqldbUrlTest(audit_case.AuditTestCase):
    """A ``mysql://`` URL (MySQLdb) says that the tool uses PyMySQL."""

    URL = 'mysql://nova:SECRETPW@127.0.0.1/nova'
    ADVICE = 'the URL should read mysql+pymysql://'

    def test_api_database(self):
        config = self.write_config_text(
            '[api_database]\nconnection = %s\n[healreq]\nstate_path = %s\n'
            % (self.URL, self.state_path))
        for argv in (('request-specs', '--dry-run'), ('audit', 'list')):
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(127, result.code, result.stdout + result.stderr)
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith(
                'nova-heal: error: invalid [api_database]/connection: '
                'database driver not installed'), lines[0])
            self.assertIn('MySQLdb', lines[0])
            self.assertIn('nova-heal uses PyMySQL', lines[0])
            self.assertIn(self.ADVICE, lines[0])
            self.assertNotIn('SECRETPW', result.stdout + result.stderr)

    def test_cell_mapping(self):
        healthy = self.add_drifted(self.cell1)
        broken = self.deployment.add_cell('broken', self.URL,
                                          create_schema=False)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        failed = [c for c in doc['cells'] if c['error']]
        self.assertEqual([broken.uuid], [c['cell_uuid'] for c in failed])
        error = failed[0]['error']
        self.assertTrue(error.startswith(
            'cell database driver not installed'), error)
        self.assertIn('MySQLdb', error)
        self.assertIn(self.ADVICE, error)
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)
        self.assertEqual([healthy], [r['instance_uuid']
                                     for r in doc['results']])
