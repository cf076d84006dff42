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


"""What the commands share: exit codes, option values, printing."""

import argparse
import json
import logging
import re
import sys
import textwrap

from healreq import api
from healreq.cmd import visible
from healreq import conf as healreq_conf
from healreq import exception
from healreq import masking

ExitCode = exception.ExitCode
exit_code_for = api.exit_code_for


# Width of the exit-code tables in --help (kept as laid out, see below).
_TABLE_WIDTH = 72


def exit_codes_help(meanings, *notes):
    """An ``exit codes:`` epilog: ``meanings`` as a table, then ``notes``.

    ``meanings`` maps each ExitCode to its ``exception.Meaning``; the
    table is followed by the order of severity of those codes.
    """
    lines = ['exit codes:']
    for code, meaning in meanings.items():
        lines += textwrap.wrap(meaning.text, _TABLE_WIDTH,
                               initial_indent='  %-5d' % code,
                               subsequent_indent=' ' * 7,
                               break_on_hyphens=False)
    order = exception.severity_order(meanings)
    lines.append('When several apply, the most severe wins: %s.'
                 % ', '.join(str(int(code)) for code in order))
    return '\n'.join(lines + list(notes))


_JSON_ON_EVERY_EXIT = (
    'With --format json, stdout carries one JSON document on every exit '
    'code: for %d, %d and errors that end the run, {"error": '
    '{"exit_code": N, "message": "..."}}.' % (
        exception.ExitCode.INVALID_INPUT,
        exception.ExitCode.UNEXPECTED_ERROR))

EXIT_CODES_HELP = exit_codes_help(exception.MEANINGS, _JSON_ON_EVERY_EXIT)
ALLOCATIONS_EXIT_CODES_HELP = exit_codes_help(
    exception.ALLOCATIONS_MEANINGS,
    'With --format json, stdout carries one JSON document on every exit '
    'code: for %d and errors that end the run, {"error": {"exit_code": N, '
    '"message": "..."}}.' % exception.ExitCode.INVALID_INPUT)
HOSTS_EXIT_CODES_HELP = exit_codes_help(
    exception.HOSTS_MEANINGS,
    'With --format json, stdout carries one JSON document on every exit '
    'code: for %d and errors that end the run, {"error": {"exit_code": N, '
    '"message": "..."}}.' % exception.ExitCode.INVALID_INPUT)
REPLAY_EXIT_CODES_HELP = exit_codes_help(
    exception.REPLAY_MEANINGS,
    'Without --dry-run, an apply or revert that writes nothing never exits '
    '%d.' % exception.ExitCode.HEALED, _JSON_ON_EVERY_EXIT)
REVERT_EXIT_CODES_HELP = exit_codes_help(
    exception.REVERT_MEANINGS,
    'Without --dry-run, a revert that writes nothing never exits %d.'
    % exception.ExitCode.HEALED, _JSON_ON_EVERY_EXIT)
APPLY_EXIT_CODES_HELP = exit_codes_help(
    exception.APPLY_MEANINGS,
    'Without --dry-run, an apply that writes nothing never exits %d.'
    % exception.ExitCode.HEALED, _JSON_ON_EVERY_EXIT)


class HelpFormatter(argparse.HelpFormatter):
    """Wraps descriptions and epilogs to the terminal's width.

    Indented lines (the exit-code tables) are kept as laid out; options
    are never split at their hyphens.
    """

    def _fill_text(self, text, width, indent):
        lines, paragraph = [], []

        def fill():
            if paragraph:
                lines.extend(textwrap.wrap(
                    ' '.join(paragraph), width, initial_indent=indent,
                    subsequent_indent=indent,
                    break_on_hyphens=False) or [''])
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


def range_text(low, high):
    """``low`` to ``high`` as help texts write a range (``1 to 10,000``)."""
    def number(value):
        if float(value).is_integer():
            return '{:,}'.format(int(value))
        return '%g' % value
    return '%s to %s' % (number(low), number(high))


def bounded_int(low, high):
    """An argparse ``type`` for a whole number between low and high."""
    def parse(text):
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(
                'expected a whole number, got %r' % text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                'must be between %d and %d, got %s' % (low, high, text))
        return value
    return parse


