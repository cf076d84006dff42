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

"""A crash at any point leaves the audit and Nova's database agreeing.

Failures are injected at the real seams (right after an intent is
recorded, before the spec write; right after the write, before the
change is marked) by subclassing the audit store that the run API
writes through; the databases are real. The last tests kill
``nova-heal request-specs`` with SIGKILL, as a real process, at each of
those seams and in the middle of a heal, held there by database locks.
"""

import json
import os
import signal
import subprocess
import time

import fixtures
import sqlalchemy as sa

from healreq import api
from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq.heal import decisions
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

APPLIED = audit_store.APPLIED
PENDING = audit_store.PENDING
REFUSED = audit_store.REFUSED
UNKNOWN = audit_store.UNKNOWN


class Interrupted(BaseException):
    """A crash: like KeyboardInterrupt, nothing in healreq catches it."""


class InterruptedBeforeWrite(audit_store.AuditStore):
    """Dies on its first spec write, after the intent was recorded."""

    def intent(self, run_id, instance_uuid, *args, **kwargs):
        super().intent(run_id, instance_uuid, *args, **kwargs)
        raise Interrupted('before writing %s' % instance_uuid)


class InterruptedBeforeMark(audit_store.AuditStore):
    """Dies marking its first change, after the spec was written."""

    def resolve(self, change_id, state, detail=None, spec_id=None):
        raise Interrupted('before marking change %s %s' % (change_id, state))


class InjectedCrashTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        # Created in this order, so processed in this order (by id).
        self.first = self.add_drifted(self.cell1)
        self.second = self.add_drifted(self.cell1)
        self.add_consistent(self.cell2)
        self.originals = self.all_spec_texts()
        self.conf = api.load_config([self.config_file])
        self.addCleanup(self.conf.reset)
        self.store = self.open_store(audit_store.AuditStore)

    def open_store(self, store_class):
        """A store on the command's audit file, as the command opens it."""
        store = store_class(self.audit_url())
        self.addCleanup(store.dispose)
        return store

    def crash_heal(self, store_class):
        """Run a heal through the API that crashes; return its run id."""
        store = self.open_store(store_class)
        runs = set(self.audit_runs())
        self.assertRaises(Interrupted, api.run_request_specs, self.conf,
                          api.Options(settings=decisions.Settings(
                              skip_updated_within=60)), audit=store)
        started = set(self.audit_runs()) - runs
        self.assertEqual(1, len(started), started)
        return started.pop()

    def only_change(self, run_id):
        changes = self.store.changes(run_id)
        self.assertEqual(1, len(changes), changes)
        return changes[0]

    def assertCrashedRun(self, run_id):
        run = self.audit_runs()[run_id]
        self.assertEqual((None, None, None),
                         (run['ended_at'], run['exit_code'], run['summary']))

    def test_interrupted_before_the_write(self):
        run_id = self.crash_heal(InterruptedBeforeWrite)
        change = self.only_change(run_id)
        self.assertEqual(
            (self.first, PENDING, self.originals[self.first], None),
            (change['instance_uuid'], change['state'], change['before_text'],
             change['resolved_at']))
        self.assertNotEqual(change['before_text'], change['after_text'])
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertIsNone(self.spec_updated_at(self.first))
        self.assertCrashedRun(run_id)
        self.assertEqual(PENDING, self.audit_show(run_id)['changes'][0][
            'state'])

        # The next run settles the intent first, then heals.
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        settled = self.only_change(run_id)
        self.assertEqual(
            (REFUSED, 'recovered: interrupted before the write'),
            (settled['state'], settled['detail']))
        self.assertIsNotNone(settled['resolved_at'])
        healed = self.all_spec_texts()
        self.assertEqual(change['after_text'], healed[self.first])
        changes = self.changes_by_instance(document['run_id'])
        self.assertEqual({self.first, self.second}, set(changes))
        self.assertEqual({APPLIED}, {c['state'] for c in changes.values()})

    def test_interrupted_before_the_mark(self):
        run_id = self.crash_heal(InterruptedBeforeMark)
        change = self.only_change(run_id)
        self.assertEqual((self.first, PENDING),
                         (change['instance_uuid'], change['state']))
        written = self.all_spec_texts()
        self.assertEqual(change['after_text'], written[self.first])
        self.assertEqual(self.originals[self.second], written[self.second])
        updated_at = self.spec_updated_at(self.first)
        self.assertIsNotNone(updated_at)
        self.assertCrashedRun(run_id)

        # The next run finds the write went through: applied, not redone.
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        settled = self.only_change(run_id)
        self.assertEqual(
            (APPLIED, 'recovered: the row holds the new value'),
            (settled['state'], settled['detail']))
        self.assertEqual(
            [(self.second, APPLIED)],
            [(c['instance_uuid'], c['state'])
             for c in self.audit_show(document['run_id'])['changes']])
        self.assertEqual(written[self.first],
                         self.deployment.spec_text(self.first))
        self.assertEqual(updated_at, self.spec_updated_at(self.first))
        self.assertEqual(4, self.heal().code)

    def test_row_changed_after_an_interrupted_write(self):
        run_id = self.crash_heal(InterruptedBeforeMark)
        nova = json.dumps(dep.request_spec(self.first, demo.M1_LARGE),
                          indent=1)
        self.deployment.set_spec(self.first, nova)
        self.another_invocation()
        settled = self.only_change(run_id)
        self.assertEqual(UNKNOWN, settled['state'])
        self.assertIn('neither', settled['detail'])
        self.assertEqual(nova, self.deployment.spec_text(self.first))
        shown = self.run_cli('audit', 'show', run_id)
        self.assertIn(': unknown (recovered: the row holds neither value',
                      shown.stdout)

    def test_row_back_to_before_after_an_interrupted_write(self):
        """Someone put the old text back: the write is not counted."""
        run_id = self.crash_heal(InterruptedBeforeMark)
        self.deployment.set_spec(self.first, self.originals[self.first])
        self.another_invocation()
        self.assertEqual(REFUSED, self.only_change(run_id)['state'])

    def test_revert_of_an_interrupted_run(self):
        """Revert undoes the writes an interrupted run made.

        The crash left the change pending although the spec was written;
        revert settles it (applied) and must then put the old text back.
        """
        run_id = self.crash_heal(InterruptedBeforeMark)
        self.assertNotEqual(self.originals, self.all_spec_texts())
        result, document = self.run_json('revert', run_id)
        self.assertEqual(APPLIED, self.only_change(run_id)['state'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([self.first],
                         list(self.changes_by_instance(document['run_id'])))

    def test_apply_settles_interrupted_runs_first(self):
        plan_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'plan.json')
        result = self.heal('--dry-run', '--plan', plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        run_id = self.crash_heal(InterruptedBeforeWrite)
        self.assertEqual(PENDING, self.only_change(run_id)['state'])
        result, document = self.run_json('apply', plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(REFUSED, self.only_change(run_id)['state'])
        self.assertEqual({self.first, self.second},
                         set(self.changes_by_instance(document['run_id'])))

    def test_interrupted_revert(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        runs = set(self.audit_runs())
        self.assertRaises(Interrupted, api.revert, self.conf, heal_run,
                          audit=self.open_store(InterruptedBeforeWrite))
        revert_run, = set(self.audit_runs()) - runs
        self.assertEqual('revert', self.audit_runs()[revert_run]['mode'])
        self.assertEqual(PENDING, self.only_change(revert_run)['state'])
        self.assertEqual(healed, self.all_spec_texts())

        result = self.run_cli('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(REFUSED, self.only_change(revert_run)['state'])
        self.assertEqual(self.originals, self.all_spec_texts())


# The command as a real process, from this interpreter (same venv).


class InsertCrashTest(audit_case.AuditTestCase):
    """A recreated spec's intent is settled as an update's is."""

    def setUp(self):
        super().setUp()
        self.missing = self.add_consistent(self.cell1, spec=None)
        self.conf = api.load_config([self.config_file])
        self.addCleanup(self.conf.reset)

    def crash_insert(self, store_class):
        """A heal with --create-missing that crashes; its only change."""
        store = store_class(self.audit_url())
        self.addCleanup(store.dispose)
        self.assertRaises(Interrupted, api.run_request_specs, self.conf,
                          api.Options(settings=decisions.Settings(
                              skip_updated_within=60, create_missing=True)),
                          audit=store)
        run_id, = self.audit_runs()
        change, = store.changes(run_id)
        self.assertEqual(('insert', PENDING, None),
                         (change['action'], change['state'],
                          change['before_text']))
        return run_id, change

    def settled(self, run_id):
        store = audit_store.AuditStore(self.audit_url())
        self.addCleanup(store.dispose)
        change, = store.changes(run_id)
        return change['state'], change['detail']

    def test_interrupted_before_the_insert(self):
        run_id, change = self.crash_insert(InterruptedBeforeWrite)
        self.assertIsNone(self.deployment.spec_text(self.missing))
        result = self.heal('--create-missing')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual((REFUSED, 'recovered: interrupted before the write'),
                         self.settled(run_id))
        self.assertEqual(change['after_text'],
                         self.deployment.spec_text(self.missing))

    def test_interrupted_after_the_insert(self):
        run_id, change = self.crash_insert(InterruptedBeforeMark)
        self.assertEqual(change['after_text'],
                         self.deployment.spec_text(self.missing))
        self.assertEqual(4, self.heal('--create-missing').code)
        self.assertEqual((APPLIED, 'recovered: the row holds the new value'),
                         self.settled(run_id))
        # The recovered insert is reverted like any other: the row goes.
        result = self.run_cli('revert', run_id)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIsNone(self.deployment.spec_text(self.missing))


class _KillCase(audit_case.AuditTestCase):
    """SIGKILL at each seam of a heal, then recovery.

    The command runs as a real process; locks on the databases hold it at
    a seam (its intent recorded and its write waiting, or its write done
    and its mark waiting), or let it heal some instances first, and the
    test kills it there once the databases show it arrived. Wherever the
    kill lands, every spec holds either its drifted or its healed text,
    byte for byte, and once recovered the audit says which: every change
    of the killed run is applied (the row holds the new text) or refused
    (the old one), and every healed row has its applied change.
    """

    INSTANCES = 8
    # How long any wait for the command may take.
    DEADLINE = 60

    def setUp(self):
        super().setUp()
        self.uuids = [self.add_drifted(self.cell1 if n % 2 else self.cell2)
                      for n in range(self.INSTANCES)]
        self.originals = self.all_spec_texts()
        self.output = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'stderr')
        self.env = dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path)
        # The command waits for the test's locks as long as it may (the
        # test kills it as soon as it waits).
        self.config = self.write_config('lock_wait_timeout = 10\n')
        self.store = audit_store.AuditStore(self.audit_url())
        self.addCleanup(self.store.dispose)
        self.healed = self.reference_texts()

    def reference_texts(self):
        """What an uninterrupted heal writes; the rows are put back."""
        self.assertEqual(0, self.heal().code)
        healed = self.all_spec_texts()
        for uuid in self.uuids:
            self.assertNotEqual(self.originals[uuid], healed[uuid])
        for uuid, text in self.originals.items():
            self.deployment.set_spec(uuid, text)
        return healed

    def start(self, *extra, command=cli.NOVA_HEAL):
        with open(self.output, 'ab') as stderr:
            process = cli.spawn(
                command + ['--config-file', self.config,
                           'request-specs', '--batch-size', '2']
                + list(extra),
                stdout=subprocess.DEVNULL, stderr=stderr, env=self.env)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process

    def read_output(self):
        with open(self.output) as handle:
            return handle.read()

    def wait_for(self, condition, process, what):
        """Return once ``condition()`` holds; the command must still run."""
        deadline = time.monotonic() + self.DEADLINE
        while not condition():
            self.assertIsNone(process.poll(), 'the command ended before %s: '
                              '%s' % (what, self.read_output()))
            self.assertLess(time.monotonic(), deadline, 'no %s' % what)
            time.sleep(0.01)

    def hold(self, engine, statement):
        """A connection of the test that locks with ``statement``.

        Released by ``release``, or at cleanup if the test fails first:
        a lock left held would keep its database from being dropped.
        """
        conn = engine.connect()
        self.addCleanup(self.release, conn)
        if engine.dialect.name == 'sqlite':
            conn.exec_driver_sql('BEGIN IMMEDIATE')
        else:
            conn.exec_driver_sql('BEGIN')
            conn.execute(sa.text(statement))
        return conn

    def lock_specs(self):
        """Block every write of request_specs (reads go on)."""
        return self.hold(self.deployment.api_engine,
                         'SELECT id FROM request_specs FOR UPDATE')

    def lock_audit(self):
        """Block every write of the audit store (an SQLite file here)."""
        engine = sa.create_engine(self.audit_url())
        self.addCleanup(engine.dispose)
        return self.hold(engine, None)

    @staticmethod
    def release(conn):
        if conn.closed:
            return
        conn.exec_driver_sql('ROLLBACK')
        conn.close()

    def changes_in(self, state, run_id=None):
        """Instances of the changes in ``state`` (of run ``run_id``)."""
        t = audit_schema.changes
        query = sa.select(t.c.instance_uuid).where(t.c.state == state)
        if run_id is not None:
            query = query.where(t.c.run_id == run_id)
        with self.store.engine.connect() as conn:
            return conn.execute(query).scalars().all()

    def healed_rows(self):
        rows = self.all_spec_texts()
        return {u for u in self.uuids if rows[u] == self.healed[u]}

    def kill_and_recover(self, process, *locks):
        """SIGKILL, release ``locks``, then what any next command does."""
        process.send_signal(signal.SIGKILL)
        process.wait()
        self.assertEqual(-signal.SIGKILL, process.returncode,
                         self.read_output())
        for lock in locks:
            self.release(lock)
        self.another_invocation()

    def last_heal_run(self):
        runs = [r for r in self.store.list_runs(1000)
                if r['mode'] == 'heal']
        return runs[0]['id']

    def check_consistency(self, run_id):
        """Rows and audit agree; return the instances holding healed text."""
        rows = self.all_spec_texts()
        for uuid in self.uuids:
            self.assertIn(rows[uuid],
                          (self.originals[uuid], self.healed[uuid]),
                          'spec of %s is neither drifted nor healed' % uuid)
        now_healed = self.healed_rows()
        self.assertEqual([], self.changes_in(PENDING)
                         + self.changes_in(UNKNOWN))
        states = {}
        for change in self.store.changes(run_id):
            uuid = change['instance_uuid']
            self.assertNotIn(uuid, states, 'two changes for %s' % uuid)
            states[uuid] = change['state']
            self.assertEqual(
                (self.originals[uuid], self.healed[uuid]),
                (change['before_text'], change['after_text']))
            self.assertIn(change['state'], (APPLIED, REFUSED))
            expected = (change['after_text'] if change['state'] == APPLIED
                        else change['before_text'])
            self.assertEqual(expected, rows[uuid],
                             'change %s of %s is %s' % (
                                 change['id'], uuid, change['state']))
        self.assertEqual(now_healed,
                         {u for u, s in states.items() if s == APPLIED})
        return now_healed


class KillTest(_KillCase):

    def test_killed_in_the_middle_of_a_heal(self):
        if self.db.name == 'MySQL':
            # The instances are healed cell by cell, by id: 1, 3, 5, 7 in
            # cell1, then 0, 2, 4, 6. The test holds 4's row: the command
            # heals six, then waits for it, and is killed there.
            held = self.hold(self.deployment.api_engine,
                             "SELECT id FROM request_specs WHERE "
                             "instance_uuid = '%s' FOR UPDATE"
                             % self.uuids[4])
            process = self.start()
            self.wait_for(lambda: len(self.healed_rows()) == 6, process,
                          'six specs written')
        else:
            # SQLite locks the whole file: the test holds the command
            # after two batches (four written), takes the lock, then lets
            # it on to its next write, which waits for the lock.
            gate = self.useFixture(cli.Gate())
            process = self.start(command=gate.argv())
            gate.reach(2, process)
            self.assertEqual(4, len(self.healed_rows()))
            held = self.lock_specs()
            gate.open()
            self.wait_for(lambda: self.changes_in(PENDING), process,
                          'intent recorded')
        self.kill_and_recover(process, held)
        healed = self.check_consistency(self.last_heal_run())
        self.assertGreaterEqual(len(healed), 3)
        self.assertLess(len(healed), self.INSTANCES)
        # A heal afterwards finishes the work.
        self.assertEqual(0, self.heal().code)
        self.assertEqual(set(self.uuids), self.healed_rows())

    def test_killed_after_its_last_write(self):
        # Held after its fourth and last batch: every spec written, the
        # run not yet finished.
        gate = self.useFixture(cli.Gate())
        process = self.start(command=gate.argv())
        gate.reach(4, process)
        self.kill_and_recover(process)
        run_id = self.last_heal_run()
        healed = self.check_consistency(run_id)
        self.assertEqual(set(self.uuids), healed)
        self.assertEqual(sorted(healed),
                         sorted(self.changes_in(APPLIED, run_id)))
        self.assertEqual([], self.changes_in(PENDING, run_id))
        self.assertEqual(4, self.heal('--dry-run').code)


class SeamKillTest(_KillCase):
    """SIGKILL at the two seams of one write, held there by row locks.

    Only MySQL can block a write and let the check before it pass: the
    command first tries an UPDATE that matches no row (the privilege
    check), and SQLite's lock is the whole database's. On SQLite these
    seams are crashed at in-process (InjectedCrashTest).
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def test_killed_after_an_intent_before_its_write(self):
        specs = self.lock_specs()
        process = self.start()
        self.wait_for(lambda: self.changes_in(PENDING), process,
                      'intent recorded')
        self.assertEqual(set(), self.healed_rows())
        self.kill_and_recover(process, specs)
        run_id = self.last_heal_run()
        self.assertEqual(set(), self.check_consistency(run_id))
        self.assertEqual([], self.changes_in(APPLIED, run_id))
        self.assertEqual(1, len(self.changes_in(REFUSED, run_id)))

    def test_killed_after_a_write_before_its_mark(self):
        specs = self.lock_specs()
        process = self.start()
        self.wait_for(lambda: self.changes_in(PENDING), process,
                      'intent recorded')
        audit = self.lock_audit()
        self.release(specs)
        self.wait_for(self.healed_rows, process, 'spec written')
        self.kill_and_recover(process, audit)
        run_id = self.last_heal_run()
        healed = self.check_consistency(run_id)
        self.assertEqual(1, len(healed))
        self.assertEqual(list(healed), self.changes_in(APPLIED, run_id))
