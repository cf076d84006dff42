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


"""Pinned CPUs and PCI devices, as Nova's libvirt driver leaves them.

Nova 34.0.0's services with libvirt-driver computes on fakelibvirt
(``libvirt_services``), the way Nova's own functional libvirt tests run
the driver: dedicated servers pinned by the driver's claims, a PCI
device allocated to a server through an alias. Nova's own path leaves a
PCI device held by a deleted server (a local delete while the host's
compute is down); two servers pinned to the same pCPUs are emulated (the
rows as NUMA live-migration bugs leave them), which the test says. The
tests pin what Nova's compute then does and what ``nova-heal hosts``
reports, and that the paths that end well (pinned servers resized,
confirmed or reverted, and migrated between two hosts) report nothing,
while a resize awaiting its confirmation holds both hosts skipped.
"""

import json
import unittest
from xml.etree import ElementTree

import fixtures
import sqlalchemy as sa

from healreq.tests.compat import libvirt_services
from healreq.tests.compat import services

if services.available():
    from nova import context as nova_context
    from nova import objects
    from nova.tests.fixtures import libvirt as fakelibvirt

# One NUMA cell of four cores of two threads: pCPUs 0-7, all dedicated.
DEDICATED = '0-7'
ALIAS = 'a1'


class _Devices(libvirt_services.LibvirtServices):
    """One libvirt compute, host1, and ``nova-heal hosts`` on it."""

    def hosts(self, code, *args):
        """Run ``nova-heal hosts``, which must exit ``code``."""
        exit_code, document = self.run_audit('hosts', *args)
        self.assertEqual(code, exit_code, document)
        self.assertEqual([], document['cell_errors'])
        return document

    def only_result(self, problem):
        """The report's one result, with ``problem`` alone: its details."""
        document = self.hosts(0)
        result, = document['results']
        self.assertEqual(('host1', 'mismatched', [problem]), (
            result['host'], result['status'], result['problems']))
        self.assertEqual({problem: 1}, {
            code: count for code, count in
            document['summary']['problems'].items() if count})
        return result


class PinnedCpusTest(_Devices):
    """Dedicated servers, and two pinned to the same pCPUs."""

    def setUp(self):
        self.flags(cpu_dedicated_set=DEDICATED, cpu_shared_set=None,
                   group='compute')
        self.flags(vcpu_pin_set=None)
        super().setUp()
        self.start_libvirt('host1', fakelibvirt.HostInfo(
            cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=2))
        self.flavor = self._create_flavor(
            vcpu=2, extra_spec={'hw:cpu_policy': 'dedicated'})
        self.context = nova_context.get_admin_context()

    def topology(self, server):
        return objects.InstanceNUMATopology.get_by_instance_uuid(
            self.context, server['id'])

    def pins(self, server):
        """The pCPUs ``server``'s instance is pinned to, by its row."""
        return {pcpu for cell in self.topology(server).cells
                for pcpu in cell.cpu_pinning.values()}

    def guest_pins(self, server):
        """The pCPUs ``server``'s guest runs on, by its libvirt domain."""
        domain = self.connections['host1'].lookupByUUIDString(server['id'])
        return {int(pin.get('cpuset')) for pin in ElementTree.fromstring(
            domain.XMLDesc(0)).iter('vcpupin')}

    def boot(self, name):
        return self._create_server(name=name, flavor_id=self.flavor,
                                   networks='none')

    def test_two_servers_pinned_to_the_same_cpus(self):
        """Two servers pinned to the same pCPUs: the rows are emulated.

        NUMA live-migration bugs leave an instance's row pinned to pCPUs
        another instance holds, while its guest runs on others; the test
        writes that row, through Nova's own object, rather than
        reproducing a bug that Nova 34 no longer has.
        """
        first, second = self.boot('first'), self.boot('second')
        held, running = self.pins(first), self.pins(second)
        self.assertEqual((2, set(), running), (
            len(held), held & running, self.guest_pins(second)))
        self.assertEqual([], self.hosts(4)['results'])

        topology = self.topology(second)
        cell, = topology.cells
        cell.cpu_pinning = dict(zip(sorted(cell.cpu_pinning), sorted(held)))
        topology.instance_uuid = second['id']
        topology.create()
        self.assertEqual(held, self.pins(second))

        # The compute's periodic update fails on that host, on every run.
        manager = self.computes['host1'].manager
        for run in range(2):
            manager.update_available_resource(self.context)
        output = self.stdlog.logger.output
        self.assertEqual(2, output.count(
            'Error updating resources for node host1'))
        self.assertIn('CPUPinningInvalid', output)
        # Its resource tracker no longer counts the pCPUs the second
        # guest runs on: a new dedicated server is pinned to them.
        third = self.boot('third')
        self.assertEqual((running, running), (
            self.pins(third), self.guest_pins(third)))

        result = self.only_result('cpus-pinned-twice')
        detail, = result['details']
        self.assertEqual({
            'reason': 'cpus-pinned-twice', 'node': 'host1',
            'cpus': sorted(held),
            'instances': sorted([first['id'], second['id']])}, detail)


