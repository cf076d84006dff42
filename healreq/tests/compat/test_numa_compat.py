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


"""Differential proof: our NUMA constraints and primitives against Nova.

Flavors (vCPUs, memory, extra specs with valid and invalid values) times
image properties (raw strings coerced by Nova's own ``ImageMeta``) go
through Nova's ``numa_get_constraints`` and our
``numa_constraints.constraints``: an explicit grid per group of related
settings plus seeded random mixtures. Both must give the same topology
or refuse with the same exception.

Every distinct topology is then written at every object version by us and
by Nova's ``obj_to_primitive``; Nova must load what we write; and stored
primitives Nova wrote at old versions, or with host-fitted values and
legacy stamps, must read the same through our ``from_primitive`` as
through Nova's load and legacy cpuset migration.

Our side is called with the installed Nova's release (``base.RELEASE``).
Where the point releases of that release load legacy cells by different
rules, our load under the installed point release's rule
(``base.POINT_RELEASE``) must equal Nova's, and our load under the release
must equal Nova's whenever it does not refuse the topology as ambiguous.
"""

import copy
import itertools
import json
import logging
import random
import sys
import warnings

import fixtures

from healreq.objects import numa
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq.objects import primitive
from healreq import releases
from healreq.tests.compat import base
from healreq.tests.compat import deliberate

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        import nova
        import nova.conf
        from nova import context as nova_context
        from nova.db.main import api as nova_main_db
        from nova.db import migration as nova_migration
        from nova import objects as nova_objects
        from nova.virt import hardware as nova_hardware
        from oslo_db.sqlalchemy import enginefacade
        from oslo_db.sqlalchemy import test_fixtures as db_fixtures
except ImportError:  # pragma: no cover - depends on the environment
    nova = None

SHOWN = 20
SEED = 20250934
RANDOM_CASES = 40000
TOPOLOGY_VERSIONS = ('1.0', '1.1', '1.2', '1.3')
CELL_VERSIONS = ('1.0', '1.1', '1.2', '1.3', '1.4', '1.5', '1.6')
HT = 'HW_CPU_HYPERTHREADING'
UUID = '7c1e5b0a-3f2d-4e9a-8b6c-1d0f2e3a4b5c'

# Value pools: valid values, near misses and garbage.
CPU_POLICIES = ('dedicated', 'shared', 'mixed', '', 'DEDICATED', 'bogus')
THREAD_POLICIES = ('prefer', 'isolate', 'require', '', 'Prefer', 'bogus')
BOOLEANS = ('yes', 'true', 'no', 'false', '1', '0', ' On ', 'maybe', '')
CPU_MASKS = ('^0', '^0-1', '0', '1-2', '1,3', '^1,3', '0-3', '0-7', '5',
             '^5', '^0-7', '', 'x', '^', '2-1', ' ^0 ', '1-', '0,,2',
             '^1-2', '0-1,^1', '\u0663', '1_0', '+1')
EMULATOR_POLICIES = ('share', 'isolate', '', 'bogus')
NODE_COUNTS = ('1', '2', '3', '4', '8', '0', '-1', '', 'two', ' 2', '02',
               '1.0', '+2')
PAGE_SIZES = ('small', 'large', 'any', '2048', '4', '1048576', '2MB',
              '2MiB', '1GB', '1GiB', '4KB', '1.5KB', '0', '0B', '0.4B',
              '-2MB', '-3072B', '-2048KB', '2Mb', '16Mbit', 'big', '',
              '\u00b2', '\u0663', '2 MB', 'LARGE', ' large', '3072B',
              '9' * 400 + 'B', '2MB\n', '.5MB', '2048KiB', '1QB')
IMAGE_PAGE_SIZES = ('2048', 'large', 'small', 'any', '1GB', '2MB', 'bogus',
                    '', '0', '\u00b2', '4KB')
PMEM = ('4GB', '4GB,SMALL', ' , ', '', 'x,', 'LABEL')
ENCRYPTION_MODELS = ('amd-sev', 'amd-sev-es', 'amd-sev-snp', 'intel-tdx',
                     'bogus', '')
RESOURCE_AMOUNTS = ('0', '1', '2', '4', '5', 'x', '-4', ' 4', '+4')
RESOURCE_KEYS = ('resources:VCPU', 'resources:PCPU', 'resources1:PCPU',
                 'resources2:VCPU', 'resources01:PCPU', 'resources:PCPUS',
                 'resources_x:PCPU', 'resources12:PCPU', 'resources01:VCPU')
TRAIT_KEYS = ('trait:' + HT, 'trait1:' + HT, 'trait2:' + HT,
              'trait:' + HT + '_X', 'trait01:' + HT)
TRAIT_VALUES = ('required', 'forbidden', '', 'bogus')

