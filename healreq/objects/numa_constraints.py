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


"""The request NUMA topology Nova derives for a flavor and an image.

``constraints`` computes what Nova's ``numa_get_constraints`` computes,
under the rules of a given release, for a flavor and an image: the
request topology a RequestSpec holds, or a refusal carrying the name of
the exception Nova raises. The checks run in Nova's order, because the
order decides which refusal is reported when a request is wrong in more
than one way.
"""

import dataclasses
import re

from healreq.objects import notation
from healreq.objects import numa
from healreq.objects import primitive
from healreq import releases

_RESOURCE_VCPU_RE = re.compile(r'resources(?:[1-9][0-9]*)?:VCPU')
_RESOURCE_PCPU_RE = re.compile(r'resources(?:[1-9][0-9]*)?:PCPU')
_HYPERTHREADING_RE = re.compile(
    r'trait(?:[1-9][0-9]*)?:HW_CPU_HYPERTHREADING')

# Memory encryption models: (needs stateless firmware, rejects video).
_ENCRYPTION_MODELS = {
    'amd-sev': (False, False),
    'amd-sev-es': (False, False),
    'amd-sev-snp': (True, False),
    'intel-tdx': (True, True),
}


def _to_int(text, what):
    try:
        return int(text)
    except ValueError:
        raise numa.ConstraintError(
            'ValueError', '%s %r is not an integer' % (what, text))


def _cpu_list(text):
    """A CPU list; Nova raises Invalid for one it cannot read."""
    try:
        return notation.parse_cpu_list(text)
    except notation.NotationError as exc:
        raise numa.ConstraintError('Invalid', str(exc))


def _parse_cpu_mask(mask, vcpus):
    """A CPU mask; one starting with ``^`` applies to all guest CPUs."""
    if mask.strip().startswith('^'):
        return _cpu_list('0-%d,%s' % (vcpus - 1, mask))
    return _cpu_list(mask)


def _page_size(request, release):
    """A page size request as Nova evaluates it (KiB, maybe a float)."""
    if request in numa.SYMBOLIC_PAGESIZES:
        return numa.SYMBOLIC_PAGESIZES[request]
    if request.isdigit():
        # isdigit() accepts digits int() rejects ('²'): Nova then fails
        # with a bare ValueError.
        return _to_int(request, 'page size')
    try:
        size = notation.byte_size(request, release.page_size_prefixes)
    except ValueError:
        raise numa.ConstraintError(
            'MemoryPageSizeInvalid', 'invalid memory page size %r' % request)
    except OverflowError:
        raise numa.ConstraintError(
            'OverflowError', 'memory page size %r is too large' % request)
    # True division: Nova keeps the float ("1.5KB" is 1.5 KiB here, 1 KiB
    # once stored in the cell).
    return size / 1024


# The constraint steps, in the order numa_get_constraints takes them.

def _cpu_policy(specs, props):
    flavor = specs.get('hw:cpu_policy')
    image = props.get('hw_cpu_policy')
    for value, source in ((flavor, 'flavor extra specs'),
                          (image, 'image properties')):
        if value and value not in numa.CPU_POLICIES:
            raise numa.ConstraintError(
                'InvalidCPUAllocationPolicy',
                'CPU policy %r in %s is not one of %s'
                % (value, source, ', '.join(numa.CPU_POLICIES)))
    if flavor == numa.DEDICATED:
        return numa.DEDICATED
    if flavor == numa.MIXED:
        if image == numa.DEDICATED:
            raise numa.ConstraintError(
                'ImageCPUPinningForbidden',
                'the image asks for dedicated CPUs, the flavor for mixed')
        return numa.MIXED
    if flavor == numa.SHARED:
        if image in (numa.DEDICATED, numa.MIXED):
            raise numa.ConstraintError(
                'ImageCPUPinningForbidden',
                'the image asks for %s CPUs, the flavor for shared' % image)
        return numa.SHARED
    return image if image in numa.CPU_POLICIES else None


def _thread_policy(specs, props):
    flavor = specs.get('hw:cpu_thread_policy')
    image = props.get('hw_cpu_thread_policy')
    for value, source in ((flavor, 'flavor extra specs'),
                          (image, 'image properties')):
        if value and value not in numa.THREAD_POLICIES:
            raise numa.ConstraintError(
                'InvalidCPUThreadAllocationPolicy',
                'CPU thread policy %r in %s is not one of %s'
                % (value, source, ', '.join(numa.THREAD_POLICIES)))
    if flavor is None or flavor == 'prefer':
        return flavor or image
    if image and image != flavor:
        raise numa.ConstraintError(
            'ImageCPUThreadPolicyForbidden',
            'the image asks for CPU thread policy %s, the flavor for %s'
            % (image, flavor))
    # May be '' (an empty flavor value); Nova then fails when it stores
    # it in a cell, see _build.
    return flavor


