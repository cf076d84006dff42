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


"""Queries against a cell database. Functions take a Connection.

A batch is read with one query per table, never one query per instance:
by a list of uuids (``... IN (uuids)``), or, for a page of the walk, by
the page's range of instance ids (see Page). Rows become plain dicts,
except system metadata, the bulk of what is read, which stays in
tuples.
"""

import collections
import json
import operator
import weakref

from oslo_db import exception as db_exc
import sqlalchemy as sa

from healreq.db import rows
from healreq.db import tables
from healreq import nova_constants

# Terminal statuses of a resize that failed: its target flavor may linger.
FAILED_STATUSES = ('error', 'failed')
_FINISHED_STATUSES = tuple(
    status for status in nova_constants.TERMINAL_MIGRATION_STATUSES
    if status not in FAILED_STATUSES)

_INSTANCE_COLUMNS = ('id', 'uuid', 'deleted', 'hidden', 'vm_state',
                     'task_state', 'host', 'updated_at', 'instance_type_id',
                     'vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb',
                     'project_id', 'user_id', 'image_ref',
                     'availability_zone')


def _uuids():
    return sa.bindparam('uuids', expanding=True)


class Page(collections.namedtuple('Page', ('after_id', 'last_id'))):
    """The live instances of a page: ``after_id < id <= last_id``.

    Given instead of a list of uuids, the rows of the page's instances
    are read by joining the page's range of ``instances`` (a range scan
    of its primary key) with each table's index on ``instance_uuid``:
    no list of uuids to send and parse, and each instance's rows come
    in the order of the page. Rows of an instance that joined the range
    since the page was read may come too; the caller picks its own.
    """


def _in_page(query, table):
    """``query`` of ``table`` restricted to the live instances of a Page."""
    i = tables.instances
    return query.select_from(table.join(
        i, i.c.uuid == table.c.instance_uuid)).where(
        i.c.deleted == 0, i.c.id > sa.bindparam('after_id'),
        i.c.id <= sa.bindparam('last_id'))


def _both(query, table, **named):
    """``{name: by uuids, name@page: in a Page}`` for ``query``.

    By uuids, the rows come in ``order``; in a Page, each instance's rows
    come together, in the order of the page, and the callers sort them.
    """
    found = {}
    for name, order in named.items():
        found[name] = query.where(
            table.c.instance_uuid.in_(_uuids())).order_by(order)
        found[name + '@page'] = _in_page(query, table)
    return found


# System metadata packed by the server, one string per instance: fields
# separated by US (0x1f), rows by RS (0x1e), in row id order. Plain
# concatenation costs the server much less than building JSON. With the
# count of rows and the length limit, the client tells a string cut at
# the limit (then the rows are read instead), and a value holding a
# separator (or a NULL key: that instance's rows are read instead).
_PACKED_SYSMETA = sa.literal_column(
    "COUNT(*), @@SESSION.group_concat_max_len, "
    "GROUP_CONCAT(instance_system_metadata.`key`, '\x1f', "
    "COALESCE(instance_system_metadata.value, ''), '\x1f', "
    "instance_system_metadata.value IS NULL, '\x1f', "
    "instance_system_metadata.deleted ORDER BY instance_system_metadata.id "
    "SEPARATOR '\x1e')")


