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
writes through; the databases are real. The last test kills
``nova-heal request-specs`` with SIGKILL, as a real process, at random
moments of a long heal.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import fixtures as test_fixtures
import sqlalchemy as sa
from testtools import content

from healreq import api
from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.heal import decisions
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case

APPLIED = audit_store.APPLIED
PENDING = audit_store.PENDING
REFUSED = audit_store.REFUSED
UNKNOWN = audit_store.UNKNOWN


class Interrupted(BaseException):
    """A crash: like KeyboardInterrupt, nothing in healreq catches it."""


class InterruptedBeforeWrite(audit_store.AuditStore):
    """Dies on its first spec write, after the intent was recorded."""

    def intent(self, run_id, instance_uuid, *args):
        super().intent(run_id, instance_uuid, *args)
        raise Interrupted('before writing %s' % instance_uuid)


class InterruptedBeforeMark(audit_store.AuditStore):
    """Dies marking its first change, after the spec was written."""

    def resolve(self, change_id, state, detail=None):
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
        result = self.heal('--dry-run')
        self.assertIn(result.code, (0, 4), result.stdout + result.stderr)
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
        self.heal('--dry-run')
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
            self.useFixture(test_fixtures.TempDir()).path, 'plan.json')
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
NOVA_HEAL = [sys.executable, '-c',
             'import sys; from healreq.cmd import main; sys.exit(main.main())']


