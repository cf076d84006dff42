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


"""The Placement allocation Nova's scheduler requests for an instance.

``requested_resources`` computes what Nova's
``ResourceRequest.from_request_spec(...).merged_resources()`` computes for
a flavor, an image and the boot-from-volume flag, under the rules of a
given release: the amounts per resource class summed over every request
group. ``expected_resources`` splits that into the classes healreq
derives for the compute node's resource provider and those it names as
not checked, because where Placement puts them depends on more than the
flavor and the image (nested providers, sharing providers, the
deployment's configuration). ``heal_allocations_resources`` is what
``nova-manage placement heal_allocations`` writes: the same derivation
without the image.

Where Nova refuses the flavor and image (a CPU policy conflict, an invalid
mask), a ``numa.ConstraintError`` names the exception Nova raises.
"""

import dataclasses
import math
import re

from healreq.objects import notation
from healreq.objects import numa
from healreq.objects import numa_constraints
from healreq.objects import primitive

VCPU = 'VCPU'
PCPU = 'PCPU'
MEMORY_MB = 'MEMORY_MB'
DISK_GB = 'DISK_GB'
MEM_ENCRYPTION_CONTEXT = 'MEM_ENCRYPTION_CONTEXT'
CUSTOM_PREFIX = 'CUSTOM_'

# os-resource-classes' standard classes (1.1.0, the version every
# supported release's upper constraints pin). A flavor's request for any
# other name that is not CUSTOM_* is ignored by Nova.
STANDARD_CLASSES = (
    'VCPU', 'MEMORY_MB', 'DISK_GB', 'PCI_DEVICE', 'SRIOV_NET_VF',
    'NUMA_SOCKET', 'NUMA_CORE', 'NUMA_THREAD', 'NUMA_MEMORY_MB',
    'IPV4_ADDRESS', 'VGPU', 'VGPU_DISPLAY_HEAD', 'NET_BW_EGR_KILOBIT_PER_SEC',
    'NET_BW_IGR_KILOBIT_PER_SEC', 'PCPU', 'MEM_ENCRYPTION_CONTEXT', 'FPGA',
    'PGPU', 'NET_PACKET_RATE_KILOPACKET_PER_SEC',
    'NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC',
    'NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC',
)

# Classes healreq derives on the compute node's provider in every release:
# only the compute node's own provider has inventory of them (a DISK_GB
# on a sharing provider is the caller's to recognise).
ROOT_CLASSES = (VCPU, PCPU, MEMORY_MB, DISK_GB)
# From 2025.2 (Nova 32) the libvirt driver keeps MEM_ENCRYPTION_CONTEXT
# on a child provider of the compute node; before, on the node itself.
MEM_ENCRYPTION_ON_CHILD_FROM = 32
# [filter_scheduler]pci_in_placement came with 2023.1 (Nova 27): from then
# a flavor's PCI alias may be allocated from the compute node's PCI
# device providers, depending on configuration.
PCI_IN_PLACEMENT_FROM = 27

# What the flavor asks for outside resources:* keys and the resources a
# scheduler derives from them, as named in not_checked.
PCI_IN_PLACEMENT = 'PCI in Placement'
ACCELERATORS = 'accelerators'

# A resources or trait extra spec, with its optional group suffix.
_GROUPED_KEY = re.compile(r'^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$')


@dataclasses.dataclass(frozen=True)
class Expected:
    """What an instance should hold on its compute node's provider.

    ``resources`` maps each class healreq derives to its amount (never
    zero); ``not_checked`` names, sorted, what the flavor and image ask
    for that healreq does not derive.
    """
    resources: dict
    not_checked: tuple


def expected_resources(flavor, image_props, is_bfv, release):
    """The allocation the scheduler of ``release`` requests, split.

    ``flavor`` is the flavor primitive's data (``instance_extra.flavor``
    ``['cur']['nova_object.data']``), ``image_props`` the image properties
    as image.image_from_system_metadata derives them, ``is_bfv`` whether
    the root disk is a volume. Raises numa.ConstraintError where Nova
    refuses the flavor and image.
    """
    requested = requested_resources(flavor, image_props, is_bfv, release)
    derived = {}
    not_checked = set(_not_checked_requests(flavor, release))
    for resource_class, amount in requested.items():
        if _derived_on_compute_node(resource_class, release):
            derived[resource_class] = amount
        else:
            not_checked.add(resource_class)
    return Expected(derived, tuple(sorted(not_checked)))


def heal_allocations_resources(flavor, is_bfv, release):
    """What ``nova-manage placement heal_allocations`` writes.

    It derives from the flavor alone (Nova's resources_from_flavor): an
    image's CPU policy or memory encryption is not counted, and every
    class lands on the compute node's provider.
    """
    return requested_resources(flavor, {}, is_bfv, release)


def heal_allocations_refusal(flavor, is_bfv, release):
    """Why ``heal_allocations`` fails for the flavor, or None.

    It refuses a flavor whose ``resources:VGPU`` or
    ``accel:device_profile`` extra spec is set to anything (even ``0``),
    and fails where Nova refuses the flavor without an image (memory
    encryption, whose image must ask for UEFI firmware).
    """
    specs = flavor.get('extra_specs') or {}
    for key, what in (('resources:VGPU', 'vGPUs'),
                      ('accel:device_profile', 'accelerators')):
        if specs.get(key):
            return ('nova-manage placement heal_allocations does not heal '
                    'instances with %s (%s)' % (what, key))
    try:
        heal_allocations_resources(flavor, is_bfv, release)
    except numa.ConstraintError as exc:
        return ('nova-manage placement heal_allocations fails for the '
                'flavor without its image (%s): %s'
                % (exc.nova_exception, exc))
    return None


