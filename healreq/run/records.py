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


"""Reading what a decision needs: instance records and object versions.

Cell rows come one query per table for a whole batch; the API rows of the
batch (mappings, specs) likewise. Errors of the API database are raised as
ApiDatabaseError, so that no caller mistakes them for a cell's.
"""

import dataclasses

from oslo_db import exception as db_exc
from oslo_log import log as logging

from healreq import clock
from healreq import conf as healreq_conf
from healreq.db import api_queries
from healreq.db import cell_queries
from healreq.db import engines
from healreq.db import urls
from healreq import exception
from healreq.heal import decisions
from healreq.heal import evidence
from healreq.heal import field_checks
from healreq import masking
from healreq.objects import primitive

LOG = logging.getLogger(__name__)

# How many of the newest specs tell which object versions to write.
VERSION_SAMPLE = 100

# [DEFAULT]/service_down_time's default.
SERVICE_DOWN_TIME = healreq_conf.option('DEFAULT',
                                        'service_down_time').default


def learn_deployment(api_engine, cell_engine, target_release=None,
                     now=None, service_down_time=SERVICE_DOWN_TIME):
    """``(detection, profile)``: the Nova release the deployment runs.

    Reads what the databases hold about it (``read_release_records``)
    and has heal.evidence.establish judge it: ``target_release`` (a
    releases.Release the operator named) overrides the records; else the
    services are judged up or down at ``now`` (naive UTC; default: the
    time now, as the services report it) by ``service_down_time``.
    """
    found = read_release_records(api_engine, cell_engine,
                                 services=target_release is None)
    return evidence.establish(found, now or clock.utcnow(),
                              service_down_time, target_release)


def read_release_records(api_engine, cell_engine, services=True):
    """The heal.evidence.Records of the deployment's release, as read.

    ``cell_engine(cell)`` is the engine of a cell's database, owned by the
    caller (CellDatabaseError if unusable): the walk's own, so that the
    connections that read the services go on to read the instances.
    Without ``services``, only the newest specs are read (a named release
    needs no services and no schema head).
    """
    specs = _newest_specs(api_engine)
    if not services:
        return evidence.Records(specs=specs)
    return evidence.Records(
        specs=specs, services=_service_rows(api_engine, cell_engine),
        schema_heads=_schema_heads(api_engine))


def _newest_specs(api_engine):
    """The texts of the newest specs, whose object versions tell.

    A fixed sample, read once, keeps every decision of a run independent
    of the order in which instances are visited.
    """
    with exception.reraised_as(exception.ApiDatabaseError):
        with api_engine.connect() as conn:
            return tuple(api_queries.get_newest_specs(conn, VERSION_SAMPLE))


def _service_rows(api_engine, cell_engine):
    """``(cell, rows)`` of every cell's ``services`` rows.

    A cell that cannot be read is left out (its walk reports it).
    """
    with exception.reraised_as(exception.ApiDatabaseError):
        with api_engine.connect() as conn:
            cells = api_queries.get_cells(conn)
    found = []
    for cell in cells:
        try:
            engine = cell_engine(cell)
        except exception.CellDatabaseError as exc:
            LOG.warning('Release detection skips cell %s: %s',
                        cell['uuid'], exc)
            continue
        try:
            with engine.connect() as conn:
                rows = cell_queries.get_services(conn)
        except exception.DB_ERRORS as exc:
            LOG.warning('Release detection skips cell %s: %s',
                        cell['uuid'], cell_error(cell, exc))
            continue
        found.append((cell['name'] or cell['uuid'], tuple(rows)))
    return tuple(found)


def _schema_heads(api_engine):
    """The API database's migration heads, or None if unreadable."""
    try:
        with api_engine.connect() as conn:
            return tuple(api_queries.get_schema_heads(conn))
    except exception.DB_ERRORS:
        return None