class PinnedMovesTest(_Devices):
    """Pinned servers resized and migrated between two libvirt hosts."""

    def setUp(self):
        self.flags(cpu_dedicated_set=DEDICATED, cpu_shared_set=None,
                   group='compute')
        self.flags(vcpu_pin_set=None)
        super().setUp()
        for host in ('host1', 'host2'):
            self.start_libvirt(host, fakelibvirt.HostInfo(
                cpu_nodes=1, cpu_sockets=1, cpu_cores=4, cpu_threads=2))
        self.small, self.large = (
            self._create_flavor(vcpu=vcpus, extra_spec={
                'hw:cpu_policy': 'dedicated'}) for vcpus in (2, 4))
        # The disk copy of a move, which fakelibvirt cannot do, as Nova's
        # own functional libvirt tests stub it.
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.driver.LibvirtDriver.'
            'migrate_disk_and_power_off', return_value='{}'))

    def resized(self, name):
        server = self._create_server(name=name, flavor_id=self.small,
                                     networks='none')
        self.api.post_server_action(server['id'], {
            'resize': {'flavorRef': self.large}})
        return self._wait_for_state_change(server, 'VERIFY_RESIZE')

    def test_moves_that_end_well_report_nothing(self):
        confirmed = self.resized('confirmed')
        destination = confirmed['OS-EXT-SRV-ATTR:host']
        source, = {'host1', 'host2'} - {destination}
        # While a resize awaits its confirmation, both hosts hold pins.
        document = self.hosts(4)
        self.assertEqual({
            (destination, 'skipped', 'resize-awaiting-confirm'),
            (source, 'skipped', 'migration-in-progress')}, {
            (r['host'], r['status'], r['reason'])
            for r in document['results']})
        self._confirm_resize(confirmed)
        self._revert_resize(self.resized('reverted'))
        migrated = self._create_server(name='migrated', flavor_id=self.small,
                                       networks='none')
        self._confirm_resize(self._migrate_server(migrated))
        document = self.hosts(4)
        self.assertEqual(([], 2, 0), (
            document['results'], document['summary']['hosts_checked'],
            document['summary']['skipped']))


class PciDeviceTest(_Devices):
    """A PCI device held by a server deleted while its compute was down."""

    def setUp(self):
        device = {'vendor_id': fakelibvirt.PCI_VEND_ID,
                  'product_id': fakelibvirt.PCI_PROD_ID}
        self.flags(device_spec=[json.dumps(device)],
                   alias=[json.dumps(dict(device, name=ALIAS))], group='pci')
        super().setUp()
        self.start_libvirt('host1', pci_info=fakelibvirt.HostPCIDevicesInfo(
            num_pci=1))
        self.flavor = self._create_flavor(
            extra_spec={'pci_passthrough:alias': '%s:1' % ALIAS})

    def devices(self):
        """``[(address, status, instance_uuid)]`` of host1's devices."""
        t = sa.Table('pci_devices', sa.MetaData(),
                     autoload_with=self.cell_engine)
        with self.cell_engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.select(
                t.c.address, t.c.status, t.c.instance_uuid).where(
                t.c.deleted == 0).order_by(t.c.address))]

    def test_device_held_after_a_local_delete(self):
        server = self._create_server(flavor_id=self.flavor, networks='none')
        (address, status, owner), = self.devices()
        self.assertEqual(('allocated', server['id']), (status, owner))
        self.assertEqual([], self.hosts(4)['results'])

        # Deleted while host1's compute is down: the API deletes it
        # locally, the device stays allocated to it.
        self.host_down('host1')
        self._delete_server(server)
        self.assertEqual([(address, 'allocated', server['id'])],
                         self.devices())
        result = self.only_result('pci-device-held')
        detail, = result['details']
        self.assertEqual({
            'reason': 'pci-device-held', 'address': address,
            'compute_node_uuid': self._get_provider_uuid_by_host('host1'),
            'status': 'allocated', 'instance_uuid': server['id'],
            'instance_state': 'deleted', 'compute_up': False}, detail)

        # The compute back, its periodic frees the device.
        self.restart_libvirt('host1')
        service, = self.admin_api.get_services(host='host1',
                                               binary='nova-compute')
        self.admin_api.put_service_force_down(service['id'], False)
        self.assertEqual([(address, 'available', None)], self.devices())
        self.assertEqual([], self.hosts(4)['results'])


def load_tests(loader, tests, pattern):
    """The tests of this module where Nova's services can run.

    Where the framework cannot be imported, ``test_real_services_compat``
    reports it.
    """
    suite = unittest.TestSuite()
    if services.available():
        for case in (PinnedCpusTest, PinnedMovesTest, PciDeviceTest):
            suite.addTests(loader.loadTestsFromTestCase(case))
    return suite
