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

"""Guest NUMA constraints and InstanceNUMATopology primitives."""

import copy
import json

import testtools

from healreq.objects import numa
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq.objects import primitive

UUID = '7c1e5b0a-3f2d-4e9a-8b6c-1d0f2e3a4b5c'


def _cell(index, cpuset=(), pcpuset=(), memory=1024, pagesize=None,
          policy=None, thread_policy=None):
    return numa.Cell(id=index, cpuset=frozenset(cpuset),
                     pcpuset=None if pcpuset is None else frozenset(pcpuset),
                     memory=memory, pagesize=pagesize, cpu_policy=policy,
                     cpu_thread_policy=thread_policy)


def _cell_primitive(version='1.6', **data):
    values = {'id': 0, 'cpuset': [], 'pcpuset': [0, 1],
              'cpuset_reserved': None, 'memory': 1024, 'pagesize': None,
              'cpu_pinning_raw': None, 'cpu_policy': 'dedicated',
              'cpu_thread_policy': None}
    values.update(data)
    for key in [k for k, v in values.items() if v is _ABSENT]:
        del values[key]
    return primitive.wrap('InstanceNUMACell', version, values)


def _topology_primitive(cells, version='1.3', **data):
    values = {'cells': cells, 'emulator_threads_policy': None}
    values.update(data)
    return primitive.wrap('InstanceNUMATopology', version, values)


_ABSENT = object()


