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


"""The errors that end a command, each with its exit code and component.

Library code raises these; only the command line's entry point turns one
into its exit code and a single line on stderr. Problems that concern a
single instance or a single cell are not exceptions: they are findings
and cell errors in the run's report.
"""

import contextlib
import dataclasses
import enum

from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq import masking

# What a database driver or oslo.db raises when a statement fails.
DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)


class ExitCode(enum.IntEnum):
    """Exit codes of ``nova-heal`` (a public contract; see MEANINGS)."""
    HEALED = 0
    MAX_COUNT_REACHED = 1
    NEEDS_ATTENTION = 2
    CONFLICT = 3
    NOTHING_TO_HEAL = 4
    INVALID_INPUT = 127
    HANGUP = 129  # SIGHUP (128 + 1)
    INTERRUPTED = 130  # SIGINT, as shells report it (128 + 2)
    TERMINATED = 143  # SIGTERM (128 + 15)
    UNEXPECTED_ERROR = 255


@dataclasses.dataclass(frozen=True)
class Meaning:
    """What an exit code says, and what an operator does about it.

    Plain text: ``--help`` prints it as it is, the documentation marks up
    the options and reason codes it names.
    """
    text: str
    action: str = ''


# What each exit code of ``request-specs`` means. This is the only place
# it is written: the ``--help`` epilogs, the nova-heal(1) manual page and
# the operator guide are generated from it.
MEANINGS = {
    ExitCode.HEALED: Meaning(
        'drift found and healed (with --dry-run: found, would be healed), '
        'or drift found that is only reported and never written (a zone '
        'pin under --az-policy report, a same_host hint under '
        '--hint-policy report, a propagated flavor under --flavor-policy '
        'report, listed in reported_only); the report counts apart the '
        'instances of which nothing is written (reported_only), and a '
        'heal that wrote nothing does not say healed',
        'After a dry run: review, then heal. After a heal: verify with a '
        'dry run (exit %d). Report-only drift keeps the verification at '
        '%d until the pin is rewritten (--az-policy repin or unpin), '
        'a same_host hint until it is pruned (--hint-policy prune) and a '
        'propagated flavor until it is healed (--flavor-policy instance); '
        'a verification that should not judge pins or hints leaves '
        'availability_zone or scheduler_hints out of --fields.'
        % (ExitCode.NOTHING_TO_HEAL, ExitCode.HEALED)),
    ExitCode.MAX_COUNT_REACHED: Meaning(
        '--max-count reached and more instances remain to be processed',
        'Run again with the same options.'),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some instances or cells could not be evaluated and need manual '
        'attention (a missing or unparsable row, a rule Nova would reject, '
        'an unreachable cell or one whose tables stay locked past '
        '[healreq]/lock_wait_timeout), or the API database or the audit '
        'store failed',
        'Read the ERROR lines, the cell errors or the line on stderr; fix '
        'the records or the connection. Unless the API database or the '
        'audit store failed, the other instances were processed normally.'),
    ExitCode.CONFLICT: Meaning(
        'a write was refused because the row changed concurrently, or '
        'another session held it locked longer than '
        '[healreq]/lock_wait_timeout (spec-locked)',
        'Run again: Nova was working on the instance.'),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing to heal: every checked instance is consistent',
        'Nothing: this is the healthy result.'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input, with a one-line message on stderr: a bad UUID, an '
        'unknown instance or cell, conflicting options, a missing, '
        'unreadable or invalid configuration (a file that is not UTF-8, a '
        'value out of its range, a database driver that is not installed '
        'or does not take an argument of its URL), an audit store that '
        'cannot be opened or locked, is a symbolic link, is a Nova '
        'database or was written by a newer release, a --plan or '
        '--metrics-file that would replace the audit store, a '
        'configuration file or a Nova database, a Nova release that cannot '
        'be established or is not supported, whose live services disagree '
        'with the object versions of its newest specs, or whose '
        'controllers run different versions (an upgrade in progress; '
        'these four only when writing: --dry-run reports)',
        'Read the one-line message; fix the command line or the '
        'configuration. For a release that cannot be detected, name it '
        'with --target-release.'),
    ExitCode.HANGUP: Meaning(
        'hung up by SIGHUP, when the terminal or ssh session went away '
        '(as for 130; the report may be lost with the terminal)',
        'As for 130; "nova-heal audit list" shows the run and its exit '
        'code when the report is lost.'),
    ExitCode.INTERRUPTED: Meaning(
        'interrupted by SIGINT (Ctrl-C): stopped after the current batch, '
        'reported what it did, wrote its metrics and closed its audit run '
        'with this code',
        'Run again to finish. A second signal stops at once; the next run '
        'then settles the change that was being written.'),
    ExitCode.TERMINATED: Meaning(
        'terminated by SIGTERM (as for 130)',
        'As for 130.'),
    ExitCode.UNEXPECTED_ERROR: Meaning(
        'unexpected error (a bug, never the answer to bad input)',
        'The traceback is logged to stderr (passwords masked); report '
        'it.'),
}

