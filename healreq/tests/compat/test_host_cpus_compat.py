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


"""Differential proof: the pCPU rules of ``hosts`` against Nova's code.

Hosts as the libvirt driver reports them (NUMA cells of cores of one or
two threads, their thread siblings, dedicated and shared pCPUs, some
already pinned) and instances whose topology Nova's own
``numa_get_constraints`` derives from a flavor (dedicated, mixed and
shared policies, every thread policy, isolated emulator threads, one
or two NUMA nodes), fitted onto each host by Nova's own
``numa_fit_instance_to_host``, as its scheduler and claims fit them.

* The pCPUs an instance holds: Nova's ``numa_usage_from_instance_numa``
  (what the resource tracker pins for it) against our
  ``host_checks.pinned_cpus`` given the rows Nova writes (the instance's
  and the compute node's topology, as JSON); the instance's row also
  as older releases wrote it (InstanceNUMATopology and InstanceNUMACell
  at older versions), loaded by Nova as its resource tracker loads it.
* The dedicated pCPUs of a host: each host's topology, stored at every
  NUMACell version, loaded by Nova's ``NUMATopology.obj_from_db_obj``
  against our ``host_checks.dedicated_cpus``; where the stored cells
  predate ``pcpuset`` Nova cannot tell and ours must say None.
"""

import inspect
import itertools
import json
import logging
import warnings

import fixtures

from healreq.heal import host_checks
from healreq.tests.compat import base

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        from nova import exception as nova_exception
        from nova import objects as nova_objects
        from nova.virt import hardware as nova_hardware
        from oslo_serialization import jsonutils
except ImportError:  # pragma: no cover - depends on the environment
    nova_objects = None

SHOWN = 20
# NUMACell versions a compute node's topology may be stored at: 1.4
# added pcpuset, 1.5 socket.
CELL_VERSIONS = ('1.2', '1.3', '1.4', '1.5')
# (InstanceNUMATopology, InstanceNUMACell) versions an instance's
# topology may be stored at: 1.3/1.6 today's, the others older releases'.
INSTANCE_VERSIONS = (('1.3', '1.6'), ('1.3', '1.5'), ('1.3', '1.4'),
                     ('1.2', '1.3'), ('1.1', '1.2'), ('1.0', '1.1'))
CELL_MEMORY_MB = 4096
INSTANCE = '3b9f6c1e-2d4a-4e8b-9c7f-5a1d0e2b6f43'
PAGE_KB = 4

# (cells, cores per cell, threads per core).
SHAPES = ((1, 2, 1), (1, 4, 1), (1, 2, 2), (1, 4, 2), (1, 6, 2), (2, 2, 1),
          (2, 4, 1), (2, 2, 2), (2, 3, 2), (2, 4, 2), (4, 2, 2))
# Which of a cell's pCPUs are dedicated: all, all but its first core,
# its odd pCPUs (splitting thread siblings).
DEDICATED = ('all', 'not-first-core', 'odd')
# A guest already pinned on the host: none, one dedicated vCPU, or one
# that isolates its thread siblings.
PRE_PINNED = (None, {'hw:cpu_policy': 'dedicated'},
              {'hw:cpu_policy': 'dedicated',
               'hw:cpu_thread_policy': 'isolate'})

FLAVOR_SPECS = tuple(itertools.chain(
    ({'hw:cpu_policy': 'dedicated', **thread, **emulator, **nodes}
     for thread in ({}, {'hw:cpu_thread_policy': 'prefer'},
                    {'hw:cpu_thread_policy': 'isolate'},
                    {'hw:cpu_thread_policy': 'require'})
     for emulator in ({}, {'hw:emulator_threads_policy': 'isolate'})
     for nodes in ({}, {'hw:numa_nodes': '2'})),
    ({'hw:cpu_policy': 'mixed', 'hw:cpu_dedicated_mask': '^0', **nodes}
     for nodes in ({}, {'hw:numa_nodes': '2'})),
    ({'hw:cpu_policy': 'shared'}, {'hw:numa_nodes': '2'}, {})))
VCPUS = (1, 2, 3, 4, 6)


