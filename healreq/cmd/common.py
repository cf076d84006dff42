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


"""What the commands share: exit codes, errors, engines and the audit."""

import argparse
import contextlib
import enum
import logging
import os
import re
import sys
import textwrap

from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq.db import engines
from healreq.db import urls
from healreq.heal import checks
from healreq.heal.findings import Status


class ExitCode(enum.IntEnum):
    """Exit codes of ``nova-heal request-specs`` (a public contract)."""
    HEALED = 0
    MAX_COUNT_REACHED = 1
    NEEDS_ATTENTION = 2
    CONFLICT = 3
    NOTHING_TO_HEAL = 4
    INVALID_INPUT = 127
    UNEXPECTED_ERROR = 255


EXIT_CODES_HELP = """\
exit codes:
  0    drift found and healed (with --dry-run: found, would be healed)
  1    --max-count reached and more instances remain to be processed
  2    some instances or cells could not be evaluated and need manual
       attention (unparsable or missing rows, an unreachable cell)
  3    a write was refused because the row changed concurrently
  4    nothing to heal: every checked instance is consistent
  127  invalid input (bad UUID, unknown cell or instance, conflicting
       options)
  255  unexpected error
When several apply, the most severe wins: 255, 127, 2, 3, 1, 0, 4."""


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions and epilogs to the terminal's width.

    Indented lines (the exit-code tables) are kept as written.
    """

    def _fill_text(self, text, width, indent):
        lines, paragraph = [], []

        def fill():
            if paragraph:
                lines.extend(textwrap.wrap(
                    ' '.join(paragraph), width, initial_indent=indent,
                    subsequent_indent=indent) or [''])
                del paragraph[:]
        for line in text.splitlines():
            if line[:1].isspace() or not line.strip():
                fill()
                lines.append(indent + line if line.strip() else '')
            else:
                paragraph.append(line.strip())
        fill()
        return '\n'.join(lines)


class _FlushStdout(logging.Filter):
    def filter(self, record):
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass  # a closed or broken stdout must not stop the logging
        return True


def keep_output_order():
    """Flush stdout before every log line written by the root handlers.

    The report (stdout) is block-buffered on a pipe, logs (stderr) are not:
    where both reach one terminal, pipe or merging reader, this keeps the
    lines in the order they were produced. Call after logging is set up.
    """
    flush = _FlushStdout()
    for handler in logging.getLogger().handlers:
        handler.addFilter(flush)


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


_UUID_RE = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                      r'[0-9a-f]{12}$')


def canonical_uuid(value, what):
    """Return ``value`` as a lower-case canonical UUID or raise ValueError.

    Nova stores UUIDs in the dashed, lower-case form; other spellings would
    silently match nothing.
    """
    lowered = value.strip().lower()
    if not _UUID_RE.match(lowered):
        raise ValueError('%s %r is not a UUID (expected the form '
                         'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)'
                         % (what, value))
    return lowered


class Stop(Exception):
    """End the command with ``code`` and a one-line ``message``."""

    def __init__(self, code, message=None):
        super().__init__(message)
        self.code = code
        self.message = message


def invalid(message):
    """A Stop for invalid input (exit 127)."""
    return Stop(ExitCode.INVALID_INPUT, 'nova-heal: error: %s' % message)


def first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ''


def uuid_option(value, what):
    """Canonical UUID of an option value, or None; Stop(127) if invalid."""
    if not value:
        return None
    try:
        return canonical_uuid(value, what)
    except ValueError as exc:
        raise invalid(exc)


@contextlib.contextmanager
def api_engine(conf, pool_size=engines.POOL_SIZE):
    """The API database engine of ``[api_database]/connection``."""
    if not conf.api_database.connection:
        raise invalid('[api_database]/connection is not set; pass '
                      '--config-file /etc/nova/nova.conf')
    try:
        engine = engines.create_engine(conf.api_database.connection,
                                       pool_size=pool_size)
    except (sqlalchemy.exc.ArgumentError, ValueError) as exc:
        raise invalid('invalid [api_database]/connection: %s' % exc)
    try:
        yield engine
    finally:
        engine.dispose()


def settings(conf, force=False, checked_fields=None):
    """The per-instance decision settings from configuration."""
    values = dict(skip_updated_within=conf.healreq.skip_updated_within,
                  force=force)
    if checked_fields is not None:
        values['checked_fields'] = checked_fields
    return checks.Settings(**values)


def audit_url(conf):
    return conf.healreq.audit_connection or 'sqlite:///%s' % os.path.join(
        os.path.abspath(conf.healreq.state_path), 'audit.sqlite')


def open_audit(conf):
    """Open (creating or upgrading) the audit store; Stop(127) on error."""
    url = audit_url(conf)
    try:
        return audit_store.AuditStore(url)
    except (OSError, db_exc.DBError, sqlalchemy.exc.SQLAlchemyError,
            ValueError, audit_schema.SchemaTooNew) as exc:
        raise invalid(urls.mask_password(
            'cannot open the audit store %s: %s' % (url, first_line(exc))))


def command_line(argv):
    """The command line as recorded in the audit (never with secrets)."""
    return urls.mask_password(' '.join(['nova-heal'] + list(argv)))


# Characters of report text written to stdout at a time.
_WRITE_BLOCK = 65536


def emit(text):
    """Print report text; characters stdout cannot encode are escaped."""
    emit_pieces([text], '')


def emit_pieces(pieces, separator='\n'):
    """Print ``pieces`` (strings) joined by ``separator``, as ``emit``.

    A large report is written as it is produced, never held whole.
    """
    encoding = getattr(sys.stdout, 'encoding', None) or 'utf-8'

    def write(parts):
        text = ''.join(parts)
        sys.stdout.write(
            text.encode(encoding, 'backslashreplace').decode(encoding))
    block = []
    size = 0
    for number, piece in enumerate(pieces):
        if number:
            block.append(separator)
        block.append(piece)
        size += len(piece)
        if size >= _WRITE_BLOCK:
            write(block)
            block, size = [], 0
    block.append('\n')
    write(block)
    sys.stdout.flush()
