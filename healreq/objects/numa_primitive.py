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


"""Stored ``InstanceNUMATopology`` primitives, read and written as Nova does.

Reading applies the cpuset migration Nova runs whenever it loads a
topology and drops what is fitted to a host (host node ids, pinning,
reserved CPUs), so a request topology and a stored one compare equal when
Nova would schedule them alike. Pre-Liberty unversioned topologies are
converted as Nova converts them. Writing applies Nova's backports.
"""

from healreq.objects import notation
from healreq.objects import numa
from healreq.objects import primitive
from healreq import releases

PrimitiveError = primitive.PrimitiveError

TOPOLOGY_NAME = 'InstanceNUMATopology'
CELL_NAME = 'InstanceNUMACell'

# Fields of InstanceNUMACell in Nova's declaration (and output) order,
# with the version that added each.
_CELL_FIELDS = (('id', (1, 0)), ('cpuset', (1, 0)), ('pcpuset', (1, 5)),
                ('cpuset_reserved', (1, 4)), ('memory', (1, 0)),
                ('pagesize', (1, 1)), ('cpu_pinning_raw', (1, 2)),
                ('cpu_policy', (1, 3)), ('cpu_thread_policy', (1, 3)))


def _int(value, what, nullable=False):
    if value is None and nullable:
        return None
    return primitive.integer(value, what)


def _int_set(value, what, nullable=False):
    if value is None and nullable:
        return None
    if not isinstance(value, list):
        raise PrimitiveError('%s is not a list of integers' % what)
    return frozenset(_int(item, what) for item in value)


def _enum(value, allowed, what):
    if value is not None and value not in allowed:
        raise PrimitiveError('%s has invalid value %s'
                             % (what, primitive.short(value)))
    return value


def _check_host_fields(data, what):
    """Validate the host-fitted values (Nova must load them), not kept."""
    _int_set(data.get('cpuset_reserved'), what + '.cpuset_reserved', True)
    pinning = data.get('cpu_pinning_raw')
    if pinning is not None:
        if not isinstance(pinning, dict):
            raise PrimitiveError('%s.cpu_pinning_raw is not a dict' % what)
        for value in pinning.values():
            _int(value, what + '.cpu_pinning_raw')
    if data.get('cpu_topology') is not None:
        primitive.unwrap(data['cpu_topology'], 'VirtCPUTopology',
                         what + '.cpu_topology')


def _migrate_cpuset(document, policy, cpuset, pcpuset, has_uuid, what,
                    rule):
    """``(cpuset, pcpuset)`` after Nova's legacy cpuset migration.

    InstanceNUMATopology._migrate_legacy_dedicated_instance_cpuset, which
    Nova runs on every load of a spec or instance topology, by ``rule``
    (see healreq.releases).
    """
    if rule == releases.VICTORIA:
        # Every dedicated cell with CPUs in cpuset, whatever its version.
        if cpuset and policy == numa.DEDICATED:
            return frozenset(), cpuset
        return cpuset, pcpuset
    version = primitive.parse_version(document[primitive.VERSION], what)
    if version < (1, 4) or (version < (1, 6) and policy == numa.MIXED):
        # Left alone, after a warning naming the topology's instance_uuid:
        # without one (a request topology never has one) Nova's load fails.
        if not has_uuid:
            raise numa.UnloadableTopology(
                '%s (InstanceNUMACell %s%s) in a topology without '
                'instance_uuid: Nova 34 fails to load it'
                % (what, document[primitive.VERSION],
                   ', mixed' if policy == numa.MIXED else ''))
    elif version >= (1, 5) and policy == numa.DEDICATED and (
            cpuset or not pcpuset):
        # Inconsistent, left alone. With cpuset empty Nova reads pcpuset
        # here, and fails if the cell has none.
        if not cpuset and pcpuset is None:
            raise numa.UnloadableTopology(
                '%s is dedicated with neither cpuset nor pcpuset: Nova 34 '
                'fails to load it' % what)
    elif version < (1, 6):
        if policy == numa.DEDICATED:
            if not pcpuset:
                cpuset, pcpuset = frozenset(), cpuset
        else:
            pcpuset = frozenset()
    return cpuset, pcpuset


def _stored_cell(document, index, has_uuid, what, rule):
    data = primitive.unwrap(document, CELL_NAME, what)
    for field in ('id', 'cpuset', 'memory'):
        if field not in data:
            raise PrimitiveError('%s has no %s' % (what, field))
    _int(data['id'], what + '.id')
    cpuset = _int_set(data['cpuset'], what + '.cpuset')
    pcpuset = (_int_set(data['pcpuset'], what + '.pcpuset')
               if 'pcpuset' in data else None)
    memory = _int(data['memory'], what + '.memory')
    pagesize = _int(data.get('pagesize'), what + '.pagesize', True)
    policy = _enum(data.get('cpu_policy'), numa.CPU_POLICIES,
                   what + '.cpu_policy')
    thread_policy = _enum(data.get('cpu_thread_policy'), numa.THREAD_POLICIES,
                          what + '.cpu_thread_policy')
    _check_host_fields(data, what)
    cpuset, pcpuset = _migrate_cpuset(document, policy, cpuset, pcpuset,
                                      has_uuid, what, rule)
    return numa.Cell(id=index, cpuset=cpuset, pcpuset=pcpuset, memory=memory,
                     pagesize=pagesize, cpu_policy=policy,
                     cpu_thread_policy=thread_policy)


