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

"""The audit store holds any text, and its failures never lose a report.

A latin1 MySQL database (MySQL 5.7's and upstream MariaDB's default)
gets utf8mb4 tables, and an existing latin1 store is converted. A store
that refuses to record findings after the run wrote specs still gets the
report printed, and the exit code says the store failed.
"""

from alembic import command
import sqlalchemy as sa

from healreq.audit import migrations
from healreq.audit import store as audit_store
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

# A flavor name no latin1 column can hold.
CYRILLIC = 'м1.большой'
# A flavor name no utf8mb3 connection can carry.
EMOJI = 'm1.\U0001f680large'


def _mysql_only():
    return [s for s in backends.SCENARIOS if s[0] == 'MySQL']


class _AuditDatabaseCase(audit_case.AuditTestCase):

    def table_charsets(self, url):
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        with engine.connect() as conn:
            return dict(conn.execute(sa.text(
                'SELECT t.table_name, c.character_set_name '
                'FROM information_schema.tables t JOIN '
                'information_schema.collation_character_set_applicability c '
                'ON c.collation_name = t.table_collation '
                'WHERE t.table_schema = DATABASE() AND t.table_name IN '
                "('runs', 'changes', 'findings', 'audit_schema')")).all())

    def add_cyrillic_drift(self, name=CYRILLIC):
        flavor = dep.flavor(4, name, vcpus=4, memory_mb=8192,
                            root_gb=80)
        small = dep.flavor(2, 'm1.small', vcpus=1, memory_mb=2048,
                           root_gb=20)
        # A failed resize to it: the finding's detail names the flavor.
        return self.deployment.add_instance(self.cell1, small,
                                            spec_flavor=flavor, new=flavor)


class Latin1AuditDatabaseTest(_AuditDatabaseCase):

    scenarios = _mysql_only()

    def test_new_store_holds_any_text(self):
        url = self.db.latin1_database_url('audit')
        config = self.write_config('audit_connection = %s\n' % url)
        uuid = self.add_cyrillic_drift()
        for args in (('--dry-run',), (), ('--dry-run',)):
            result, document = self.heal_json(*args, config_file=config)
            self.assertNotIn('Incorrect string value', result.stderr)
            self.assertIn(result.code, (0, 4), result.stdout + result.stderr)
        self.assertIn('m1.small', self.deployment.spec_text(uuid))
        self.assertEqual(dict.fromkeys(
            ('runs', 'changes', 'findings', 'audit_schema'), 'utf8mb4'),
            self.table_charsets(url))
        result, runs = self.run_json('audit', 'list', config_file=config)
        self.assertEqual(3, len(runs))
        result, shown = self.run_json('audit', 'show', runs[1]['id'],
                                      config_file=config)
        self.assertIn(CYRILLIC, shown['findings'][0]['detail'])

    def test_store_url_naming_utf8_talks_utf8mb4(self):
        # The usual OpenStack URL form names utf8, that is utf8mb3.
        uuid = self.add_cyrillic_drift(EMOJI)
        for charset in ('utf8', 'UTF8MB3', 'latin1'):
            url = '%s?charset=%s' % (
                self.db.latin1_database_url('audit_%s' % charset.lower()),
                charset)
            config = self.write_config('audit_connection = %s\n' % url)
            result, document = self.heal_json('--dry-run',
                                              config_file=config)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertEqual([], document.get('problems', []))
            result, shown = self.run_json('audit', 'show',
                                          document['run_id'],
                                          config_file=config)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertEqual([uuid], [f['instance_uuid']
                                      for f in shown['findings']])
            self.assertIn(EMOJI, shown['findings'][0]['detail'])

    def test_latin1_store_is_converted_keeping_its_data(self):
        url = self.db.latin1_database_url('audit')
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        # A store of the release before: every revision up to the lease.
        with engine.begin() as conn:
            command.upgrade(migrations.config(conn), '5b1e7c9a2f40')
        with engine.begin() as conn:
            conn.execute(sa.text(
                "INSERT INTO runs (id, started_at, started_ns, mode, "
                "command, operator) VALUES ('r1', '2026-01-01', 1, 'heal', "
                "'nova-heal request-specs', 'José')"))
        self.assertEqual('latin1', self.table_charsets(url)['runs'])
        store = audit_store.AuditStore(url)
        self.addCleanup(store.dispose)
        self.assertEqual(dict.fromkeys(
            ('runs', 'changes', 'findings', 'audit_schema'), 'utf8mb4'),
            self.table_charsets(url))
        self.assertEqual('José', store.get_run('r1')['operator'])


class FindingsRefusedTest(_AuditDatabaseCase):
    """The report of a run survives a store that refuses its findings."""

    TRIGGERS = {
        'sqlite': ("CREATE TRIGGER refuse_findings BEFORE INSERT ON "
                   "findings BEGIN SELECT RAISE(ABORT, 'findings "
                   "refused'); END"),
        'mysql': ("CREATE TRIGGER refuse_findings BEFORE INSERT ON "
                  "findings FOR EACH ROW SIGNAL SQLSTATE '45000' SET "
                  "MESSAGE_TEXT = 'findings refused'"),
    }

    def store_url(self):
        """The audit store of this backend (SQLite: the default file)."""
        if self.db.name == 'SQLite':
            return self.audit_url(), self.config_file
        url = self.db.database_url('audit')
        return url, self.write_config('audit_connection = %s\n' % url)

    def test_report_is_printed_and_the_exit_code_says_it(self):
        url, config = self.store_url()
        # Create the store, then make it refuse findings.
        self.assertEqual(4, self.heal('--dry-run', config_file=config).code)
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            conn.execute(sa.text(self.TRIGGERS[engine.dialect.name]))
        drifted = [self.add_drifted(self.cell1), self.add_drifted(self.cell2)]
        result, document = self.heal_json(config_file=config)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(sorted((u, 'healed') for u in drifted), sorted(
            (r['instance_uuid'], r['status']) for r in document['results']))
        self.assertEqual(1, len(document['problems']))
        self.assertIn('nova-heal: error: audit store: ',
                      document['problems'][0])
        self.assertIn('findings refused', document['problems'][0])
        self.assertIn(document['problems'][0], result.stderr.splitlines())
        # The changes themselves are audited, and revertible.
        shown = self.audit_show_at(config, document['run_id'])
        self.assertEqual(2, shown['exit_code'])
        self.assertEqual({'applied'}, {c['state'] for c in shown['changes']})
        self.assertEqual(2, len(shown['changes']))

    def audit_show_at(self, config, run_id):
        result, document = self.run_json('audit', 'show', run_id,
                                         config_file=config)
        self.assertEqual(0, result.code, result.stderr)
        return document
