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

"""Recovery settles only dead runs; a settled intent stays settled.

On SQLite the store is the default file (its leases are lock files); on
MySQL it is a MySQL database named by ``audit_connection`` (its leases
are renewed rows, here renewed and expired within seconds:
cli.FAST_LEASES), so each kind of lease is exercised.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import fixtures
import sqlalchemy as sa

from healreq import api
from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.heal import decisions
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

APPLIED = audit_store.APPLIED
PENDING = audit_store.PENDING
REFUSED = audit_store.REFUSED


# A process that starts a run, records one intent, says so and waits.
HOLDER = cli.fast_leases_code().replace('; ', '\n') + '''
import sys, time
from healreq.audit import store
s = store.AuditStore(sys.argv[1])
run_id = s.start_run('heal', 'holder', {})
change_id = s.intent(run_id, sys.argv[2], None, int(sys.argv[3]), ['flavor'],
                     sys.argv[4], sys.argv[5])
print(run_id, change_id, flush=True)
time.sleep(600)
'''


class LeaseTestCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.leases = self.useFixture(cli.FastLeases())
        if self.db.name == 'MySQL':
            self.store_url = self.db.database_url('audit')
            self.config_file = self.write_config(
                'audit_connection = %s\n' % self.store_url)
        else:
            self.store_url = self.audit_url()
        self.uuid = self.add_drifted(self.cell1)
        self.before = self.deployment.spec_text(self.uuid)
        self.after = json.dumps(dep.request_spec(self.uuid, demo.M1_LARGE),
                                indent=1)
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            self.spec_id = conn.execute(sa.select(t.c.id).where(
                t.c.instance_uuid == self.uuid)).scalar()
        self.store = self.open_store()

    def open_store(self, store_class=audit_store.AuditStore):
        store = store_class(self.store_url)
        self.addCleanup(store.dispose)
        return store

    def record_intent(self, store):
        """Start a run on ``store`` and record one intent; their ids."""
        return self.record_intent_of_a_new_run(
            store, self.uuid, self.spec_id, self.before, self.after)

    def state(self, change_id):
        return self.store.change_state(change_id)


class RecoverTest(LeaseTestCase):

    def test_live_run_is_left_alone(self):
        holder = self.open_store()
        run_id, change_id = self.record_intent(holder)
        self.another_invocation()
        self.assertEqual(0, self.heal('--dry-run').code)
        self.assertEqual(PENDING, self.state(change_id)[0])

        # The live run writes and marks its change: the audit agrees.
        self.deployment.set_spec(self.uuid, self.after)
        self.assertTrue(holder.resolve(change_id, APPLIED))
        holder.finish_run(run_id, {}, 0)
        self.assertEqual((APPLIED, None), self.state(change_id))
        self.assertEqual(4, self.heal().code)

    def test_run_of_a_closed_store_is_settled(self):
        holder = self.open_store()
        _, change_id = self.record_intent(holder)
        holder.dispose()
        self.another_invocation()
        self.assertEqual((REFUSED, 'recovered: interrupted before the write'),
                         self.state(change_id))
        self.assertEqual(self.before, self.deployment.spec_text(self.uuid))

    def test_a_dry_run_settles_nothing(self):
        # Settling is the work of a run that writes, under its own lease:
        # dry runs, revert --dry-run and apply --dry-run leave even a dead
        # run's intent as it is.
        holder = self.open_store()
        run_id, change_id = self.record_intent(holder)
        holder.dispose()
        self.leases.expired()
        self.assertEqual(0, self.heal('--dry-run').code)
        result = self.run_cli('revert', '--dry-run', run_id)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual((PENDING, None), self.state(change_id))
        self.another_invocation()
        self.assertEqual(REFUSED, self.state(change_id)[0])

    def test_run_that_raised_is_settled(self):
        """A run ended by an exception releases its lease on the way out."""
        class Crash(BaseException):
            pass

        class CrashAfterWrite(audit_store.AuditStore):
            def resolve(self, change_id, state, detail=None, spec_id=None):
                raise Crash()

        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        crashing = self.open_store(CrashAfterWrite)
        self.assertRaises(Crash, api.run_request_specs, conf,
                          api.Options(settings=decisions.Settings(
                              skip_updated_within=60)), audit=crashing)
        self.another_invocation()
        change, = [c for run in self.store.list_runs(10)
                   for c in self.store.changes(run['id'])]
        self.assertEqual(APPLIED, change['state'])
        self.assertEqual(change['after_text'],
                         self.deployment.spec_text(self.uuid))

    def test_run_of_a_killed_process(self):
        process = cli.spawn(
            [sys.executable, '-c', HOLDER, self.store_url, self.uuid,
             str(self.spec_id), self.before, self.after],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.addCleanup(process.wait)
        self.addCleanup(process.kill)
        line = process.stdout.readline().decode()
        self.assertTrue(line, 'the holder process ended early')
        run_id, change_id = line.split()
        # Alive in another process: untouched, also by this process.
        self.another_invocation()
        self.assertEqual([], self.store.recover(self.deployment.api_engine))
        self.assertEqual(PENDING, self.state(int(change_id))[0])
        self.deployment.set_spec(self.uuid, self.after)

        process.send_signal(signal.SIGKILL)
        process.wait()
        self.leases.expired()
        self.another_invocation()
        self.assertEqual((APPLIED, 'recovered: the row holds the new value'),
                         self.state(int(change_id)))
        run = self.store.get_run(run_id)
        self.assertIsNone(run['ended_at'])
        self.assertFalse([name for name in os.listdir(self.state_path)
                          if name.endswith('.lock')])

    def test_finished_run_releases_its_lease(self):
        holder = self.open_store()
        run_id, change_id = self.record_intent(holder)
        holder.finish_run(run_id, {}, 0)
        self.assertFalse([name for name in os.listdir(self.state_path)
                          if name.endswith('.lock')])
        self.another_invocation()
        self.assertEqual(REFUSED, self.state(change_id)[0])

    def test_a_lease_is_a_renewed_row_on_mysql_only(self):
        threads = threading.active_count()
        run_id = self.store.start_run('heal', 'nova-heal request-specs', {})
        self.addCleanup(self.store.release, run_id)
        with self.store.engine.connect() as conn:
            rows = conn.execute(sa.select(
                audit_store.schema.leases.c.name)).scalars().all()
        if self.db.name == 'MySQL':
            # Renewed by a thread of the run; no connection holds it.
            self.assertEqual(['run-%s' % run_id], rows)
            self.assertEqual(threads + 1, threading.active_count())
        else:
            # A lock file; a run without a thread forks its reader.
            self.assertEqual([], rows)
            self.assertEqual(threads, threading.active_count())


class ResolveTest(LeaseTestCase):

    def test_settled_intent_is_not_overwritten(self):
        run_id, change_id = self.record_intent(self.store)
        self.assertTrue(self.store.resolve(change_id, APPLIED))
        self.assertFalse(self.store.resolve(change_id, REFUSED, 'late'))
        self.assertEqual((APPLIED, None), self.state(change_id))

    def test_write_settled_elsewhere_is_undone(self):
        """Settled as refused before the write: the row is put back.

        As a recovery that did not know the run was alive (an older
        release) would: it read the row before the write and marked the
        intent refused.
        """
        other = self.open_store()

        class SettledByOther(audit_store.AuditStore):
            def intent(self, *args, **kwargs):
                change_id = super().intent(*args, **kwargs)
                other.resolve(change_id, REFUSED, 'settled elsewhere')
                return change_id

        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        result = api.run_request_specs(
            conf, api.Options(settings=decisions.Settings(
                skip_updated_within=60)),
            audit=self.open_store(SettledByOther))
        self.assertEqual(3, result.exit_code)
        finding, = result.report.findings
        self.assertEqual(('conflict', 'spec-changed'),
                         (finding.status.value, finding.reason))
        self.assertIn('settled as refused by another invocation',
                      finding.detail)
        change, = self.store.changes(result.run_id)
        self.assertEqual((REFUSED, 'settled elsewhere'),
                         (change['state'], change['detail']))
        self.assertEqual(self.before, self.deployment.spec_text(self.uuid))


class LockFileTest(LeaseTestCase):
    """A run killed outright leaves its lock file; the next run removes it.

    Only a store in an SQLite file has lock files.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'SQLite']

    def lock_files(self):
        return sorted(name for name in os.listdir(self.state_path)
                      if name.endswith('.lock'))

    def test_lock_file_of_a_killed_run_without_intents(self):
        for _ in range(5):
            self.add_drifted(self.cell2)
        # A dry run records no intent: nothing is pending when it dies.
        # It is held after its first batch until it is killed.
        gate = self.useFixture(cli.Gate())
        process = cli.spawn(
            gate.argv() + ['--config-file', self.config_file,
                           'request-specs', '--dry-run', '--batch-size', '1'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        gate.reach(1, process)
        run_id = self.store.list_runs(1)[0]['id']
        lock = 'audit.sqlite.run-%s.lock' % run_id
        self.assertEqual([lock], self.lock_files())

        # Alive: its lock file is left alone.
        self.another_invocation()
        self.assertEqual([lock], self.lock_files())

        process.send_signal(signal.SIGKILL)
        process.wait()
        self.assertEqual([lock], self.lock_files())
        self.assertEqual([], [c for run in self.store.list_runs(10)
                              for c in self.store.changes(run['id'])])
        self.another_invocation()
        self.assertEqual([], self.lock_files())
        self.assertIsNone(self.store.get_run(run_id)['ended_at'])


class RevertOfALiveRunTest(LeaseTestCase):
    """A run still running is never reverted in part.

    The run is a real heal in another process, held after its first
    batch, so its lease (a lock file or a named lock) is really held.
    """

    def setUp(self):
        super().setUp()
        for _ in range(3):
            self.add_drifted(self.cell2)
        self.originals = self.all_spec_texts()

    def start_heal(self):
        """A heal held after its first batch; the process, gate, run id."""
        gate = self.useFixture(cli.Gate(fast_leases=True))
        process = cli.spawn(
            gate.argv() + ['--config-file', self.config_file,
                           'request-specs', '--batch-size', '1'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        gate.reach(1, process)
        run_id = self.store.list_runs(1)[0]['id']
        self.assertEqual(1, len(self.store.changes(run_id, state=APPLIED)))
        return process, gate, run_id

    def finish(self, process, gate):
        gate.open()
        self.assertEqual(0, process.wait(120))

    def test_live_run_is_refused(self):
        process, gate, run_id = self.start_heal()
        runs = len(self.store.list_runs(100))
        written = self.all_spec_texts()

        result = self.run_cli('revert', run_id)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(['nova-heal: error: run %s is still running (its '
                          'lease is held); revert it once it has ended, or '
                          'pass --wait' % run_id],
                         result.stderr.splitlines())
        result, document = self.run_json('revert', run_id, '--dry-run')
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(3, document['error']['exit_code'])
        self.assertEqual(written, self.all_spec_texts())
        self.assertEqual(runs, len(self.store.list_runs(100)))

        # Once the run has ended, all it did is reverted.
        self.finish(process, gate)
        self.assertEqual(4, len(self.store.changes(run_id, state=APPLIED)))
        result = self.run_cli('revert', run_id)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def start_waiting_revert(self, run_id):
        """``revert --wait RUN_ID`` in a process, once it waits."""
        waiter = cli.spawn(
            [sys.executable, '-m', 'healreq', '--config-file',
             self.config_file, 'revert', '--wait', run_id, '--format',
             'json'], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: waiter.poll() is None and waiter.kill())
        line = waiter.stderr.readline().decode()
        self.assertIn('Run %s is still running; waiting for it to end'
                      % run_id, line)
        return waiter

    def test_wait_reverts_the_whole_run(self):
        process, gate, run_id = self.start_heal()
        waiter = self.start_waiting_revert(run_id)
        self.assertIsNone(waiter.poll())
        self.finish(process, gate)
        stdout, stderr = waiter.communicate(timeout=120)
        self.assertEqual(0, waiter.returncode, stdout + stderr)
        document = json.loads(stdout)
        self.assertEqual(4, document['summary']['healed'])
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_wait_is_interruptible(self):
        process, gate, run_id = self.start_heal()
        runs = len(self.store.list_runs(100))
        waiter = self.start_waiting_revert(run_id)
        waiter.send_signal(signal.SIGTERM)
        stdout, stderr = waiter.communicate(timeout=120)
        self.assertEqual(143, waiter.returncode, stdout + stderr)
        self.assertEqual(runs, len(self.store.list_runs(100)))
        self.finish(process, gate)
        self.assertNotEqual(self.originals, self.all_spec_texts())

    def test_killed_run_is_reverted(self):
        """A run that died (lease free, no exit code) is revertable."""
        process, gate, run_id = self.start_heal()
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.leases.expired()
        self.assertIsNone(self.store.get_run(run_id)['exit_code'])
        result = self.run_cli('revert', run_id)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())


class LeaseLostTest(LeaseTestCase):
    """A run whose lease row may be judged free writes nothing more.

    On a MySQL store only: the file and in-process leases are held by
    this process for as long as it lives.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def setUp(self):
        super().setUp()
        self.others = [self.add_drifted(self.cell1) for _ in range(2)]
        self.originals = self.all_spec_texts()
        self.conf = api.load_config([self.config_file])
        self.addCleanup(self.conf.reset)

    def heal_cut_off_after_the_first_batch(self, cut_off):
        """A heal whose lease ``cut_off(store, run_id)`` after one batch."""
        store = self.open_store()

        def after_a_batch():
            if not cut_off.done:
                run_id, = store._leases
                cut_off(store, run_id)
                cut_off.done = True
        cut_off.done = False
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.run.budget.between_batches', after_a_batch))
        return api.run_request_specs(
            self.conf, api.Options.from_conf(self.conf, batch_size=1),
            audit=store)

    def assert_stopped_after_one_write(self, result, reason):
        self.assertEqual(2, result.exit_code)
        problem, = result.problems
        self.assertIn('run %s stopped before its next write: its lease row '
                      'run-%s %s' % (result.run_id, result.run_id, reason),
                      problem)
        self.assertEqual(1, result.report.summary()['healed'])
        written = [u for u, text in self.all_spec_texts().items()
                   if text != self.originals[u]]
        self.assertEqual(1, len(written), written)
        changes = self.store.changes(result.run_id)
        self.assertEqual([(written[0], APPLIED)], [
            (c['instance_uuid'], c['state']) for c in changes])

    def test_renewals_that_fail_stop_the_next_write(self):
        def stop_renewing(store, run_id):
            # The store no longer answers the renewals: after
            # WRITABLE_FOR seconds the run may be judged dead soon.
            store._leases[run_id]._renewer.stop()
            time.sleep(cli.FAST_LEASES['WRITABLE_FOR'] * 1.5)
        result = self.heal_cut_off_after_the_first_batch(stop_renewing)
        self.assert_stopped_after_one_write(result, 'was last renewed')

    def test_a_row_claimed_by_another_invocation_stops_the_next_write(self):
        def judged_dead(store, run_id):
            # Another invocation found the row expired and deleted it;
            # the run's next renewal finds it gone.
            with store.engine.begin() as conn:
                conn.execute(sa.text("DELETE FROM leases WHERE name = "
                                     "'run-%s'" % run_id))
            time.sleep(cli.FAST_LEASES['RENEW_INTERVAL'] * 3)
        result = self.heal_cut_off_after_the_first_batch(judged_dead)
        self.assert_stopped_after_one_write(result, 'was deleted')
