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


"""Differential proof: our image derivation and primitives against Nova.

Thousands of system metadata dicts (a grid over every ImageMetaProps field
with valid, mis-cased, boundary and invalid values, legacy names, traits,
NUMA cells with gaps, inheritable and skipped keys, plus seeded random
mixtures) go through both ``image.image_from_system_metadata`` and Nova's
``ImageMeta.from_instance``; both must give the same image or both refuse.
The derived properties are then written at every ImageMetaProps version
the installed Nova knows by us and by Nova's ``obj_to_primitive`` and must
agree, and Nova must load what we write.

Our side is always called with the installed Nova's release
(``base.RELEASE``): the fields, enum values and version-predicate grammar
of that release apply. The value pools hold every enum value healreq knows
(the newest release's), so values too new for the release are tried too
and must be refused by both.
"""

import json
import random
import sys
import warnings

from healreq.heal import describe
from healreq.objects import image
from healreq.objects import image_fields
from healreq.objects import image_primitive
from healreq.objects import notation
from healreq.objects import primitive
from healreq.tests.compat import base
from healreq.tests.compat import deliberate

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        import nova
        from nova import objects as nova_objects
        from nova import utils as nova_utils
        from oslo_versionedobjects import fields as ovo_fields
except ImportError:  # pragma: no cover - depends on the environment
    nova = None
    nova_objects = None
    nova_utils = None
    ovo_fields = None


IMAGE_REF = '3e1f7a52-9c0b-4d8e-a6f3-2b7c9d1e4f60'
IMAGE_REFS = (IMAGE_REF, '', None, 'not-a-uuid', '0')
SHOWN = 20

BOOLEAN_VALUES = ('yes', 'no', 'maybe', 'True', 'FALSE', ' on ', '1', '0',
                  't', 'f', 'Y', 'n', 'off', '', '2', 'required', 'none')
INTEGER_VALUES = ('0', '4', '-1', ' 8 ', '+3', '1_000', '0x10', '4.0',
                  'two', '', '\u0663', '99999999999999999999', '1e3', '07',
                  '- 1', '\t12\n')
STRING_VALUES = ('x', '', 'q35', 'pc-i440fx-2.11', ' spaced ', '2048',
                 'large', '\u00e9' * 127 + 'a', 'a' * 255, 'None')
UUID_VALUES = (IMAGE_REF, IMAGE_REF.upper().replace('-', ''), 'not-a-uuid',
               '', ' %s ' % IMAGE_REF)
PREDICATE_VALUES = ('>=2.6', '>= 2.6, <3', '==1.0.0', '2.6', '>=abc', '',
                    '>=1.0,', '!= 1.0', '>=1.0.post1', '<1.0a1', '>=v1.0',
                    '=>1.0', '>=1.0 ,<=2', '> 1', '>=1.0.0-rc1', '>=1!2.0',
                    '>=1.0+local', ' >=1.0 ', '>=1.0\n', '>=1.*', '<<1',
                    '>=1.0.0.0.0.0', '~=1.0', '>=1.0 <2.0', '>=1.0-1',
                    '>=1.0_2', '>=1.0.dev', '>=01.02', '>=1.0RC1')
CPU_SPECS = ('0', '0-3', '0,1', '0-3,^2', '^1', '3-1', 'a', '', ',',
             ' 1 - 2 ', '^', '1-', '-1', '0-2,^0-1', '1,,2', '^2-3', '^ 2',
             '4-4', '0 ,2', '1-2-3', '0-0x2', '\u0661-\u0663', '+1', '^-1',
             '2,^2', '0-7,^3-4,9')
DICT_LIST_VALUES = ('[{"device_name": "vda"}]', 'garbage', '')
TRAIT_VALUES = ('required', 'Required', 'forbidden', ' required', '',
                'required ')
ADAPTER_TYPES = ('ide', 'IDE', 'lsiLogic', 'lsilogicsas', 'paravirtual',
                 'busLogic', 'foo', '', 'virtio-scsi', 'LSILOGICSAS',
                 'VMPVSCSI')
