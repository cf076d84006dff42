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


"""Per-field checks: derive a RequestSpec field from the instance record,
compare it with the stored one, and build the replacement primitive.

Each check takes the parsed spec and the instance's derived inputs and
returns None when the field is consistent, or ``(FieldChange, primitive)``
when it drifted. The order of FIELD_NAMES is the order of the report.
"""

from healreq.heal.findings import FieldChange
from healreq.objects import flavor as flavor_obj
from healreq.objects import primitive


class InstanceFlavors(object):
    """The instance's embedded flavors with their compare keys."""

    def __init__(self, flavors):
        self.primitives = flavors
        self._keys = {slot: None if value is None else
                      flavor_obj.parse(value, slot)
                      for slot, value in flavors.items()}

    def key(self, slot):
        return self._keys[slot]


def check_flavor(spec, instance_flavor):
    spec_primitive = spec.flavor()
    stored = flavor_obj.parse(spec_primitive, 'spec flavor')
    expected = instance_flavor.key('cur')
    differing = flavor_obj.differing_fields(stored, expected)
    if not differing:
        return None
    before = flavor_obj.label(stored)
    after = flavor_obj.label(expected)
    if before == after:
        before += ' [%s differ]' % ', '.join(differing)
    healed = flavor_obj.for_request_spec(
        instance_flavor.primitives['cur'], spec_primitive[primitive.VERSION])
    return FieldChange('flavor', before, after), healed


_CHECKS = {
    'flavor': check_flavor,
}

FIELD_NAMES = tuple(_CHECKS)


def compare(field_names, spec, instance_flavor):
    """Run the checks for ``field_names``.

    Returns ``(changes, replacements)``: the FieldChanges in report order
    and the new primitives keyed by RequestSpec field name.
    """
    changes = []
    replacements = {}
    for name in FIELD_NAMES:
        if name not in field_names:
            continue
        result = _CHECKS[name](spec, instance_flavor)
        if result is not None:
            change, value = result
            changes.append(change)
            replacements[name] = value
    return changes, replacements
