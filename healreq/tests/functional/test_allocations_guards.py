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

"""``allocations``: what it must never answer for an instance it did not read.

An instance named with --instance is checked, or reported as an error, or
the command exits 127; exit 4 never stands for an instance that was not
read. A signal that comes while the audit waits for a locked cell stops
it at once: nothing more is read, the final pass included.
"""

import json
import signal
import subprocess
import time
import uuid as uuidlib

import sqlalchemy as sa

from healreq.db import tables
from healreq.tests import cli
from healreq.tests.functional import allocations_case
from healreq.tests.functional import backends
from healreq.tests.functional import lock_probe

# The longest a command of the lock tests may take; the server's own
# waits would be far longer.
DEADLINE = 30


class InstanceOptionTest(allocations_case.AllocationsTestCase):
    """--instance finds the instance where its row is, as request-specs."""

    def map_to(self, uuid, cell_id):
        """Point the instance mapping of ``uuid`` at cell id ``cell_id``.

        Even at an id cell_mappings lacks: MySQL's foreign key check is
        off for that statement.
        """
        t = tables.instance_mappings
        with self.deployment.api_engine.begin() as conn:
            mysql = conn.dialect.name == 'mysql'
            if mysql:
                conn.execute(sa.text('SET foreign_key_checks = 0'))
            conn.execute(t.update().where(t.c.instance_uuid == uuid).values(
                cell_id=cell_id))
            if mysql:
                conn.execute(sa.text('SET foreign_key_checks = 1'))

    def mapping_only(self, cell_id):
        """The uuid of an instance mapping whose instance no cell holds."""
        uuid = str(uuidlib.uuid4())
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.instance_mappings.insert().values(
                instance_uuid=uuid, cell_id=cell_id, project_id='p'))
        return uuid

    def assert_mapped_elsewhere(self, uuid, message):
        result, doc = self.audit('--instance', uuid)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(2, doc['exit_code'])
        self.assertEqual([(uuid, self.cell1.uuid, 'error',
                           'instance-mapped-elsewhere', message)],
                         [(r['instance_uuid'], r['cell_uuid'], r['status'],
                           r['reason'], r['message'])
                          for r in doc['results']])
        self.assertEqual((1, 1), (doc['summary']['instances_checked'],
                                  doc['summary']['errors']))

    def assert_unknown(self, uuid, line):
        """Exit 127 with ``line`` alone on stderr, as request-specs."""
        for argv in (('allocations',), ('request-specs', '--dry-run')):
            result = self.run_cli(*(argv + ('--instance', uuid)))
            self.assertEqual((127, '', [line]),
                             (result.code, result.stdout,
                              result.stderr.splitlines()), argv)

    def test_mapped_to_another_cell(self):
        uuid = self.small(mapping_cell_id=self.cell2.id)
        message = 'the instance mapping points to cell id %d' % self.cell2.id
        self.assert_mapped_elsewhere(uuid, message)
        result, doc = self.heal_json('--dry-run', '--instance', uuid)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([('instance-mapped-elsewhere', message)],
                         [(r['reason'], r['detail'])
                          for r in doc['results']])

    def test_mapped_to_another_cell_text(self):
        uuid = self.small(mapping_cell_id=self.cell2.id)
        result = self.run_cli('allocations', '--instance', uuid)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ['ERROR %s (cell %s): instance-mapped-elsewhere'
             % (uuid, self.cell1.uuid),
             '  the instance mapping points to cell id %d' % self.cell2.id,
             'Checked 1 instance(s): 0 mismatched, 0 pending, 0 skipped, '
             '1 error(s).'], result.stdout.splitlines())

    def test_mapped_to_no_cell(self):
        uuid = self.small()
        self.map_to(uuid, None)
        self.assert_mapped_elsewhere(
            uuid, 'the instance mapping names no cell, but the instance is '
                  'in this one with no operation in flight')

    def test_mapped_to_a_cell_not_in_cell_mappings(self):
        uuid = self.small()
        self.map_to(uuid, 999)
        self.assert_mapped_elsewhere(
            uuid, 'the instance mapping points to cell id 999')

    def test_in_flight_and_mapped_elsewhere_is_judged(self):
        """Nova moves the mapping during some operations: skipped."""
        uuid = self.small(mapping_cell_id=self.cell2.id,
                          task_state='resize_finish')
        result, doc = self.audit('--instance', uuid)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, self.cell1.uuid, 'skipped',
                           'task-in-progress')],
                         [(r['instance_uuid'], r['cell_uuid'], r['status'],
                           r['reason']) for r in doc['results']])
        self.assertEqual(1, doc['summary']['instances_checked'])

    def test_mapped_but_in_no_cell(self):
        uuid = self.mapping_only(self.cell1.id)
        self.assert_unknown(
            uuid, 'nova-heal: error: instance %s is mapped to cell %s but '
                  'is not in its database' % (uuid, self.cell1.uuid))

    def test_mapped_to_no_cell_and_in_none(self):
        # Nova is still scheduling it: skipped, as request-specs skips it.
        uuid = self.mapping_only(None)
        result, document = self.audit('--instance', uuid)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, None, 'skipped', 'not-scheduled')], [
            (r['instance_uuid'], r['cell_uuid'], r['status'], r['reason'])
            for r in document['results']])
        result, document = self.heal_json('--instance', uuid)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, None, 'skipped', 'not-scheduled')], [
            (r['instance_uuid'], r['cell_uuid'], r['status'], r['reason'])
            for r in document['results']])

    def test_not_mapped(self):
        uuid = str(uuidlib.uuid4())
        self.assert_unknown(
            uuid, 'nova-heal: error: instance %s has no instance mapping; '
                  'check the UUID or run nova-manage cell_v2 verify_instance'
                  % uuid)


