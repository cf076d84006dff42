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


"""Flavor primitives: the embedded instance flavors and the spec's flavor.

Nova compares nothing here itself; the rules follow what stays in step
between ``instance_extra.flavor`` and ``RequestSpec.flavor``: identity and
sizing fields and extra specs do, ``description`` (nulled in
``instance_extra``), timestamps and change lists do not.
"""

from healreq.objects import primitive

PrimitiveError = primitive.PrimitiveError

OBJECT_NAME = 'Flavor'

# Fields whose disagreement is drift. Everything else is cosmetic.
COMPARED_FIELDS = ('id', 'name', 'flavorid', 'memory_mb', 'vcpus',
                   'root_gb', 'ephemeral_gb', 'swap', 'extra_specs')
_INTEGER_FIELDS = ('id', 'memory_mb', 'vcpus', 'root_gb', 'ephemeral_gb',
                   'swap')
_STRING_FIELDS = ('name', 'flavorid')
# Flavor 1.2 added ``description``; older targets must not carry it.
_ADDED_IN = {'description': (1, 2)}


def parse(document, what):
    """Validate a Flavor primitive and return its normalised compare key.

    Returns a dict of the compared fields with Nova's type coercion
    applied (integers from numeric strings, NULL integers as 0, extra spec
    values as strings).
    """
    data = primitive.unwrap(document, OBJECT_NAME, what)
    key = {}
    for field in _INTEGER_FIELDS:
        key[field] = _coerce_int(data.get(field), '%s.%s' % (what, field),
                                 required=field in ('id', 'memory_mb',
                                                    'vcpus'))
    for field in _STRING_FIELDS:
        value = data.get(field)
        if value is not None and not isinstance(value, str):
            raise PrimitiveError('%s.%s is not a string' % (what, field))
        key[field] = value
    extra_specs = data.get('extra_specs', {})
    if extra_specs is None:
        extra_specs = {}
    if not isinstance(extra_specs, dict) or not all(
            isinstance(k, str) for k in extra_specs):
        raise PrimitiveError('%s.extra_specs is not a dict of strings' % what)
    if not all(v is None or isinstance(v, (str, int, float))
               for v in extra_specs.values()):
        raise PrimitiveError('%s.extra_specs holds a value that is not a '
                             'string' % what)
    key['extra_specs'] = {k: None if v is None else str(v)
                          for k, v in extra_specs.items()}
    return key


def _coerce_int(value, what, required):
    if value is None:
        if required:
            raise PrimitiveError('%s is missing' % what)
        return 0
    return primitive.integer(value, what)


def differing_fields(spec_key, instance_key):
    """Names of the compared fields whose values differ."""
    return [f for f in COMPARED_FIELDS if spec_key[f] != instance_key[f]]


def differing_extra_specs(first, second):
    """The keys of two extra specs mappings whose values differ, sorted.

    A key one of them lacks differs.
    """
    missing = object()
    return sorted(key for key in set(first) | set(second)
                  if first.get(key, missing) != second.get(key, missing))


def label(key):
    """Short human form used in reports, e.g. ``a2.medium(982)``."""
    return '%s(%s)' % (key['name'], key['id'])


def for_request_spec(instance_flavor, target_version):
    """Build the spec's flavor primitive from the instance's current one.

    Copies the instance's flavor the way Nova's own repairs do
    (``spec.flavor = instance.flavor``), stamped with ``target_version``
    (the version the deployment's Nova already wrote into this spec) and
    without fields that version does not have.
    """
    target = primitive.parse_version(target_version, 'target version')
    data = dict(instance_flavor[primitive.DATA])
    # Instance._flavor_from_db defaults these when they are absent.
    data.setdefault('disabled', False)
    data.setdefault('is_public', True)
    for field, added_in in _ADDED_IN.items():
        if target < added_in:
            data.pop(field, None)
    return primitive.wrap(OBJECT_NAME, target_version, data)


def parse_instance_flavors(text):
    """Parse ``instance_extra.flavor`` into ``{'cur', 'old', 'new'}``.

    ``cur`` is the validated primitive of the flavor the instance runs
    with; ``old``/``new`` are None or primitives left by a resize.
    """
    what = 'instance_extra.flavor'
    document = primitive.load_json(text, what)
    if not isinstance(document, dict) or 'cur' not in document:
        raise PrimitiveError("%s has no 'cur' flavor" % what)
    flavors = {}
    for slot in ('cur', 'old', 'new'):
        value = document.get(slot)
        if value is None and slot != 'cur':
            flavors[slot] = None
            continue
        parse(value, "%s['%s']" % (what, slot))
        flavors[slot] = value
    return flavors
