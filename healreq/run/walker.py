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


"""The walker of request-specs: cells, then batches, then instances.

Per cell, live instances are read in keyset-paginated batches; each batch
costs one query per table in the cell and in the API database, whatever
its size, and is read by a process of its own while the walk evaluates
the batches read before (``reader``). Decisions are delegated to
``decisions``; a write re-reads the instance, re-decides, and swaps the
spec only if the row still holds the text that was read (``writer``).
The walk takes the next page from the reader while a batch's instances
to write are read again.
The databases and the release come from the run's ``context``,
--max-count and the pace from its ``budget``.
"""

import contextlib

from oslo_log import log as logging

from healreq.db import api_queries
from healreq.db import cell_queries
from healreq import exception
from healreq.heal import decisions
from healreq.heal import findings
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq import masking
from healreq.run import parallel
from healreq.run import readahead
from healreq.run import reader
from healreq.run import records
from healreq.run import writer as spec_writer

LOG = logging.getLogger(__name__)

# Findings are written to the audit store in chunks of this many: one
# commit (and its fsyncs) per chunk rather than per batch.
FINDINGS_CHUNK = 1000


class _FindingsLog(object):
    """A cell's findings on their way to the audit store, in chunks.

    A store that refuses findings stops their recording, not the run
    (see findings.record): the error goes to ``sink`` (a RunReport).
    """

    def __init__(self, audit, run_id, sink):
        self._audit = audit
        self._run_id = run_id
        self._sink = sink
        self._pending = []

    def add(self, listed):
        if self._audit is None or self._sink.audit_error is not None:
            return
        self._pending.extend(listed)
        if len(self._pending) >= FINDINGS_CHUNK:
            self.flush()

    def flush(self):
        pending, self._pending = self._pending, []
        if not pending or self._sink.audit_error is not None:
            return
        # A refusal becomes the sink's audit_error: the run prints it once.
        findings.record(self._audit, self._run_id, pending, self._sink)