NON_IMAGE_KEYS = {'owner_user_name': 'demo', 'owner_project_name': 'demo',
                  'boot_roles': 'member,reader', 'old_vm_state': 'active',
                  'clean_attempts': '1', 'network_allocated': 'True',
                  'image_base_image_ref': IMAGE_REF,
                  'image_owner_specified.openstack.md5': 'abc',
                  'image_stores': 'rbd'}


def _enum_values(valid, newer=()):
    """Values of an enum: Nova's, variants, aliases, then ``newer``.

    ``newer`` are values healreq knows that this Nova does not.
    """
    values = list(valid)
    values += [v.upper() for v in valid] + [v.title() for v in valid[:2]]
    values += [' %s' % valid[0], valid[0] + ' ', 'foo', '', 'None']
    # Aliases some enums map (architecture i386, hypervisor xapi, ...).
    for alias in ('i386', 'i486', 'I586', 'x86_32', 'x86_32p', 'AMD64',
                  'xapi', 'XAPI', 'pv', 'HV', 'baremetal', 'lsilogicsas',
                  'Paravirtual', 'VirtualE1000', 'virtuale1000e',
                  'virtualpcnet32', 'VirtualSriovEthernetCard',
                  'virtualvmxnet', 'virtualvmxnet3', 'Windows', 'LINUX'):
        values.append(alias)
    return values + [v for v in newer if v not in valid]


def _field_names():
    """Nova's ImageMetaProps fields (the grid must not trust our table)."""
    names = list(nova_objects.ImageMetaProps.fields)
    return names + [n for n in image_fields.PROPS_FIELDS if n not in names]


def _legacy_names():
    legacy = dict(nova_objects.ImageMetaProps._legacy_property_map)
    for name, current in image_fields.LEGACY_NAMES.items():
        legacy.setdefault(name, current)
    return legacy


def _values(name):
    """Values to try for a field, chosen by Nova's type of the field.

    Each pool starts with three values Nova accepts.
    """
    field = nova_objects.ImageMetaProps.fields.get(name)
    kind = ovo_fields.String() if field is None else field._type
    if isinstance(kind, ovo_fields.FlexibleBoolean):
        return BOOLEAN_VALUES
    if isinstance(kind, ovo_fields.Integer):
        return INTEGER_VALUES
    if isinstance(kind, ovo_fields.VersionPredicate):
        return PREDICATE_VALUES
    if isinstance(kind, ovo_fields.Enum):
        ours = image_fields.PROPS_FIELDS.get(name, (None,))[0]
        return _enum_values(kind.valid_values,
                            image_fields.ENUM_VALUES.get(ours, ()))
    if isinstance(kind, ovo_fields.UUID):
        return UUID_VALUES
    if isinstance(kind, ovo_fields.String):
        return STRING_VALUES
    if name in ('img_mappings', 'img_block_device_mapping'):
        return DICT_LIST_VALUES
    # traits_required / hw_numa_*: the bare key is ignored by Nova.
    return ('CUSTOM_A', '0-1', '512', '')


def _with_base(index, sysmeta):
    """Vary the context each case runs in: base keys and image_ref."""
    case = {}
    if index % 3 == 1:
        case.update(NON_IMAGE_KEYS)
        case.update({'image_disk_format': 'qcow2',
                     'image_container_format': 'bare',
                     'image_min_ram': '512', 'image_min_disk': '20'})
    elif index % 3 == 2:
        case['image_hw_disk_bus'] = 'virtio'
    case.update(sysmeta)
    return case, IMAGE_REFS[index % len(IMAGE_REFS)]


# Cases where healreq deliberately differs from Nova (deliberate.py): in
# the grid, left out of the differential by name, checked by
# test_deliberate_differences.
DELIBERATE_CASES = (
    {'image_hw_numa_cpus.0': '0-%d' % deliberate.MAX_CPU_IDS},
    {'image_hw_numa_cpus.0': '0-1',
     'image_hw_numa_cpus.1': '2-%d,^3' % (deliberate.MAX_CPU_IDS + 2)},
)


