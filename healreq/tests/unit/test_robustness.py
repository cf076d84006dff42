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

"""Robustness: malformed and mutated stored documents never crash a run.

A deterministic generator (seeded ``random.Random``) mutates realistic
documents of each kind healreq reads: ``request_specs.spec``,
``instance_extra.flavor``, ``instance_extra.numa_topology``,
``instance_extra.pci_requests`` and the ``image_*`` system metadata; at
least 1,000 per kind. Each mutated document, in the record of an otherwise
consistent instance, goes through what the engine does with a record
(parse the spec, learn its object versions, ``decisions.evaluate`` with every
field checked), and through the public parsers. Asserted:

* no exception escapes the evaluation (a call running past DEADLINE or
  allocating past MEMORY_HEADROOM counts as a crash);
* a document is refused (an error finding with a reason code listed in
  ``findings.REASONS``, a detail and nothing to write) or accepted
  (consistent, or drifted with a healed spec that parses back);
* documents that cannot be used at all (see ``Document.expect_error``)
  are refused, and a healed spec is consistent when evaluated again;
* the parsers raise only PrimitiveError or their module's documented
  errors (ImageMetaError, ConstraintError);
* at least 1,000 documents in all are refused.

Counts per category and mutation kind are attached to the tests as the
``robustness-counts`` detail. The generator is also used by the
functional robustness test.
"""

import collections
import contextlib
import copy
import dataclasses
import datetime
import functools
import json
import os
import random
import resource
import signal
import traceback

import testtools
from testtools import content

from healreq.heal import decisions
from healreq.heal import findings
from healreq.objects import flavor as flavor_obj
from healreq.objects import image as image_obj
from healreq.objects import numa as numa_obj
from healreq.objects import numa_primitive
from healreq.objects import pci as pci_obj
from healreq.objects import primitive
from healreq.objects import request_spec
from healreq.objects import versions
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

INSTANCE_UUID = '982c3ead-59b1-4acd-876b-d55166d8e7f0'
CELL = {'id': 1, 'uuid': '7cad283c-1d2e-4f5a-8b9c-0d1e2f3a4b5c',
        'name': 'cell1'}
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


def _record(texts, sysmeta_rows, spec=None, flavor=None, numa_topology=None,
            pci_requests=None, system_metadata=None, null_mirrors=False,
            uuid=INSTANCE_UUID):
    data = CUR_FLAVOR[primitive.DATA]
    instance = {
        'id': 17, 'uuid': uuid, 'deleted': 0, 'hidden': False,
        'vm_state': 'active', 'task_state': None, 'host': 'compute-1',
        'updated_at': dep.LONG_AGO, 'instance_type_id': data['id'],
        'vcpus': data['vcpus'], 'memory_mb': data['memory_mb'],
        'root_gb': data['root_gb'], 'ephemeral_gb': data['ephemeral_gb'],
        'project_id': dep.PROJECT_ID, 'user_id': dep.USER_ID,
        'image_ref': dep.IMAGE_ID,
    }
    if null_mirrors:
        instance.update(instance_type_id=None, vcpus=None, memory_mb=None,
                        root_gb=None, ephemeral_gb=None)

    def pick(value, category):
        return texts[category] if value is None else value
    extra = {'id': 5, 'instance_uuid': uuid,
             'flavor': pick(flavor, FLAVOR),
             'numa_topology': pick(numa_topology, NUMA),
             'pci_requests': pick(pci_requests, PCI)}
    rows = sysmeta_rows if system_metadata is None else system_metadata
    return decisions.InstanceRecord(
        instance=instance,
        mapping={'instance_uuid': uuid, 'cell_id': CELL['id'],
                 'queued_for_delete': False},
        extras=[extra],
        spec_row={'id': 7, 'instance_uuid': uuid,
                  'spec': pick(spec, SPEC)},
        system_metadata=[(row['key'], row['value'], row['deleted'])
                         for row in sorted(rows, key=lambda r: r['id'])])


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


# -- the generator -----------------------------------------------------------

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
        text = _preview(self.value, limit)
        return '%s %s at %s%s: %s' % (
            self.category, self.kind, self.where,
            ' (NULL mirrors)' if self.null_mirrors else '', text)


def _preview(value, limit):
    try:
        text = repr(value)
    except ValueError:  # an integer too long to print
        text = '<%s>' % type(value).__name__
    if len(text) > limit:
        text = '%s...(%d chars)' % (text[:limit], len(text))
    return text


MEGABYTE = 1 << 20
DEPTH = 5000
HUGE_INTEGERS = (10 ** 400, -10 ** 400)
HUGE_STRINGS = ('A' * MEGABYTE, '7' * MEGABYTE + 'Q')
OBJECT_NAMES = ('Bogus', '', None, 42, 'requestspec', 'NovaObject',
                'InstancePCIRequest', 'Flavor')
NAMESPACES = ('oslo', 'Nova', '', None, ['nova'], 'nova ')
VERSIONS = ('1', '99.99', '1.x', 1.5, '', None, '-1.0', '1.-1', '2.0',
            '0.0', '1.15.1', ' 1.4', '1.' + '9' * 5000, '9' * 30 + '.1',
            [1, 0], {'major': 1})
INVALID_UTF8 = (b'\xff', b'\xfe\xff', b'\xc3\x28', b'\xa0\xa1',
                b'\xe2\x28\xa1', b'\xf0\x28\x8c\xbc', b'\xed\xa0\x80',
                b'\xc0\xaf', b'\x80', b'\xf8\x88\x80\x80\x80')