# What the help of every option naming a file a command writes says.
OUTPUT_REFUSED = (
    'Refused (exit %d) if it would replace a database the command can '
    'reach (the API, cell or Placement database, the audit store) or a '
    'file named after one, any other SQLite database, a configuration '
    'file in use, or a device, pipe or socket.'
    % exception.ExitCode.INVALID_INPUT)


def add_output_option(parser, flag, metavar, help):
    """Add option ``flag``, a file the command writes; return its action.

    Every such path goes through protected.refuse_unsafe_outputs, and
    the help says what it refuses. The action is marked ``writes_file``,
    by which the tests find every output option of every command.
    """
    action = parser.add_argument(flag, metavar=metavar,
                                 help='%s %s' % (help, OUTPUT_REFUSED))
    action.writes_file = True
    return action


def add_batch_size_option(parser, what='Instances'):
    """Add --batch-size, bounded as ``[healreq]/batch_size`` is.

    ``what`` names what a query reads that many of.
    """
    bounds = healreq_conf.option('healreq', 'batch_size').type
    parser.add_argument('--batch-size', metavar='N',
                        type=bounded_int(bounds.min, bounds.max),
                        help='%s read per query, %s (default: '
                             '[healreq]/batch_size).'
                             % (what, range_text(bounds.min, bounds.max)))


def add_audit_output_options(parser):
    """Add --metrics-file and --format, as every read-only audit has."""
    add_output_option(
        parser, '--metrics-file', 'PATH',
        'At the end, write Prometheus metrics by problem class (text '
        'format, written atomically) for node_exporter\'s textfile '
        'collector.')
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='Report format on stdout (default: text).')


def bounded_float(low, high):
    """An argparse ``type`` for a finite number between low and high."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                'expected a number, got %r' % text)
        # NaN fails every comparison, so it is refused here too.
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(
                'must be between %g and %g, got %s' % (low, high, text))
        return value
    return parse


def non_empty(value, option, what='a value'):
    """``value`` unless it is empty or blank; InvalidInput then.

    Only an absent option means "no filter" or "no file": an empty value
    (a script's unset ``$UUID``) is refused, never widened to everything.
    """
    if value is not None and not value.strip():
        raise exception.InvalidInput(
            '%s was given an empty value; pass %s or leave the option out'
            % (option, what))
    return value


def uuid_option(value, what):
    """Canonical UUID of an option value, or None; InvalidInput if not."""
    if non_empty(value, '--%s' % what, 'a UUID') is None:
        return None
    try:
        return canonical_uuid(value, what)
    except ValueError as exc:
        raise exception.InvalidInput(str(exc))


def run_id_argument(value):
    """A RUN_ID as the store records it: a UUID in lower case.

    Any spelling of a UUID is accepted, as for instances; anything else
    is left as it is, to be reported as a run the store does not hold.
    """
    try:
        return canonical_uuid(value, 'run')
    except ValueError:
        return value


def command_line(argv):
    """The command line as recorded in the audit (never with secrets)."""
    return masking.mask_password(' '.join(['nova-heal'] + list(argv)))


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


def print_audit_report(command, result, document, text_lines):
    """Print a read-only audit's report; return its exit code.

    With ``--format json`` the document ``document(result)``, else (unless
    ``--quiet``) ``text_lines(result, verbose)``; the problems go to
    stderr either way.
    """
    if command.format == 'json':
        emit(json.dumps(document(result), indent=2, sort_keys=True))
    elif not getattr(command, 'quiet', False):
        emit_pieces(text_lines(result, command.verbose))
    for problem in result.problems:
        print(visible.escape(problem), file=sys.stderr)
    return result.exit_code


def audit_result_lines(report, skipped, verbose, result_lines):
    """The lines of each result, then of each cell that failed, escaped.

    Results of status ``skipped`` only with ``verbose``;
    ``result_lines(result, verbose)`` gives a result's lines.
    """
    for found in report.results:
        if found.status == skipped and not verbose:
            continue
        for line in result_lines(found, verbose):
            yield visible.escape(line)
    for error in report.cell_errors:
        yield visible.escape('ERROR cell %s: %s'
                             % (error['cell_uuid'], error['error']))