# Where an exit code of ``revert`` and ``apply`` means something else;
# the others mean what MEANINGS says, and they never exit 1.
_REPLAY_DIFFERENCES = {
    ExitCode.HEALED: Meaning(
        'every change written (with --dry-run: would be written)'),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some changes could not be evaluated (instance or cell missing), '
        'revert found an audit record that fails its digest or is not '
        'that instance\'s RequestSpec (audit-record-invalid), or, for '
        'apply, were refused: the plan\'s new value is not what a '
        'heal writes for the instance now (change-not-derived), or names '
        'another spec row (plan-spec-id-mismatch)'),
    ExitCode.CONFLICT: Meaning(
        'some changes were refused: the row changed since, or an operation '
        'is in flight on the instance; for revert also when the run to '
        'revert is still running (its audit record shows no exit code and '
        'its lease is held): nothing is reverted or recorded',
        'Run again; revert a run still running once it has ended, or '
        'with --wait.'),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing to do: every change is written already or its instance '
        'is deleted; for revert also when an earlier revert of the run '
        'undid a change and the row changed since (already-reverted); for '
        'apply also when the plan holds no change'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input (an unknown run, an unreadable or edited plan, a '
        'spec_id that is not a JSON integer), or, as for request-specs, a '
        'configuration or an audit store that cannot be used'),
    ExitCode.INTERRUPTED: Meaning(
        'interrupted by SIGINT: stopped at once; the audit run is closed '
        'with this code'),
}
REPLAY_MEANINGS = {
    code: _REPLAY_DIFFERENCES.get(code, meaning)
    for code, meaning in MEANINGS.items()
    if code is not ExitCode.MAX_COUNT_REACHED}

# The same, for the --help of each: what its exit codes mean for that
# command alone.
_REVERT_DIFFERENCES = {
    ExitCode.HEALED: Meaning(
        'every change reverted: its before value written back (with '
        '--dry-run: would be reverted)'),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some changes could not be evaluated (instance or cell missing), '
        'or an audit record fails its digest or is not that instance\'s '
        'RequestSpec (audit-record-invalid)'),
    ExitCode.CONFLICT: Meaning(
        'some changes were refused: the row changed since, or an operation '
        'is in flight on the instance; or the run to revert is still '
        'running (its audit record shows no exit code and its lease is '
        'held): nothing is reverted or recorded',
        _REPLAY_DIFFERENCES[ExitCode.CONFLICT].action),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing to revert: every change is reverted already or its '
        'instance is deleted, or an earlier revert of the run undid a '
        'change and the row changed since (already-reverted)'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input (an unknown run), or, as for request-specs, a '
        'configuration or an audit store that cannot be used'),
}
_APPLY_DIFFERENCES = {
    ExitCode.HEALED: Meaning(
        'every change of the plan applied (with --dry-run: would be '
        'applied)'),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some changes could not be evaluated (instance or cell missing), '
        'or were refused: the plan\'s new value is not what a heal writes '
        'for the instance now (change-not-derived), or names another spec '
        'row (plan-spec-id-mismatch)'),
    ExitCode.CONFLICT: Meaning(
        'some changes were refused: the row changed since the plan was '
        'written, or an operation is in flight on the instance',
        'Run again: Nova was working on the instance.'),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing to apply: every change is written already or its '
        'instance is deleted, or the plan holds no change'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input (an unreadable or edited plan, a spec_id that is '
        'not a JSON integer), or, as for request-specs, a configuration '
        'or an audit store that cannot be used'),
}
REVERT_MEANINGS = {code: _REVERT_DIFFERENCES.get(code, meaning)
                   for code, meaning in REPLAY_MEANINGS.items()}
APPLY_MEANINGS = {code: _APPLY_DIFFERENCES.get(code, meaning)
                  for code, meaning in REPLAY_MEANINGS.items()}

