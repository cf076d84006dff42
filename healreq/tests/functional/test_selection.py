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

"""Which cells and instances a run processes, and how much of them."""

import uuid as uuidlib

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import deployment_case


class CellsTest(deployment_case.DeploymentTestCase):

    def test_template_and_plain_cells(self):
        """cell1 (URL template) and cell2 (plain URL) are both healed."""
        in_cell1 = self.add_drifted(self.cell1)
        in_cell2 = self.add_drifted(self.cell2)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(
            [(self.cell1.uuid, 'cell1', 1, None),
             (self.cell2.uuid, 'cell2', 1, None)],
            [(c['cell_uuid'], c['name'], c['healed'], c['error'])
             for c in doc['cells']])
        for uuid in (in_cell1, in_cell2):
            self.assertEqual(demo.M1_LARGE['nova_object.data']['id'],
                             self.spec_flavor(uuid)['nova_object.data']['id'])

    def test_cell_option(self):
        in_cell1 = self.add_drifted(self.cell1)
        in_cell2 = self.add_drifted(self.cell2)
        before = self.deployment.spec_text(in_cell1)
        result, doc = self.heal_json('--cell', self.cell2.uuid)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([self.cell2.uuid],
                         [c['cell_uuid'] for c in doc['cells']])
        self.assertEqual([(in_cell2, 'healed')],
                         [(r['instance_uuid'], r['status'])
                          for r in doc['results']])
        self.assertEqual(before, self.deployment.spec_text(in_cell1))


class InstanceOptionTest(deployment_case.DeploymentTestCase):

    def test_only_that_instance(self):
        others = [self.add_drifted(self.cell1), self.add_drifted(self.cell2)]
        target = self.add_drifted(self.cell1)
        others.append(self.add_drifted(self.cell1))
        before = [self.deployment.spec_text(u) for u in others]
        result, doc = self.heal_json('--instance', target)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(1, doc['summary']['instances_checked'])
        self.assertEqual([(target, 'healed')],
                         [(r['instance_uuid'], r['status'])
                          for r in doc['results']])
        self.assertEqual(before, [self.deployment.spec_text(u)
                                  for u in others])

    def test_upper_case_uuid(self):
        target = self.add_drifted(self.cell2)
        result, doc = self.heal_json('--instance', target.upper())
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(target, doc['results'][0]['instance_uuid'])

    def test_instance_in_cell0(self):
        uuid = self.add_drifted(self.cell0, host=None, vm_state='error')
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json('--instance', uuid)
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual([(uuid, 'skipped', 'cell0')],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in doc['results']])
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def test_instance_whose_mapping_names_no_cell(self):
        # Its row is in cell1: judged there, as a full walk judges it,
        # never answered with "nothing to heal" unchecked.
        uuid = self.add_drifted(self.cell1)
        t = tables.instance_mappings
        with self.deployment.api_engine.begin() as conn:
            conn.execute(t.update().where(t.c.instance_uuid == uuid).values(
                cell_id=None))
        result, doc = self.heal_json('--instance', uuid)
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual([(self.cell1.uuid, 'error',
                           'instance-mapped-elsewhere')],
                         [(r['cell_uuid'], r['status'], r['reason'])
                          for r in doc['results']])


class InvalidInputTest(deployment_case.DeploymentTestCase):
    """Exit 127 with one line on stderr and nothing on stdout."""

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        self.before = self.deployment.spec_text(self.drifted)

    def assertInvalid(self, result, *expected):
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual('', result.stdout)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        for text in expected:
            self.assertIn(text, lines[0])
        self.assertEqual(self.before,
                         self.deployment.spec_text(self.drifted))

    def test_unknown_instance(self):
        unknown = str(uuidlib.uuid4())
        self.assertInvalid(self.heal('--instance', unknown), unknown)

    def test_instance_missing_from_every_cell(self):
        # A mapping whose instance no cell holds; an instance mapped to
        # another cell than the one holding it is an error finding instead
        # (see test_isolation).
        missing = str(uuidlib.uuid4())
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.instance_mappings.insert().values(
                instance_uuid=missing, cell_id=self.cell2.id,
                project_id=dep.PROJECT_ID, user_id=dep.USER_ID,
                queued_for_delete=False))
        self.assertInvalid(self.heal('--instance', missing), missing)

    def test_unknown_cell(self):
        unknown = str(uuidlib.uuid4())
        self.assertInvalid(self.heal('--cell', unknown), unknown)

    def test_cell0(self):
        self.assertInvalid(self.heal('--cell', dep.CELL0_UUID))

    def test_argument_errors(self):
        """Arguments refused before any database is read write nothing.

        How each is parsed is unit-tested in test_cli; here a real
        deployment is configured and must stay untouched.
        """
        cases = [
            (('--instance', 'not-a-uuid'), ('not-a-uuid',)),
            (('--instance', self.drifted, '--cell', self.cell1.uuid), ()),
            (('--force',), ('--force',)),
            (('--max-count', '0'), ('--max-count',)),
            (('--max-count', 'abc'), ('--max-count',)),
            (('--batch-size', '-1'), ('--batch-size',)),
        ]
        for args, expected in cases:
            self.assertInvalid(self.heal(*args), *expected)

    def test_missing_api_connection(self):
        config = self.write_config_text(
            '[database]\nconnection = %s\n' % self.db.reference_url())
        self.assertInvalid(self.heal(config_file=config),
                           '[api_database]/connection')

    def test_missing_config_file(self):
        config = self.write_config_text('') + '.missing'
        self.assertInvalid(self.heal(config_file=config))


