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

"""The audit store's schema migrations, on SQLite and on MySQL.

Each test has its own empty database. The stores of the releases before
alembic are built by a frozen copy of their code (legacy_audit).
"""

import datetime
import os
import threading

from alembic import autogenerate
from alembic import command
from alembic.runtime import migration
import fixtures
from oslo_db.sqlalchemy import test_fixtures
from oslo_db.sqlalchemy import test_migrations
import sqlalchemy as sa
import testscenarios
import testtools

from healreq.audit import migrations
from healreq.audit.migrations import legacy
from healreq.audit.migrations import lock
from healreq.audit import schema
from healreq.audit import store as audit_store
from healreq.tests import cli
from healreq.tests.functional import backends
from healreq.tests.functional import legacy_audit

HEAD = migrations.scripts().get_current_head()
STARTED_AT = datetime.datetime(2026, 11, 30, 12, 34, 56)
STARTED_NS = 1796042096 * 10 ** 9
MODELS_TABLES = {'audit_schema', 'runs', 'changes', 'findings', 'leases'}
VERSION_1_TABLES = MODELS_TABLES - {'leases'}


class AuditModels(test_migrations.ModelsMigrationsSync):
    """The audit store's models, as oslo.db compares them to a database.

    Its version table is alembic's, not a model.
    """

    def get_metadata(self):
        return schema.metadata

    def get_engine(self):
        return self.engine

    def db_sync(self, engine):
        migrations.upgrade(engine)

    def include_object(self, object_, name, type_, reflected, compare_to):
        if type_ == 'table' and name == migrations.VERSION_TABLE:
            return False
        return super().include_object(object_, name, type_, reflected,
                                      compare_to)


class _ModelsSyncTest(test_fixtures.OpportunisticDBTestMixin, AuditModels):
    """oslo.db's check: migrating an empty database gives the models."""

    SKIP_ON_UNAVAILABLE_DB = not backends.REQUIRE_MYSQL

    def get_engine(self):
        return self._get_default_provisioned_db().engine


class ModelsSyncSQLiteTest(_ModelsSyncTest, testtools.TestCase):
    FIXTURE = test_fixtures.OpportunisticDbFixture


class ModelsSyncMySQLTest(_ModelsSyncTest, testtools.TestCase):
    FIXTURE = test_fixtures.MySQLOpportunisticFixture


def revisions_in_order():
    """Every revision id, from the first to the head."""
    return [s.revision for s in reversed(list(
        migrations.scripts().walk_revisions()))]


