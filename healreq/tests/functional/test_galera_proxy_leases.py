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

"""A connection closed for idleness takes nothing from a live run.

Production reaches the cluster through HAProxy, which drops a client's
connection idle longer than its ``timeout client``, and a server drops a
session idle longer than its ``wait_timeout``. A run's lease is the
replicated ``leases`` row its thread renews every 5 seconds, not a
connection: after its connections were dropped, every other invocation,
through the proxy, still finds the run alive and leaves its pending
intent alone.

The live run is a store of this process on the proxy (the "holder"),
which started a run and recorded an intent, then is left idle (but for
its lease's renewals) longer than the proxy's or the server's timeout.
Real lease timing (renewed every 5 s, free 30 s after): the run is
never close to expiring. These tests neither stop nodes nor restart
the proxy: they run beside the other Galera tests.
"""

import json
import time

import sqlalchemy as sa

from healreq.audit import lease
from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case
from healreq.tests.functional import galera_case

APPLIED = audit_store.APPLIED
PENDING = audit_store.PENDING

# HAProxy's "timeout client" and "timeout server" of the proxy the tests
# go through (tools/galera-cluster.sh's GALERA_PROXY_TIMEOUT).
PROXY_TIMEOUT = 8
# The server's wait_timeout of the sessions opened during the second test.
WAIT_TIMEOUT = 3


