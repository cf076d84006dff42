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

"""Nova's services with libvirt-driver computes on fakelibvirt.

Pinned CPUs and PCI devices are the libvirt driver's: it reports the
host's NUMA topology and its devices, and its claims pin CPUs and
allocate devices. Nova's own functional libvirt tests run it against
fakelibvirt, a libvirt connection in Python that describes the host
(its CPUs, memory and PCI devices) and runs no guest. This base does the
same on the services of ``placement_services.FileBackedPlacement``: the
host is described per compute, what the driver would read from the
machine (disk, online CPUs, image creation, sysfs files) is stubbed, as
those tests stub it, and every compute gets its own connection and node
uuid.
"""

import io
from unittest import mock

import fixtures

from healreq.tests.compat import placement_services
from healreq.tests.compat import services

if services.available():
    from nova import conf as nova_conf
    from nova.tests import fixtures as nova_fixtures
    from nova.tests.fixtures import libvirt as fakelibvirt
    from oslo_utils.fixture import uuidsentinel

# The filters that look at pinned CPUs and PCI devices, besides the
# default ones.
FILTERS = ['NUMATopologyFilter', 'PciPassthroughFilter']
# Host.get_online_cpus' answer: no host described here has more CPUs.
ONLINE_CPUS = 16


class LibvirtServices(placement_services.FileBackedPlacement):
    """The services, with libvirt-driver computes on fakelibvirt."""

    compute_driver = 'libvirt.LibvirtDriver'

    def setUp(self):
        self.flags(instances_path=self.useFixture(fixtures.TempDir()).path)
        # Before the scheduler starts: it loads its filters then.
        self.flags(enabled_filters=list(
            nova_conf.CONF.filter_scheduler.enabled_filters) + FILTERS,
            group='filter_scheduler')
        super().setUp()
        self.useFixture(nova_fixtures.LibvirtImageBackendFixture())
        self.useFixture(nova_fixtures.CGroupsFixture())
        self.libvirt = self.useFixture(nova_fixtures.LibvirtFixture())
        self.useFixture(nova_fixtures.OSBrickFixture())
        driver = 'nova.virt.libvirt.driver.'
        for target, kwargs in (
                (driver + 'LibvirtDriver._create_image',
                 {'return_value': (False, False)}),
                (driver + 'LibvirtDriver._get_local_gb_info',
                 {'return_value': {'total': 128, 'used': 44, 'free': 84}}),
                (driver + 'libvirt_utils.is_valid_hostname',
                 {'return_value': True}),
                (driver + 'libvirt_utils.file_open',
                 {'side_effect': lambda *a, **k: io.BytesIO(b'')}),
                ('nova.privsep.utils.supports_direct_io',
                 {'return_value': True}),
                ('nova.virt.libvirt.host.Host.get_online_cpus',
                 {'return_value': set(range(ONLINE_CPUS))})):
            self.useFixture(fixtures.MockPatch(target, **kwargs))
        # The connection a compute's driver opens while it starts; each
        # compute then keeps its own.
        self.connections = {}
        self.opening = self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.host.Host.get_connection')).mock

    def start_libvirt(self, host, host_info=None, pci_info=None):
        """Start ``host``'s compute on a fakelibvirt host of its own.

        ``host_info`` describes its CPUs and memory (fakelibvirt's
        default: two NUMA cells of two cores of two threads), ``pci_info``
        its PCI devices.
        """
        connection = self.connections.get(host)
        if connection is None:
            connection = fakelibvirt.Connection(
                'qemu:///system', version=fakelibvirt.FAKE_LIBVIRT_VERSION,
                hv_version=fakelibvirt.FAKE_QEMU_VERSION,
                host_info=host_info or fakelibvirt.HostInfo(),
                pci_info=pci_info, hostname=host)
            self.connections[host] = connection
        if pci_info:
            self.libvirt.update_sriov_mac_address_mapping(
                pci_info.get_pci_address_mac_mapping())
        self.opening.return_value = connection
        with mock.patch('nova.virt.node.get_local_node_uuid',
                        return_value=getattr(uuidsentinel, 'node_' + host)):
            compute = self._start_compute(host)
            compute.driver._host.get_node_uuid()
        compute.driver._host.get_connection = lambda: connection
        return compute

    def restart_libvirt(self, host):
        """Restart ``host``'s compute, its fakelibvirt host as it was."""
        self.computes.pop(host).stop()
        return self.start_libvirt(host)