# Per-node CPU and memory layouts (one string per node).
CPU_LAYOUTS = (('0-1', '2-3'), ('0,2', '1,3'), ('0', '1-3'), ('0-3',),
               ('0-1', '1-3'), ('0-1', '2-4'), ('0', '1'), ('1,8', '0-1'),
               ('0-1', '^0,2-3'), ('x', '0'), ('0-1', '2-3', '4-5'),
               ('0-2', '3-5'), ('0-5',), ('8,1,0', '2-3'), ('-1', '0-3'),
               ('0-1', ''), ('3,2,1,0', '9,8,17'),
               # A duplicate and an out-of-range vCPU on one node: the set's
               # iteration order decides which Nova reports.
               ('0-1', '1,8'), ('0-3', '8,0'), ('0-3', '9,1'),
               ('2-3', '16,8,0,1'))
MEMORY_LAYOUTS = (('2048', '2048'), ('1024', '3072'), ('4096',),
                  ('1000', '2000'), ('x', '1'), ('1024', '1024', '2048'),
                  ('3000', '3144'), ('4096', '0'), ('-1024', '5120'),
                  ('2048', ' 2048'))
SIZES = ((1, 1024), (2, 2048), (3, 3072), (4, 4096), (4, 3000), (6, 6144),
         (8, 8192), (4, 2048), (0, 1024), (5, 1000))


# Cases where healreq deliberately differs from Nova (deliberate.py):
# the grid holds them, the differential leaves them out by name and
# test_deliberate_differences checks the difference.
_HUGE = '0-%d' % deliberate.MAX_CPU_IDS
DELIBERATE_CASES = (
    (deliberate.MAX_CPU_IDS + 1, 1024, {}, {}),
    (-1, 1024, {'hw:numa_nodes': '1'}, {}),
    (4, 4096, {'hw:numa_nodes': '1', 'hw:numa_cpus.0': _HUGE,
               'hw:numa_mem.0': '4096'}, {}),
    (4, 4096, {'hw:cpu_policy': 'mixed',
               'hw:cpu_dedicated_mask': '^' + _HUGE}, {}),
    (4, 4096, {'hw:cpu_policy': 'dedicated', 'hw:cpu_realtime': 'yes',
               'hw:cpu_realtime_mask': '^' + _HUGE}, {}),
    (4, 4096, {'hw:cpu_policy': 'dedicated', 'hw:cpu_realtime': 'yes'},
     {'hw_cpu_realtime_mask': '^' + _HUGE}),
)


def _per_node(prefix, layout, gap=False):
    values = {'%s.%d' % (prefix, node): value
              for node, value in enumerate(layout)}
    if gap and len(layout) > 1:
        # Nodes after a gap are not read.
        values['%s.%d' % (prefix, len(layout) + 1)] = layout[0]
        del values['%s.%d' % (prefix, len(layout) - 1)]
    return values


def _product(*axes):
    """Dicts from the product of axes of (key, values); None = unset."""
    keys = [key for key, _values in axes]
    for combination in itertools.product(*[values for _k, values in axes]):
        yield {key: value for key, value in zip(keys, combination)
               if value is not None}


def _merge(*dicts):
    merged = {}
    for item in dicts:
        merged.update(item)
    return merged