SURROGATES = ('\ud800', '\udfff', '\udc80', '\ud83d')
MARKER = 'ROBUSTNESS-MARKER-%d'
# Short CPU lists naming huge sets: one range of 2**32 CPUs, and adjacent
# ranges of 2**20 CPUs filling a 255-character system metadata value.
WIDE_CPU_RANGE = '0-4294967295'


def _adjacent_cpu_ranges(width=1 << 20, limit=255):
    ranges = []
    start = 0
    while True:
        candidate = ranges + ['%d-%d' % (start, start + width - 1)]
        if len(','.join(candidate)) > limit:
            return ','.join(ranges)
        ranges = candidate
        start += width


MANY_CPU_RANGES = _adjacent_cpu_ranges()
SPECIAL_TEXTS = ('', ' ', 'null', '[]', '{}', '0', '"text"', 'true',
                 'NaN', '-Infinity', '1e400', '[' * DEPTH + ']' * DEPTH,
                 '{"a": ' * DEPTH + '1' + '}' * DEPTH, '\x00', '{"cur": ')


def _decodes(value):
    """Whether ``value`` is UTF-8 JSON (as Nova's jsonutils reads it)."""
    try:
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode('utf-8')
        json.loads(value)
    except (ValueError, RecursionError):
        return False
    return True


# Envelopes whose every part healreq reads (and Nova must load): a wrong
# name, namespace or version there makes the document unusable.
_READ_ENVELOPES = {
    SPEC: [(), (primitive.DATA, 'flavor'), (primitive.DATA, 'image'),
           (primitive.DATA, 'image', primitive.DATA, 'properties'),
           (primitive.DATA, 'numa_topology'),
           (primitive.DATA, 'numa_topology', primitive.DATA, 'cells', None),
           (primitive.DATA, 'pci_requests'),
           (primitive.DATA, 'pci_requests', primitive.DATA, 'requests',
            None)],
    FLAVOR: [('cur',), ('old',), ('new',)],
}


def _is_read_envelope(category, path):
    for pattern in _READ_ENVELOPES.get(category, ()):
        if len(pattern) == len(path) and all(
                want is None or want == got
                for want, got in zip(pattern, path)):
            return True
    return False


def _where(path):
    return '/'.join(str(p) for p in path) or '<root>'


def _walk(node, path=()):
    """Every (path, value) below ``node``, depth first, in order."""
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return
    for key, value in items:
        yield path + (key,), value
        yield from _walk(value, path + (key,))


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def _with(document, path, value):
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _without(document, path):
    del _get(document, path[:-1])[path[-1]]
    return document


def _deep(kind):
    """A Python value nested DEPTH levels deep (no recursion to build)."""
    value = 1 if kind == 'dict' else []
    for _level in range(DEPTH):
        value = {'a': value} if kind == 'dict' else [value]
    return value


def _deep_text(kind):
    if kind == 'dict':
        return '{"a": ' * DEPTH + '1' + '}' * DEPTH
    return '[' * DEPTH + '[]' + ']' * DEPTH


def _wrong_types(value):
    """Values of other JSON types than ``value``'s."""
    if isinstance(value, bool):
        return [1, 0, 'true', 'yes', [], {}, None]
    if isinstance(value, int):
        return [str(value), 'abc', True, False, 1.5, [], {}, [value]]
    if isinstance(value, float):
        return ['x', True, [], {}, int(value)]
    if isinstance(value, str):
        return [12, 0, True, 1.5, [], {}, [value], {value: value}]
    if isinstance(value, list):
        return [{}, 'list', 1, True, {str(i): v for i, v in enumerate(value)},
                [value]]
    if isinstance(value, dict):
        return [[], list(value.values()), 'dict', 1, False, [value]]
    return [{}, [], 'none', 0, False]