class Walker(object):
    """Walks the selected cells of one run of ``request-specs``.

    ``context`` is the run's RunContext, ``options`` its api.Options,
    ``budget`` its Budget and ``writer`` the SpecWriter of its changes;
    ``audit`` (an AuditStore, or None) records the findings of run
    ``run_id``. ``progress(cell, cell_report, total)``, if set, is called
    after each batch; ``stop_check()`` after each batch and while the walk
    waits for a cell database: it raises to stop the run.
    """

    def __init__(self, context, options, budget, writer, audit=None,
                 run_id=None):
        self.context = context
        self.options = options
        self.budget = budget
        self.writer = writer
        self.audit = audit
        self.run_id = run_id
        self.progress = None
        self.stop_check = _no_stop
        self.report = RunReport(dry_run=options.dry_run)
        self._reader = None

    def run(self):
        """Process every selected cell; return the RunReport."""
        cells = self.context.select_cells(self.options.instance_uuid,
                                          self.options.cell_uuid)
        with self._reading_ahead(cells):
            self._run(cells)
        return self.report

    def _run(self, cells):
        self.report.release = self.context.learn_release()
        self.context.check_writable(self.writer, (
            spec_writer.UPDATE, spec_writer.INSERT)
            if self.options.settings.create_missing else (
                spec_writer.UPDATE,))
        self.budget.start()
        if self.options.instance_uuid and not cells:
            self._report_unscheduled(self.options.instance_uuid)
            return
        if self._parallel(cells):
            # With --max-count the workers share one budget, so cells
            # still running stop when it is used up.
            parallel.run_cells(cells, self.options.workers,
                               self._process_cell_in_budget, self.report)
            return
        for position, cell in enumerate(cells):
            if self.budget.used_up():
                remaining = cells[position:]
                self.report.more_remain = (self.report.more_remain
                                           or self._any_instances(remaining))
                break
            self._process_cell(cell, self.report)

    def _parallel(self, cells):
        return self.options.workers > 1 and len(cells) > 1

    @contextlib.contextmanager
    def _reading_ahead(self, cells):
        """Within the block, one child reads the cells of a walk in turn.

        Started before the release is learnt, so that the first pages are
        read meanwhile; a parallel walk, or one of a single instance,
        reads nothing ahead. A cell whose database URL is unusable is
        left to its walk to report.
        """
        if self.options.instance_uuid or self._parallel(cells):
            yield
            return
        specs = []
        for cell in cells:
            try:
                specs.append(self.context.read_spec(
                    cell, self.options.batch_size,
                    self.options.settings.read_fields))
            except exception.CellDatabaseError:
                continue
        if not specs:
            yield
            return
        with reader.CellsReader(specs, self.stop_check) as self._reader:
            try:
                yield
            finally:
                self._reader = None

    def _process_cell_in_budget(self, cell, sink):
        """Process ``cell`` unless --max-count is used up (a worker's job).

        If it is, ``sink`` only says whether the cell has instances left.
        """
        if self.budget.used_up():
            sink.more_remain = self._any_instances([cell])
        else:
            self._process_cell(cell, sink)

    def _report_unscheduled(self, instance_uuid):
        cell = CellReport(uuid=None, name=None)
        finding = Finding(instance_uuid=instance_uuid, cell_uuid=None,
                          status=Status.SKIPPED, reason='not-scheduled',
                          detail='the instance mapping has no cell yet')
        cell.count(finding)
        self.report.cells.append(cell)
        self.report.findings.append(finding)

    # -- per cell ----------------------------------------------------------

    def _process_cell(self, cell, sink):
        """Process one cell; its findings go to ``sink`` (a RunReport).

        Errors of the cell's database fail the cell only; errors of the
        API database or of the audit store end the run.
        """
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
            engine = self.context.cell_engine(cell)
        except exception.CellDatabaseError as exc:
            self._cell_failed(cell, report, exc)
            return
        log = _FindingsLog(self.audit, self.run_id, sink)
        try:
            self._walk_cell(cell, engine, report, sink, log)
        except exception.DB_ERRORS as exc:
            self._cell_failed(cell, report, records.cell_error(cell, exc))
        except exception.CellDatabaseError as exc:
            self._cell_failed(cell, report, exc)
        finally:
            self.context.release(cell)
            log.flush()

    def _cell_failed(self, cell, report, exc):
        report.error = str(exc)
        LOG.error('Cell %s(%s): %s', cell['uuid'], cell['name'],
                  report.error)

    def _walk_cell(self, cell, engine, report, sink, log):
        checked = self.options.settings.read_fields
        if self.options.instance_uuid:
            found = records.read_instance(self.context.api_engine, engine,
                                          self.options.instance_uuid,
                                          checked,
                                          self.context.hinted_instances)
            if not found:
                self._process_elsewhere(cell, sink, log)
                return
            self._process_batch(cell, engine, found, report, sink, log)
            return
        total = None
        if self.progress is not None:
            total = self._read(engine, cell_queries.count_live_instances)
            self.progress(cell, report, total)
        fields = self.options.settings.read_fields
        with self._cell_pages(cell, fields) as pages:
            pages = iter(pages)
            page = next(pages, None)
            while page is not None:
                batch = records.assemble_records(
                    self.context.api_engine, page, fields,
                    self.context.hinted_instances)
                begun = self._begin_batch(cell, engine, batch)
                # The next page is received while the database reads this
                # batch's instances to write again.
                try:
                    page = next(pages, None)
                except Exception as exc:
                    page = exc  # raised once this batch is done
                processed = self._finish_batch(cell, batch, begun, report,
                                               sink, log)
                if self.progress is not None:
                    self.progress(cell, report, total)
                self.stop_check()
                self.budget.pause()
                if processed < len(batch):
                    sink.more_remain = True
                    return
                if self.budget.used_up():
                    with engine.connect() as conn:
                        sink.more_remain = cell_queries.has_instances_after(
                            conn, batch[-1].instance['id'])
                    return
                if isinstance(page, Exception):
                    raise page
                # Let go of this batch before the next is assembled, or
                # the walk would hold two batches of parsed specs at once.
                batch = begun = None

    def _cell_pages(self, cell, fields):
        """A context manager: the cell's pages, read by a child process.

        That of the walk if it reads the cell, else one of the cell's own.
        """
        if self._reader is not None and self._reader.reads(cell['uuid']):
            return contextlib.nullcontext(self._reader.pages(cell['uuid']))
        return reader.CellReader(self.context.read_spec(
            cell, self.options.batch_size, fields), self.stop_check)

    def _read(self, engine, query):
        """``query(conn)`` on ``engine``; the run may stop meanwhile."""
        def read():
            with engine.connect() as conn:
                return query(conn)
        return readahead.interruptible(read, self.stop_check)

    def _process_elsewhere(self, mapped_cell, sink, log):
        """Process --instance in the cell that holds it, not the mapped one.

        A full run reports such an instance where its row is, as an error
        (``instance-mapped-elsewhere``); so does --instance. Cells that
        cannot be read are passed over. InvalidInput if no cell holds it.
        """
        uuid = self.options.instance_uuid
        for cell in self.context.cells():
            if cell['uuid'] in (mapped_cell['uuid'],
                                api_queries.CELL0_UUID):
                continue
            try:
                engine = self.context.cell_engine(cell)
                found = records.read_instance(
                    self.context.api_engine, engine, uuid,
                    self.options.settings.read_fields,
                    self.context.hinted_instances)
            except exception.DB_ERRORS + (exception.CellDatabaseError,):
                self.context.release(cell)
                continue
            if found:
                report = CellReport(uuid=cell['uuid'], name=cell['name'])
                sink.cells.append(report)
                try:
                    self._process_batch(cell, engine, found, report, sink,
                                        log)
                finally:
                    self.context.release(cell)
                return
            self.context.release(cell)
        raise exception.InvalidInput(
            'instance %s is mapped to cell %s but is not in its database'
            % (uuid, mapped_cell['uuid']))

    def _any_instances(self, cells):
        """Whether any of ``cells`` has a live instance (unknown: yes)."""
        for cell in cells:
            try:
                engine = self.context.cell_engine(cell)
                with engine.connect() as conn:
                    if cell_queries.has_instances_after(conn, 0):
                        return True
            except exception.DB_ERRORS + (exception.CellDatabaseError,):
                return True
            finally:
                self.context.release(cell)
        return False

    # -- per batch ---------------------------------------------------------

    def _process_batch(self, cell, engine, batch, report, sink, log):
        """Evaluate and heal a batch; return how many were processed.

        Findings go to ``sink`` (a RunReport) and ``log`` (_FindingsLog).
        """
        return self._finish_batch(cell, batch,
                                  self._begin_batch(cell, engine, batch),
                                  report, sink, log)

    def _begin_batch(self, cell, engine, batch):
        """Evaluate a batch and start reading its instances to write again.

        Returns ``(evaluations, future of the fresh records)`` for
        ``_finish_batch``.
        """
        now = self.context.clock()
        evaluations = [self._evaluate(record, cell, now) for record in batch]
        # Instances about to be written are read again, all at once, right
        # before their writes: a decision is only acted upon if it still
        # holds for the records as they are now. A dry run does the same,
        # so that it reports what a heal would do.
        to_write = [record for record, evaluation in zip(batch, evaluations)
                    if _to_write(evaluation)]
        fresh = readahead.started(
            lambda: records.reread(engine, to_write,
                                   self.options.settings.read_fields)
        ) if to_write else None
        return evaluations, fresh

    def _finish_batch(self, cell, batch, begun, report, sink, log):
        """Heal and report a batch begun by ``_begin_batch``.

        Returns how many of its instances were processed.
        """
        evaluations, future = begun
        fresh = readahead.waited(future, self.stop_check) if future else {}
        processed = len(batch)
        listed = []
        for position, (record, evaluation) in enumerate(
                zip(batch, evaluations)):
            if self.budget.used_up():
                processed = position
                break
            finding = evaluation.finding
            if _to_write(evaluation) and not self._heal_alone(
                    cell, record, fresh[record.instance['uuid']],
                    evaluation, sink):
                processed = position
                break
            report.count(finding)
            findings.keep(finding, listed, sink.notices,
                          sink.outdated_flavors)
        self.budget.checked(processed)
        sink.findings.extend(listed)
        log.add(listed)
        return processed

    def _evaluate(self, record, cell, now):
        """``decisions.evaluate``; an unexpected failure is an error."""
        try:
            return decisions.evaluate(record, cell, now,
                                      self.options.settings,
                                      self.context.profile)
        except Exception as exc:
            return decisions.Evaluation(_failed(
                Finding(instance_uuid=record.instance['uuid'],
                        cell_uuid=cell['uuid'], status=Status.ERROR),
                exc))

    # -- writing -----------------------------------------------------------

    def _heal_alone(self, cell, record, fresh, evaluation, sink):
        """``_heal``; an unexpected failure fails this instance only.

        Errors that end the run (the API database or the audit store
        failing) are raised as they are.
        """
        try:
            return self._heal(cell, record, fresh, evaluation, sink)
        except exception.HealreqError:
            raise
        except Exception as exc:
            _failed(evaluation.finding, exc)
            return True

    def _heal(self, cell, record, fresh, evaluation, sink):
        """Write the healed spec, deciding again on ``fresh``.

        Returns False, touching nothing, when --max-count is used up.
        """
        finding = evaluation.finding
        if record.spec_row is None:
            change = spec_writer.Change(
                instance_uuid=finding.instance_uuid, spec_id=None,
                fields=finding.rewritten, before=None,
                after=evaluation.new_spec,
                action=spec_writer.INSERT, cell_id=cell['id'])
        else:
            change = spec_writer.Change(
                instance_uuid=finding.instance_uuid,
                spec_id=record.spec_row['id'], fields=finding.rewritten,
                before=record.spec_row['spec'], after=evaluation.new_spec)
        if not self.writer.write(
                change, finding,
                lambda: self._decide_again(cell, fresh, evaluation),
                take=self.budget.take, give_back=self.budget.give_back):
            return False
        if finding.status is Status.HEALED:
            LOG.info('Healed request spec of instance %s: %s',
                     finding.instance_uuid,
                     '; '.join(str(c) for c in finding.changes))
        elif (finding.status is Status.DRIFTED
              and self.options.collect_plan):
            sink.planned.append((finding, record.spec_row,
                                 evaluation.new_spec))
        return True

    def _decide_again(self, cell, fresh, evaluation):
        """None if the fresh records lead to the same new spec.

        If not, a Refusal: the finding becomes a conflict.
        """
        again = decisions.evaluate(fresh, cell, self.context.clock(),
                                   self.options.settings,
                                   self.context.profile)
        if again.new_spec == evaluation.new_spec:
            return None
        return spec_writer.Refusal(
            Status.CONFLICT, 'instance-changed',
            'the instance changed while it was being checked (now: %s%s); '
            'left alone' % (again.finding.status.value,
                            ', %s' % again.finding.reason
                            if again.finding.reason else ''))


def _no_stop():
    pass


def _to_write(evaluation):
    """Whether the evaluation asks for a write (not a report-only drift)."""
    return (evaluation.finding.status is Status.DRIFTED
            and evaluation.new_spec is not None)


def _failed(finding, exc):
    """Make ``finding`` an ``internal-error`` caused by ``exc``."""
    LOG.exception('Instance %s: unexpected error', finding.instance_uuid)
    finding.status = Status.ERROR
    finding.reason = 'internal-error'
    finding.detail = masking.mask_password('%s: %s' % (
        type(exc).__name__, exception.first_line(exc)))
    finding.changes = []
    return finding
