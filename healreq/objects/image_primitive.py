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


"""Stored ImageMeta and ImageMetaProps primitives: reading and writing.

Reads the primitives a spec holds into the values healreq.objects.image
derives (type-checked, never guessed), and writes derived values back at
the object versions the deployment uses, dropping what an older version
does not have and refusing values it cannot hold, as Nova's backport does.
"""

from healreq.objects import image_fields
from healreq.objects import primitive

PrimitiveError = primitive.PrimitiveError


def _read_int(value, what):
    if isinstance(value, bool) or not isinstance(value, int):
        raise PrimitiveError('%s is not an integer: %s'
                             % (what, primitive.short(value)))
    return value


def _read_str(value, what):
    if not isinstance(value, str):
        raise PrimitiveError('%s is not a string: %s'
                             % (what, primitive.short(value)))
    return value


def _read_list(value, what):
    if not isinstance(value, list):
        raise PrimitiveError('%s is not a list: %s'
                             % (what, primitive.short(value)))
    return value


def _read_value(kind, value, what):
    if value is None:
        raise PrimitiveError('%s is null' % what)
    if kind == image_fields.BOOLEAN:
        if not isinstance(value, bool):
            raise PrimitiveError('%s is not a boolean: %s'
                                 % (what, primitive.short(value)))
        return value
    if kind == image_fields.INTEGER:
        return _read_int(value, what)
    if kind == image_fields.STRING_LIST:
        return [_read_str(v, what) for v in _read_list(value, what)]
    if kind == image_fields.INTEGER_LIST:
        return [_read_int(v, what) for v in _read_list(value, what)]
    if kind == image_fields.INTEGER_SET_LIST:
        return [set(_read_int(v, what) for v in _read_list(cell, what))
                for cell in _read_list(value, what)]
    if kind == image_fields.DICT_LIST:
        result = []
        for item in _read_list(value, what):
            if not isinstance(item, dict) or not all(
                    isinstance(k, str) and (v is None or isinstance(v, str))
                    for k, v in item.items()):
                raise PrimitiveError('%s is not a list of dicts of strings'
                                     % what)
            result.append(dict(item))
        return result
    # Strings, UUIDs, predicates and enums are kept as stored: a value
    # that is no longer valid simply differs from the derived one.
    return _read_str(value, what)


def props_from_primitive(document, what):
    """Parse a stored ImageMetaProps primitive into the coerced form.

    Returns ``field -> value`` for the known fields it sets (unknown keys
    are ignored, as Nova's loader ignores them). Raises PrimitiveError for
    a malformed primitive or a value Nova never writes for the field.
    """
    data = primitive.unwrap(document, image_fields.PROPS_NAME, what)
    props = {}
    for name, (kind, _added) in image_fields.PROPS_FIELDS.items():
        if name in data:
            props[name] = _read_value(kind, data[name],
                                      '%s.%s' % (what, name))
    return props


def image_from_primitive(document, what):
    """Parse a stored ImageMeta primitive: its set fields, coerced.

    ``properties`` is parsed by props_from_primitive; timestamps stay the
    strings (or None) stored. Raises PrimitiveError for malformed input.
    """
    data = primitive.unwrap(document, image_fields.IMAGE_NAME, what)
    image = {}
    for name, kind in image_fields.IMAGE_FIELDS.items():
        if name not in data:
            continue
        value = data[name]
        field_what = '%s.%s' % (what, name)
        if name == 'properties':
            image[name] = props_from_primitive(value, field_what)
        elif kind == 'datetime':
            image[name] = (None if value is None
                           else _read_str(value, field_what))
        else:
            image[name] = _read_value(kind, value, field_what)
    return image


def _serialise(kind, value):
    if kind == image_fields.INTEGER_SET_LIST:
        # Nova writes each set in iteration order; sorted is equivalent.
        return [sorted(cell) for cell in value]
    if kind in (image_fields.STRING_LIST, image_fields.INTEGER_LIST):
        return list(value)
    if kind == image_fields.DICT_LIST:
        return [dict(item) for item in value]
    return value


def _target_version(name, version):
    try:
        return primitive.target_version(name, version)
    except PrimitiveError as exc:
        raise image_fields.ImageMetaError(str(exc))


def props_to_primitive(props, version):
    """ImageMetaProps primitive of ``props`` at object version ``version``.

    Drops the fields ``version`` lacks, and ``hw_watchdog_action=disabled``
    below 1.16, the way Nova's obj_make_compatible does; raises
    ImageMetaError for values it refuses to backport (e.g. ``mixed``
    hw_cpu_policy below 1.26). No change list is written.
    """
    target = _target_version(image_fields.PROPS_NAME, version)
    unknown = sorted(set(props) - set(image_fields.PROPS_FIELDS))
    if unknown:
        raise image_fields.ImageMetaError('not ImageMetaProps fields: %s'
                                          % ', '.join(unknown))
    data = {}
    for name, (kind, _added) in image_fields.PROPS_FIELDS.items():
        if name in props:
            data[name] = _serialise(kind, props[name])
    if target != primitive.NEWEST[image_fields.PROPS_NAME]:
        for name, value, since in image_fields.TOO_NEW_VALUES:
            if target < since and data.get(name) == value:
                raise image_fields.ImageMetaError(
                    '%s=%s cannot be written as %s %s (needs %d.%d)'
                    % (name, value, image_fields.PROPS_NAME, version, since[0],
                       since[1]))
        for name, (_kind, added) in image_fields.PROPS_FIELDS.items():
            if target < added and name not in image_fields.KEPT_BELOW_ADDED:
                data.pop(name, None)
        if (target < (1, 16)
                and data.get('hw_watchdog_action') == 'disabled'):
            del data['hw_watchdog_action']
    return primitive.wrap(image_fields.PROPS_NAME, version, data)


def image_to_primitive(image, image_version, props_version):
    """ImageMeta primitive of the fields in ``image``.

    ``properties`` is written by props_to_primitive at ``props_version``.
    """
    _target_version(image_fields.IMAGE_NAME, image_version)
    unknown = sorted(set(image) - set(image_fields.IMAGE_FIELDS))
    if unknown:
        raise image_fields.ImageMetaError('not ImageMeta fields: %s'
                                          % ', '.join(unknown))
    data = {}
    for name, kind in image_fields.IMAGE_FIELDS.items():
        if name not in image:
            continue
        if name == 'properties':
            data[name] = props_to_primitive(image[name], props_version)
        else:
            data[name] = _serialise(kind, image[name])
    return primitive.wrap(image_fields.IMAGE_NAME, image_version, data)