def grid_cases():
    """The explicit grid: (vcpus, memory_mb, extra_specs, raw image)."""
    policy_images = (
        {}, {'hw_cpu_policy': 'dedicated'}, {'hw_cpu_policy': 'shared'},
        {'hw_cpu_policy': 'mixed'}, {'hw_cpu_thread_policy': 'isolate'},
        {'hw_cpu_thread_policy': 'prefer'}, {'hw_mem_page_size': '2048'},
        {'hw_mem_page_size': 'large'}, {'hw_numa_nodes': '2'},
        {'trait:' + HT: 'required'})
    for specs in _product(
            ('hw:cpu_policy', (None,) + CPU_POLICIES),
            ('hw:cpu_thread_policy', (None, 'prefer', 'isolate', 'require',
                                      '', 'bogus')),
            ('hw:numa_nodes', (None, '1', '2', '3', '0', 'x')),
            ('hw:mem_page_size', (None, 'small', 'large', 'any', '2048',
                                  '2MB', 'bogus'))):
        for image in policy_images:
            for vcpus, memory in ((4, 4096), (3, 3072)):
                yield vcpus, memory, specs, image

    mask_images = ({}, {'hw_cpu_realtime_mask': '^1'},
                   {'hw_cpu_realtime_mask': '0-1'})
    for specs in _product(
            ('hw:cpu_policy', (None, 'dedicated', 'mixed', 'shared')),
            ('hw:cpu_realtime', (None, 'yes', 'no')),
            ('hw:cpu_realtime_mask', (None, '^0', '0', '^0-1', '1-2', '0-3',
                                      '5', 'x', '')),
            ('hw:cpu_dedicated_mask', (None, '^0', '0-1', '^0-3', '9', 'a',
                                       '')),
            ('hw:emulator_threads_policy', (None,) + EMULATOR_POLICIES)):
        for image in mask_images:
            for vcpus, memory in ((1, 1024), (4, 4096)):
                yield vcpus, memory, specs, image

    resources = [{}]
    for key in RESOURCE_KEYS:
        resources += [{key: '4'}, {key: 'x'}]
    resources += [{'resources:PCPU': '5'}, {'resources:PCPU': '-4'},
                  {'resources:PCPU': '0'}, {'resources1:VCPU': '2'},
                  {'resources:PCPU': '2', 'resources1:PCPU': '2'},
                  {'resources:VCPU': '2', 'resources:PCPU': '2'}]
    traits = [{}, {'trait:' + HT: 'forbidden', 'trait2:' + HT: 'required'},
              {'trait2:' + HT: 'required', 'trait:' + HT: 'forbidden'}]
    traits += [{key: value} for key in TRAIT_KEYS[:3]
               for value in TRAIT_VALUES]
    for resource, trait, specs in itertools.product(
            resources, traits, _product(
                ('hw:cpu_policy', (None, 'dedicated', 'shared')),
                ('hw:emulator_threads_policy', (None, 'isolate', 'share')),
                ('hw:cpu_thread_policy', (None, 'prefer', 'isolate')))):
        for image in ({}, {'trait:' + HT: 'required'},
                      {'hw_cpu_thread_policy': 'require'}):
            yield 4, 4096, _merge(specs, resource, trait), image

    layouts = []
    for cpus, memory in itertools.product(CPU_LAYOUTS + (None,),
                                          MEMORY_LAYOUTS + (None,)):
        for cpu_source, memory_source in itertools.product(
                ('flavor', 'image'), repeat=2):
            layouts.append((cpus, cpu_source, memory, memory_source))
    for cpus, cpu_source, memory, memory_source in layouts:
        specs, image = {}, {}
        if cpus is not None:
            if cpu_source == 'flavor':
                specs.update(_per_node('hw:numa_cpus', cpus))
            else:
                image.update(_per_node('hw_numa_cpus', cpus))
        if memory is not None:
            if memory_source == 'flavor':
                specs.update(_per_node('hw:numa_mem', memory))
            else:
                image.update(_per_node('hw_numa_mem', memory))
        for nodes, policy in itertools.product(
                (None, ('flavor', '2'), ('flavor', '3'), ('image', '2'),
                 ('flavor', '1')),
                (None, 'dedicated', 'mixed')):
            case_specs, case_image = dict(specs), dict(image)
            if nodes is not None:
                if nodes[0] == 'flavor':
                    case_specs['hw:numa_nodes'] = nodes[1]
                else:
                    case_image['hw_numa_nodes'] = nodes[1]
            if policy is not None:
                case_specs['hw:cpu_policy'] = policy
                if policy == 'mixed':
                    case_specs['hw:cpu_dedicated_mask'] = '^0'
            for vcpus, memory_mb in ((4, 4096), (6, 6144)):
                yield vcpus, memory_mb, case_specs, case_image

    for specs in _product(
            ('hw:mem_page_size', (None,) + PAGE_SIZES),
            ('hw:locked_memory', (None, 'true', 'false', 'bogus')),
            ('hw:pmem', (None, '4GB,SMALL', ' , '))):
        for image in _product(
                ('hw_mem_page_size', (None,) + IMAGE_PAGE_SIZES[:7]),
                ('hw_locked_memory', (None, 'true', 'false'))):
            yield 2, 2048, specs, image

    for specs in _product(
            ('hw:mem_encryption', (None, 'true', 'false', 'maybe')),
            ('hw:mem_encryption_model', (None,) + ENCRYPTION_MODELS),
            ('hw:mem_page_size', (None, 'large'))):
        for image in _product(
                ('hw_mem_encryption', (None, 'true', 'false')),
                ('hw_mem_encryption_model', (None, 'amd-sev', 'amd-sev-es',
                                             'amd-sev-snp', 'intel-tdx')),
                ('hw_firmware_type', (None, 'uefi', 'bios')),
                ('hw_machine_type', (None, 'q35', 'pc')),
                ('hw_firmware_stateless', (None, 'true')),
                ('hw_video_model', (None, 'none'))):
            yield 2, 2048, specs, image

    for case in DELIBERATE_CASES:
        yield case


