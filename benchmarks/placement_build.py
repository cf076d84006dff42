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


"""Build a Placement database beside the benchmark's deployment.

``healreq_bench_<N>_placement`` holds the tables ``nova-heal allocations``
reads (``healreq.db.tables.placement_metadata``); each cell gets a
compute node per compute host of the build (``build.HOSTS``), whose uuid
is its resource provider's. Every instance with a host holds what the
scheduler allocated for its current flavor on its compute node's
provider, except a few, chosen by their uuid:

* ``WRONG_FLAVOR_SHARE`` hold another amount of memory (wrong-flavor);
* ``MISSING_SHARE`` hold nothing (missing);
* ``LEFTOVER_SHARE`` of the instances with an ended migration keep its
  consumer's allocation on the migration's source (leftover-migration).

The instances and their migrations are read back from the cells, so
that the allocations follow the rows the tool will read. A finished
build is recorded in the Placement database with the cells' build time
and reused while the cells are the same build.
"""

import argparse
import collections
import random
import sys
import time
import uuid as uuidlib

import sqlalchemy as sa

import build
from healreq.db import placement_queries
from healreq.db import tables

FORMAT = 1
META_TABLE = 'healreq_bench_placement'
WRONG_FLAVOR_SHARE = 0.02
MISSING_SHARE = 0.01
LEFTOVER_SHARE = 0.03
ENDED = ('confirmed', 'completed')
_NAMESPACE = uuidlib.UUID('6f1c2a58-0d4e-4b7a-9c35-8e2f1a0b7d64')
_BY_ID = {flavor[build.DATA]['id']: flavor[build.DATA]
          for flavor in build.FLAVORS.values()}


def database_name(instances):
    return 'healreq_bench_%d_placement' % instances


def provider_uuid(cell, host):
    """The uuid of ``host``'s compute node in ``cell`` (and its provider)."""
    return str(uuidlib.uuid5(_NAMESPACE, '%s/%s' % (cell, host)))


def expected(instance, volume_backed):
    """{class: amount} the scheduler allocates for the instance's flavor."""
    flavor = _BY_ID[instance['instance_type_id']]
    pinned = flavor['extra_specs'].get('hw:cpu_policy') == 'dedicated'
    disk = instance['ephemeral_gb'] + (flavor['swap'] + 1023) // 1024
    if not volume_backed:
        disk += instance['root_gb']
    found = {'PCPU' if pinned else 'VCPU': instance['vcpus'],
             'MEMORY_MB': instance['memory_mb'], 'DISK_GB': disk}
    return {name: amount for name, amount in found.items() if amount}


def problem_of(instance_uuid, ended_migrations):
    """The problem the build gives the instance, or None."""
    draw = random.Random(instance_uuid).random()
    if draw < WRONG_FLAVOR_SHARE:
        return 'wrong-flavor'
    if draw < WRONG_FLAVOR_SHARE + MISSING_SHARE:
        return 'missing'
    if ended_migrations and draw < (WRONG_FLAVOR_SHARE + MISSING_SHARE
                                    + LEFTOVER_SHARE):
        return 'leftover-migration'
    return None


def _cell_rows(engine):
    """Live instances with a host, volume roots and ended migrations."""
    i, b, m = (tables.instances, tables.block_device_mapping,
               tables.migrations)
    with engine.connect() as conn:
        instances = conn.execute(sa.select(
            i.c.uuid, i.c.host, i.c.node, i.c.instance_type_id, i.c.vcpus,
            i.c.memory_mb, i.c.root_gb, i.c.ephemeral_gb).where(
            i.c.deleted == 0, i.c.host.isnot(None)).order_by(i.c.id)).all()
        volumes = {row[0] for row in conn.execute(sa.select(
            b.c.instance_uuid).where(b.c.deleted == 0, b.c.boot_index == 0,
                                     b.c.destination_type == 'volume'))}
        migrations = collections.defaultdict(list)
        for row in conn.execute(sa.select(
                m.c.instance_uuid, m.c.uuid, m.c.source_compute).where(
                m.c.deleted == 0, m.c.status.in_(ENDED)).order_by(m.c.id)):
            migrations[row.instance_uuid].append(row)
    return [row._asdict() for row in instances], volumes, migrations


def _compute_nodes(engine, cell):
    rows = [dict(uuid=provider_uuid(cell, 'compute-%03d' % number),
                 host='compute-%03d' % number,
                 hypervisor_hostname='compute-%03d.example.org' % number,
                 hypervisor_type='QEMU', deleted=0, created_at=build.LONG_AGO)
            for number in range(build.HOSTS)]
    with engine.begin() as conn:
        conn.execute(tables.compute_nodes.delete())
        conn.execute(tables.compute_nodes.insert(), rows)
    return [row['uuid'] for row in rows]