def connect_cell(cell, reference_url, connect=engines.create_engine):
    """An engine on ``cell``'s database; CellDatabaseError if unusable.

    A cell URL may fail to parse (ValueError, e.g. a non-numeric port),
    to format (urls.TemplateError, a ValueError) or name a driver that is
    not installed (ImportError): all concern the cell alone.
    """
    try:
        return connect(urls.format_cell_url(
            cell['database_connection'] or '', reference_url))
    except (ValueError, ImportError) + exception.DB_ERRORS as exc:
        raise cell_error(cell, exc) from exc


def cell_error(cell, exc):
    """The CellDatabaseError describing ``exc`` raised by ``cell``."""
    if isinstance(exc, ValueError):
        message = 'invalid cell database URL: %s' % exc
    elif isinstance(exc, ImportError):
        message = 'cell %s' % engines.describe_error(exc)
    else:
        if isinstance(exc, db_exc.DBConnectionError):
            kind = 'cell database unreachable'
        elif exception.is_lock_wait_timeout(exc):
            kind = ('cell database locked (another session holds a lock; '
                    '[healreq]/lock_wait_timeout passed)')
        else:
            kind = 'cell database error'
        original = getattr(exc, 'inner_exception', None) or exc
        text = str(getattr(original, 'orig', None) or original)
        message = '%s: %s' % (kind, text.splitlines()[0] if text
                              else type(exc))
    return exception.CellDatabaseError(masking.mask_password(message),
                                       cell['uuid'])


def read_cell_rows(conn, uuids, checked_fields):
    """The cell rows the checked fields need, one query per table."""
    return read_batch_rows(conn, uuids, checked_fields)[0]


def cell_fields(rows, uuid):
    """InstanceRecord fields of ``uuid`` from ``read_cell_rows``' rows."""
    return {name: found.get(uuid, []) for name, found in rows.items()}


@dataclasses.dataclass
class PageRows:
    """What a page of instances needs read, as plain rows.

    ``instances`` are its instances rows; ``cell_rows`` ``read_cell_rows``'
    and ``failed_resizes`` the targets of failed resizes, from the cell;
    ``api_rows`` ``read_api_rows``', from the API database. Plain values
    only, so that a page read in another process can be handed over.
    """
    instances: list
    cell_rows: dict
    failed_resizes: dict
    api_rows: dict


def read_page(cell_conn, api_engine, instances, checked_fields,
              after_id=None):
    """The PageRows of ``instances``: one query per table and database.

    With ``after_id``, ``instances`` are a page of the walk, the live
    instances that follow it by id: their cell rows are read by the
    page's range of ids (cell_queries.Page), else by their uuids.
    """
    uuids = [i['uuid'] for i in instances]
    if after_id is None:
        rows, failed = read_batch_rows(cell_conn, uuids, checked_fields)
    else:
        rows, failed = _of(uuids, *read_batch_rows(
            cell_conn, cell_queries.Page(after_id, instances[-1]['id']),
            checked_fields))
    return PageRows(instances, rows, failed,
                    read_api_rows(api_engine, instances, checked_fields))


def _of(uuids, rows, failed):
    """``read_batch_rows``' result, but for ``uuids`` only.

    A page's range may hold an instance created since the page was read.
    """
    wanted = set(uuids)
    return ({name: {uuid: found for uuid, found in by_uuid.items()
                    if uuid in wanted}
             for name, by_uuid in rows.items()},
            {uuid: ids for uuid, ids in failed.items() if uuid in wanted})


def read_api_rows(api_engine, instances, checked_fields):
    """The API rows of ``instances``, one query per table for them all.

    Mappings and specs, and for the checked fields that need them, server
    group memberships and the zones of the hosts' aggregates.
    """
    uuids = [i['uuid'] for i in instances]
    checked = set(checked_fields)
    with exception.reraised_as(exception.ApiDatabaseError):
        with api_engine.connect() as conn:
            return {
                'mappings': api_queries.get_instance_mappings(conn, uuids),
                'specs': api_queries.get_request_specs(conn, uuids),
                'groups': (api_queries.get_group_memberships(conn, uuids)
                           if checked & field_checks.NEEDS_GROUPS else {}),
                'zones': (_zones(conn, instances)
                          if checked & field_checks.NEEDS_ZONES
                          else ({}, (), ())),
            }


