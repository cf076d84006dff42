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

"""A run through the proxy outlives a hung node, a failover, a restart.

Every database a run reaches (API database, cells, audit store) is
reached through the HAProxy in front of the cluster; the run is held at
a point of its choice (``cli.Gate`` between batches, ``ChangeGate``
between the changes of a revert or an apply) while the test freezes the
active node (``tools/galera-cluster.sh pause``: SIGSTOP, its connections
open and silent), kills it or restarts the proxy. Every wait of a run is
bounded, its lease is a replicated row, so the run ends, within bounds,
with a report, and the next run settles what it left. These tests stop
nodes and the proxy: like the other failover tests (their module name
puts them in the same group) they need HEALREQ_TEST_GALERA_DIR and run
alone (``stestr run --serial``), never beside other Galera tests.
"""

import json
import subprocess
import sys
import time

import fixtures
import sqlalchemy as sa
from testtools import content

from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import galera_case

APPLIED = audit_store.APPLIED
PENDING = audit_store.PENDING

# The longest a command of these tests may take when nothing hangs.
DEADLINE = 120
# How long HAProxy may take to move clients (two failed checks a second
# apart mark a server down, two good ones up), and a node to be back in
# the cluster once continued. Generous, for loaded machines.
SWITCH_DEADLINE = 15
SYNC_DEADLINE = 90
# The database bounds of the run facing a hung node, and the most it may
# take to end once held no more: each engine whose pooled connections
# lead to the hung node may wait out one bound (API database, audit
# store, each cell), some at once in different threads.
DATABASE_TIMEOUT = 5
LOCK_WAIT_TIMEOUT = 1
HUNG_RUN_BOUND = 30
# How long a run held on a hung node is waited for before the test says
# it hangs (kolla's proxy would keep it waiting an hour).
HUNG_RUN_PATIENCE = 90


class ChangeGate(cli.Gate):
    """cli.Gate, holding a revert or an apply after each change.

    ``replay.Replayer`` has no hook between changes: in the child, each
    change it replays (written or not) counts as a batch of cli.Gate.
    """

    def argv(self):
        return [sys.executable, '-c',
                'import sys; from healreq.tests.functional import '
                'test_galera_failover_bounds as bounds; '
                'bounds.ChangeGate(sys.argv.pop(1)).hold(); '
                + (cli.fast_leases_code() if self.fast_leases else '')
                + 'from healreq.cmd import entry_point; '
                'sys.exit(entry_point.main())',
                self.directory]

    def hold(self):
        super().hold()
        from healreq.run import budget
        from healreq.run import replay
        held, budget.between_batches = budget.between_batches, None
        replay_one = replay.Replayer._replay

        def replay_then_hold(replayer, *args, **kwargs):
            finding = replay_one(replayer, *args, **kwargs)
            held()
            return finding

        replay.Replayer._replay = replay_then_hold


