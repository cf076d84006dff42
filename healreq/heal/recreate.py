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


"""A missing RequestSpec, built again from the instance record.

As Nova builds one from components (``RequestSpec.from_components`` with
no filter properties, as its removed ``_create_minimal_request_spec``
did), then ``create()``: every derived field as a heal derives it, the
server group from the membership, one instance, empty limits, nothing
forced or retried, no security groups (none can be known), and the pinned
zone as --az-policy says. The document has no ``id`` (a created row's
has none until Nova saves it again) and every field in its change list.
"""

from healreq.heal import field_checks
from healreq.objects import flavor as flavor_obj
from healreq.objects import instance_group as group_obj
from healreq.objects import pci as pci_obj
from healreq.objects import primitive
from healreq import policies

OBJECT_NAME = 'RequestSpec'
# RequestSpec's fields in declaration order (the order Nova writes them),
# with the version that added each.
_FIELDS = (('image', (1, 0)), ('numa_topology', (1, 0)),
           ('pci_requests', (1, 0)), ('project_id', (1, 0)),
           ('user_id', (1, 9)), ('availability_zone', (1, 0)),
           ('flavor', (1, 0)), ('num_instances', (1, 0)),
           ('ignore_hosts', (1, 0)), ('force_hosts', (1, 0)),
           ('force_nodes', (1, 0)), ('requested_destination', (1, 6)),
           ('retry', (1, 0)), ('limits', (1, 0)),
           ('instance_group', (1, 0)), ('scheduler_hints', (1, 0)),
           ('instance_uuid', (1, 0)), ('is_bfv', (1, 11)),
           ('requested_resources', (1, 12)))


def zone(inputs):
    """The zone a recreated spec pins: --az-policy's choice.

    ``unpin`` pins none; ``repin`` and ``report`` pin the zone the
    instance is in, which is what Nova's own recreation pinned.
    """
    if inputs.az_policy == policies.AZ_UNPIN:
        return None
    return inputs.instance['availability_zone']


def document(inputs, profile):
    """The RequestSpec primitive of the instance, as Nova would create it.

    Raises field_checks.DerivationError where a heal would.
    """
    version = profile.version(OBJECT_NAME)
    target = primitive.parse_version(version, OBJECT_NAME)
    values = _derived(inputs, profile)
    data = {name: values[name] for name, added in _FIELDS
            if target >= added}
    spec = primitive.wrap(OBJECT_NAME, version, data)
    spec[primitive.CHANGES] = sorted(data)
    return spec


def _derived(inputs, profile):
    member = inputs.groups[0] if inputs.groups else None
    numa = inputs.numa()
    pci_requests = inputs.pci_requests()
    image, _written = field_checks.image_to_store(inputs.image(), None,
                                                  profile)
    limits = primitive.wrap('SchedulerLimits',
                            profile.version('SchedulerLimits'),
                            dict.fromkeys(('numa_topology', 'vcpu',
                                           'disk_gb', 'memory_mb')))
    limits[primitive.CHANGES] = ['numa_topology', 'vcpu', 'disk_gb',
                                 'memory_mb']
    return {
        'image': image,
        'numa_topology': None if numa is None else field_checks.numa_to_store(
            numa, None, profile),
        'pci_requests': pci_obj.to_primitive(
            pci_requests, inputs.instance['uuid'],
            profile.version('InstancePCIRequests'),
            profile.version('InstancePCIRequest')),
        'project_id': inputs.instance['project_id'],
        'user_id': inputs.instance['user_id'],
        'availability_zone': zone(inputs),
        'flavor': flavor_obj.for_request_spec(
            inputs.flavors.primitives['cur'], profile.version('Flavor')),
        'num_instances': 1, 'ignore_hosts': None, 'force_hosts': None,
        'force_nodes': None, 'requested_destination': None, 'retry': None,
        'limits': limits,
        'instance_group': None if member is None
        else field_checks.group_to_store(member, profile),
        'scheduler_hints': {} if member is None
        else group_obj.with_hint({}, member['uuid']),
        'instance_uuid': inputs.instance['uuid'],
        'is_bfv': inputs.is_bfv(),
        'requested_resources': [],
    }


def describe(inputs):
    """What a recreated spec pins, for the report."""
    member = inputs.groups[0] if inputs.groups else None
    return 'recreated from the instance record (zone %s%s; group %s)' % (
        zone(inputs),
        ', the instance\'s, as Nova\'s own recreation pinned'
        if inputs.az_policy == policies.AZ_REPORT else '',
        member['uuid'] if member else 'none')
