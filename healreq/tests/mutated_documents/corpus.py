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

"""The realistic instance every robustness document starts from."""

import copy
import dataclasses
import datetime
import functools
import json

from healreq.heal import decisions
from healreq.heal import findings
from healreq.objects import primitive
from healreq.testing import deployment as dep

Status = findings.Status

SEED = 20240601
# Documents generated per category (at least).
MIN_DOCUMENTS = 1000
FILL_TO = 1100

SPEC = 'request_specs.spec'
FLAVOR = 'instance_extra.flavor'
NUMA = 'instance_extra.numa_topology'
PCI = 'instance_extra.pci_requests'
SYSMETA = 'system_metadata'
CATEGORIES = (SPEC, FLAVOR, NUMA, PCI, SYSMETA)

INSTANCE_UUID = dep.INSTANCE_UUID
CELL = dep.CELL_MAPPING
NOW = datetime.datetime(2024, 6, 1, 12, 0, 0)
SETTINGS = decisions.Settings(skip_updated_within=0)
PORT_REQUEST_ID = '5d8a6a4e-8c1b-4f0e-9a2d-3b7c6e5f4a10'
PORT_ID = 'c0a3e0d4-6b2f-4c1a-9e8d-7f6b5a4c3d21'

# The instance's flavor: pinned CPUs over two NUMA nodes with huge pages
# and a PCI alias, so that every derivation has something to do.
CUR_FLAVOR = dep.flavor(
    982, 'a2.medium', vcpus=4, memory_mb=8192, root_gb=80,
    flavorid='026050', description='Dedicated CPU, 4 vCPU', extra_specs={
        'hw:cpu_policy': 'dedicated', 'hw:cpu_thread_policy': 'prefer',
        'hw:numa_nodes': '2', 'hw:mem_page_size': 'large',
        'hw:cpu_max_sockets': '2', 'pci_passthrough:alias': 't4:1',
        'quota:cpu_shares': '400'})
# A flavor the instance was resized away from (a leftover in 'old').
OLD_FLAVOR = dep.flavor(831, 'e2.medium', vcpus=4, memory_mb=8192,
                        root_gb=25, flavorid='022050',
                        extra_specs={'hw:cpu_policy': 'shared'})

# Glance's raw property strings, as system metadata keeps them.
IMAGE_PROPERTIES = {
    'hw_architecture': 'x86_64', 'os_distro': 'ubuntu', 'os_type': 'linux',
    'hw_disk_bus': 'virtio', 'hw_scsi_model': 'virtio-scsi',
    'hw_vif_model': 'virtio', 'hw_video_model': 'virtio',
    'hw_qemu_guest_agent': 'yes', 'hw_machine_type': 'q35',
    'hw_firmware_type': 'uefi', 'hw_cpu_cores': '2',
    'hw_mem_page_size': '2048', 'hw_rng_model': 'virtio',
    'hw_watchdog_action': 'reset', 'img_hv_requested_version': '>=6.0',
    'hw_numa_cpus.0': '0-1', 'hw_numa_cpus.1': '2,3',
    'hw_numa_mem.0': '4096', 'hw_numa_mem.1': '4096',
    'trait:HW_CPU_X86_AVX2': 'required',
    'img_owner_id': 'b18c2da2dbfa45138fb6077eafb2aa51',
}

# A flavor alias matching two device models, and a Neutron port request.
INSTANCE_PCI_REQUESTS = [
    {'count': 1, 'spec': [{'vendor_id': '10de', 'product_id': '1eb8'},
                          {'vendor_id': '10de', 'product_id': '1db4'}],
     'alias_name': 't4', 'is_new': False, 'numa_policy': 'legacy',
     'request_id': None, 'requester_id': None},
    {'count': 1, 'spec': [{'physical_network': 'physnet2',
                           'dev_type': 'type-VF'}],
     'alias_name': None, 'is_new': False, 'numa_policy': None,
     'request_id': PORT_REQUEST_ID, 'requester_id': PORT_ID},
]


def _numa_cell(index, pcpus, host_cpus):
    return dep.envelope('InstanceNUMACell', '1.6', {
        'id': index, 'cpuset': [], 'pcpuset': pcpus,
        'cpuset_reserved': None, 'memory': 4096, 'pagesize': 2048,
        'cpu_pinning_raw': {str(p): h for p, h in zip(pcpus, host_cpus)},
        'cpu_policy': 'dedicated', 'cpu_thread_policy': 'prefer'})


# The instance's own topology, fitted to its host (instance_extra).
INSTANCE_NUMA_TOPOLOGY = dep.envelope('InstanceNUMATopology', '1.3', {
    'cells': [_numa_cell(0, [0, 1], [4, 5]), _numa_cell(1, [2, 3], [12, 13])],
    'emulator_threads_policy': None, 'instance_uuid': INSTANCE_UUID,
    'id': 77})


NO_OBJECT = object()


def system_metadata_rows(values):
    """``instance_system_metadata`` rows for a ``key -> value`` dict."""
    return [{'id': index, 'key': key, 'value': value, 'deleted': 0}
            for index, (key, value) in enumerate(values.items(), 1)]


def for_instance(value, uuid):
    """A stored spec value naming instance ``uuid`` instead of the base's.

    Every document of the corpus is the base instance's; a record of
    another instance holds it with that instance's uuid. The UUIDs are
    equally long, so a mutation stays where it was.
    """
    if isinstance(value, str):
        return value.replace(INSTANCE_UUID, uuid)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).replace(INSTANCE_UUID.encode('ascii'),
                                    uuid.encode('ascii'))
    return value