def _emulator_threads_policy(specs):
    policy = specs.get('hw:emulator_threads_policy')
    if not policy:
        return None
    if policy not in numa.EMULATOR_THREADS_POLICIES:
        raise numa.ConstraintError(
            'InvalidEmulatorThreadsPolicy',
            'emulator threads policy %r is not one of %s'
            % (policy, ', '.join(numa.EMULATOR_THREADS_POLICIES)))
    return policy


def _realtime_cpus(vcpus, specs, props):
    if not notation.boolean(specs.get('hw:cpu_realtime')):
        return None
    # The image's mask is more specific and wins.
    mask = (props.get('hw_cpu_realtime_mask')
            or specs.get('hw:cpu_realtime_mask'))
    every = set(range(vcpus))
    realtime = _parse_cpu_mask(mask, vcpus) if mask else set(every)
    if not realtime:
        raise numa.ConstraintError(
            'RealtimeMaskNotFoundOrInvalid',
            'the realtime CPU mask selects no vCPU')
    # Nova validates the emulator threads policy here already.
    emulator_policy = _emulator_threads_policy(specs)
    if realtime == every and not emulator_policy:
        raise numa.ConstraintError(
            'RealtimeMaskNotFoundOrInvalid',
            'a realtime mask must leave a vCPU for the emulator threads '
            'unless hw:emulator_threads_policy is set')
    if not realtime <= every:
        raise numa.ConstraintError(
            'RealtimeMaskNotFoundOrInvalid',
            'the realtime CPU mask names vCPUs the flavor does not have')
    return realtime


def _dedicated_cpus(vcpus, specs):
    mask = specs.get('hw:cpu_dedicated_mask')
    if not mask:
        return None
    dedicated = _parse_cpu_mask(mask, vcpus)
    every = set(range(vcpus))
    if not dedicated or not every - dedicated:
        raise numa.ConstraintError(
            'InvalidMixedInstanceDedicatedMask',
            'hw:cpu_dedicated_mask must leave both dedicated and shared '
            'vCPUs')
    if not dedicated <= every:
        raise numa.ConstraintError(
            'InvalidMixedInstanceDedicatedMask',
            'hw:cpu_dedicated_mask names vCPUs the flavor does not have')
    return dedicated


def _requested_cpu_resources(specs):
    """Sums of the VCPU and PCPU amounts over all request groups."""
    shared = dedicated = 0
    for key, value in specs.items():
        for pattern, kind in ((_RESOURCE_VCPU_RE, 'VCPU'),
                              (_RESOURCE_PCPU_RE, 'PCPU')):
            if pattern.match(key):
                try:
                    amount = int(value)
                except ValueError:
                    continue  # placement request validation reports it
                if kind == 'VCPU':
                    shared += amount
                else:
                    dedicated += amount
    return shared, dedicated


def _hyperthreading_trait(specs, props):
    for key, value in specs.items():
        if _HYPERTHREADING_RE.match(key):
            return value
    if 'HW_CPU_HYPERTHREADING' in (props.get('traits_required') or []):
        return 'required'
    return None


def _node_count(specs, props):
    flavor = specs.get('hw:numa_nodes')
    image = props.get('hw_numa_nodes')
    if flavor and image:
        raise numa.ConstraintError(
            'ImageNUMATopologyForbidden',
            'the image may not set hw_numa_nodes when the flavor does')
    nodes = flavor or image
    if nodes is not None and (not notation.is_int_like(nodes)
                              or int(nodes) < 1):
        raise numa.ConstraintError(
            'InvalidNUMANodesNumber',
            'invalid number of NUMA nodes %r' % (nodes,))
    return int(nodes) if nodes else None


def _pagesize(specs, props, release):
    flavor = specs.get('hw:mem_page_size')
    image = props.get('hw_mem_page_size')
    if not flavor:
        if image:
            raise numa.ConstraintError(
                'MemoryPageSizeForbidden',
                'the image asks for page size %s, the flavor for none'
                % image)
        return None
    size = _page_size(flavor, release)
    if image:
        if size not in (numa.MEMPAGES_ANY, numa.MEMPAGES_LARGE):
            raise numa.ConstraintError(
                'MemoryPageSizeForbidden',
                'the image asks for page size %s, the flavor fixes %s'
                % (image, flavor))
        return _page_size(image, release)
    return size