class GaleraProxyLeaseTest(galera_case.GaleraTestCase):

    def setUp(self):
        super().setUp()
        self.db.require_proxy()
        self.uuid = self.add_drifted(self.cell1)
        self.before = self.deployment.spec_text(self.uuid)
        self.after = json.dumps(dep.request_spec(self.uuid, demo.M1_LARGE),
                                indent=1)
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            self.spec_id = conn.execute(sa.select(t.c.id).where(
                t.c.instance_uuid == self.uuid)).scalar()
        # Every database, and the store, through the proxy.
        self.proxy_config = self.config_through_proxy()
        self.observer = self.open_store()

    def open_store(self):
        """A store of this process on the audit store, via the proxy."""
        store = audit_store.AuditStore(self.db.proxy_url(self.store_url))
        self.addCleanup(store.dispose)
        return store

    def start_live_run(self, store):
        """Start a run on ``store``, record its intent; their ids."""
        return self.record_intent_of_a_new_run(
            store, self.uuid, self.spec_id, self.before, self.after,
            command='nova-heal request-specs')

    def state(self, change_id):
        return self.observer.change_state(change_id)

    def through_proxy(self, *argv):
        return self.run_cli(*argv, config_file=self.proxy_config)

    def idle_connection(self):
        """A connection through the proxy, used once and then left idle."""
        conn = self.proxy_engine(self.store_url).connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('SELECT 1'))
        return conn

    def assert_dropped(self, conn):
        """``conn``, left idle, was closed by the proxy or the server."""
        error = self.assertRaises(sa.exc.DBAPIError, conn.execute,
                                  sa.text('SELECT 1'))
        self.assertTrue(error.connection_invalidated, error)

    def assert_lease_renewed(self, run_id):
        """Run ``run_id``'s lease row is there and was renewed recently."""
        with self.proxy_engine(self.store_url).connect() as conn:
            row = lease.lease_row(conn, 'run-%s' % run_id)
        self.assertIsNotNone(row)
        self.assertLess(row.age_us, lease.WRITABLE_FOR * 10 ** 6)

    def assert_live_run_left_alone(self, holder, run_id, change_id):
        """Every other invocation, through the proxy, leaves the run be.

        Then the run writes and settles its change and ends: rows and
        audit agree, and the run reverts as any ended run.
        """
        self.assert_lease_renewed(run_id)
        # A dry run settles nothing, whatever it thinks of the lease.
        result = self.through_proxy('request-specs', '--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual((PENDING, None), self.state(change_id))
        # The run is alive: reverting it, even as a dry run, is refused.
        refused = ['nova-heal: error: run %s is still running (its lease '
                   'is held); revert it once it has ended, or pass --wait'
                   % run_id]
        for argv in (('revert', '--dry-run', run_id), ('revert', run_id)):
            result = self.through_proxy(*argv)
            self.assertEqual(3, result.code, result.stdout + result.stderr)
            self.assertEqual(refused, result.stderr.splitlines())
        # A command that writes recovers first: the live run's intent is
        # not its to settle.
        result = self.through_proxy('revert', audit_case.UNKNOWN_RUN)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual((PENDING, None), self.state(change_id))
        self.assertEqual(self.before, self.deployment.spec_text(self.uuid))

        # The run writes its change, settles it and ends.
        holder.check_lease(run_id)
        self.deployment.set_spec(self.uuid, self.after)
        self.assertTrue(holder.resolve(change_id, APPLIED))
        holder.finish_run(run_id, {}, 0)
        self.assertEqual((APPLIED, None), self.state(change_id))
        # NOTHING_TO_HEAL through the proxy; the ended run reverts.
        result = self.through_proxy('request-specs', '--dry-run')
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        result = self.through_proxy('revert', run_id)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.before, self.deployment.spec_text(self.uuid))

    def test_idle_timeout_takes_nothing_from_a_live_run(self):
        """The proxy drops the run's idle connections; its lease holds.

        On the previous design the lease was a GET_LOCK held by one
        connection of the run, idle through the proxy: HAProxy dropped it
        after 8 s, the server released the lock, and a client reaching
        the same node through the proxy trusted IS_FREE_LOCK (1), so the
        dry run (which recovered then) settled the live run's intent as
        refused, and ``revert --dry-run`` of the run exited 0: this test
        failed at its first check of the intent.
        """
        holder = self.open_store()
        run_id, change_id = self.start_live_run(holder)
        probe = self.idle_connection()
        # Idle longer than the proxy lets a connection be.
        time.sleep(PROXY_TIMEOUT + 2)
        self.assert_dropped(probe)
        self.assert_live_run_left_alone(holder, run_id, change_id)

    def test_short_wait_timeout_takes_nothing_from_a_live_run(self):
        """The server drops the run's idle sessions; its lease holds.

        Every session the holder opens at first has a wait_timeout of 3 s
        and is left idle longer: the server closes it. On the previous
        design the GET_LOCK connection was one of them: the server
        released the lock after 3 s idle, and the invocations through the
        proxy (to the same node) found IS_FREE_LOCK = 1 and settled the
        live run's intent: this test failed at its first check of the
        intent.
        """
        # The global wait_timeout is each new session's: short only while
        # the holder opens its sessions, on every node (the Galera tests
        # running beside this one open theirs meanwhile, so the window is
        # kept short and put back at once, and in cleanup if this fails).
        nodes = [self.node_engine(self.db.server_url(node), node)
                 for node in range(len(self.db.nodes))]
        previous = []
        for engine in nodes:
            with engine.connect() as conn:
                previous.append(conn.execute(sa.text(
                    'SELECT @@GLOBAL.wait_timeout')).scalar())

        def restore():
            for engine, value in zip(nodes, previous):
                with engine.connect() as conn:
                    conn.execute(sa.text('SET GLOBAL wait_timeout = %d'
                                         % value))
        self.addCleanup(restore)
        for engine in nodes:
            with engine.connect() as conn:
                conn.execute(sa.text('SET GLOBAL wait_timeout = %d'
                                     % WAIT_TIMEOUT))
        try:
            holder = self.open_store()
            run_id, change_id = self.start_live_run(holder)
            probe = self.idle_connection()
            with holder.engine.connect() as conn:
                short = conn.execute(sa.text(
                    'SELECT @@SESSION.wait_timeout')).scalar()
        finally:
            restore()
        self.assertEqual(WAIT_TIMEOUT, short)
        # Idle longer than the server lets a session be; shorter than the
        # proxy's timeout, so it is the server that closes them.
        time.sleep(WAIT_TIMEOUT + 2)
        self.assert_dropped(probe)
        self.assert_live_run_left_alone(holder, run_id, change_id)
