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
import enum

from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq.db import urls

# What a database driver or oslo.db raises when a statement fails.
DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)


class ExitCode(enum.IntEnum):
    """Exit codes of ``nova-heal`` (a public contract)."""
    HEALED = 0
    MAX_COUNT_REACHED = 1
    NEEDS_ATTENTION = 2
    CONFLICT = 3
    NOTHING_TO_HEAL = 4
    INVALID_INPUT = 127
    INTERRUPTED = 130  # SIGINT, as shells report it (128 + 2)
    TERMINATED = 143  # SIGTERM (128 + 15)
    UNEXPECTED_ERROR = 255


# The components an error can name.
API_DATABASE = 'API database'
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
        return urls.mask_password('nova-heal: error: %s%s' % (where, self))


class InvalidInput(HealreqError):
    """The operator asked for something invalid, missing or clashing."""
    exit_code = ExitCode.INVALID_INPUT


class ArgumentError(InvalidInput):
    """The command line does not parse; the message is argparse's line."""

    def line(self):
        return urls.mask_password(str(self))


class PlanError(InvalidInput):
    """A plan file cannot be used as it is: nothing of it is applied."""


class ApiDatabaseError(HealreqError):
    """The API database failed; nothing more can be read or written."""
    exit_code = ExitCode.NEEDS_ATTENTION
    component = API_DATABASE


class AuditStoreError(HealreqError):
    """The audit store failed: no change can be recorded, so none is made.

    Raised with exit code 127 when the store cannot be opened at all.
    """
    exit_code = ExitCode.NEEDS_ATTENTION
    component = AUDIT_STORE


class Interrupted(HealreqError):
    """The command was stopped by SIGINT or SIGTERM.

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
