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

"""The proxy in front of the cluster moves clients when a node fails.

HAProxy (HEALREQ_TEST_GALERA_PROXY) sends every client to the first
node while its clustercheck says it is Synced, else to the first backup
that is; a run with every URL pointed at the proxy goes on through the
backup. These tests kill and join the first node and restart the proxy
with ``tools/galera-cluster.sh``: like the failover tests (their module
name puts them in the same group) they need HEALREQ_TEST_GALERA_DIR and
must run alone (``stestr run --serial``), never beside other Galera
tests.
"""

import time

import sqlalchemy as sa
from testtools import content

from healreq.tests.functional import galera_case

# How long HAProxy may take to move clients: two failed checks a second
# apart mark a server down, two good ones up; a joining node is first
# checked once it is Synced. Generous, for loaded machines.
SWITCH_DEADLINE = 15


class GaleraProxyFailoverTest(galera_case.GaleraTestCase):

    def setUp(self):
        self.cluster_dir()  # skips or fails first, without a directory
        super().setUp()
        self.db.require_proxy()
        self.down = set()
        self.drifted = [self.add_drifted(self.cell1),
                        self.add_drifted(self.cell2)]
        self.proxy_config = self.config_through_proxy()
        self.assertEqual(0, self.wait_for_active(lambda node: node == 0))

    def kill(self, node):
        self.cluster_tool('kill', str(node + 1))
        self.down.add(node)
        self.addCleanup(self.join, node)

    def join(self, node):
        if node in self.down:
            self.cluster_tool('join', str(node + 1))
            self.down.discard(node)

    def wait_for_active(self, wanted):
        """Wait until ``wanted(active node)``; return that node."""
        deadline = time.monotonic() + SWITCH_DEADLINE
        while True:
            active = self.active_node()
            if wanted(active):
                return active
            self.assertLess(time.monotonic(), deadline,
                            'HAProxy sends clients to node %s' % active)
            time.sleep(0.2)

    def dry_run(self):
        """A dry run through the proxy: its code and report, sans run id."""
        result, document = self.run_json('request-specs', '--dry-run',
                                         config_file=self.proxy_config)
        return result.code, dict(document, run_id=None), result.stderr

    def node_name(self, engine):
        with engine.connect() as conn:
            return conn.execute(sa.text('SELECT @@wsrep_node_name')).scalar()

    def test_a_dead_first_node_moves_clients_to_the_first_backup(self):
        before = self.dry_run()
        self.assertEqual(
            set(self.drifted),
            {r['instance_uuid'] for r in before[1]['results']})
        backup_name = self.node_name(self.node_engine(self.store_url, 1))

        killed = time.monotonic()
        self.kill(0)
        self.assertEqual(1, self.wait_for_active(lambda node: node != 0))
        switched = time.monotonic() - killed
        # The same report through the backup; nothing was written.
        self.assertEqual(before, self.dry_run())
        self.assertEqual(backup_name,
                         self.node_name(self.proxy_engine(self.store_url)))

        # A heal through the backup, then the first node joins again and
        # gets the clients back, with the healed rows.
        result, document = self.run_json('request-specs',
                                         config_file=self.proxy_config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.join(0)
        self.wait_for_active(lambda node: node == 0)
        after = self.dry_run()
        # NOTHING_TO_HEAL.
        self.assertEqual((4, []), (after[0], after[1]['results']))
        self.addDetail('switch', content.text_content(
            'HAProxy moved the clients %.1f s after the kill' % switched))

    def test_a_restarted_proxy_cuts_connections_and_serves_new_ones(self):
        engine = self.proxy_engine(self.store_url)
        conn = engine.connect()
        self.addCleanup(conn.close)
        conn.execute(sa.text('SELECT 1'))
        before = self.dry_run()

        self.restart_proxy()
        error = self.assertRaises(sa.exc.DBAPIError, conn.execute,
                                  sa.text('SELECT 1'))
        self.assertTrue(error.connection_invalidated, error)
        self.assertEqual(0, self.active_node())
        self.assertEqual(before, self.dry_run())