def _numa_cases():
    cases = []
    for field, values in (('hw_numa_cpus', CPU_SPECS),
                          ('hw_numa_mem', INTEGER_VALUES)):
        for value in values:
            cases.append({'image_%s.0' % field: value})
            cases.append({'image_%s.0' % field: '1',
                          'image_%s.1' % field: value})
        for indexes in ((0, 1), (0, 2), (1,), (0, 1, 3), (1, 2),
                        tuple(range(128)), tuple(range(129)),
                        tuple(range(127)) + (128,)):
            cases.append({'image_%s.%d' % (field, i): str(i)
                          for i in indexes})
        cases.append({'image_%s' % field: '0-1'})
        cases.append({'image_%s.00' % field: '1'})
        cases.append({'image_%s.0' % field: None,
                      'image_%s.1' % field: '1'})
        cases.append({'%s.0' % field: '1', 'image_%s.1' % field: '2'})
    cases.append({'image_hw_numa_nodes': '2', 'image_hw_numa_cpus.0': '0-1',
                  'image_hw_numa_cpus.1': '2,3', 'image_hw_numa_mem.0': '1024',
                  'image_hw_numa_mem.1': '1024'})
    cases.append({'image_hw_numa_cpus.0': '0-1',
                  'image_hw_numa_cpus.1': '0-99999'})
    cases.extend(DELIBERATE_CASES)
    return cases


def _trait_cases():
    cases = []
    for value in TRAIT_VALUES:
        cases.append({'image_trait:CUSTOM_SSD': value})
    cases.append({'image_trait:CUSTOM_B': 'required',
                  'image_trait:CUSTOM_A': 'required',
                  'image_trait:HW_CPU_X86_AVX2': 'forbidden'})
    cases.append({'image_trait:': 'required'})
    cases.append({'trait:CUSTOM_X': 'required'})
    cases.append({'image_trait:CUSTOM_X': 'required',
                  'trait:CUSTOM_X': 'forbidden'})
    cases.append({'trait:CUSTOM_X': 'forbidden',
                  'image_trait:CUSTOM_X': 'required'})
    cases.append({'image_traits_required': 'CUSTOM_A'})
    cases.append({'image_trait:custom_lower': 'required',
                  'image_Trait:CUSTOM_UPPER': 'required',
                  'image_trait:CUSTOM_NONE': None})
    return cases


def _legacy_cases():
    cases = []
    for legacy, current in _legacy_names().items():
        values = list(_values(current))
        good = values[0]
        for value in values[:4] + values[-3:]:
            cases.append({'image_%s' % legacy: value})
            cases.append({'image_%s' % legacy: value,
                          'image_%s' % current: good})
            cases.append({'image_%s' % current: value,
                          'image_%s' % legacy: good})
    for value in ADAPTER_TYPES:
        cases.append({'image_vmware_adaptertype': value})
        cases.append({'image_vmware_adaptertype': value,
                      'image_hw_disk_bus': 'sata'})
        cases.append({'image_vmware_adaptertype': value,
                      'image_hw_scsi_model': 'virtio-scsi'})
    return cases


def _top_level_cases():
    cases = []
    for key in ('min_ram', 'min_disk'):
        for value in INTEGER_VALUES:
            cases.append({'image_%s' % key: value})
        cases.append({key: '64'})
        cases.append({'image_%s' % key: '1', key: 'x'})
        cases.append({key: 'x', 'image_%s' % key: '1'})
    for key in ('disk_format', 'container_format'):
        for value in ('raw', 'qcow2', 'vhd', 'bare', '', 'WEIRD', '0'):
            cases.append({'image_%s' % key: value})
        cases.append({key: 'iso'})
        cases.append({'image_%s' % key: None})
    for key in image_fields.SM_SKIP_KEYS:
        for value in DICT_LIST_VALUES:
            cases.append({'image_%s' % key: value})
            cases.append({key: value})
    cases.append({})
    cases.append({'image_': 'x', '': 'y', 'image_image_min_ram': 'x'})
    cases.append({'image_hw_disk_bus': None, 'image_min_ram': None})
    cases.append({'hw_disk_bus': 'foo'})
    cases.append({'hw_disk_bus': 'ide', 'image_hw_disk_bus': 'sata'})
    cases.append({'image_hw_disk_bus': 'sata', 'hw_disk_bus': 'ide'})
    cases.append({'image_id': 'x', 'id': 'y', 'image_name': 'n',
                  'image_properties': 'p', 'image_size': 'big'})
    cases.append(dict(NON_IMAGE_KEYS))
    return cases


