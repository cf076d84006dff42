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
the batches read before (``reader``). Each batch is decided and written
by the ``batch`` module's BatchHealer, and its findings go where
``cell_findings`` sends them. The walk takes the next page from the
reader while a batch's instances to write are read again.
The databases and the release come from the run's ``context``,
--max-count and the pace from its ``budget``.
"""

import contextlib

from oslo_log import log as logging

from healreq.db import cell_queries
from healreq import exception
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq import nova_constants
from healreq.run import batch as batches
from healreq.run import cell_findings
from healreq.run import parallel
from healreq.run import read_threads
from healreq.run import reader_process
from healreq.run import records
from healreq.run import writer as spec_writer

LOG = logging.getLogger(__name__)


class Walker(object):
    """Walks the selected cells of one run of ``request-specs``.

    ``context`` is the run's RunContext, ``options`` its api.Options,
    ``budget`` its Budget and ``writer`` the SpecWriter of its changes;
    ``audit`` (an AuditStore, or None) records the findings of run
    ``run_id``. ``progress``, if set, gets ``planned(cell, total)`` for
    every cell first, then ``advanced(cell, done, found)`` after each
    batch (see cmd/progress.py); ``stop_check()`` after each batch and
    while the walk waits for a cell database: it raises to stop the run.
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
        self._batches = None

    def run(self):
        """Process every selected cell; return the RunReport."""
        self._batches = batches.BatchHealer(
            self.context, self.options, self.budget, self.writer,
            self.stop_check)
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
            cells = self._unmapped_instance_cells()
        if self.progress is not None and not self.options.instance_uuid:
            self.context.announce_cells(cells, self.progress, self._read)
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
        with reader_process.CellsReader(
                specs, self.stop_check) as self._reader:
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

    def _unmapped_instance_cells(self):
        """The cell holding --instance, whose mapping names no known cell.

        Judged where its row is (as ``instance-mapped-elsewhere``, unless
        a skip rule says otherwise), as a full run judges it; skipped as
        ``not-scheduled`` if no cell holds it and its mapping names no
        cell yet (RunContext.find_elsewhere).
        """
        uuid = self.options.instance_uuid
        found = self.context.find_elsewhere(uuid, None, self._read_instance)
        if found is not None:
            self.context.release(found[0])
            return [found[0]]
        cell = CellReport(uuid=None, name=None)
        finding = Finding(instance_uuid=uuid, cell_uuid=None,
                          status=Status.SKIPPED, reason='not-scheduled',
                          detail='the instance mapping has no cell yet')
        cell.count(finding)
        self.report.cells.append(cell)
        self.report.findings.append(finding)
        return []

    # -- per cell ----------------------------------------------------------

    def _process_cell(self, cell, sink):
        """Process one cell; its findings go to ``sink`` (a RunReport).

        Errors of the cell's database fail the cell only; errors of the
        API database or of the audit store end the run.
        """
        report = CellReport(uuid=cell['uuid'], name=cell['name'])
        sink.cells.append(report)
        if cell['uuid'] == nova_constants.CELL0_UUID:
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
        log = cell_findings.FindingsLog(self.audit, self.run_id, sink)
        out = cell_findings.CellFindings(report, sink, log)
        try:
            if self.options.instance_uuid:
                self._walk_instance(cell, engine, out)
            else:
                self._walk_pages(cell, engine, out)
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

    def _walk_instance(self, cell, engine, out):
        """Process --instance, in ``cell`` if it holds it, else elsewhere."""
        found = self._read_instance(cell, engine)
        if found:
            self._batches.process(cell, engine, found, out)
        else:
            self._process_elsewhere(cell, out)

    def _walk_pages(self, cell, engine, out):
        """Process the cell's live instances, a batch per page read."""
        fields = self.options.settings.read_fields
        with self._cell_pages(cell, fields) as pages:
            pages = iter(pages)
            page = next(pages, None)
            while page is not None:
                batch = records.assemble_records(
                    self.context.api_engine, page, fields,
                    self.context.hinted_instances)
                begun = self._batches.begin(cell, engine, batch)
                # The next page is received while the database reads this
                # batch's instances to write again.
                try:
                    page = next(pages, None)
                except Exception as exc:
                    page = exc  # raised once this batch is done
                processed = self._batches.finish(cell, batch, begun, out)
                if self.progress is not None:
                    self.progress.advanced(cell, out.report.checked,
                                           out.report.drifted
                                           + out.report.healed)
                self.stop_check()
                self.budget.pause()
                if self._stopped_in(engine, batch, processed, out.sink):
                    return
                if isinstance(page, Exception):
                    raise page
                # Let go of this batch before the next is assembled, or
                # the walk would hold two batches of parsed specs at once.
                batch = begun = None

    def _stopped_in(self, engine, batch, processed, sink):
        """Whether --max-count stops the cell's walk after ``batch``.

        If so, ``sink`` (a RunReport) learns whether instances remain.
        """
        if processed < len(batch):
            sink.more_remain = True
            return True
        if not self.budget.used_up():
            return False
        with engine.connect() as conn:
            sink.more_remain = cell_queries.has_instances_after(
                conn, batch[-1].instance['id'])
        return True

    def _cell_pages(self, cell, fields):
        """A context manager: the cell's pages, read by a child process.

        That of the walk if it reads the cell, else one of the cell's own.
        """
        if self._reader is not None and self._reader.reads(cell['uuid']):
            return contextlib.nullcontext(self._reader.pages(cell['uuid']))
        return reader_process.CellReader(self.context.read_spec(
            cell, self.options.batch_size, fields), self.stop_check)

    def _read(self, engine, query):
        """``query(conn)`` on ``engine``; the run may stop meanwhile."""
        def read():
            with engine.connect() as conn:
                return query(conn)
        return read_threads.interruptible(read, self.stop_check)

    def _process_elsewhere(self, mapped_cell, out):
        """Process --instance in the cell that holds it, not the mapped one.

        A full run reports such an instance where its row is, as an error
        (``instance-mapped-elsewhere``); so does --instance (see
        RunContext.find_elsewhere, InvalidInput if no cell holds it).
        ``out`` is the CellFindings of the mapped cell.
        """
        cell, engine, found = self.context.find_elsewhere(
            self.options.instance_uuid, mapped_cell, self._read_instance)
        report = CellReport(uuid=cell['uuid'], name=cell['name'])
        out.sink.cells.append(report)
        try:
            self._batches.process(cell, engine, found, out.elsewhere(report))
        finally:
            self.context.release(cell)

    def _read_instance(self, cell, engine):
        """The records of --instance in ``cell``'s database (none: [])."""
        return records.read_instance(self.context.api_engine, engine,
                                     self.options.instance_uuid,
                                     self.options.settings.read_fields,
                                     self.context.hinted_instances)

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


def _no_stop():
    pass
