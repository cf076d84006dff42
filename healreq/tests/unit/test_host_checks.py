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

"""The pure rules of ``nova-heal hosts``."""

import json

import testtools

from healreq.heal import host_checks as checks
from healreq.testing import deployment as dep

HOST = dep.host_topology({0: [0, 1, 2, 3], 1: [4, 5, 6, 7]},
                         siblings={0: [[0, 2], [1, 3]]})


def _cell(cell_id, pins, policy='dedicated', version='1.6', **fields):
    data = {'id': cell_id, 'cpuset': [], 'pcpuset': sorted(pins),
            'memory': 512, 'cpu_policy': policy,
            'cpu_pinning_raw': {str(v): p for v, p in pins.items()}}
    data.update(fields)
    return dep.envelope('InstanceNUMACell', version, data)


def _topology(*cells):
    return dep.envelope('InstanceNUMATopology', '1.3',
                        {'cells': list(cells), 'instance_uuid': 'u'})


class PinnedCpusTest(testtools.TestCase):

    def test_none_pins_nothing(self):
        self.assertEqual({}, checks.pinned_cpus(None))
        self.assertEqual({}, checks.pinned_cpus('null'))

    def test_pins_by_host_cell(self):
        self.assertEqual({0: {1, 3}, 1: {5}}, checks.pinned_cpus(
            json.dumps(_topology(_cell(0, {0: 1, 1: 3}),
                                 _cell(1, {2: 5})))))

    def test_shared_and_unset_policies_pin_nothing(self):
        self.assertEqual({}, checks.pinned_cpus(_topology(
            _cell(0, {0: 1}, policy='shared'), _cell(1, {0: 5},
                                                     policy=None))))

    def test_mixed_pins_its_dedicated_part(self):
        self.assertEqual({0: {2}}, checks.pinned_cpus(_topology(
            _cell(0, {1: 2}, policy='mixed', cpuset=[0]))))

    def test_emulator_threads_count(self):
        self.assertEqual({0: {1, 3}}, checks.pinned_cpus(_topology(
            _cell(0, {0: 1}, cpuset_reserved=[3]))))

    def test_isolate_takes_the_siblings_where_the_host_is_known(self):
        topology = _topology(_cell(0, {0: 0}, cpu_thread_policy='isolate'))
        self.assertEqual({0: {0}}, checks.pinned_cpus(topology))
        self.assertEqual({0: {0, 2}}, checks.pinned_cpus(topology, HOST))

    def test_unreadable(self):
        for bad in ('{', json.dumps({'cells': 3}), _topology(
                _cell(0, {0: 'x'})), _topology(
                _cell(0, {}, cpu_pinning_raw=[1]))):
            self.assertRaises(checks.TopologyError, checks.pinned_cpus, bad)

    def test_errors_name_the_cell_and_field(self):
        where = 'instance_extra.numa_topology.cells[1]'
        for cell, message in (
                (_cell(1, {0: True}), where + '.cpu_pinning_raw is not an '
                 'integer: True'),
                (_cell('x', {0: 1}), where + '.id is not an integer'),
                (_cell(1, {}, cpuset_reserved=['y']),
                 where + '.cpuset_reserved is not an integer'),
                (7, where + ' is not an object primitive')):
            error = self.assertRaises(
                checks.TopologyError, checks.pinned_cpus,
                _topology(_cell(0, {0: 0}), cell))
            self.assertTrue(str(error).startswith(message), str(error))

    def test_integer_strings_pin_as_integers(self):
        # IntegerField coerces "3"; the fast path must not skip that.
        self.assertEqual({0: {3, 4}}, checks.pinned_cpus(_topology(
            _cell(0, {0: '3'}, cpuset_reserved=['4']))))


class DedicatedCpusTest(testtools.TestCase):

    def test_pcpusets_by_cell(self):
        self.assertEqual({0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}},
                         checks.dedicated_cpus(HOST))

    def test_unknown_without_topology_or_pcpuset(self):
        self.assertIsNone(checks.dedicated_cpus(None))
        old = dep.envelope('NUMATopology', '1.2', {'cells': [dep.envelope(
            'NUMACell', '1.4', {'id': 0, 'cpuset': [0, 1]})]})
        self.assertIsNone(checks.dedicated_cpus(old))


class SharingProviderTest(testtools.TestCase):

    def test_trait_on_it_or_above(self):
        parents = {1: None, 2: 1, 3: 2, 4: None}
        traits = {1: {'MISC_SHARES_VIA_AGGREGATE'}, 4: {'CUSTOM_X'}}
        self.assertTrue(checks.is_sharing_provider(1, parents, traits))
        self.assertTrue(checks.is_sharing_provider(3, parents, traits))
        self.assertFalse(checks.is_sharing_provider(4, parents, traits))

    def test_a_loop_ends(self):
        self.assertFalse(checks.is_sharing_provider(1, {1: 2, 2: 1}, {}))


def _record(**kwargs):
    values = dict(host='h1', cell_uuid='c1', service={'host': 'h1'},
                  compute_up=True,
                  nodes=[{'id': 1, 'uuid': 'n1', 'hypervisor_hostname': 'hv1',
                          'numa_topology': HOST}],
                  providers={'n1': {'uuid': 'n1', 'name': 'hv1',
                                    'generation': 7, 'aggregates': []}})
    values.update(kwargs)
    return checks.HostRecord(**values)


class EvaluateTest(testtools.TestCase):

    def test_consistent_is_none(self):
        self.assertIsNone(checks.evaluate(_record(), {}))

    def test_stale_alone_sets_no_aggregate(self):
        record = _record()
        record.providers['n1']['aggregates'] = ['a1', 'a2']
        result = checks.evaluate(record, {'a1': {'uuid': 'a1', 'name': 'x'},
                                          'a2': {'uuid': 'a2', 'name': 'y'}})
        self.assertEqual(['aggregate-stale'], result.problems)
        self.assertEqual(2, len(result.details))
        self.assertEqual(['openstack --os-placement-api-version 1.19 '
                          'resource provider aggregate set --generation 7 '
                          'n1'], result.remedy)

    def test_error_outranks_problems(self):
        record = _record(aggregates=[{'uuid': 'a1', 'name': 'x'}],
                         instances=[{'uuid': 'i1', 'node': 'hv1',
                                     'vm_state': 'active',
                                     'task_state': None,
                                     'numa_topology': '{'}])
        result = checks.evaluate(record, {'a1': {'uuid': 'a1',
                                                 'name': 'x'}})
        self.assertEqual(('error', ['aggregate-missing']),
                         (result.status, result.problems))

    def test_ended_migrations_do_not_skip(self):
        for status, reason in (('confirmed', None),
                               ('running', 'migration-in-progress'),
                               ('done', 'evacuation-not-cleaned')):
            record = _record(migrations=[{'status': status,
                                          'migration_type': 'evacuation'}])
            self.assertEqual(reason, checks.skip_reason(record))

    def test_detail_keys_are_the_contract(self):
        self.assertEqual(set(checks.HOST_REASONS[checks.MISMATCHED]),
                         set(checks.DETAIL_KEYS))