class _JsonMutations(object):
    """Mutations of one JSON document (an object primitive or a list)."""

    def __init__(self, category, text, rng, min_documents):
        self.category = category
        self.text = text
        self.base = json.loads(text)
        self.rng = rng
        self.min_documents = min_documents
        self.paths = [path for path, _value in _walk(self.base)]
        self.count = 0

    def copy(self):
        return json.loads(self.text)

    def emit(self, kind, where, obj=NO_OBJECT, text=None,
             unusable_envelope=False):
        if text is None:
            text = json.dumps(obj)
        return self.emit_raw(kind, where, text, obj, unusable_envelope)

    def emit_raw(self, kind, where, value, obj=NO_OBJECT,
                 unusable_envelope=False):
        self.count += 1
        return Document(self.category, kind, where, value, obj,
                        unusable_envelope=unusable_envelope)

    def envelopes(self):
        return [path for path in [()] + self.paths
                if isinstance(_get(self.base, path), dict)
                and primitive.NAME in _get(self.base, path)]

    def dicts(self):
        return [path for path in [()] + self.paths
                if isinstance(_get(self.base, path), dict)]

    def strings(self):
        return [path for path in self.paths
                if isinstance(_get(self.base, path), str)]

    def numbers(self):
        return [path for path in self.paths
                if isinstance(_get(self.base, path), (int, float))
                and not isinstance(_get(self.base, path), bool)]

    # -- families on the decoded document --------------------------------

    def missing_keys(self):
        for path in self.paths:
            yield self.emit('missing-key', _where(path),
                            _without(self.copy(), path))

    def nulls(self):
        for path in self.paths:
            if _get(self.base, path) is not None:
                yield self.emit('null', _where(path),
                                _with(self.copy(), path, None))

    def wrong_types(self):
        for path in [()] + self.paths:
            options = _wrong_types(_get(self.base, path))
            for value in self.rng.sample(options, min(3, len(options))):
                yield self.emit('wrong-type', _where(path),
                                _with(self.copy(), path, value))

    def envelope_fields(self):
        for path in self.envelopes():
            read = _is_read_envelope(self.category, path)
            for field, values, kind in (
                    (primitive.NAME, OBJECT_NAMES, 'object-name'),
                    (primitive.NAMESPACE, NAMESPACES, 'namespace'),
                    (primitive.VERSION, VERSIONS, 'version')):
                original = _get(self.base, path)[field]
                for value in values:
                    if value == original:
                        continue
                    where = _where(path + (field,))
                    yield self.emit(kind, '%s=%s' % (where,
                                                     _preview(value, 20)),
                                    _with(self.copy(), path + (field,),
                                          value), unusable_envelope=read)

    def huge_values(self):
        for path in self.strings():
            for value in HUGE_STRINGS:
                yield self.emit('huge-string', _where(path),
                                _with(self.copy(), path, value))
        for path in self.numbers():
            for value in HUGE_INTEGERS:
                yield self.emit('huge-integer', _where(path),
                                _with(self.copy(), path, value))
            # An integer literal Python refuses to read (> 4300 digits).
            marker = MARKER % self.count
            text = json.dumps(_with(self.copy(), path, marker)).replace(
                json.dumps(marker), '1' * 5000)
            yield self.emit('huge-integer', _where(path), text=text)
        candidates = [()] + self.paths
        for path in self.rng.sample(candidates, min(12, len(candidates))):
            kind = self.rng.choice(['list', 'dict'])
            marker = MARKER % self.count
            text = json.dumps(_with(self.copy(), path, marker)).replace(
                json.dumps(marker), _deep_text(kind))
            yield self.emit('deep-nesting', _where(path),
                            _with(self.copy(), path, _deep(kind)), text)

    def not_numbers(self):
        paths = self.numbers() + self.rng.sample(self.paths,
                                                 min(10, len(self.paths)))
        for path in paths:
            for value in (float('nan'), float('inf'), float('-inf')):
                yield self.emit('nan-infinity', _where(path),
                                _with(self.copy(), path, value))

    def duplicate_keys(self):
        """A key twice in one object; JSON readers keep the last one."""
        for path in self.dicts():
            node = _get(self.base, path)
            if not node:
                continue
            key = self.rng.choice(sorted(node))
            value = self.rng.choice(_wrong_types(node[key]))
            for last in (True, False):
                marker = MARKER % self.count
                copied = dict(_get(self.copy(), path))
                if last:
                    copied[marker] = value
                else:
                    copied = dict([(marker, value)] + list(copied.items()))
                text = json.dumps(_with(self.copy(), path, copied)).replace(
                    json.dumps(marker), json.dumps(key), 1)
                obj = _with(self.copy(), path + (key,),
                            value if last else node[key])
                yield self.emit('duplicate-key', '%s (%s wins)' % (
                    _where(path + (key,)), 'mutated' if last else 'original'),
                    obj, text)

    def unknown_keys(self):
        for path in self.dicts():
            node = _get(self.base, path)
            key = ('nova_object.unknown' if primitive.NAME in node
                   else 'x_unknown_key')
            value = self.rng.choice(['x', 1, None, [], {'y': 1}])
            yield self.emit('unknown-key', _where(path + (key,)),
                            _with(self.copy(), path,
                                  dict(node, **{key: value})))

    def huge_cpu_sets(self):
        """Short CPU lists that name billions of CPUs."""
        if self.category == FLAVOR:
            path = ('cur', primitive.DATA, 'extra_specs')
            for extra in ({'hw:numa_cpus.0': WIDE_CPU_RANGE,
                           'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '4096',
                           'hw:numa_mem.1': '4096'},
                          {'hw:cpu_policy': 'mixed',
                           'hw:cpu_dedicated_mask': WIDE_CPU_RANGE},
                          {'hw:cpu_realtime': 'yes',
                           'hw:cpu_realtime_mask': '^' + WIDE_CPU_RANGE}):
                specs = dict(_get(self.base, path), **extra)
                yield self.emit('huge-cpu-set', _where(path) + ' ' + ', '.join(
                    '%s=%s' % item for item in sorted(extra.items())),
                    _with(self.copy(), path, specs))
        elif self.category == SPEC:
            # A pre-Liberty (unversioned) topology, which Nova converts.
            legacy = {'cells': [{'id': 0, 'cpus': WIDE_CPU_RANGE,
                                 'mem': {'total': 4096}}]}
            path = (primitive.DATA, 'numa_topology')
            yield self.emit('huge-cpu-set', _where(path) + ' (legacy)',
                            _with(self.copy(), path, legacy))

    def escaped_surrogates(self):
        for path in self.strings():
            value = _get(self.base, path)
            surrogate = self.rng.choice(SURROGATES)
            mutated = (value + surrogate if self.rng.random() < 0.5
                       else surrogate + value)
            yield self.emit('escaped-surrogate', _where(path),
                            _with(self.copy(), path, mutated))

    def harmless(self):
        shuffled = self.copy()
        for path in [()] + self.paths:
            node = _get(shuffled, path)
            if isinstance(node, dict):
                items = list(node.items())
                self.rng.shuffle(items)
                node.clear()
                node.update(items)
        yield self.emit('reordered-keys', '<root>', shuffled)
        yield self.emit('pretty-printed', '<root>', self.copy(),
                        json.dumps(self.base, indent=4))

    def specials(self):
        for text in SPECIAL_TEXTS:
            yield self.emit_raw('not-a-document', '<root>', text)
        for value in (b'', self.text.encode('utf-16'),
                      self.text.encode('utf-8-sig'),
                      bytearray(self.text.encode('utf-8')),
                      self.text + ' trailing', self.text + self.text,
                      '\ufeff' + self.text):
            yield self.emit_raw('not-a-document', 'whole text', value)

    # -- families on the stored text -------------------------------------

    def truncated(self):
        offset = self.rng.randrange(len(self.text))
        return self.emit_raw('truncated', 'offset %d' % offset,
                             self.text[:offset])

    def bit_flipped(self):
        data = bytearray(self.text.encode('utf-8'))
        offsets = sorted(self.rng.randrange(len(data))
                         for _flip in range(self.rng.randint(1, 3)))
        for offset in offsets:
            data[offset] ^= 1 << self.rng.randrange(8)
        where = 'bytes %s' % ','.join(str(o) for o in offsets)
        if self.rng.random() < 0.5:
            return self.emit_raw('bit-flip', where, bytes(data))
        return self.emit_raw('bit-flip-as-str', where,
                             bytes(data).decode('utf-8', 'surrogateescape'))

    def non_utf8(self):
        data = self.text.encode('utf-8')
        offset = self.rng.randrange(len(data) + 1)
        sequence = self.rng.choice(INVALID_UTF8)
        mutated = data[:offset] + sequence + data[offset:]
        where = '%r at byte %d' % (sequence, offset)
        choice = self.rng.random()
        if choice < 0.5:
            return self.emit_raw('non-utf8-bytes', where, mutated)
        if choice < 0.8:
            return self.emit_raw(
                'lone-surrogate-str', where,
                mutated.decode('utf-8', 'surrogateescape'))
        surrogate = self.rng.choice(SURROGATES)
        return self.emit_raw(
            'lone-surrogate-str', '%r at %d' % (surrogate, offset),
            self.text[:offset] + surrogate + self.text[offset:])

    def random_edits(self):
        """Two to four random edits of the decoded document."""
        document = self.copy()
        wheres = []
        for _edit in range(self.rng.randint(2, 4)):
            paths = [path for path, _value in _walk(document)]
            if not paths:
                break
            path = self.rng.choice(paths)
            action = self.rng.choice(['remove', 'null', 'retype', 'add'])
            node = _get(document, path)
            if action == 'remove':
                _without(document, path)
            elif action == 'null':
                _with(document, path, None)
            elif action == 'retype':
                _with(document, path, self.rng.choice(_wrong_types(node)))
            elif isinstance(node, dict):
                node['x_unknown_%d' % len(wheres)] = 1
            elif isinstance(node, list):
                node.append(self.rng.choice([None, 'x', 7, {}]))
            else:
                continue
            wheres.append('%s %s' % (action, _where(path)))
        return self.emit('random-edits', '; '.join(wheres) or '<none>',
                         document)

    def generate(self):
        families = (self.specials, self.harmless, self.missing_keys,
                    self.nulls, self.wrong_types, self.envelope_fields,
                    self.duplicate_keys, self.unknown_keys,
                    self.escaped_surrogates, self.not_numbers,
                    self.huge_values, self.huge_cpu_sets)
        for family in families:
            yield from family()
        random_families = (self.truncated, self.bit_flipped, self.non_utf8,
                           self.random_edits)
        # At least this many of the stored-text mutations, then fill up.
        for _round in range(60):
            for family in random_families:
                yield family()
        while self.count < self.min_documents:
            yield self.rng.choice(random_families)()


