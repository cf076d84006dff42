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

"""Finding and healing flavor drift, and how the run reports it."""

import copy
import datetime
import json

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import clocks
from healreq.tests.functional import deployment_case

SEED = demo.SEED_INSTANCE
SEED_CHANGE = 'flavor: e2.medium(831) -> a2.medium(982)'
SUMMARY_KEYS = ('instances_checked', 'consistent', 'drifted', 'healed',
                'skipped', 'errors', 'conflicts')
RESULT_KEYS = ('instance_uuid', 'cell_uuid', 'status', 'drift', 'reason')


def without_flavor(spec):
    spec = copy.deepcopy(spec)
    del spec['nova_object.data']['flavor']
    return spec


class SeedCaseTest(deployment_case.DeploymentTestCase):
    """The reported failed resize: a2.medium runs, the spec says e2."""

    def setUp(self):
        super().setUp()
        self.consistent = self.add_consistent(self.cell2)

    def add_seed(self, spec_flavor=demo.E2_MEDIUM):
        return self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=spec_flavor,
            new=demo.E2_MEDIUM, uuid=SEED, migrations=[dict(
                old_instance_type_id=982, new_instance_type_id=831,
                status='error')])

    def test_dry_run_finds_it(self):
        self.add_seed()
        before = self.deployment.spec_text(SEED)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(1, doc['summary']['drifted'])
        self.assertEqual(0, doc['summary']['healed'])
        finding = doc['results'][0]
        self.assertEqual(SEED, finding['instance_uuid'])
        self.assertEqual(self.cell1.uuid, finding['cell_uuid'])
        self.assertEqual('drifted', finding['status'])
        self.assertEqual(['flavor'], finding['drift'])
        self.assertEqual('failed-resize-leftover', finding['reason'])
        self.assertEqual(before, self.deployment.spec_text(SEED))

    def test_dry_run_text(self):
        self.add_seed()
        before = self.deployment.spec_text(SEED)
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn(SEED_CHANGE, result.stdout)
        self.assertEqual(before, self.deployment.spec_text(SEED))

    def test_heal(self):
        self.add_seed()
        before = self.spec(SEED)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual('healed', doc['results'][0]['status'])
        self.assertEqual(1, doc['summary']['healed'])
        cur = self.instance_flavors(self.cell1, SEED)['cur']
        after = self.spec(SEED)
        healed = after['nova_object.data']['flavor']
        self.assertEqual(cur['nova_object.data'], healed['nova_object.data'])
        self.assertEqual('Flavor', healed['nova_object.name'])
        self.assertEqual('1.2', healed['nova_object.version'])
        self.assertEqual(without_flavor(before), without_flavor(after))

    def test_heal_writes_json_as_nova_does(self):
        self.add_seed()
        self.assertEqual(0, self.heal().code)
        text = self.deployment.spec_text(SEED)
        self.assertEqual(json.dumps(json.loads(text)), text)

    def test_heal_sets_updated_at(self):
        self.add_seed()
        self.assertIsNone(self.spec_updated_at(SEED))
        start = clocks.utcnow() - datetime.timedelta(seconds=1)
        self.assertEqual(0, self.heal().code)
        updated_at = self.spec_updated_at(SEED)
        self.assertIsNotNone(updated_at)
        self.assertTrue(start <= updated_at <= clocks.utcnow(),
                        updated_at)

    def test_heal_keeps_flavor_version(self):
        """A spec saved with Flavor 1.1 gets a 1.1 flavor back."""
        self.add_seed(spec_flavor=dep.flavor(
            831, 'e2.medium', root_gb=25, flavorid='022050',
            extra_specs=demo.E2_MEDIUM['nova_object.data']['extra_specs'],
            version='1.1'))
        self.assertEqual(0, self.heal().code)
        healed = self.spec_flavor(SEED)
        self.assertEqual('1.1', healed['nova_object.version'])
        self.assertNotIn('description', healed['nova_object.data'])
        expected = dict(self.instance_flavors(self.cell1, SEED)['cur']
                        ['nova_object.data'])
        del expected['description']
        self.assertEqual(expected, healed['nova_object.data'])

    def test_second_run_has_nothing_to_heal(self):
        self.add_seed()
        self.assertEqual(0, self.heal().code)
        healed = self.deployment.spec_text(SEED)
        result = self.heal()
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(healed, self.deployment.spec_text(SEED))

    def test_text_cell_summary(self):
        self.add_seed()
        self.add_consistent(self.cell1)
        result = self.heal('--dry-run')
        lines = result.stdout.splitlines()
        self.assertIn('Cell %s(cell1): checked 2, consistent 1, drifted 1, '
                      'healed 0, skipped 0, errors 0, conflicts 0'
                      % self.cell1.uuid, lines)
        self.assertIn('Cell %s(cell2): checked 1, consistent 1, drifted 0, '
                      'healed 0, skipped 0, errors 0, conflicts 0'
                      % self.cell2.uuid, lines)
        self.assertIn('Total: checked 3, consistent 2, drifted 1, healed 0, '
                      'skipped 0, errors 0, conflicts 0', lines)