# The statements are built once: building one per batch costs time, and
# leaves garbage in reference cycles for the collector.
def _statements():
    i = tables.instances
    e = tables.instance_extra
    m = tables.migrations
    s = tables.instance_system_metadata
    b = tables.block_device_mapping
    instance = sa.select(*(i.c[name] for name in _INSTANCE_COLUMNS))
    sysmeta_row = sa.func.json_array(s.c.id, s.c.key, s.c.value, s.c.deleted)
    found = dict(
        page=instance.where(
            i.c.deleted == 0, i.c.id > sa.bindparam('after_id')).order_by(
            i.c.id).limit(sa.bindparam('limit')),
        instances=instance.where(i.c.uuid.in_(_uuids())),
        live_uuids=sa.select(i.c.uuid).where(
            i.c.deleted == 0, i.c.uuid.in_(_uuids())),
        count=sa.select(sa.func.count()).select_from(i).where(
            i.c.deleted == 0),
        after=sa.select(i.c.id).where(
            i.c.deleted == 0, i.c.id > sa.bindparam('after_id')).limit(1),
    )
    found.update(_both(sa.select(e.c.id, e.c.instance_uuid, e.c.flavor,
                                 e.c.pci_requests).where(e.c.deleted == 0),
                       e, extras=e.c.id))
    # In progress, and failed resizes, in one statement. COALESCE keeps
    # the status out of the index look-up: MariaDB would build ranges for
    # every uuid and excluded status, which costs more than filtering the
    # few rows of each instance.
    found.update(_both(sa.select(
        m.c.id, m.c.uuid, m.c.instance_uuid, m.c.status, m.c.migration_type,
        m.c.new_instance_type_id).where(
        m.c.deleted == 0,
        sa.func.coalesce(m.c.status, '').not_in(_FINISHED_STATUSES)),
        m, migrations=m.c.id.desc()))
    found.update(_both(sa.select(s.c.id, s.c.instance_uuid, s.c.key,
                                 s.c.value, s.c.deleted),
                       s, sysmeta_rows=s.c.id))
    found.update(_both(sa.select(b.c.id, b.c.instance_uuid, b.c.boot_index,
                                 b.c.destination_type).where(
        b.c.deleted == 0, b.c.boot_index == 0), b, root_devices=b.c.id))
    for name, aggregate in (
            ('sysmeta_json', sa.func.json_group_array(sysmeta_row)),
            ('sysmeta_packed', _PACKED_SYSMETA)):
        found[name] = sa.select(s.c.instance_uuid, aggregate).where(
            s.c.instance_uuid.in_(_uuids())).group_by(s.c.instance_uuid)
        # Grouped by the page's primary key, as the join reads the rows:
        # the server aggregates them as they come, without a temporary
        # table.
        found[name + '@page'] = _in_page(sa.select(
            i.c.uuid, aggregate), s).group_by(i.c.id)
    return found


_QUERIES = _statements()


def _by_uuids(conn, name, instance_uuids):
    """Statement ``name`` for a list of uuids, or for a Page."""
    if isinstance(instance_uuids, Page):
        return conn.execute(_QUERIES[name + '@page'],
                            instance_uuids._asdict())
    return conn.execute(_QUERIES[name], {'uuids': list(instance_uuids)})


def _in_row_order(groups, descending=False):
    """``groups`` with each group's rows in id order (``rows.grouped``')."""
    for found in groups.values():
        if len(found) > 1:
            found.sort(key=operator.itemgetter('id'), reverse=descending)
    return groups


def get_instance_page(conn, after_id, limit):
    """Live instances with ``id > after_id``, by id (keyset pagination)."""
    return rows.dicts(conn.execute(_QUERIES['page'],
                                   {'after_id': after_id, 'limit': limit}))


def get_instances(conn, instance_uuids):
    """Instances (live or deleted) by uuid."""
    return rows.keyed(_by_uuids(conn, 'instances', instance_uuids), 'uuid')


def get_live_uuids(conn, instance_uuids):
    """Those of ``instance_uuids`` that are live instances of the cell."""
    return {row.uuid for row in _by_uuids(conn, 'live_uuids',
                                          sorted(instance_uuids))}


def count_live_instances(conn):
    """How many live instances the cell holds (for progress display)."""
    return conn.execute(_QUERIES['count']).scalar()


def has_instances_after(conn, after_id):
    """Whether a live instance with ``id > after_id`` exists."""
    return conn.execute(_QUERIES['after'],
                        {'after_id': after_id}).first() is not None


def get_instance_extras(conn, instance_uuids):
    """Live instance_extra rows grouped by instance uuid."""
    return _in_row_order(rows.grouped(
        _by_uuids(conn, 'extras', instance_uuids), 'instance_uuid'))