def _sysmeta_wrong_values(value):
    return [7, True, 1.5, [], {}, value.encode('utf-8'), 10 ** 400, -1]


class _SystemMetadataMutations(object):
    """Mutations of the values of an instance's ``image_*`` metadata."""

    def __init__(self, values, rng, min_documents):
        self.values = values
        self.rng = rng
        self.min_documents = min_documents
        self.keys = [key for key in values if key.startswith('image_')]
        self.count = 0

    def emit(self, kind, where, values, extra_rows=()):
        """A document: rows of ``values`` plus ``extra_rows``.

        ``extra_rows`` are ``(key, value, deleted, first)``: a row placed
        before (``first``) or after the others.
        """
        rows = []

        def add(key, value, deleted):
            rows.append({'id': len(rows) + 1, 'key': key, 'value': value,
                         'deleted': deleted})
        for key, value, deleted, first in extra_rows:
            if first:
                add(key, value, deleted)
        for key, value in values.items():
            add(key, value, 0)
        for key, value, deleted, first in extra_rows:
            if not first:
                add(key, value, deleted)
        # What Nova reads: live rows win over soft-deleted ones, then the
        # highest id.
        seen = {}
        for row in sorted(rows, key=lambda r: (r['deleted'] == 0, r['id'])):
            seen[row['key']] = row['value']
        self.count += 1
        return Document(SYSMETA, kind, where, rows, seen)

    def replaced(self, key, value):
        values = dict(self.values)
        values[key] = value
        return values

    def per_key(self, key):
        value = self.values[key]
        values = dict(self.values)
        del values[key]
        yield self.emit('missing-key', key, values)
        yield self.emit('null', key, self.replaced(key, None))
        for wrong in _sysmeta_wrong_values(value):
            yield self.emit('wrong-type', '%s=%s' % (key, _preview(wrong, 20)),
                            self.replaced(key, wrong))
        for invalid in ('bogus', '', ' ', value.upper(), value + ' ',
                        '\x00', 'None', 'null', '-1', '0x10', '1,2',
                        '{"a": 1}'):
            yield self.emit('invalid-value', '%s=%r' % (key, invalid),
                            self.replaced(key, invalid))
        for _cut in range(2):
            offset = self.rng.randrange(len(value) + 1)
            yield self.emit('truncated', '%s[:%d]' % (key, offset),
                            self.replaced(key, value[:offset]))
        data = bytearray(value.encode('utf-8'))
        if data:
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        yield self.emit('bit-flip', key, self.replaced(key, bytes(data)))
        sequence = self.rng.choice(INVALID_UTF8)
        yield self.emit('non-utf8-bytes', key,
                        self.replaced(key, value.encode('utf-8') + sequence))
        yield self.emit('lone-surrogate-str', key, self.replaced(
            key, (value.encode('utf-8') + sequence).decode(
                'utf-8', 'surrogateescape')))
        yield self.emit('lone-surrogate-str', key, self.replaced(
            key, self.rng.choice(SURROGATES) + value))
        for huge in HUGE_STRINGS + ('1' + '0' * 400, '9' * 5000,
                                    '-' + '9' * 400):
            yield self.emit('huge-value', '%s=%s' % (key, _preview(huge, 12)),
                            self.replaced(key, huge))
        for number in ('nan', 'inf', '-Infinity', '1e400'):
            yield self.emit('nan-infinity', '%s=%s' % (key, number),
                            self.replaced(key, number))
        wrong = self.rng.choice(['bogus', '', '-1', 'nan'])
        for deleted, first in ((17, True), (17, False), (0, True),
                               (0, False)):
            yield self.emit(
                'duplicate-key', '%s (%s %s row %r)' % (
                    key, 'deleted' if deleted else 'live',
                    'first' if first else 'last', wrong),
                self.values, [(key, wrong, deleted, first)])

    def unknown_keys(self):
        for key, value in (('image_x_unknown', '1'),
                           ('image_hw_numa_cpus.2', '4'),
                           ('image_hw_numa_mem.7', '1'),
                           ('image_hw_bogus_property', 'x'),
                           ('image_trait:CUSTOM_X', 'required'),
                           ('image_mappings', 'garbage'),
                           ('image_block_device_mapping', '[{"a": 1}]')):
            yield self.emit('unknown-key', key, self.replaced(key, value))

    def huge_cpu_sets(self):
        for value in (WIDE_CPU_RANGE, MANY_CPU_RANGES):
            yield self.emit('huge-cpu-set', 'image_hw_numa_cpus.0=%s'
                            % _preview(value, 30), self.replaced(
                                'image_hw_numa_cpus.0', value))

    def random_edits(self):
        values = dict(self.values)
        wheres = []
        for key in self.rng.sample(self.keys, self.rng.randint(2, 4)):
            action = self.rng.choice(['remove', 'null', 'retype', 'cut',
                                      'bytes'])
            value = values[key]
            if action == 'remove':
                del values[key]
            elif action == 'null':
                values[key] = None
            elif action == 'retype':
                values[key] = self.rng.choice(_sysmeta_wrong_values(value))
            elif action == 'cut':
                values[key] = value[:self.rng.randrange(len(value) + 1)]
            else:
                values[key] = value.encode('utf-8') + self.rng.choice(
                    INVALID_UTF8)
            wheres.append('%s %s' % (action, key))
        return self.emit('random-edits', '; '.join(wheres), values)

    def generate(self):
        yield self.emit('unchanged', '<all>', self.values)
        for key in self.keys:
            yield from self.per_key(key)
        yield from self.unknown_keys()
        yield from self.huge_cpu_sets()
        while self.count < self.min_documents:
            yield self.random_edits()