def _pmem_labels(specs):
    value = specs.get('hw:pmem')
    if not value:
        return []
    return [label.strip() for label in value.split(',') if label.strip()]


def _check_memory_encryption(specs, props, models=None):
    """Validate a memory encryption request against the image.

    ``models`` are the model names the release knows (default: all).
    """
    flavor_text = specs.get('hw:mem_encryption')
    flavor = (None if flavor_text is None
              else notation.boolean(flavor_text))
    image = props.get('hw_mem_encryption')
    if not flavor and not image:
        return
    if flavor is not None and image is not None and flavor != image:
        raise numa.ConstraintError(
            'FlavorImageConflict',
            'the flavor sets hw:mem_encryption=%s, the image '
            'hw_mem_encryption=%s' % (flavor_text, image))
    flavor_model = specs.get('hw:mem_encryption_model')
    image_model = props.get('hw_mem_encryption_model')
    if (flavor_model is not None and image_model is not None
            and flavor_model != image_model):
        raise numa.ConstraintError(
            'FlavorImageConflict',
            'the flavor sets memory encryption model %s, the image %s'
            % (flavor_model, image_model))
    model = image_model or flavor_model or 'amd-sev'
    if model not in (models or _ENCRYPTION_MODELS):
        raise numa.ConstraintError(
            'Invalid', 'invalid memory encryption model %r' % (model,))
    needs_stateless, rejects_video = _ENCRYPTION_MODELS[model]
    _check_firmware_and_machine(props, 'memory encryption (%s)' % model)
    if needs_stateless and not props.get('hw_firmware_stateless'):
        raise numa.ConstraintError(
            'StatelessFirmwareRequired',
            'memory encryption model %s needs hw_firmware_stateless=true'
            % model)
    if rejects_video and props.get('hw_video_model') != 'none':
        raise numa.ConstraintError(
            'InvalidVideoMode',
            'memory encryption model %s needs hw_video_model=none' % model)


def _check_locked_memory(specs, props, release):
    """Validate memory locking (and encryption), which shape nothing.

    Memory encryption is checked here from Nova 34 on only.
    """
    flavor_text = specs.get('hw:locked_memory')
    image = props.get('hw_locked_memory')
    if flavor_text is not None:
        locked = notation.boolean(flavor_text)
        if image is not None and locked != image:
            raise numa.ConstraintError(
                'FlavorImageLockedMemoryConflict',
                'the flavor sets hw:locked_memory=%s, the image '
                'hw_locked_memory=%s' % (flavor_text, image))
    else:
        locked = image
    if locked:
        if not (specs.get('hw:mem_page_size')
                or props.get('hw_mem_page_size')):
            raise numa.ConstraintError(
                'LockMemoryForbidden',
                'locked memory needs an explicit memory page size')
        return
    if release.numa_checks_memory_encryption:
        _check_memory_encryption(specs, props)


def _node_lists(specs, props, key, parse, image_key):
    """Per-node values from ``key.N`` extra specs or the image."""
    from_flavor = [parse(value)
                   for _name, value in notation.per_node(specs, key)]
    from_image = props.get(image_key)
    if not from_flavor:
        return from_image
    if from_image is not None:
        raise numa.ConstraintError(
            'ImageNUMATopologyForbidden',
            'the image may not set %s when the flavor sets %s.N'
            % (image_key, key))
    return from_flavor


