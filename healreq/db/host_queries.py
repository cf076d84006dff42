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

"""The reads of ``nova-heal hosts``. Functions take a Connection. Read only.

The API database's aggregates are read whole (three small tables); a
cell is read by pages of hosts (keyset pagination over the hosts of its
live compute nodes), one query per table per page; the Placement
database by the providers of a page, and its root providers by pages.
"""

import sqlalchemy as sa

from healreq.db import placement_queries
from healreq.db import rows
from healreq.db import tables
from healreq import nova_constants

_ZONE_KEY = 'availability_zone'
_HELD = ('allocated', 'claimed')


def _in(name):
    return sa.bindparam(name, expanding=True)


def _statements():
    c, s, i = tables.compute_nodes, tables.services, tables.instances
    e, m, d = tables.instance_extra, tables.migrations, tables.pci_devices
    node = sa.select(c.c.id, c.c.uuid, c.c.host, c.c.hypervisor_hostname,
                     c.c.hypervisor_type, c.c.numa_topology).where(
        c.c.deleted == 0)
    running = sa.or_(m.c.status.notin_(
        nova_constants.TERMINAL_MIGRATION_STATUSES),
        sa.and_(m.c.migration_type == 'evacuation', m.c.status == 'done'))
    return dict(
        host_page=sa.select(c.c.host).where(
            c.c.deleted == 0, c.c.host > sa.bindparam('after')).group_by(
            c.c.host).order_by(c.c.host).limit(sa.bindparam('limit')),
        one_host=sa.select(c.c.host).where(
            c.c.deleted == 0, c.c.host == sa.bindparam('host')).group_by(
            c.c.host),
        nodes=node.where(c.c.host.in_(_in('hosts'))).order_by(c.c.id),
        nodes_named=node.where(
            c.c.hypervisor_hostname.in_(_in('names'))).order_by(c.c.id),
        services=sa.select(s.c.host, s.c.forced_down, s.c.last_seen_up,
                           s.c.created_at).where(
            s.c.deleted == 0, s.c.binary == 'nova-compute',
            s.c.host.in_(_in('hosts'))).order_by(s.c.id),
        instances=sa.select(i.c.uuid, i.c.host, i.c.node, i.c.vm_state,
                            i.c.task_state, e.c.numa_topology).select_from(
            i.outerjoin(e, sa.and_(e.c.instance_uuid == i.c.uuid,
                                   e.c.deleted == 0))).where(
            i.c.deleted == 0, i.c.host.in_(_in('hosts'))).order_by(i.c.id),
        migrations=sa.select(m.c.uuid, m.c.instance_uuid, m.c.status,
                             m.c.migration_type, m.c.source_compute,
                             m.c.dest_compute).where(
            m.c.deleted == 0, running,
            sa.or_(m.c.source_compute.in_(_in('hosts')),
                   m.c.dest_compute.in_(_in('hosts')))).order_by(m.c.id),
        devices=sa.select(d.c.compute_node_id, d.c.address, d.c.status,
                          d.c.instance_uuid).where(
            d.c.deleted == 0, d.c.status.in_(_HELD),
            d.c.compute_node_id.in_(_in('ids'))).order_by(d.c.id),
        holders=sa.select(i.c.uuid, i.c.host, i.c.deleted, i.c.vm_state,
                          i.c.task_state).where(
            i.c.uuid.in_(_in('uuids'))).order_by(i.c.id),
    )


def _placement_statements():
    p = tables.resource_providers
    ra, pa = tables.resource_provider_aggregates, tables.placement_aggregates
    rt, t = tables.resource_provider_traits, tables.traits
    a = tables.allocations
    provider = sa.select(p.c.id, p.c.uuid, p.c.name, p.c.generation,
                         p.c.root_provider_id, p.c.parent_provider_id)
    return dict(
        providers=provider.where(sa.or_(
            p.c.uuid.in_(_in('uuids')),
            p.c.name.in_(_in('names')))).order_by(p.c.id),
        root_page=provider.where(
            p.c.parent_provider_id.is_(None),
            p.c.id > sa.bindparam('after')).order_by(p.c.id).limit(
            sa.bindparam('limit')),
        below=provider.where(p.c.root_provider_id.in_(_in('ids')),
                             p.c.id != p.c.root_provider_id).order_by(p.c.id),
        aggregates=sa.select(ra.c.resource_provider_id, pa.c.uuid).select_from(
            ra.join(pa, pa.c.id == ra.c.aggregate_id)).where(
            ra.c.resource_provider_id.in_(_in('ids'))).order_by(pa.c.uuid),
        traits=sa.select(rt.c.resource_provider_id, t.c.name).select_from(
            rt.join(t, t.c.id == rt.c.trait_id)).where(
            rt.c.resource_provider_id.in_(_in('ids'))),
        allocations=sa.select(a.c.resource_provider_id, a.c.consumer_id,
                              a.c.resource_class_id, a.c.used).where(
            a.c.resource_provider_id.in_(_in('ids'))).order_by(a.c.id),
    )


_QUERIES = _statements()
_PLACEMENT = _placement_statements()


# -- API database -------------------------------------------------------------