def assemble_records(api_engine, page, checked_fields, instances=None):
    """The InstanceRecords of PageRows ``page``, their specs parsed.

    A spec naming a group that no membership row names is looked up in
    ``api_engine``, in one query for the page (rarely any). The instances
    the page's scheduler hints name are looked up by ``instances`` (a
    HintedInstances; None: every one is taken for live).
    """
    mappings, specs, groups, zones = (
        page.api_rows[name] for name in ('mappings', 'specs', 'groups',
                                         'zones'))
    records = []
    for instance in page.instances:
        uuid = instance['uuid']
        record = decisions.InstanceRecord(
            instance=instance, mapping=mappings.get(uuid),
            spec_row=specs.get(uuid),
            failed_resize_flavor_ids=page.failed_resizes.get(
                uuid, frozenset()),
            groups=groups.get(uuid, []),
            host_zones=zones[0].get(instance['host'], []),
            zones=zones[1], hostless_zones=zones[2],
            **cell_fields(page.cell_rows, uuid))
        decisions.parse_spec(record)
        records.append(record)
    if set(checked_fields) & field_checks.NEEDS_GROUPS:
        _learn_known_groups(api_engine, records)
    if (instances is not None
            and set(checked_fields) & field_checks.NEEDS_HINTED_INSTANCES):
        instances.learn(records)
    if set(checked_fields) & field_checks.NEEDS_FLAVOR_DEFINITIONS:
        _learn_flavor_definitions(api_engine, records)
    return records


class HintedInstances(object):
    """Which instances that scheduler hints name are gone from every cell.

    ``cells()`` gives every cell mapping, cell0 included;
    ``cell_engine(cell)`` the engine of a cell's database
    (CellDatabaseError if unusable), owned by the caller. A batch costs
    one query of the API database and one per cell read, for all the
    uuids its hints name together: the cells their mappings name first,
    then, for those none of these holds live, every other cell (an
    archived instance has no mapping, and a mapping may be wrong).
    """

    def __init__(self, api_engine, cells, cell_engine):
        self.api_engine = api_engine
        self.cells = cells
        self.cell_engine = cell_engine

    def learn(self, records):
        """Set gone_instances and unverified_instances on ``records``."""
        named = set()
        for record in records:
            if record.spec is not None:
                named.update(field_checks.named_instances(record.spec))
        named -= {record.instance['uuid'] for record in records
                  if not record.instance['deleted']}
        gone, unverified = self.find(named) if named else (frozenset(), {})
        for record in records:
            record.gone_instances = gone
            record.unverified_instances = unverified

    def find(self, uuids):
        """``(gone, unverified)`` of ``uuids``.

        ``gone``: the uuids no cell holds as a live instance, every cell
        read; ``unverified``: uuid -> the uuids of the cells that could
        not be read, for those no readable cell holds live.
        """
        with exception.reraised_as(exception.ApiDatabaseError):
            with self.api_engine.connect() as conn:
                mappings = api_queries.get_instance_mappings(conn, uuids)
        mapped_cells = {mapping['cell_id'] for mapping in mappings.values()}
        ordered = sorted(self.cells(),
                         key=lambda cell: cell['id'] not in mapped_cells)
        missing = set(uuids)
        unreadable = []
        for cell in ordered:
            if not missing:
                break
            try:
                with self.cell_engine(cell).connect() as conn:
                    missing -= cell_queries.get_live_uuids(conn, missing)
            except exception.DB_ERRORS + (exception.CellDatabaseError,):
                unreadable.append(cell['uuid'])
        if unreadable:
            return frozenset(), {uuid: tuple(unreadable)
                                 for uuid in missing}
        return frozenset(missing), {}


def _zones(conn, instances):
    """``({host: [zone]}, zones held, zones hostless)`` for a batch.

    See api_queries.get_zones for the last two.
    """
    hosts = [i['host'] for i in instances if i['host'] is not None]
    return ((api_queries.get_host_zones(conn, hosts) if hosts else {},)
            + api_queries.get_zones(conn))