def generate(category, seed=SEED, min_documents=FILL_TO):
    """Yield the Documents of ``category``, deterministically for a seed.

    At least ``min_documents`` are generated. Flavor documents are
    alternately evaluated with and without the instance's flavor mirrors
    (huge integers with both), so that mutated sizes also reach the
    derivations.
    """
    rng = random.Random('%s/%s' % (seed, category))
    documents = base()
    if category == SYSMETA:
        yield from _SystemMetadataMutations(
            documents.system_metadata, rng, min_documents).generate()
        return
    mutations = _JsonMutations(category, documents.texts[category], rng,
                               min_documents)
    for index, document in enumerate(mutations.generate()):
        if category == FLAVOR:
            if document.kind == 'huge-integer':
                yield document
                document = dataclasses.replace(document, null_mirrors=True)
            else:
                document.null_mirrors = bool(index % 2)
        yield document


# -- running documents through healreq ---------------------------------------

# Seconds one call may take before it counts as a hang (documents take
# milliseconds), and the memory a pass may add to the process before
# allocations fail (a MemoryError then counts as a crash instead of
# exhausting the machine).
DEADLINE = 1.0
MEMORY_HEADROOM = 256 << 20


class Deadline(BaseException):
    """A call ran out of time (raised from SIGALRM)."""


def _expire(signum, frame):
    raise Deadline('still running when its time ran out')


@contextlib.contextmanager
def guarded_pass():
    """Bound the memory of a pass and arm the per-call deadline."""
    saved_limit = None
    try:
        with open('/proc/self/statm') as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        saved_limit = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        pass
    if saved_limit is not None:
        soft, hard = saved_limit
        limit = size + MEMORY_HEADROOM
        for bound in (soft, hard):
            if bound != resource.RLIM_INFINITY:
                limit = min(limit, bound)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    previous = signal.signal(signal.SIGALRM, _expire)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, saved_limit)


def call(function, *args, seconds=DEADLINE):
    """``(result, None)`` or ``(None, exception)``, within ``seconds``.

    Only usable inside ``guarded_pass``.
    """
    result = error = None
    try:
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            result = function(*args)
        except (Exception, Deadline) as exc:
            error = exc
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except Deadline as exc:
        # Expired while a long C call (which does not look at signals)
        # was ending: still a call that ran out of time.
        result, error = None, error or exc
    return result, error


