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


"""``nova-heal``: the command line.

Parses options the way nova-manage does (global oslo options before the
command) and dispatches to a command module. This is the one place where
an error becomes an exit code and a line on stderr. Only the ``cmd``
package prints or exits.
"""

import contextlib
import difflib
import io
import os
import re
import sys
import traceback

from oslo_config import cfg
from oslo_log import log as logging

from healreq import api
from healreq.cmd import allocations
from healreq.cmd import audit_commands
from healreq.cmd import collector
from healreq.cmd import common
from healreq.cmd import hosts
from healreq.cmd import interruption
from healreq.cmd import logs
from healreq.cmd import output
from healreq.cmd import request_specs
from healreq.cmd import streams
from healreq.cmd import visible
from healreq import conf as healreq_conf
from healreq import exception
from healreq import masking
from healreq import protected
from healreq import version

LOG = logging.getLogger(__name__)
ExitCode = exception.ExitCode


# oslo.db's engine warnings advise services to name a driver in their URLs
# and to set a strict SQL mode: nova-heal uses nova.conf's URLs as Nova
# does and sets the mode itself, so they would only add lines to stderr.
_LOG_LEVELS = ['oslo_db=WARNING', 'oslo_db.sqlalchemy.engines=ERROR',
               'oslo_config=WARNING', 'sqlalchemy=WARNING', 'healreq=WARNING']


def _demo_parser(subparsers):
    parser = subparsers.add_parser(
        'demo',
        help='Build a small SQLite deployment and run request-specs and '
             'allocations on it.',
        description='Builds an API database, cell0 and two cells with '
                    'realistic flavors, instances and request specs '
                    '(including a failed resize), and a Placement database '
                    'with allocations that disagree with them, then runs a '
                    'dry run, a heal, a verification run and the audit of '
                    'allocations. The deployment is kept; the demo ends '
                    'with commands to try on it.')
    parser.add_argument('--workdir', metavar='DIR',
                        help='Build the deployment here, in an empty or new '
                             'directory (default: a new temporary '
                             'directory).')
    parser.add_argument('--instances', metavar='N', type=int, default=0,
                        help='Also add N healthy instances, split between '
                             'cell1 and cell2, to watch the progress of a '
                             'longer run (100,000 take under a minute to '
                             'build).')
    parser.set_defaults(handler=_demo)


def _demo(conf, argv):
    from healreq.testing import demo
    workdir = conf.command.workdir
    if workdir is not None:
        common.non_empty(workdir, '--workdir', 'a directory')
        if os.path.exists(workdir) and (not os.path.isdir(workdir)
                                        or os.listdir(workdir)):
            raise exception.InvalidInput(
                '--workdir %s is not an empty directory; the demo builds '
                'its deployment from scratch' % workdir)
    if conf.command.instances < 0:
        raise exception.InvalidInput(
            '--instances takes a number of instances, 0 or more; got %d'
            % conf.command.instances)
    return demo.run(workdir, main, conf.command.instances)


def _add_commands(subparsers):
    request_specs.add_parser(subparsers)
    allocations.add_parser(subparsers)
    hosts.add_parser(subparsers)
    audit_commands.add_parsers(subparsers)
    _demo_parser(subparsers)


# The global options that ``nova-heal --help`` lists with the commands;
# oslo.log's others follow under this title.
LOGGING_OPTIONS_TITLE = 'logging options (oslo.log)'

_USAGE = ('%(prog)s [-h] [--version] [--config-file PATH] [--config-dir DIR]\n'
          '                 [--debug] [logging options] COMMAND ...')


def _logging_option_names():
    """The options oslo.log registers, but --debug."""
    registered = cfg.ConfigOpts()
    logging.register_options(registered)
    return set(registered) - set(cfg.ConfigOpts()) - {'debug'}


class _CommandsOpt(cfg.SubCommandOpt):
    """The commands; also lays out ``nova-heal --help``.

    oslo.config lists every global option before the commands, and most
    are oslo.log's: the help shows the commands first, then the common
    options, then oslo.log's under their own title. Only the layout
    changes: every option is still parsed and documented as before.
    """

    def _add_to_cli(self, parser, group=None):
        super()._add_to_cli(parser, group)
        # oslo.config adds the other options to its parser just before it
        # parses or prints help, with this method: they are grouped then.
        initialize = parser.initialize_parser_arguments

        def initialize_and_lay_out():
            initialize()
            _lay_out_help(parser, self.title)
        parser.initialize_parser_arguments = initialize_and_lay_out