# What the exit codes of ``allocations`` (read only) mean; it never exits
# 1 or 3.
_ALLOCATIONS_DIFFERENCES = {
    ExitCode.HEALED: Meaning(
        'mismatches found: some instances\' allocations disagree with '
        'what Nova would allocate, or leftover consumers hold resources '
        '(nothing is written; the report gives the remedy)',
        'Review each remedy, run its commands in the order given, then '
        'run the audit again (exit %d).' % ExitCode.NOTHING_TO_HEAL),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some instances or cells could not be evaluated (a missing or '
        'unparsable row, a compute node that is not found, an unreachable '
        'cell), or the API or Placement database failed',
        'Read the ERROR lines or the line on stderr; the other instances '
        'were compared normally.'),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing found: every checked instance\'s allocations agree '
        '(instances in flight are skipped or pending, never flagged)',
        'Nothing: this is the healthy result.'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input, with a one-line message on stderr: a bad UUID, an '
        'unknown instance or cell, conflicting options, a missing or '
        'invalid configuration ([placement_database]/connection or '
        '[api_database]/connection not set), a --metrics-file that would '
        'replace a configuration file or a Nova database, or a '
        '[healreq]/target_release that is not a supported release',
        'Read the one-line message; fix the command line or the '
        'configuration (pass placement.conf with --config-file).'),
    ExitCode.HANGUP: Meaning(
        'hung up by SIGHUP, when the terminal or ssh session went away '
        '(as for 130; the report may be lost with the terminal, the '
        'metrics are not)',
        'As for 130.'),
    ExitCode.INTERRUPTED: Meaning(
        'interrupted by SIGINT (Ctrl-C): stopped after the current batch, '
        'reported what it checked so far (the instances of the cells and '
        'batches after it, and consumers that no instance names, were not '
        'checked) and wrote its metrics with this code',
        'Run again to check everything. A second signal stops at once, '
        'with no report.'),
    ExitCode.TERMINATED: Meaning(
        'terminated by SIGTERM (as for 130)',
        'As for 130.'),
}
ALLOCATIONS_MEANINGS = {
    code: _ALLOCATIONS_DIFFERENCES.get(code, meaning)
    for code, meaning in MEANINGS.items()
    if code not in (ExitCode.MAX_COUNT_REACHED, ExitCode.CONFLICT)}

# What the exit codes of ``hosts`` (read only) mean; it never exits 1 or 3.
_HOSTS_DIFFERENCES = {
    ExitCode.HEALED: Meaning(
        'problems found: some hosts or resource providers disagree '
        'between Nova and Placement, or hold pinned CPUs or PCI devices '
        'they should not (nothing is written; the report gives the remedy '
        'or the decision an operator must take)',
        'Review each remedy, run its commands in the order given, then '
        'run the audit again (exit %d).' % ExitCode.NOTHING_TO_HEAL),
    ExitCode.NEEDS_ATTENTION: Meaning(
        'some hosts or cells could not be checked (an unreadable NUMA '
        'topology, an unreachable cell), or the API or Placement database '
        'failed',
        'Read the ERROR lines or the line on stderr; the other hosts were '
        'checked normally.'),
    ExitCode.NOTHING_TO_HEAL: Meaning(
        'nothing found: every checked host and provider agrees (hosts '
        'with an operation in flight are skipped, never flagged)',
        'Nothing: this is the healthy result.'),
    ExitCode.INVALID_INPUT: Meaning(
        'invalid input, with a one-line message on stderr: a bad UUID, an '
        'unknown cell or host, conflicting options, a missing or invalid '
        'configuration ([placement_database]/connection or '
        '[api_database]/connection not set), or a --metrics-file that '
        'would replace a configuration file or a Nova database',
        'Read the one-line message; fix the command line or the '
        'configuration (pass placement.conf with --config-file).'),
    ExitCode.INTERRUPTED: Meaning(
        'interrupted by SIGINT (Ctrl-C): stopped after the current page of '
        'hosts, reported what it checked so far (the hosts after it and '
        'the orphaned providers were not checked) and wrote its metrics '
        'with this code',
        'Run again to check everything. A second signal stops at once, '
        'with no report.'),
}
HOSTS_MEANINGS = {
    code: _HOSTS_DIFFERENCES.get(code, meaning)
    for code, meaning in ALLOCATIONS_MEANINGS.items()}

# When several outcomes of a run apply, the most severe decides the exit
# code, in this order (a signal ends the run whatever else applies).
SEVERITY = (ExitCode.UNEXPECTED_ERROR, ExitCode.INVALID_INPUT,
            ExitCode.NEEDS_ATTENTION, ExitCode.CONFLICT,
            ExitCode.MAX_COUNT_REACHED, ExitCode.HEALED,
            ExitCode.NOTHING_TO_HEAL)


def severity_order(codes):
    """Those of ``codes`` that SEVERITY orders, most severe first."""
    return [code for code in SEVERITY if code in codes]


# The components an error can name.
API_DATABASE = 'API database'
PLACEMENT_DATABASE = 'Placement database'
AUDIT_STORE = 'audit store'


def first_line(value):
    """The first line of ``str(value)`` ('' if there is none)."""
    lines = str(value).strip().splitlines()
    return lines[0] if lines else ''


