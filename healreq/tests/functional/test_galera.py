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

"""The write paths against a three-node MariaDB Galera cluster.

Every node runs with ``wsrep_mode=REQUIRED_PRIMARY_KEY``; the audit store
lives on the cluster, as the deployment does.
"""

import sqlalchemy as sa

from healreq.tests.functional import galera_case


class GaleraClusterTest(galera_case.GaleraTestCase):
    """The fixture reaches every node of one cluster."""

    def test_every_node_is_a_synced_member_requiring_primary_keys(self):
        for node in range(len(self.db.nodes)):
            engine = self.node_engine(self.db.server_url(node), node)
            with engine.connect() as conn:
                status = dict(conn.execute(sa.text(
                    "SHOW STATUS LIKE 'wsrep_%'")).all())
                mode = conn.execute(sa.text(
                    'SELECT @@wsrep_mode')).scalar()
            self.assertEqual('Synced', status['wsrep_local_state_comment'])
            self.assertEqual(str(len(self.db.nodes)),
                             status['wsrep_cluster_size'])
            self.assertIn('REQUIRED_PRIMARY_KEY', mode)