def _lay_out_help(parser, commands_title):
    """Group oslo.log's options and put the commands first (idempotent)."""
    # argparse has no public way to move an option to another group nor
    # to order the groups: its private members are used here only, and
    # HelpTest fails if they change.
    names = _logging_option_names()
    common = parser._optionals._group_actions
    groups = parser._action_groups
    logging_group = next(
        (group for group in groups if group.title == LOGGING_OPTIONS_TITLE),
        None) or parser.add_argument_group(LOGGING_OPTIONS_TITLE)
    for action in list(common):
        if action.dest in names or '--nodebug' in action.option_strings:
            common.remove(action)
            logging_group._group_actions.append(action)
    groups.sort(key=lambda group: group.title != commands_title)
    parser.usage = _USAGE


def _build_conf():
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    logging.set_defaults(
        default_log_levels=logging.get_default_log_levels() + _LOG_LEVELS)
    conf.set_default('use_stderr', True)
    healreq_conf.register_opts(conf)
    conf.register_cli_opt(_CommandsOpt(
        'command', title='commands', handler=_add_commands,
        help='Run "nova-heal COMMAND --help" for the options of a command.'))
    return conf


def _parser_settings():
    return dict(project='nova', prog='nova-heal',
                version=version.version_info.release_string(),
                description='Find and heal OpenStack Nova RequestSpec '
                            'drift.')


def build_parser():
    """Return nova-heal's argparse parser: global options, every command.

    The CLI reference and the man page are generated from it. No
    configuration file is read.
    """
    conf = _build_conf()
    # oslo.config builds the parser while parsing a (harmless) command
    # line and keeps it. It offers no public way to reach that parser,
    # which holds its own global options (--config-file, --debug...): its
    # private attribute is read here only, and the CLI reference tests
    # fail if it goes.
    conf(['demo'], default_config_files=[], default_config_dirs=[],
         use_env=False, **_parser_settings())
    return conf._oparser


def _parse(conf, argv):
    """Parse ``argv``; False if that was all (--help, --version).

    Argument errors raise ArgumentError (argparse's own line, exit 127).
    """
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, **_parser_settings())
    except SystemExit as exc:
        if exc.code in (0, None):
            return False
        lines = [line for line in captured.getvalue().splitlines() if line]
        line = lines[-1] if lines else 'nova-heal: invalid arguments'
        raise exception.ArgumentError(_explained(conf, argv, line))
    except cfg.Error as exc:
        raise exception.InvalidInput(exception.first_line(exc))
    except UnicodeDecodeError as exc:
        raise exception.InvalidInput(
            'cannot read configuration file %s: it is not UTF-8 text (byte '
            '0x%02x)' % (_file_being_read(exc), exc.object[exc.start]))
    except OSError as exc:
        raise exception.InvalidInput('cannot read configuration file: %s'
                                     % exc)
    sys.stderr.write(captured.getvalue())
    # Values are converted and checked when read: read them all now.
    healreq_conf.check(conf)
    return True


_UNRECOGNIZED = re.compile(
    r'^.*: error: unrecognized arguments: (?P<words>.*)$')
_INVALID_CHOICE = re.compile(r'^(?P<error>.*: invalid choice: (?P<value>.*)) '
                             r'\(choose from (?P<choices>.*)\)$')


def _explained(conf, argv, line):
    """argparse's error ``line``, with a hint where one helps.

    A global option given after the command is named as such; a value
    close to one of the choices is answered with that choice.
    """
    unrecognized = _UNRECOGNIZED.match(line)
    if unrecognized:
        return line + _global_options_hint(
            conf, argv, unrecognized.group('words').split(' '))
    invalid = _INVALID_CHOICE.match(line)
    if invalid:
        choices = [choice.strip("'") for choice in
                   invalid.group('choices').split(', ')]
        close = difflib.get_close_matches(
            invalid.group('value').strip("'"), choices, n=1)
        if close:
            return "%s (did you mean '%s'?)" % (invalid.group('error'),
                                                close[0])
    return line


def _global_options_hint(conf, argv, words):
    """`` (global options such as ... go before the command: ...)``, or ''.

    Global options are not moved before the command: oslo.config reads
    each --config-file where it stands, and a command's option value may
    look like one.
    """
    parser = conf._oparser  # see build_parser
    if parser is None:
        return ''
    # Private argparse members, as in _lay_out_help.
    options = dict(parser._option_string_actions)
    commands = [name for action in parser._actions if not
                action.option_strings and action.choices
                for name in action.choices]
    for number, word in enumerate(words):
        action = options.get(word.split('=', 1)[0])
        if action is None:
            continue
        example = [word]
        if '=' not in word and action.nargs != 0 and number + 1 < len(words):
            example.append(words[number + 1])
        command = next((arg for arg in argv if arg in commands), 'COMMAND')
        return (' (global options such as %s go before the command: '
                'nova-heal %s %s ...)' % (word.split('=', 1)[0],
                                          ' '.join(example), command))
    return ''


