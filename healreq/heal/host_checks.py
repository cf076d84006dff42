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

"""``nova-heal hosts``: what the scheduler reads about a host. Pure.

Rows in (a host's compute nodes, service, aggregates, providers,
instances and PCI devices, as read), a HostResult out with its problems,
their details and the remedy. Reason codes are public (HOST_REASONS):
add freely, never rename or reuse one.

The rules that mirror Nova's own code are small public functions:

* ``pinned_cpus(instance_topology, host_topology=None)``: the pCPUs an
  instance holds on its host, per host NUMA cell, as the resource
  tracker pins them (``hardware.numa_usage_from_instance_numa``);
* ``dedicated_cpus(host_topology)``: the host's dedicated pCPUs per NUMA
  cell, as the compute node reports them (its cells' ``pcpuset``);
* ``is_sharing_provider(provider_id, parents, traits)``: whether a
  resource provider shares its resources (it, or a provider above it,
  has the trait ``MISC_SHARES_VIA_AGGREGATE``).
"""

import dataclasses
import functools
import typing

from healreq.heal import audit_report
from healreq import nova_constants
from healreq.objects import primitive

MISMATCHED = 'mismatched'
SKIPPED = 'skipped'
ERROR = 'error'
STATUSES = (MISMATCHED, SKIPPED, ERROR)

SHARING_TRAIT = 'MISC_SHARES_VIA_AGGREGATE'

# InstanceNUMACell cpu_policy values under which nothing is pinned.
_UNPINNED_POLICIES = (None, 'shared')
_ISOLATE = 'isolate'
_INT_ONLY = frozenset([int])

# PCI device statuses that hold a device for an instance.
HELD_STATUSES = ('allocated', 'claimed')

# code -> one-line meaning, by the status that carries it. The operator
# guide is generated from this table.
HOST_REASONS = {
    MISMATCHED: {
        'aggregate-missing':
            'the host is a member of a Nova aggregate, but its compute '
            'node\'s resource provider is not in the Placement aggregate '
            'of the same uuid (a membership that did not reach Placement): '
            'a boot into the aggregate\'s zone cannot land there',
        'aggregate-stale':
            'a resource provider is in the Placement aggregate of a Nova '
            'aggregate while its host is not a member of that aggregate '
            '(a removal that did not reach Placement): the scheduler still '
            'places servers of the aggregate\'s zone there',
        'provider-orphaned':
            'a root resource provider that no live compute node of any '
            'cell backs, and that is not a sharing provider: the scheduler '
            'may still offer it, and it may hold allocations',
        'provider-duplicate':
            'two live compute nodes for one hypervisor, a provider of the '
            'hypervisor\'s name with another uuid than its compute node, '
            'or a live compute node whose host has no live nova-compute '
            'service (a renamed host)',
        'provider-missing':
            'a live compute node has no resource provider of its uuid: '
            'the scheduler cannot place anything on it',
        'cpus-pinned-twice':
            'live instances of one host are pinned to the same pCPUs: the '
            'compute\'s periodic update fails on that host every time, '
            'and new servers may be pinned to them too',
        'cpus-outside-dedicated-set':
            'an instance is pinned to pCPUs that are not among the '
            'dedicated pCPUs its compute node reports for that NUMA cell',
        'pci-device-held':
            'a PCI device is allocated or claimed for an instance that is '
            'deleted, gone or on another host (transient while the host\'s '
            'nova-compute is up: its periodic update frees it)',
    },
    SKIPPED: {
        'task-in-progress':
            'an instance on the host has task_state set: its pinned CPUs '
            'and PCI devices are not judged',
        'building': 'an instance on the host is building',
        'resize-awaiting-confirm':
            'an instance on the host is resized: the migration holds pins '
            'and devices on both hosts until it is confirmed or reverted',
        'migration-in-progress':
            'a migration from or to the host has not ended: it holds pins '
            'and devices on both hosts while it runs',
        'evacuation-not-cleaned':
            'an evacuation from or to the host is done but its source has '
            'not cleaned up yet: the source still holds the devices',
    },
    ERROR: {
        'numa-topology-unparsable':
            'the NUMA topology of an instance (instance_extra) or of a '
            'compute node cannot be read: its pinned CPUs are not judged',
    },
}