_FLAVOR_POOLS = {
    'hw:cpu_policy': CPU_POLICIES,
    'hw:cpu_thread_policy': THREAD_POLICIES,
    'hw:cpu_realtime': BOOLEANS,
    'hw:cpu_realtime_mask': CPU_MASKS,
    'hw:cpu_dedicated_mask': CPU_MASKS,
    'hw:emulator_threads_policy': EMULATOR_POLICIES,
    'hw:numa_nodes': NODE_COUNTS,
    'hw:mem_page_size': PAGE_SIZES,
    'hw:pmem': PMEM,
    'hw:locked_memory': BOOLEANS,
    'hw:mem_encryption': BOOLEANS,
    'hw:mem_encryption_model': ENCRYPTION_MODELS,
    'hw:cpu_sockets': ('2',),
    'hw_rng:allowed': ('true',),
}
_IMAGE_POOLS = {
    'hw_cpu_policy': ('dedicated', 'shared', 'mixed', 'bogus'),
    'hw_cpu_thread_policy': ('prefer', 'isolate', 'require'),
    'hw_cpu_realtime_mask': CPU_MASKS[:12],
    'hw_numa_nodes': ('1', '2', '3', '4', '0', '-1'),
    'hw_mem_page_size': IMAGE_PAGE_SIZES,
    'hw_locked_memory': BOOLEANS,
    'hw_mem_encryption': BOOLEANS,
    'hw_mem_encryption_model': ENCRYPTION_MODELS[:4],
    'hw_firmware_type': ('uefi', 'bios'),
    'hw_machine_type': ('q35', 'pc', 'pc-q35-8.2', ''),
    'hw_firmware_stateless': BOOLEANS,
    'hw_video_model': ('none', 'virtio'),
    'hw_pmu': ('true', 'false'),
    'trait:' + HT: ('required', 'forbidden'),
    'trait:CUSTOM_X': ('required',),
}


# Valid values, drawn more often so that many mixtures make a topology.
_PLAUSIBLE = {
    'hw:cpu_policy': ('dedicated', 'shared', 'mixed'),
    'hw:cpu_thread_policy': ('prefer', 'isolate', 'require'),
    'hw:cpu_realtime_mask': ('^0', '^0-1', '1'),
    'hw:cpu_dedicated_mask': ('^0', '^0-1', '1'),
    'hw:emulator_threads_policy': ('share', 'isolate'),
    'hw:numa_nodes': ('1', '2'),
    'hw:mem_page_size': ('small', 'large', 'any', '2048', '1GB'),
    'hw:locked_memory': ('true', 'false'),
    'hw:mem_encryption': ('false',),
}


def random_cases(count, seed=SEED):
    """Seeded random mixtures of every setting."""
    rng = random.Random(seed)
    for _ in range(count):
        vcpus, memory_mb = rng.choice(SIZES)
        # A third of the mixtures draw valid values only.
        clean = rng.random() < 0.35
        specs = {}
        for key, pool in _FLAVOR_POOLS.items():
            if rng.random() < (0.45 if key in ('hw:cpu_policy',
                                               'hw:numa_nodes') else 0.2):
                if key in _PLAUSIBLE and (clean or rng.random() < 0.7):
                    pool = _PLAUSIBLE[key]
                specs[key] = rng.choice(pool)
        for key in RESOURCE_KEYS:
            if rng.random() < 0.05:
                specs[key] = rng.choice(RESOURCE_AMOUNTS + (str(vcpus),))
        for key in TRAIT_KEYS:
            if rng.random() < 0.05:
                specs[key] = rng.choice(TRAIT_VALUES)
        image = {key: rng.choice(pool) for key, pool in _IMAGE_POOLS.items()
                 if rng.random() < (0.03 if clean else 0.12)}
        if rng.random() < 0.3:
            target = specs if rng.random() < 0.6 else image
            prefix = 'hw:numa_' if target is specs else 'hw_numa_'
            target.update(_per_node(prefix + 'cpus', rng.choice(CPU_LAYOUTS),
                                    gap=rng.random() < 0.1))
            if rng.random() < 0.85:
                target = specs if rng.random() < 0.6 else image
                prefix = 'hw:numa_' if target is specs else 'hw_numa_'
                target.update(_per_node(prefix + 'mem',
                                        rng.choice(MEMORY_LAYOUTS),
                                        gap=rng.random() < 0.1))
        items = list(specs.items())
        rng.shuffle(items)  # trait lookups depend on the order
        yield vcpus, memory_mb, dict(items), image


def _normalise(topology):
    """Compare form of a Nova or healreq topology."""
    if topology is None:
        return None
    cells = []
    for cell in topology.cells:
        if isinstance(cell, numa.Cell):
            pcpuset = cell.pcpuset
        else:
            pcpuset = (frozenset(cell.pcpuset) if 'pcpuset' in cell
                       else None)
        cells.append((cell.id, frozenset(cell.cpuset), pcpuset, cell.memory,
                      cell.pagesize, cell.cpu_policy, cell.cpu_thread_policy))
    if isinstance(topology, numa.Topology):
        emulator = topology.emulator_threads_policy
    else:
        emulator = (topology.emulator_threads_policy
                    if 'emulator_threads_policy' in topology else None)
    return tuple(cells), emulator


def _reindexed(normalised):
    """Cell ids replaced by the guest index (ours never keep host ids)."""
    if normalised is None:
        return None
    cells, emulator = normalised
    return tuple((index,) + cell[1:]
                 for index, cell in enumerate(cells)), emulator


