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

"""Drift in numa_topology and pci_requests, and the order of all fields."""

import json

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import field_case

DATA = 'nova_object.data'
VERSION = 'nova_object.version'
INSTANCE_UUID = '1c9e4b2f-7a3d-4e5f-9b8c-6d7e8f9a0b1c'
PORT_ID = '6f5e4d3c-2b1a-4c9d-8e7f-0a1b2c3d4e5f'
RP_UUID = '2d4c6b8a-0e1f-4a3b-9c5d-7e6f8a9b0c1d'
REQUEST_ID = '8b7a6c5d-4e3f-4a2b-9c1d-0e9f8a7b6c5d'

SHARED = demo.A2_MEDIUM  # hw:cpu_policy=shared, 4 vCPUs, 8 GiB
PINNED = dep.flavor(901, 'p2.medium', vcpus=4, memory_mb=8192, root_gb=80,
                    flavorid='026051', extra_specs={
                        'hw:cpu_policy': 'dedicated', 'hw:numa_nodes': '2'})
HUGE_PAGES = dep.flavor(911, 'h2.medium', vcpus=4, memory_mb=8192,
                        root_gb=80, extra_specs={'hw:mem_page_size': 'large'})
GPU = dep.flavor(921, 'g2.medium', vcpus=4, memory_mb=8192, root_gb=80,
                 extra_specs={'hw:cpu_policy': 'shared',
                              'pci_passthrough:alias': 't4:1'})
PINNED_TEXT = '2 nodes, dedicated, cpus [0-1]|[2-3], MiB 4096|4096'
T4 = {'vendor_id': '10de', 'product_id': '1eb8'}


props = field_case.image_properties
without = field_case.without_keys


def numa_cell(node, cpus=(), pcpus=(), memory=4096, pagesize=None,
              policy='dedicated', version='1.6', **host):
    """An InstanceNUMACell primitive; ``host`` adds host-fitted values."""
    data = {'id': node, 'cpuset': list(cpus), 'pcpuset': list(pcpus),
            'cpuset_reserved': None, 'memory': memory, 'pagesize': pagesize,
            'cpu_pinning_raw': None, 'cpu_policy': policy,
            'cpu_thread_policy': None}
    if version < '1.5':
        del data['pcpuset']
    data.update(host)
    return dep.envelope('InstanceNUMACell', version, data)


def numa_topology(cells, version='1.3', **extra):
    data = {'cells': cells, 'emulator_threads_policy': None}
    data.update(extra)
    return dep.envelope('InstanceNUMATopology', version, data)


def pinned_request(cell_version='1.6'):
    """The request topology Nova computes for PINNED (no change lists)."""
    return numa_topology([
        numa_cell(0, pcpus=[0, 1], version=cell_version),
        numa_cell(1, pcpus=[2, 3], version=cell_version)])


def pci_request(alias_name='t4', spec=T4, requester_id=None):
    return dep.envelope('InstancePCIRequest', '1.4', {
        'count': 1, 'spec': [dict(spec)], 'alias_name': alias_name,
        'is_new': False, 'request_id': REQUEST_ID, 'numa_policy': 'legacy',
        'requester_id': requester_id})


def port_request():
    """A request Nova adds for an SR-IOV Neutron port (no alias)."""
    return pci_request(alias_name=None, requester_id=PORT_ID,
                       spec={'physical_network': 'physnet2',
                             'dev_type': 'type-VF'})


def pci_requests(*requests):
    return dep.envelope('InstancePCIRequests', '1.1',
                        {'requests': list(requests)}, ['requests'])


class _NumaPciTestCase(field_case.FieldTestCase):

    def add(self, cur, sysmeta_props=None, **kwargs):
        """An instance in cell1 booted from the default image."""
        return self.deployment.add_instance(
            self.cell1, cur, system_metadata=dep.image_system_metadata(
                properties=sysmeta_props), **kwargs)