def _host_cell(cell_id, cores, threads, dedicated):
    """A NUMACell as the libvirt driver reports one.

    Its siblings are one set per core, a single pCPU's where cores have
    one thread: Nova's fit requires them.
    """
    first = cell_id * cores * threads
    groups = [set(range(first + core * threads,
                        first + (core + 1) * threads))
              for core in range(cores)]
    cpus = set().union(*groups)
    if dedicated == 'all':
        pcpus = set(cpus)
    elif dedicated == 'not-first-core':
        pcpus = cpus - groups[0]
    else:
        pcpus = {cpu for cpu in cpus if cpu % 2}
    fields = dict(
        id=cell_id, cpuset=cpus - pcpus, pcpuset=pcpus,
        memory=CELL_MEMORY_MB, cpu_usage=0, memory_usage=0,
        pinned_cpus=set(), siblings=groups,
        mempages=[nova_objects.NUMAPagesTopology(
            size_kb=PAGE_KB, total=CELL_MEMORY_MB * 1024 // PAGE_KB,
            used=0, reserved=0)],
        network_metadata=nova_objects.NetworkMetadata(
            physnets=set(), tunneled=False))
    if 'socket' in nova_objects.NUMACell.fields:
        fields['socket'] = 0
    return nova_objects.NUMACell(**fields)


def hosts():
    """``(label, NUMATopology)`` of every host shape."""
    for (cells, cores, threads), dedicated in itertools.product(
            SHAPES, DEDICATED):
        yield ('cells=%d cores=%d threads=%d dedicated=%s' % (
            cells, cores, threads, dedicated),
            nova_objects.NUMATopology(cells=[
                _host_cell(i, cores, threads, dedicated)
                for i in range(cells)]))


def _constraints(vcpus, specs):
    flavor = nova_objects.Flavor(
        id=1, name='f', flavorid='f', vcpus=vcpus, memory_mb=1024,
        root_gb=1, ephemeral_gb=0, swap=0, extra_specs=dict(specs))
    image = nova_objects.ImageMeta.from_dict({'properties': {}})
    try:
        return nova_hardware.numa_get_constraints(flavor, image)
    except nova_exception.Invalid:
        return None


def fit(host, topology):
    """Nova's fit of ``topology`` onto ``host``, or None.

    Since 2023.2 the fit takes the request groups' providers, None for
    an instance placed before, as the resource tracker passes it.
    """
    if topology is None:
        return None
    if 'provider_mapping' in inspect.signature(
            nova_hardware.numa_fit_instance_to_host).parameters:
        return nova_hardware.numa_fit_instance_to_host(host, topology, None)
    return nova_hardware.numa_fit_instance_to_host(host, topology)


def nova_pins(host, fitted):
    """What Nova's resource tracker pins for ``fitted``, per host cell."""
    used = nova_hardware.numa_usage_from_instance_numa(host, fitted)
    before = {cell.id: cell.pinned_cpus for cell in host.cells}
    found = {cell.id: frozenset(cell.pinned_cpus - before[cell.id])
             for cell in used.cells}
    return {cell_id: cpus for cell_id, cpus in found.items() if cpus}


def stored(obj):
    """The row Nova writes for a topology object (its ``_to_json``)."""
    return jsonutils.dumps(obj.obj_to_primitive())


def stored_at(topology, versions):
    """An instance's row at ``versions``, or None below what it needs.

    Nova's backport of the topology, as that release wrote it; a mixed
    policy cannot be written below InstanceNUMACell 1.6.
    """
    topology_version, cell_version = versions
    try:
        return jsonutils.dumps(topology.obj_to_primitive(
            target_version=topology_version, version_manifest={
                'InstanceNUMATopology': topology_version,
                'InstanceNUMACell': cell_version}))
    except Exception:
        return None


def nova_loaded(text):
    """An instance's row as Nova loads it (the legacy cpuset moved)."""
    loaded = nova_objects.InstanceNUMATopology.obj_from_primitive(
        jsonutils.loads(text))
    nova_objects.InstanceNUMATopology.\
        _migrate_legacy_dedicated_instance_cpuset(loaded)
    return loaded


def pinned_host(host, specs=PRE_PINNED[1]):
    """``host`` with a one-vCPU guest of ``specs`` pinned, or None."""
    if specs is None:
        return host
    first = fit(host, _constraints(1, specs))
    if first is None:
        return None
    return nova_hardware.numa_usage_from_instance_numa(host, first)


def pin_cases():
    """``(label, host, fitted instance)``: every instance that fits."""
    for label, host in hosts():
        for pre_pinned in PRE_PINNED:
            on = pinned_host(host, pre_pinned)
            if on is None:
                continue
            for vcpus, specs in itertools.product(VCPUS, FLAVOR_SPECS):
                fitted = fit(on, _constraints(vcpus, specs))
                if fitted is not None:
                    fitted.instance_uuid = INSTANCE
                    yield ('%s pre_pinned=%r vcpus=%d specs=%r' % (
                        label, pre_pinned, vcpus, specs), on, fitted)


