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


"""The heal engine: walks cells and batches, decides, and writes.

Per cell, live instances are read in keyset-paginated batches; each batch
costs one query per table in the cell and in the API database, whatever
its size, and is read by a thread while the previous one is evaluated
(``readahead``). Decisions are delegated to ``checks``; a write re-reads
the instance, re-decides, and swaps the spec only if the row still holds
the text that was read.
"""

from concurrent import futures
import dataclasses
import datetime
import threading
import time

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy.exc

from healreq.audit import store as audit_store
from healreq.db import api_queries
from healreq.db import cell_queries
from healreq.db import engines
from healreq.db import urls
from healreq.heal import checks
from healreq.heal import fields
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq.heal import readahead
from healreq.objects import primitive
from healreq.objects import versions

LOG = logging.getLogger(__name__)

_DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)
# How many of the newest specs tell which object versions to write.
VERSION_SAMPLE = 100
# Findings are written to the audit store in chunks of this many: one
# commit (and its fsyncs) per chunk rather than per batch.
FINDINGS_CHUNK = 1000
# A cell URL may fail to parse (ValueError, e.g. a non-numeric port) or to
# format (urls.TemplateError, a ValueError): both are per-cell problems.
_CELL_ERRORS = _DB_ERRORS + (ValueError,)


class InvalidInput(Exception):
    """The operator asked for something that does not exist or clashes."""


@dataclasses.dataclass
class Options:
    dry_run: bool = False
    instance_uuid: str = None
    cell_uuid: str = None
    max_count: int = None
    batch_size: int = 200
    collect_plan: bool = False
    workers: int = 1
    sleep: float = 0.0
    max_rate: float = None
    settings: checks.Settings = dataclasses.field(
        default_factory=checks.Settings)


class _FindingsLog(object):
    """A cell's findings on their way to the audit store, in chunks."""

    def __init__(self, audit, run_id):
        self._audit = audit
        self._run_id = run_id
        self._pending = []

    def add(self, findings):
        if self._audit is None:
            return
        self._pending.extend(findings)
        if len(self._pending) >= FINDINGS_CHUNK:
            self.flush()

    def flush(self):
        if self._pending:
            self._audit.record_findings(self._run_id, self._pending)
            self._pending = []


def _cell_fields(rows, uuid):
    """InstanceRecord fields of ``uuid`` from ``_read_cell_rows``' rows."""
    return {name: found.get(uuid, []) for name, found in rows.items()}


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None, microsecond=0)