# A detail's keys besides ``reason``, by reason code (the JSON contract).
DETAIL_KEYS = {
    'aggregate-missing': ('aggregate_uuid', 'aggregate_name',
                          'provider_uuid'),
    'aggregate-stale': ('aggregate_uuid', 'aggregate_name',
                        'provider_uuid', 'provider_generation'),
    'provider-orphaned': ('provider_uuid', 'provider_name', 'allocations'),
    'provider-duplicate': ('hypervisor_hostname', 'provider_uuids',
                           'compute_node_uuids', 'service_host'),
    'provider-missing': ('compute_node_uuid', 'hypervisor_hostname'),
    'cpus-pinned-twice': ('node', 'cpus', 'instances'),
    'cpus-outside-dedicated-set': ('node', 'instance_uuid', 'cpus',
                                   'dedicated'),
    'pci-device-held': ('address', 'compute_node_uuid', 'status',
                        'instance_uuid', 'instance_state', 'compute_up'),
}

ENDED_MIGRATION_STATUSES = nova_constants.TERMINAL_MIGRATION_STATUSES


class TopologyError(ValueError):
    """A stored NUMA topology cannot be read."""


# -- The rules that mirror Nova's -------------------------------------------

@functools.lru_cache(maxsize=64)
def _version_loadable(name, version):
    try:
        return primitive.loadable(name, primitive.parse_version(version, ''))
    except primitive.PrimitiveError:
        return False


def _unwrap(document, name, what):
    """primitive.unwrap, its checks of the object version remembered."""
    try:
        if (document[primitive.NAME] == name
                and document[primitive.NAMESPACE] == 'nova'
                and _version_loadable(name, document[primitive.VERSION])):
            data = document[primitive.DATA]
            if type(data) is dict:
                return data
    except (KeyError, TypeError):
        pass  # not a primitive's envelope: unwrap says what is wrong
    return primitive.unwrap(document, name, what)


def _decoded(document, what='compute_nodes.numa_topology'):
    """``document`` decoded if it is JSON text, else as it is."""
    if isinstance(document, (str, bytes, bytearray)):
        return primitive.load_json(document, what)
    return document


def _cells(document, expected_name, what):
    document = _decoded(document, what)
    if document is None:
        return None
    data = _unwrap(document, expected_name, what)
    cells = data.get('cells')
    if not isinstance(cells, list):
        raise primitive.PrimitiveError('%s has no list of cells' % what)
    return cells


def _int_set(values, what):
    if not isinstance(values, list):
        raise primitive.PrimitiveError('%s is not a list' % what)
    return _integers(values, what)


def _integers(values, what):
    """A frozenset of ``values`` coerced as IntegerField does."""
    found = frozenset(values)
    # Stored pins are plain ints: one pass over their types in C is
    # enough; anything else takes the coercion, value by value.
    if _INT_ONLY.issuperset(map(type, found)):
        return found
    return frozenset(primitive.integer(v, what) for v in values)


def pinned_cpus(instance_topology, host_topology=None):
    """The pCPUs an instance holds, ``{host NUMA cell id: frozenset}``.

    ``instance_topology`` is ``instance_extra.numa_topology`` (an
    InstanceNUMATopology primitive or its JSON text; None: no topology,
    nothing pinned). As the resource tracker claims them: for each cell
    whose ``cpu_policy`` is dedicated or mixed, the values of
    ``cpu_pinning_raw`` and the ``cpuset_reserved`` (emulator threads);
    under the ``isolate`` thread policy, with their thread siblings
    where ``host_topology`` (the compute node's NUMATopology) is given.
    Cells pinning nothing are left out. Raises TopologyError.
    """
    try:
        siblings = _siblings(host_topology) if host_topology else {}
    except primitive.PrimitiveError as exc:
        raise TopologyError(str(exc))
    return _pinned(instance_topology, siblings)


def _pinned(instance_topology, siblings):
    """pinned_cpus with the host's siblings, ``{cell id: frozenset}``."""
    what = 'instance_extra.numa_topology'
    try:
        cells = _cells(instance_topology, 'InstanceNUMATopology', what)
        held = {}
        for index, cell in enumerate(cells or ()):
            try:
                cell_id, cpus = _cell_pins(cell, siblings)
            except primitive.PrimitiveError as exc:
                # Every message starts with the name it was given, here
                # relative to the cell: the cell is named only on error.
                raise primitive.PrimitiveError(
                    '%s.cells[%d]%s' % (what, index, exc))
            if cpus:
                held[cell_id] = held.get(cell_id, frozenset()) | cpus
        return held
    except primitive.PrimitiveError as exc:
        raise TopologyError(str(exc))