def _loaded_back(normalised, cell_version):
    """A constraint as the installed Nova loads it from ``cell_version``.

    A cell before 1.5 stores no pcpuset. The CURRENT legacy-cell rule
    gives every such cell one; the VICTORIA rule only the dedicated cells
    with CPUs (their cpuset), leaving pcpuset unset on the others, as
    Nova's load of its own backport does.
    """
    if (cell_version >= '1.5'
            or base.POINT_RELEASE.legacy_cell_rules != (releases.VICTORIA,)):
        return normalised
    cells, emulator = normalised
    return tuple(cell if cell[5] == numa.DEDICATED and cell[2] else
                 cell[:2] + (None,) + cell[3:] for cell in cells), emulator


def _json(document):
    """A primitive as it is after a trip through the database."""
    return json.loads(json.dumps(document))


def _sorted_sets(document):
    """Nova writes sets in any order; sort them for comparison."""
    document = _json(document)
    for cell in document[primitive.DATA].get('cells', []):
        data = cell[primitive.DATA]
        for field in ('cpuset', 'pcpuset', 'cpuset_reserved'):
            if isinstance(data.get(field), list):
                data[field] = sorted(data[field])
        cell.pop(primitive.CHANGES, None)
    document.pop(primitive.CHANGES, None)
    return document


