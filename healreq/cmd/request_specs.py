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


"""``nova-heal request-specs``: find and heal RequestSpec drift."""

import sys
import time

from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq.audit import plan
from healreq.cmd import common
from healreq.cmd import metrics
from healreq.cmd import output
from healreq.cmd import progress
from healreq.db import engines
from healreq.heal import engine as heal_engine
from healreq.heal import fields

ExitCode = common.ExitCode


def add_parser(subparsers):
    parser = subparsers.add_parser(
        'request-specs',
        help='Find and heal RequestSpecs that drifted from their instance.',
        description='Compare every live instance\'s RequestSpec with the '
                    'instance record in its cell and rewrite the drifted '
                    'fields, one compare-and-swap per instance. Every run '
                    'and every change is recorded in the audit store '
                    'first (see "nova-heal audit").',
        epilog=common.EXIT_CODES_HELP,
        formatter_class=common.HelpFormatter)
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
    parser.add_argument('--plan', metavar='FILE',
                        help='With --dry-run: write every change the run '
                             'would make to FILE, for review and for '
                             '"nova-heal apply FILE".')
    parser.add_argument('--workers', metavar='N', type=int, default=1,
                        help='Process up to N cells in parallel, each with '
                             'its own connections (default 1); results are '
                             'reported in cell order.')
    parser.add_argument('--sleep', metavar='SECONDS', type=float,
                        default=0.0,
                        help='Pause this long after each batch, to spare a '
                             'busy database.')
    parser.add_argument('--max-rate', metavar='N', type=float,
                        help='Check at most N instances per second.')
    parser.add_argument('--metrics-file', metavar='PATH',
                        help='At the end, write Prometheus metrics (text '
                             'format, written atomically) for '
                             'node_exporter\'s textfile collector.')
    parser.add_argument('--quiet', action='store_true',
                        help='No progress display and no text report (for '
                             'cron); errors still go to stderr and the '
                             'exit code tells the outcome.')
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='Report format on stdout (default: text).')
    parser.add_argument('--verbose', action='store_true',
                        help='Explain each drift and log progress to '
                             'stderr.')
    parser.set_defaults(handler=run)


def _options(conf):
    command = conf.command
    instance = common.uuid_option(command.instance, 'instance')
    cell = common.uuid_option(command.cell, 'cell')
    if command.force and not instance:
        raise common.invalid('--force requires --instance')
    if command.plan and not command.dry_run:
        raise common.invalid('--plan requires --dry-run')
    for name in ('max_count', 'batch_size', 'workers'):
        value = getattr(command, name)
        if value is not None and value < 1:
            raise common.invalid('--%s must be a positive integer'
                                 % name.replace('_', '-'))
    if command.sleep < 0 or (command.max_rate is not None
                             and command.max_rate <= 0):
        raise common.invalid('--sleep must not be negative and --max-rate '
                             'must be positive')
    checked = tuple(name.strip() for name in command.fields.split(',')
                    if name.strip())
    if not checked or set(checked) - set(fields.FIELD_NAMES):
        raise common.invalid(
            '--fields takes a comma-separated list of %s; got %r'
            % (', '.join(fields.FIELD_NAMES), command.fields))
    return heal_engine.Options(
        dry_run=command.dry_run, instance_uuid=instance, cell_uuid=cell,
        max_count=command.max_count,
        batch_size=command.batch_size or conf.healreq.batch_size,
        collect_plan=bool(command.plan), sleep=command.sleep,
        workers=command.workers,
        max_rate=command.max_rate,
        settings=common.settings(conf, command.force, checked))


def _filters(options):
    return {'instance': options.instance_uuid, 'cell': options.cell_uuid,
            'max_count': options.max_count, 'force': options.settings.force,
            'workers': options.workers, 'sleep': options.sleep,
            'max_rate': options.max_rate,
            'fields': list(options.settings.checked_fields)}


def run(conf, argv):
    options = _options(conf)
    # Each cell worker reads and writes the API database.
    with common.api_engine(conf, engines.POOL_SIZE * options.workers) as (
            api_engine):
        store = common.open_audit(conf)
        try:
            return _run(conf, argv, options, api_engine, store)
        finally:
            store.dispose()


def _run(conf, argv, options, api_engine, store):
    run_id = None
    try:
        store.recover(api_engine)
        run_id = store.start_run(
            'dry-run' if options.dry_run else 'heal',
            common.command_line(argv), _filters(options))
        engine = heal_engine.Engine(api_engine, conf.database.connection,
                                    options, audit=store, run_id=run_id)
        if not conf.command.quiet and sys.stderr.isatty():
            engine.progress = progress.Progress(sys.stderr)
        started = time.monotonic()
        try:
            report = engine.run()
        finally:
            if engine.progress is not None:
                engine.progress.close()
    except heal_engine.InvalidInput as exc:
        stop = common.invalid(exc)
    except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as exc:
        stop = common.Stop(ExitCode.NEEDS_ATTENTION,
                           'nova-heal: error: API database: %s'
                           % common.first_line(getattr(exc, 'orig', None)
                                               or exc))
    else:
        stop = None
    if stop is not None:
        if run_id is not None:
            store.finish_run(run_id, {'error': stop.message}, stop.code)
        raise stop
    code = common.exit_code_for(report)
    problems = _write_outputs(conf, report, code, run_id,
                              time.monotonic() - started, options.dry_run)
    if problems:
        code = ExitCode.NEEDS_ATTENTION
    store.finish_run(run_id, report.summary(), code)
    if conf.command.format == 'json':
        common.emit_pieces(output.json_chunks(report, code, run_id), '')
    elif not conf.command.quiet:
        common.emit_pieces(output.text_lines(
            report, code, verbose=conf.command.verbose,
            list_skipped=conf.command.verbose or bool(options.instance_uuid),
            run_id=run_id))
        if conf.command.plan and not problems:
            common.emit('Plan of %d change(s) written to %s; review it, '
                        'then run "nova-heal apply %s".'
                        % (len(report.planned), conf.command.plan,
                           conf.command.plan))
    for problem in problems:
        print(problem, file=sys.stderr)
    return code


def _write_outputs(conf, report, code, run_id, duration, dry_run):
    """Write the plan and metrics files; return one-line problems."""
    problems = []
    if conf.command.plan:
        try:
            plan.write_plan(conf.command.plan, run_id, report.planned)
        except OSError as exc:
            problems.append('nova-heal: error: cannot write plan file %s: %s'
                            % (conf.command.plan, exc))
    if conf.command.metrics_file:
        now = time.time()
        text = metrics.render(report, code, duration, now, dry_run)
        success = now if code in (ExitCode.HEALED,
                                  ExitCode.NOTHING_TO_HEAL) else None
        try:
            metrics.write(conf.command.metrics_file, text, success)
        except OSError as exc:
            problems.append('nova-heal: error: cannot write metrics file '
                            '%s: %s' % (conf.command.metrics_file, exc))
    return problems