class NumaTopologyTest(_NumaPciTestCase):

    def test_missing_topology_uses_deployment_versions(self):
        """Another spec shows the deployment writes cells at 1.5."""
        self.add(PINNED, spec_fields=dict(
            numa_topology=pinned_request(cell_version='1.5')))
        uuid = self.add(PINNED)
        before = self.spec(uuid)
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('numa_topology', 'none', PINNED_TEXT)])
        self.assertEqual(pinned_request(cell_version='1.5'),
                         after[DATA]['numa_topology'])
        self.assertEqual(without(before, 'numa_topology'),
                         without(after, 'numa_topology'))

    def test_deployment_versions_for_one_instance(self):
        """--instance writes the versions a full run writes."""
        self.add(PINNED, spec_fields=dict(
            numa_topology=pinned_request(cell_version='1.5')))
        uuid = self.add(PINNED)
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('numa_topology', 'none', PINNED_TEXT)],
                                  '--instance', uuid)
        self.assertEqual(pinned_request(cell_version='1.5'),
                         after[DATA]['numa_topology'])

    def test_instance_topology_versions_are_not_copied(self):
        """The compute's fitted copy does not set the request's versions."""
        fitted = numa_topology([
            numa_cell(1, cpus=[0, 1], version='1.4',
                      cpu_pinning_raw={'0': 12, '1': 13}),
            numa_cell(0, cpus=[2, 3], version='1.4',
                      cpu_pinning_raw={'2': 2, '3': 3})],
            instance_uuid=INSTANCE_UUID)
        self.add(PINNED, uuid=INSTANCE_UUID,
                 extra_numa_topology=json.dumps(fitted))
        after = self.assert_heals(self.cell1, INSTANCE_UUID, 'spec-drift',
                                  [('numa_topology', 'none', PINNED_TEXT)])
        self.assertEqual(pinned_request(), after[DATA]['numa_topology'])

    def test_oldest_supported_versions_otherwise(self):
        after = self.assert_heals(self.cell1, self.add(PINNED), 'spec-drift',
                                  [('numa_topology', 'none', PINNED_TEXT)])
        self.assertEqual(pinned_request(), after[DATA]['numa_topology'])

    def test_host_fitted_copy_not_drift(self):
        """Host node ids, pinning and reserved CPUs are not the request."""
        fitted = numa_topology([
            numa_cell(1, pcpus=[0, 1], cpuset_reserved=[30],
                      cpu_pinning_raw={'0': 17, '1': 18},
                      cpu_topology=dep.envelope('VirtCPUTopology', '1.0', {
                          'sockets': 1, 'cores': 2, 'threads': 1})),
            numa_cell(0, pcpus=[2, 3], cpu_pinning_raw={'2': 5, '3': 6})],
            instance_uuid=INSTANCE_UUID)
        self.add(PINNED, uuid=INSTANCE_UUID,
                 extra_numa_topology=json.dumps(fitted),
                 spec_fields=dict(numa_topology=fitted))
        self.assert_consistent()

    def test_legacy_cpuset_of_dedicated_cell_not_drift(self):
        """A 1.4 cell with pinned vCPUs in cpuset is what Nova migrates."""
        self.add(PINNED, spec_fields=dict(numa_topology=numa_topology([
            numa_cell(0, cpus=[0, 1], version='1.4'),
            numa_cell(1, cpus=[2, 3], version='1.4')])))
        self.assert_consistent()

    def test_failed_resize_from_shared_to_pinned(self):
        """The reported case with NUMA: the spec holds the pinned flavor.

        The instance still runs the shared flavor; the spec, and
        instance_extra.flavor['new'], hold the pinned one and its
        topology.
        """
        uuid = self.add(
            SHARED, spec_flavor=PINNED, new=PINNED,
            migrations=[dict(old_instance_type_id=982,
                             new_instance_type_id=901, status='error')],
            spec_fields=dict(numa_topology=pinned_request()))
        before = self.spec(uuid)
        after = self.assert_heals(
            self.cell1, uuid, 'failed-resize-leftover',
            [('flavor', 'p2.medium(901)', 'a2.medium(982)'),
             ('numa_topology', PINNED_TEXT, 'none')])
        self.assertEqual(
            self.instance_flavors(self.cell1, uuid)['cur'][DATA],
            after[DATA]['flavor'][DATA])
        self.assertIsNone(after[DATA]['numa_topology'])
        healed = ('flavor', 'numa_topology')
        self.assertEqual(without(before, *healed), without(after, *healed))

    def test_failed_resize_from_pinned_to_shared(self):
        fitted = numa_topology([
            numa_cell(0, pcpus=[0, 1], cpu_pinning_raw={'0': 4, '1': 5}),
            numa_cell(1, pcpus=[2, 3], cpu_pinning_raw={'2': 9, '3': 8})],
            instance_uuid=INSTANCE_UUID)
        self.add(PINNED, spec_flavor=SHARED, new=SHARED, uuid=INSTANCE_UUID,
                 extra_numa_topology=json.dumps(fitted))
        after = self.assert_heals(
            self.cell1, INSTANCE_UUID, 'failed-resize-leftover',
            [('flavor', 'a2.medium(982)', 'p2.medium(901)'),
             ('numa_topology', 'none', PINNED_TEXT)])
        self.assertEqual('p2.medium', after[DATA]['flavor'][DATA]['name'])
        self.assertEqual(pinned_request(), after[DATA]['numa_topology'])

    def test_image_page_size_refines_flavor(self):
        """hw_mem_page_size=2048 set on the image after boot."""
        large = numa_topology([numa_cell(0, cpus=[0, 1, 2, 3], memory=8192,
                                         pagesize=-2, policy=None)])
        uuid = self.add(HUGE_PAGES, sysmeta_props=props(
            hw_mem_page_size='2048'), spec_fields=dict(numa_topology=large))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'hw_mem_page_size unset', 'hw_mem_page_size=2048'),
             ('numa_topology', '1 node, pagesize large, cpus 0-3, MiB 8192',
              '1 node, pagesize 2048K, cpus 0-3, MiB 8192')])
        self.assertEqual('2048', after[DATA]['image'][DATA]['properties']
                         [DATA]['hw_mem_page_size'])
        self.assertEqual(numa_topology([numa_cell(
            0, cpus=[0, 1, 2, 3], memory=8192, pagesize=2048, policy=None)]),
            after[DATA]['numa_topology'])

    def test_image_page_size_not_drift(self):
        large = numa_topology([numa_cell(0, cpus=[0, 1, 2, 3], memory=8192,
                                         pagesize=-2, policy=None)])
        self.add(HUGE_PAGES, spec_fields=dict(numa_topology=large))
        self.assert_consistent()

    def test_image_node_layout(self):
        """hw_numa_cpus.N/hw_numa_mem.N of the image place vCPUs and MiB."""
        layout = {'hw_numa_nodes': '2', 'hw_numa_cpus.0': '0,2',
                  'hw_numa_cpus.1': '1,3', 'hw_numa_mem.0': '2048',
                  'hw_numa_mem.1': '6144'}
        spec_image = dep.image(properties=props(
            hw_numa_nodes=2, hw_numa_cpus=[[0, 2], [1, 3]],
            hw_numa_mem=[2048, 6144]))
        even = numa_topology([
            numa_cell(0, cpus=[0, 1], policy=None),
            numa_cell(1, cpus=[2, 3], policy=None)])
        uuid = self.add(demo.M1_LARGE, sysmeta_props=props(**layout),
                        spec_fields=dict(spec_image=spec_image,
                                         numa_topology=even))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('numa_topology', '2 nodes, cpus 0-1|2-3, MiB 4096|4096',
              '2 nodes, cpus 0,2|1,3, MiB 2048|6144')])
        self.assertEqual(numa_topology([
            numa_cell(0, cpus=[0, 2], memory=2048, policy=None),
            numa_cell(1, cpus=[1, 3], memory=6144, policy=None)]),
            after[DATA]['numa_topology'])
        self.assertEqual(spec_image, after[DATA]['image'])

    def test_refused_flavor_and_image(self):
        """A shared flavor with an image asking for dedicated CPUs."""
        image_props = props(hw_cpu_policy='dedicated')
        uuid = self.add(SHARED, sysmeta_props=image_props,
                        spec_flavor=demo.E2_MEDIUM, spec_fields=dict(
                            spec_image=dep.image(properties=image_props)))
        self.assert_refused(self.cell1, uuid, 'numa-constraints-invalid',
                            'ImageCPUPinningForbidden')

    def test_unloadable_legacy_cells(self):
        """Cells at 1.3 with the dedicated policy: Nova cannot load them."""
        legacy = numa_topology([
            numa_cell(0, cpus=[0, 1], version='1.3'),
            numa_cell(1, cpus=[2, 3], version='1.3')], version='1.2')
        del legacy[DATA]['emulator_threads_policy']
        uuid = self.add(PINNED, spec_fields=dict(numa_topology=legacy))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('numa_topology',
              'unloadable (spec numa_topology.cells[0] (InstanceNUMACell '
              '1.3) in a topology without instance_uuid: Nova 34 fails to '
              'load it)', PINNED_TEXT)])
        topology = after[DATA]['numa_topology']
        self.assertEqual(pinned_request(), topology)
        for cell in topology[DATA]['cells']:
            version = tuple(int(n) for n in cell[VERSION].split('.'))
            self.assertGreaterEqual(version, (1, 4))