class ConstraintsTest(testtools.TestCase):

    def constrain(self, specs=None, props=None, vcpus=4, memory_mb=4096):
        return numa_constraints.constraints(vcpus, memory_mb, specs or {},
                                            props or {})

    def assertRefused(self, nova_exception, specs=None, props=None,
                      vcpus=4, memory_mb=4096):
        error = self.assertRaises(numa.ConstraintError, self.constrain,
                                  specs, props, vcpus, memory_mb)
        self.assertEqual(nova_exception, error.nova_exception)
        self.assertNotEqual('', str(error))
        return error

    def test_error_is_value_error(self):
        error = numa.ConstraintError('ImageNUMATopologyForbidden', 'why')
        self.assertIsInstance(error, ValueError)
        self.assertEqual('ImageNUMATopologyForbidden', error.nova_exception)
        self.assertEqual('why', str(error))

    # Reference examples.

    def test_plain_flavor_has_no_topology(self):
        self.assertIsNone(self.constrain())
        self.assertIsNone(self.constrain({'hw:cpu_policy': 'shared'}))

    def test_mixed_with_dedicated_mask(self):
        topology = self.constrain({'hw:cpu_policy': 'mixed',
                                   'hw:cpu_dedicated_mask': '^0-1'})
        self.assertEqual(
            numa.Topology(cells=(_cell(0, {0, 1}, {2, 3}, 4096,
                                       policy='mixed'),),
                          emulator_threads_policy=None),
            topology)

    def test_pcpu_resources_mean_dedicated(self):
        topology = self.constrain({'resources:PCPU': '4'})
        self.assertEqual((_cell(0, (), {0, 1, 2, 3}, 4096,
                                policy='dedicated'),), topology.cells)

    def test_reference_pinned_two_nodes(self):
        topology = self.constrain(
            {'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2',
             'hw:mem_page_size': 'large',
             'hw:emulator_threads_policy': 'share'},
            {'hw_mem_page_size': '2048', 'hw_cpu_thread_policy': 'prefer',
             'traits_required': ['CUSTOM_SSD']}, memory_mb=8192)
        self.assertEqual(numa.Topology(
            cells=(_cell(0, (), {0, 1}, 4096, 2048, 'dedicated', 'prefer'),
                   _cell(1, (), {2, 3}, 4096, 2048, 'dedicated', 'prefer')),
            emulator_threads_policy='share'), topology)

    def test_node_lists_alone_make_no_topology(self):
        self.assertIsNone(self.constrain({'hw:numa_cpus.0': '0-3',
                                          'hw:numa_mem.0': '4096'}))

    # CPU policy.

    def test_flavor_dedicated_wins(self):
        topology = self.constrain({'hw:cpu_policy': 'dedicated'},
                                  {'hw_cpu_policy': 'shared'})
        self.assertEqual('dedicated', topology.cells[0].cpu_policy)

    def test_image_policy_without_flavor_policy(self):
        topology = self.constrain(props={'hw_cpu_policy': 'dedicated'})
        self.assertEqual(frozenset(range(4)), topology.cells[0].pcpuset)

    def test_empty_flavor_policy_is_unset(self):
        topology = self.constrain({'hw:cpu_policy': ''},
                                  {'hw_cpu_policy': 'dedicated'})
        self.assertEqual('dedicated', topology.cells[0].cpu_policy)

    def test_image_may_not_pin_against_flavor(self):
        self.assertRefused('ImageCPUPinningForbidden',
                           {'hw:cpu_policy': 'shared'},
                           {'hw_cpu_policy': 'dedicated'})
        self.assertRefused('ImageCPUPinningForbidden',
                           {'hw:cpu_policy': 'shared'},
                           {'hw_cpu_policy': 'mixed'})
        self.assertRefused('ImageCPUPinningForbidden',
                           {'hw:cpu_policy': 'mixed',
                            'hw:cpu_dedicated_mask': '0'},
                           {'hw_cpu_policy': 'dedicated'})

    def test_invalid_policy(self):
        self.assertRefused('InvalidCPUAllocationPolicy',
                           {'hw:cpu_policy': 'Dedicated'})
        self.assertRefused('InvalidCPUThreadAllocationPolicy',
                           {'hw:cpu_thread_policy': 'sometimes'})

    # CPU thread policy.

    def test_flavor_prefer_wins(self):
        topology = self.constrain(
            {'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer'},
            {'hw_cpu_thread_policy': 'isolate'})
        self.assertEqual('prefer', topology.cells[0].cpu_thread_policy)

    def test_thread_policy_conflict(self):
        self.assertRefused('ImageCPUThreadPolicyForbidden',
                           {'hw:cpu_policy': 'dedicated',
                            'hw:cpu_thread_policy': 'isolate'},
                           {'hw_cpu_thread_policy': 'require'})

    def test_thread_policy_needs_pinning(self):
        self.assertRefused('CPUThreadPolicyConfigurationInvalid',
                           {'hw:cpu_thread_policy': 'isolate'})

    def test_empty_thread_policy_fails_in_the_cell(self):
        # Nova's cell field rejects '' once a topology is built.
        self.assertIsNone(self.constrain({'hw:cpu_thread_policy': ''}))
        self.assertRefused('ValueError', {'hw:cpu_thread_policy': '',
                                          'hw:numa_nodes': '1'})

    # Realtime, dedicated mask, emulator threads.

    def test_realtime_mask(self):
        topology = self.constrain({'hw:cpu_policy': 'dedicated',
                                   'hw:cpu_realtime': 'yes',
                                   'hw:cpu_realtime_mask': '^0'})
        self.assertEqual(frozenset(range(4)), topology.cells[0].pcpuset)

    def test_realtime_needs_a_free_vcpu_or_emulator_policy(self):
        specs = {'hw:cpu_policy': 'dedicated', 'hw:cpu_realtime': 'yes'}
        self.assertRefused('RealtimeMaskNotFoundOrInvalid', specs)
        specs['hw:emulator_threads_policy'] = 'share'
        self.assertIsNotNone(self.constrain(specs))

    def test_realtime_mask_errors(self):
        specs = {'hw:cpu_policy': 'dedicated', 'hw:cpu_realtime': 'true'}
        for mask in ('^0-3', '4', '0-9'):
            self.assertRefused('RealtimeMaskNotFoundOrInvalid',
                               dict(specs, **{'hw:cpu_realtime_mask': mask}))
        self.assertRefused('Invalid',
                           dict(specs, **{'hw:cpu_realtime_mask': 'x'}))

    def test_image_realtime_mask_wins(self):
        specs = {'hw:cpu_policy': 'mixed', 'hw:cpu_realtime': 'yes',
                 'hw:cpu_realtime_mask': '^0'}
        topology = self.constrain(specs, {'hw_cpu_realtime_mask': '^0-1'})
        self.assertEqual((frozenset({0, 1}), frozenset({2, 3})),
                         (topology.cells[0].cpuset,
                          topology.cells[0].pcpuset))

    def test_realtime_needs_pinning(self):
        self.assertRefused('RealtimeConfigurationInvalid',
                           {'hw:cpu_realtime': 'yes',
                            'hw:cpu_realtime_mask': '^0'})

    def test_mixed_needs_exactly_one_mask(self):
        self.assertRefused('RequiredMixedOrRealtimeCPUMask',
                           {'hw:cpu_policy': 'mixed'})
        self.assertRefused('RequiredMixedOrRealtimeCPUMask',
                           {'hw:cpu_policy': 'mixed',
                            'hw:cpu_dedicated_mask': '0',
                            'hw:cpu_realtime': 'yes',
                            'hw:cpu_realtime_mask': '^0'})

    def test_dedicated_mask_errors(self):
        for mask in ('0-3', '^0-3', '4-5', '9'):
            self.assertRefused('InvalidMixedInstanceDedicatedMask',
                               {'hw:cpu_policy': 'mixed',
                                'hw:cpu_dedicated_mask': mask})
        self.assertRefused('RequiredMixedInstancePolicy',
                           {'hw:cpu_policy': 'dedicated',
                            'hw:cpu_dedicated_mask': '0'})
        self.assertRefused('RequiredMixedInstancePolicy',
                           {'hw:cpu_dedicated_mask': '0'})

    def test_emulator_threads_policy(self):
        topology = self.constrain({'hw:cpu_policy': 'dedicated',
                                   'hw:emulator_threads_policy': 'isolate'})
        self.assertEqual('isolate', topology.emulator_threads_policy)
        self.assertRefused('InvalidEmulatorThreadsPolicy',
                           {'hw:emulator_threads_policy': 'float'})
        self.assertRefused('BadRequirementEmulatorThreadsPolicy',
                           {'hw:emulator_threads_policy': 'isolate'})

    # Explicit resources and the hyperthreading trait.

    def test_resources(self):
        self.assertIsNone(self.constrain({'resources:VCPU': '4'}))
        topology = self.constrain({'resources:PCPU': '2',
                                   'resources1:PCPU': '2'})
        self.assertEqual('dedicated', topology.cells[0].cpu_policy)
        topology = self.constrain({'resources:PCPU': '5',
                                   'hw:emulator_threads_policy': 'isolate'})
        self.assertEqual('isolate', topology.emulator_threads_policy)
        for specs in ({'resources:PCPU': '4', 'hw:cpu_policy': 'dedicated'},
                      {'resources:VCPU': '2', 'resources:PCPU': '2'},
                      {'resources:PCPU': '3'},
                      {'resources:PCPU': '4',
                       'hw:emulator_threads_policy': 'isolate'}):
            self.assertRefused('InvalidRequest', specs)
        # Unparsable amounts are left to placement's validation.
        self.assertIsNone(self.constrain({'resources:PCPU': 'four'}))

    def test_hyperthreading_trait(self):
        specs = {'hw:cpu_policy': 'dedicated'}
        topology = self.constrain(
            dict(specs, **{'trait:HW_CPU_HYPERTHREADING': 'forbidden'}))
        self.assertEqual('isolate', topology.cells[0].cpu_thread_policy)
        topology = self.constrain(
            specs, {'traits_required': ['HW_CPU_HYPERTHREADING']})
        self.assertEqual('require', topology.cells[0].cpu_thread_policy)
        self.assertRefused('InvalidRequest',
                           dict(specs, **{'trait1:HW_CPU_HYPERTHREADING':
                                          'required',
                                          'hw:cpu_thread_policy': 'prefer'}))

    def test_first_hyperthreading_trait_counts(self):
        topology = self.constrain({'hw:cpu_policy': 'dedicated',
                                   'trait2:HW_CPU_HYPERTHREADING': 'required',
                                   'trait:HW_CPU_HYPERTHREADING': 'forbidden'})
        self.assertEqual('require', topology.cells[0].cpu_thread_policy)

    # Nodes and layouts.

    def test_auto_layout(self):
        topology = self.constrain({'hw:numa_nodes': '2'}, vcpus=4,
                                  memory_mb=2048)
        self.assertEqual((_cell(0, {0, 1}, (), 1024),
                          _cell(1, {2, 3}, (), 1024)), topology.cells)
        topology = self.constrain(props={'hw_numa_nodes': 2})
        self.assertEqual(2, len(topology.cells))

    def test_node_count_errors(self):
        self.assertRefused('ImageNUMATopologyForbidden',
                           {'hw:numa_nodes': '2'}, {'hw_numa_nodes': 2})
        for nodes in ('0', '-1', 'two', ' 2', '02'):
            self.assertRefused('InvalidNUMANodesNumber',
                               {'hw:numa_nodes': nodes})
        self.assertRefused('InvalidNUMANodesNumber',
                           props={'hw_numa_nodes': 0})
        self.assertIsNone(self.constrain({'hw:numa_nodes': ''}))
        self.assertRefused('ImageNUMATopologyAsymmetric',
                           {'hw:numa_nodes': '3'})

    def test_manual_layout(self):
        topology = self.constrain(
            {'hw:numa_nodes': '2', 'hw:cpu_policy': 'mixed',
             'hw:cpu_dedicated_mask': '^0', 'hw:numa_cpus.0': '0,2',
             'hw:numa_cpus.1': '1,3', 'hw:numa_mem.0': '1024',
             'hw:numa_mem.1': '3072'})
        self.assertEqual((_cell(0, {0}, {2}, 1024, policy='mixed'),
                          _cell(1, (), {1, 3}, 3072, policy='mixed')),
                         topology.cells)

    def test_manual_layout_from_image(self):
        topology = self.constrain(
            {'hw:numa_nodes': '2'},
            {'hw_numa_cpus': [{0}, {1, 2, 3}], 'hw_numa_mem': [2048, 2048]})
        self.assertEqual(frozenset({1, 2, 3}), topology.cells[1].cpuset)

    def test_manual_layout_errors(self):
        base = {'hw:numa_nodes': '2', 'hw:numa_mem.0': '2048',
                'hw:numa_mem.1': '2048'}
        for cpus, error in (
                (('0-1', '1-3'), 'ImageNUMATopologyCPUDuplicates'),
                (('0-1', '2-4'), 'ImageNUMATopologyCPUOutOfRange'),
                (('0', '1'), 'ImageNUMATopologyCPUsUnassigned'),
                (('0-3',), 'ImageNUMATopologyIncomplete'),
                (('x', '0'), 'Invalid')):
            specs = dict(base)
            specs.update({'hw:numa_cpus.%d' % i: value
                          for i, value in enumerate(cpus)})
            self.assertRefused(error, specs)
        specs = dict(base, **{'hw:numa_cpus.0': '0-1',
                              'hw:numa_cpus.1': '2-3',
                              'hw:numa_mem.1': '1024'})
        self.assertRefused('ImageNUMATopologyMemoryOutOfRange', specs)
        specs['hw:numa_mem.1'] = 'lots'
        self.assertRefused('ValueError', specs)
        self.assertRefused('ImageNUMATopologyIncomplete',
                           {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1',
                            'hw:numa_cpus.1': '2-3'})
        self.assertRefused('ImageNUMATopologyForbidden',
                           {'hw:numa_nodes': '1', 'hw:numa_cpus.0': '0-3'},
                           {'hw_numa_cpus': [{0, 1, 2, 3}]})

    def test_node_lists_stop_at_a_gap(self):
        self.assertRefused('ImageNUMATopologyIncomplete',
                           {'hw:numa_nodes': '2', 'hw:numa_cpus.0': '0-1',
                            'hw:numa_cpus.2': '2-3', 'hw:numa_mem.0': '2048',
                            'hw:numa_mem.1': '2048'})

    # Page sizes, vPMEM, locked memory, memory encryption.

    def test_page_sizes(self):
        for flavor, image, expected in (
                ('small', None, -1), ('large', None, -2), ('any', None, -3),
                ('2048', None, 2048), ('2MB', None, 2048),
                ('2MiB', None, 2048), ('1GB', None, 1048576),
                ('1.5KB', None, 1), ('large', '2048', 2048),
                ('any', '1GB', 1048576), ('any', 'small', -1)):
            props = {'hw_mem_page_size': image} if image else {}
            topology = self.constrain({'hw:mem_page_size': flavor}, props)
            self.assertEqual(expected, topology.cells[0].pagesize,
                             (flavor, image))

    def test_page_size_errors(self):
        self.assertRefused('MemoryPageSizeForbidden',
                           props={'hw_mem_page_size': '2048'})
        self.assertRefused('MemoryPageSizeForbidden',
                           {'hw:mem_page_size': 'small'},
                           {'hw_mem_page_size': 'large'})
        self.assertRefused('MemoryPageSizeInvalid',
                           {'hw:mem_page_size': 'huge'})
        self.assertRefused('MemoryPageSizeInvalid',
                           {'hw:mem_page_size': 'large'},
                           {'hw_mem_page_size': '2 MB'})
        # isdigit() but not int(): Nova fails with a bare ValueError.
        self.assertRefused('ValueError', {'hw:mem_page_size': '\u00b2'})

    def test_zero_page_size_makes_no_topology(self):
        self.assertIsNone(self.constrain({'hw:mem_page_size': '0'}))

    def test_pmem_makes_a_topology(self):
        topology = self.constrain({'hw:pmem': '4GB,SMALL'})
        self.assertEqual(1, len(topology.cells))
        self.assertIsNone(self.constrain({'hw:pmem': ' , '}))

    def test_locked_memory(self):
        self.assertRefused('LockMemoryForbidden',
                           {'hw:locked_memory': 'true'})
        self.assertRefused('FlavorImageLockedMemoryConflict',
                           {'hw:locked_memory': 'true',
                            'hw:mem_page_size': 'large'},
                           {'hw_locked_memory': False})
        topology = self.constrain({'hw:mem_page_size': 'large'},
                                  {'hw_locked_memory': True})
        self.assertEqual(-2, topology.cells[0].pagesize)

    def test_memory_encryption(self):
        specs = {'hw:mem_encryption': 'true'}
        self.assertRefused('FlavorImageConflict', specs)
        uefi = {'hw_firmware_type': 'uefi'}
        self.assertIsNone(self.constrain(specs, uefi))
        self.assertRefused('FlavorImageConflict', specs,
                           dict(uefi, hw_mem_encryption=False))
        self.assertRefused('InvalidMachineType', specs,
                           dict(uefi, hw_machine_type='pc'))
        self.assertIsNone(self.constrain(
            specs, dict(uefi, hw_machine_type='pc-q35-8.2')))
        tdx = dict(specs, **{'hw:mem_encryption_model': 'intel-tdx'})
        self.assertRefused('StatelessFirmwareRequired', tdx, uefi)
        self.assertRefused('InvalidVideoMode', tdx,
                           dict(uefi, hw_firmware_stateless=True))
        self.assertIsNone(self.constrain(
            tdx, dict(uefi, hw_firmware_stateless=True,
                      hw_video_model='none')))
        self.assertRefused('Invalid',
                           {'hw:mem_encryption_model': 'rot13'},
                           dict(uefi, hw_mem_encryption=True))
        # Locked memory skips the encryption checks.
        self.assertIsNotNone(self.constrain(
            dict(specs, **{'hw:locked_memory': 'yes',
                           'hw:mem_page_size': 'small'})))

    def test_extra_spec_values_must_be_strings(self):
        self.assertRefused('ValueError', {'hw:numa_nodes': None})
        topology = self.constrain({'hw:numa_nodes': 2})
        self.assertEqual(2, len(topology.cells))

    def test_unreadable_cpu_lists_are_invalid(self):
        for spec in ('x', '3-1', '-1', '1-', '^', '^x-2', '0-1048576'):
            self.assertRefused('Invalid', {
                'hw:numa_nodes': '2', 'hw:numa_cpus.0': spec,
                'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '2048',
                'hw:numa_mem.1': '2048'})
            self.assertRefused('Invalid', {
                'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': spec})