def _cell_pins(cell, siblings):
    """``(cell id, frozenset)``: the pCPUs one InstanceNUMACell holds."""
    data = _unwrap(cell, 'InstanceNUMACell', '')
    if data.get('cpu_policy') in _UNPINNED_POLICIES:
        return None, None
    cell_id = primitive.integer(data.get('id'), '.id')
    pins = data.get('cpu_pinning_raw') or {}
    if not isinstance(pins, dict):
        raise primitive.PrimitiveError('.cpu_pinning_raw is not a dict')
    cpus = _integers(pins.values(), '.cpu_pinning_raw')
    if data.get('cpuset_reserved'):
        cpus |= _int_set(data['cpuset_reserved'], '.cpuset_reserved')
    if data.get('cpu_thread_policy') == _ISOLATE:
        for group in siblings.get(cell_id, ()):
            if cpus & group:
                cpus |= group
    return cell_id, cpus


def dedicated_cpus(host_topology):
    """The host's dedicated pCPUs, ``{NUMA cell id: frozenset}``.

    ``host_topology`` is ``compute_nodes.numa_topology`` (a NUMATopology
    primitive or its JSON text): each cell's ``pcpuset``. None where the
    compute node reports no topology, or cells older than NUMACell 1.5
    (no ``pcpuset``): then nothing can be judged. Raises TopologyError.
    """
    what = 'compute_nodes.numa_topology'
    try:
        cells = _cells(host_topology, 'NUMATopology', what)
        if cells is None:
            return None
        found = {}
        for index, cell in enumerate(cells):
            where = '%s.cells[%d]' % (what, index)
            data = _unwrap(cell, 'NUMACell', where)
            if 'pcpuset' not in data:
                return None
            cell_id = primitive.integer(data.get('id'), where + '.id')
            found[cell_id] = _int_set(data['pcpuset'], where + '.pcpuset')
        return found
    except primitive.PrimitiveError as exc:
        raise TopologyError(str(exc))


def _siblings(host_topology):
    """``{cell id: [frozenset, ...]}`` of a host's thread siblings."""
    what = 'compute_nodes.numa_topology'
    found = {}
    for index, cell in enumerate(
            _cells(host_topology, 'NUMATopology', what) or ()):
        where = '%s.cells[%d]' % (what, index)
        data = _unwrap(cell, 'NUMACell', where)
        cell_id = primitive.integer(data.get('id'), where + '.id')
        found[cell_id] = [_int_set(group, where + '.siblings')
                          for group in data.get('siblings') or ()]
    return found


def is_sharing_provider(provider_id, parents, traits):
    """Whether a resource provider is, or hangs below, a sharing provider.

    ``parents`` maps a provider id to its parent's id (None for a root),
    ``traits`` a provider id to its trait names. A provider shares its
    resources with its aggregates when it has MISC_SHARES_VIA_AGGREGATE
    (Placement's rule); a provider below one is taken as part of it.
    """
    seen = set()
    while provider_id is not None and provider_id not in seen:
        seen.add(provider_id)
        if SHARING_TRAIT in traits.get(provider_id, ()):
            return True
        provider_id = parents.get(provider_id)
    return False


# -- Results ----------------------------------------------------------------

@dataclasses.dataclass
class HostResult:
    """What was found for one host, or for one provider with no host."""
    host: str
    cell_uuid: str
    provider_uuid: str = None
    status: str = MISMATCHED
    problems: list = dataclasses.field(default_factory=list)
    details: list = dataclasses.field(default_factory=list)
    remedy: list = dataclasses.field(default_factory=list)
    reason: str = None
    message: str = None
    not_checked: list = dataclasses.field(default_factory=list)

    def add(self, reason, remedy=(), **detail):
        """Add a detail of ``reason``; its remedy lines, once each."""
        if reason not in self.problems:
            self.problems.append(reason)
            self.problems.sort()
        self.details.append(dict(reason=reason, **detail))
        for line in remedy:
            if line not in self.remedy:
                self.remedy.append(line)

    def as_dict(self):
        result = {'host': self.host, 'cell_uuid': self.cell_uuid,
                  'provider_uuid': self.provider_uuid,
                  'status': self.status, 'problems': list(self.problems),
                  'details': list(self.details),
                  'remedy': list(self.remedy)}
        return audit_report.with_optional(result, self)


