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


"""Server groups in a RequestSpec: the InstanceGroup primitive and hint.

At boot Nova stores the whole group it loaded, with ``members`` and
``hosts`` nulled, and the ``group`` scheduler hint (a one-element list).
On load (``RequestSpec._from_db_object``) it keeps only which group the
spec names: the group's ``uuid``, else the hint; the group itself is read
again from the API database. The compute's group policy checks read the
hint. So a stored spec is judged by the group it names and by its hint;
a group is written exactly as Nova writes it (every supported release
has InstanceGroup 1.11).
"""

import dataclasses
import json

from healreq.objects import primitive

OBJECT_NAME = 'InstanceGroup'
HINT = 'group'
# Fields in InstanceGroup's declaration order, the order Nova writes them.
_FIELDS = ('id', 'user_id', 'project_id', 'uuid', 'name', 'policies',
           'members', 'hosts', 'policy', '_rules', 'created_at',
           'updated_at', 'deleted_at', 'deleted')
# The version that moved the policy from ``policies`` into ``policy``.
_POLICY_ADDED = (1, 11)


class GroupError(ValueError):
    """A server group Nova itself could not load."""


@dataclasses.dataclass(frozen=True)
class Named:
    """Which group a stored spec names, as Nova would read it.

    ``has_group`` is whether ``instance_group`` holds an object; ``uuid``
    is the group Nova loads (the object's uuid, else the hint; None for
    no object or an object naming nothing); ``hint`` is the hint's single
    uuid, or None when it is absent or malformed.
    """
    has_group: bool
    uuid: str
    hint: str


def named(spec_data):
    """The Named group of a spec's data (``nova_object.data``)."""
    hint = _hint(spec_data.get('scheduler_hints'))
    group = spec_data.get('instance_group')
    if group is None:
        return Named(False, None, hint)
    data = primitive.unwrap(group, OBJECT_NAME, 'spec instance_group')
    uuid = data.get('uuid')
    if uuid is not None and not isinstance(uuid, str):
        raise primitive.PrimitiveError('spec instance_group has uuid %s'
                                       % primitive.short(uuid))
    return Named(True, uuid or hint, hint)


def _hint(hints):
    """The single group uuid of the scheduler hints, or None."""
    if not isinstance(hints, dict):
        return None
    value = hints.get(HINT)
    if isinstance(value, list) and len(value) == 1 and isinstance(
            value[0], str):
        return value[0]
    return None


def with_hint(hints, group_uuid):
    """Scheduler hints with ``group`` naming ``group_uuid`` (a copy)."""
    healed = dict(hints) if isinstance(hints, dict) else {}
    healed[HINT] = [group_uuid]
    return healed


def rules(text):
    """A policy row's ``rules`` as the group's ``_rules`` (strings).

    Raises GroupError for text Nova could not load.
    """
    if not text:
        return {}
    try:
        loaded = json.loads(text)
    except ValueError as exc:
        raise GroupError('the rules of the group are not JSON: %s' % exc)
    if not isinstance(loaded, dict):
        raise GroupError('the rules of the group are not an object')
    return {str(key): str(value) for key, value in loaded.items()}


def _timestamp(value):
    """A DateTimeField as Nova serialises it, or None."""
    return None if value is None else value.strftime('%Y-%m-%dT%H:%M:%SZ')


def to_primitive(group, version):
    """The InstanceGroup primitive of a group row, as a spec stores it.

    ``group`` has the instance_groups columns plus its first policy row's
    ``policy`` and ``rules`` (see db.api_queries.get_group_memberships).
    """
    policy = group['policy']
    data = {
        'id': group['id'], 'user_id': group['user_id'],
        'project_id': group['project_id'], 'uuid': group['uuid'],
        'name': group['name'], 'policies': [policy] if policy else [],
        'members': None, 'hosts': None, 'policy': policy,
        '_rules': rules(group['rules']),
        'created_at': _timestamp(group['created_at']),
        'updated_at': _timestamp(group['updated_at']),
        'deleted_at': None, 'deleted': False,
    }
    if primitive.parse_version(version, OBJECT_NAME) < _POLICY_ADDED:
        # obj_make_compatible: policies carries the policy; _rules stays.
        del data['policy']
    document = primitive.wrap(OBJECT_NAME, version,
                              {key: data[key] for key in _FIELDS
                               if key in data})
    document[primitive.CHANGES] = ['members', 'hosts']
    return document
