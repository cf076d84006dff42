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

import fixtures
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


class GaleraWritePathsTest(galera_case.GaleraTestCase):
    """Heal, revert, plan and apply, --create-missing on the cluster."""

    def setUp(self):
        super().setUp()
        self.first = self.add_drifted(self.cell1)
        self.second = self.add_drifted(self.cell2)
        self.originals = self.all_spec_texts()

    def test_heal_then_revert_restores_the_rows_byte_for_byte(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        self.assertEqual({self.first, self.second},
                         {u for u in healed
                          if healed[u] != self.originals[u]})
        result = self.run_cli('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_plan_then_apply_through_another_node(self):
        plan_path = self.useFixture(fixtures.TempDir()).join('plan.json')
        result = self.heal('--dry-run', '--plan', plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        result = self.run_cli('apply', plan_path,
                              config_file=self.config_on_node(1))
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        healed = self.all_spec_texts()
        self.assertNotEqual(self.originals[self.first], healed[self.first])
        self.assertEqual(4, self.heal('--dry-run').code)

    def test_create_missing_then_revert(self):
        self.missing = self.add_consistent(self.cell1, spec=None)
        heal_run = self.heal_run('--create-missing')
        self.assertIsNotNone(self.deployment.spec_text(self.missing))
        result = self.run_cli('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIsNone(self.deployment.spec_text(self.missing))
        self.assertEqual(self.originals[self.first],
                         self.deployment.spec_text(self.first))
