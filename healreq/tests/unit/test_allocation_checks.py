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

"""The pure comparison of ``nova-heal allocations`` (a fake expectation)."""

import collections

import testtools

from healreq.heal import allocation_checks as checks

Expected = collections.namedtuple('Expected', 'resources not_checked')
NODE = 'node-provider'
SHARED = 'shared-storage-provider'
WANTED = {'VCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40}


def record(found, **instance):
    values = dict(uuid='instance', host='compute-1', node='compute-1',
                  vm_state='active', task_state=None, deleted=0,
                  hidden=False, project_id='p', user_id='u')
    values.update(instance)
    return checks.AllocationRecord(instance=values, cell_uuid='cell',
                                   compute_node={'uuid': NODE},
                                   found=found)


class EvaluateTest(testtools.TestCase):

    def test_consistent_is_none(self):
        self.assertIsNone(checks.evaluate(
            record({'instance': {NODE: dict(WANTED)}}),
            Expected(WANTED, ())))

    def test_classes_not_derived_are_ignored(self):
        found = {'instance': {NODE: dict(WANTED), 'gpu': {'VGPU': 1}}}
        self.assertIsNone(checks.evaluate(record(found),
                                          Expected(WANTED, ('VGPU',))))

    def test_disk_on_a_sharing_provider_is_not_checked(self):
        found = {'instance': {NODE: {'VCPU': 2, 'MEMORY_MB': 4096},
                              SHARED: {'DISK_GB': 40}}}
        self.assertIsNone(checks.evaluate(record(found),
                                          Expected(WANTED, ())))

    def test_remedy_avoids_heal_allocations_where_it_derives_otherwise(self):
        pinned = {'PCPU': 2, 'MEMORY_MB': 4096, 'DISK_GB': 40}
        result = checks.evaluate(
            record({'instance': {NODE: dict(WANTED)}}),
            Expected(pinned, ()), heal_resources=WANTED)
        self.assertEqual(['wrong-flavor'], result.problems)
        self.assertTrue(result.remedy[0].startswith(
            '# heal_allocations would allocate DISK_GB=40, MEMORY_MB=4096, '
            'VCPU=2'))
        self.assertIn('--allocation rp=%s,DISK_GB=40,MEMORY_MB=4096,PCPU=2'
                      % NODE, result.remedy[1])

    def test_in_flight_never_flagged_even_with_a_leftover(self):
        migration = {'uuid': 'migration', 'instance_uuid': 'instance',
                     'status': 'error', 'migration_type': 'resize',
                     'deleted': 0}
        found = {'migration': {NODE: dict(WANTED)}}
        flagged = record(found)
        flagged.migrations = [migration]
        in_flight = record(found, task_state='resize_prep')
        in_flight.migrations = [migration]
        self.assertEqual(['leftover-migration'], checks.evaluate(
            flagged, Expected({}, ())).problems)
        result = checks.evaluate(in_flight, Expected({}, ()))
        self.assertEqual(('skipped', 'task-in-progress', []),
                         (result.status, result.reason, result.problems))
