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


"""The instance's image: its derivation from system metadata, compared.

Nova rebuilds a RequestSpec's image with ``ImageMeta.from_instance``: the
``image_*`` system metadata become top-level attributes (``min_ram``,
``min_disk``, ``disk_format``, ``container_format``) or image properties,
which ``ImageMetaProps.from_dict`` maps from legacy names, coerces by
field type and validates. This module reproduces that for each supported
release, with the fields of image_fields that the release knows and the
coercion of image_coercion, and compares a derived image with a stored
one; image_primitive reads and writes the stored primitives.

Values are held as Nova holds them: booleans, integers, canonical enum
strings, lists of strings or integers, and ``hw_numa_cpus`` as a list of
sets of integers.
"""

import functools

from healreq.objects import image_coercion
from healreq.objects import image_fields
from healreq.objects import primitive
from healreq import releases


# Parts of a derived image compared with the stored one (min_disk is
# flavor-adjusted in system metadata, so it differs by construction).
COMPARED_IMAGE_FIELDS = ('id', 'min_ram', 'disk_format', 'container_format')
# Properties system metadata never keeps (image_fields.SM_SKIP_KEYS): a
# spec written from Glance may hold them, a derived image never does.
UNDERIVABLE_PROPERTIES = ('img_mappings', 'img_block_device_mapping')


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
            props[current] = image_coercion.coerce_property(
                current, raw[legacy], release)
    adapter = raw.get('vmware_adaptertype')
    if adapter == 'ide':
        props['hw_disk_bus'] = 'ide'
    elif adapter:
        props['hw_disk_bus'] = 'scsi'
        props['hw_scsi_model'] = image_coercion.coerce_property(
            'hw_scsi_model', adapter, release)
    for name in image_fields.known_properties(release):
        if name in image_coercion.PER_NODE_PROPERTIES:
            cells = image_coercion.coerce_per_node(raw, name)
            if cells:
                props[name] = cells
        elif name != 'traits_required' and name in raw:
            props[name] = image_coercion.coerce_property(name, raw[name],
                                                         release)
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
            value = image_coercion.coerce_string(
                'system_metadata[%s]' % key, value)
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
        image_ref = image_coercion.coerce_string('image_ref', image_ref)
        if image_ref:
            image['id'] = image_ref
    for key in image_fields.SM_INHERITABLE_KEYS:
        if key not in inherited:
            continue
        if key in ('min_ram', 'min_disk'):
            image[key] = image_coercion.coerce_integer(key, inherited[key])
        else:
            image[key] = image_coercion.coerce_string(key, inherited[key])
    image['properties'] = props_from_strings(properties, release)
    return image


def derivation_items(sysmeta):
    """The items of ``sysmeta`` that image_from_system_metadata reads.

    Sorted; two system metadata that agree on them give the same image,
    so they key its memo without what Nova records per user at boot
    (owner names, roles) or for other purposes. None when a key or value
    is not text: then every item can matter.
    """
    items = []
    for key, value in sysmeta.items():
        if not isinstance(key, str) or not (
                value is None or isinstance(value, str)):
            return None
        if _read_by_derivation(key):
            items.append((key, value))
    return tuple(sorted(items))


@functools.lru_cache(maxsize=4096)
def _read_by_derivation(key):
    """Whether system metadata ``key`` can change the derived image."""
    prefix = image_fields.SM_IMAGE_PROP_PREFIX
    name = key[len(prefix):] if key.startswith(prefix) else key
    return (name in image_fields.SM_INHERITABLE_KEYS
            or name in image_fields.PROPS_FIELDS
            or name in image_fields.LEGACY_NAMES
            or name == 'vmware_adaptertype'
            or name.startswith(image_fields.TRAIT_PREFIX)
            or name.partition('.')[0] in image_coercion.PER_NODE_PROPERTIES)


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
