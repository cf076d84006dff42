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

"""The walk of ``nova-heal allocations``: read, compare, report. Read only.

Each cell is read in batches of live instances (keyset pagination, one
query per table per batch); the Placement allocations of a batch's
consumers (its instances and all their migrations) in one query. The
rows of the next pages are read in loader threads while the walk
compares the current one (see read_threads.loaded). A final
pass attributes what the walk cannot reach: consumers holding
allocations that are migrations of deleted instances, or soft-deleted
migrations. Consumers that no selected cell knows as an instance or a
migration are counted (``unattributed``), never judged: they may belong
to another cell, to a cell not selected, or to a service other than
Nova.

``stop_check()`` is called after each batch, each cell and each page of
consumers, and while a read waits (for a lock another session holds):
when it raises (e.g. exception.Interrupted, on a signal), the walk ends
at once, reads nothing more, and the exception carries the report of
what was checked so far.

``--instance`` is checked in the cell that holds it, as request-specs
finds it: the mapped cell, else the others (an error,
``instance-mapped-elsewhere``, unless an operation is in flight).
"""

import dataclasses
import functools

from oslo_log import log as logging

from healreq.db import cell_queries
from healreq.db import placement_queries
from healreq import exception
from healreq.heal import allocation_checks as checks
from healreq.heal import decisions
from healreq.heal import field_checks
from healreq.objects import allocations as allocation_obj
from healreq.objects import flavor as flavor_obj
from healreq.objects import image_fields
from healreq.objects import numa as numa_obj
from healreq.objects import primitive
from healreq import releases
from healreq.run import audit_walk
from healreq.run import read_threads
from healreq.run import records

LOG = logging.getLogger(__name__)

# Pages read at once, each by a loader thread on its own cell and
# Placement connections, while the walk compares the page before.
LOADERS = 2