def _auto_layout(vcpus, memory_mb, nodes):
    if vcpus % nodes or memory_mb % nodes:
        raise numa.ConstraintError(
            'ImageNUMATopologyAsymmetric',
            '%d vCPUs and %d MiB do not split evenly over %d NUMA nodes'
            % (vcpus, memory_mb, nodes))
    per_node = vcpus // nodes
    return [(set(range(node * per_node, (node + 1) * per_node)),
             memory_mb // nodes) for node in range(nodes)]


def _manual_layout(vcpus, memory_mb, nodes, cpu_lists, memory_list):
    unassigned = set(range(vcpus))
    layout = []
    total = 0
    for node in range(nodes):
        cpus = cpu_lists[node]
        for cpu in cpus:
            if cpu > vcpus - 1:
                raise numa.ConstraintError(
                    'ImageNUMATopologyCPUOutOfRange',
                    'NUMA node %d lists vCPU %d; the highest is %d'
                    % (node, cpu, vcpus - 1))
            if cpu not in unassigned:
                raise numa.ConstraintError(
                    'ImageNUMATopologyCPUDuplicates',
                    'vCPU %d is listed on more than one NUMA node' % cpu)
            unassigned.remove(cpu)
        layout.append((set(cpus), memory_list[node]))
        total += memory_list[node]
    if unassigned:
        raise numa.ConstraintError(
            'ImageNUMATopologyCPUsUnassigned',
            'vCPUs %s are on no NUMA node'
            % notation.format_cpu_list(unassigned))
    if total != memory_mb:
        raise numa.ConstraintError(
            'ImageNUMATopologyMemoryOutOfRange',
            'NUMA node memory adds up to %d MiB, not %d' % (total, memory_mb))
    return layout


def _extra_specs(extra_specs):
    """Extra spec values as Nova's Flavor object holds them (strings)."""
    specs = {}
    for key, value in (extra_specs or {}).items():
        if isinstance(value, (int, float)):
            value = str(value)
        elif not isinstance(value, str):
            raise numa.ConstraintError(
                'ValueError', 'extra spec %s is not a string: %r'
                % (key, value))
        specs[key] = value
    return specs


@dataclasses.dataclass(frozen=True)
class _CpuRequest:
    """The CPU side of a request once the policy rules have run."""
    policy: str | None
    thread_policy: str | None
    emulator_policy: str | None
    # The vCPUs of a mixed request that are pinned (None if no mask).
    dedicated: set | None


def _policy_from_resources(cpu_policy, vcpus, specs, emulator_policy):
    """Explicit resources:VCPU / resources:PCPU requests imply the policy."""
    shared_amount, dedicated_amount = _requested_cpu_resources(specs)
    if cpu_policy and (shared_amount or dedicated_amount):
        raise numa.ConstraintError(
            'InvalidRequest',
            'resources:VCPU or resources:PCPU cannot be combined with a '
            'CPU policy')
    if shared_amount and dedicated_amount:
        raise numa.ConstraintError(
            'InvalidRequest',
            'resources:VCPU and resources:PCPU cannot both be requested')
    if dedicated_amount:
        expected = vcpus + 1 if emulator_policy == 'isolate' else vcpus
        if dedicated_amount != expected:
            raise numa.ConstraintError(
                'InvalidRequest',
                'resources:PCPU=%d must be %d (the flavor\'s vCPUs%s)'
                % (dedicated_amount, expected,
                   ' plus one for isolated emulator threads'
                   if emulator_policy == 'isolate' else ''))
        return numa.DEDICATED
    if shared_amount:
        return numa.SHARED
    return cpu_policy


def _policy_from_hyperthreading(thread_policy, specs, props):
    """The HW_CPU_HYPERTHREADING trait implies the thread policy."""
    hyperthreading = _hyperthreading_trait(specs, props)
    if thread_policy and hyperthreading:
        raise numa.ConstraintError(
            'InvalidRequest',
            'the HW_CPU_HYPERTHREADING trait cannot be combined with a CPU '
            'thread policy')
    if hyperthreading == 'forbidden':
        return 'isolate'
    if hyperthreading == 'required':
        return 'require'
    return thread_policy


def _check_cpu_policy(cpu_policy, thread_policy, emulator_policy, realtime,
                      dedicated):
    """Nova's sanity checks of the settled policies; the pinned vCPUs."""
    if cpu_policy in (numa.SHARED, None):
        if thread_policy:
            raise numa.ConstraintError(
                'CPUThreadPolicyConfigurationInvalid',
                'a CPU thread policy needs dedicated CPUs')
        if emulator_policy == 'isolate':
            raise numa.ConstraintError(
                'BadRequirementEmulatorThreadsPolicy',
                'isolated emulator threads need dedicated CPUs')
        if dedicated:
            raise numa.ConstraintError(
                'RequiredMixedInstancePolicy',
                'hw:cpu_dedicated_mask needs hw:cpu_policy=mixed')
        if realtime:
            raise numa.ConstraintError(
                'RealtimeConfigurationInvalid',
                'realtime vCPUs need dedicated CPUs')
    elif cpu_policy == numa.DEDICATED:
        if dedicated:
            raise numa.ConstraintError(
                'RequiredMixedInstancePolicy',
                'hw:cpu_dedicated_mask needs hw:cpu_policy=mixed')
    else:
        if bool(realtime) == bool(dedicated):
            raise numa.ConstraintError(
                'RequiredMixedOrRealtimeCPUMask',
                'the mixed policy needs exactly one of a realtime mask and '
                'hw:cpu_dedicated_mask')
        # With a realtime mask, the realtime vCPUs are the dedicated ones.
        dedicated = dedicated or realtime
    return dedicated


def _cpu_request(vcpus, specs, props):
    """The CPU policies and pinned vCPUs, checked in Nova's order."""
    cpu_policy = _cpu_policy(specs, props)
    thread_policy = _thread_policy(specs, props)
    realtime = _realtime_cpus(vcpus, specs, props)
    dedicated = _dedicated_cpus(vcpus, specs)
    emulator_policy = _emulator_threads_policy(specs)
    cpu_policy = _policy_from_resources(cpu_policy, vcpus, specs,
                                        emulator_policy)
    thread_policy = _policy_from_hyperthreading(thread_policy, specs, props)
    dedicated = _check_cpu_policy(cpu_policy, thread_policy,
                                  emulator_policy, realtime, dedicated)
    return _CpuRequest(policy=cpu_policy, thread_policy=thread_policy,
                       emulator_policy=emulator_policy, dedicated=dedicated)


def _layout(vcpus, memory_mb, nodes, specs, props):
    """``(vCPUs, MiB)`` per node: given per node, or split evenly."""
    cpu_lists = _node_lists(specs, props, 'hw:numa_cpus', _cpu_list,
                            'hw_numa_cpus')
    memory_list = _node_lists(
        specs, props, 'hw:numa_mem',
        lambda text: _to_int(text, 'hw:numa_mem'), 'hw_numa_mem')
    if cpu_lists is None and memory_list is None:
        return _auto_layout(vcpus, memory_mb, nodes)
    if (cpu_lists is None or memory_list is None
            or len(cpu_lists) != nodes or len(memory_list) != nodes):
        raise numa.ConstraintError(
            'ImageNUMATopologyIncomplete',
            'CPUs and memory must be given for each of the %d NUMA nodes'
            % nodes)
    return _manual_layout(vcpus, memory_mb, nodes, cpu_lists, memory_list)


def _topology(vcpus, layout, cpu, pagesize):
    """The request topology of a layout and the CPU request."""
    if cpu.policy == numa.DEDICATED:
        pinned = set(range(vcpus))
    else:
        pinned = cpu.dedicated or set()
    floating = set(range(vcpus)) - pinned
    if cpu.thread_policy not in numa.THREAD_POLICIES + (None,):
        # Only an empty hw:cpu_thread_policy gets here; Nova's cell field
        # rejects it.
        raise numa.ConstraintError(
            'ValueError', 'CPU thread policy %r is not valid in a NUMA cell'
            % (cpu.thread_policy,))
    cells = tuple(
        numa.Cell(id=node, cpuset=frozenset(cpus & floating),
                  pcpuset=frozenset(cpus & pinned), memory=int(memory),
                  pagesize=None if pagesize is None else int(pagesize),
                  cpu_policy=cpu.policy, cpu_thread_policy=cpu.thread_policy)
        for node, (cpus, memory) in enumerate(layout))
    return numa.Topology(cells=cells,
                         emulator_threads_policy=cpu.emulator_policy)


def constraints(vcpus, memory_mb, extra_specs, image_props,
                release=releases.LATEST):
    """The request NUMA topology Nova derives for a flavor and image.

    ``extra_specs`` are the flavor's extra specs (strings); ``image_props``
    maps ImageMetaProps field names to their coerced values (absent = not
    set); ``release`` is the Nova release whose rules apply. Returns a
    numa.Topology, or None when the request needs no NUMA topology.
    Raises numa.ConstraintError, naming Nova's exception, exactly when
    numa_get_constraints raises.
    """
    if not 0 <= vcpus <= notation.MAX_CPU_IDS:
        raise numa.ConstraintError(
            'ValueError', 'a flavor with %s vCPUs is not a real flavor'
            % primitive.short(vcpus))
    specs = _extra_specs(extra_specs)
    props = image_props or {}
    cpu = _cpu_request(vcpus, specs, props)
    nodes = _node_count(specs, props)
    pagesize = _pagesize(specs, props, release)
    pmem = _pmem_labels(specs)
    _check_locked_memory(specs, props, release)
    # A topology exists only for explicit nodes, huge pages, vPMEM or
    # pinning. pagesize may be 0, which does not count.
    if not (nodes or pagesize or pmem
            or cpu.policy in (numa.DEDICATED, numa.MIXED)):
        return None
    layout = _layout(vcpus, memory_mb, nodes or 1, specs, props)
    return _topology(vcpus, layout, cpu, pagesize)


# The single rules that other derivations share (the scheduler's
# allocation request applies them too, see objects.allocations).

def extra_specs(specs):
    """Extra spec values as Nova's Flavor object holds them (strings)."""
    return _extra_specs(specs)


def cpu_policy(specs, props):
    """hardware.get_cpu_policy_constraint: the settled CPU policy."""
    return _cpu_policy(specs, props)


def cpu_thread_policy(specs, props):
    """hardware.get_cpu_thread_policy_constraint."""
    return _thread_policy(specs, props)


def emulator_threads_policy(specs):
    """hardware.get_emulator_thread_policy_constraint."""
    return _emulator_threads_policy(specs)


def dedicated_cpus(vcpus, specs):
    """The vCPUs ``hw:cpu_dedicated_mask`` pins, or None."""
    return _dedicated_cpus(vcpus, specs)


def realtime_cpus(vcpus, specs, props):
    """The realtime vCPUs, or None unless ``hw:cpu_realtime`` is true."""
    return _realtime_cpus(vcpus, specs, props)


def pmem_labels(specs):
    """The ``hw:pmem`` labels, one per persistent memory namespace."""
    return _pmem_labels(specs)


# hardware.get_pci_numa_policy_constraint's accepted policies.
PCI_NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')


def pci_numa_policy(specs, props):
    """The PCI NUMA affinity policy; raises where Nova refuses it."""
    flavor = specs.get('hw:pci_numa_affinity_policy')
    image = props.get('hw_pci_numa_affinity_policy')
    if flavor and image and flavor != image:
        raise numa.ConstraintError(
            'ImagePCINUMAPolicyForbidden',
            'the image asks for PCI NUMA affinity policy %s, the flavor '
            'for %s' % (image, flavor))
    policy = flavor or image
    if policy and policy not in PCI_NUMA_POLICIES:
        raise numa.ConstraintError(
            'InvalidPCINUMAAffinity',
            'invalid PCI NUMA affinity policy %r' % (policy,))
    return policy


# From 2025.2 (Nova 32) memory encryption has models, each with its own
# checks; before, every request was AMD SEV. 2026.2 (Nova 34) added
# amd-sev-snp and intel-tdx.
MEMORY_ENCRYPTION_MODELS_FROM = 32
_FIRST_MEMORY_ENCRYPTION_MODELS = ('amd-sev', 'amd-sev-es')
ALL_MEMORY_ENCRYPTION_MODELS_FROM = 34


def check_memory_encryption(specs, props, release):
    """Raise numa.ConstraintError where ``release`` refuses encryption.

    hardware.get_mem_encryption_constraint as the scheduler calls it (no
    machine type of its own: the image's counts).
    """
    if release.nova >= ALL_MEMORY_ENCRYPTION_MODELS_FROM:
        _check_memory_encryption(specs, props)
        return
    if release.nova >= MEMORY_ENCRYPTION_MODELS_FROM:
        _check_memory_encryption(specs, props,
                                 _FIRST_MEMORY_ENCRYPTION_MODELS)
        return
    flavor_text = specs.get('hw:mem_encryption')
    flavor = None if flavor_text is None else notation.boolean(flavor_text)
    image = props.get('hw_mem_encryption')
    if flavor is not None and image is not None and flavor != image:
        raise numa.ConstraintError(
            'FlavorImageConflict',
            'the flavor sets hw:mem_encryption=%s, the image '
            'hw_mem_encryption=%s' % (flavor_text, image))
    _check_firmware_and_machine(props, 'memory encryption')


def _check_firmware_and_machine(props, what):
    """Encryption needs UEFI firmware and, if one is named, a q35 machine."""
    if props.get('hw_firmware_type') != 'uefi':
        raise numa.ConstraintError(
            'FlavorImageConflict',
            'memory encryption needs hw_firmware_type=uefi on the image')
    machine_type = props.get('hw_machine_type')
    if machine_type is not None and 'q35' not in machine_type:
        raise numa.ConstraintError(
            'InvalidMachineType',
            '%s needs a q35 machine type, not %s' % (what, machine_type))