class FromPrimitiveTest(testtools.TestCase):

    def read(self, document):
        return numa_primitive.from_primitive(document, 'spec numa_topology')

    def assertRejected(self, document, error=primitive.PrimitiveError):
        return self.assertRaises(error, self.read, document)

    def test_null(self):
        self.assertIsNone(self.read(None))
        self.assertIsNone(self.read('null'))

    def test_reference_spec_and_fitted_instance_agree(self):
        spec_cells = [
            _cell_primitive(id=0, pcpuset=[0, 1], memory=4096, pagesize=2048,
                            cpu_thread_policy='prefer'),
            _cell_primitive(id=1, pcpuset=[2, 3], memory=4096, pagesize=2048,
                            cpu_thread_policy='prefer')]
        spec = _topology_primitive(spec_cells,
                                   emulator_threads_policy='share')
        fitted = copy.deepcopy(spec)
        fitted[primitive.DATA]['instance_uuid'] = UUID
        for host_id, data in zip((1, 2), fitted[primitive.DATA]['cells']):
            data[primitive.DATA]['id'] = host_id
            data[primitive.DATA]['cpu_pinning_raw'] = {'0': 8, '1': 12}
            data[primitive.DATA]['cpuset_reserved'] = [3]
            data[primitive.CHANGES] = ['id']
        expected = numa.Topology(
            cells=(_cell(0, (), {0, 1}, 4096, 2048, 'dedicated', 'prefer'),
                   _cell(1, (), {2, 3}, 4096, 2048, 'dedicated', 'prefer')),
            emulator_threads_policy='share')
        self.assertEqual(expected, self.read(spec))
        self.assertEqual(expected, self.read(fitted))
        self.assertEqual(expected, self.read(json.dumps(fitted)))

    def test_legacy_dedicated_cpuset_is_migrated(self):
        for pcpuset in (_ABSENT, []):
            cell = _cell_primitive('1.4', cpuset=[0, 1], pcpuset=pcpuset,
                                   cpu_thread_policy='isolate')
            self.assertEqual(
                numa.Topology(cells=(_cell(0, (), {0, 1}, 1024,
                                           policy='dedicated',
                                           thread_policy='isolate'),)),
                self.read(_topology_primitive([cell])))

    def test_legacy_cpuset_stamped_1_5_is_inconsistent(self):
        for pcpuset, expected in ((_ABSENT, None), ([], frozenset())):
            cell = _cell_primitive('1.5', cpuset=[0, 1], pcpuset=pcpuset)
            topology = self.read(_topology_primitive([cell]))
            self.assertEqual(
                (frozenset({0, 1}), expected),
                (topology.cells[0].cpuset, topology.cells[0].pcpuset))

    def test_migrated_cell_with_old_stamp_is_kept(self):
        cell = _cell_primitive('1.5', cpuset=[], pcpuset=[0, 1])
        topology = self.read(_topology_primitive([cell]))
        self.assertEqual(frozenset({0, 1}), topology.cells[0].pcpuset)

    def test_inconsistent_dedicated_cell_is_kept(self):
        cell = _cell_primitive('1.6', cpuset=[0], pcpuset=[1])
        topology = self.read(_topology_primitive([cell]))
        self.assertEqual((frozenset({0}), frozenset({1})),
                         (topology.cells[0].cpuset,
                          topology.cells[0].pcpuset))

    def test_shared_cells_get_empty_pcpuset(self):
        cell = _cell_primitive('1.5', cpuset=[0, 1], pcpuset=[1],
                               cpu_policy=None)
        topology = self.read(_topology_primitive([cell]))
        self.assertEqual((frozenset({0, 1}), frozenset()),
                         (topology.cells[0].cpuset,
                          topology.cells[0].pcpuset))

    def test_cells_before_1_4(self):
        cell = _cell_primitive('1.3', cpuset=[0, 1], pcpuset=_ABSENT,
                               cpuset_reserved=_ABSENT)
        # Nova's warning for such a cell reads instance_uuid: a request
        # topology has none, and Nova fails to load it.
        self.assertRejected(_topology_primitive([cell]),
                            numa.UnloadableTopology)
        topology = self.read(_topology_primitive([cell],
                                                 instance_uuid=UUID))
        self.assertEqual(frozenset({0, 1}), topology.cells[0].cpuset)
        self.assertIsNone(topology.cells[0].pcpuset)

    def test_mixed_before_1_6(self):
        cell = _cell_primitive('1.5', cpuset=[0], pcpuset=[1],
                               cpu_policy='mixed')
        self.assertRejected(_topology_primitive([cell]),
                            numa.UnloadableTopology)
        topology = self.read(_topology_primitive([cell],
                                                 instance_uuid=UUID))
        self.assertEqual(frozenset({1}), topology.cells[0].pcpuset)

    def test_dedicated_without_any_cpus(self):
        cell = _cell_primitive(cpuset=[], pcpuset=_ABSENT)
        self.assertRejected(_topology_primitive([cell]),
                            numa.UnloadableTopology)

    def test_unset_pcpuset(self):
        cell = _cell_primitive(cpuset=[0, 1], pcpuset=_ABSENT,
                               cpu_policy='shared')
        self.assertIsNone(
            self.read(_topology_primitive([cell])).cells[0].pcpuset)

    def test_old_topology_has_no_emulator_policy(self):
        document = _topology_primitive([_cell_primitive()], version='1.2')
        del document[primitive.DATA]['emulator_threads_policy']
        self.assertIsNone(self.read(document).emulator_threads_policy)

    def test_pre_liberty_topology(self):
        topology = self.read(json.dumps({'cells': [
            {'id': 3, 'cpus': '0-1', 'mem': {'total': 512},
             'pagesize': 2048},
            {'id': 1, 'cpus': '2,3'}]}))
        self.assertEqual(numa.Topology(
            cells=(_cell(0, {0, 1}, (), 512, 2048),
                   _cell(1, {2, 3}, (), 0))), topology)
        self.assertRejected({'cells': [{'cpus': '0'}]})
        self.assertRejected({'cells': [{'id': 0, 'cpus': 'x'}]})

    def test_malformed(self):
        good = _topology_primitive([_cell_primitive()])
        self.assertIsNotNone(self.read(good))
        self.assertRejected({})
        self.assertRejected([])
        self.assertRejected('{not json')
        self.assertRejected(_topology_primitive(None))
        self.assertRejected(primitive.wrap('InstanceNUMATopology', '1.3',
                                           {}))
        self.assertRejected(_topology_primitive([_cell_primitive()],
                                                version='1.4'))
        self.assertRejected(_topology_primitive([_cell_primitive('1.7')]))
        self.assertRejected(_topology_primitive([_cell_primitive('2.0')]))
        self.assertRejected(_topology_primitive([_cell_primitive('x')]))
        self.assertRejected(_topology_primitive(
            [_cell_primitive()], emulator_threads_policy='float'))
        self.assertRejected(_topology_primitive([_cell_primitive()],
                                                instance_uuid=None))
        for field, value in (('memory', 'x'), ('memory', None),
                             ('memory', True), ('memory', _ABSENT),
                             ('id', _ABSENT), ('cpuset', _ABSENT),
                             ('cpuset', '0-1'), ('pcpuset', [0, 'x']),
                             ('pagesize', 'large'), ('cpu_policy', 'bogus'),
                             ('cpu_thread_policy', ''),
                             ('cpu_pinning_raw', {'0': 'x'}),
                             ('cpuset_reserved', 'x')):
            self.assertRejected(_topology_primitive(
                [_cell_primitive(**{field: value})]))
        wrong = _cell_primitive()
        wrong[primitive.NAME] = 'NUMACell'
        self.assertRejected(_topology_primitive([wrong]))

    def test_integer_strings_load(self):
        topology = self.read(_topology_primitive(
            [_cell_primitive(memory='2048', id='4')]))
        self.assertEqual(2048, topology.cells[0].memory)
        self.assertEqual(0, topology.cells[0].id)