@dataclasses.dataclass
class HostRecord:
    """What the rules of one host need, as read.

    ``nodes`` are its live compute nodes (uuid, hypervisor_hostname,
    numa_topology, id); ``service`` its live nova-compute service or
    None; ``compute_up`` whether that service reports; ``aggregates``
    the Nova aggregates it is a member of (uuid, name, zone);
    ``providers`` the Placement providers by uuid (uuid, name,
    generation, aggregates: the uuids of its Placement aggregates);
    ``instances`` the live instances on the host (uuid, node, vm_state,
    task_state, numa_topology); ``migrations`` the live migrations from
    or to it that have not ended, or evacuations not cleaned up
    (status, migration_type); ``devices`` its held PCI devices
    (compute_node_id, address, status, instance_uuid); ``holders`` the
    instances those name, by uuid (deleted ones too; host, deleted,
    vm_state, task_state): a device held for one in flight is not judged.
    """
    host: str
    cell_uuid: str
    nodes: list
    service: dict = None
    compute_up: bool = False
    aggregates: list = dataclasses.field(default_factory=list)
    providers: dict = dataclasses.field(default_factory=dict)
    instances: list = dataclasses.field(default_factory=list)
    migrations: list = dataclasses.field(default_factory=list)
    devices: list = dataclasses.field(default_factory=list)
    holders: dict = dataclasses.field(default_factory=dict)


def skip_reason(record):
    """Why the host's pins and devices are not judged now, or None."""
    for instance in record.instances:
        if instance['task_state']:
            return 'task-in-progress'
        if instance['vm_state'] == 'building':
            return 'building'
        if instance['vm_state'] == 'resized':
            return 'resize-awaiting-confirm'
    if any(m['status'] not in ENDED_MIGRATION_STATUSES
           for m in record.migrations):
        return 'migration-in-progress'
    if any(m['migration_type'] == 'evacuation' and m['status'] == 'done'
           for m in record.migrations):
        return 'evacuation-not-cleaned'
    return None


def evaluate(record, nova_aggregates):
    """The HostResult of ``record``, or None if nothing is wrong.

    ``nova_aggregates`` maps every Nova aggregate's uuid to its row
    (uuid, name, zone): a Placement aggregate of another uuid is not
    Nova's and is never judged.
    """
    result = HostResult(record.host, record.cell_uuid)
    for node in record.nodes:
        provider = record.providers.get(node['uuid'])
        if provider is None:
            result.add('provider-missing', _missing_remedy(record.host),
                       compute_node_uuid=node['uuid'],
                       hypervisor_hostname=node['hypervisor_hostname'])
            continue
        _check_aggregates(result, record, provider, nova_aggregates)
    if record.nodes and record.service is None:
        result.add('provider-duplicate', _renamed_remedy(record.host),
                   hypervisor_hostname=record.nodes[0]['hypervisor_hostname'],
                   compute_node_uuids=sorted(n['uuid'] for n in record.nodes),
                   provider_uuids=sorted(n['uuid'] for n in record.nodes
                                         if n['uuid'] in record.providers),
                   service_host=record.host)
    skipped = skip_reason(record)
    if skipped is None:
        _check_pins(result, record)
        _check_devices(result, record)
    else:
        result.reason = skipped
        result.not_checked = ['cpus', 'pci']
    if result.status == ERROR or result.problems:
        # An error outranks the problems found beside it (exit code 2).
        if len(record.nodes) == 1:
            result.provider_uuid = record.nodes[0]['uuid']
        return result
    if skipped is not None:
        result.status = SKIPPED
        result.not_checked = []
        return result
    return None


def _check_aggregates(result, record, provider, nova_aggregates):
    member = {a['uuid'] for a in record.aggregates}
    held = set(provider['aggregates'])
    for aggregate in sorted(record.aggregates, key=lambda a: a['uuid']):
        if aggregate['uuid'] not in held:
            result.add('aggregate-missing',
                       ['nova-manage placement sync_aggregates --verbose'],
                       aggregate_uuid=aggregate['uuid'],
                       aggregate_name=aggregate['name'],
                       provider_uuid=provider['uuid'])
    stale = sorted(uuid for uuid in held
                   if uuid in nova_aggregates and uuid not in member)
    if not stale:
        return
    kept = sorted(held - set(stale))
    command = ('openstack --os-placement-api-version 1.19 resource provider '
               'aggregate set %s--generation %d %s' % (
                   ''.join('--aggregate %s ' % uuid for uuid in kept),
                   provider['generation'], provider['uuid']))
    for uuid in stale:
        result.add('aggregate-stale', [command], aggregate_uuid=uuid,
                   aggregate_name=nova_aggregates[uuid]['name'],
                   provider_uuid=provider['uuid'],
                   provider_generation=provider['generation'])


