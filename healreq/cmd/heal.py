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
command), runs the engine and turns its report into output and an exit
code. Only this layer prints or exits.
"""

import argparse
import contextlib
import io
import sys
import traceback

from oslo_config import cfg
from oslo_db import exception as db_exc
from oslo_log import log as logging
import sqlalchemy.exc

from healreq.cmd import common
from healreq.cmd import output
from healreq import conf as healreq_conf
from healreq.db import engines
from healreq.db import urls
from healreq.heal import checks
from healreq.heal import engine as heal_engine
from healreq.heal import fields
from healreq import version

LOG = logging.getLogger(__name__)
ExitCode = common.ExitCode

_LOG_LEVELS = ['oslo_db=WARNING', 'oslo_config=WARNING', 'sqlalchemy=WARNING',
               'healreq=WARNING']


class _Stop(Exception):
    def __init__(self, code, message=None):
        super().__init__(message)
        self.code = code
        self.message = message


def _request_specs_parser(subparsers):
    parser = subparsers.add_parser(
        'request-specs',
        help='Find and heal RequestSpecs that drifted from their instance.',
        description='Compare every live instance\'s RequestSpec with the '
                    'instance record in its cell and rewrite the drifted '
                    'fields, one compare-and-swap per instance.',
        epilog=common.EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--dry-run', action='store_true',
                        help='Report what would be healed; write nothing.')
    target = parser.add_mutually_exclusive_group()
    target.add_argument('--instance', metavar='UUID',
                        help='Only this instance (its cell is found through '
                             'instance_mappings).')
    target.add_argument('--cell', metavar='UUID',
                        help='Only this cell.')
    parser.add_argument('--max-count', metavar='N', type=int,
                        help='Stop after N instances were healed (or would '
                             'be, with --dry-run); exit 1 if more remain.')
    parser.add_argument('--batch-size', metavar='N', type=int,
                        help='Instances read per query (default: '
                             '[healreq]/batch_size).')
    parser.add_argument('--force', action='store_true',
                        help='With --instance only: heal even if a stale '
                             'migration record, a recent update or a '
                             'missing host would skip the instance. Never '
                             'overrides task_state, vm_state or deletion.')
    parser.add_argument('--fields', metavar='LIST',
                        default=','.join(fields.FIELD_NAMES),
                        help='Comma-separated RequestSpec fields to check '
                             'and heal (default: all): %s.'
                             % ', '.join(fields.FIELD_NAMES))
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='Report format on stdout (default: text).')
    parser.add_argument('--verbose', action='store_true',
                        help='Explain each drift and log progress to '
                             'stderr.')
    parser.set_defaults(handler=_request_specs)


def _demo_parser(subparsers):
    parser = subparsers.add_parser(
        'demo',
        help='Build a small SQLite deployment and run request-specs on it.',
        description='Builds an API database, cell0 and two cells with '
                    'realistic flavors, instances and request specs '
                    '(including a failed resize) in a scratch directory, '
                    'then runs a dry run, a heal and a verification run.')
    parser.add_argument('--workdir', metavar='DIR',
                        help='Build the deployment here and keep it '
                             '(default: a temporary directory, removed '
                             'afterwards).')
    parser.set_defaults(handler=_demo)


def _add_commands(subparsers):
    _request_specs_parser(subparsers)
    _demo_parser(subparsers)


def _build_conf():
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    logging.set_defaults(
        default_log_levels=logging.get_default_log_levels() + _LOG_LEVELS)
    conf.set_default('use_stderr', True)
    healreq_conf.register_opts(conf)
    conf.register_cli_opt(cfg.SubCommandOpt(
        'command', title='commands', handler=_add_commands,
        help='Run "nova-heal COMMAND --help" for the options of a command.'))
    return conf


def _parse(conf, argv):
    """Parse ``argv``; argparse errors become one line and exit 127."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, project='nova', prog='nova-heal',
                 version=version.version_info.version_string(),
                 description='Find and heal OpenStack Nova RequestSpec '
                             'drift.')
    except SystemExit as exc:
        if exc.code in (0, None):
            raise _Stop(0)  # --help or --version
        lines = [line for line in captured.getvalue().splitlines() if line]
        raise _Stop(ExitCode.INVALID_INPUT,
                    lines[-1] if lines else 'nova-heal: invalid arguments')
    except cfg.Error as exc:
        raise _Stop(ExitCode.INVALID_INPUT,
                    'nova-heal: error: %s' % str(exc).splitlines()[0])
    sys.stderr.write(captured.getvalue())


