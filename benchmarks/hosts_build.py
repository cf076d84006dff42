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


"""Build (or reuse) the deployment of the ``hosts`` benchmark.

``healreq_bench_hosts_<N>_api``, ``_cell0``, ``_cell1``, ``_cell2`` and
``_placement``, provisioned as build.py provisions its own: ``--hosts``
compute hosts (half in each cell), each with a nova-compute service, a
compute node reporting two NUMA cells of 16 dedicated pCPUs, four PCI
devices and a resource provider named after its hypervisor, in one of
three zone aggregates (in Nova and in Placement); N instances spread
evenly over the hosts, half of them pinned to two pCPUs of their own.
A few problems of each class are built, at positions fixed by the host
number, so that the expected report is known without reading it back
(``PROBLEMS``).

Run alone: ``python benchmarks/hosts_build.py --instances 20000``.
"""

import argparse
import collections
import datetime
import json
import sys
import time
import uuid as uuidlib

import sqlalchemy as sa

import build
from healreq.db import tables
from healreq import nova_constants
from healreq.testing import deployment as dep

FORMAT = 1
META_TABLE = 'healreq_bench_hosts_build'
ZONES = ('az1', 'az2', 'az3')
PCPUS_PER_CELL = 16
DEVICES = 4
_NAMESPACE = uuidlib.UUID('2b0f7c1e-94d3-4a61-8e57-0c3d9a6b1f24')
# One host in EVERY of each kind has the problem (from host OFFSET on).
EVERY = 100
PROBLEMS = {
    # kind: offset of the first host with it
    'aggregate-missing': 1,
    'aggregate-stale': 2,
    'cpus-pinned-twice': 3,
    'pci-device-held': 4,
}
ORPHANS = 10


def _uuid(*parts):
    return str(uuidlib.uuid5(_NAMESPACE, '/'.join(str(p) for p in parts)))


def database_names(instances, hosts):
    prefix = 'healreq_bench_hosts_%d_%d' % (instances, hosts)
    return {role: '%s_%s' % (prefix, role)
            for role in ('api', 'cell0', 'cell1', 'cell2', 'placement')}


def host_name(number):
    return 'compute-%04d' % number


def problem_of(number):
    """The problem built on host ``number``, or None."""
    for kind, offset in PROBLEMS.items():
        if number % EVERY == offset:
            return kind
    return None


def expected(hosts):
    """``{reason: count}`` of the report of a whole run."""
    counts = collections.Counter(problem_of(n) for n in range(hosts))
    counts.pop(None, None)
    counts['provider-orphaned'] = ORPHANS
    return dict(counts)


_TOPOLOGY = dep.host_topology({0: range(PCPUS_PER_CELL),
                               1: range(PCPUS_PER_CELL, 2 * PCPUS_PER_CELL)})