def _field_cases():
    cases = []
    for name in _field_names():
        values = list(_values(name))
        for value in values:
            cases.append({'image_%s' % name: value})
        cases.append({name: values[0]})
        cases.append({name: values[-1]})
        cases.append({'image_%s' % name: None})
    return cases


def _random_cases(count, seed):
    rng = random.Random(seed)
    names = _field_names()
    legacy_names = _legacy_names()
    legacy = list(legacy_names)
    cases = []
    for _ in range(count):
        case = {}
        for name in rng.sample(names, rng.randint(1, 30)):
            values = _values(name)
            # Mostly values Nova accepts, so that most mixtures get derived.
            value = rng.choice(values[:3] if rng.random() < 0.97 else values)
            case['image_%s' % name] = value
        for name in rng.sample(legacy, rng.randint(0, 3)):
            case['image_%s' % name] = rng.choice(
                _values(legacy_names[name])[:3])
        if rng.random() < 0.3:
            case['image_vmware_adaptertype'] = rng.choice(ADAPTER_TYPES)
        for _t in range(rng.randint(0, 3)):
            case['image_trait:CUSTOM_%d' % rng.randint(0, 9)] = rng.choice(
                TRAIT_VALUES[:3])
        if rng.random() < 0.3:
            for cell in range(rng.randint(1, 4)):
                case['image_hw_numa_cpus.%d' % cell] = rng.choice(
                    CPU_SPECS[:6])
                case['image_hw_numa_mem.%d' % cell] = rng.choice(
                    ('512', '1024', 'x'))
        for key in image_fields.SM_INHERITABLE_KEYS:
            if rng.random() < 0.5:
                case['image_%s' % key] = rng.choice(('0', '512', 'raw'))
        if rng.random() < 0.5:
            case.update(NON_IMAGE_KEYS)
        items = list(case.items())
        rng.shuffle(items)
        cases.append(dict(items))
    return cases


def all_cases():
    """The (system metadata, image_ref) pairs: the grid, then mixtures."""
    grids = (_field_cases() + _legacy_cases() + _trait_cases()
             + _numa_cases() + _top_level_cases())
    cases = [_with_base(i, sysmeta) for i, sysmeta in enumerate(grids)]
    mixtures = [(sysmeta, IMAGE_REFS[i % len(IMAGE_REFS)])
                for i, sysmeta in enumerate(_random_cases(3000, 20251129))]
    return cases, mixtures