class ReportTest(deployment_case.DeploymentTestCase):

    def test_json_document(self):
        drifted = self.add_drifted(self.cell1)
        self.add_consistent(self.cell1)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIsInstance(doc, dict)
        for key in SUMMARY_KEYS:
            self.assertIsInstance(doc['summary'][key], int, key)
        self.assertEqual(2, doc['summary']['instances_checked'])
        self.assertEqual(1, doc['summary']['consistent'])
        self.assertEqual(1, len(doc['results']))
        finding = doc['results'][0]
        for key in RESULT_KEYS:
            self.assertIn(key, finding)
        self.assertEqual(drifted, finding['instance_uuid'])
        self.assertEqual(self.cell1.uuid, finding['cell_uuid'])

    def test_consistent_instances_not_listed(self):
        for _ in range(3):
            self.add_consistent(self.cell1)
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual(3, doc['summary']['consistent'])
        self.assertEqual([], doc['results'])

    def test_old_flavor_leftover(self):
        uuid = self.add_drifted(self.cell2, old=demo.M1_SMALL)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stderr)
        finding = doc['results'][0]
        self.assertEqual(uuid, finding['instance_uuid'])
        self.assertEqual('healed', finding['status'])
        self.assertEqual('old-flavor-leftover', finding['reason'])
        self.assertEqual(['flavor-leftover-old'],
                         [n['code'] for n in finding['notes']])

    def test_failed_resize_migration_explains_drift(self):
        """Without flavor['new'], an error migration still explains it."""
        self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM, uuid=SEED,
            migrations=[dict(old_instance_type_id=982,
                             new_instance_type_id=831, status='error')])
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual('failed-resize-leftover', doc['results'][0]['reason'])

    def test_unexplained_drift(self):
        changed = copy.deepcopy(demo.M1_SMALL)
        changed['nova_object.data']['extra_specs'] = {'hw:cpu_policy': 'x'}
        uuid = self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                            spec_flavor=changed)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stderr)
        finding = doc['results'][0]
        self.assertEqual('spec-drift', finding['reason'])
        self.assertEqual([{'field': 'flavor',
                           'before': 'm1.small(2) [extra_specs differ]',
                           'after': 'm1.small(2)'}], finding['changes'])
        self.assertEqual({}, self.spec_flavor(uuid)['nova_object.data']
                         ['extra_specs'])

    def test_leftover_notice_for_consistent_instance(self):
        uuid = self.deployment.add_instance(self.cell1, demo.A2_MEDIUM,
                                            new=demo.E2_MEDIUM)
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual([], doc['results'])
        self.assertEqual([uuid], [n['instance_uuid'] for n in doc['notices']])
        self.assertEqual('consistent', doc['notices'][0]['status'])
        self.assertEqual(['flavor-leftover-new'],
                         [n['code'] for n in doc['notices'][0]['notes']])
        text = self.heal().stdout
        self.assertIn('NOTICE    %s cell1 flavor-leftover-new: ' % uuid, text)
