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


"""The instance's image: derivation from system metadata and primitives.

Nova rebuilds a RequestSpec's image with ``ImageMeta.from_instance``: the
``image_*`` system metadata become top-level attributes (``min_ram``,
``min_disk``, ``disk_format``, ``container_format``) or image properties,
which ``ImageMetaProps.from_dict`` maps from legacy names, coerces by
field type and validates. This module reproduces that for each supported
release: the fields Nova 34.0.0 knows (ImageMeta 1.8, ImageMetaProps
1.44), less those and the enum values an older release's ImageMetaProps
does not know yet, and its release's version-predicate grammar;
healreq.objects.image_primitive reads and writes the stored primitives.

Values are held as Nova holds them: booleans, integers, canonical enum
strings, lists of strings or integers, and ``hw_numa_cpus`` as a list of
sets of integers.
"""

import collections.abc
import datetime

from oslo_utils import strutils

from healreq.objects import image_fields
from healreq.objects import notation
from healreq.objects import primitive
from healreq.objects import version_predicates
from healreq import releases


# Enums whose coercion lower-cases the value and maps aliases before
# validating; all other enums take the value verbatim.
_ENUM_ALIASES = {
    'architecture': {'i386': 'i686', 'i486': 'i686', 'i586': 'i686',
                     'x86_32': 'i686', 'x86_32p': 'i686',
                     'amd64': 'x86_64'},
    'hv_type': {'xapi': 'xen'},
    'os_type': {},
    'scsi_model': {'lsilogicsas': 'lsisas1068',
                   'paravirtual': 'vmpvscsi'},
    'vif_model': {'virtuale1000': 'e1000', 'virtuale1000e': 'e1000e',
                  'virtualpcnet32': 'pcnet',
                  'virtualsriovethernetcard': 'sriov',
                  'virtualvmxnet': 'vmxnet', 'virtualvmxnet3': 'vmxnet3'},
    'vm_mode': {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'},
}

# Parts of a derived image compared with the stored one (min_disk is
# flavor-adjusted in system metadata, so it differs by construction).
COMPARED_IMAGE_FIELDS = ('id', 'min_ram', 'disk_format', 'container_format')
# Properties system metadata never keeps (image_fields.SM_SKIP_KEYS): a
# spec written from Glance may hold them, a derived image never does.
UNDERIVABLE_PROPERTIES = ('img_mappings', 'img_block_device_mapping')


def _refuse(name, value, reason):
    return image_fields.ImageMetaError(
        'image %s=%s: %s' % (name, primitive.short(value), reason))


def _as_string(name, value):
    # Nova's String fields accept these types and store str(value).
    if isinstance(value, (str, int, float, datetime.datetime)):
        return str(value)
    raise _refuse(name, value, 'not a string')


def _as_int(name, value):
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _refuse(name, value, 'not an integer')


def _too_new(name, value, release):
    for field, newer, added in image_fields.TOO_NEW_VALUES:
        if field == name and value == newer:
            return added > release.props_version
    return False


def _as_enum(name, kind, value, release):
    aliases = _ENUM_ALIASES.get(kind)
    if aliases is not None:
        if not isinstance(value, str):
            raise _refuse(name, value, 'not a string')
        value = value.lower()
        value = aliases.get(value, value)
    if (not isinstance(value, str)
            or value not in image_fields.ENUM_VALUES[kind]
            or _too_new(name, value, release)):
        raise _refuse(name, value, 'not a valid %s' % kind.replace('_', ' '))
    return value


def _as_version_predicate(name, value, release):
    if not isinstance(value, str):
        raise _refuse(name, value, 'not a string')
    try:
        if release.version_predicates == releases.DISTUTILS:
            version_predicates.check_distutils(value)
        else:
            version_predicates.check_packaging(value)
    except ValueError as exc:
        raise _refuse(name, value, 'not a version predicate (%s)' % exc)
    return value


def _as_dict_list(name, value):
    if (not isinstance(value, collections.abc.Iterable)
            or isinstance(value, (str, collections.abc.Mapping))):
        raise _refuse(name, value, 'not a list')
    result = []
    for item in value:
        if not isinstance(item, dict):
            raise _refuse(name, value, 'not a list of dicts')
        entry = {}
        for key, element in item.items():
            if not isinstance(key, str):
                raise _refuse(name, value, 'has a non-string key')
            entry[key] = (None if element is None
                          else _as_string(name, element))
        result.append(entry)
    return result


def _parse_cpu_spec(name, spec):
    """CPU ids of a spec like ``0-3,^2,6`` (hardware.parse_cpu_spec)."""
    if not isinstance(spec, str):
        raise _refuse(name, spec, 'not a CPU set string')
    try:
        return _coerced_set(notation.parse_cpu_list(spec))
    except notation.NotationError as exc:
        raise _refuse(name, spec, str(exc))


def _coerced_set(values):
    """The copy of a set that ImageMetaProps' set field coercion stores.

    Its iteration order can differ from the parsed set's, and Nova's
    manual NUMA layout check reports the first fault in that order.
    """
    coerced = set()
    for value in values:
        coerced.add(value)
    stored = set()
    stored.update(coerced)
    return stored


def coerce_property(name, value, release=releases.LATEST):
    """Coerce one value set on ImageMetaProps field ``name`` as Nova does.

    ``release`` is the Nova release whose rules apply.
    """
    kind = image_fields.PROPS_FIELDS[name][0]
    if value is None:
        raise _refuse(name, value, 'cannot be None')
    if kind == image_fields.BOOLEAN:
        return strutils.bool_from_string(value)
    if kind == image_fields.INTEGER:
        return _as_int(name, value)
    if kind == image_fields.STRING:
        return _as_string(name, value)
    if kind == image_fields.UUID:
        # Nova only warns about a malformed UUID and keeps the text.
        return '%s' % (value,)
    if kind == image_fields.VERSION_PREDICATE:
        return _as_version_predicate(name, value, release)
    if kind == image_fields.DICT_LIST:
        return _as_dict_list(name, value)
    if kind in image_fields.ENUM_VALUES:
        return _as_enum(name, kind, value, release)
    raise _refuse(name, value, 'cannot be set from a single value')


def _numbered(raw, field, parse):
    values = []
    for key, value in notation.per_node(raw, field):
        if value is None:
            raise _refuse(key, value, 'cannot be None')
        values.append(parse(key, value))
    return values


def props_from_strings(raw, release=releases.LATEST):
    """Image properties as Nova's ``ImageMetaProps.from_dict`` holds them.

    ``raw`` maps property names to the strings Glance or system metadata
    give. Legacy names are applied first so current names win;
    ``hw_numa_cpus.N``/``hw_numa_mem.N`` are read up to the first gap;
    ``trait:NAME=required`` entries form ``traits_required``; names
    ``release`` does not know are ignored. Raises ImageMetaError where
    that release's Nova raises.
    """
    props = {}
    for legacy, current in image_fields.LEGACY_NAMES.items():
        if legacy in raw:
            props[current] = coerce_property(current, raw[legacy], release)
    adapter = raw.get('vmware_adaptertype')
    if adapter == 'ide':
        props['hw_disk_bus'] = 'ide'
    elif adapter:
        props['hw_disk_bus'] = 'scsi'
        props['hw_scsi_model'] = coerce_property('hw_scsi_model', adapter,
                                                 release)
    for name in image_fields.known_properties(release):
        if name == 'hw_numa_cpus':
            cells = _numbered(raw, name, _parse_cpu_spec)
            if cells:
                props[name] = cells
        elif name == 'hw_numa_mem':
            cells = _numbered(raw, name, _as_int)
            if cells:
                props[name] = cells
        elif name != 'traits_required' and name in raw:
            props[name] = coerce_property(name, raw[name], release)
    traits = [str(key)[len(image_fields.TRAIT_PREFIX):]
              for key, value in raw.items()
              if str(key).startswith(image_fields.TRAIT_PREFIX)
              and str(value) == 'required']
    if traits:
        props['traits_required'] = traits
    return props


def image_from_system_metadata(sysmeta, image_ref, release=releases.LATEST):
    """The image ``ImageMeta.from_instance`` derives for an instance.

    ``sysmeta`` maps instance_system_metadata keys to values (None values
    are skipped); ``image_ref`` is ``instances.image_ref``; ``release``
    the Nova release whose rules apply. Returns the
    fields Nova sets: ``id`` (only for a non-empty image_ref), each of
    ``min_ram``, ``min_disk``, ``disk_format``, ``container_format`` that
    system metadata holds, and ``properties``. Raises ImageMetaError
    where Nova raises.
    """
    inherited = {}
    properties = {}
    for key, value in sysmeta.items():
        if not isinstance(key, str):
            raise image_fields.ImageMetaError(
                'system metadata key %s is not a string'
                % primitive.short(key))
        if value is None:
            continue
        if not isinstance(value, str):
            value = _as_string('system_metadata[%s]' % key, value)
        # Every key is considered, not only image_* ones, as Nova does.
        if key.startswith(image_fields.SM_IMAGE_PROP_PREFIX):
            key = key[len(image_fields.SM_IMAGE_PROP_PREFIX):]
        if key in image_fields.SM_SKIP_KEYS:
            continue
        if key in image_fields.SM_INHERITABLE_KEYS:
            inherited[key] = value
        else:
            properties[key] = value
    image = {}
    if image_ref is not None:
        image_ref = _as_string('image_ref', image_ref)
        if image_ref:
            image['id'] = image_ref
    for key in image_fields.SM_INHERITABLE_KEYS:
        if key not in inherited:
            continue
        if key in ('min_ram', 'min_disk'):
            image[key] = _as_int(key, inherited[key])
        else:
            image[key] = _as_string(key, inherited[key])
    image['properties'] = props_from_strings(properties, release)
    return image


def truncate_utf8(value, length=image_fields.SM_VALUE_BYTES):
    """``value`` cut to ``length`` UTF-8 bytes on a character boundary."""
    encoded = value.encode('utf-8')[:length]
    # Only a character cut at the end can be incomplete.
    return encoded.decode('utf-8', 'ignore')


def _same_property(stored, derived):
    if stored == derived:
        return True
    if isinstance(stored, str) and isinstance(derived, str):
        try:
            return truncate_utf8(stored) == derived
        except UnicodeEncodeError:
            return False
    return False


def _property_order(names):
    known = [n for n in image_fields.PROPS_FIELDS if n in names]
    return known + sorted(n for n in names
                          if n not in image_fields.PROPS_FIELDS)


def differing_fields(stored, derived):
    """Comparable parts that differ between a stored and a derived image.

    Compares ``id`` (when the derived image has one), ``min_ram``, the
    formats and every property either side sets except the block device
    mappings system metadata cannot hold; a derived string property equal
    to the stored one truncated to 255 UTF-8 bytes (as system metadata
    keeps it) counts as equal. Returns names such as ``'id'`` or
    ``'properties.hw_disk_bus'``.
    """
    names = []
    for field in COMPARED_IMAGE_FIELDS:
        if field == 'id' and 'id' not in derived:
            continue
        if stored.get(field) != derived.get(field):
            names.append(field)
    stored_props = stored.get('properties') or {}
    derived_props = derived.get('properties') or {}
    compared = (set(stored_props) | set(derived_props)) - set(
        UNDERIVABLE_PROPERTIES)
    for name in _property_order(compared):
        if name in stored_props and name in derived_props:
            if _same_property(stored_props[name], derived_props[name]):
                continue
        names.append('properties.%s' % name)
    return names
