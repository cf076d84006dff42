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

"""Locks held by other sessions: waited for briefly, then reported.

A request spec row locked by another session is someone else writing it:
a conflict after one short wait ([healreq]/lock_wait_timeout), never a
retry loop. A cell whose tables are locked is reported as locked. Only
MySQL/MariaDB holds such locks, so these run on MySQL; the command runs
in a subprocess, so that a hang fails the test instead of stalling it.
"""

import json
import os
import signal
import subprocess
import time

import sqlalchemy as sa

from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends
from healreq.tests.functional import lock_probe

# The longest a command of these tests may take; the server's own waits
# (50 s per row, a year per table) would be far longer.
DEADLINE = 30


class LockWaitTest(audit_case.AuditTestCase):

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def setUp(self):
        super().setUp()
        self.config = self.write_config('lock_wait_timeout = 1\n')
        self.env = dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path)

    def hold(self, engine, *statements):
        """Run ``statements`` in a session that keeps its locks."""
        conn = engine.connect()
        self.addCleanup(conn.close)
        transaction = conn.begin()
        self.addCleanup(transaction.rollback)
        for statement in statements:
            conn.execute(sa.text(statement))
        return conn

    def lock_spec_row(self, uuid):
        return self.hold(self.deployment.api_engine,
                         "SELECT spec FROM request_specs WHERE "
                         "instance_uuid = '%s' FOR UPDATE" % uuid)

    def start(self, *argv, config=None):
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', config or self.config]
            + list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=self.env)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process

    def finish(self, process):
        started = time.monotonic()
        out, err = process.communicate(timeout=DEADLINE)
        return process.returncode, out.decode(), err.decode(), (
            time.monotonic() - started)

    def test_locked_row_is_a_conflict_after_one_short_wait(self):
        locked = self.add_drifted(self.cell1)
        free = self.add_drifted(self.cell2)
        before = self.deployment.spec_text(locked)
        self.lock_spec_row(locked)
        code, out, err, took = self.finish(self.start(
            'request-specs', '--format', 'json'))
        self.assertEqual(3, code, out + err)
        document = json.loads(out)
        results = {r['instance_uuid']: (r['status'], r['reason'])
                   for r in document['results']}
        self.assertEqual({locked: ('conflict', 'spec-locked'),
                          free: ('healed', 'spec-drift')}, results)
        self.assertLess(took, 15)
        changes = self.changes_by_instance(document['run_id'])
        self.assertEqual(('refused', 'applied'),
                         (changes[locked]['state'], changes[free]['state']))
        self.assertIn('lock_wait_timeout', changes[locked]['detail'])
        self.assertEqual(before, self.deployment.spec_text(locked))

    def test_locked_mapping_of_a_missing_spec_is_named(self):
        # --create-missing inserts the row only while the instance's
        # mapping row is locked for it: another session holding that
        # lock is named as what it is.
        missing = self.add_consistent(self.cell1, spec=None)
        self.hold(self.deployment.api_engine,
                  "SELECT id FROM instance_mappings WHERE instance_uuid = "
                  "'%s' FOR UPDATE" % missing)
        code, out, err, took = self.finish(self.start(
            'request-specs', '--create-missing', '--format', 'json'))
        self.assertEqual(3, code, out + err)
        result, = json.loads(out)['results']
        self.assertEqual((missing, 'conflict', 'spec-locked'), (
            result['instance_uuid'], result['status'], result['reason']))
        self.assertIn("instance's instance_mappings row", result['detail'])
        self.assertNotIn('request_specs row', result['detail'])
        self.assertIsNone(self.deployment.spec_text(missing))
        self.assertLess(took, 15)

    def test_locked_cell_tables_are_reported_locked(self):
        locked = self.add_drifted(self.cell1)
        free = self.add_drifted(self.cell2)
        conn = self.cell1.engine.connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('LOCK TABLES instances WRITE'))
        self.addCleanup(conn.execute, sa.text('UNLOCK TABLES'))
        before = self.deployment.spec_text(locked)
        code, out, err, took = self.finish(self.start(
            'request-specs', '--format', 'json'))
        self.assertEqual(2, code, out + err)
        document = json.loads(out)
        cells = {c['name']: c['error'] for c in document['cells']}
        self.assertIn('cell database locked', cells['cell1'])
        self.assertIsNone(cells['cell2'])
        self.assertEqual([(free, 'healed')], [
            (r['instance_uuid'], r['status']) for r in document['results']])
        self.assertEqual(before, self.deployment.spec_text(locked))
        self.assertLess(took, 15)

    def test_first_sigint_is_honoured_within_seconds(self):
        config = self.write_config('lock_wait_timeout = 3\n')
        # More locked rows than the run can wait through in the time the
        # test allows: the SIGINT lands mid-walk even on a slow machine.
        locked = [self.add_drifted(self.cell1) for _ in range(8)]
        for uuid in locked:
            self.lock_spec_row(uuid)
        process = self.start('request-specs', '--batch-size', '1',
                             config=config)
        self.wait_for_lock_wait(process)
        process.send_signal(signal.SIGINT)
        code, out, err, took = self.finish(process)
        self.assertEqual(130, code, out + err)
        self.assertLess(took, 10)
        self.assertIn('Exit code 130', out)
        self.assertIn('spec-locked', out)

    def test_first_sigint_is_honoured_within_the_longest_lock_wait(self):
        # A write waiting for a locked row ends when its lock wait does:
        # the longest one allowed (10 s) bounds the wait for the signal.
        config = self.write_config('lock_wait_timeout = 10\n')
        self.lock_spec_row(self.add_drifted(self.cell1))
        process = self.start('request-specs', config=config)
        self.wait_for_lock_wait(process)
        process.send_signal(signal.SIGINT)
        code, out, err, took = self.finish(process)
        self.assertEqual(130, code, out + err)
        self.assertLess(took, 13)
        self.assertIn('Exit code 130', out)

    def test_first_sigint_is_honoured_under_locked_tables(self):
        # The cell's reads may wait as long as the server lets them; the
        # signal must not wait for them.
        config = self.write_config('lock_wait_timeout = 10\n')
        self.add_drifted(self.cell1)
        conn = self.cell1.engine.connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('LOCK TABLES instances WRITE'))
        self.addCleanup(conn.execute, sa.text('UNLOCK TABLES'))
        process = self.start('request-specs', config=config)
        self.wait_for_lock_wait(process, '%FROM instances%',
                                self.cell1.engine)
        process.send_signal(signal.SIGINT)
        code, out, err, took = self.finish(process)
        self.assertEqual(130, code, out + err)
        self.assertLess(took, 6)
        self.assertIn('Exit code 130', out)

    def wait_for_lock_wait(self, process,
                           statement='UPDATE request_specs%.instance_uuid%',
                           engine=None):
        """Return once the command waits for a lock in ``statement``.

        In the database of ``engine`` (default: the API database's).
        """
        lock_probe.wait_for_statement(
            self, process, engine or self.deployment.api_engine, statement,
            observer=self.deployment.api_engine)