def _plain(value):
    """Nova's coerced containers as plain Python values."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return set(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _typed(value):
    """A comparable form that tells True from 1 and sets from lists."""
    if isinstance(value, bool):
        return ('bool', value)
    if isinstance(value, (set, frozenset)):
        if all(type(v) is int for v in value):
            return ('set', sorted(value))
        return ('set', sorted(_typed(v) for v in value))
    if isinstance(value, (list, tuple)):
        return ('list', [_typed(v) for v in value])
    if isinstance(value, dict):
        return ('dict', sorted((k, _typed(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def _nova_props(props):
    return {name: _plain(getattr(props, name)) for name in props.fields
            if props.obj_attr_is_set(name)}


def _nova_image(meta):
    result = {}
    for name in meta.fields:
        if meta.obj_attr_is_set(name):
            value = getattr(meta, name)
            result[name] = (_nova_props(value) if name == 'properties'
                            else _plain(value))
    return result


def _outcome(call, *args):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return ('ok', call(*args))
    except Exception as exc:
        return ('error', '%s: %s' % (type(exc).__name__, exc))


def _agree(ours, theirs, normalise):
    if ours[0] != theirs[0]:
        return False
    if ours[0] == 'error':
        return True
    return normalise(ours[1]) == normalise(theirs[1])


def _json(document):
    return json.loads(json.dumps(document))


def _props_data(document):
    """Primitive data with each hw_numa_cpus cell compared as a set."""
    data = dict(_json(document)[primitive.DATA])
    if 'hw_numa_cpus' in data:
        data['hw_numa_cpus'] = [sorted(c) for c in data['hw_numa_cpus']]
    return data


def _envelope(document):
    return {k: v for k, v in _json(document).items()
            if k not in (primitive.DATA, primitive.CHANGES)}


def _strip_changes(document):
    if isinstance(document, dict):
        return {k: _strip_changes(v) for k, v in document.items()
                if k != primitive.CHANGES}
    if isinstance(document, list):
        return [_strip_changes(v) for v in document]
    return document


def _versions(first=0):
    """ImageMetaProps 1.first up to the newest the installed Nova knows."""
    newest = base.RELEASE.props_version
    return ['%d.%d' % (newest[0], minor)
            for minor in range(first, newest[1] + 1)]


def _release_enum_values(name, kind):
    """The values of enum ``kind`` field ``name`` takes in base.RELEASE."""
    newest = base.RELEASE.props_version
    too_new = {value for field, value, added in image_fields.TOO_NEW_VALUES
               if field == name and added > newest}
    return tuple(v for v in image_fields.ENUM_VALUES[kind] if v not in too_new)


class ImageCompatTest(base.NovaTestCase):
    """Our derivation and primitives against the installed Nova's."""

    _derived = None
    _grid_size = None
    _excluded = None

    def setUp(self):
        super().setUp()

    @classmethod
    def _derive_all(cls):
        """Run every case through both sides once; keep the outcomes."""
        if cls._derived is None:
            derived = []
            excluded = {}
            grid, mixtures = all_cases()
            cls._grid_size = len(grid)
            for sysmeta, image_ref in grid + mixtures:
                name = deliberate.image_case(sysmeta)
                if name is not None:
                    excluded[name] = excluded.get(name, 0) + 1
                    continue
                ours = _outcome(image.image_from_system_metadata,
                                dict(sysmeta), image_ref, base.RELEASE)
                theirs = _outcome(cls._nova_from_instance, sysmeta,
                                  image_ref)
                derived.append((sysmeta, image_ref, ours, theirs))
            cls._derived = derived
            cls._excluded = excluded
        return cls._derived

    @staticmethod
    def _nova_from_instance(sysmeta, image_ref):
        instance = nova_objects.Instance(image_ref=image_ref,
                                         system_metadata=dict(sysmeta))
        return nova_objects.ImageMeta.from_instance(instance)

    def _report(self, label, cases, disagreements, excluded=None):
        summary = '%s: %d cases%s, %d disagreements' % (
            label, cases, deliberate.describe(excluded), len(disagreements))
        base.record_summary(summary)
        if disagreements:
            self.fail('%s; first %d:\n%s' % (
                summary, min(SHOWN, len(disagreements)),
                '\n'.join(disagreements[:SHOWN])))

    def _kind_problem(self, name, kind, field):
        """Why our field kind does not match Nova's field, or None."""
        nova_type = field._type
        if isinstance(nova_type, ovo_fields.Enum):
            ours = (_release_enum_values(name, kind)
                    if kind in image_fields.ENUM_VALUES else None)
            if tuple(nova_type.valid_values) != ours:
                return 'enum values %r vs ours %r' % (
                    nova_type.valid_values, ours)
            return None
        expected = {
            ovo_fields.FlexibleBooleanField: image_fields.BOOLEAN,
            ovo_fields.IntegerField: image_fields.INTEGER,
            ovo_fields.StringField: image_fields.STRING,
            ovo_fields.UUIDField: image_fields.UUID,
            ovo_fields.VersionPredicateField: image_fields.VERSION_PREDICATE,
            ovo_fields.ListOfStringsField: image_fields.STRING_LIST,
            ovo_fields.ListOfIntegersField: image_fields.INTEGER_LIST,
            ovo_fields.ListOfSetsOfIntegersField:
                image_fields.INTEGER_SET_LIST,
            ovo_fields.ListOfDictOfNullableStringsField:
                image_fields.DICT_LIST,
        }.get(type(field))
        if expected != kind:
            return '%s vs ours %s' % (type(field).__name__, kind)
        return None

    def test_tables_match_nova(self):
        props_class = nova_objects.ImageMetaProps
        release = base.RELEASE
        self.assertEqual(list(props_class.fields),
                         list(image_fields.known_properties(release)))
        problems = []
        for name, field in props_class.fields.items():
            problem = self._kind_problem(
                name, image_fields.PROPS_FIELDS[name][0], field)
            if problem:
                problems.append('%s: %s' % (name, problem))
        self.assertEqual([], problems)
        self.assertEqual(list(props_class._legacy_property_map.items()),
                         list(image_fields.LEGACY_NAMES.items()))
        self.assertEqual(props_class.NUMA_NODES_MAX, notation.NUMA_NODES_MAX)
        self.assertEqual(props_class.VERSION,
                         '%d.%d' % release.newest(image_fields.PROPS_NAME))
        self.assertEqual(nova_objects.ImageMeta.VERSION,
                         '%d.%d' % release.newest(image_fields.IMAGE_NAME))
        self.assertEqual(list(nova_objects.ImageMeta.fields),
                         list(image_fields.IMAGE_FIELDS))
        self.assertEqual(nova_utils.SM_IMAGE_PROP_PREFIX,
                         image_fields.SM_IMAGE_PROP_PREFIX)
        self.assertEqual(nova_utils.SM_INHERITABLE_KEYS,
                         image_fields.SM_INHERITABLE_KEYS)
        self.assertEqual(nova_utils.SM_SKIP_KEYS, image_fields.SM_SKIP_KEYS)

    def test_every_field_and_value_at_every_version(self):
        """Each field alone, with every value Nova accepts, per version."""
        samples = {
            image_fields.BOOLEAN: [True, False], image_fields.INTEGER: [0, 7],
            image_fields.STRING: ['x'], image_fields.UUID: [IMAGE_REF],
            image_fields.VERSION_PREDICATE: ['>=2.6'],
            image_fields.STRING_LIST: [['CUSTOM_A', 'CUSTOM_B'], []],
            image_fields.INTEGER_LIST: [[512, 1024]],
            image_fields.INTEGER_SET_LIST: [[{0, 1}, {8, 2}], [set()]],
            image_fields.DICT_LIST: [[{'device_name': 'vda', 'x': None}], []],
        }
        cases = 0
        disagreements = []
        for name in image_fields.known_properties(base.RELEASE):
            kind = image_fields.PROPS_FIELDS[name][0]
            values = samples.get(kind) or list(
                _release_enum_values(name, kind))
            for value in values:
                props = {name: value}
                nova_props = nova_objects.ImageMetaProps(**props)
                for version in _versions():
                    cases += 1
                    mine = _outcome(
                        image_primitive.props_to_primitive, props, version)
                    novas = _outcome(nova_props.obj_to_primitive, version)
                    if not _agree(mine, novas, _props_data):
                        disagreements.append('%s=%r @%s: ours %r, nova %r' % (
                            name, value, version, mine, novas))
        self._report('single fields at 1.0-%s' % _versions()[-1], cases,
                     disagreements)

    def test_from_instance(self):
        derived = self._derive_all()
        disagreements = []
        refused = 0
        for sysmeta, image_ref, ours, theirs in derived:
            if theirs[0] == 'ok':
                theirs = ('ok', _nova_image(theirs[1]))
            else:
                refused += 1
            if not _agree(ours, theirs, _typed):
                disagreements.append('%r image_ref=%r: ours %r, nova %r' % (
                    sysmeta, image_ref, ours, theirs))
        sys.stdout.write('from_instance: %d refused by Nova\n' % refused)
        self.assertGreater(len(derived), 5000)
        self.assertGreater(refused, 500)
        self.assertGreater(len(derived) - refused, 2500)
        self._report('from_instance', len(derived), disagreements,
                     self._excluded)

    def test_deliberate_differences(self):
        """Each case left out by name differs from Nova as stated."""
        problems = []
        for sysmeta in DELIBERATE_CASES:
            name = deliberate.image_case(sysmeta)
            if name is None or not deliberate.applies(name, base.RELEASE):
                problems.append('%r: not a named difference of %s' % (
                    sysmeta, base.RELEASE.series))
                continue
            ours = _outcome(image.image_from_system_metadata, sysmeta,
                            IMAGE_REF, base.RELEASE)
            theirs = _outcome(self._nova_from_instance, sysmeta, IMAGE_REF)
            if ours[0] != 'error' or theirs[0] != 'ok':
                problems.append('%r (%s): ours %r, nova %r' % (
                    sysmeta, name, ours, theirs[0]))
        self.assertEqual([], problems)

    def test_props_primitives_at_every_version(self):
        cases = 0
        disagreements = []
        seen = set()
        for index, (sysmeta, _ref, ours, theirs) in enumerate(
                self._derive_all()):
            # Nova's obj_to_primitive is slow (quadratic in the fields
            # set): try each distinct set of properties once, and every
            # second random mixture only.
            if ours[0] != 'ok' or theirs[0] != 'ok' or (
                    index >= self._grid_size and index % 2):
                continue
            props = ours[1]['properties']
            key = repr(_typed(props))
            if key in seen:
                continue
            seen.add(key)
            nova_props = theirs[1].properties
            for version in _versions(15):
                cases += 1
                mine = _outcome(
                    image_primitive.props_to_primitive, props, version)
                novas = _outcome(nova_props.obj_to_primitive, version)
                if not _agree(mine, novas, _props_data) or (
                        mine[0] == 'ok'
                        and _envelope(mine[1]) != _envelope(novas[1])):
                    disagreements.append('%r @%s: ours %r, nova %r' % (
                        sysmeta, version, mine, novas))
                    continue
                if mine[0] != 'ok':
                    continue
                written = _json(mine[1])
                kept = {k: v for k, v in props.items()
                        if k in written[primitive.DATA]}
                loaded = _outcome(
                    nova_objects.ImageMetaProps.obj_from_primitive, written)
                if loaded[0] != 'ok' or _typed(
                        _nova_props(loaded[1])) != _typed(kept):
                    disagreements.append('%r @%s: nova loaded %r, wrote %r'
                                         % (sysmeta, version, loaded, kept))
                reread = image_primitive.props_from_primitive(written, 'props')
                if _typed(reread) != _typed(kept):
                    disagreements.append('%r @%s: re-read %r, wrote %r'
                                         % (sysmeta, version, reread, kept))
        # About a thousand distinct property sets at each version.
        self.assertGreater(cases, 1000 * len(_versions(15)))
        self._report('ImageMetaProps 1.15-%s primitives' % _versions()[-1],
                     cases, disagreements)

    def test_boot_spec_image_matches_its_system_metadata(self):
        """A spec written at boot compares equal to its derived image.

        Nova stores the Glance image in the spec (``ImageMeta.from_dict``)
        and in system metadata (``get_system_metadata_from_image``, which
        truncates values to 255 bytes and flavor-adjusts min_disk); our
        comparison must see no difference between the two.
        """
        long_values = ('\u00e9' * 200, 'x' * 254 + '\u00e9', 'y' * 300)
        glance_images = []
        grid, mixtures = all_cases()
        excluded = {}
        for sysmeta, image_ref in grid + mixtures:
            name = deliberate.image_case(sysmeta)
            if name is not None:
                excluded[name] = excluded.get(name, 0) + 1
                continue
            properties = {}
            for key, value in sysmeta.items():
                if key.startswith('image_') and value is not None:
                    properties[key[len('image_'):]] = value
            glance_images.append((properties, image_ref or IMAGE_REF))
        for name in _field_names():
            for value in long_values:
                glance_images.append(({name: value}, IMAGE_REF))
        glance_images.append(({'block_device_mapping': [
            {'boot_index': '0', 'source_type': 'snapshot'}],
            'mappings': [{'virtual': 'root', 'device': 'vda'}],
            'bdm_v2': 'True'}, IMAGE_REF))
        cases = 0
        disagreements = []
        flavor = {'root_gb': 40}
        for properties, image_ref in glance_images:
            glance = {'id': image_ref, 'name': 'img', 'status': 'active',
                      'min_ram': 512, 'min_disk': 10, 'disk_format': 'raw',
                      'container_format': 'bare', 'size': 1,
                      'properties': dict(properties)}
            for key in image_fields.SM_INHERITABLE_KEYS:
                if key in properties:
                    glance[key] = glance['properties'].pop(key)
            spec = _outcome(nova_objects.ImageMeta.from_dict, glance)
            if spec[0] != 'ok':
                continue
            # Glance's min_ram/min_disk are integers.
            glance.update(min_ram=spec[1].min_ram, min_disk=spec[1].min_disk)
            sysmeta = nova_utils.get_system_metadata_from_image(glance,
                                                                flavor)
            theirs = _outcome(self._nova_from_instance, sysmeta, image_ref)
            if theirs[0] != 'ok':
                continue
            cases += 1
            stored = image_primitive.image_from_primitive(
                _json(spec[1].obj_to_primitive()), 'spec.image')
            derived = image.image_from_system_metadata(sysmeta, image_ref,
                                                       base.RELEASE)
            names = image.differing_fields(stored, derived)
            if names:
                disagreements.append('%r: %r %r' % (
                    properties, names,
                    describe.describe_difference(stored, derived, names)))
        self.assertGreater(cases, 2000)
        self._report('boot spec vs system metadata', cases, disagreements,
                     excluded)

    def test_image_primitives(self):
        cases = 0
        disagreements = []
        for sysmeta, image_ref, ours, theirs in self._derive_all():
            if ours[0] != 'ok' or theirs[0] != 'ok':
                continue
            cases += 1
            stored = _json(theirs[1].obj_to_primitive())
            parsed = _outcome(
                image_primitive.image_from_primitive, stored, 'image')
            if parsed[0] != 'ok' or _typed(parsed[1]) != _typed(ours[1]):
                disagreements.append('%r: parsed Nova primitive %r, derived '
                                     '%r' % (sysmeta, parsed, ours[1]))
            mine = _json(image_primitive.image_to_primitive(
                ours[1],
                '%d.%d' % base.RELEASE.newest(image_fields.IMAGE_NAME),
                _versions()[-1]))
            expected = _strip_changes(stored)
            if 'hw_numa_cpus' in ours[1]['properties']:
                for document in (mine, expected):
                    props = document[primitive.DATA]['properties']
                    props[primitive.DATA]['hw_numa_cpus'] = [
                        sorted(c) for c in
                        props[primitive.DATA]['hw_numa_cpus']]
            if mine != expected:
                disagreements.append('%r: wrote %r, Nova wrote %r' % (
                    sysmeta, mine, expected))
            loaded = _outcome(nova_objects.ImageMeta.obj_from_primitive,
                              mine)
            if loaded[0] != 'ok' or _typed(
                    _nova_image(loaded[1])) != _typed(ours[1]):
                disagreements.append('%r: Nova loaded %r, wrote %r' % (
                    sysmeta, loaded, ours[1]))
            if parsed[0] == 'ok' and image.differing_fields(parsed[1],
                                                            ours[1]):
                disagreements.append('%r: differing_fields %r' % (
                    sysmeta, image.differing_fields(parsed[1], ours[1])))
        self.assertGreater(cases, 2500)
        self._report('ImageMeta primitives', cases, disagreements)