class GaleraFailoverBoundsTest(galera_case.GaleraTestCase):

    def setUp(self):
        self.cluster_dir()  # skips or fails first, without a directory
        super().setUp()
        self.db.require_proxy()
        self.down = set()
        self.paused = set()
        self.wait_for_cluster()
        self.assertEqual(0, self.wait_for_active(lambda node: node == 0))
        self.drifted = ([self.add_drifted(self.cell1) for _ in range(3)]
                        + [self.add_drifted(self.cell2) for _ in range(2)])
        self.originals = self.all_spec_texts()

    # -- the cluster -------------------------------------------------------

    def node_action(self, action, node):
        self.cluster_tool(action, str(node + 1))

    def pause(self, node):
        """SIGSTOP ``node``; continued (or replaced) at cleanup."""
        self.node_action('pause', node)
        self.paused.add(node)
        self.addCleanup(self.restore, node)

    def kill(self, node):
        """SIGKILL ``node``; joined again at cleanup if not before."""
        self.node_action('kill', node)
        self.down.add(node)
        self.addCleanup(self.restore, node)

    def restore(self, node):
        """Bring ``node`` back: every node Synced, it active if first."""
        if node in self.paused:
            self.paused.discard(node)
            self.node_action('resume', node)
            if not self.wait_for_cluster(fail=False):
                # It did not find its way back: start it anew.
                self.node_action('kill', node)
                self.down.add(node)
        if node in self.down:
            self.down.discard(node)
            self.node_action('join', node)
        self.wait_for_cluster()
        self.wait_for_active(lambda active: active == 0)

    def cluster_synced(self):
        """Whether every node is Synced in one cluster of them all."""
        lines = self.cluster_tool('status', check=False).splitlines()
        return len(lines) == len(self.db.nodes) and all(
            ' state=Synced size=%d' % len(self.db.nodes) in line
            for line in lines)

    def wait_for_cluster(self, fail=True):
        """Wait until every node is a Synced member; False if in vain."""
        deadline = time.monotonic() + SYNC_DEADLINE
        while not self.cluster_synced():
            if time.monotonic() > deadline:
                if fail:
                    self.fail('the cluster is not whole again: %s'
                              % self.cluster_tool('status', check=False))
                return False
            time.sleep(0.5)
        return True

    def wait_for_active(self, wanted):
        """Wait until ``wanted(node HAProxy sends clients to)``; return it."""
        deadline = time.monotonic() + SWITCH_DEADLINE
        while True:
            active = self.active_node()
            if wanted(active):
                return active
            self.assertLess(time.monotonic(), deadline,
                            'HAProxy sends clients to node %s' % active)
            time.sleep(0.2)

    # -- runs and rows, read through the proxy -----------------------------

    def spawn(self, gate, config, *argv):
        """``nova-heal ARGV --format json`` held by ``gate``, a process."""
        process = cli.spawn(
            gate.argv() + ['--config-file', config] + list(argv)
            + ['--format', 'json'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process

    def finish(self, process, timeout=DEADLINE):
        """Wait for ``process``; its code, stdout, stderr and duration."""
        started = time.monotonic()
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.fail('the run has not ended %d s after it was let on: it '
                      'waits for a database that does not answer'
                      % timeout)
        took = time.monotonic() - started
        return cli.Result(process.returncode, out.decode(),
                          err.decode()), took

    def spec_texts(self):
        """Every spec text by instance UUID, read through the proxy."""
        t = tables.request_specs
        with self.proxy_engine(self.cells.api_url()).connect() as conn:
            return dict(conn.execute(sa.select(t.c.instance_uuid,
                                               t.c.spec)).all())

    def changes(self):
        """Every change of the audit store, oldest first."""
        t = audit_store.schema.changes
        with self.proxy_engine(self.store_url).connect() as conn:
            return [dict(row) for row in conn.execute(
                sa.select(t).order_by(t.c.id)).mappings()]

    def lease_rows(self):
        t = audit_store.schema.leases
        with self.proxy_engine(self.store_url).connect() as conn:
            return conn.execute(sa.select(t.c.name)).scalars().all()

    def assert_ended_cleanly(self, result):
        """Exit 0, the JSON report on stdout; its document.

        Nothing on stderr: no problem, no traceback.
        """
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual('', result.stderr)
        document = json.loads(result.stdout)
        self.assertEqual((0, []),
                         (document['exit_code'], document['problems']))
        return document

    def assert_rows_agree_with_the_audit(self, expected):
        """Nothing pending; the rows are ``expected`` and the audit says so.

        Each instance's row holds the after value of its last applied
        change (in the order recorded), or its original text.
        """
        changes = self.changes()
        self.assertEqual([], [c['id'] for c in changes
                              if c['state'] == PENDING])
        written = dict(self.originals)
        for change in changes:
            if change['state'] == APPLIED:
                written[change['instance_uuid']] = change['after_text']
        rows = self.spec_texts()
        self.assertEqual(written, rows)
        self.assertEqual(expected, rows)

    def assert_still_running(self, run_id, config):
        """Run ``run_id`` is judged alive through the proxy, and kept so.

        Reverting it, even as a dry run, is refused; a command that
        writes (and so recovers first) leaves it be.
        """
        for argv in (('revert', '--dry-run', run_id), ('revert', run_id)):
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(3, result.code, result.stdout + result.stderr)
            self.assertEqual(
                ['nova-heal: error: run %s is still running (its lease is '
                 'held); revert it once it has ended, or pass --wait'
                 % run_id], result.stderr.splitlines())
        result = self.run_cli('revert', audit_case.UNKNOWN_RUN,
                              config_file=config)
        self.assertEqual(127, result.code, result.stdout + result.stderr)

    # -- the tests ---------------------------------------------------------

    def test_a_hung_active_node_ends_the_run_within_the_bound(self):
        """A frozen node behind a proxy that keeps the connections open.

        The run reaches every database through the proxy's listener with
        kolla's timeouts (an hour, and the sessions of a server marked
        down left open): its pooled connections to the frozen node stay
        open and nothing answers on them. Each wait of the run is bounded
        (``database_timeout`` + ``lock_wait_timeout``): the first checkout
        of each engine's pool (API database, audit store, each cell) waits
        out one bound on its ping, the pool is replaced, and the new
        connections reach the backup HAProxy moved to meanwhile. So the
        run ends within seconds, having healed everything, its report on
        stdout and nothing on stderr. On the previous design no wait was
        bounded: that first ping waited for the proxy's hour, and this
        test failed on HUNG_RUN_PATIENCE.
        """
        # The run renews and judges its lease as fast leases do, and so
        # does the run that follows it here.
        self.useFixture(cli.FastLeases())
        config = self.config_through_proxy(
            'database_timeout = %d\nlock_wait_timeout = %d\n'
            % (DATABASE_TIMEOUT, LOCK_WAIT_TIMEOUT), long=True)
        gate = self.useFixture(cli.Gate(fast_leases=True))
        process = self.spawn(gate, config, 'request-specs',
                             '--batch-size', '1')
        gate.reach(1, process)
        first = self.spec_texts()
        [done] = [u for u in self.drifted if first[u] != self.originals[u]]

        self.pause(0)
        gate.open()
        result, took = self.finish(process, HUNG_RUN_PATIENCE)
        self.addDetail('run', content.text_content(
            'exit %d %.1f s after the node was frozen\n%s' % (
                result.code, took, result.stderr)))
        self.assertLess(took, HUNG_RUN_BOUND, result.stderr)
        document = self.assert_ended_cleanly(result)
        self.assertEqual({u: 'healed' for u in self.drifted},
                         {r['instance_uuid']: r['status']
                          for r in document['results']})
        # It released its lease on its way out, through the backup.
        self.assertNotIn('run-%s' % document['run_id'], self.lease_rows())

        self.restore(0)
        # Through the proxy's usual listener, once the node is back: the
        # next run that writes settles nothing and finds nothing to heal;
        # the rows are what the audit says.
        config = self.config_through_proxy()
        result = self.heal(config_file=config)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        healed = self.spec_texts()
        self.assertEqual(set(self.drifted), {
            u for u in healed if healed[u] != self.originals[u]})
        # What the first batch wrote before the freeze stands.
        self.assertEqual(first[done], healed[done])
        self.assert_rows_agree_with_the_audit(healed)

    def test_proxy_restarted_mid_run(self):
        """Every connection of a held run is cut; it goes on, lease held.

        The proxy's restart closes the run's pooled connections; each is
        found closed when next checked out and opened anew, and the lease
        row, renewed through new connections, keeps the run alive in the
        eyes of every other invocation. On the previous design the
        restart cut the connection holding the run's GET_LOCK: the node
        released the lock, and an invocation reaching it through the
        proxy found the lease free and the run dead (``revert --dry-run``
        of it exited 0, not 3): this test failed there.
        """
        config = self.config_through_proxy()
        gate = self.useFixture(cli.Gate())
        process = self.spawn(gate, config, 'request-specs',
                             '--batch-size', '1')
        gate.reach(1, process)
        [run] = [c['run_id'] for c in self.changes()]

        self.restart_proxy()
        self.assertEqual(0, self.active_node())
        self.assert_still_running(run, config)
        gate.open()
        result, took = self.finish(process)
        self.addDetail('run', content.text_content(
            'exit %d %.1f s after it was let on\n%s' % (
                result.code, took, result.stderr)))
        document = self.assert_ended_cleanly(result)
        self.assertEqual(run, document['run_id'])
        self.assertEqual({u: 'healed' for u in self.drifted},
                         {r['instance_uuid']: r['status']
                          for r in document['results']})
        healed = self.spec_texts()
        self.assert_rows_agree_with_the_audit(healed)
        self.assertEqual(4, self.heal('--dry-run', config_file=config).code)

    def failover_during(self, argv, config, expected):
        """``nova-heal ARGV`` held after its first change; node 1 killed.

        The clients move to the backup; the command goes on against it
        (its pooled connections were shut with the node's sessions, and
        are found closed and opened anew on checkout), writes its second
        change and is held again. Node 1 joins and gets the clients back:
        the command's lease, renewed through whichever node, still holds.
        Then the command ends, every change written (exit 0), the same
        command again finds nothing left to do (exit 4), nothing is
        pending and the rows are ``expected``.
        """
        gate = self.useFixture(ChangeGate())
        process = self.spawn(gate, config, *argv)
        gate.reach(1, process)
        self.kill(0)
        self.assertEqual(1, self.wait_for_active(lambda node: node != 0))
        # Against the backup: the second change.
        gate.reach(2, process)
        [run] = [r for r in {c['run_id'] for c in self.changes()}
                 if self.run_is_open(r)]
        self.assert_still_running(run, config)
        # The first node is back and active: the lease holds there too.
        self.restore(0)
        self.assert_still_running(run, config)

        gate.open()
        result, took = self.finish(process)
        self.addDetail('run', content.text_content(
            'exit %d %.1f s after it was let on\n%s' % (
                result.code, took, result.stderr)))
        document = self.assert_ended_cleanly(result)
        self.assertEqual(run, document['run_id'])
        self.assertEqual(len(self.drifted), document['summary']['healed'])
        again = self.run_cli(*argv, config_file=config)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assert_rows_agree_with_the_audit(expected)

    def run_is_open(self, run_id):
        t = audit_store.schema.runs
        with self.proxy_engine(self.store_url).connect() as conn:
            return conn.execute(sa.select(t.c.ended_at).where(
                t.c.id == run_id)).first() == (None,)

    def test_failover_during_revert(self):
        """A revert through the proxy outlives the failover and failback.

        On the previous design the revert's lease was a GET_LOCK on its
        connection to node 1, lost with the node: once node 1 was back
        and active, an invocation reaching it found the lock free and the
        revert dead (``revert --dry-run`` of it exited 0, not 3): this
        test failed there.
        """
        config = self.config_through_proxy()
        result, document = self.run_json('request-specs',
                                         config_file=config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertNotEqual(self.originals, self.spec_texts())
        self.failover_during(('revert', document['run_id']), config,
                             self.originals)

    def test_failover_during_apply(self):
        """An apply of a plan through the proxy outlives the failover.

        It would have failed on the previous design as the revert does
        (test_failover_during_revert).
        """
        config = self.config_through_proxy()
        plan = self.useFixture(fixtures.TempDir()).join('plan.json')
        result = self.heal('--dry-run', '--plan', plan, config_file=config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(plan) as handle:
            expected = dict(self.originals)
            for change in json.load(handle)['changes']:
                expected[change['instance_uuid']] = change['after']
        self.assertEqual(set(self.drifted), {
            u for u in expected if expected[u] != self.originals[u]})
        self.failover_during(('apply', plan), config, expected)