class Engine(object):
    """One run of ``request-specs`` over the selected cells."""

    def __init__(self, api_engine, reference_url, options,
                 connect=engines.create_engine, clock=_utcnow, audit=None,
                 run_id=None):
        """Prepare a run.

        ``audit`` (an AuditStore) records findings and every change of
        run ``run_id`` before it is written; None records nothing.
        """
        self.audit = audit
        self.run_id = run_id
        # Called as progress(cell, cell_report, total) after each batch.
        self.progress = None
        self._sleep = time.sleep
        self._monotonic = time.monotonic
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._checked = 0
        self.api_engine = api_engine
        self.reference_url = reference_url
        self.options = options
        self._connect = connect
        self._clock = clock
        self.report = RunReport(dry_run=options.dry_run)
        self.profile = versions.VersionProfile()
        self._would_heal = 0

    # -- selection ---------------------------------------------------------

    def _select_cells(self):
        with self.api_engine.connect() as conn:
            cells = api_queries.get_cells(conn)
            if self.options.instance_uuid:
                mapping = api_queries.get_instance_mapping(
                    conn, self.options.instance_uuid)
                if mapping is None:
                    raise InvalidInput(
                        'instance %s has no instance mapping; check the '
                        'UUID or run nova-manage cell_v2 verify_instance'
                        % self.options.instance_uuid)
                return [c for c in cells if c['id'] == mapping['cell_id']]
        if self.options.cell_uuid:
            selected = [c for c in cells
                        if c['uuid'] == self.options.cell_uuid]
            if not selected:
                raise InvalidInput('cell %s is not in cell_mappings'
                                   % self.options.cell_uuid)
            if self.options.cell_uuid == api_queries.CELL0_UUID:
                raise InvalidInput('cell0 only holds instances that were '
                                   'never scheduled; nothing to heal there')
            return selected
        return [c for c in cells if c['uuid'] != api_queries.CELL0_UUID]

    def _learn_versions(self):
        """Learn the object versions the deployment's Nova writes now.

        The newest spec rows were written by the running Nova; a fixed
        sample, read once, keeps every decision of the run independent of
        the order in which instances are visited.
        """
        with self.api_engine.connect() as conn:
            texts = api_queries.get_newest_specs(conn, VERSION_SAMPLE)
        for text in texts:
            try:
                self.profile.observe(primitive.load_json(text, 'spec'))
            except primitive.PrimitiveError:
                continue

    def run(self):
        """Process every selected cell; return the RunReport."""
        cells = self._select_cells()
        self._learn_versions()
        self._started = self._monotonic()
        if self.options.instance_uuid and not cells:
            self._report_unscheduled(self.options.instance_uuid)
            return self.report
        if self.options.workers > 1 and len(cells) > 1:
            self._run_in_parallel(cells)
            return self.report
        for position, cell in enumerate(cells):
            if self._limit_reached():
                remaining = cells[position:]
                self.report.more_remain = (self.report.more_remain
                                           or self._any_instances(remaining))
                break
            self._process_cell(cell, self.report)
        return self.report

    def _run_in_parallel(self, cells):
        """Process cells in worker threads, merged in cell order.

        Each cell has its own connection pool; the waits on the databases
        overlap. With --max-count the workers share one count, so cells
        still running stop when it is reached.
        """
        def process(cell):
            sink = RunReport(dry_run=self.options.dry_run)
            if self._limit_reached():
                sink.more_remain = self._any_instances([cell])
            else:
                self._process_cell(cell, sink)
            return sink

        with futures.ThreadPoolExecutor(
                max_workers=self.options.workers) as pool:
            sinks = list(pool.map(process, cells))
        for sink in sinks:
            self.report.cells.extend(sink.cells)
            self.report.findings.extend(sink.findings)
            self.report.notices.extend(sink.notices)
            self.report.planned.extend(sink.planned)
            self.report.more_remain |= sink.more_remain

    def _report_unscheduled(self, instance_uuid):
        cell = CellReport(uuid=None, name=None)
        finding = Finding(instance_uuid=instance_uuid, cell_uuid=None,
                          status=Status.SKIPPED, reason='not-scheduled',
                          detail='the instance mapping has no cell yet')
        cell.count(finding)
        self.report.cells.append(cell)
        self.report.findings.append(finding)

    # -- per cell ----------------------------------------------------------

    def _cell_url(self, cell):
        return urls.format_cell_url(cell['database_connection'] or '',
                                    self.reference_url)

    def _process_cell(self, cell, sink):
        """Process one cell; its findings go to ``sink`` (a RunReport)."""
        report = CellReport(uuid=cell['uuid'], name=cell['name'])
        sink.cells.append(report)
        if cell['uuid'] == api_queries.CELL0_UUID:
            # Only reachable with --instance: never touch cell0.
            finding = Finding(self.options.instance_uuid, cell['uuid'],
                              Status.SKIPPED, 'cell0',
                              'the instance is in cell0 (never scheduled)')
            report.count(finding)
            sink.findings.append(finding)
            return
        LOG.info('Looking for instances in cell %s(%s)',
                 cell['uuid'], cell['name'])
        try:
            engine = self._connect(self._cell_url(cell))
        except _CELL_ERRORS as exc:
            self._cell_failed(cell, report, exc)
            return
        log = _FindingsLog(self.audit, self.run_id)
        try:
            self._walk_cell(cell, engine, report, sink, log)
        except _DB_ERRORS as exc:
            self._cell_failed(cell, report, exc)
        finally:
            engine.dispose()
            log.flush()

    def _cell_failed(self, cell, report, exc):
        report.error = self._describe_cell_error(exc)
        LOG.error('Cell %s(%s): %s', cell['uuid'], cell['name'],
                  report.error)

    def _describe_cell_error(self, exc):
        if isinstance(exc, ValueError):
            return urls.mask_password('invalid cell database URL: %s' % exc)
        if isinstance(exc, db_exc.DBConnectionError):
            kind = 'cell database unreachable'
        else:
            kind = 'cell database error'
        original = getattr(exc, 'inner_exception', None) or exc
        message = str(getattr(original, 'orig', None) or original)
        return urls.mask_password('%s: %s' % (kind, message.splitlines()[0]
                                              if message else type(exc)))

    def _walk_cell(self, cell, engine, report, sink, log):
        if self.options.instance_uuid:
            records = self._read_instance(engine, self.options.instance_uuid)
            if not records:
                raise InvalidInput(
                    'instance %s is mapped to cell %s but is not in its '
                    'database' % (self.options.instance_uuid, cell['uuid']))
            self._process_batch(cell, engine, records, report, sink, log)
            return
        total = None
        if self.progress is not None:
            with engine.connect() as conn:
                total = cell_queries.count_live_instances(conn)
            self.progress(cell, report, total)
        with readahead.ReadAhead(self._pages(engine)) as pages:
            for records in pages:
                processed = self._process_batch(cell, engine, records,
                                                report, sink, log)
                if self.progress is not None:
                    self.progress(cell, report, total)
                self._throttle()
                if processed < len(records):
                    sink.more_remain = True
                    return
                if self._limit_reached():
                    with engine.connect() as conn:
                        sink.more_remain = cell_queries.has_instances_after(
                            conn, records[-1].instance['id'])
                    return

    def _pages(self, engine):
        """Yield the records of each page of live instances, by id."""
        after_id = 0
        while True:
            with engine.connect() as conn:
                page = cell_queries.get_instance_page(
                    conn, after_id, self.options.batch_size)
                if not page:
                    return
                rows, failed = self._read_batch_rows(
                    conn, [i['uuid'] for i in page])
            yield self._records(page, rows, failed)
            after_id = page[-1]['id']

    def _throttle(self):
        """Pause after a batch: --sleep, then down to --max-rate."""
        if self.options.sleep:
            self._sleep(self.options.sleep)
        if self.options.max_rate:
            with self._lock:
                checked = self._checked
            ahead = (checked / self.options.max_rate
                     - (self._monotonic() - self._started))
            if ahead > 0:
                self._sleep(ahead)

    def _any_instances(self, cells):
        """Whether any of ``cells`` has a live instance (unknown: yes)."""
        for cell in cells:
            try:
                engine = self._connect(self._cell_url(cell))
                try:
                    with engine.connect() as conn:
                        if cell_queries.has_instances_after(conn, 0):
                            return True
                finally:
                    engine.dispose()
            except _CELL_ERRORS:
                return True
        return False

    # -- per batch ---------------------------------------------------------

    def _read_instance(self, engine, instance_uuid):
        """The records of one instance (live or not), or []."""
        with engine.connect() as conn:
            found = cell_queries.get_instances(conn, [instance_uuid])
            if not found:
                return []
            rows, failed = self._read_batch_rows(conn, [instance_uuid])
        return self._records(list(found.values()), rows, failed)

    def _read_batch_rows(self, conn, uuids):
        """``_read_cell_rows`` and the targets of failed resizes.

        Failed resizes only explain a drift; they are rarely any, but
        reading them with the batch keeps a query off the evaluating
        thread, and the re-read before a write can leave them out.
        """
        return (self._read_cell_rows(conn, uuids),
                cell_queries.get_failed_resize_flavor_ids(conn, uuids))

    def _read_cell_rows(self, conn, uuids):
        """The cell rows the checked fields need, one query per table."""
        checked = set(self.options.settings.checked_fields)
        rows = {
            'extras': cell_queries.get_instance_extras(conn, uuids),
            'migrations': cell_queries.get_migrations_in_progress(
                conn, uuids),
            'system_metadata': {},
            'block_devices': {},
        }
        if checked & fields.NEEDS_SYSTEM_METADATA:
            rows['system_metadata'] = cell_queries.get_system_metadata(
                conn, uuids)
        if checked & fields.NEEDS_BLOCK_DEVICES:
            rows['block_devices'] = cell_queries.get_root_block_devices(
                conn, uuids)
        return rows

    def _records(self, instances, rows, failed_resizes):
        """InstanceRecords of ``instances``, with their API rows read."""
        uuids = [i['uuid'] for i in instances]
        with self.api_engine.connect() as conn:
            mappings = api_queries.get_instance_mappings(conn, uuids)
            specs = api_queries.get_request_specs(conn, uuids)
        records = []
        for instance in instances:
            uuid = instance['uuid']
            record = checks.InstanceRecord(
                instance=instance, mapping=mappings.get(uuid),
                spec_row=specs.get(uuid),
                failed_resize_flavor_ids=failed_resizes.get(uuid,
                                                            frozenset()),
                **_cell_fields(rows, uuid))
            checks.parse_spec(record)
            records.append(record)
        return records

    def _process_batch(self, cell, engine, records, report, sink, log):
        """Evaluate and heal a batch; return how many were processed.

        Findings go to ``sink`` (a RunReport) and ``log`` (_FindingsLog).
        """
        now = self._clock()
        evaluations = [checks.evaluate(record, cell, now,
                                       self.options.settings, self.profile)
                       for record in records]
        # Instances about to be written are read again, all at once, right
        # before their writes: a decision is only acted upon if it still
        # holds for the records as they are now. A dry run does the same,
        # so that it reports what a heal would do.
        fresh = self._reread(engine, [
            record for record, evaluation in zip(records, evaluations)
            if evaluation.finding.status is Status.DRIFTED])
        processed = len(records)
        listed = []
        for position, (record, evaluation) in enumerate(
                zip(records, evaluations)):
            if self._limit_reached():
                processed = position
                break
            finding = evaluation.finding
            if finding.status is Status.DRIFTED and not self._heal(
                    cell, record, fresh[record.instance['uuid']],
                    evaluation, sink):
                processed = position
                break
            report.count(finding)
            if finding.status is Status.CONSISTENT:
                if finding.notes:
                    sink.notices.append(finding)
            else:
                listed.append(finding)
        with self._lock:
            self._checked += processed
        sink.findings.extend(listed)
        log.add(listed)
        return processed

    # -- writing -----------------------------------------------------------

    def _limit_reached(self):
        limit = self.options.max_count
        with self._lock:
            return limit is not None and self._would_heal >= limit

    def _reserve_heal(self):
        """Take one of the --max-count heals; False when none is left."""
        with self._lock:
            limit = self.options.max_count
            if limit is not None and self._would_heal >= limit:
                return False
            self._would_heal += 1
            return True

    def _release_heal(self):
        with self._lock:
            self._would_heal -= 1

    def _heal(self, cell, record, fresh, evaluation, sink):
        """Re-check the instance on ``fresh``, then compare-and-swap its spec.

        Returns False, touching nothing, when --max-count is used up.
        """
        finding = evaluation.finding
        if not self._still_holds(cell, fresh, evaluation):
            return True
        if not self._reserve_heal():
            return False
        if self.options.dry_run:
            if self.options.collect_plan:
                sink.planned.append(
                    (finding, record.spec_row, evaluation.new_spec))
            return True
        change_id = None
        if self.audit is not None:
            change_id = self.audit.intent(
                self.run_id, finding.instance_uuid, finding.cell_uuid,
                record.spec_row['id'], finding.drift,
                record.spec_row['spec'], evaluation.new_spec)
        swapped = self._swap(record.spec_row, evaluation.new_spec)
        if change_id is not None:
            self.audit.resolve(change_id, audit_store.APPLIED if swapped
                               else audit_store.REFUSED)
        if swapped:
            finding.status = Status.HEALED
            LOG.info('Healed request spec of instance %s: %s',
                     finding.instance_uuid,
                     '; '.join(str(c) for c in finding.changes))
        else:
            self._release_heal()
            finding.status = Status.CONFLICT
            finding.reason = 'spec-changed'
            finding.detail = ('request_specs.spec changed after it was '
                              'read; left alone, run again to re-check')
        return True

    def _still_holds(self, cell, fresh, evaluation):
        """Whether the fresh records lead to the same new spec.

        If not, the finding becomes a conflict and nothing is written.
        """
        again = checks.evaluate(fresh, cell, self._clock(),
                                self.options.settings, self.profile)
        if again.new_spec == evaluation.new_spec:
            return True
        finding = evaluation.finding
        finding.status = Status.CONFLICT
        finding.reason = 'instance-changed'
        finding.detail = ('the instance changed while it was being '
                          'checked (now: %s%s); left alone' % (
                              again.finding.status.value,
                              ', %s' % again.finding.reason
                              if again.finding.reason else ''))
        return False

    def _reread(self, engine, records):
        """Fresh copies of ``records`` (by uuid) from the cell database."""
        if not records:
            return {}
        uuids = [record.instance['uuid'] for record in records]
        with engine.connect() as conn:
            instances = cell_queries.get_instances(conn, uuids)
            rows = self._read_cell_rows(conn, uuids)
        fresh = {}
        for record in records:
            uuid = record.instance['uuid']
            # An instance archived meanwhile reads as deleted.
            instance = instances.get(uuid) or dict(record.instance,
                                                   deleted=-1)
            fresh[uuid] = dataclasses.replace(
                record, instance=instance, **_cell_fields(rows, uuid))
        return fresh

    @oslo_db_api.wrap_db_retry(max_retries=5, retry_on_deadlock=True)
    def _swap(self, spec_row, new_spec):
        with self.api_engine.begin() as conn:
            return api_queries.swap_request_spec(
                conn, spec_row['id'], spec_row['instance_uuid'],
                spec_row['spec'], new_spec, self._clock())