class _Rows(object):
    """The Placement rows being built."""

    def __init__(self):
        self.providers = {}
        self.consumers = []
        self.allocations = []
        self.classes = {name: number for number, name in enumerate(
            placement_queries.STANDARD_RESOURCE_CLASSES)}

    def provider(self, uuid):
        if uuid not in self.providers:
            self.providers[uuid] = len(self.providers) + 1
        return self.providers[uuid]

    def allocate(self, consumer, provider, resources):
        self.consumers.append(dict(
            uuid=consumer, project_id=1, user_id=1, generation=1,
            created_at=build.LONG_AGO))
        provider_id = self.provider(provider)
        for name, amount in sorted(resources.items()):
            self.allocations.append(dict(
                resource_provider_id=provider_id, consumer_id=consumer,
                resource_class_id=self.classes[name], used=amount,
                created_at=build.LONG_AGO))


def _allocate_cell(rows, cell, engine, problems):
    instances, volumes, migrations = _cell_rows(engine)
    for instance in instances:
        uuid = instance['uuid']
        mine = migrations.get(uuid, [])
        problem = problem_of(uuid, mine)
        problems[problem] += 1
        if problem == 'missing':
            continue
        resources = expected(instance, uuid in volumes)
        if problem == 'wrong-flavor':
            resources['MEMORY_MB'] *= 2
        rows.allocate(uuid, provider_uuid(cell, instance['host']), resources)
        if problem == 'leftover-migration':
            migration = mine[0]
            rows.allocate(migration.uuid,
                          provider_uuid(cell, migration.source_compute),
                          resources)
    return len(instances)


def _write(engine, rows, providers):
    with engine.begin() as conn:
        conn.exec_driver_sql("SET SESSION sql_mode='NO_AUTO_VALUE_ON_ZERO'")
        build._fast_session(conn)
        conn.execute(tables.resource_classes.insert(), [
            dict(id=number, name=name, created_at=build.LONG_AGO)
            for name, number in rows.classes.items()])
        conn.execute(tables.resource_providers.insert(), [
            dict(id=rows.provider(uuid), uuid=uuid, name=uuid, generation=1,
                 root_provider_id=rows.provider(uuid),
                 created_at=build.LONG_AGO) for uuid in providers])
        build._insert(conn, tables.consumers, rows.consumers)
        build._insert(conn, tables.allocations, rows.allocations)


def ensure(deployment, instances, rebuild=False, log=print):
    """Build the Placement database unless it exists for these cells.

    Returns its URL, the instances with a host and the problems built
    by kind (``None``: consistent).
    """
    backend = build._backend()
    name = database_name(instances)
    url = build._url(backend, name)
    cells_built = deployment['meta']['built_at']
    meta = {}
    if not rebuild:
        engine = sa.create_engine(url)
        try:
            meta = build._read_meta(engine, META_TABLE)
        finally:
            engine.dispose()
    if (meta.get('format') == str(FORMAT)
            and meta.get('cells_built_at') == cells_built):
        return dict(url=url, hosted=int(meta['hosted']),
                    problems=_problems(meta['problems']))
    started = time.monotonic()
    log('Building Placement database %s ...' % name)
    backend.drop_named_database(name, conditional=True)
    backend.create_named_database(name)
    engine = sa.create_engine(url)
    rows = _Rows()
    problems = collections.Counter()
    hosted = 0
    try:
        tables.placement_metadata.create_all(engine)
        providers = []
        for cell in build.CELL_NAMES:
            cell_engine = sa.create_engine(deployment['urls'][cell])
            try:
                providers += _compute_nodes(cell_engine, cell)
                hosted += _allocate_cell(rows, cell, cell_engine, problems)
            finally:
                cell_engine.dispose()
        _write(engine, rows, providers)
        build._analyze(engine, tables.placement_metadata)
        meta_table = build._meta_table(sa.MetaData(), META_TABLE)
        meta_table.create(engine)
        meta = {'format': str(FORMAT), 'cells_built_at': cells_built,
                'hosted': str(hosted),
                'problems': ','.join('%s=%d' % (kind or 'none', count)
                                     for kind, count in problems.items())}
        with engine.begin() as conn:
            conn.execute(meta_table.insert(), [
                dict(name=key, value=value) for key, value in meta.items()])
    finally:
        engine.dispose()
    log('Built in %.0f s: %d allocations of %d consumers, %s.'
        % (time.monotonic() - started, len(rows.allocations),
           len(rows.consumers), meta['problems']))
    return dict(url=url, hosted=hosted, problems=_problems(meta['problems']))


def _problems(text):
    found = {}
    for item in text.split(','):
        kind, _, count = item.partition('=')
        found[None if kind == 'none' else kind] = int(count)
    return found


def write_config(path, url):
    """A placement.conf naming the Placement database."""
    with open(path, 'w') as handle:
        handle.write('[placement_database]\nconnection = %s\n' % url)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--instances', type=int, default=20000)
    parser.add_argument('--rebuild', action='store_true')
    args = parser.parse_args(argv)
    deployment = build.ensure(args.instances)
    placement = ensure(deployment, args.instances, args.rebuild)
    print('Placement database of %d hosted instances: %s'
          % (placement['hosted'], placement['problems']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