class ToPrimitiveTest(testtools.TestCase):

    pinned = numa.Topology(
        cells=(_cell(0, (), {1, 0}, 4096, 2048, 'dedicated', 'prefer'),
               _cell(1, (), {3, 2}, 4096, 2048, 'dedicated', 'prefer')),
        emulator_threads_policy='share')
    mixed = numa.Topology(cells=(_cell(0, {0, 1}, {2, 3}, 4096,
                                       policy='mixed'),),
                          emulator_threads_policy=None)

    def cells(self, document):
        return [cell[primitive.DATA]
                for cell in document[primitive.DATA]['cells']]

    def test_current_versions(self):
        document = numa_primitive.to_primitive(self.pinned, '1.3', '1.6')
        self.assertEqual(primitive.wrap('InstanceNUMATopology', '1.3', {
            'cells': [primitive.wrap('InstanceNUMACell', '1.6', {
                'id': index, 'cpuset': [], 'pcpuset': cpus,
                'cpuset_reserved': None, 'memory': 4096, 'pagesize': 2048,
                'cpu_pinning_raw': None, 'cpu_policy': 'dedicated',
                'cpu_thread_policy': 'prefer'})
                for index, cpus in ((0, [0, 1]), (1, [2, 3]))],
            'emulator_threads_policy': 'share'}), document)
        # Field order as Nova writes it.
        self.assertEqual(
            ['id', 'cpuset', 'pcpuset', 'cpuset_reserved', 'memory',
             'pagesize', 'cpu_pinning_raw', 'cpu_policy',
             'cpu_thread_policy'], list(self.cells(document)[0]))
        self.assertEqual(self.pinned,
                         numa_primitive.from_primitive(document, 'x'))

    def test_mixed_needs_1_6(self):
        self.assertEqual([0, 1], self.cells(
            numa_primitive.to_primitive(self.mixed, '1.3', '1.6'))[0][
                'cpuset'])
        for version in ('1.5', '1.4', '1.3'):
            error = self.assertRaises(numa.ConstraintError,
                                      numa_primitive.to_primitive,
                                      self.mixed, '1.3', version)
            self.assertEqual('IncompatibleObjectVersion',
                             error.nova_exception)

    def test_dedicated_below_1_5(self):
        document = numa_primitive.to_primitive(self.pinned, '1.3', '1.4')
        cell = self.cells(document)[0]
        self.assertEqual([0, 1], cell['cpuset'])
        self.assertNotIn('pcpuset', cell)
        self.assertIn('cpuset_reserved', cell)
        # Nova migrates it back on load.
        self.assertEqual(self.pinned,
                         numa_primitive.from_primitive(document, 'x'))

    def test_older_versions_drop_fields(self):
        for version, absent in (
                ('1.3', {'pcpuset', 'cpuset_reserved'}),
                ('1.2', {'pcpuset', 'cpuset_reserved', 'cpu_policy',
                         'cpu_thread_policy'}),
                ('1.1', {'pcpuset', 'cpuset_reserved', 'cpu_policy',
                         'cpu_thread_policy', 'cpu_pinning_raw'}),
                ('1.0', {'pcpuset', 'cpuset_reserved', 'cpu_policy',
                         'cpu_thread_policy', 'cpu_pinning_raw',
                         'pagesize'})):
            cell = self.cells(numa_primitive.to_primitive(
                self.pinned, '1.3', version))[0]
            self.assertEqual(set(), absent & set(cell), version)
            self.assertEqual([0, 1], cell['cpuset'], version)
        document = numa_primitive.to_primitive(self.pinned, '1.2', '1.6')
        self.assertNotIn('emulator_threads_policy', document[primitive.DATA])

    def test_shared_cells(self):
        topology = numa.Topology(cells=(_cell(0, {0, 1}, (), 2048,
                                              pagesize=-2),))
        cell = self.cells(
            numa_primitive.to_primitive(topology, '1.3', '1.4'))[0]
        self.assertEqual([0, 1], cell['cpuset'])
        self.assertEqual(topology, numa_primitive.from_primitive(
            numa_primitive.to_primitive(topology, '1.3', '1.5'), 'x'))

    def test_unknown_versions(self):
        for topology_version, cell_version in (('1.4', '1.6'),
                                               ('1.3', '1.7'),
                                               ('2.0', '1.6'), ('1.3', 'x')):
            self.assertRaises(primitive.PrimitiveError,
                              numa_primitive.to_primitive, self.pinned,
                              topology_version, cell_version)

    def test_json_round_trip(self):
        document = numa_primitive.to_primitive(self.mixed, '1.3', '1.6')
        text = primitive.dump_json(document)
        self.assertEqual(self.mixed, numa_primitive.from_primitive(text, 'x'))


class DescribeTest(testtools.TestCase):

    def test_none(self):
        self.assertEqual('none', numa.describe(None))

    def test_pinned(self):
        self.assertEqual(
            '2 nodes, dedicated, threads prefer, pagesize 2048K, emulator '
            'threads share, cpus [0-1]|[2-3], MiB 4096|4096',
            numa.describe(ToPrimitiveTest.pinned))

    def test_mixed_and_symbolic_page_size(self):
        topology = numa.Topology(cells=(
            _cell(0, {0, 1}, {2, 3}, 2048, -2, 'mixed'),
            _cell(1, {4, 6}, None, 2048, -2, 'mixed')))
        self.assertEqual('2 nodes, mixed, pagesize large, '
                         'cpus 0-1,[2-3]|4,6,?, MiB 2048|2048',
                         numa.describe(topology))
