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

"""Run leases and the migration lock hold across the nodes of a cluster."""

import json
import os
import subprocess
import time

import sqlalchemy as sa

from healreq.audit import lease
from healreq.audit import store as audit_store
from healreq.tests import cli
from healreq.tests.functional import galera_case

DEADLINE = 120


class GaleraLeaseTest(galera_case.GaleraTestCase):

    def open_store(self, node):
        store = audit_store.AuditStore(self.db.on_node(self.store_url, node))
        self.addCleanup(store.dispose)
        return store

    def hold_spec_row(self, uuid):
        """Lock ``uuid``'s spec row on the first node, until cleanup."""
        conn = self.deployment.api_engine.connect()
        self.addCleanup(conn.close)
        transaction = conn.begin()
        self.addCleanup(lambda: transaction.is_active
                        and transaction.rollback())
        conn.execute(sa.text(
            "SELECT spec FROM request_specs WHERE instance_uuid = '%s' "
            'FOR UPDATE' % uuid))
        return transaction

    def pending_changes(self, store):
        t = audit_store.schema.changes
        with store.engine.connect() as conn:
            return conn.execute(sa.select(t.c.id).where(
                t.c.state == audit_store.PENDING)).scalars().all()

    def test_a_live_run_on_another_node_is_never_settled(self):
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)
        observer = self.open_store(1)
        held = self.hold_spec_row(uuid)
        config = self.config_on_node(0, 'lock_wait_timeout = 10\n')
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', config, 'request-specs',
                             '--format', 'json'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path))
        self.addCleanup(lambda: process.poll() is None and process.kill())
        deadline = time.monotonic() + DEADLINE
        while not self.pending_changes(observer):
            if process.poll() is not None:
                self.fail('the run ended: %s' % (process.communicate(),))
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)

        # A second invocation through the second node: its recovery
        # leaves the live run's intent alone.
        second = self.run_cli('request-specs', '--dry-run',
                              config_file=self.config_on_node(1))
        self.assertEqual(0, second.code, second.stdout + second.stderr)
        self.assertEqual(1, len(self.pending_changes(observer)))
        # Reverting the live run through the second node is refused.
        [live] = [run['id'] for run in observer.list_runs(10)
                  if run['command'].endswith('request-specs --format json')]
        revert = self.run_cli('revert', live,
                              config_file=self.config_on_node(1))
        self.assertEqual(3, revert.code, revert.stdout + revert.stderr)
        self.assertEqual(
            ['nova-heal: error: run %s is still running (its lease is '
             'held); revert it once it has ended, or pass --wait' % live],
            revert.stderr.splitlines())
        self.assertEqual(1, len(self.pending_changes(observer)))

        held.rollback()
        out, err = process.communicate(timeout=DEADLINE)
        self.assertEqual(0, process.returncode, out + err)
        document = json.loads(out)
        change, = observer.changes(document['run_id'])
        self.assertEqual(audit_store.APPLIED, change['state'])
        self.assertNotEqual(before, self.deployment.spec_text(uuid))

    def test_a_lease_held_on_another_node_is_not_free(self):
        holder = self.open_store(0)
        observer = self.open_store(1)
        run_id = holder.start_run('heal', 'nova-heal request-specs', {})
        self.assertFalse(lease.is_free(observer.engine, lease.NAMED_LOCK,
                                       run_id))
        holder.release(run_id)
        self.assertTrue(lease.is_free(observer.engine, lease.NAMED_LOCK,
                                      run_id))

    def test_a_lease_no_longer_renewed_expires(self):
        self.patch(lease, 'EXPIRY', 2)
        holder = self.open_store(0)
        observer = self.open_store(1)
        run_id = holder.start_run('heal', 'nova-heal request-specs', {})
        # The holder stops renewing (it hangs, or lost the cluster).
        holder._leases[run_id]._renewer.stop()
        self.assertFalse(lease.is_free(observer.engine, lease.NAMED_LOCK,
                                       run_id))
        time.sleep(3)
        self.assertTrue(lease.is_free(observer.engine, lease.NAMED_LOCK,
                                      run_id))

    def test_a_renewed_lease_outlives_its_expiry(self):
        self.patch(lease, 'EXPIRY', 2)
        self.patch(lease, 'RENEW_INTERVAL', 0.5)
        holder = self.open_store(0)
        observer = self.open_store(1)
        run_id = holder.start_run('heal', 'nova-heal request-specs', {})
        time.sleep(3)
        self.assertFalse(lease.is_free(observer.engine, lease.NAMED_LOCK,
                                       run_id))

    def test_migration_lock_holds_across_nodes(self):
        from healreq.audit.migrations import lock
        self.patch(lock, 'LOCK_TIMEOUT', 2)
        engine = self.node_engine(self.store_url, 0)
        other = self.node_engine(self.store_url, 1)
        with lock.migration_lock(engine):
            error = self.assertRaises(TimeoutError, self._take, lock, other)
            self.assertIn('migrating the audit store', str(error))
        self._take(lock, other)

    @staticmethod
    def _take(lock, engine):
        with lock.migration_lock(engine):
            pass