def _frame_name(frame):
    filename = frame.filename
    marker = 'healreq' + os.sep
    if marker in filename:
        filename = filename[filename.rindex(marker):]
    return '%s:%d (%s)' % (filename.replace(os.sep, '/'), frame.lineno,
                           frame.name)


def _location(exc):
    """The innermost healreq (non-test) frame, and the entry into healreq.

    E.g. ``healreq/objects/pci.py:89 (_alias_key) via
    healreq/heal/decisions.py:118 (evaluate)``.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    product = [f for f in frames if 'healreq' + os.sep in f.filename
               and os.sep + 'tests' + os.sep not in f.filename]
    if not product:
        return _frame_name(frames[-1])
    if len(product) == 1:
        return _frame_name(product[0])
    return '%s via %s' % (_frame_name(product[-1]), _frame_name(product[0]))


def _describe_exception(exc):
    try:
        message = str(exc)
    except ValueError:
        message = '<unprintable>'
    return '%s: %s' % (type(exc).__name__, _preview(message, 160)[1:-1]
                       if message else '')


@dataclasses.dataclass
class Failure:
    """Identical failures, with the first document that triggered one."""
    signature: str
    example: str
    exception: str
    count: int = 0


@dataclasses.dataclass
class Outcome:
    """What a category's documents did."""
    category: str
    documents: int = 0
    errors: int = 0
    accepted: int = 0
    crashed: int = 0
    parser_calls: int = 0
    reasons: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    kinds: dict = dataclasses.field(default_factory=dict)
    failures: dict = dataclasses.field(default_factory=dict)
    accepted_malformed: dict = dataclasses.field(default_factory=dict)
    not_converging: dict = dataclasses.field(default_factory=dict)
    parser_failures: dict = dataclasses.field(default_factory=dict)

    def fail(self, table, signature, document, exception=''):
        failure = table.setdefault(signature, Failure(
            signature, document.describe(), exception))
        failure.count += 1

    def count(self, document, verdict):
        per_kind = self.kinds.setdefault(document.kind, collections.Counter())
        per_kind[verdict] += 1

    def summary(self):
        lines = ['%s: %d documents, %d errors, %d accepted, %d crashed; '
                 '%d parser calls' % (self.category, self.documents,
                                      self.errors, self.accepted,
                                      self.crashed, self.parser_calls)]
        for kind, counts in sorted(self.kinds.items()):
            lines.append('  %-20s %s' % (kind, ', '.join(
                '%s %d' % item for item in sorted(counts.items()))))
        lines.append('  reasons: %s' % ', '.join(
            '%s %d' % item for item in self.reasons.most_common()))
        return '\n'.join(lines)


def format_failures(table):
    lines = []
    for failure in sorted(table.values(), key=lambda f: -f.count):
        lines.append('%d x %s\n    %s\n    first input: %s' % (
            failure.count, failure.signature, failure.exception,
            failure.example))
    return '\n'.join(lines)


def classify(evaluation):
    """Return 'error' or 'accepted', or a description of what is wrong.

    An error must carry a public reason code and a detail and nothing to
    write; an accepted document must be consistent, or drifted with a
    healed spec that is valid JSON and parses back as a RequestSpec.
    """
    finding = evaluation.finding
    if finding.status is Status.ERROR:
        if finding.reason not in findings.REASONS[Status.ERROR]:
            return 'error without a listed reason code: %r' % (
                finding.reason,)
        if not finding.detail or not isinstance(finding.detail, str):
            return 'error %s without a detail' % finding.reason
        if evaluation.new_spec is not None or finding.changes:
            return 'error %s with something to write' % finding.reason
        return 'error'
    if finding.status is Status.CONSISTENT:
        if evaluation.new_spec is not None or finding.changes:
            return 'consistent with something to write'
        return 'accepted'
    if finding.status is Status.DRIFTED:
        if finding.reason not in findings.REASONS[Status.DRIFTED]:
            return 'drift without a listed reason code: %r' % (
                finding.reason,)
        if not isinstance(evaluation.new_spec, str):
            return 'drifted without a healed spec'
        try:
            json.loads(evaluation.new_spec)
            request_spec.RequestSpecDocument(evaluation.new_spec).flavor()
        except (ValueError, RecursionError) as exc:
            return 'healed spec does not parse back: %s' % (
                _describe_exception(exc))
        return 'accepted'
    return 'unexpected status %s (%s)' % (finding.status.value,
                                          finding.reason)


@functools.lru_cache(maxsize=None)
def _base_spec_document():
    return json.loads(base().texts[SPEC])


def engine_steps(record):
    """What the engine does with one record of a batch.

    It parses the spec and learns its object versions (with those of the
    batch's other, healthy specs), then evaluates the record.
    """
    profile = versions.VersionProfile()
    profile.observe(_base_spec_document())
    spec = decisions.parse_spec(record)
    if spec is not None:
        profile.observe(spec.document)
    return decisions.evaluate(record, CELL, NOW, SETTINGS, profile)


def evaluate_document(document, uuid=INSTANCE_UUID):
    """Evaluate the base instance holding ``document``, as the engine does.

    Returns ``(evaluation, exception)``; only usable inside guarded_pass.
    """
    record = build_record(document.category, document.value,
                          null_mirrors=document.null_mirrors, uuid=uuid)
    return call(engine_steps, record)


PrimitiveError = primitive.PrimitiveError
_IMAGE_ERRORS = (PrimitiveError, image_obj.ImageMetaError)
_NUMA_ERRORS = (PrimitiveError, numa_obj.ConstraintError)