def _check_pins(result, record):
    nodes = {n['hypervisor_hostname']: n for n in record.nodes}
    # Each node's topology is decoded once, for its siblings and for its
    # dedicated pCPUs; one that cannot be is left as read, to be reported.
    topologies, siblings = {}, {}
    for name, node in nodes.items():
        topologies[name] = node.get('numa_topology')
        try:
            topologies[name] = _decoded(topologies[name])
            siblings[name] = _siblings(topologies[name])
        except primitive.PrimitiveError as exc:
            _error(result, 'compute node %s: %s' % (node['uuid'], exc))
    by_node = {}
    for instance in sorted(record.instances, key=lambda i: i['uuid']):
        if not instance['numa_topology']:
            continue
        try:
            pins = _pinned(instance['numa_topology'],
                           siblings.get(instance['node'], {}))
        except TopologyError as exc:
            _error(result, 'instance %s: %s' % (instance['uuid'], exc))
            continue
        if pins:
            by_node.setdefault(instance['node'], []).append(
                (instance['uuid'], pins))
    for node_name, pinned in sorted(by_node.items(),
                                    key=lambda item: str(item[0])):
        _check_overlaps(result, node_name, pinned)
        node = nodes.get(node_name)
        if node is not None:
            _check_dedicated(result, node, topologies[node_name], pinned)


def _check_overlaps(result, node_name, pinned):
    holders = {}
    for uuid, pins in pinned:
        for cpu in frozenset().union(*pins.values()):
            holders.setdefault(cpu, set()).add(uuid)
    shared = {cpu: uuids for cpu, uuids in holders.items() if len(uuids) > 1}
    # One detail per set of instances sharing pCPUs.
    groups = {}
    for cpu, uuids in shared.items():
        groups.setdefault(frozenset(uuids), set()).add(cpu)
    for uuids, cpus in sorted(groups.items(), key=lambda g: sorted(g[0])):
        result.add('cpus-pinned-twice',
                   ['# decide which of the instances keeps these pCPUs; '
                    'cold-migrate each of the others (openstack server '
                    'migrate UUID), which pins it anew on its destination'],
                   node=node_name, cpus=sorted(cpus),
                   instances=sorted(uuids))


def _check_dedicated(result, node, topology, pinned):
    try:
        dedicated = dedicated_cpus(topology)
    except TopologyError as exc:
        _error(result, 'compute node %s: %s' % (node['uuid'], exc))
        return
    if dedicated is None:
        return
    every = sorted(frozenset().union(*dedicated.values()))
    for uuid, pins in pinned:
        outside = set()
        for cell_id, cpus in pins.items():
            outside |= cpus - dedicated.get(cell_id, frozenset())
        if outside:
            result.add('cpus-outside-dedicated-set',
                       ['# decide: restore the host\'s [compute]/'
                        'cpu_dedicated_set, or cold-migrate the instance '
                        '(openstack server migrate %s) so that it is '
                        'pinned anew' % uuid],
                       node=node['hypervisor_hostname'], instance_uuid=uuid,
                       cpus=sorted(outside), dedicated=every)


def _check_devices(result, record):
    nodes = {n['id']: n for n in record.nodes}
    for device in sorted(record.devices,
                         key=lambda d: (d['compute_node_id'],
                                        d['address'])):
        if device['status'] not in HELD_STATUSES:
            continue
        state = _holder_state(record, device['instance_uuid'])
        if state is None:
            continue
        node = nodes.get(device['compute_node_id'])
        if record.compute_up:
            remedy = ['# transient: nova-compute on %s is up and its '
                      'periodic update frees the device; run the audit '
                      'again later' % record.host]
        else:
            remedy = ['# start nova-compute on %s: its periodic update '
                      'frees devices held for instances it does not run; '
                      'if the host is gone for good, delete its compute '
                      'service (openstack compute service delete)'
                      % record.host]
        result.add('pci-device-held', remedy, address=device['address'],
                   compute_node_uuid=node and node['uuid'],
                   status=device['status'],
                   instance_uuid=device['instance_uuid'],
                   instance_state=state, compute_up=record.compute_up)


