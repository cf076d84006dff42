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

A batch is read with one query per table (``... IN (uuids)``), never one
query per instance. Rows become plain dicts, except system metadata, the
bulk of what is read, which stays in tuples.
"""

import json
import operator

from oslo_db import exception as db_exc
import sqlalchemy as sa

from healreq.db import rows
from healreq.db import tables

# Migration statuses after which Nova no longer tracks the migration
# (migration_get_in_progress_by_host_and_node). 'finished' is in progress.
TERMINAL_MIGRATION_STATUSES = ('confirmed', 'reverted', 'error', 'failed',
                               'completed', 'cancelled', 'done')

_INSTANCE_COLUMNS = ('id', 'uuid', 'deleted', 'hidden', 'vm_state',
                     'task_state', 'host', 'updated_at', 'instance_type_id',
                     'vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb',
                     'project_id', 'user_id', 'image_ref')


def _instance_select():
    t = tables.instances
    return sa.select(*(t.c[name] for name in _INSTANCE_COLUMNS))


def get_instance_page(conn, after_id, limit):
    """Live instances with ``id > after_id``, by id (keyset pagination)."""
    t = tables.instances
    query = _instance_select().where(
        t.c.deleted == 0, t.c.id > after_id).order_by(t.c.id).limit(limit)
    return rows.dicts(conn.execute(query))


def get_instances(conn, instance_uuids):
    """Instances (live or deleted) by uuid."""
    t = tables.instances
    query = _instance_select().where(t.c.uuid.in_(instance_uuids))
    return rows.keyed(conn.execute(query), 'uuid')


def count_live_instances(conn):
    """How many live instances the cell holds (for progress display)."""
    t = tables.instances
    return conn.execute(sa.select(sa.func.count()).select_from(t).where(
        t.c.deleted == 0)).scalar()


def has_instances_after(conn, after_id):
    """Whether a live instance with ``id > after_id`` exists."""
    t = tables.instances
    query = sa.select(t.c.id).where(
        t.c.deleted == 0, t.c.id > after_id).limit(1)
    return conn.execute(query).first() is not None


def get_instance_extras(conn, instance_uuids):
    """Live instance_extra rows grouped by instance uuid."""
    t = tables.instance_extra
    query = sa.select(t.c.id, t.c.instance_uuid, t.c.flavor,
                      t.c.pci_requests).where(
        t.c.deleted == 0,
        t.c.instance_uuid.in_(instance_uuids)).order_by(t.c.id)
    return rows.grouped(conn.execute(query), 'instance_uuid')


def get_migrations_in_progress(conn, instance_uuids):
    """Live migrations not in a terminal status, grouped by instance."""
    t = tables.migrations
    query = sa.select(t.c.id, t.c.uuid, t.c.instance_uuid, t.c.status,
                      t.c.migration_type).where(
        t.c.deleted == 0,
        t.c.instance_uuid.in_(instance_uuids),
        sa.or_(t.c.status.is_(None),
               t.c.status.not_in(TERMINAL_MIGRATION_STATUSES)),
    ).order_by(t.c.id.desc())
    return rows.grouped(conn.execute(query), 'instance_uuid')


def get_failed_resize_flavor_ids(conn, instance_uuids):
    """Target flavor ids of failed resizes, grouped by instance."""
    t = tables.migrations
    query = sa.select(t.c.instance_uuid, t.c.new_instance_type_id).where(
        t.c.deleted == 0,
        t.c.instance_uuid.in_(instance_uuids),
        t.c.migration_type == 'resize',
        t.c.status.in_(('error', 'failed')))
    flavor_ids = {}
    for row in conn.execute(query):
        flavor_ids.setdefault(row.instance_uuid, set()).add(
            row.new_instance_type_id)
    return {uuid: frozenset(ids) for uuid, ids in flavor_ids.items()}


def get_system_metadata(conn, instance_uuids):
    """System metadata, deleted or not, grouped by instance.

    Each instance gets a list of ``(key, value, deleted)`` tuples in row
    id order. Nova ignores the deleted flag of system metadata when it
    reads it.

    System metadata is most of what a batch reads, some 20 rows per
    instance; the server aggregates each instance's rows into one JSON
    array, which is much cheaper to transfer and decode than the rows
    themselves. Where the server cannot (no JSON functions, or MariaDB
    truncating the array at ``group_concat_max_len``), the rows are read.
    """
    try:
        return _aggregated_system_metadata(conn, instance_uuids)
    except (_Unaggregated, sa.exc.DBAPIError, db_exc.DBError):
        return _system_metadata_rows(conn, instance_uuids)


class _Unaggregated(Exception):
    """The server's aggregate of system metadata cannot be used."""


def _aggregated_system_metadata(conn, instance_uuids):
    t = tables.instance_system_metadata
    rows = sa.func.json_array(t.c.id, t.c.key, t.c.value, t.c.deleted)
    aggregate = (sa.func.json_group_array(rows)
                 if conn.dialect.name == 'sqlite'
                 else sa.func.json_arrayagg(rows))
    query = sa.select(t.c.instance_uuid, aggregate).where(
        t.c.instance_uuid.in_(instance_uuids)).group_by(t.c.instance_uuid)
    found = {}
    for uuid, text in conn.execute(query).fetchall():
        try:
            items = json.loads(text)
        except (TypeError, ValueError):
            raise _Unaggregated()
        # The order of an aggregate is unspecified: sort by row id.
        items.sort(key=operator.itemgetter(0))
        found[uuid] = [(key, value, deleted)
                       for _id, key, value, deleted in items]
    return found


def _system_metadata_rows(conn, instance_uuids):
    t = tables.instance_system_metadata
    query = sa.select(t.c.instance_uuid, t.c.key, t.c.value,
                      t.c.deleted).where(
        t.c.instance_uuid.in_(instance_uuids)).order_by(t.c.id)
    found = {}
    for uuid, key, value, deleted in conn.execute(query).fetchall():
        found.setdefault(uuid, []).append((key, value, deleted))
    return found


def get_root_block_devices(conn, instance_uuids):
    """Live boot_index 0 block device mappings grouped by instance."""
    t = tables.block_device_mapping
    query = sa.select(t.c.id, t.c.instance_uuid, t.c.boot_index,
                      t.c.destination_type).where(
        t.c.deleted == 0, t.c.boot_index == 0,
        t.c.instance_uuid.in_(instance_uuids)).order_by(t.c.id)
    return rows.grouped(conn.execute(query), 'instance_uuid')