class MigrationTestCase(testscenarios.WithScenarios, testtools.TestCase):
    """An empty database on each backend, and ways to look into it."""

    scenarios = backends.SCENARIOS

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(self.backend_fixture())
        self.url = self.db.database_url('audit')
        self.engine = sa.create_engine(self.url)
        self.addCleanup(self.engine.dispose)

    def open_store(self):
        store = audit_store.AuditStore(self.url)
        self.addCleanup(store.dispose)
        return store

    def upgrade_to(self, revision):
        with lock.migration_lock(self.engine) as conn:
            command.upgrade(migrations.config(conn), revision)

    def revision(self):
        with self.engine.connect() as conn:
            return migrations.current_revision(conn)

    def inspector(self):
        return sa.inspect(self.engine)

    def columns(self, table):
        return {c['name']: c for c in self.inspector().get_columns(table)}

    def index_names(self, table):
        return {i['name'] for i in self.inspector().get_indexes(table)}

    def legacy_version(self):
        with self.engine.connect() as conn:
            return conn.execute(sa.text(
                'SELECT version FROM audit_schema')).scalars().all()

    def table(self, name):
        """``name`` as the database has it now (typed by reflection)."""
        return sa.Table(name, sa.MetaData(), autoload_with=self.engine)

    def rows(self, name):
        table = self.table(name)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(table).order_by(table.c.id))]

    def differences(self):
        """What oslo.db's comparison finds between models and database."""
        models = AuditModels()
        with self.engine.connect() as conn:
            context = migration.MigrationContext.configure(conn, opts={
                'include_object': models.include_object,
                'compare_type': models.compare_type,
                'compare_server_default': models.compare_server_default})
            return models.filter_metadata_diff(autogenerate.compare_metadata(
                context, models.get_metadata()))

    def assert_models_match(self):
        self.assertEqual([], self.differences())

    def set_revision(self, revision):
        with self.engine.begin() as conn:
            conn.execute(sa.text('UPDATE %s SET version_num = :rev'
                                 % migrations.VERSION_TABLE),
                         {'rev': revision})

    def insert(self, name, row):
        with self.engine.begin() as conn:
            conn.execute(self.table(name).insert(), [row])

    def insert_version_1_rows(self):
        """A run with a change and a finding, as version 1 holds them."""
        self.insert('runs', RUN)
        self.insert('changes', CHANGE)
        self.insert('findings', FINDING)

    def assert_rows_kept(self, started_ns):
        run = dict(RUN, started_ns=started_ns)
        if 'lease' in self.columns('runs'):
            run['lease'] = None
        self.assertEqual([run], self.rows('runs'))
        change = dict(CHANGE)
        if 'action' in self.columns('changes'):
            change['action'] = 'update'
        self.assertEqual([change], self.rows('changes'))
        self.assertEqual([FINDING], self.rows('findings'))

    def assert_foreign_keys(self):
        """changes and findings still reference runs (SQLite copies runs)."""
        for table in ('changes', 'findings'):
            self.assertEqual(
                [(['run_id'], 'runs', ['id'])],
                [(fk['constrained_columns'], fk['referred_table'],
                  fk['referred_columns'])
                 for fk in self.inspector().get_foreign_keys(table)])

    def assert_primary_keys(self):
        """Every table of the store has a primary key."""
        inspector = self.inspector()
        self.assertEqual(
            [], [table for table in inspector.get_table_names()
                 if not inspector.get_pk_constraint(table)[
                     'constrained_columns']])

    def write_config(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as handle:
            handle.write('[healreq]\naudit_connection = %s\n' % self.url)
        return path

    def assert_command_refuses(self, message):
        """``audit list`` exits 127 with ``message`` as its one line."""
        result = cli.run_main(['--config-file', self.write_config(),
                               'audit', 'list'])
        self.assertEqual(127, result.code, result.stderr)
        self.assertEqual('', result.stdout)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertIn(message, lines[0])


RUN = {'id': '6f1e3c2a-0b7d-4e59-9a81-3c5d2e7f4b10',
       'started_at': STARTED_AT,
       'ended_at': STARTED_AT + datetime.timedelta(seconds=3),
       'mode': 'heal', 'command': 'nova-heal request-specs',
       'operator': 'nova', 'host': 'ctl-1', 'tool_version': '1.0.0',
       'filters': '{}', 'summary': '{"healed": 1}', 'exit_code': 0}
CHANGE = {'id': 1, 'run_id': RUN['id'],
          'instance_uuid': '0c9d1b5e-8a2f-4d63-b7e4-1f2a3b4c5d6e',
          'cell_uuid': 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',
          'spec_id': 7, 'fields': '["flavor"]',
          'before_text': '{"before": "%s"}' % ('x' * 70000),
          'after_text': '{"after": 1}', 'before_digest': 'b' * 64,
          'after_digest': 'a' * 64, 'state': 'applied', 'detail': None,
          'created_at': STARTED_AT,
          'resolved_at': STARTED_AT + datetime.timedelta(seconds=1)}
FINDING = {'id': 1, 'run_id': RUN['id'],
           'instance_uuid': CHANGE['instance_uuid'],
           'cell_uuid': CHANGE['cell_uuid'], 'status': 'healed',
           'reason': None, 'drift': '["flavor"]', 'detail': None}
VERSION_1_RUNS_COLUMNS = {'id', 'started_at', 'ended_at', 'mode', 'command',
                          'operator', 'host', 'tool_version', 'filters',
                          'summary', 'exit_code'}


class WalkTest(MigrationTestCase):
    """Every revision in turn, from an empty database to the head."""

    def test_walk_from_the_first_revision(self):
        for revision in revisions_in_order():
            check = getattr(self, '_check_%s' % revision, None)
            self.assertIsNotNone(check, 'no check for %s' % revision)
            self.upgrade_to(revision)
            self.assertEqual(revision, self.revision())
            check()
        self.assertEqual(HEAD, self.revision())
        self.assert_models_match()

    def _check_035ad12a78f5(self):
        """Version 1, as the first release created it.

        On MySQL the migration lock created the leases table first.
        """
        self.assertEqual(VERSION_1_TABLES | {migrations.VERSION_TABLE},
                         set(self.inspector().get_table_names())
                         - {'leases'})
        self.assertEqual(VERSION_1_RUNS_COLUMNS, set(self.columns('runs')))
        self.assertEqual({'runs_started_at_idx'}, self.index_names('runs'))
        self.assertEqual({'changes_run_id_idx', 'changes_state_idx',
                          'changes_instance_uuid_idx'},
                         self.index_names('changes'))
        self.assertEqual({'findings_run_id_idx',
                          'findings_instance_uuid_idx'},
                         self.index_names('findings'))
        self.assert_foreign_keys()
        self.assertEqual([1], self.legacy_version())
        self.insert_version_1_rows()

    def _check_74d17df86dd6(self):
        """Version 2: started_ns, filled from started_at, and indexed."""
        columns = self.columns('runs')
        self.assertEqual(VERSION_1_RUNS_COLUMNS | {'started_ns'},
                         set(columns))
        self.assertFalse(columns['started_ns']['nullable'])
        self.assertEqual({'runs_started_ns_idx'}, self.index_names('runs'))
        self.assert_foreign_keys()
        self.assert_rows_kept(STARTED_NS)
        self.assertEqual([2], self.legacy_version())

    def _check_3d5c2d8cd76a(self):
        """Versioned by alembic: releases before it see version 3."""
        self.assertEqual([3], self.legacy_version())
        self.assert_rows_kept(STARTED_NS)
        self.assertEqual(legacy.REVISIONS[3], self.revision())

    def _check_5b1e7c9a2f40(self):
        """runs.lease, NULL for the runs recorded before it."""
        columns = self.columns('runs')
        self.assertIn('lease', columns)
        self.assertTrue(columns['lease']['nullable'])
        self.assert_rows_kept(STARTED_NS)
        self.assertEqual([3], self.legacy_version())

    def _check_b3f0ec736a85(self):
        """changes.action: every earlier change an update; ids optional."""
        columns = self.columns('changes')
        self.assertFalse(columns['action']['nullable'])
        for name in ('spec_id', 'before_text', 'after_text',
                     'before_digest', 'after_digest'):
            self.assertTrue(columns[name]['nullable'], name)
        self.assert_rows_kept(STARTED_NS)
        self.assert_foreign_keys()

    def _check_b954a130a319(self):
        """Every table has a primary key (Galera may require one)."""
        self.assert_primary_keys()
        self.assertEqual([3], self.legacy_version())
        self.assert_rows_kept(STARTED_NS)

    def _check_2ba422cd4161(self):
        """leases: empty once the migration's own lock is released."""
        self.assertEqual({'name'}, set(self.inspector().get_pk_constraint(
            'leases')['constrained_columns']))
        with self.engine.connect() as conn:
            self.assertEqual([], conn.execute(sa.text(
                'SELECT * FROM leases')).all())
        self.assert_rows_kept(STARTED_NS)

    def _check_05d1b6b0869b(self):
        """utf8mb4 tables on MySQL, foreign keys and rows kept."""
        self.assert_foreign_keys()
        self.assert_rows_kept(STARTED_NS)
        if self.engine.dialect.name != 'mysql':
            return
        with self.engine.connect() as conn:
            collations = dict(conn.execute(sa.text(
                'SELECT table_name, table_collation FROM '
                'information_schema.tables WHERE table_schema = DATABASE() '
                "AND table_name IN ('runs', 'changes', 'findings', "
                "'audit_schema')")).all())
        self.assertEqual(['runs', 'changes', 'findings', 'audit_schema'],
                         [t for t in ('runs', 'changes', 'findings',
                                      'audit_schema')
                          if collations[t].startswith('utf8mb4_')])


class ModelsTest(MigrationTestCase):

    def test_a_new_store_has_the_tables_of_the_models(self):
        """A store created from nothing is at the head, with no other table.

        Its columns, types and indexes are the models' (ModelsSync*Test).
        """
        self.open_store()
        self.assertEqual(HEAD, self.revision())
        self.assertEqual(MODELS_TABLES | {migrations.VERSION_TABLE},
                         set(self.inspector().get_table_names()))

    def test_legacy_versions_are_what_their_revisions_build(self):
        """Each version recorded before alembic maps to its revision."""
        for version, revision in sorted(legacy.REVISIONS.items()):
            self.upgrade_to(revision)
            self.assertEqual([version], self.legacy_version())


class AdoptionTest(MigrationTestCase):
    """Stores of the releases before alembic: upgraded, data kept."""

    def assert_adopted(self, started_ns):
        store = self.open_store()
        self.assertEqual(HEAD, self.revision())
        self.assertEqual([3], self.legacy_version())
        self.assert_rows_kept(started_ns)
        self.assert_models_match()
        self.assert_primary_keys()
        self.assertEqual([RUN['id']], [r['id'] for r in store.list_runs(5)])
        self.assertEqual([CHANGE['id']],
                         [c['id'] for c in store.changes(RUN['id'])])
        return store

    def test_version_1_store_upgraded_in_place(self):
        legacy_audit.open_store(self.engine, 1)
        self.insert_version_1_rows()
        store = self.assert_adopted(STARTED_NS)
        newer = store.start_run('dry-run', 'nova-heal request-specs', {})
        self.assertEqual([newer, RUN['id']],
                         [r['id'] for r in store.list_runs(5)])

    def test_version_2_store_adopted(self):
        legacy_audit.open_store(self.engine, 2)
        started_ns = STARTED_NS + 123456789
        self.insert('runs', dict(RUN, started_ns=started_ns))
        self.insert('changes', CHANGE)
        self.insert('findings', FINDING)
        self.assert_adopted(started_ns)

    def test_store_upgraded_by_hand_to_version_2_aligned(self):
        """The hand-written step left an old index and a NULL-able column."""
        legacy_audit.open_store(self.engine, 1)
        self.insert_version_1_rows()
        legacy_audit.open_store(self.engine, 2)
        self.assertEqual([2], self.legacy_version())
        self.assertIn('runs_started_at_idx', self.index_names('runs'))
        self.assertTrue(self.columns('runs')['started_ns']['nullable'])
        self.assert_adopted(STARTED_NS)
        self.assertEqual({'runs_started_ns_idx'}, self.index_names('runs'))

    def test_version_never_recorded(self):
        """A first run stopped before recording the version of its tables."""
        legacy_audit.tables(1).create_all(self.engine)
        self.insert_version_1_rows()
        self.assert_adopted(STARTED_NS)

    def test_releases_before_alembic_refuse_a_migrated_store(self):
        self.open_store()
        for release in (1, 2):
            error = self.assertRaises(legacy_audit.SchemaTooNew,
                                      legacy_audit.open_store,
                                      self.engine, release)
            self.assertEqual('the audit store has schema version 3; this '
                             'healreq knows up to %d' % release, str(error))
        self.assertEqual([3], self.legacy_version())


class RefusalTest(MigrationTestCase):
    """A store newer than this healreq is left alone: exit 127."""

    def test_unknown_revision_refused(self):
        self.open_store().dispose()
        self.set_revision('0123456789ab')
        message = ('the audit store has schema revision 0123456789ab; this '
                   'healreq knows up to %s' % HEAD)
        error = self.assertRaises(schema.SchemaTooNew,
                                  audit_store.AuditStore, self.url)
        self.assertEqual(message, str(error))
        self.assert_command_refuses(message)
        self.assertEqual('0123456789ab', self.revision())

    def test_newer_version_before_alembic_refused(self):
        legacy_audit.open_store(self.engine, 2)
        with self.engine.begin() as conn:
            conn.execute(sa.text('UPDATE audit_schema SET version = 4'))
        message = ('the audit store has schema version 4; this healreq '
                   'knows up to 3')
        error = self.assertRaises(schema.SchemaTooNew,
                                  audit_store.AuditStore, self.url)
        self.assertEqual(message, str(error))
        self.assert_command_refuses(message)
        self.assertNotIn(migrations.VERSION_TABLE,
                         self.inspector().get_table_names())
        self.assertEqual([4], self.legacy_version())


class ConcurrencyTest(MigrationTestCase):
    """Commands that open a store needing a migration at the same time."""

    def open_in_thread(self, outcomes, barrier=None):
        def run():
            try:
                if barrier:
                    barrier.wait()
                audit_store.AuditStore(self.url).dispose()
                outcomes.append(None)
            except Exception as exc:
                outcomes.append(exc)
        thread = threading.Thread(target=run)
        thread.start()
        self.addCleanup(thread.join)
        return thread

    def test_opener_waits_for_a_migration_in_progress(self):
        """It waits for the lock, then finds the store migrated."""
        outcomes = []
        with lock.migration_lock(self.engine) as conn:
            command.upgrade(migrations.config(conn), 'head')
            # The opener reaches the lock this migration holds...
            reached = threading.Event()
            self.useFixture(fixtures.MonkeyPatch(
                'healreq.audit.migrations.lock.on_wait',
                lambda engine: reached.set()))
            opener = self.open_in_thread(outcomes)
            self.assertTrue(reached.wait(30), 'the opener never came')
            # ...and cannot have opened the store while it is held.
            self.assertEqual([], outcomes)
        opener.join(30)
        self.assertEqual([None], outcomes)
        self.assertEqual(HEAD, self.revision())
        self.assertEqual([3], self.legacy_version())

    def test_simultaneous_first_opens(self):
        outcomes = []
        barrier = threading.Barrier(4)
        threads = [self.open_in_thread(outcomes, barrier) for _ in range(4)]
        for thread in threads:
            thread.join(60)
        self.assertEqual([None] * 4, outcomes)
        self.assertEqual(HEAD, self.revision())
        self.assertEqual([3], self.legacy_version())
        self.assert_models_match()
