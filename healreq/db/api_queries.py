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


"""Queries against the API database. Functions take a Connection."""

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import expression

from healreq.db import rows
from healreq.db import tables


def get_cells(conn):
    """All cell mappings ordered by id, as plain dicts."""
    t = tables.cell_mappings
    query = sa.select(t.c.id, t.c.uuid, t.c.name,
                      t.c.database_connection).order_by(t.c.id)
    return rows.dicts(conn.execute(query))


def get_instance_mapping(conn, instance_uuid):
    """The instance mapping joined with its cell, or None."""
    m = tables.instance_mappings
    query = sa.select(m.c.instance_uuid, m.c.cell_id,
                      m.c.queued_for_delete).where(
        m.c.instance_uuid == instance_uuid)
    row = conn.execute(query).first()
    return dict(row._mapping) if row else None


# Built once per process, like the cell queries (see there).
_MAPPINGS = sa.select(
    tables.instance_mappings.c.instance_uuid,
    tables.instance_mappings.c.cell_id,
    tables.instance_mappings.c.queued_for_delete).where(
    tables.instance_mappings.c.instance_uuid.in_(
        sa.bindparam('uuids', expanding=True)))
_SPECS = sa.select(
    tables.request_specs.c.id, tables.request_specs.c.instance_uuid,
    tables.request_specs.c.spec).where(
    tables.request_specs.c.instance_uuid.in_(
        sa.bindparam('uuids', expanding=True)))


_MEMBERSHIPS = sa.select(
    tables.instance_group_member.c.id.label('member_id'),
    tables.instance_group_member.c.instance_uuid,
    tables.instance_groups.c.id, tables.instance_groups.c.uuid,
    tables.instance_groups.c.name, tables.instance_groups.c.user_id,
    tables.instance_groups.c.project_id, tables.instance_groups.c.created_at,
    tables.instance_groups.c.updated_at).select_from(
    tables.instance_group_member.join(
        tables.instance_groups, tables.instance_groups.c.id
        == tables.instance_group_member.c.group_id)).where(
    tables.instance_group_member.c.instance_uuid.in_(
        sa.bindparam('uuids', expanding=True))).order_by(
    tables.instance_group_member.c.id)
_POLICIES = sa.select(
    tables.instance_group_policy.c.group_id,
    tables.instance_group_policy.c.policy,
    tables.instance_group_policy.c.rules).where(
    tables.instance_group_policy.c.group_id.in_(
        sa.bindparam('ids', expanding=True))).order_by(
    tables.instance_group_policy.c.id)
_ZONE_KEY = 'availability_zone'
_HOST_ZONES = sa.select(
    tables.aggregate_hosts.c.host,
    tables.aggregate_metadata.c.value).select_from(
    tables.aggregate_hosts.join(
        tables.aggregate_metadata, sa.and_(
            tables.aggregate_metadata.c.aggregate_id
            == tables.aggregate_hosts.c.aggregate_id,
            tables.aggregate_metadata.c.key == _ZONE_KEY))).where(
    tables.aggregate_hosts.c.host.in_(
        sa.bindparam('hosts', expanding=True))).order_by(
    tables.aggregate_hosts.c.aggregate_id)


def get_group_memberships(conn, instance_uuids):
    """The server groups of instances: ``{instance uuid: [group, ...]}``.

    Each group is a dict of its instance_groups columns plus ``policy``
    and ``rules`` (its first policy row, None without one), in the order
    of the membership rows (Nova reads the first).
    """
    found = {}
    for row in rows.dicts(conn.execute(
            _MEMBERSHIPS, {'uuids': list(instance_uuids)})):
        found.setdefault(row.pop('instance_uuid'), []).append(row)
    ids = {group['id'] for groups in found.values() for group in groups}
    policies = {}
    if ids:
        for group_id, policy, rules in conn.execute(
                _POLICIES, {'ids': sorted(ids)}).fetchall():
            policies.setdefault(group_id, (policy, rules))
    for groups in found.values():
        for group in groups:
            group['policy'], group['rules'] = policies.get(
                group['id'], (None, None))
    return found