class AllocationWalk(audit_walk.ReadOnlyWalk):
    """Walk the selected cells and compare every instance's allocations.

    See audit_walk.ReadOnlyWalk for ``run_context`` and
    ``placement_engine``. ``progress``, if set, gets ``planned(cell,
    total)`` for every cell first, then ``advanced(cell, done,
    mismatched)`` after each batch.
    """

    def __init__(self, run_context, placement_engine, batch_size,
                 instance_uuid=None, cell_uuid=None):
        super().__init__(run_context, placement_engine, batch_size,
                         checks.AllocationReport(), cell_uuid=cell_uuid)
        self.instance_uuid = instance_uuid
        self.release = releases.LATEST
        self._classes = None
        self._attributed = set()
        self.progress = None

    def _run(self):
        cells = self.context.select_cells(self.instance_uuid, self.cell_uuid)
        detection = self.context.learn_release()
        # Read only: a release healreq would not write for still derives.
        self.release = detection.release or releases.LATEST
        self.report.release = self.release
        self._classes = self._placement(
            placement_queries.get_resource_classes)
        if self.instance_uuid:
            self._walk_instance(cells[0] if cells else None)
            return self.report
        if self.progress is not None:
            self.context.announce_cells(cells, self.progress, self._query)
        walked = []
        for cell in cells:
            if self._walked(cell, self._walk_cell):
                walked.append(cell)
            # A read that failed may have outlasted a signal.
            self.stop_check()
        self._attribute_the_rest(walked)
        return self.report

    def _walk_cell(self, cell, engine):
        nodes = self._query(engine, cell_queries.get_compute_nodes)
        batches = read_threads.loaded(
            _pages(functools.partial(self._query, engine), self.batch_size),
            lambda read: (read[1], self._read_batch(engine, read[1],
                                                    read[0])),
            LOADERS, self.stop_check)
        counts = _CellCounts(self.report)
        try:
            for page, read in batches:
                self._batch(cell, page, read, nodes)
                if self.progress is not None:
                    self.progress.advanced(cell, *counts.so_far())
                self._between_batches()
        finally:
            batches.close()
        return True

    def _walk_instance(self, mapped):
        """Check --instance in the cell that holds it.

        ``mapped`` is the cell its mapping names (None: none, or one not
        in cell_mappings). If it does not hold the instance, the other
        cells are read as request-specs reads them
        (RunContext.find_elsewhere: skipped as not scheduled if none holds
        it and its mapping names no cell yet, else InvalidInput).
        """
        if mapped is not None:
            held = self._walked(mapped, self._check_if_held)
            if held is not False:
                return  # checked there, or the cell's failure reported
        found = self.context.find_elsewhere(
            self.instance_uuid, mapped, self._read_instance)
        if found is None:
            self.report.add(checks.unscheduled_result(self.instance_uuid))
            return
        cell, _, page = found
        mapping = self.context.instance_mapping(self.instance_uuid)
        self._walked(cell, functools.partial(self._check_page, page=page,
                                             mapping=mapping))

    def _check_if_held(self, cell, engine):
        """Check --instance if ``cell`` holds it; whether it does."""
        page = self._read_instance(cell, engine)
        if page:
            self._check_page(cell, engine, page)
        return bool(page)

    def _read_instance(self, cell, engine):
        """The row of --instance in ``cell``'s database, in a list (or [])."""
        return list(self._query(engine, cell_queries.get_allocation_instances,
                                [self.instance_uuid]).values())

    def _check_page(self, cell, engine, page, mapping=None):
        """Check the instance of --instance, whose row is ``page``.

        ``mapping``, its instance mapping, is given when the cell was
        found by looking beyond the cell the mapping names.
        """
        nodes = self._query(engine, cell_queries.get_compute_nodes)
        read = read_threads.interruptible(
            functools.partial(self._read_batch, engine, page), self.stop_check)
        self._batch(cell, page, read, nodes, mapping)

    def _read_batch(self, engine, instances, after_id=None):
        """A page's rows of every table, Placement's allocations included.

        Runs in a loader thread, on connections of its own: the server
        reads one page while the walk compares the one before. With
        ``after_id``, ``instances`` are a page of the walk: their rows
        are read by the page's range of ids (cell_queries.Page).
        """
        uuids = [i['uuid'] for i in instances]
        which = uuids if after_id is None else cell_queries.Page(
            after_id, instances[-1]['id'])
        with engine.connect() as conn:
            read = _BatchRows(*(_only(uuids, query(conn, which)) for query in (
                cell_queries.get_instance_extras,
                cell_queries.get_system_metadata,
                cell_queries.get_root_block_devices,
                cell_queries.get_all_migrations)))
        read.consumers = list(uuids) + [
            m['uuid'] for rows in read.migrations.values() for m in rows
            if m['uuid']]
        with exception.reraised_as(exception.PlacementDatabaseError):
            with self.placement_engine.connect() as placement:
                read.found = placement_queries.get_allocations(
                    placement, read.consumers, self._classes)
        return read

    def _batch(self, cell, instances, read, nodes, mapping=None):
        self._attributed.update(read.consumers)
        found = read.found
        for instance in instances:
            uuid = instance['uuid']
            mine = read.migrations.get(uuid, [])
            own = {uuid: found[uuid]} if uuid in found else {}
            own.update((m['uuid'], found[m['uuid']]) for m in mine
                       if m['uuid'] in found)
            record = checks.AllocationRecord(
                instance=instance, cell_uuid=cell['uuid'], migrations=mine,
                compute_node=nodes.get((instance['host'], instance['node'])),
                found=own)
            self.report.instances_checked += 1
            result = None
            if mapping is not None:
                result = checks.misplaced_result(record, mapping, cell)
            self.report.add(result or self._evaluate(
                record, read.extras.get(uuid, []),
                read.sysmeta.get(uuid, []),
                (read.roots.get(uuid) or [None])[0]))

    def _evaluate(self, record, extras, sysmeta, root_bdm):
        instance = record.instance
        if checks.skip_reason(record) is not None:
            return checks.evaluate(record)
        if _expects_nothing(instance):
            return checks.evaluate(record, None)
        if len(extras) != 1:
            return checks.error_result(
                record, 'instance-extra-missing',
                'instance %s has %d live instance_extra rows'
                % (instance['uuid'], len(extras)))
        if record.compute_node is None:
            return checks.error_result(
                record, 'compute-node-missing',
                'no live compute node %s/%s'
                % (instance['host'], instance['node']))
        if (record.compute_node['hypervisor_type'] or '').lower() == 'ironic':
            return checks.AllocationResult(
                instance['uuid'], record.cell_uuid, checks.SKIPPED,
                reason='ironic', not_checked=('ironic',))
        try:
            flavor = flavor_obj.parse_instance_flavors(
                extras[0]['flavor'])['cur'][primitive.DATA]
        except primitive.PrimitiveError as exc:
            return checks.error_result(record, 'instance-flavor-unparsable',
                                       str(exc))
        # Keyed by the items the image derivation reads, as request-specs
        # keys it: instances of one image share it whoever owns them.
        system_metadata, items = decisions.read_system_metadata(sysmeta)
        inputs = field_checks.Inputs(
            instance=dict(instance), flavors=None,
            system_metadata=system_metadata, system_metadata_items=items,
            root_bdm=root_bdm, release=self.release)
        try:
            image = inputs.image()
        except field_checks.DerivationError as exc:
            return checks.error_result(record, 'instance-image-invalid',
                                       str(exc))
        is_bfv = inputs.is_bfv()
        try:
            expected = allocation_obj.expected_resources(
                flavor, image['properties'], is_bfv, self.release)
            heal = allocation_obj.heal_allocations_resources(
                flavor, is_bfv, self.release)
        except (numa_obj.ConstraintError, primitive.PrimitiveError,
                image_fields.ImageMetaError, ValueError, TypeError) as exc:
            return checks.error_result(record, 'derivation-failed',
                                       '%s: %s' % (type(exc).__name__, exc))
        return checks.evaluate(record, expected, heal)

    def _attribute_the_rest(self, cells):
        """Judge consumers holding allocations that the walk did not reach.

        Migration consumers of deleted instances, and of soft-deleted
        migration rows, are found by their uuid in the walked cells'
        migrations; a consumer that is a deleted instance is reported
        unexpected.
        """
        after = ''
        while True:
            page = self._placement(placement_queries.get_consumer_page,
                                   after, self.batch_size)
            if not page:
                return
            after = page[-1]
            rest = [uuid for uuid in page if uuid not in self._attributed]
            if rest:
                self._attribute(cells, rest)
            self._between_batches()

    def _attribute(self, cells, consumers):
        remaining = set(consumers)
        for cell in cells:
            if not remaining:
                break
            engine = self.context.cell_engine(cell)
            try:
                migrations, instances, owners = self._query(
                    engine, _consumers_known, remaining)
            except exception.DB_ERRORS as exc:
                self.report.cell_errors.append(
                    {'cell_uuid': cell['uuid'],
                     'error': str(records.cell_error(cell, exc))})
                continue
            finally:
                self.context.release(cell)
            known = sorted(set(migrations) | set(instances))
            found = self._placement(placement_queries.get_allocations, known,
                                    self._classes)
            for uuid, migration in sorted(migrations.items()):
                if uuid in found:
                    self.report.add(checks.orphan_result(
                        cell['uuid'], owners.get(migration['instance_uuid']),
                        migration, found[uuid]))
            for uuid, instance in sorted(instances.items()):
                if uuid in found and instance['deleted']:
                    self.report.add(checks.evaluate(
                        checks.AllocationRecord(
                            instance=instance, cell_uuid=cell['uuid'],
                            found={uuid: found[uuid]}), None))
            remaining -= set(known)
        self.report.unattributed += len(remaining)