def _dig(value, *keys):
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _text_parsers(category):
    """``(name, function, allowed errors)`` taking the stored value."""
    parsers = [('primitive.load_json',
                lambda value: primitive.load_json(value, category),
                (PrimitiveError,))]
    if category == SPEC:
        parsers.append((
            'request_spec.RequestSpecDocument',
            lambda value: request_spec.RequestSpecDocument(value).flavor(),
            (PrimitiveError,)))
    elif category == FLAVOR:
        parsers.append(('flavor.parse_instance_flavors',
                        flavor_obj.parse_instance_flavors,
                        (PrimitiveError,)))
    elif category == NUMA:
        parsers.append(('numa.from_primitive',
                        lambda value: numa_primitive.from_primitive(
                            value, NUMA),
                        _NUMA_ERRORS))
    elif category == PCI:
        parsers.append(('pci.from_instance_extra',
                        pci_obj.from_instance_extra, (PrimitiveError,)))
    return parsers


def _as_pci_primitive(requests):
    """The spec form (InstancePCIRequests) of instance_extra requests."""
    if not isinstance(requests, list):
        return requests
    return primitive.wrap(pci_obj.REQUESTS_NAME, '1.1', {'requests': [
        primitive.wrap(pci_obj.REQUEST_NAME, '1.4', item)
        for item in requests]})


def _object_parsers(category, obj):
    """``(name, thunk, allowed errors)`` on a decoded document."""
    if category == SPEC:
        data = _dig(obj, primitive.DATA)
        image = _dig(data, 'image')
        return [
            ('flavor.parse', lambda: flavor_obj.parse(
                _dig(data, 'flavor'), 'spec flavor'), (PrimitiveError,)),
            ('image.image_from_primitive', lambda: (
                image_obj.image_from_primitive(image, 'spec image')),
             _IMAGE_ERRORS),
            ('image.props_from_primitive', lambda: (
                image_obj.props_from_primitive(
                    _dig(image, primitive.DATA, 'properties'),
                    'spec image properties')), _IMAGE_ERRORS),
            ('numa.from_primitive', lambda: numa_primitive.from_primitive(
                _dig(data, 'numa_topology'), 'spec numa_topology'),
             _NUMA_ERRORS),
            ('pci.from_primitive', lambda: pci_obj.from_primitive(
                _dig(data, 'pci_requests'), 'spec pci_requests'),
             (PrimitiveError,)),
        ]
    if category == FLAVOR:
        return [('flavor.parse', functools.partial(
            flavor_obj.parse, _dig(obj, slot), slot), (PrimitiveError,))
            for slot in ('cur', 'old', 'new')]
    if category == NUMA:
        return [('numa.from_primitive', lambda: numa_primitive.from_primitive(
            obj, NUMA), _NUMA_ERRORS)]
    if category == PCI:
        return [('pci.from_primitive', lambda: pci_obj.from_primitive(
            _as_pci_primitive(obj), 'pci requests'), (PrimitiveError,))]
    return [('image.image_from_system_metadata',
             lambda: image_obj.image_from_system_metadata(
                 obj, dep.IMAGE_ID), _IMAGE_ERRORS)]


def _check_parsers(document, outcome):
    obj = document.obj
    if document.category != SYSMETA:
        for name, parser, allowed in _text_parsers(document.category):
            outcome.parser_calls += 1
            result, exc = call(parser, document.value)
            if name == 'primitive.load_json' and exc is None and (
                    obj is NO_OBJECT):
                obj = result
            if exc is not None and not isinstance(exc, allowed):
                outcome.fail(outcome.parser_failures, '%s raised %s at %s' % (
                    name, type(exc).__name__, _location(exc)), document,
                    _describe_exception(exc))
    if obj is NO_OBJECT:
        return
    for name, thunk, allowed in _object_parsers(document.category, obj):
        outcome.parser_calls += 1
        _result, exc = call(thunk)
        if exc is not None and not isinstance(exc, allowed):
            outcome.fail(outcome.parser_failures, '%s raised %s at %s' % (
                name, type(exc).__name__, _location(exc)), document,
                _describe_exception(exc))


def _check_evaluation(document, outcome):
    evaluation, exc = evaluate_document(document)
    if exc is not None:
        outcome.crashed += 1
        outcome.count(document, 'crashed')
        outcome.fail(outcome.failures, 'evaluation raised %s at %s' % (
            type(exc).__name__, _location(exc)), document,
            _describe_exception(exc))
        return
    verdict = classify(evaluation)
    outcome.count(document, verdict if verdict in ('error', 'accepted')
                  else 'wrong')
    finding = evaluation.finding
    if verdict == 'error':
        outcome.errors += 1
        outcome.reasons[finding.reason] += 1
    elif verdict == 'accepted':
        outcome.accepted += 1
        if document.expect_error:
            outcome.fail(outcome.accepted_malformed, '%s %s %s accepted as %s'
                         % (document.category, document.kind,
                            document.where.split('=')[0],
                            finding.status.value),
                         document, '; '.join(str(c) for c in finding.changes))
        if evaluation.new_spec is not None:
            _check_convergence(document, evaluation, outcome)
    else:
        outcome.fail(outcome.failures, verdict, document,
                     finding.detail or '')