def describe_db_error(exc):
    """One line for a database error: the driver's message if any."""
    return first_line(getattr(exc, 'orig', None) or exc)


# MySQL errors of a missing privilege: table or column access denied
# (1142, 1143), database access denied (1044).
_PRIVILEGE_ERRORS = (1044, 1142, 1143)
# MySQL's "Lock wait timeout exceeded": a row or table lock held by
# another session outlasted the wait (oslo.db calls it a deadlock).
LOCK_WAIT_TIMEOUT = 1205


def _driver_error(exc):
    """The driver's exception under oslo.db's and SQLAlchemy's wrappers."""
    inner = getattr(exc, 'inner_exception', None) or exc
    return getattr(inner, 'orig', None) or inner


def mysql_error_code(exc):
    """The MySQL error number of database error ``exc``, or None."""
    args = getattr(_driver_error(exc), 'args', ())
    return args[0] if args and isinstance(args[0], int) else None


def is_privilege_error(exc):
    """Whether database error ``exc`` says the account may not do it."""
    if mysql_error_code(exc) in _PRIVILEGE_ERRORS:
        return True
    return 'readonly database' in str(_driver_error(exc))


def is_lock_wait_timeout(exc):
    """Whether ``exc`` is a lock another session held for too long."""
    return mysql_error_code(exc) == LOCK_WAIT_TIMEOUT


class HealreqError(Exception):
    """An error that ends the command.

    ``component`` names what failed (``API_DATABASE``, ``AUDIT_STORE``,
    ``'cell <uuid>'``) or is None; ``exit_code`` is the command's exit
    code. ``str()`` is the one-line message without its prefix.
    """
    exit_code = ExitCode.UNEXPECTED_ERROR
    component = None
    # What a run did before the error ended it, when it did anything.
    report = None

    def __init__(self, message, component=None, exit_code=None):
        super().__init__(first_line(message))
        if component is not None:
            self.component = component
        if exit_code is not None:
            self.exit_code = exit_code

    def line(self):
        """The line printed on stderr; passwords are masked."""
        where = '%s: ' % self.component if self.component else ''
        return masking.mask_password('nova-heal: error: %s%s' % (where, self))


class InvalidInput(HealreqError):
    """The operator asked for something invalid, missing or clashing."""
    exit_code = ExitCode.INVALID_INPUT


class ArgumentError(InvalidInput):
    """The command line does not parse; the message is argparse's line."""

    def line(self):
        return masking.mask_password(str(self))


class UnsafeOutput(InvalidInput):
    """An output file would replace a file the tool or Nova depends on.

    ``path`` is never written, not even with the metrics of the failure.
    """

    def __init__(self, option, path, what):
        super().__init__('%s %s would replace %s; write it elsewhere'
                         % (option, path, what))
        self.path = path


class PlanError(InvalidInput):
    """A plan file cannot be used as it is: nothing of it is applied."""


class RunInProgress(HealreqError):
    """The run a command would revert is still running: nothing is done."""
    exit_code = ExitCode.CONFLICT


class ApiDatabaseError(HealreqError):
    """The API database failed; nothing more can be read or written."""
    exit_code = ExitCode.NEEDS_ATTENTION
    component = API_DATABASE


class PlacementDatabaseError(HealreqError):
    """The Placement database failed; nothing more can be read."""
    exit_code = ExitCode.NEEDS_ATTENTION
    component = PLACEMENT_DATABASE


class AuditStoreError(HealreqError):
    """The audit store failed: no change can be recorded, so none is made.

    Raised with exit code 127 when the store cannot be opened at all.
    """
    exit_code = ExitCode.NEEDS_ATTENTION
    component = AUDIT_STORE


class Interrupted(HealreqError):
    """The command was stopped by SIGHUP, SIGINT or SIGTERM.

    ``report`` is what a run did before it stopped, when one is known.
    """

    def __init__(self, signal_number, signal_name, report=None):
        super().__init__('interrupted by %s' % signal_name,
                         exit_code=ExitCode(128 + signal_number))
        self.signal_name = signal_name
        self.report = report


class CellDatabaseError(HealreqError):
    """A cell's database cannot be used; only that cell fails."""
    exit_code = ExitCode.NEEDS_ATTENTION

    def __init__(self, message, cell_uuid):
        super().__init__(message, component='cell %s' % cell_uuid)
        self.cell_uuid = cell_uuid


@contextlib.contextmanager
def reraised_as(error_class, **kwargs):
    """Raise database errors of the block as ``error_class``.

    A HealreqError raised in the block keeps its own component.
    """
    try:
        yield
    except HealreqError:
        raise
    except DB_ERRORS as exc:
        raise error_class(describe_db_error(exc), **kwargs) from exc