class PciRequestsTest(_NumaPciTestCase):

    def test_failed_resize_leftover_alias(self):
        uuid = self.add(
            SHARED, spec_flavor=GPU, new=GPU,
            spec_fields=dict(pci_requests=pci_requests(pci_request())))
        before = self.spec(uuid)
        after = self.assert_heals(
            self.cell1, uuid, 'failed-resize-leftover',
            [('flavor', 'g2.medium(921)', 'a2.medium(982)'),
             ('pci_requests', 't4 x1', 'none')])
        healed = after[DATA]['pci_requests']
        self.assertEqual(('InstancePCIRequests', '1.1', {'requests': []}),
                         (healed['nova_object.name'], healed[VERSION],
                          healed[DATA]))
        self.assertEqual(without(before, 'flavor', 'pci_requests'),
                         without(after, 'flavor', 'pci_requests'))

    def test_port_request_kept_when_alias_healed(self):
        uuid = self.add(SHARED, spec_fields=dict(pci_requests=pci_requests(
            pci_request(), port_request())))
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('pci_requests', 't4 x1', 'none')])
        self.assertEqual([port_request()],
                         after[DATA]['pci_requests'][DATA]['requests'])

    def test_host_annotations_not_drift(self):
        on_host = dict(T4, rp_uuids=RP_UUID)
        self.add(GPU, extra_pci_requests=json.dumps([dict(
            count=1, spec=[on_host], alias_name='t4', is_new=False,
            numa_policy='legacy', request_id=REQUEST_ID,
            requester_id=None)]),
            spec_fields=dict(pci_requests=pci_requests(pci_request())))
        self.assert_consistent()

    def test_unparsable_instance_requests(self):
        uuid = self.add(SHARED, spec_flavor=demo.E2_MEDIUM,
                        extra_pci_requests='{"requests": []}')
        self.assert_refused(self.cell1, uuid, 'instance-pci-unparsable',
                            'not a list')

    def test_port_request_not_drift_and_kept(self):
        """Interface detach never reaches the spec; nor does a heal."""
        self.add(SHARED, spec_fields=dict(
            pci_requests=pci_requests(port_request())))
        self.assert_consistent()
        uuid = self.add(SHARED, spec_flavor=demo.E2_MEDIUM, spec_fields=dict(
            pci_requests=pci_requests(port_request())))
        before = self.spec(uuid)
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('flavor', 'e2.medium(831)', 'a2.medium(982)')])
        self.assertEqual(before[DATA]['pci_requests'],
                         after[DATA]['pci_requests'])