def _holder_state(record, instance_uuid):
    """deleted, missing or elsewhere; None if it legitimately holds it."""
    if not instance_uuid:
        return None
    holder = record.holders.get(instance_uuid)
    if holder is None:
        return 'missing'
    if holder['deleted']:
        return 'deleted'
    if holder.get('task_state') or holder.get('vm_state') == 'building':
        return None  # in flight: being built or moved here, or away
    if holder['host'] != record.host:
        return 'elsewhere'
    return None


def _error(result, message):
    result.status = ERROR
    result.reason = 'numa-topology-unparsable'
    result.message = (message if not result.message
                      else '%s; %s' % (result.message, message))


def _missing_remedy(host):
    return ['# restart nova-compute on %s: its resource tracker creates the '
            'provider (a provider of the same name with another uuid '
            'blocks it: see provider-duplicate)' % host]


def _renamed_remedy(host):
    return ['# decide: no live nova-compute service has host %s (a renamed '
            'host, or edited rows); the compute node and its provider hold '
            'the servers of the old name until they are moved' % host]


def duplicate_nodes(result, hypervisor_hostname, nodes):
    """Report ``nodes``, live compute nodes of one hypervisor, on ``result``.

    ``nodes`` are ``(cell uuid, host, compute node uuid)``.
    """
    result.add('provider-duplicate',
               ['# decide which compute node of %s is live; the other '
                'service\'s host must be deleted (openstack compute '
                'service delete), which removes its compute node'
                % hypervisor_hostname],
               hypervisor_hostname=hypervisor_hostname,
               compute_node_uuids=sorted(n[2] for n in nodes),
               service_host=result.host)


def duplicate_provider(result, node, provider):
    """Report a provider named like ``node``'s hypervisor, another uuid."""
    result.add('provider-duplicate',
               ['# provider %s holds the name of hypervisor %s: if it is '
                'not a live compute node\'s, delete its allocations and it '
                '(see provider-orphaned) so that nova-compute can create '
                'the provider of compute node %s'
                % (provider['uuid'], node['hypervisor_hostname'],
                   node['uuid'])],
               hypervisor_hostname=node['hypervisor_hostname'],
               provider_uuids=sorted([provider['uuid'], node['uuid']]),
               compute_node_uuids=[node['uuid']], service_host=result.host)


def orphan_result(provider, descendants, allocations, kinds):
    """The result of a root provider no live compute node backs.

    ``provider`` has uuid, name; ``descendants`` are the uuids of the
    providers below it, deepest first; ``allocations`` ``{consumer:
    {class: amount}}`` on it and below it; ``kinds`` maps a consumer to
    instance or migration (others are unknown).
    """
    result = HostResult(None, None, provider_uuid=provider['uuid'])
    held = [{'consumer_uuid': consumer,
             'kind': kinds.get(consumer, 'unknown'),
             'resources': dict(sorted(resources.items()))}
            for consumer, resources in sorted(allocations.items())]
    remedy = []
    instances = [h['consumer_uuid'] for h in held if h['kind'] == 'instance']
    if instances:
        remedy.append('# decide: instances %s hold resources here; find '
                      'where each runs (nova-heal allocations --instance '
                      'UUID) before any allocation is deleted'
                      % ', '.join(instances))
    if len(instances) < len(held):
        remedy.append('nova-manage placement audit --resource_provider %s '
                      '--verbose --delete' % provider['uuid'])
    deletes = ['openstack resource provider delete %s' % uuid
               for uuid in list(descendants) + [provider['uuid']]]
    if held:
        remedy.append('# once it and the providers below it hold nothing:')
    remedy += deletes
    result.add('provider-orphaned', remedy, provider_uuid=provider['uuid'],
               provider_name=provider['name'], allocations=held)
    return result


@dataclasses.dataclass
class HostReport(audit_report.AuditReport):
    """What a run of ``hosts`` found, in walk order."""
    PROBLEMS: typing.ClassVar[tuple] = tuple(HOST_REASONS[MISMATCHED])
    hosts_checked: int = 0
    providers_checked: int = 0
    not_checked: list = dataclasses.field(default_factory=list)

    def summary(self):
        return {'hosts_checked': self.hosts_checked,
                'providers_checked': self.providers_checked,
                'mismatched': self.count(MISMATCHED),
                'skipped': self.count(SKIPPED),
                'errors': self.count(ERROR) + len(self.cell_errors),
                'problems': self.problem_counts()}