class MaxCountTest(deployment_case.DeploymentTestCase):

    def statuses(self, doc):
        return [r['status'] for r in doc['results']]

    def test_across_cells(self):
        drifted = ([self.add_drifted(self.cell1) for _ in range(3)]
                   + [self.add_drifted(self.cell2) for _ in range(3)])
        before = [self.deployment.spec_text(u) for u in drifted]
        result, doc = self.heal_json('--max-count', '4')
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual(4, doc['summary']['healed'])
        self.assertTrue(doc['more_remain'])
        changed = [b != self.deployment.spec_text(u)
                   for u, b in zip(drifted, before)]
        self.assertEqual([True] * 4 + [False] * 2, changed)
        result, doc = self.heal_json('--max-count', '4')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['healed', 'healed'], self.statuses(doc))
        self.assertFalse(doc['more_remain'])
        self.assertEqual(4, self.heal('--max-count', '4').code)

    def test_dry_run(self):
        """With --dry-run, instances that would be healed count."""
        first = self.add_drifted(self.cell2)
        self.add_drifted(self.cell2)
        result, doc = self.heal_json('--dry-run', '--max-count', '1')
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual([(first, 'drifted')],
                         [(r['instance_uuid'], r['status'])
                          for r in doc['results']])

    def test_limit_inside_a_cell_before_an_empty_cell(self):
        """Instances left in cell1 still count when cell2 is empty."""
        self.add_drifted(self.cell1)
        left = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(left)
        result, doc = self.heal_json('--max-count', '1')
        self.assertEqual(['healed'], self.statuses(doc))
        self.assertEqual(before, self.deployment.spec_text(left))
        self.assertTrue(doc['more_remain'])
        self.assertEqual(1, result.code, result.stderr)

    def test_limit_at_the_very_last_instance(self):
        """Reaching the limit on the last instance leaves nothing to do."""
        self.add_consistent(self.cell1)
        self.add_drifted(self.cell1)
        self.add_consistent(self.cell2)
        self.add_drifted(self.cell2)
        result, doc = self.heal_json('--max-count', '2')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['healed', 'healed'], self.statuses(doc))
        self.assertFalse(doc['more_remain'])
        self.assertEqual(4, doc['summary']['instances_checked'])

    def test_limit_at_the_end_of_a_cell(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell1)
        result, doc = self.heal_json('--max-count', '2')
        self.assertEqual(0, result.code, result.stderr)
        self.assertFalse(doc['more_remain'])

    def test_unchecked_instances_remain(self):
        """Instances left unchecked after the limit make it exit 1."""
        self.add_drifted(self.cell1)
        self.add_consistent(self.cell2)
        result, doc = self.heal_json('--max-count', '1')
        self.assertEqual(1, result.code, result.stderr)
        self.assertEqual(1, doc['summary']['instances_checked'])
        self.assertEqual(4, self.heal('--max-count', '1').code)


class BatchTest(deployment_case.DeploymentTestCase):
    """Keyset pagination: any batch size gives the same results."""

    def setUp(self):
        super().setUp()
        # Seven live instances; drift at the first, the last and position
        # 3 (a page boundary for sizes 2 and 3); a deleted row in between.
        self.live = []
        for position in range(7):
            if position in (0, 3, 6):
                self.live.append(self.add_drifted(self.cell1))
            elif position == 4:
                self.live.append(self.add_drifted(
                    self.cell1, task_state='migrating'))
                self.add_drifted(self.cell1, deleted=True)
            else:
                self.live.append(self.add_consistent(self.cell1))

    def test_same_results_for_any_batch_size(self):
        result, expected = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(7, expected['summary']['instances_checked'])
        self.assertEqual([self.live[i] for i in (0, 3, 4, 6)],
                         [r['instance_uuid'] for r in expected['results']])
        for size in ('1', '2', '3', '7'):
            result, doc = self.heal_json('--dry-run', '--batch-size', size)
            self.assertEqual(0, result.code, result.stderr)
            self.assertEqual(expected['summary'], doc['summary'], size)
            self.assertEqual(expected['results'], doc['results'], size)

    def test_heal_in_small_batches(self):
        result, doc = self.heal_json('--batch-size', '2')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(7, doc['summary']['instances_checked'])
        self.assertEqual([self.live[i] for i in (0, 3, 6)],
                         [r['instance_uuid'] for r in doc['results']
                          if r['status'] == 'healed'])
        self.assertEqual(4, self.heal('--batch-size', '2').code)