class LockedCellSignalTest(allocations_case.AllocationsTestCase):
    """A signal while a cell's tables are locked: no read after it.

    Only MySQL/MariaDB holds such locks; the command runs in a subprocess,
    so that a hang fails the test instead of stalling it.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def setUp(self):
        super().setUp()
        # Waited for well beyond the test's bound on the stop.
        self.config = self.write_config(
            'lock_wait_timeout = 10\n[placement_database]\nconnection = %s\n'
            % self.placement.engine.url.render_as_string(
                hide_password=False))
        self.small()
        # Held by no instance: the final pass would count it.
        self.placement.allocate(str(uuidlib.uuid4()), self.node1,
                                allocations_case.SMALL)

    def lock(self, table):
        conn = self.cell1.engine.connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('LOCK TABLES %s WRITE' % table))
        self.addCleanup(conn.execute, sa.text('UNLOCK TABLES'))

    def interrupted(self, table):
        """Audit, SIGINT once it waits for ``table``; (code, doc, took)."""
        self.lock(table)
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', self.config, 'allocations',
                             '--format', 'json'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        self.wait_for_lock_wait(process, '%%FROM %s%%' % table)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        out, err = process.communicate(timeout=DEADLINE)
        self.assertEqual(130, process.returncode, out + err)
        return json.loads(out), time.monotonic() - started

    def assert_stopped_at_once(self, doc, took):
        self.assertLess(took, 6)
        self.assertEqual(130, doc['exit_code'])
        # Neither waited out (the locked cell) nor read (the final pass).
        self.assertEqual([], doc['cell_errors'])
        self.assertEqual(0, doc['unattributed_consumers'])
        self.assertEqual(0, doc['summary']['instances_checked'])

    def test_signal_while_a_page_waits(self):
        self.assert_stopped_at_once(*self.interrupted('instances'))

    def test_signal_while_a_batch_waits(self):
        self.assert_stopped_at_once(*self.interrupted('instance_extra'))

    def wait_for_lock_wait(self, process, statement):
        """Return once the command waits in the cell1 ``statement``."""
        lock_probe.wait_for_statement(
            self, process, self.cell1.engine, statement,
            observer=self.deployment.api_engine)