def _legacy_topology(document, what):
    """A pre-Liberty unversioned topology, converted as Nova does."""
    cells = []
    for index, cell in enumerate(document['cells']):
        where = '%s.cells[%d]' % (what, index)
        if not isinstance(cell, dict):
            raise PrimitiveError('%s is not a dict' % where)
        _int(cell.get('id'), where + '.id')
        cpus = cell.get('cpus', '')
        if not isinstance(cpus, str):
            raise PrimitiveError('%s.cpus is not a string' % where)
        try:
            cpuset = frozenset(notation.parse_cpu_list(cpus))
        except notation.NotationError as exc:
            raise PrimitiveError('%s.cpus: %s' % (where, exc))
        memory = cell.get('mem', {})
        if not isinstance(memory, dict):
            raise PrimitiveError('%s.mem is not a dict' % where)
        cells.append(numa.Cell(
            id=index, cpuset=cpuset, pcpuset=frozenset(),
            memory=_int(memory.get('total', 0), where + '.mem.total'),
            pagesize=_int(cell.get('pagesize'), where + '.pagesize', True)))
    return numa.Topology(cells=tuple(cells), emulator_threads_policy=None)


def from_primitive(document, what, release=releases.LATEST):
    """Read a stored InstanceNUMATopology as ``release`` loads it.

    ``document`` is a primitive (or its JSON text); None or JSON null
    gives None. Applies Nova's legacy cpuset migration, reads pre-Liberty
    unversioned topologies, and returns a request form: cells in guest
    order with ``id`` the guest node index, host pinning dropped. Raises
    PrimitiveError for anything that release could not load, and
    AmbiguousTopology for a legacy topology its point releases load
    differently.
    """
    if isinstance(document, (str, bytes, bytearray)):
        document = primitive.load_json(document, what)
    outcomes = []
    for rule in release.legacy_cell_rules:
        try:
            outcomes.append((_load(document, what, rule), None))
        except numa.UnloadableTopology as exc:
            outcomes.append((None, exc))
    topology, error = outcomes[0]
    if len({(loaded, failed is None) for loaded, failed in outcomes}) > 1:
        raise numa.AmbiguousTopology(
            '%s holds legacy NUMA cells that the point releases of %s '
            'load differently' % (what, release.series))
    if error is not None:
        raise error
    return topology


def _load(document, what, rule):
    if document is None:
        return None
    if (isinstance(document, dict) and primitive.NAME not in document
            and isinstance(document.get('cells'), list)):
        return _legacy_topology(document, what)
    data = primitive.unwrap(document, TOPOLOGY_NAME, what)
    cells = data.get('cells')
    if not isinstance(cells, list):
        raise PrimitiveError('%s has no cells list' % what)
    uuid = data.get('instance_uuid')
    if 'instance_uuid' in data and not isinstance(uuid, str):
        raise PrimitiveError('%s.instance_uuid is not a string' % what)
    if data.get('id') is not None:
        _int(data['id'], what + '.id')
    policy = _enum(data.get('emulator_threads_policy'),
                   numa.EMULATOR_THREADS_POLICIES,
                   what + '.emulator_threads_policy')
    return numa.Topology(
        cells=tuple(_stored_cell(cell, index, 'instance_uuid' in data,
                                 '%s.cells[%d]' % (what, index), rule)
                    for index, cell in enumerate(cells)),
        emulator_threads_policy=policy)


def _cell_primitive(cell, version, target):
    data = {'id': cell.id, 'cpuset': sorted(cell.cpuset),
            'pcpuset': None if cell.pcpuset is None else sorted(cell.pcpuset),
            'cpuset_reserved': None, 'memory': cell.memory,
            'pagesize': cell.pagesize, 'cpu_pinning_raw': None,
            'cpu_policy': cell.cpu_policy,
            'cpu_thread_policy': cell.cpu_thread_policy}
    if cell.pcpuset is None:
        del data['pcpuset']
    # InstanceNUMACell.obj_make_compatible.
    if target < (1, 6) and cell.cpu_policy == numa.MIXED:
        raise numa.ConstraintError(
            'IncompatibleObjectVersion',
            'InstanceNUMACell %s cannot express the mixed CPU policy'
            % version)
    if (target < (1, 5) and cell.cpu_policy == numa.DEDICATED
            and 'pcpuset' in data):
        # Before 1.5 a dedicated cell listed its pinned vCPUs in cpuset.
        data['cpuset'] = data['pcpuset']
    # Also drop what Nova's backport leaves in (pagesize below 1.1,
    # cpu_pinning_raw below 1.2): a version must not carry later fields.
    data = {field: data[field] for field, added in _CELL_FIELDS
            if field in data and target >= added}
    return primitive.wrap(CELL_NAME, version, data)


def to_primitive(topology, topology_version, cell_version):
    """The InstanceNUMATopology primitive of a request topology.

    Written as Nova's ``obj_to_primitive`` writes a freshly computed
    constraint at the given object versions (no change list), with
    Nova's backports applied. Raises numa.ConstraintError
    ('IncompatibleObjectVersion') when a cell version cannot express the
    topology (mixed policy below 1.6), PrimitiveError for a version
    Nova 34 does not know.
    """
    topology_target = primitive.target_version(TOPOLOGY_NAME,
                                               topology_version)
    cell_target = primitive.target_version(CELL_NAME, cell_version)
    data = {'cells': [_cell_primitive(cell, cell_version, cell_target)
                      for cell in topology.cells]}
    if topology_target >= (1, 3):
        data['emulator_threads_policy'] = topology.emulator_threads_policy
    return primitive.wrap(TOPOLOGY_NAME, topology_version, data)