def _record(texts, sysmeta_rows, spec=None, flavor=None, numa_topology=None,
            pci_requests=None, system_metadata=None, null_mirrors=False,
            uuid=INSTANCE_UUID):
    def pick(value, category):
        return texts[category] if value is None else value
    rows = sysmeta_rows if system_metadata is None else system_metadata
    mirrors = {}
    if null_mirrors:
        mirrors = dict(instance_type_id=None, vcpus=None, memory_mb=None,
                       root_gb=None, ephemeral_gb=None)
    return dep.instance_record(
        CUR_FLAVOR, uuid=uuid, spec=for_instance(pick(spec, SPEC), uuid),
        extra_flavor=pick(flavor, FLAVOR), extra_columns={
            'numa_topology': pick(numa_topology, NUMA),
            'pci_requests': pick(pci_requests, PCI)},
        system_metadata=[(row['key'], row['value'], row['deleted'])
                         for row in sorted(rows, key=lambda r: r['id'])],
        **mirrors)


@dataclasses.dataclass(frozen=True)
class Base:
    """The realistic documents every mutation starts from.

    ``texts`` maps each JSON category to the text Nova would store;
    ``system_metadata`` maps keys to values. The instance they describe
    is consistent; ``spec_without_numa`` is its spec with a null
    numa_topology (what the NUMA category is evaluated against, so that
    the instance's own topology is read).
    """
    texts: dict
    system_metadata: dict
    spec_without_numa: str


@functools.lru_cache(maxsize=None)
def base():
    """Build the base documents once.

    The spec starts as the API saves it at boot (an image without
    properties, no NUMA or PCI request) and is healed until consistent,
    so that it holds exactly what healreq derives.
    """
    sysmeta = dep.image_system_metadata(IMAGE_PROPERTIES, min_ram=512,
                                        min_disk=80)
    texts = {
        FLAVOR: dep.instance_flavors(CUR_FLAVOR, old=OLD_FLAVOR),
        NUMA: json.dumps(INSTANCE_NUMA_TOPOLOGY),
        PCI: json.dumps(INSTANCE_PCI_REQUESTS),
        SPEC: json.dumps(dep.request_spec(
            INSTANCE_UUID, copy.deepcopy(CUR_FLAVOR), spec_id=7,
            spec_image=dep.image(properties={}))),
    }
    record = _record(texts, system_metadata_rows(sysmeta))
    for _attempt in range(4):
        evaluation = decisions.evaluate(record, CELL, NOW, SETTINGS)
        if evaluation.finding.status is Status.CONSISTENT:
            break
        if evaluation.finding.status is not Status.DRIFTED:
            raise AssertionError('base instance: %s: %s' % (
                evaluation.finding.reason, evaluation.finding.detail))
        record.spec_row['spec'] = evaluation.new_spec
    else:
        raise AssertionError('the base spec does not converge')
    texts[SPEC] = record.spec_row['spec']
    spec = json.loads(texts[SPEC])
    spec[primitive.DATA]['numa_topology'] = None
    return Base(texts=texts, system_metadata=sysmeta,
                spec_without_numa=json.dumps(spec))


def build_record(category=None, value=None, null_mirrors=False,
                 uuid=INSTANCE_UUID):
    """The base instance's record with ``category``'s document replaced.

    ``value`` is what the database returns for the column (str or bytes),
    or the list of system metadata rows.
    """
    documents = base()
    texts = dict(documents.texts)
    if category == NUMA:
        texts[SPEC] = documents.spec_without_numa
    rows = system_metadata_rows(documents.system_metadata)
    keyword = {SPEC: 'spec', FLAVOR: 'flavor', NUMA: 'numa_topology',
               PCI: 'pci_requests', SYSMETA: 'system_metadata'}
    overrides = {}
    if category is not None:
        overrides[keyword[category]] = value
    return _record(texts, rows, null_mirrors=null_mirrors, uuid=uuid,
                   **overrides)


def _decodes(value):
    """Whether ``value`` is UTF-8 JSON (as Nova's jsonutils reads it)."""
    try:
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode('utf-8')
        json.loads(value)
    except (ValueError, RecursionError):
        return False
    return True


@dataclasses.dataclass
class Document:
    """One generated document.

    ``value`` is what the database column returns (str or bytes; for
    system metadata, a list of rows). ``obj`` is the mutated primitive
    when the mutation was made on the decoded document (or, for system
    metadata, the ``key -> value`` dict Nova reads), else NO_OBJECT.
    ``expect_error`` marks a document Nova could not use at all in a part
    healreq reads, which must not be accepted: stored text that is not
    UTF-8 JSON (but for the instance's NUMA topology, of which healreq
    only takes the object versions to write), or an object envelope
    healreq reads with a name, namespace or version Nova cannot load
    (``unusable_envelope``).
    """
    category: str
    kind: str
    where: str
    value: object
    obj: object = NO_OBJECT
    null_mirrors: bool = False
    unusable_envelope: bool = False
    expect_error: bool = dataclasses.field(init=False)

    def __post_init__(self):
        self.expect_error = self.unusable_envelope or (
            self.category in (SPEC, FLAVOR, PCI)
            and not _decodes(self.value))

    def describe(self, limit=200):
        text = preview(self.value, limit)
        return '%s %s at %s%s: %s' % (
            self.category, self.kind, self.where,
            ' (NULL mirrors)' if self.null_mirrors else '', text)


def preview(value, limit):
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        text = '<%s>' % type(value).__name__
    if len(text) > limit:
        text = '%s...(%d chars)' % (text[:limit], len(text))
    return text