def _file_being_read(exc):
    """The configuration file oslo.config was reading when ``exc`` rose."""
    traceback_ = exc.__traceback__
    while traceback_ is not None:
        reader = traceback_.tb_frame.f_locals.get('self')
        if isinstance(reader, cfg.ConfigParser):
            return reader.filename
        traceback_ = traceback_.tb_next
    return '(unknown)'


def _json_requested(conf, argv):
    """Whether the command asked for ``--format json``.

    Read from the parsed options when there are any, else from ``argv``
    (the command line may not have parsed).
    """
    try:
        if getattr(conf.command, 'format', None) == 'json':
            return True
    except Exception:  # not parsed: oslo.config raises several kinds
        pass
    pairs = zip(argv, argv[1:] + [None])
    return any(word == '--format=json' or (word, following) == (
        '--format', 'json') for word, following in pairs)


def _metrics_file(conf):
    try:
        path = getattr(conf.command, 'metrics_file', None)
    except Exception:  # not parsed: oslo.config raises several kinds
        return None
    return path if path and path.strip() else None


def _write_failure_metrics(conf, path, exit_code):
    """The metrics of a failure, in the command's own metrics.

    A command whose metrics are not request-specs' names the function
    that writes them as its parser's ``failure_metrics`` default.
    """
    writer = getattr(conf.command, 'failure_metrics', None)
    if writer is not None:
        writer(path, exit_code)
        return
    dry_run = bool(getattr(conf.command, 'dry_run', False))
    api.write_failure_metrics(path, exit_code, dry_run)


def _may_write_metrics(conf, path, error):
    """Whether the metrics of a failure may go to ``path``.

    Never to a path refused as an output, nor to one the configuration
    protects (the error may have come before that check).
    """
    if isinstance(error, exception.UnsafeOutput) and error.path == path:
        return False
    try:
        protected.refuse_unsafe_outputs(conf, [('--metrics-file', path)])
    except Exception:  # refused, or a configuration that cannot be read
        return False
    return True


def _failed(conf, argv, exit_code, line, error=None):
    """Report an error that ends the command; return its exit code.

    The line goes to stderr; with --format json, stdout gets the error
    document; with --metrics-file, the metrics say how the run ended.
    """
    print(visible.escape(line), file=sys.stderr)
    if _json_requested(conf, argv):
        output.print_error(exit_code, line)
    path = _metrics_file(conf)
    if path and _may_write_metrics(conf, path, error):
        try:
            _write_failure_metrics(conf, path, exit_code)
        except OSError as exc:
            print('nova-heal: error: cannot write metrics file %s: %s'
                  % (path, exc), file=sys.stderr)
    return int(exit_code)


def _run(conf, argv):
    if not _parse(conf, argv):
        return 0
    logs.setup(conf)
    common.keep_output_order()
    if getattr(conf.command, 'verbose', False):
        logging.getLogger('healreq').logger.setLevel(logging.INFO)
    return int(conf.command.handler(conf, argv))


def main(argv=None):
    """Run ``nova-heal``; return the exit code.

    The exit code is the run's outcome whatever happens to stdout and
    stderr (see ``streams``).
    """
    # First of all, before any file is opened.
    streams.reopen_closed()
    argv = list(sys.argv[1:] if argv is None else argv)
    collector.tune()
    conf = _build_conf()
    try:
        with streams.guarded():
            return _dispatch(conf, argv)
    finally:
        conf.reset()


def _dispatch(conf, argv):
    """Run the command; map what ends it to its exit code."""
    try:
        with interruption.handled():
            return _run(conf, argv)
    except cfg.Error as exc:
        # Invalid values in configuration files surface when read.
        error = exception.InvalidInput(exception.first_line(exc))
        return _failed(conf, argv, error.exit_code, error.line())
    except exception.HealreqError as error:
        return _failed(conf, argv, error.exit_code, error.line(), error)
    except Exception as exc:
        unexpected = exc
    # Logged once the exception is handled, so that no log line gets its
    # summary appended. Tracebacks may quote connection URLs: masked.
    trace = ''.join(traceback.format_exception(
        type(unexpected), unexpected, unexpected.__traceback__))
    for line in masking.mask_password(trace).splitlines():
        LOG.error('%s', line)
    return _failed(conf, argv, ExitCode.UNEXPECTED_ERROR,
                   masking.mask_password(
                       'nova-heal: unexpected error: %s: %s' % (
                           type(unexpected).__name__,
                           exception.first_line(unexpected))))