def get_migrations(conn, instance_uuids):
    """``(in progress, failed resize targets)`` of instances, one query.

    In progress: live migrations not in a terminal status, newest first,
    grouped by instance. Failed resize targets: the new flavor ids of
    live resizes that ended in error or failed, as frozensets by instance.
    """
    in_progress = {}
    failed = {}
    for row in rows.dicts(_by_uuids(conn, 'migrations', instance_uuids)):
        status = row['status']
        uuid = row['instance_uuid']
        if status in FAILED_STATUSES:
            if row['migration_type'] == 'resize':
                failed.setdefault(uuid, set()).add(
                    row['new_instance_type_id'])
            continue
        del row['new_instance_type_id']
        in_progress.setdefault(uuid, []).append(row)
    _in_row_order(in_progress, descending=True)
    return in_progress, {uuid: frozenset(ids) for uuid, ids in failed.items()}


def get_migrations_in_progress(conn, instance_uuids):
    """Live migrations not in a terminal status, grouped by instance."""
    return get_migrations(conn, instance_uuids)[0]


def get_system_metadata(conn, instance_uuids):
    """System metadata, deleted or not, grouped by instance.

    Each instance gets a list of ``(key, value, deleted)`` tuples in row
    id order. Nova ignores the deleted flag of system metadata when it
    reads it.

    System metadata is most of what a batch reads, some 20 rows per
    instance; the server packs each instance's rows into one string
    (MySQL, MariaDB: see _PACKED_SYSMETA) or one JSON array (SQLite),
    which is much cheaper to transfer and decode than the rows
    themselves. Where the server cannot, or the packing is ambiguous
    (a separator inside a value, a string cut at ``group_concat_max_len``),
    the rows are read, for this batch and every later one on the same
    engine.
    """
    engine = conn.engine
    if engine not in _UNAGGREGATED_ENGINES:
        try:
            return _aggregated_system_metadata(conn, instance_uuids)
        except (_Unaggregated, sa.exc.DBAPIError, db_exc.DBError):
            _UNAGGREGATED_ENGINES.add(engine)
    return _system_metadata_rows(conn, instance_uuids)


class _Unaggregated(Exception):
    """The server's aggregate of system metadata cannot be used."""


# Engines (one per cell and run) whose server failed the aggregate once:
# probing it again on every batch would cost a failing query each time.
_UNAGGREGATED_ENGINES = weakref.WeakSet()


def _aggregated_system_metadata(conn, instance_uuids):
    if conn.dialect.name == 'mysql':
        return _packed_system_metadata(conn, instance_uuids)
    found = {}
    one = rows.OneCopy()
    for uuid, text in _by_uuids(conn, 'sysmeta_json',
                                instance_uuids).fetchall():
        try:
            items = json.loads(text)
        except (TypeError, ValueError):
            raise _Unaggregated()
        # The order of an aggregate is unspecified: sort by row id.
        items.sort(key=operator.itemgetter(0))
        found[uuid] = [(one(key), one(value), deleted)
                       for _id, key, value, deleted in items]
    return found


def _packed_system_metadata(conn, instance_uuids):
    """Unpack _PACKED_SYSMETA; _Unaggregated if a string was cut."""
    found = {}
    one = rows.OneCopy()
    ambiguous = []
    for uuid, count, limit, text in _by_uuids(conn, 'sysmeta_packed',
                                              instance_uuids).fetchall():
        if text is not None and len(text.encode('utf-8')) >= limit:
            raise _Unaggregated()
        items = _unpacked(text, count, one)
        if items is None:
            ambiguous.append(uuid)
        else:
            found[uuid] = items
    if ambiguous:
        found.update(_system_metadata_rows(conn, ambiguous, one))
    return found


def _unpacked(text, count, one):
    """The ``count`` rows packed in ``text``, or None if it is ambiguous.

    Each separator inside a value adds a row or a field: any makes the
    rows or their fields too many.
    """
    packed = text.split('\x1e') if text is not None else ()
    if len(packed) != count:
        return None
    items = []
    for item in packed:
        fields = item.split('\x1f')
        if len(fields) != 4:
            return None
        key, value, null, deleted = fields
        items.append((one(key), None if null == '1' else one(value),
                      int(deleted)))
    return items


def _system_metadata_rows(conn, instance_uuids, one=None):
    found = {}
    one = one or rows.OneCopy()
    for row_id, uuid, key, value, deleted in _by_uuids(
            conn, 'sysmeta_rows', instance_uuids).fetchall():
        found.setdefault(uuid, []).append(
            (row_id, one(key), one(value), deleted))
    # Each instance's rows come together; in id order, not by contract.
    for uuid, items in found.items():
        items.sort(key=operator.itemgetter(0))
        found[uuid] = [item[1:] for item in items]
    return found