class KillTest(audit_case.AuditTestCase):
    """SIGKILL at random moments of a long heal, then recovery.

    Whenever the kill lands, every spec holds either its drifted or its
    healed text, byte for byte, and once recovered the audit says which:
    every change of the killed run is applied (the row holds the new
    text) or refused (the old one), and every healed row has its applied
    change.
    """

    INSTANCES = {'SQLite': 150, 'MySQL': 100}
    KILLS = 20
    SEED = 20240110
    # Kill windows, relative to the reference run: before the first write,
    # during the writes (three times as likely), after the last write.
    WINDOWS = ('before', 'during', 'during', 'during', 'after')

    def setUp(self):
        super().setUp()
        self.uuids = [self.add_drifted(self.cell1 if n % 2 else self.cell2)
                      for n in range(self.INSTANCES[self.db.name])]
        self.originals = self.all_spec_texts()
        self.spec_ids = {}
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            for uuid, spec_id in conn.execute(
                    sa.select(t.c.instance_uuid, t.c.id)):
                self.spec_ids[uuid] = spec_id
        self.output = os.path.join(
            self.useFixture(test_fixtures.TempDir()).path, 'stderr')
        self.env = dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path)

    def start(self):
        with open(self.output, 'ab') as stderr:
            return subprocess.Popen(
                NOVA_HEAL + ['--config-file', self.config_file,
                             'request-specs'],
                stdout=subprocess.DEVNULL, stderr=stderr, env=self.env)

    def healed_count(self):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).where(
                t.c.updated_at.isnot(None))).scalar()

    def reference_heal(self):
        """Heal once, uninterrupted; return healed texts and the timings.

        Timings (seconds from the start of the process): the first write
        seen, the last one, the exit.
        """
        started = time.monotonic()
        process = self.start()
        first = last = None
        while process.poll() is None:
            healed = self.healed_count()
            now = time.monotonic() - started
            if healed and first is None:
                first = now
            if healed == len(self.uuids) and last is None:
                last = now
            time.sleep(0.005)
        ended = time.monotonic() - started
        self.assertEqual(0, process.returncode, self.read_output())
        self.assertIsNotNone(first)
        healed = self.all_spec_texts()
        for uuid in self.uuids:
            self.assertNotEqual(self.originals[uuid], healed[uuid])
        return healed, (first, last or ended, ended)

    def read_output(self):
        with open(self.output) as handle:
            return handle.read()

    def reset(self):
        """Put every drifted text back, as before any heal."""
        t = tables.request_specs
        with self.deployment.api_engine.begin() as conn:
            conn.execute(
                t.update().where(t.c.id == sa.bindparam('row_id')).values(
                    spec=sa.bindparam('text'), updated_at=None),
                [dict(row_id=self.spec_ids[uuid], text=text)
                 for uuid, text in self.originals.items()])
        self.assertEqual(self.originals, self.all_spec_texts())

    def run_ids(self, store):
        return {run['id'] for run in store.list_runs(100000)}

    def test_sigkill(self):
        rng = random.Random(self.SEED)
        began = time.monotonic()
        healed, (first, last, end) = self.reference_heal()
        # The 'after' window reaches well past the reference run, which a
        # busy machine may run slower than the reference did.
        windows = {'before': (0.0, first), 'during': (first, last),
                   'after': (last, end * 3)}
        store = audit_store.AuditStore(self.audit_url())
        self.addCleanup(store.dispose)
        counts = dict.fromkeys(
            ('kills', 'before', 'mid-heal', 'after', 'exited', 'no-run'), 0)
        for iteration in range(self.KILLS):
            self.reset()
            runs = self.run_ids(store)
            delay = rng.uniform(*windows[self.WINDOWS[
                iteration % len(self.WINDOWS)]])
            process = self.start()
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
            process.wait()
            if process.returncode == -signal.SIGKILL:
                counts['kills'] += 1
            else:
                self.assertEqual(0, process.returncode, self.read_output())
                counts['exited'] += 1
            killed = self.run_ids(store) - runs
            self.assertLessEqual(len(killed), 1)
            counts['no-run'] += not killed

            # Recovery: what any next request-specs, revert or apply does.
            recovery = self.heal('--dry-run', '--instance', self.uuids[0])
            self.assertIn(recovery.code, (0, 4),
                          recovery.stdout + recovery.stderr)
            now_healed = self.check_consistency(
                store, killed.pop() if killed else None, healed)
            if not now_healed:
                counts['before'] += 1
            elif len(now_healed) == len(self.uuids):
                counts['after'] += 1
            else:
                counts['mid-heal'] += 1
        elapsed = time.monotonic() - began
        report = ('%s: %d instances, reference heal %.2fs (first write '
                  '%.2fs, last %.2fs); %d runs: %d killed, %d exited; '
                  'nothing healed %d (no run recorded %d), mid-heal %d, '
                  'all healed %d; %.1fs in all' % (
                      self.db.name, len(self.uuids), end, first, last,
                      self.KILLS, counts['kills'], counts['exited'],
                      counts['before'], counts['no-run'],
                      counts['mid-heal'], counts['after'], elapsed))
        self.addDetail('kill-counts', content.text_content(report))
        print('\nKILL TEST %s' % report, file=sys.stderr)
        # Where a kill lands depends on the machine's speed; what matters
        # is that some land mid-heal (and consistency, checked above).
        self.assertGreaterEqual(counts['mid-heal'], 3, report)

    def check_consistency(self, store, run_id, healed):
        """Rows and audit agree; return the instances holding healed text."""
        rows = self.all_spec_texts()
        for uuid in self.uuids:
            self.assertIn(rows[uuid], (self.originals[uuid], healed[uuid]),
                          'spec of %s is neither drifted nor healed' % uuid)
        now_healed = {u for u in self.uuids if rows[u] == healed[u]}
        t = audit_schema.changes
        with store.engine.connect() as conn:
            unsettled = conn.execute(sa.select(t.c.id, t.c.state).where(
                t.c.state.in_([PENDING, UNKNOWN]))).all()
        self.assertEqual([], unsettled)
        changes = store.changes(run_id) if run_id else []
        states = {}
        for change in changes:
            uuid = change['instance_uuid']
            self.assertNotIn(uuid, states, 'two changes for %s' % uuid)
            states[uuid] = change['state']
            self.assertEqual(
                (self.originals[uuid], healed[uuid]),
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