def get_existing_groups(conn, group_uuids):
    """Those of ``group_uuids`` that instance_groups holds."""
    t = tables.instance_groups
    return {row.uuid for row in conn.execute(sa.select(t.c.uuid).where(
        t.c.uuid.in_(sorted(group_uuids))))}


def get_host_zones(conn, hosts):
    """The zones of the hosts' aggregates: ``{host: [zone, ...]}``.

    In aggregate id order; Nova takes the first.
    """
    found = {}
    for host, zone in conn.execute(
            _HOST_ZONES, {'hosts': sorted(set(hosts))}).fetchall():
        found.setdefault(host, []).append(zone)
    return found


def get_zones(conn):
    """Every availability zone an aggregate carries, by whether it is used.

    Returns ``(held, hostless)``: the zones some aggregate with a host in
    it carries, and those only aggregates without a host carry. A zone
    of the second kind exists for no instance: Nova's scheduler still
    requires its aggregates, and a pin to it makes every move fail.
    """
    metadata, hosts = tables.aggregate_metadata, tables.aggregate_hosts
    query = sa.select(
        metadata.c.value,
        hosts.c.aggregate_id.isnot(None).label('held')).select_from(
        metadata.outerjoin(
            hosts, hosts.c.aggregate_id == metadata.c.aggregate_id)).where(
        metadata.c.key == _ZONE_KEY).distinct()
    held, carried = set(), set()
    for row in conn.execute(query):
        carried.add(row.value)
        if row.held:
            held.add(row.value)
    return frozenset(held), frozenset(carried - held)


def get_flavor_definitions(conn, flavorids):
    """The current definitions of flavors by their flavorid.

    Returns ``{flavorid: {'id': flavors.id, 'extra_specs': {key:
    value}}}`` for those of ``flavorids`` that exist, in one query.
    """
    flavors, specs = tables.flavors, tables.flavor_extra_specs
    query = sa.select(
        flavors.c.flavorid, flavors.c.id, specs.c.key,
        specs.c.value).select_from(flavors.outerjoin(
            specs, specs.c.flavor_id == flavors.c.id)).where(
        flavors.c.flavorid.in_(sorted(flavorids)))
    found = {}
    for row in conn.execute(query):
        definition = found.setdefault(
            row.flavorid, {'id': row.id, 'extra_specs': {}})
        if row.key is not None:
            definition['extra_specs'][row.key] = row.value
    return found


def get_instance_mappings(conn, instance_uuids):
    """Instance mappings by instance uuid."""
    return rows.keyed(conn.execute(_MAPPINGS,
                                   {'uuids': list(instance_uuids)}),
                      'instance_uuid')


def get_request_specs(conn, instance_uuids):
    """Request spec rows (id, instance_uuid, spec) by instance uuid."""
    found = rows.keyed(conn.execute(_SPECS, {'uuids': list(instance_uuids)}),
                       'instance_uuid')
    for row in found.values():
        row['spec'] = _text(row['spec'])
    return found


def _text(value):
    # SQLite keeps whatever was stored; a BLOB comes back as bytes.
    if isinstance(value, bytes):
        try:
            return value.decode('utf-8')
        except UnicodeDecodeError:
            return value
    return value


class _Utf8Bytes(expression.FunctionElement):
    """The UTF-8 bytes of a text column, whatever its character set."""
    type = sa.LargeBinary()
    name = 'utf8_bytes'
    inherit_cache = True


@compiles(_Utf8Bytes)
def _utf8_bytes(element, compiler, **kw):
    return 'CAST(%s AS BLOB)' % compiler.process(element.clauses, **kw)


@compiles(_Utf8Bytes, 'mysql')
def _utf8_bytes_mysql(element, compiler, **kw):
    # Without CONVERT, a latin1 column would give its latin1 bytes, which
    # never equal the UTF-8 bytes of the text that was read.
    return 'CAST(CONVERT(%s USING utf8mb4) AS BINARY)' % compiler.process(
        element.clauses, **kw)


def _exactly_equals(column, value):
    # MySQL compares TEXT with the column's case-insensitive, pad-space
    # collation; a compare-and-swap must compare bytes.
    if not isinstance(value, bytes):
        value = value.encode('utf-8')
    return _Utf8Bytes(column) == value