class NumaCompatTest(base.NovaTestCase):
    """Our NUMA module against nova.virt.hardware and InstanceNUMA*."""

    _image_cache = {}
    _outcomes = None

    def setUp(self):
        super().setUp()
        self.ambiguous = 0
        # Nova's legacy-cell warnings would flood the output.
        self.useFixture(fixtures.FakeLogger(level=logging.ERROR))

    def _report(self, label, cases, disagreements, excluded=None):
        summary = '%s: %d cases%s, %d disagreements' % (
            label, cases, deliberate.describe(excluded), len(disagreements))
        base.record_summary(summary)
        if disagreements:
            self.fail('%s; first %d:\n%s' % (
                summary, min(SHOWN, len(disagreements)),
                '\n'.join(disagreements[:SHOWN])))

    @classmethod
    def _image(cls, raw):
        """Nova's ImageMeta of raw properties and our coerced dict."""
        key = tuple(sorted(raw.items()))
        if key not in cls._image_cache:
            try:
                meta = nova_objects.ImageMeta.from_dict(
                    {'properties': dict(raw)})
            except Exception:
                # Nova refuses the image itself: image.py's business.
                cls._image_cache[key] = None
            else:
                props = meta.properties
                coerced = {name: getattr(props, name)
                           for name in props.fields
                           if props.obj_attr_is_set(name)}
                cls._image_cache[key] = (meta, coerced)
        return cls._image_cache[key]

    @classmethod
    def _run(cls, vcpus, memory_mb, specs, raw_image):
        """Outcomes of one case: (nova, ours, nova topology) or None."""
        image = cls._image(raw_image)
        if image is None:
            return None
        meta, props = image
        flavor = nova_objects.Flavor(
            id=1, name='f', flavorid='f', vcpus=vcpus, memory_mb=memory_mb,
            root_gb=1, ephemeral_gb=0, swap=0, extra_specs=dict(specs))
        try:
            theirs = nova_hardware.numa_get_constraints(flavor, meta)
        except Exception as exc:
            nova_outcome = ('refused', type(exc).__name__)
            theirs = None
        else:
            nova_outcome = ('ok', _normalise(theirs))
        ours = None
        try:
            ours = numa_constraints.constraints(vcpus, memory_mb,
                                                dict(specs), props,
                                                base.RELEASE)
        except numa.ConstraintError as exc:
            our_outcome = ('refused', exc.nova_exception)
        except Exception as exc:
            our_outcome = ('crashed', '%s: %s' % (type(exc).__name__, exc))
        else:
            our_outcome = ('ok', _normalise(ours))
        return nova_outcome, our_outcome, theirs, ours

    def _differential(self, label, cases, minimum):
        count = 0
        outcomes = {'ok': 0, 'refused': 0}
        disagreements = []
        topologies = {}
        excluded = {}
        for vcpus, memory_mb, specs, raw_image in cases:
            name = deliberate.numa_case(vcpus, specs, raw_image)
            if name is not None:
                excluded[name] = excluded.get(name, 0) + 1
                continue
            result = self._run(vcpus, memory_mb, specs, raw_image)
            if result is None:
                continue
            count += 1
            nova_outcome, our_outcome, theirs, ours = result
            outcomes[nova_outcome[0]] += 1
            if nova_outcome != our_outcome:
                disagreements.append(
                    'vcpus=%d memory_mb=%d specs=%r image=%r: nova %r, ours '
                    '%r' % (vcpus, memory_mb, specs, raw_image,
                            nova_outcome, our_outcome))
            elif theirs is not None:
                topologies.setdefault(nova_outcome[1], (theirs, ours))
        sys.stdout.write('%s: %d topologies (%d distinct), %d refusals\n' % (
            label, outcomes['ok'], len(topologies), outcomes['refused']))
        self.assertGreater(count, minimum)
        self.assertGreater(outcomes['ok'], minimum // 10)
        self.assertGreater(outcomes['refused'], minimum // 10)
        self._report(label, count, disagreements, excluded)
        return topologies

    @classmethod
    def _distinct_topologies(cls):
        """Distinct (nova, ours) topologies from a share of the cases."""
        if cls._outcomes is None:
            found = {}
            for case in itertools.chain(
                    itertools.islice(grid_cases(), 0, None, 7),
                    random_cases(5000, seed=SEED + 1)):
                if deliberate.numa_case(case[0], case[2], case[3]):
                    continue
                result = cls._run(*case)
                if result is None or result[2] is None:
                    continue
                if result[1] == result[0]:
                    found.setdefault(result[0][1], (result[2], result[3]))
            # A deterministic spread, to bound the run time.
            cls._outcomes = list(found.values())[::max(1, len(found) // 150)]
        return cls._outcomes

    def test_constraints_grid(self):
        self._differential('numa constraints (grid)', grid_cases(), 50000)

    def test_deliberate_differences(self):
        """Each case left out by name differs from Nova as stated."""
        problems = []
        for vcpus, memory_mb, specs, raw_image in DELIBERATE_CASES:
            name = deliberate.numa_case(vcpus, specs, raw_image)
            where = 'vcpus=%d specs=%r image=%r' % (vcpus, specs, raw_image)
            if name is None or not deliberate.applies(name, base.RELEASE):
                problems.append('%s: not a named difference of %s' % (
                    where, base.RELEASE.series))
                continue
            nova_outcome, our_outcome, _t, _o = self._run(
                vcpus, memory_mb, specs, raw_image)
            expected = ('refused', 'ValueError' if
                        name == deliberate.VCPUS_OUT_OF_RANGE else 'Invalid')
            if our_outcome != expected or nova_outcome == our_outcome:
                problems.append('%s (%s): nova %r, ours %r' % (
                    where, name, nova_outcome, our_outcome))
        self.assertEqual([], problems)

    def test_constraints_random(self):
        self._differential('numa constraints (random)',
                           random_cases(RANDOM_CASES), RANDOM_CASES // 2)

    def test_to_primitive_matches_nova(self):
        cases = 0
        disagreements = []
        for theirs, ours in self._distinct_topologies():
            for topology_version, cell_version in itertools.product(
                    TOPOLOGY_VERSIONS, CELL_VERSIONS):
                cases += 1
                where = '%s @%s/%s' % (numa.describe(ours), topology_version,
                                       cell_version)
                manifest = {'InstanceNUMATopology': topology_version,
                            'InstanceNUMACell': cell_version}
                try:
                    expected = _sorted_sets(theirs.obj_to_primitive(
                        target_version=topology_version,
                        version_manifest=manifest))
                except Exception as exc:
                    expected = type(exc).__name__
                try:
                    written = numa_primitive.to_primitive(
                        ours, topology_version, cell_version)
                except numa.ConstraintError as exc:
                    if expected != 'ObjectActionError':
                        disagreements.append('%s: ours refused (%s), nova '
                                             '%r' % (where, exc, expected))
                    continue
                if not isinstance(expected, dict):
                    disagreements.append('%s: nova refused (%s), ours %r' % (
                        where, expected, written))
                    continue
                # deliberate.CELL_FIELDS_BELOW_VERSION: below cell 1.2/1.1
                # we also drop the fields those versions lack, which
                # Nova's backport keeps.
                for cell in expected[primitive.DATA]['cells']:
                    if cell_version < '1.2':
                        del cell[primitive.DATA]['cpu_pinning_raw']
                    if cell_version < '1.1':
                        del cell[primitive.DATA]['pagesize']
                if _json(written) != expected or json.dumps(
                        written) != json.dumps(expected):
                    disagreements.append('%s: ours %r, nova %r' % (
                        where, written, expected))
                    continue
                # Below cell 1.4 Nova cannot migrate the cpuset back, below
                # topology 1.3 the emulator threads policy is lost.
                exact = cell_version >= '1.4' and topology_version == '1.3'
                disagreements.extend(self._check_load(
                    where, _json(written),
                    _loaded_back(_normalise(theirs), cell_version)
                    if exact else None))
        self.assertGreater(cases, 1000)
        self._report('numa to_primitive', cases, disagreements)

    def _check_load(self, where, document, constraint):
        """Nova's load of ``document`` must equal ours (and constraint).

        Ours under the installed point release's legacy-cell rule must
        equal Nova's. Ours under the release must too, unless it refuses
        the topology as ambiguous, which only a release whose point
        releases load legacy cells by different rules may do (counted in
        ``self.ambiguous``).
        """
        nova_loaded = self._nova_load(document)
        problems = []
        point = self._our_load(document, base.POINT_RELEASE)
        if point != nova_loaded:
            problems.append('%s: read %r by us (%s rule), %r by nova from '
                            '%r' % (where, point,
                                    base.POINT_RELEASE.legacy_cell_rules[0],
                                    nova_loaded, document))
        ours = self._our_load(document, base.RELEASE)
        if ours == ('ambiguous',) and deliberate.applies(
                deliberate.AMBIGUOUS_LEGACY_CELLS, base.RELEASE):
            self.ambiguous += 1
        elif ours != nova_loaded:
            problems.append('%s: read %r by us (%s), %r by nova from %r' % (
                where, ours, base.RELEASE.series, nova_loaded, document))
        if constraint is not None and nova_loaded != ('ok', constraint):
            problems.append('%s: nova loaded %r, constraint %r' % (
                where, nova_loaded, constraint))
        return problems

    @staticmethod
    def _our_load(document, release):
        try:
            return ('ok', _normalise(
                numa_primitive.from_primitive(document, 'doc', release)))
        except numa.AmbiguousTopology:
            return ('ambiguous',)
        except primitive.PrimitiveError:
            return ('refused',)

    @staticmethod
    def _nova_load(document):
        """Load as RequestSpec._from_db_object does.

        The cpuset migration included, then every compared field read as
        Nova's users read it.
        """
        try:
            loaded = nova_objects.InstanceNUMATopology.obj_from_primitive(
                copy.deepcopy(document))
            nova_objects.InstanceNUMATopology.\
                _migrate_legacy_dedicated_instance_cpuset(loaded)
            return ('ok', _reindexed(_normalise(loaded)))
        except Exception:
            return ('refused',)

    def test_from_primitive_matches_nova_legacy(self):
        cases = 0
        disagreements = []
        kinds = {'read': 0, 'pcpuset unset': 0, 'refused': 0}
        for theirs, ours in self._distinct_topologies():
            for topology_version, cell_version in itertools.product(
                    ('1.1', '1.3'), CELL_VERSIONS):
                manifest = {'InstanceNUMATopology': topology_version,
                            'InstanceNUMACell': cell_version}
                try:
                    stored = _json(theirs.obj_to_primitive(
                        target_version=topology_version,
                        version_manifest=manifest))
                except Exception:
                    continue
                for label, document in _variants(stored):
                    cases += 1
                    problems = self._check_load(
                        '%s @%s/%s %s' % (numa.describe(ours),
                                          topology_version, cell_version,
                                          label),
                        document, None)
                    disagreements.extend(problems)
                    outcome = self._our_load(document, base.POINT_RELEASE)
                    if outcome[0] != 'ok':
                        kinds['refused'] += 1
                    elif any(cell[2] is None for cell in outcome[1][0]):
                        kinds['pcpuset unset'] += 1
                    else:
                        kinds['read'] += 1
        sys.stdout.write('numa from_primitive (legacy): %s\n' % ', '.join(
            '%d %s' % (count, kind) for kind, count in sorted(
                kinds.items())))
        sys.stdout.write('numa from_primitive (legacy): %d refused as '
                         'ambiguous under %s\n' % (self.ambiguous,
                                                   base.RELEASE.series))
        self.assertGreater(cases, 5000)
        for count in kinds.values():
            self.assertGreater(count, 1000)
        if len(base.RELEASE.legacy_cell_rules) > 1:
            # The point releases' rules differ on some of these documents.
            self.assertGreater(self.ambiguous, 100)
        else:
            self.assertEqual(0, self.ambiguous)
        self._report('numa from_primitive (legacy)', cases, disagreements)

    def test_pre_liberty_topologies(self):
        documents = []
        for cells in (
                [{'id': 0, 'cpus': '0-1', 'mem': {'total': 1024}}],
                [{'id': 1, 'cpus': '0,1', 'mem': {'total': 512},
                  'pagesize': 2048},
                 {'id': 0, 'cpus': '2-3', 'mem': {'total': 512},
                  'pagesize': 2048}],
                [{'id': 0, 'cpus': '0-3,^1'}],
                [{'id': 0, 'mem': {'total': 1024}}],
                [{'id': 0, 'cpus': 'x', 'mem': {'total': 1024}}],
                [{'cpus': '0', 'mem': {'total': 1024}}],
                [{'id': 0, 'cpus': '0', 'mem': {'total': '1024'}}],
                [{'id': 0, 'cpus': '0', 'mem': {'total': 'lots'}}],
                [{'id': 0, 'cpus': '0', 'mem': {'total': 1}, 'pagesize': 'x'}],
                [], ):
            documents.append({'cells': cells})
        disagreements = []
        # Nova rewrites a pre-Liberty topology into instance_extra as it
        # reads it: give it a real cell database holding the instance.
        context = _nova_cell_database(self)
        for document in documents:
            text = json.dumps(document)
            try:
                theirs = ('ok', _reindexed(_normalise(
                    nova_objects.InstanceNUMATopology.obj_from_db_obj(
                        context, UUID, text))))
            except Exception:
                theirs = ('refused',)
            for release in (base.RELEASE, base.POINT_RELEASE):
                try:
                    ours = ('ok', _normalise(numa_primitive.from_primitive(
                        text, 'numa_topology', release)))
                except primitive.PrimitiveError:
                    ours = ('refused',)
                if ours != theirs:
                    disagreements.append('%s: ours %r, nova %r' % (
                        text, ours, theirs))
        self._report('numa pre-Liberty', len(documents), disagreements)


def _nova_cell_database(test):
    """Configure Nova's cell database on SQLite, with UUID's instance.

    Nova's configuration and its main database facade are global: both
    are put back as they were when ``test`` ends, so that later tests in
    the same process (Nova's functional framework) find them unused.
    """
    directory = test.useFixture(fixtures.TempDir()).path
    conf = nova.conf.CONF
    conf([], project='nova', default_config_files=[])
    test.addCleanup(conf.reset)
    facade = enginefacade.transaction_context()
    facade.configure(connection='sqlite:///%s/nova.sqlite' % directory)
    test.useFixture(db_fixtures.ReplaceEngineFacadeFixture(
        nova_main_db.context_manager, facade))
    test.addCleanup(lambda: facade.writer.get_engine().dispose())
    nova_migration.db_sync(database='main')
    context = nova_context.get_admin_context()
    nova_objects.Instance(context=context, uuid=UUID, project_id='p',
                          user_id='u').create()
    return context


def _cells(document):
    return [cell[primitive.DATA] for cell in document[primitive.DATA]['cells']]


def _variants(stored):
    """A stored primitive and the legacy and fitted shapes it can take."""
    yield 'as written', stored

    fitted = copy.deepcopy(stored)
    fitted[primitive.DATA]['instance_uuid'] = UUID
    for index, data in enumerate(reversed(_cells(fitted))):
        data['id'] = index + 3
        pinned = data.get('pcpuset') or (
            data['cpuset'] if data.get('cpu_policy') == 'dedicated' else [])
        if 'cpu_pinning_raw' in data:
            data['cpu_pinning_raw'] = {str(cpu): 10 + cpu for cpu in pinned}
        if 'cpuset_reserved' in data:
            data['cpuset_reserved'] = [40 + index]
    yield 'host-fitted', fitted

    version = stored[primitive.DATA]['cells'][0][primitive.VERSION] if (
        stored[primitive.DATA]['cells']) else None
    if version is None:
        return
    for stamp in ('1.3', '1.4', '1.5', '1.6'):
        if stamp == version:
            continue
        restamped = copy.deepcopy(stored)
        for cell in restamped[primitive.DATA]['cells']:
            cell[primitive.VERSION] = stamp
        yield 'stamped %s' % stamp, restamped

    for field in ('pcpuset', 'cpuset'):
        for replacement in ('drop', 'empty'):
            changed = copy.deepcopy(stored)
            for data in _cells(changed):
                if replacement == 'drop':
                    data.pop(field, None)
                else:
                    data[field] = []
            yield '%s %s' % (replacement, field), changed

    moved = copy.deepcopy(stored)
    for data in _cells(moved):
        # What Nova wrote before 1.5: pinned vCPUs in cpuset.
        data['cpuset'] = sorted(set(data['cpuset'])
                                | set(data.get('pcpuset', [])))
        data['pcpuset'] = []
    for stamp in ('1.4', '1.5', '1.6'):
        restamped = copy.deepcopy(moved)
        for cell in restamped[primitive.DATA]['cells']:
            cell[primitive.VERSION] = stamp
        yield 'legacy cpuset @%s' % stamp, restamped

    for policy in ('dedicated', 'shared', None, 'mixed', 'bogus'):
        changed = copy.deepcopy(stored)
        for data in _cells(changed):
            data['cpu_policy'] = policy
        yield 'policy %s' % policy, changed

    for field, value in (('memory', '1024'), ('memory', 'x'),
                         ('memory', None), ('id', '3'), ('pagesize', 'x'),
                         ('cpu_thread_policy', 'bogus'),
                         ('cpu_pinning_raw', {'0': 'x'}),
                         ('cpu_pinning_raw', []), ('cpuset', [0, 'x']),
                         ('cpuset', None), ('cpuset', '0-1')):
        changed = copy.deepcopy(stored)
        for data in _cells(changed):
            data[field] = value
        yield '%s=%r' % (field, value), changed

    for name, value in (('emulator_threads_policy', 'isolate'),
                        ('emulator_threads_policy', 'bogus'),
                        ('cells', None), ('instance_uuid', None)):
        changed = copy.deepcopy(stored)
        changed[primitive.DATA][name] = value
        yield 'topology %s=%r' % (name, value), changed

    for version in ('1.7', '2.0'):
        newer = copy.deepcopy(stored)
        newer[primitive.DATA]['cells'][0][primitive.VERSION] = version
        yield 'cell version %s' % version, newer
    newer = copy.deepcopy(stored)
    newer[primitive.VERSION] = '1.4'
    yield 'topology version 1.4', newer