def get_aggregates(conn):
    """Every Nova aggregate by uuid: uuid, name, zone and its hosts (a set).

    ``zone`` is the availability_zone metadata, or None.
    """
    a, h = tables.aggregates, tables.aggregate_hosts
    meta = tables.aggregate_metadata
    found, by_id = {}, {}
    for row in conn.execute(sa.select(a.c.id, a.c.uuid, a.c.name).order_by(
            a.c.id)):
        by_id[row.id] = found[row.uuid] = {
            'uuid': row.uuid, 'name': row.name, 'zone': None,
            'hosts': set()}
    for row in conn.execute(sa.select(h.c.aggregate_id, h.c.host)):
        if row.aggregate_id in by_id:
            by_id[row.aggregate_id]['hosts'].add(row.host)
    for row in conn.execute(sa.select(meta.c.aggregate_id, meta.c.value).where(
            meta.c.key == _ZONE_KEY)):
        if row.aggregate_id in by_id:
            by_id[row.aggregate_id]['zone'] = row.value
    return found


# -- Cell databases -----------------------------------------------------------

def get_host_page(conn, after, limit):
    """The hosts of live compute nodes after ``after``, in order."""
    return [row[0] for row in conn.execute(
        _QUERIES['host_page'], {'after': after, 'limit': limit})]


def has_host(conn, host):
    """Whether a live compute node of the cell has host ``host``."""
    found = conn.execute(_QUERIES['one_host'], {'host': host}).first()
    return found is not None


def get_nodes(conn, hosts):
    """The live compute nodes of ``hosts``, as plain dicts, by id."""
    return rows.dicts(conn.execute(_QUERIES['nodes'],
                                   {'hosts': sorted(hosts)}))


def get_nodes_named(conn, hypervisor_hostnames):
    """The live compute nodes of these hypervisors, as plain dicts."""
    return rows.dicts(conn.execute(_QUERIES['nodes_named'],
                                   {'names': sorted(hypervisor_hostnames)}))


def get_compute_services(conn, hosts):
    """The live nova-compute services of ``hosts``, ``{host: row}``."""
    return rows.keyed(conn.execute(_QUERIES['services'],
                                   {'hosts': sorted(hosts)}), 'host')


def get_host_instances(conn, hosts):
    """Live instances on ``hosts``, with their extra's numa_topology."""
    return rows.plain_dicts(conn.execute(_QUERIES['instances'],
                                         {'hosts': sorted(hosts)}))


def get_running_migrations(conn, hosts):
    """Live migrations from or to ``hosts`` that have not ended.

    Evacuations that are done but not cleaned up by their source count.
    """
    return rows.dicts(conn.execute(_QUERIES['migrations'],
                                   {'hosts': sorted(hosts)}))


def get_held_devices(conn, node_ids):
    """Live PCI devices of these compute nodes allocated or claimed."""
    return rows.dicts(conn.execute(_QUERIES['devices'],
                                   {'ids': sorted(node_ids)}))


def get_holders(conn, instance_uuids):
    """Instances (deleted ones too) by uuid: uuid, host, deleted, states."""
    return rows.keyed(conn.execute(_QUERIES['holders'],
                                   {'uuids': sorted(instance_uuids)}), 'uuid')


# -- Placement database -------------------------------------------------------

def get_providers(conn, uuids, names):
    """Providers whose uuid or name is among those given, plain dicts.

    Each with ``aggregates``, the uuids of its Placement aggregates.
    """
    found = rows.dicts(conn.execute(_PLACEMENT['providers'], {
        'uuids': sorted(uuids), 'names': sorted(names)}))
    _add_aggregates(conn, found)
    return found


def _add_aggregates(conn, providers):
    by_id = {p['id']: p for p in providers}
    for p in providers:
        p['aggregates'] = []
    if not by_id:
        return
    for provider_id, uuid in conn.execute(_PLACEMENT['aggregates'],
                                          {'ids': sorted(by_id)}):
        by_id[provider_id]['aggregates'].append(uuid)


def get_root_page(conn, after_id, limit):
    """Root providers with ``id > after_id``, in id order."""
    return rows.dicts(conn.execute(_PLACEMENT['root_page'],
                                   {'after': after_id, 'limit': limit}))


def get_below(conn, root_ids):
    """The providers below these roots (not the roots), in id order."""
    return rows.dicts(conn.execute(_PLACEMENT['below'],
                                   {'ids': sorted(root_ids)}))


def get_traits(conn, provider_ids):
    """``{provider id: {trait name, ...}}`` of these providers."""
    found = {}
    if provider_ids:
        for provider_id, name in conn.execute(_PLACEMENT['traits'],
                                              {'ids': sorted(provider_ids)}):
            found.setdefault(provider_id, set()).add(name)
    return found


def get_provider_allocations(conn, provider_ids, class_names):
    """``{provider id: {consumer: {class: amount}}}`` on these providers.

    ``class_names`` is placement_queries.get_resource_classes' map.
    """
    found = {}
    if not provider_ids:
        return found
    for provider_id, consumer, class_id, used in conn.execute(
            _PLACEMENT['allocations'], {'ids': sorted(provider_ids)}):
        name = class_names.get(class_id, '#%s' % class_id)
        by_class = found.setdefault(provider_id, {}).setdefault(consumer, {})
        by_class[name] = by_class.get(name, 0) + used
    return found


get_resource_classes = placement_queries.get_resource_classes