def _at_cell_version(host, version):
    """``host`` stored with NUMACells at ``version``.

    The fields NUMACell added after ``version`` left out, as a compute
    of that release wrote them (oslo's backport of the cells cannot be
    used: NUMACell declares no rule for its mempages).
    """
    document = host.obj_to_primitive()
    for cell in document['nova_object.data']['cells']:
        cell['nova_object.version'] = version
        for field, added in (('socket', '1.5'), ('pcpuset', '1.4')):
            if version < added:
                cell['nova_object.data'].pop(field, None)
                if field in cell.get('nova_object.changes', ()):
                    cell['nova_object.changes'].remove(field)
    return json.dumps(document)


def _nova_dedicated(text):
    """Nova's dedicated pCPUs of a stored host topology, or None."""
    loaded = nova_objects.NUMATopology.obj_from_db_obj(text)
    if not all(cell.obj_attr_is_set('pcpuset') for cell in loaded.cells):
        return None
    return {cell.id: frozenset(cell.pcpuset) for cell in loaded.cells}


class HostCpusCompatTest(base.NovaTestCase):
    """host_checks' pCPU rules against nova.virt.hardware and objects."""

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.FakeLogger(level=logging.ERROR))

    def _report(self, label, cases, disagreements, minimum):
        summary = '%s: %d cases, %d disagreements' % (
            label, cases, len(disagreements))
        base.record_summary(summary)
        self.assertGreater(cases, minimum)
        if disagreements:
            self.fail('%s; first %d:\n%s' % (
                summary, min(SHOWN, len(disagreements)),
                '\n'.join(disagreements[:SHOWN])))

    def test_pinned_cpus_match_the_resource_tracker(self):
        cases, disagreements, policies = 0, [], set()
        for label, host, fitted in pin_cases():
            policies |= {(c.cpu_policy, c.cpu_thread_policy,
                          bool(c.cpuset_reserved)) for c in fitted.cells}
            for versions in INSTANCE_VERSIONS:
                text = stored_at(fitted, versions)
                if text is None:
                    continue
                cases += 1
                problem = self._compare_pins(host, text)
                if problem:
                    disagreements.append('%s stored at %s/%s: %s' % (
                        (label,) + versions + (problem,)))
        # Every policy Nova fits, isolated emulator threads among them.
        self.assertTrue({('dedicated', 'isolate', False),
                         ('dedicated', 'require', True),
                         ('mixed', None, False)} <= policies, policies)
        self._report('pinned pCPUs of an instance', cases, disagreements,
                     6000)

    @staticmethod
    def _compare_pins(host, text):
        """Nova's and our pins of a stored instance topology, if unequal."""
        try:
            theirs = ('ok', nova_pins(host, nova_loaded(text)))
        except nova_exception.NovaException as exc:
            theirs = ('refused', type(exc).__name__)
        try:
            ours = ('ok', host_checks.pinned_cpus(text, stored(host)))
        except host_checks.TopologyError as exc:
            ours = ('refused', str(exc))
        if theirs != ours:
            return 'nova %r, ours %r' % (theirs, ours)
        return None

    def test_unpinned_instances_hold_no_cpus(self):
        cases, disagreements = 0, []
        for label, host in hosts():
            for specs in ({'hw:numa_nodes': '2'}, {'hw:cpu_policy': 'shared'},
                          {'hw:mem_page_size': 'small'}):
                fitted = fit(host, _constraints(2, specs))
                if fitted is None:
                    continue
                cases += 1
                theirs = nova_pins(host, fitted)
                ours = host_checks.pinned_cpus(stored(fitted), stored(host))
                if theirs != ours or ours:
                    disagreements.append('%s %r: nova %r, ours %r' % (
                        label, specs, theirs, ours))
        self.assertEqual({}, host_checks.pinned_cpus(None))
        self._report('pCPUs of unpinned instances', cases, disagreements, 20)

    def test_dedicated_cpus_match_novas_load(self):
        cases, unknown, disagreements = 0, 0, []
        for label, host in hosts():
            on = pinned_host(host) or host
            for version in CELL_VERSIONS:
                text = _at_cell_version(on, version)
                cases += 1
                theirs = _nova_dedicated(text)
                ours = host_checks.dedicated_cpus(text)
                unknown += theirs is None
                if theirs != ours:
                    disagreements.append('%s cells at %s: nova %r, ours %r'
                                         % (label, version, theirs, ours))
        # Cells stored before 1.4 carry no pcpuset: neither can tell.
        self.assertEqual(cases // 2, unknown)
        self.assertIsNone(host_checks.dedicated_cpus(None))
        self._report('dedicated pCPUs of a host', cases, disagreements, 120)