def _pinned(uuid, index, problem):
    """The topology of the host's pinned instance ``index``: 2 pCPUs.

    Its own two, 2*index and the next; on a host with cpus-pinned-twice
    the second instance takes pCPU 1, which the first holds.
    """
    first = 2 * index
    if problem == 'cpus-pinned-twice' and index == 1:
        first = 1
    pins = {}
    for vcpu, pcpu in enumerate((first, first + 1)):
        pins.setdefault(pcpu // PCPUS_PER_CELL, {})[vcpu] = pcpu
    return dep.pinned_topology(uuid, pins)


def _cell_rows(cell_index, numbers, per_host, now):
    rows = collections.defaultdict(list)
    for number in numbers:
        host = host_name(number)
        node = host + '.example.org'
        node_id = number + 1
        rows['services'].append(dict(
            host=host, binary='nova-compute', topic='compute',
            report_count=1, version=74, forced_down=False, last_seen_up=now,
            deleted=0, created_at=build.LONG_AGO))
        rows['compute_nodes'].append(dict(
            id=node_id, uuid=_uuid('node', number), host=host,
            hypervisor_hostname=node, hypervisor_type='QEMU',
            numa_topology=_TOPOLOGY, deleted=0, created_at=build.LONG_AGO))
        uuids = [_uuid('instance', number, slot) for slot in range(per_host)]
        for slot, uuid in enumerate(uuids):
            topology = None
            if slot % 2 == 0:
                topology = _pinned(uuid, slot // 2, problem_of(number))
            rows['instances'].append(dict(
                uuid=uuid, host=host, node=node, vm_state='active',
                task_state=None, deleted=0, user_id='u', project_id='p',
                created_at=build.LONG_AGO))
            rows['instance_extra'].append(dict(
                instance_uuid=uuid, numa_topology=topology, deleted=0,
                created_at=build.LONG_AGO))
        for device in range(DEVICES):
            holder = uuids[device] if device < 2 else None
            if problem_of(number) == 'pci-device-held' and device == 3:
                holder = _uuid('gone', number)
            rows['pci_devices'].append(dict(
                compute_node_id=node_id, address='0000:81:00.%d' % device,
                vendor_id='8086', product_id='154c', dev_type='type-VF',
                label='label_8086_154c', deleted=0,
                status='allocated' if holder else 'available',
                instance_uuid=holder, created_at=build.LONG_AGO))
    return rows


def _api_rows(hosts):
    rows = collections.defaultdict(list)
    for index, zone in enumerate(ZONES):
        rows['aggregates'].append(dict(
            id=index + 1, uuid=_uuid('aggregate', zone), name='agg-' + zone,
            created_at=build.LONG_AGO))
        rows['aggregate_metadata'].append(dict(
            aggregate_id=index + 1, key='availability_zone', value=zone,
            created_at=build.LONG_AGO))
    for number in range(hosts):
        if problem_of(number) == 'aggregate-stale':
            continue
        rows['aggregate_hosts'].append(dict(
            aggregate_id=1 + number % len(ZONES), host=host_name(number),
            created_at=build.LONG_AGO))
    return rows


def _placement_rows(hosts):
    rows = collections.defaultdict(list)
    for index, zone in enumerate(ZONES):
        rows['placement_aggregates'].append(dict(
            id=index + 1, uuid=_uuid('aggregate', zone),
            created_at=build.LONG_AGO))
    for number in range(hosts):
        rows['resource_providers'].append(dict(
            id=number + 1, uuid=_uuid('node', number),
            name=host_name(number) + '.example.org', generation=3,
            root_provider_id=number + 1, created_at=build.LONG_AGO))
        if problem_of(number) != 'aggregate-missing':
            rows['resource_provider_aggregates'].append(dict(
                resource_provider_id=number + 1,
                aggregate_id=1 + number % len(ZONES),
                created_at=build.LONG_AGO))
    for orphan in range(ORPHANS):
        provider_id = hosts + orphan + 1
        rows['resource_providers'].append(dict(
            id=provider_id, uuid=_uuid('orphan', orphan),
            name='gone-%d' % orphan, generation=1,
            root_provider_id=provider_id, created_at=build.LONG_AGO))
        rows['allocations'].append(dict(
            resource_provider_id=provider_id,
            consumer_id=_uuid('consumer', orphan), resource_class_id=0,
            used=2, created_at=build.LONG_AGO))
    return rows


def _write(engine, metadata, rows):
    with engine.connect() as conn:
        build._fast_session(conn)
        for table in metadata.sorted_tables:
            build._insert(conn, table, rows.get(table.name, []))
        conn.commit()


def ensure(instances, hosts, rebuild=False, log=print):
    """Build unless built; ``{'urls', 'names', 'reused'}``."""
    backend = build._backend()
    names = database_names(instances, hosts)
    urls = {role: build._url(backend, name) for role, name in names.items()}
    api = sa.create_engine(urls['api'])
    try:
        meta = {} if rebuild else build._read_meta(api, META_TABLE)
    finally:
        api.dispose()
    if meta.get('complete') == 'yes' and meta.get('format') == str(FORMAT):
        log('Reusing the hosts deployment %s.' % names['api'])
        return dict(urls=urls, names=names, reused=True)
    started = time.monotonic()
    for name in names.values():
        backend.drop_named_database(name, conditional=True)
        backend.create_named_database(name)
    engines = {role: sa.create_engine(url) for role, url in urls.items()}
    try:
        for role, metadata in (('api', tables.api_metadata),
                               ('cell0', tables.cell_metadata),
                               ('cell1', tables.cell_metadata),
                               ('cell2', tables.cell_metadata),
                               ('placement', tables.placement_metadata)):
            metadata.create_all(engines[role])
        with engines['placement'].begin() as conn:
            conn.exec_driver_sql(
                "SET SESSION sql_mode='NO_AUTO_VALUE_ON_ZERO'")
            conn.execute(tables.resource_classes.insert(), [
                dict(id=0, name='VCPU', created_at=build.LONG_AGO)])
        cell_rows = [dict(uuid=nova_constants.CELL0_UUID, name='cell0',
                          database_connection=urls['cell0'])]
        now = datetime.datetime.utcnow()
        per_host = instances // hosts
        for index, role in enumerate(('cell1', 'cell2')):
            numbers = range(index, hosts, 2)
            _write(engines[role], tables.cell_metadata,
                   _cell_rows(index, numbers, per_host, now))
            cell_rows.append(dict(uuid=_uuid('cell', role), name=role,
                                  database_connection=urls[role]))
            log('  %s: %d hosts' % (role, len(numbers)))
        api_rows = _api_rows(hosts)
        api_rows['cell_mappings'] = [
            dict(created_at=build.LONG_AGO, transport_url='rabbit://mq//',
                 disabled=False, **row) for row in cell_rows]
        _write(engines['api'], tables.api_metadata, api_rows)
        _write(engines['placement'], tables.placement_metadata,
               _placement_rows(hosts))
        for role in ('cell1', 'cell2', 'placement', 'api'):
            build._analyze(engines[role], {
                'api': tables.api_metadata,
                'placement': tables.placement_metadata}.get(
                role, tables.cell_metadata))
        meta_table = build._meta_table(sa.MetaData(), META_TABLE)
        meta_table.create(engines['api'], checkfirst=True)
        with engines['api'].begin() as conn:
            conn.execute(meta_table.insert(), [
                dict(name='format', value=str(FORMAT)),
                dict(name='problems', value=json.dumps(expected(hosts))),
                dict(name='complete', value='yes')])
    finally:
        for engine in engines.values():
            engine.dispose()
    elapsed = time.monotonic() - started
    log('Built the hosts deployment in %.0f s.' % elapsed)
    return dict(urls=urls, names=names, reused=False)


def write_configs(directory, deployment):
    """nova.conf and placement.conf of the deployment; their paths."""
    nova = '%s/nova.conf' % directory
    placement = '%s/placement.conf' % directory
    with open(nova, 'w') as handle:
        handle.write('[api_database]\nconnection = %s\n'
                     '\n[database]\nconnection = %s\n'
                     '\n[healreq]\nstate_path = %s\n'
                     % (deployment['urls']['api'],
                        deployment['urls']['cell1'], directory))
    with open(placement, 'w') as handle:
        handle.write('[placement_database]\nconnection = %s\n'
                     % deployment['urls']['placement'])
    return nova, placement


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--instances', type=int, default=20000)
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--rebuild', action='store_true')
    args = parser.parse_args(argv)
    ensure(args.instances, args.hosts, args.rebuild)
    return 0


if __name__ == '__main__':
    sys.exit(main())
