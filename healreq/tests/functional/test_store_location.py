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

"""The audit store never lives in a Nova database.

An ``audit_connection`` naming the API database, ``[database]/connection``
or a cell's database, by whatever user, password or spelling of the
host, is refused before a table is created there.
"""

import os
import uuid

import fixtures
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

from healreq.tests.functional import audit_case
from healreq.tests.functional import backends


class StoreLocationTestCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        directory = self.useFixture(fixtures.TempDir()).path
        self.plan = os.path.join(directory, 'heal.plan')
        self.run_id = self.heal_run('--dry-run', '--plan', self.plan)
        self.specs = self.all_spec_texts()

    def engines(self):
        return [self.deployment.api_engine, self.cell1.engine,
                self.cell2.engine]

    def tables(self):
        return [sorted(sa.inspect(engine).get_table_names())
                for engine in self.engines()]

    def other_spelling(self, url):
        """``url`` by another user and password, host, port and path."""
        parsed = sa_url.make_url(url)
        if parsed.get_backend_name() == 'sqlite':
            directory, name = os.path.split(parsed.database)
            link = os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'link')
            os.symlink(directory, link)
            return 'sqlite:///%s/./%s' % (link, name)
        return parsed.set(
            drivername='mysql', username='auditor', password='Other-Pw',
            host={'localhost': '127.0.0.1'}.get(parsed.host, 'localhost'),
            port=parsed.port or 3306).update_query_dict(
                {'charset': 'utf8mb4'}).render_as_string(
                    hide_password=False)

    def assert_refused(self, store, commands, *expected):
        config = self.write_config('audit_connection = %s\n' % store)
        before = self.tables()
        for argv in commands:
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(127, result.code,
                             '%s: %s' % (argv, result.stdout + result.stderr))
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith(
                'nova-heal: error: audit store: it would be created in '),
                lines[0])
            for text in expected:
                self.assertIn(text, lines[0])
            self.assertNotIn('Other-Pw', result.stdout + result.stderr)
        self.assertEqual(before, self.tables())
        self.assertEqual(self.specs, self.all_spec_texts())
        self.assertEqual([self.run_id], list(self.audit_runs()))


class StoreLocationTest(StoreLocationTestCase):

    def all_commands(self):
        return [['request-specs', '--dry-run'], ['request-specs'],
                ['request-specs', '--format', 'json'],
                ['revert', self.run_id], ['apply', self.plan],
                ['audit', 'list'], ['audit', 'show', self.run_id]]

    def test_api_database(self):
        api_url = self.cells.api_url()
        for store in (api_url, self.other_spelling(api_url)):
            self.assert_refused(store, self.all_commands(),
                                'the Nova API database')

    def test_local_database_of_the_configuration(self):
        reference = self.db.reference_url()
        for store in (reference, self.other_spelling(reference)):
            self.assert_refused(store, self.all_commands(),
                                '[database]/connection')

    def test_cell_databases(self):
        # Every command reads the cell mappings before opening the store.
        commands = self.all_commands()
        for cell in (self.cell1, self.cell2):
            for store in (cell.url, self.other_spelling(cell.url)):
                self.assert_refused(store, commands,
                                    'the database of cell %s (%s)'
                                    % (cell.uuid, cell.name))

    def test_another_database_on_the_same_server_is_used(self):
        if self.db.name == 'SQLite':
            store = 'sqlite:///%s' % os.path.join(
                self.useFixture(fixtures.TempDir()).path, 'audit.sqlite')
        else:
            store = self.db.database_url('audit_%s' % uuid.uuid4().hex[:6])
        config = self.write_config('audit_connection = %s\n' % store)
        result = self.heal('--dry-run', config_file=config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)


class SQLiteStoreLocationTest(StoreLocationTestCase):
    """What only SQLite files have."""

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'SQLite']

    def test_audit_commands_read_the_cells_of_a_configured_api(self):
        store = 'audit_connection = %s\n' % self.audit_url()
        # No API database configured: only the store is read.
        config = self.write_config_text('[healreq]\n' + store)
        for argv in (['audit', 'list'], ['audit', 'show', self.run_id]):
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertIn(self.run_id, result.stdout)
        # One that cannot be read: the cells cannot be checked, which is
        # said in one line, and the store is read all the same.
        config = self.write_config_text(
            '[api_database]\nconnection = mysql+pymysql://nova:Other-Pw@'
            '127.0.0.1:1/nova_api\n[healreq]\n' + store)
        for argv in (['audit', 'list'], ['audit', 'show', self.run_id]):
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertIn(self.run_id, result.stdout)
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertIn('not checked against the cells', lines[0])
            self.assertNotIn('Other-Pw', result.stderr)

    def test_hard_link_to_an_sqlite_database(self):
        link = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'audit.sqlite')
        os.link(sa_url.make_url(self.cell2.url).database, link)
        self.assert_refused('sqlite:///%s' % link,
                            [['request-specs', '--dry-run']],
                            'cell %s' % self.cell2.uuid)
