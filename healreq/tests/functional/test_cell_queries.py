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


"""The cell queries whose SQL does more than select rows.

Whatever path get_system_metadata takes (the aggregate, or plain rows
where the server cannot aggregate), it must return exactly the rows; the
one query of migrations must split into exactly what Nova tracks.
"""

import uuid as uuidlib

from oslo_db import exception as db_exc
import sqlalchemy as sa

from healreq.db import cell_queries
from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import backends
from healreq.tests.functional import deployment_case

# Values a JSON encoding must carry through unchanged.
AWKWARD_VALUES = {
    'image_quote': 'say "hi"', 'image_backslash': 'C:\\path\\',
    'image_unicode': 'caf\u00e9 \u2603 \u00fc', 'image_newline': 'a\nb\tc',
    'image_control': 'x\x01y\x1fz', 'image_empty': '', 'image_spaces': '  ',
    'image_json': '{"a": [1, 2]}', 'image_number': '0012',
    'image_null': None, 'image_long': 'v' * 255,
}


class SystemMetadataTest(deployment_case.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.uuids = [
            self.deployment.add_instance(
                self.cell1, demo.M1_SMALL, system_metadata=AWKWARD_VALUES),
            self.deployment.add_instance(
                self.cell1, demo.M1_SMALL,
                system_metadata=dep.image_system_metadata()),
            self.deployment.add_instance(
                self.cell1, demo.M1_SMALL, system_metadata={}),
        ]
        # Duplicates of a key, soft-deleted and live, interleaved by id.
        with self.cell1.engine.begin() as conn:
            for number, (value, deleted) in enumerate(
                    [('old', 1), ('live', 0), ('older', 7), ('newer', 0)]):
                conn.execute(tables.instance_system_metadata.insert().values(
                    instance_uuid=self.uuids[1], key='image_os_type',
                    value=value, deleted=deleted, created_at=dep.LONG_AGO))
        # An instance the query asks for but that has no row at all.
        self.uuids.append(str(uuidlib.uuid4()))

    def rows(self):
        with self.cell1.engine.connect() as conn:
            return cell_queries._system_metadata_rows(conn, self.uuids)

    def test_equal_strings_are_one_object_in_either_way(self):
        # Both instances have image_os_type rows: one key object (what
        # makes a page short to hand over), equal values shared too.
        with self.cell1.engine.connect() as conn:
            for found in (cell_queries._aggregated_system_metadata(
                    conn, self.uuids), self.rows()):
                keys = {}
                for uuid in self.uuids[:2]:
                    for key, value, _ in found[uuid]:
                        keys.setdefault(key, []).append((key, value))
                both = [pairs for pairs in keys.values() if len(pairs) > 1]
                self.assertTrue(both)
                for pairs in both:
                    self.assertEqual(1, len({id(key) for key, _ in pairs}))
                    for (_, first), (_, other) in zip(pairs, pairs[1:]):
                        if first == other:
                            self.assertIs(first, other)

    def test_aggregate_returns_the_rows(self):
        expected = self.rows()
        self.assertEqual(AWKWARD_VALUES, {
            key: value for key, value, _ in expected[self.uuids[0]]})
        self.assertEqual(['old', 'live', 'older', 'newer'], [
            value for key, value, _ in expected[self.uuids[1]]
            if key == 'image_os_type'])
        with self.cell1.engine.connect() as conn:
            aggregated = cell_queries._aggregated_system_metadata(
                conn, self.uuids)
            self.assertEqual(expected, aggregated)
            self.assertEqual(expected, cell_queries.get_system_metadata(
                conn, self.uuids))
        self.assertEqual(2, len(expected))

    def test_truncated_aggregate_falls_back_to_rows(self):
        mysql = isinstance(self.db, backends.MySQLBackend)
        if not mysql:
            # SQLite never truncates; a BLOB value makes it refuse instead.
            with self.cell1.engine.begin() as conn:
                conn.execute(tables.instance_system_metadata.insert().values(
                    instance_uuid=self.uuids[2], key='image_blob',
                    value=b'\xff\x00', deleted=0, created_at=dep.LONG_AGO))
        expected = self.rows()
        with self.cell1.engine.connect() as conn:
            if mysql:
                conn.exec_driver_sql('SET SESSION group_concat_max_len = 64')
            self.assertRaises(
                (cell_queries._Unaggregated, sa.exc.DBAPIError,
                 db_exc.DBError),
                cell_queries._aggregated_system_metadata, conn, self.uuids)
            self.assertEqual(expected, cell_queries.get_system_metadata(
                conn, self.uuids))

    def test_failed_aggregate_is_not_tried_again(self):
        """Once the aggregate failed on an engine, later batches read rows.

        A separate engine (as each run and cell has) asks the server
        again.
        """
        mysql = self.db.name == 'MySQL'
        url = self.cell1.engine.url.render_as_string(hide_password=False)
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        statements = []
        sa.event.listen(engine, 'before_cursor_execute',
                        lambda conn, cursor, statement, *args:
                        statements.append(statement))
        if not mysql:
            with engine.begin() as conn:
                conn.execute(tables.instance_system_metadata.insert().values(
                    instance_uuid=self.uuids[2], key='image_blob',
                    value=b'\xff\x00', deleted=0, created_at=dep.LONG_AGO))
        expected = self.rows()
        aggregate = 'json_group_array' if not mysql else 'group_concat('
        with engine.connect() as conn:
            if mysql:
                conn.exec_driver_sql('SET SESSION group_concat_max_len = 64')
            for _ in range(3):
                self.assertEqual(expected, cell_queries.get_system_metadata(
                    conn, self.uuids))
        probes = [s for s in statements if aggregate in s.lower()]
        self.assertEqual(1, len(probes), statements)

        other = sa.create_engine(url)
        self.addCleanup(other.dispose)
        statements.clear()
        sa.event.listen(other, 'before_cursor_execute',
                        lambda conn, cursor, statement, *args:
                        statements.append(statement))
        with other.connect() as conn:
            cell_queries.get_system_metadata(conn, self.uuids)
        self.assertEqual(
            1, len([s for s in statements if aggregate in s.lower()]))

    def test_a_separator_in_a_value_reads_that_instance_rows(self):
        # The packed form (MySQL) cannot carry AWKWARD_VALUES' control
        # characters: that instance's rows are read, the others' are not,
        # and later batches still aggregate.
        expected = self.rows()
        statements = []

        def record(conn, cursor, statement, params, *args):
            statements.append((statement, params))
        sa.event.listen(self.cell1.engine, 'before_cursor_execute', record)
        self.addCleanup(sa.event.remove, self.cell1.engine,
                        'before_cursor_execute', record)
        with self.cell1.engine.connect() as conn:
            for _ in range(2):
                self.assertEqual(expected, cell_queries.get_system_metadata(
                    conn, self.uuids))
        reads = [params for statement, params in statements
                 if 'group_concat' not in statement.lower()
                 and 'json_group_array' not in statement.lower()
                 and 'instance_system_metadata' in statement]
        if self.db.name == 'MySQL':
            self.assertEqual(2, len(reads), statements)
            for params in reads:
                self.assertEqual([self.uuids[0]], list(params.values()))
        else:
            self.assertEqual([], reads)
        self.assertEqual(2, len([s for s, _ in statements if 'group' in s]))


class PageReadsTest(deployment_case.DeploymentTestCase):
    """A page's rows read by its range of ids are those read by uuid."""

    def add(self, **kwargs):
        return self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                            **kwargs)

    def test_page_range_reads_the_page_live_instances_rows(self):
        before = self.add()
        busy = [dict(status=status, migration_type='resize',
                     new_instance_type_id=number)
                for number, status in enumerate(
                    ['migrating', None, 'error', 'confirmed', 'failed'])]
        inside = [
            self.add(migrations=busy, system_metadata=AWKWARD_VALUES),
            self.add(deleted=True),
            self.add(system_metadata={}, extra=None),
            self.add(block_devices=[dict(boot_index=0,
                                         destination_type='volume')]),
        ]
        after = self.add()
        with self.cell1.engine.connect() as conn:
            ids = {row.uuid: row.id for row in conn.execute(sa.select(
                tables.instances.c.uuid, tables.instances.c.id))}
            page = cell_queries.Page(ids[before], ids[inside[-1]])
            live = [uuid for uuid in inside if uuid != inside[1]]
            for read in (cell_queries.get_instance_extras,
                         cell_queries.get_migrations,
                         cell_queries.get_system_metadata,
                         cell_queries.get_root_block_devices,
                         cell_queries.get_all_migrations,
                         cell_queries._system_metadata_rows):
                by_uuid = read(conn, live)
                self.assertEqual(by_uuid, read(conn, page), read.__name__)
                found = (by_uuid[0] if read is cell_queries.get_migrations
                         else by_uuid)
                self.assertNotIn(before, found)
                self.assertNotIn(after, found)
            in_progress, failed = cell_queries.get_migrations(conn, page)
            # Newest first, as by uuid.
            self.assertEqual([None, 'migrating'], [
                m['status'] for m in in_progress[inside[0]]])
            self.assertEqual({inside[0]: frozenset([2, 4])}, failed)
            self.assertEqual(AWKWARD_VALUES, {
                key: value for key, value, _ in
                cell_queries.get_system_metadata(conn, page)[inside[0]]})


