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


"""Coercion of image property values, as ImageMetaProps' fields do it.

A value set on an ImageMetaProps field is coerced by the field's kind
(see image_fields) the way Nova's fields coerce it: flexible booleans,
integers, strings, UUIDs kept as text, version predicates in the
release's grammar, lists of dicts of strings, and enums (some
canonicalised first, values newer than the release refused). The NUMA
properties Nova reads from one key per node are coerced cell by cell. A
refusal is an ImageMetaError naming the property and its value.
"""

import collections.abc
import datetime

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


def _refuse(name, value, reason):
    return image_fields.ImageMetaError(
        'image %s=%s: %s' % (name, primitive.short(value), reason))


def coerce_string(name, value):
    """``value`` as Nova's String fields store it: ``str(value)``.

    They accept strings, integers, floats and datetimes only.
    """
    if isinstance(value, (str, int, float, datetime.datetime)):
        return str(value)
    raise _refuse(name, value, 'not a string')


def coerce_integer(name, value):
    """``value`` as Nova's Integer fields store it: ``int(value)``."""
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
                          else coerce_string(name, element))
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
        return notation.boolean(value)
    if kind == image_fields.INTEGER:
        return coerce_integer(name, value)
    if kind == image_fields.STRING:
        return coerce_string(name, value)
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


# The properties Nova reads from one key per NUMA node, and the coercion
# of each node's value.
_PER_NODE_PARSERS = {'hw_numa_cpus': _parse_cpu_spec,
                     'hw_numa_mem': coerce_integer}
PER_NODE_PROPERTIES = tuple(_PER_NODE_PARSERS)


def coerce_per_node(raw, name):
    """The coerced values of ``name.0``, ``name.1``... up to the first gap.

    ``name`` is one of PER_NODE_PROPERTIES: ``hw_numa_cpus`` gives sets
    of CPU ids, ``hw_numa_mem`` integers.
    """
    parse = _PER_NODE_PARSERS[name]
    values = []
    for key, value in notation.per_node(raw, name):
        if value is None:
            raise _refuse(key, value, 'cannot be None')
        values.append(parse(key, value))
    return values