def _check_convergence(document, evaluation, outcome):
    """The healed spec must be consistent when evaluated again."""
    record = build_record(document.category, document.value,
                          null_mirrors=document.null_mirrors)
    record.spec_row['spec'] = evaluation.new_spec
    again, exc = call(engine_steps, record)
    if exc is not None:
        outcome.fail(outcome.not_converging, 'evaluating the healed spec '
                     'raised %s at %s' % (type(exc).__name__,
                                          _location(exc)),
                     document, _describe_exception(exc))
    elif again.finding.status is not Status.CONSISTENT:
        outcome.fail(outcome.not_converging, 'healed spec is %s again (%s)'
                     % (again.finding.status.value, ', '.join(
                         again.finding.drift) or again.finding.reason),
                     document, '; '.join(
                         str(c) for c in again.finding.changes)
                     or again.finding.detail)


def run_category(category, seed=SEED):
    """Feed every document of ``category`` through healreq."""
    outcome = Outcome(category)
    with guarded_pass():
        for document in generate(category, seed):
            outcome.documents += 1
            _check_evaluation(document, outcome)
            _check_parsers(document, outcome)
    return outcome


_OUTCOMES = {}


def outcome_of(category):
    """The category's Outcome, computed once per process."""
    if category not in _OUTCOMES:
        _OUTCOMES[category] = run_category(category)
    return _OUTCOMES[category]


# -- the tests ---------------------------------------------------------------

def _counts_detail(test, categories):
    test.addDetail('robustness-counts', content.text_content('\n'.join(
        outcome_of(category).summary() for category in categories)))


class GeneratorTest(testtools.TestCase):

    def test_base_instance_is_consistent(self):
        evaluation = decisions.evaluate(build_record(), CELL, NOW, SETTINGS)
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status,
                         evaluation.finding.detail)
        # The NUMA category's spec lacks the topology, so that the
        # instance's own topology is read.
        evaluation = decisions.evaluate(
            build_record(NUMA, base().texts[NUMA]), CELL, NOW, SETTINGS)
        self.assertEqual(['numa_topology'], evaluation.finding.drift)

    def test_deterministic(self):
        first = [(d.kind, d.where, d.value) for d in generate(PCI)]
        second = [(d.kind, d.where, d.value) for d in generate(PCI)]
        self.assertEqual(first, second)
        other = [(d.kind, d.where, d.value) for d in generate(PCI, seed=1)]
        self.assertNotEqual(first, other)

    def test_every_family_is_generated(self):
        json_families = {
            'truncated', 'bit-flip', 'bit-flip-as-str', 'non-utf8-bytes',
            'lone-surrogate-str', 'escaped-surrogate', 'wrong-type', 'null',
            'missing-key', 'huge-string', 'huge-integer', 'deep-nesting',
            'duplicate-key', 'nan-infinity', 'unknown-key',
            'not-a-document', 'random-edits'}
        envelope_families = {'object-name', 'namespace', 'version'}
        for category in CATEGORIES:
            result = outcome_of(category)
            self.assertGreaterEqual(result.documents, MIN_DOCUMENTS)
            if category == SYSMETA:
                expected = {'truncated', 'bit-flip', 'non-utf8-bytes',
                            'lone-surrogate-str', 'wrong-type', 'null',
                            'missing-key', 'huge-value', 'duplicate-key',
                            'nan-infinity', 'unknown-key', 'invalid-value'}
            elif category == PCI:
                expected = json_families
            else:
                expected = json_families | envelope_families
            self.assertEqual(set(), expected - set(result.kinds), category)


class EvaluateTest(testtools.TestCase):
    """decisions.evaluate on each document: an error, or a sound acceptance."""

    def check(self, category):
        _counts_detail(self, [category])
        result = outcome_of(category)
        self.assertGreaterEqual(result.documents, MIN_DOCUMENTS)
        if result.failures:
            self.fail('%d of %d %s documents crashed or gave a wrong '
                      'outcome:\n%s' % (
                          sum(f.count for f in result.failures.values()),
                          result.documents, category,
                          format_failures(result.failures)))
        self.assertEqual(result.documents, result.errors + result.accepted)

    def test_request_spec(self):
        self.check(SPEC)

    def test_instance_flavor(self):
        self.check(FLAVOR)

    def test_instance_numa_topology(self):
        self.check(NUMA)

    def test_instance_pci_requests(self):
        self.check(PCI)

    def test_system_metadata(self):
        self.check(SYSMETA)

    def test_at_least_1000_documents_are_errors(self):
        _counts_detail(self, CATEGORIES)
        self.assertGreaterEqual(
            sum(outcome_of(category).errors for category in CATEGORIES),
            1000)

    def test_unusable_documents_are_never_accepted(self):
        """Text that is not JSON, and unloadable object envelopes."""
        failures = {}
        for category in CATEGORIES:
            failures.update(outcome_of(category).accepted_malformed)
        if failures:
            self.fail('malformed documents accepted:\n%s'
                      % format_failures(failures))

    def test_healed_specs_are_consistent_when_evaluated_again(self):
        failures = {}
        for category in CATEGORIES:
            failures.update(outcome_of(category).not_converging)
        if failures:
            self.fail('heals that do not converge:\n%s'
                      % format_failures(failures))


class ParserTest(testtools.TestCase):
    """The public parsers raise only their modules' documented errors."""

    def check(self, category):
        result = outcome_of(category)
        self.assertGreaterEqual(result.parser_calls, result.documents)
        if result.parser_failures:
            self.fail('parsers raised undocumented exceptions for %s:\n%s'
                      % (category, format_failures(result.parser_failures)))

    def test_request_spec(self):
        self.check(SPEC)

    def test_instance_flavor(self):
        self.check(FLAVOR)

    def test_instance_numa_topology(self):
        self.check(NUMA)

    def test_instance_pci_requests(self):
        self.check(PCI)

    def test_system_metadata(self):
        self.check(SYSMETA)