class MigrationsTest(deployment_case.DeploymentTestCase):
    """Migrations in progress and failed resizes come from one query."""

    def add(self, *migrations):
        return self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, migrations=migrations)

    def test_in_progress_and_failed_resizes(self):
        statuses = [None, 'migrating', 'finished', 'pre-migrating',
                    'confirmed', 'reverted', 'error', 'failed', 'completed',
                    'cancelled', 'done']
        busy = self.add(*[dict(status=status, migration_type='migration')
                          for status in statuses])
        failed = self.add(
            dict(status='error', new_instance_type_id=7),
            dict(status='failed', new_instance_type_id=8),
            dict(status='error', migration_type='live-migration',
                 new_instance_type_id=9),
            dict(status='error', new_instance_type_id=7, deleted=1),
            dict(status='confirmed', new_instance_type_id=10))
        idle = self.add(dict(status='completed'))
        with self.cell1.engine.connect() as conn:
            in_progress, targets = cell_queries.get_migrations(
                conn, [busy, failed, idle])
            self.assertEqual(
                in_progress,
                cell_queries.get_migrations_in_progress(
                    conn, [busy, failed, idle]))
        self.assertEqual({busy}, set(in_progress))
        # Newest first, and exactly the statuses Nova still tracks.
        self.assertEqual(['pre-migrating', 'finished', 'migrating', None],
                         [m['status'] for m in in_progress[busy]])
        self.assertEqual(
            {'id', 'uuid', 'instance_uuid', 'status', 'migration_type'},
            set(in_progress[busy][0]))
        self.assertEqual({failed: frozenset([7, 8])}, targets)
