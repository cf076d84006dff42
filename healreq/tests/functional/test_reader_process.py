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

"""A cell's pages, read in a process of its own."""

import fcntl
import os
import signal
import threading
import time
import weakref

import fixtures
import sqlalchemy as sa

from healreq import exception
from healreq.heal import field_checks
from healreq.run import reader_process as reader
from healreq.run import records
from healreq.tests.functional import backends
from healreq.tests.functional import deployment_case


class Stop(Exception):
    """What the tests' stop checks raise."""


def _no_stop():
    pass


class ReaderCase(deployment_case.DeploymentTestCase):

    def spec(self, cell, batch_size=2, **values):
        cell_row = {'id': cell.id, 'uuid': cell.uuid, 'name': cell.name}
        fields = dict(
            cell=cell_row, cell_url=cell.url, api_url=self.cells.api_url(),
            batch_size=batch_size, fields=field_checks.FIELD_NAMES,
            lock_wait_timeout=5)
        fields.update(values)
        return reader.ReadSpec(**fields)


class CellReaderTest(ReaderCase):

    def test_pages_in_order_as_read_in_process(self):
        for _ in range(5):
            self.add_drifted(self.cell1)
            self.add_consistent(self.cell2)
        with reader.CellReader(self.spec(self.cell1), _no_stop) as pages:
            read = list(pages)
        self.assertEqual([2, 2, 1], [len(page.instances) for page in read])
        with self.cell1.engine.connect() as conn:
            expected = [records.read_page(
                conn, self.deployment.api_engine, page.instances,
                field_checks.FIELD_NAMES) for page in read]
        self.assertEqual(expected, read)
        ids = [i['id'] for page in read for i in page.instances]
        self.assertEqual(sorted(ids), ids)

    def test_an_unreachable_cell_is_a_cell_error(self):
        self.add_drifted(self.cell1)
        spec = self.spec(self.cell1, cell_url=(
            'mysql+pymysql://nova:S3cretPw@127.0.0.1:1/nova'))
        with reader.CellReader(spec, _no_stop) as pages:
            error = self.assertRaises(exception.CellDatabaseError, list,
                                      pages)
        self.assertIn('cell database unreachable', str(error))
        self.assertNotIn('S3cretPw', str(error))
        self.assertEqual('cell %s' % self.cell1.uuid, error.component)

    def test_api_error_is_the_api_databases(self):
        self.add_drifted(self.cell1)
        spec = self.spec(self.cell1, api_url=(
            'mysql+pymysql://nova:S3cretPw@127.0.0.1:1/nova_api'))
        with reader.CellReader(spec, _no_stop) as pages:
            error = self.assertRaises(exception.ApiDatabaseError, list,
                                      pages)
        self.assertNotIn('S3cretPw', str(error))

    def parent_of_child(self, manager):
        with open('/proc/%d/stat' % manager._process.pid) as handle:
            return int(handle.read().rsplit(')', 1)[1].split()[1])

    def test_a_single_threaded_walk_forks_the_child(self):
        self.add_drifted(self.cell1)
        with reader.CellReader(self.spec(self.cell1), _no_stop) as pages:
            parent = self.parent_of_child(pages)
            self.assertEqual(1, len([page for page in pages]))
        self.assertEqual(os.getpid(), parent)

    def test_a_threaded_walk_never_forks_itself(self):
        # A fork would copy the locks the other thread holds: the child
        # comes from the single-threaded fork server instead.
        self.add_drifted(self.cell1)
        release = threading.Event()
        other = threading.Thread(target=release.wait)
        other.start()
        self.addCleanup(other.join)
        self.addCleanup(release.set)
        with reader.CellReader(self.spec(self.cell1), _no_stop) as pages:
            parent = self.parent_of_child(pages)
            read = list(pages)
        self.assertNotEqual(os.getpid(), parent)
        self.assertEqual([1], [len(page.instances) for page in read])

    def test_an_empty_cell_ends_at_once(self):
        self.add_drifted(self.cell2)
        with reader.CellReader(self.spec(self.cell1), _no_stop) as pages:
            self.assertEqual([], list(pages))

    def test_an_error_of_the_walk_ends_the_child(self):
        for _ in range(6):
            self.add_drifted(self.cell1)
        manager = reader.CellReader(self.spec(self.cell1, batch_size=1),
                                    _no_stop)

        def walk():
            with manager as pages:
                for _ in pages:
                    raise Stop()
        self.assertRaises(Stop, walk)
        self.assertFalse(manager._process.is_alive())

    def test_leaving_early_ends_the_child(self):
        for _ in range(6):
            self.add_drifted(self.cell1)
        manager = reader.CellReader(self.spec(self.cell1, batch_size=1),
                                    _no_stop)
        with manager as pages:
            next(iter(pages))
        self.assertFalse(manager._process.is_alive())