class _CellCounts(object):
    """A cell's instances checked and mismatches found, for progress."""

    def __init__(self, report):
        self._report = report
        self._checked_before = report.instances_checked
        self._seen = len(report.results)
        self._found = 0

    def so_far(self):
        """``(checked, mismatched)`` in the cell since its walk began."""
        new = self._report.results[self._seen:]
        self._seen += len(new)
        self._found += sum(1 for r in new if r.status == checks.MISMATCH)
        return (self._report.instances_checked - self._checked_before,
                self._found)


def _pages(query, batch_size):
    """The cell's live instances, page by page (keyset pagination).

    ``query(function, *args)`` runs a function of cell_queries on the
    cell. Yields each page with the id it follows.
    """
    after = 0
    while True:
        page = query(cell_queries.get_allocation_instance_page, after,
                     batch_size)
        if not page:
            return
        yield after, page
        after = page[-1]['id']


def _only(uuids, by_uuid):
    """``by_uuid`` but for ``uuids`` (a page's range may have gained one)."""
    wanted = set(uuids)
    return {uuid: found for uuid, found in by_uuid.items() if uuid in wanted}


def _consumers_known(conn, consumers):
    """The cell's migrations and instances among ``consumers``.

    ``(migrations, instances, owners)``, each by uuid; ``owners`` are
    the instances of those migrations.
    """
    migrations = cell_queries.get_migrations_by_uuid(conn, sorted(consumers))
    instances = cell_queries.get_allocation_instances(
        conn, sorted(set(consumers) - set(migrations)))
    owners = cell_queries.get_allocation_instances(
        conn, sorted({m['instance_uuid'] for m in migrations.values()}))
    return migrations, instances, owners


@dataclasses.dataclass
class _BatchRows:
    """What a page of instances needs besides the instance rows."""
    extras: dict
    sysmeta: dict
    roots: dict
    migrations: dict
    consumers: list = dataclasses.field(default_factory=list)
    found: dict = dataclasses.field(default_factory=dict)


def _expects_nothing(instance):
    """Nova holds no allocation for a shelved-offloaded or hostless one."""
    return instance['vm_state'] == 'shelved_offloaded' or not instance['host']
