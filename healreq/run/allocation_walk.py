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

``stop_check()`` is called after each batch and each page of consumers:
when it raises (e.g. exception.Interrupted, on a signal), the walk ends
and the exception carries the report of what was checked so far.
"""

import dataclasses

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
from healreq.run import budget
from healreq.run import read_threads
from healreq.run import records

LOG = logging.getLogger(__name__)

# Pages read at once, each by a loader thread on its own cell and
# Placement connections, while the walk compares the page before.
LOADERS = 2


class AllocationWalk(object):
    """Walk the selected cells and compare every instance's allocations.

    ``run_context`` is a heal.context.RunContext (cells, engines,
    release); ``placement_engine`` the Placement database's engine.
    """

    def __init__(self, run_context, placement_engine, batch_size,
                 instance_uuid=None, cell_uuid=None):
        self.context = run_context
        self.placement_engine = placement_engine
        self.batch_size = batch_size
        self.instance_uuid = instance_uuid
        self.cell_uuid = cell_uuid
        self.report = checks.AllocationReport()
        self.release = releases.LATEST
        self._classes = None
        self._attributed = set()
        self.stop_check = _no_stop
        # No limits: only the hook between batches (see budget).
        self._pause = budget.Budget().pause

    def run(self):
        """Walk; return the AllocationReport.

        An Interrupted raised by ``stop_check`` ends the walk and carries
        the report of what was checked before.
        """
        try:
            return self._run()
        except exception.Interrupted as exc:
            exc.report = self.report
            raise

    def _run(self):
        cells = self.context.select_cells(self.instance_uuid, self.cell_uuid)
        detection = self.context.learn_release()
        # Read only: a release healreq would not write for still derives.
        self.release = detection.release or releases.LATEST
        self.report.release = self.release
        with exception.reraised_as(exception.PlacementDatabaseError):
            with self.placement_engine.connect() as conn:
                self._classes = placement_queries.get_resource_classes(conn)
        walked = []
        for cell in cells:
            try:
                self._walk_cell(cell)
                walked.append(cell)
            except exception.CellDatabaseError as exc:
                self.report.cell_errors.append(
                    {'cell_uuid': cell['uuid'], 'error': str(exc)})
            except exception.DB_ERRORS as exc:
                self.report.cell_errors.append(
                    {'cell_uuid': cell['uuid'],
                     'error': str(records.cell_error(cell, exc))})
        if not self.instance_uuid:
            self._attribute_the_rest(walked)
        return self.report

    def _walk_cell(self, cell):
        engine = self.context.cell_engine(cell)
        try:
            with engine.connect() as conn:
                nodes = cell_queries.get_compute_nodes(conn)
                if self.instance_uuid:
                    found = cell_queries.get_allocation_instances(
                        conn, [self.instance_uuid])
                    page = list(found.values())
                    if page:
                        self._batch(cell, page, self._read_batch(
                            engine, page), nodes)
                    return
                batches = read_threads.loaded(
                    _pages(conn, self.batch_size),
                    lambda page: (page, self._read_batch(engine, page)),
                    LOADERS)
                try:
                    for page, read in batches:
                        self._batch(cell, page, read, nodes)
                        self._between_batches()
                finally:
                    batches.close()
        finally:
            self.context.release(cell)

    def _read_batch(self, engine, instances):
        """A page's rows of every table, Placement's allocations included.

        Runs in a loader thread, on connections of its own: the server
        reads one page while the walk compares the one before.
        """
        uuids = [i['uuid'] for i in instances]
        with engine.connect() as conn:
            read = _BatchRows(
                extras=cell_queries.get_instance_extras(conn, uuids),
                sysmeta=cell_queries.get_system_metadata(conn, uuids),
                roots=cell_queries.get_root_block_devices(conn, uuids),
                migrations=cell_queries.get_all_migrations(conn, uuids))
        read.consumers = list(uuids) + [
            m['uuid'] for rows in read.migrations.values() for m in rows
            if m['uuid']]
        with exception.reraised_as(exception.PlacementDatabaseError):
            with self.placement_engine.connect() as placement:
                read.found = placement_queries.get_allocations(
                    placement, read.consumers, self._classes)
        return read

    def _batch(self, cell, instances, read, nodes):
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
            self.report.add(self._evaluate(
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
            with exception.reraised_as(exception.PlacementDatabaseError):
                with self.placement_engine.connect() as conn:
                    page = placement_queries.get_consumer_page(
                        conn, after, self.batch_size)
            if not page:
                return
            after = page[-1]
            rest = [uuid for uuid in page if uuid not in self._attributed]
            if rest:
                self._attribute(cells, rest)
            self._between_batches()

    def _between_batches(self):
        self.stop_check()
        self._pause()

    def _attribute(self, cells, consumers):
        remaining = set(consumers)
        for cell in cells:
            if not remaining:
                break
            engine = self.context.cell_engine(cell)
            try:
                with engine.connect() as conn:
                    migrations = cell_queries.get_migrations_by_uuid(
                        conn, sorted(remaining))
                    instances = cell_queries.get_allocation_instances(
                        conn, sorted(remaining - set(migrations)))
                    owners = cell_queries.get_allocation_instances(
                        conn, sorted({m['instance_uuid']
                                      for m in migrations.values()}))
            except exception.DB_ERRORS as exc:
                self.report.cell_errors.append(
                    {'cell_uuid': cell['uuid'],
                     'error': str(records.cell_error(cell, exc))})
                continue
            finally:
                self.context.release(cell)
            known = sorted(set(migrations) | set(instances))
            with exception.reraised_as(exception.PlacementDatabaseError):
                with self.placement_engine.connect() as conn:
                    found = placement_queries.get_allocations(
                        conn, known, self._classes)
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


def _no_stop():
    pass


def _pages(conn, batch_size):
    """The cell's live instances, page by page (keyset pagination)."""
    after = 0
    while True:
        page = cell_queries.get_allocation_instance_page(
            conn, after, batch_size)
        if not page:
            return
        yield page
        after = page[-1]['id']


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