def _options(conf):
    command = conf.command
    try:
        instance = (common.canonical_uuid(command.instance, 'instance')
                    if command.instance else None)
        cell = (common.canonical_uuid(command.cell, 'cell')
                if command.cell else None)
    except ValueError as exc:
        raise _Stop(ExitCode.INVALID_INPUT, 'nova-heal: error: %s' % exc)
    if command.force and not instance:
        raise _Stop(ExitCode.INVALID_INPUT,
                    'nova-heal: error: --force requires --instance')
    for name in ('max_count', 'batch_size'):
        value = getattr(command, name)
        if value is not None and value < 1:
            raise _Stop(ExitCode.INVALID_INPUT,
                        'nova-heal: error: --%s must be a positive integer'
                        % name.replace('_', '-'))
    if not conf.api_database.connection:
        raise _Stop(ExitCode.INVALID_INPUT,
                    'nova-heal: error: [api_database]/connection is not '
                    'set; pass --config-file /etc/nova/nova.conf')
    checked = tuple(name.strip() for name in command.fields.split(',')
                    if name.strip())
    unknown = sorted(set(checked) - set(fields.FIELD_NAMES))
    if unknown or not checked:
        raise _Stop(ExitCode.INVALID_INPUT,
                    'nova-heal: error: --fields takes a comma-separated list '
                    'of %s; got %r' % (', '.join(fields.FIELD_NAMES),
                                       command.fields))
    settings = checks.Settings(
        skip_updated_within=conf.healreq.skip_updated_within,
        force=command.force, checked_fields=checked)
    return heal_engine.Options(
        dry_run=command.dry_run, instance_uuid=instance, cell_uuid=cell,
        max_count=command.max_count,
        batch_size=command.batch_size or conf.healreq.batch_size,
        settings=settings)


def _request_specs(conf):
    options = _options(conf)
    try:
        api_engine = engines.create_engine(conf.api_database.connection)
    except (sqlalchemy.exc.ArgumentError, ValueError) as exc:
        raise _Stop(ExitCode.INVALID_INPUT,
                    'nova-heal: error: invalid [api_database]/connection: '
                    '%s' % exc)
    try:
        run = heal_engine.Engine(api_engine, conf.database.connection,
                                 options)
        report = run.run()
    except heal_engine.InvalidInput as exc:
        raise _Stop(ExitCode.INVALID_INPUT, 'nova-heal: error: %s' % exc)
    except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as exc:
        raise _Stop(ExitCode.NEEDS_ATTENTION,
                    'nova-heal: error: API database: %s'
                    % _first_line(getattr(exc, 'orig', None) or exc))
    finally:
        api_engine.dispose()
    code = common.exit_code_for(report)
    if conf.command.format == 'json':
        print(output.render_json(report, code))
    else:
        print(output.render_text(
            report, code, verbose=conf.command.verbose,
            list_skipped=conf.command.verbose or bool(options.instance_uuid)))
    return code


def _demo(conf):
    from healreq.testing import demo
    return demo.run(conf.command.workdir, main)


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ''


def main(argv=None):
    """Run ``nova-heal``; return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    conf = _build_conf()
    try:
        _parse(conf, argv)
        logging.setup(conf, 'healreq')
        if getattr(conf.command, 'verbose', False):
            logging.getLogger('healreq').logger.setLevel(logging.INFO)
        return int(conf.command.handler(conf))
    except cfg.Error as exc:
        # Invalid values in configuration files surface when read.
        print(urls.mask_password('nova-heal: error: %s' % _first_line(exc)),
              file=sys.stderr)
        return int(ExitCode.INVALID_INPUT)
    except _Stop as stop:
        if stop.message:
            print(urls.mask_password(stop.message), file=sys.stderr)
        return int(stop.code)
    except Exception as exc:
        # Tracebacks may quote connection URLs: log them masked.
        LOG.error(urls.mask_password(traceback.format_exc()))
        print(urls.mask_password('nova-heal: unexpected error: %s: %s' % (
            type(exc).__name__, _first_line(exc))), file=sys.stderr)
        return int(ExitCode.UNEXPECTED_ERROR)
    finally:
        conf.reset()


if __name__ == '__main__':
    sys.exit(main())