def requested_resources(flavor, image_props, is_bfv, release):
    """``{class: amount}`` over all request groups, zeros stripped.

    The scheduler's own derivation (ResourceRequest.from_request_spec,
    merged): explicit resources overrides first, then the CPU policy
    (PCPU for dedicated, VCPU and PCPU for mixed, one more PCPU for
    isolated emulator threads), then the flavor's VCPU, MEMORY_MB and
    DISK_GB for the classes no override named, memory encryption, and
    persistent memory.
    """
    specs = numa_constraints.extra_specs(flavor.get('extra_specs'))
    props = image_props or {}
    vcpus = _flavor_int(flavor, 'vcpus')
    groups = _resource_overrides(specs)
    _translate_cpu_policy(groups, vcpus, specs, props)
    merged = _merged(groups)
    if VCPU not in merged and PCPU not in merged:
        _add(groups, None, VCPU, vcpus)
    if MEMORY_MB not in merged:
        _add(groups, None, MEMORY_MB, _flavor_int(flavor, 'memory_mb'))
    if DISK_GB not in merged:
        disk = (_flavor_int(flavor, 'ephemeral_gb')
                + math.ceil(_flavor_int(flavor, 'swap') / 1024))
        if not is_bfv:
            disk += _flavor_int(flavor, 'root_gb')
        if disk:
            _add(groups, None, DISK_GB, disk)
    if _memory_encryption_requested(specs, props, release):
        _add(groups, None, MEM_ENCRYPTION_CONTEXT, 1)
    for resource_class, amount in _pmem_requests(specs).items():
        _add(groups, None, resource_class, amount)
    numa_constraints.pci_numa_policy(specs, props)
    return {rc: amount for rc, amount in _merged(groups).items() if amount}


def _flavor_int(flavor, field):
    value = flavor.get(field)
    if value is None:
        return 0
    return primitive.integer(value, 'flavor.%s' % field)


def _add(groups, suffix, resource_class, amount):
    """Set a class in a group as Nova's RequestGroup.add_resource does.

    Names that are neither standard nor CUSTOM_*, and amounts that are not
    non-negative integers, are ignored; a later value replaces an earlier.
    """
    if not (resource_class.startswith(CUSTOM_PREFIX)
            or resource_class in STANDARD_CLASSES):
        return
    try:
        amount = int(amount)
    except (TypeError, ValueError):
        return
    if amount < 0:
        return
    groups.setdefault(suffix, {})[resource_class] = amount


def _merged(groups):
    merged = {}
    for resources in groups.values():
        for resource_class, amount in resources.items():
            merged[resource_class] = merged.get(resource_class, 0) + amount
    return merged


def _resource_overrides(specs):
    """``{suffix: {class: amount}}`` of the ``resources[$S]:`` specs."""
    groups = {}
    for key, value in specs.items():
        match = _GROUPED_KEY.match(key)
        if match and match.group(1) == 'resources':
            _add(groups, match.group(2), match.group(3), value)
    return groups


def _translate_cpu_policy(groups, vcpus, specs, props):
    """Turn a dedicated or mixed CPU policy into PCPU (and VCPU)."""
    policy = numa_constraints.cpu_policy(specs, props)
    numa_constraints.cpu_thread_policy(specs, props)
    emulator_policy = numa_constraints.emulator_threads_policy(specs)
    if policy == numa.DEDICATED:
        pcpus = vcpus
    elif policy == numa.MIXED:
        dedicated = numa_constraints.dedicated_cpus(vcpus, specs)
        realtime = numa_constraints.realtime_cpus(vcpus, specs, props)
        pcpus = len(dedicated or realtime or ())
        _add(groups, None, VCPU, vcpus - pcpus)
    else:
        return
    if emulator_policy == 'isolate':
        pcpus += 1
    _add(groups, None, PCPU, pcpus)


def _memory_encryption_requested(specs, props, release):
    flavor_text = specs.get('hw:mem_encryption')
    flavor = None if flavor_text is None else notation.boolean(flavor_text)
    if not flavor and not props.get('hw_mem_encryption'):
        return False
    numa_constraints.check_memory_encryption(specs, props, release)
    return True


def _pmem_requests(specs):
    """``{CUSTOM_PMEM_NAMESPACE_<LABEL>: count}`` of ``hw:pmem``."""
    counts = {}
    for label in numa_constraints.pmem_labels(specs):
        resource_class = _normalized_custom_name('PMEM_NAMESPACE_' + label)
        counts[resource_class] = counts.get(resource_class, 0) + 1
    return counts


def _normalized_custom_name(name):
    """os_resource_classes.normalize_name: CUSTOM_, upper, [A-Z0-9_]."""
    return CUSTOM_PREFIX + re.sub('[^0-9A-Za-z]+', '_', name).upper()


def _derived_on_compute_node(resource_class, release):
    if resource_class in ROOT_CLASSES:
        return True
    if resource_class == MEM_ENCRYPTION_CONTEXT:
        return release.nova < MEM_ENCRYPTION_ON_CHILD_FROM
    return False


def _not_checked_requests(flavor, release):
    """What the flavor asks for outside its resources:* extra specs."""
    specs = flavor.get('extra_specs') or {}
    names = []
    if specs.get('pci_passthrough:alias') and (
            release.nova >= PCI_IN_PLACEMENT_FROM):
        names.append(PCI_IN_PLACEMENT)
    if specs.get('accel:device_profile'):
        names.append(ACCELERATORS)
    return names
