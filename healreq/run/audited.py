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


"""A run recorded in the audit store: its start, lease, outcome and end.

Every command that writes, or could write, request specs is such a run
(api.run_request_specs, revert, apply_plan).
"""

import contextlib
import dataclasses
import time

from healreq import exception
from healreq.exception import ExitCode
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq import masking
from healreq.run import databases


@dataclasses.dataclass
class RunResult:
    """The outcome of one run.

    ``problems`` are one-line messages about files the run could not
    write (plan, metrics); they are already counted in ``exit_code``.
    ``notices`` are one-line warnings that change no exit code (a dry run
    the audit store could not record). ``run_id`` is None for a run that
    is not recorded.
    """
    run_id: str
    report: RunReport
    exit_code: ExitCode
    problems: list = dataclasses.field(default_factory=list)
    notices: list = dataclasses.field(default_factory=list)


def exit_code_for(report):
    """Map a RunReport to the exit code of the most severe outcome."""
    statuses = {finding.status for finding in report.findings}
    if Status.ERROR in statuses or any(c.error for c in report.cells):
        return ExitCode.NEEDS_ATTENTION
    if Status.CONFLICT in statuses:
        return ExitCode.CONFLICT
    if report.more_remain:
        return ExitCode.MAX_COUNT_REACHED
    if statuses & {Status.HEALED, Status.DRIFTED}:
        return ExitCode.HEALED
    return ExitCode.NOTHING_TO_HEAL


@contextlib.contextmanager
def started(store, mode, command, filters, unrecorded=None):
    """Start a run record in ``store`` and hold its lease; yield a Run.

    On every way out, exceptions included, the lease is released: once
    the run can write nothing more, recovery may settle what it left
    pending.

    ``unrecorded``, for a run that may go unrecorded (a dry run), is
    called with the AuditStoreError of a store that cannot be written
    (databases.cannot_write; ``store`` None, for one that could not be
    opened, is passed as None), and returns the one-line notice of a run
    that is not recorded: the Run then has no store and no run id. Else
    such an error names the options that move the store.
    """
    run_id = None
    try:
        if store is not None:
            run_id = store.start_run(
                mode, masking.mask_password(command), filters)
    except exception.AuditStoreError as exc:
        if unrecorded is None or not databases.cannot_write(exc):
            raise databases.with_store_options(exc)
        store, notice = None, unrecorded(exc)
    else:
        notice = None if store is not None else unrecorded(None)
    run = Run(store, run_id)
    if notice:
        run.notices.append(notice)
    try:
        yield run
    finally:
        if store is not None:
            store.release(run_id)


class Run:
    """A started run: its report, exit code and problems, and its end.

    Once work has begun, what it did is always reported: an error that
    ends it after some work (the audit store or the API database
    failing, a signal) becomes the exit code and a problem, with the
    report of the work done (see ``working``).
    """

    def __init__(self, store, run_id):
        self.store = store
        self.run_id = run_id
        self.started = time.monotonic()
        self.report = None
        self.code = None
        self.problems = []
        self.notices = []

    def duration(self):
        """Seconds since the run started."""
        return time.monotonic() - self.started

    @contextlib.contextmanager
    def working(self):
        """Around the work, which sets ``report``; then sets ``code``.

        An error that ends the work without a report to give closes the
        run record with the error and is raised.
        """
        try:
            yield self
            self.code = exit_code_for(self.report)
        except ENDS_AFTER_WORK as exc:
            if exc.report is None:
                _finish_failed(self.store, self.run_id, exc)
                raise
            self.report, self.code = exc.report, exc.exit_code
            if not isinstance(exc, exception.Interrupted):
                self.problems.append(exc.line())
        except exception.HealreqError as exc:
            _finish_failed(self.store, self.run_id, exc)
            raise
        except Exception as exc:
            _finish_unexpected(self.store, self.run_id, exc)
            raise
        if self.report.audit_error:
            self.add_problems([self.report.audit_error])

    def add_problems(self, lines):
        """Add one-line problems, each once.

        A database that is gone (a failed Galera node) fails every
        statement with the same error: it is reported once.
        """
        for line in lines:
            if line not in self.problems:
                self.problems.append(line)

    def finish(self):
        """Record the run's end, with its summary; return the RunResult."""
        code = self.code
        if self.problems and code < ExitCode.INVALID_INPUT:
            code = ExitCode.NEEDS_ATTENTION
        summary = self.report.summary()
        if self.problems:
            summary['problems'] = list(self.problems)
        try:
            if self.store is not None:
                self.store.finish_run(self.run_id, summary, code)
        except exception.AuditStoreError as exc:
            self.add_problems([exc.line()])
            code = code if code >= ExitCode.INVALID_INPUT else (
                ExitCode.NEEDS_ATTENTION)
        return RunResult(self.run_id, self.report, code, self.problems,
                         self.notices)


# Errors that may end a run after it did some work, which is reported.
ENDS_AFTER_WORK = (exception.Interrupted, exception.AuditStoreError,
                   exception.ApiDatabaseError)


def attach_report(exc, report, worked):
    """Let ``exc`` carry ``report`` if the run did any work (``worked``).

    An interruption always carries it: the run stopped as asked.
    """
    if worked or isinstance(exc, exception.Interrupted):
        exc.report = report


def _finish_failed(store, run_id, exc):
    """Close the run of ``exc``; a store that fails too is passed over."""
    if store is None:
        return
    try:
        store.finish_run(run_id, {'error': exc.line()}, exc.exit_code)
    except exception.AuditStoreError:
        if not isinstance(exc, exception.AuditStoreError):
            raise


def _finish_unexpected(store, run_id, exc):
    """Close the run of an unexpected error with 255, if the store can."""
    if store is None:
        return
    message = masking.mask_password('%s: %s' % (
        type(exc).__name__, exception.first_line(exc)))
    try:
        store.finish_run(run_id, {'error': message},
                         ExitCode.UNEXPECTED_ERROR)
    except exception.HealreqError:
        pass  # the original error is the one to report