def get_root_block_devices(conn, instance_uuids):
    """Live boot_index 0 block device mappings grouped by instance."""
    return _in_row_order(rows.grouped(
        _by_uuids(conn, 'root_devices', instance_uuids), 'instance_uuid'))


def get_services(conn):
    """The cell's services that are not deleted, as plain dicts.

    Each has host, binary, version, forced_down, last_seen_up,
    created_at and updated_at; whether a service is up is for the caller
    to judge.
    """
    s = tables.services
    query = sa.select(s.c.host, s.c.binary, s.c.version, s.c.forced_down,
                      s.c.last_seen_up, s.c.created_at,
                      s.c.updated_at).where(
        s.c.deleted == 0).order_by(s.c.id)
    return rows.dicts(conn.execute(query))


# -- nova-heal allocations ---------------------------------------------------

_ALLOCATION_INSTANCE_COLUMNS = ('id', 'uuid', 'deleted', 'hidden', 'vm_state',
                                'task_state', 'host', 'node', 'project_id',
                                'user_id', 'image_ref')
_MIGRATION_COLUMNS = ('id', 'uuid', 'instance_uuid', 'status',
                      'migration_type', 'source_compute', 'source_node',
                      'dest_compute', 'dest_node', 'deleted')


def _allocation_statements():
    i = tables.instances
    m = tables.migrations
    c = tables.compute_nodes
    instance = sa.select(*(i.c[name] for name in
                           _ALLOCATION_INSTANCE_COLUMNS))
    migration = sa.select(*(m.c[name] for name in _MIGRATION_COLUMNS))
    return dict(
        page=instance.where(
            i.c.deleted == 0, i.c.id > sa.bindparam('after_id')).order_by(
            i.c.id).limit(sa.bindparam('limit')),
        instances=instance.where(i.c.uuid.in_(_uuids())),
        # Deleted rows too: a leftover consumer may outlive its row.
        **_both(migration, m, migrations=m.c.id),
        migrations_by_uuid=migration.where(
            m.c.uuid.in_(_uuids())).order_by(m.c.id),
        compute_nodes=sa.select(c.c.uuid, c.c.host, c.c.hypervisor_hostname,
                                c.c.hypervisor_type).where(
            c.c.deleted == 0).order_by(c.c.id),
    )


_ALLOCATION_QUERIES = _allocation_statements()


def get_allocation_instance_page(conn, after_id, limit):
    """Live instances with ``id > after_id`` as ``allocations`` reads them."""
    return rows.dicts(conn.execute(_ALLOCATION_QUERIES['page'],
                                   {'after_id': after_id, 'limit': limit}))


def get_allocation_instances(conn, instance_uuids):
    """Instances (live or deleted) by uuid, as ``allocations`` reads them."""
    return rows.keyed(conn.execute(_ALLOCATION_QUERIES['instances'],
                                   {'uuids': list(instance_uuids)}), 'uuid')


def get_all_migrations(conn, instance_uuids):
    """Every migration of the instances, soft-deleted ones included.

    ``instance_uuids`` is a list of uuids or a Page.
    """
    name = 'migrations'
    params = {'uuids': list(instance_uuids)}
    if isinstance(instance_uuids, Page):
        name, params = 'migrations@page', instance_uuids._asdict()
    return _in_row_order(rows.grouped(conn.execute(
        _ALLOCATION_QUERIES[name], params), 'instance_uuid'))


def get_migrations_by_uuid(conn, migration_uuids):
    """Migrations (soft-deleted ones included) by their uuid."""
    return rows.keyed(conn.execute(_ALLOCATION_QUERIES['migrations_by_uuid'],
                                   {'uuids': list(migration_uuids)}), 'uuid')


def get_compute_nodes(conn):
    """The cell's live compute nodes, by ``(host, hypervisor_hostname)``."""
    return {(node['host'], node['hypervisor_hostname']): node
            for node in rows.dicts(conn.execute(
                _ALLOCATION_QUERIES['compute_nodes']))}