def swap_request_spec(conn, spec_id, instance_uuid, expected, new, now):
    """Replace a spec only if the row still holds ``expected``.

    Returns True if the row was updated, False if it changed since it was
    read (or is gone).
    """
    t = tables.request_specs
    statement = t.update().where(
        t.c.id == spec_id,
        t.c.instance_uuid == instance_uuid,
        _exactly_equals(t.c.spec, expected),
    ).values(spec=new, updated_at=now)
    return conn.execute(statement).rowcount == 1


def get_spec_text(conn, spec_id):
    """The spec text of request_specs row ``spec_id`` (None if gone)."""
    t = tables.request_specs
    return _text(conn.execute(sa.select(t.c.spec).where(
        t.c.id == spec_id)).scalar())


def get_spec_texts(conn, spec_ids):
    """``{id: spec text}`` of the request_specs rows ``spec_ids``."""
    t = tables.request_specs
    return {row.id: _text(row.spec) for row in conn.execute(
        sa.select(t.c.id, t.c.spec).where(t.c.id.in_(list(spec_ids))))}


def insert_request_spec(conn, instance_uuid, spec, now, cell_id):
    """Create the spec row of a live instance of cell ``cell_id``.

    The row is inserted only if, in this statement, the instance mapping
    exists, is not queued for delete and names cell ``cell_id``: an
    instance deleted and archived meanwhile gets no orphan row. The
    mapping row is read with a lock (MySQL; SQLite locks the database for
    the statement), so that a deletion in flight is waited for. Returns
    the new row's id, or None if the mapping did not allow the insert.

    If the instance has a row by now, the unique key on instance_uuid
    refuses a second one: oslo.db raises DBDuplicateEntry.
    """
    t, m = tables.request_specs, tables.instance_mappings
    live_mapping = sa.select(
        m.c.instance_uuid, sa.literal(spec, type_=t.c.spec.type),
        sa.literal(now, type_=t.c.created_at.type)).where(
        m.c.instance_uuid == instance_uuid, m.c.cell_id == cell_id,
        sa.or_(m.c.queued_for_delete.is_(None),
               m.c.queued_for_delete == sa.false())).with_for_update()
    inserted = conn.execute(t.insert().from_select(
        ['instance_uuid', 'spec', 'created_at'], live_mapping)).rowcount
    if inserted != 1:
        return None
    return conn.execute(sa.select(t.c.id).where(
        t.c.instance_uuid == instance_uuid)).scalar()


def delete_request_spec(conn, spec_id, instance_uuid, expected):
    """Delete row ``spec_id`` only if it still holds ``expected``.

    Returns True if it was deleted, False if it changed (or is gone).
    """
    t = tables.request_specs
    statement = t.delete().where(
        t.c.id == spec_id, t.c.instance_uuid == instance_uuid,
        _exactly_equals(t.c.spec, expected))
    return conn.execute(statement).rowcount == 1


def try_spec_write(conn, action):
    """Run a write of request_specs (``action``) that touches no row.

    Raises the database's error if the account may not write the table
    so (MySQL checks the privilege before it looks for rows; a read-only
    SQLite database refuses any write). The caller rolls back.
    """
    t = tables.request_specs
    if action == 'insert':
        conn.execute(t.insert().from_select(
            ['instance_uuid', 'spec'],
            sa.select(t.c.instance_uuid, t.c.spec).where(sa.false())))
    elif action == 'delete':
        conn.execute(t.delete().where(sa.false()))
    else:
        conn.execute(t.update().where(sa.false()).values(
            updated_at=t.c.updated_at))


def get_newest_specs(conn, limit):
    """The spec texts of the ``limit`` most recently created rows."""
    t = tables.request_specs
    query = sa.select(t.c.spec).order_by(t.c.id.desc()).limit(limit)
    return [row.spec for row in conn.execute(query)]


_ALEMBIC_VERSION = sa.table('alembic_version', sa.column('version_num'))


def get_schema_heads(conn):
    """The revisions alembic records as applied to the API database."""
    query = sa.select(_ALEMBIC_VERSION.c.version_num)
    return [row.version_num for row in conn.execute(query)]