class FieldOrderTest(_NumaPciTestCase):

    def add_all_drifted(self):
        """Resized from g2 (shared, a T4) to p2 (pinned); every field lags.

        The spec also names the virtio disk bus the image had before an
        image property change, says volume-backed, and has no owner.
        """
        return self.add(
            PINNED, old=GPU, spec_flavor=GPU,
            sysmeta_props=props(hw_disk_bus='scsi'),
            spec_fields=dict(
                spec_image=dep.image(properties=props(hw_disk_bus='virtio')),
                pci_requests=pci_requests(pci_request()), is_bfv=True,
                project_id=None, user_id=None))

    def test_every_field_in_order(self):
        uuid = self.add_all_drifted()
        after = self.assert_heals(
            self.cell1, uuid, 'old-flavor-leftover',
            [('flavor', 'g2.medium(921)', 'p2.medium(901)'),
             ('image', 'hw_disk_bus=virtio', 'hw_disk_bus=scsi'),
             ('numa_topology', 'none', PINNED_TEXT),
             ('pci_requests', 't4 x1', 'none'),
             ('is_bfv', 'True', 'False'),
             ('project_id', 'None', dep.PROJECT_ID),
             ('user_id', 'None', dep.USER_ID)])
        self.assertEqual(
            ('p2.medium', pinned_request(), [], False, dep.PROJECT_ID,
             dep.USER_ID),
            (after[DATA]['flavor'][DATA]['name'],
             after[DATA]['numa_topology'],
             after[DATA]['pci_requests'][DATA]['requests'],
             after[DATA]['is_bfv'], after[DATA]['project_id'],
             after[DATA]['user_id']))

    def test_order_does_not_follow_the_option(self):
        self.add_all_drifted()
        result, doc = self.heal_json(
            '--dry-run', '--fields', 'user_id,pci_requests,flavor')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([['flavor', 'pci_requests', 'user_id']],
                         [r['drift'] for r in doc['results']])