def _learn_known_groups(api_engine, records):
    """Tell each record which of the groups specs name still exist.

    Specs nearly always name the group the instance is a member of (which
    exists); the others are looked up in one query for the batch.
    """
    members = {group['uuid'] for record in records
               for group in record.groups}
    named = set()
    for record in records:
        if record.spec is not None:
            named.update(field_checks.named_groups(record.spec))
    unknown = named - members
    existing = set()
    if unknown:
        with exception.reraised_as(exception.ApiDatabaseError):
            with api_engine.connect() as conn:
                existing = api_queries.get_existing_groups(conn, unknown)
    known = frozenset(members | existing)
    for record in records:
        record.known_groups = known


def _learn_flavor_definitions(api_engine, records):
    """Give each record the current definitions of the batch's flavors.

    One query for the flavorids of the instances' embedded flavors; an
    instance whose flavor cannot be read is left to its decision.
    """
    flavorids = set()
    for record in records:
        flavorid = _embedded_flavorid(record)
        if flavorid is not None:
            flavorids.add(flavorid)
    definitions = {}
    if flavorids:
        with exception.reraised_as(exception.ApiDatabaseError):
            with api_engine.connect() as conn:
                definitions = api_queries.get_flavor_definitions(
                    conn, flavorids)
    for record in records:
        record.flavor_definitions = definitions


def _embedded_flavorid(record):
    """The flavorid of the instance's current flavor, or None."""
    if len(record.extras) != 1 or record.extras[0]['flavor'] is None:
        return None
    try:
        flavors = field_checks.instance_flavors(record.extras[0]['flavor'])
    except primitive.PrimitiveError:
        return None
    return flavors.key('cur')['flavorid']


def read_batch_rows(conn, uuids, checked_fields):
    """``read_cell_rows``' rows and the targets of failed resizes.

    ``uuids`` is a list of instance uuids, or a cell_queries.Page.

    Failed resizes only explain a drift; they are rarely any, and come
    with the migrations in progress, in the same query.
    """
    checked = set(checked_fields)
    in_progress, failed = cell_queries.get_migrations(conn, uuids)
    rows = {
        'extras': cell_queries.get_instance_extras(conn, uuids),
        'migrations': in_progress,
        'system_metadata': {},
        'block_devices': {},
    }
    if checked & field_checks.NEEDS_SYSTEM_METADATA:
        rows['system_metadata'] = cell_queries.get_system_metadata(
            conn, uuids)
    if checked & field_checks.NEEDS_BLOCK_DEVICES:
        rows['block_devices'] = cell_queries.get_root_block_devices(
            conn, uuids)
    return rows, failed


def read_instance(api_engine, cell_engine, instance_uuid, checked_fields,
                  instances=None):
    """The records of one instance (live or not), or [].

    ``instances`` is as assemble_records'.
    """
    with engines.synced_reads(cell_engine) as conn:
        found = cell_queries.get_instances(conn, [instance_uuid])
        if not found:
            return []
        page = read_page(conn, api_engine, list(found.values()),
                         checked_fields)
    return assemble_records(api_engine, page, checked_fields, instances)


def reread(cell_engine, records, checked_fields):
    """Fresh copies of ``records`` (by uuid) from the cell database."""
    if not records:
        return {}
    uuids = [record.instance['uuid'] for record in records]
    # Read just before the writes: on Galera, after the cluster's commits.
    with engines.synced_reads(cell_engine) as conn:
        instances = cell_queries.get_instances(conn, uuids)
        rows = read_cell_rows(conn, uuids, checked_fields)
    fresh = {}
    for record in records:
        uuid = record.instance['uuid']
        # An instance archived meanwhile reads as deleted.
        instance = instances.get(uuid) or dict(record.instance, deleted=-1)
        fresh[uuid] = dataclasses.replace(
            record, instance=instance, **cell_fields(rows, uuid))
    return fresh