class CellsReaderTest(ReaderCase):
    """One child reads the cells of a walk, one after the other."""

    def test_each_cells_pages_as_read_in_process(self):
        for _ in range(3):
            self.add_drifted(self.cell1)
            self.add_consistent(self.cell2)
        specs = [self.spec(self.cell1), self.spec(self.cell2)]
        with reader.CellsReader(specs, _no_stop) as cells:
            read = [list(cells.pages(cell.uuid))
                    for cell in (self.cell1, self.cell2)]
        for cell, pages in zip((self.cell1, self.cell2), read):
            self.assertEqual([2, 1], [len(page.instances) for page in pages])
            with cell.engine.connect() as conn:
                self.assertEqual([records.read_page(
                    conn, self.deployment.api_engine, page.instances,
                    field_checks.FIELD_NAMES) for page in pages], pages)

    def test_a_cell_error_fails_that_cell_only(self):
        self.add_drifted(self.cell1)
        second = self.add_drifted(self.cell2)
        specs = [self.spec(self.cell1, cell_url=(
            'mysql+pymysql://nova:S3cretPw@127.0.0.1:1/nova')),
            self.spec(self.cell2)]
        with reader.CellsReader(specs, _no_stop) as cells:
            error = self.assertRaises(exception.CellDatabaseError, list,
                                      cells.pages(self.cell1.uuid))
            read = list(cells.pages(self.cell2.uuid))
        self.assertEqual('cell %s' % self.cell1.uuid, error.component)
        self.assertIn('cell database unreachable', str(error))
        self.assertEqual([[second]], [[i['uuid'] for i in page.instances]
                                      for page in read])

    def test_a_cell_passed_over_is_dropped(self):
        # As when the walk fails a cell before it reads its pages.
        for _ in range(5):
            self.add_drifted(self.cell1)
        second = self.add_drifted(self.cell2)
        specs = [self.spec(self.cell1, batch_size=1), self.spec(self.cell2)]
        with reader.CellsReader(specs, _no_stop) as cells:
            first = cells.pages(self.cell1.uuid)
            next(first)
            read = list(cells.pages(self.cell2.uuid))
        self.assertEqual([[second]], [[i['uuid'] for i in page.instances]
                                      for page in read])

    def test_an_api_error_ends_every_cell(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        bad_api = 'mysql+pymysql://nova:S3cretPw@127.0.0.1:1/nova_api'
        specs = [self.spec(cell, api_url=bad_api)
                 for cell in (self.cell1, self.cell2)]
        with reader.CellsReader(specs, _no_stop) as cells:
            for cell in (self.cell1, self.cell2):
                error = self.assertRaises(exception.ApiDatabaseError, list,
                                          cells.pages(cell.uuid))
                self.assertNotIn('S3cretPw', str(error))

    def test_a_child_gone_fails_each_cell(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        specs = [self.spec(self.cell1), self.spec(self.cell2)]
        with reader.CellsReader(specs, _no_stop) as cells:
            # Killed long before it could have connected to a database.
            cells._process.kill()
            for cell in (self.cell1, self.cell2):
                error = self.assertRaises(exception.CellDatabaseError, list,
                                          cells.pages(cell.uuid))
                self.assertEqual('cell %s' % cell.uuid, error.component)
                self.assertIn('ended unexpectedly', str(error))


class BlockedReadTest(deployment_case.DeploymentTestCase):
    """A read waiting for a table another session holds locked."""

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def setUp(self):
        super().setUp()
        self.add_drifted(self.cell1)
        conn = self.cell1.engine.connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('LOCK TABLES instances WRITE'))
        self.addCleanup(conn.execute, sa.text('UNLOCK TABLES'))

    def reader(self, stop_check):
        return reader.CellReader(reader.ReadSpec(
            cell={'id': self.cell1.id, 'uuid': self.cell1.uuid,
                  'name': self.cell1.name},
            cell_url=self.cell1.url, api_url=self.cells.api_url(),
            batch_size=2, fields=field_checks.FIELD_NAMES,
            lock_wait_timeout=60), stop_check)

    def read_waits(self):
        """Whether the child's page query waits for the lock."""
        with self.deployment.api_engine.connect() as conn:
            return bool(conn.execute(sa.text(
                "SELECT COUNT(*) FROM information_schema.processlist "
                "WHERE info LIKE '%FROM instances%' AND info NOT LIKE "
                "'%processlist%'")).scalar())

    def stop_once_the_read_waits(self):
        if self.read_waits():
            raise Stop()

    def test_the_walk_stops_at_once_and_the_child_ends(self):
        started = time.monotonic()
        manager = self.reader(self.stop_once_the_read_waits)

        def consume():
            with manager as pages:
                list(pages)
        self.assertRaises(Stop, consume)
        self.assertLess(time.monotonic() - started, 30)
        self.assertFalse(manager._process.is_alive())

    def test_the_child_ignores_the_terminals_signals(self):
        manager = self.reader(self.stop_once_the_read_waits)
        with manager as pages:
            self.assertRaises(Stop, list, pages)
            # The kernel drops a signal a process ignores: a Ctrl-C or a
            # hang-up of the terminal leaves the child to the walk.
            with open('/proc/%d/status' % manager._process.pid) as handle:
                ignored, = [int(line.split()[1], 16) for line in handle
                            if line.startswith('SigIgn:')]
            for number in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
                self.assertTrue(ignored & (1 << (number - 1)), number)
        self.assertFalse(manager._process.is_alive())

    def test_the_child_holds_none_of_the_walks_descriptors(self):
        # Such as the audit store's lease: its lock must end with the walk.
        path = self.useFixture(fixtures.TempDir()).join('lease.lock')
        with open(path, 'w') as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            manager = self.reader(self.stop_once_the_read_waits)
            with manager as pages:
                self.assertRaises(Stop, list, pages)
                directory = '/proc/%d/fd' % manager._process.pid
                opened = {os.readlink(os.path.join(directory, name))
                          for name in os.listdir(directory)}
            self.assertNotIn(path, opened)
            self.assertIn(os.readlink('/proc/self/fd/%d' % held.fileno()),
                          [path])


class WalkReadersTest(deployment_case.DeploymentTestCase):
    """Which children read a walk's cells."""

    def setUp(self):
        super().setUp()
        self.readers = []
        original = reader.CellsReader.__enter__

        def recording(manager):
            self.readers.append([spec.cell['uuid'] for spec in
                                 manager._specs])
            return original(manager)
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.run.reader_process.CellsReader.__enter__', recording))

    def drifted(self, report):
        return {cell.name: cell.drifted for cell in report.cells}

    def test_a_walk_reads_its_cells_in_one_child(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        report = self.run_in_process(dry_run=True, batch_size=1)
        self.assertEqual([[self.cell1.uuid, self.cell2.uuid]], self.readers)
        self.assertEqual({'cell1': 1, 'cell2': 1}, self.drifted(report))

    def test_a_cell_with_an_unusable_url_is_left_to_its_walk(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        self.deployment.add_cell('bad-template', '{scheme}://{nonsense}',
                                 create_schema=False)
        report = self.run_in_process(dry_run=True)
        self.assertEqual([[self.cell1.uuid, self.cell2.uuid]], self.readers)
        self.assertEqual({'cell1': 1, 'cell2': 1, 'bad-template': 0},
                         self.drifted(report))
        errors = {cell.name: cell.error for cell in report.cells}
        self.assertIn('invalid cell database URL', errors['bad-template'])

    def test_parallel_workers_read_a_cell_each(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        report = self.run_in_process(dry_run=True, workers=2)
        self.assertEqual(sorted([[self.cell1.uuid], [self.cell2.uuid]]),
                         sorted(self.readers))
        self.assertEqual({'cell1': 1, 'cell2': 1}, self.drifted(report))


class WalkMemoryTest(deployment_case.DeploymentTestCase):
    """A walk holds one batch of records at a time."""

    def test_a_batch_is_let_go_before_the_next_is_assembled(self):
        for _ in range(3):
            self.add_drifted(self.cell1)
            self.add_consistent(self.cell1)
        earlier = []  # weak references to the records of earlier batches
        still_held = []
        original = records.assemble_records

        def assembling(api_engine, page, checked_fields, *args):
            still_held.append(sum(ref() is not None for ref in earlier))
            batch = original(api_engine, page, checked_fields, *args)
            earlier.extend(weakref.ref(record) for record in batch)
            return batch
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.run.records.assemble_records', assembling))
        report = self.run_in_process(dry_run=True, batch_size=2)
        self.assertEqual(6, report.summary()['instances_checked'])
        self.assertEqual([0, 0, 0], still_held)
        self.assertEqual(6, len(earlier))
