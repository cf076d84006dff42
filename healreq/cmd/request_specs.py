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

from healreq import api
from healreq.cmd import collector
from healreq.cmd import common
from healreq.cmd import interruption
from healreq.cmd import output
from healreq.cmd import progress
from healreq.cmd import visible
from healreq import exception
from healreq.heal import field_checks
from healreq import policies
from healreq import releases

# Bounds of the numeric options. Values outside them are refused (exit 127)
# before anything is read: an infinite pause, a rate that never lets a batch
# through, or a count no deployment has only ever come from a typo.
MAX_COUNT_LIMIT = 10 ** 9
# --batch-size overrides [healreq]/batch_size, within the option's bounds.
WORKERS_LIMIT = 64
SLEEP_LIMIT = 3600.0
MIN_RATE = 0.01
MAX_RATE = 10.0 ** 9


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
    _add_selection_options(parser)
    _add_decision_options(parser)
    _add_pacing_options(parser)
    _add_output_options(parser)
    parser.set_defaults(handler=run)


def _add_selection_options(parser):
    """Which instances and fields a run checks, and how many it heals."""
    target = parser.add_mutually_exclusive_group()
    target.add_argument('--instance', metavar='UUID',
                        help='Only this instance (its cell is found through '
                             'instance_mappings).')
    target.add_argument('--cell', metavar='UUID',
                        help='Only this cell. cell0 is refused: it only '
                             'holds instances that were never scheduled.')
    parser.add_argument('--max-count', metavar='N',
                        type=common.bounded_int(1, MAX_COUNT_LIMIT),
                        help='Stop after N instances were healed (or would '
                             'be, with --dry-run); exit %d if more remain. '
                             'N is %s.' % (
                                 exception.ExitCode.MAX_COUNT_REACHED,
                                 common.range_text(1, MAX_COUNT_LIMIT)))
    common.add_batch_size_option(parser)
    parser.add_argument('--force', action='store_true',
                        help='With --instance only: heal even if a stale '
                             'migration record, a recent update or a '
                             'missing host would skip the instance. Never '
                             'overrides task_state, vm_state or deletion.')
    parser.add_argument('--fields', metavar='LIST',
                        default=','.join(field_checks.FIELD_NAMES),
                        help='Comma-separated RequestSpec fields to check '
                             'and heal (default: all): %s. The JSON report '
                             'names drifted fields exactly so, and a spec '
                             'recreated whole (--create-missing) as spec. '
                             'Checking scheduler_hints (Nova\'s internal '
                             '_nova* hints) checks force_hosts and '
                             'force_nodes too. The other fields of a spec '
                             'are never checked: '
                             'they come from the boot request or Neutron, '
                             'or Nova ignores them (see "Fields that stay '
                             'out, and why" in the heal reference).'
                             % ', '.join(field_checks.FIELD_NAMES))


def _add_decision_options(parser):
    parser.add_argument('--az-policy', choices=policies.AZ_POLICIES,
                        default=policies.DEFAULT,
                        help='What to do with a pinned availability zone '
                             '(the spec\'s availability_zone) that differs '
                             'from the zone the instance is in '
                             '(az-pin-differs): report it (default; it '
                             'counts as drift and is listed in '
                             'reported_only, the pin is not rewritten, '
                             'other drifted fields are healed, note '
                             'az-pin-left), repin it to the instance\'s '
                             'current zone, or unpin it (null).')
    parser.add_argument('--hint-policy', choices=policies.HINT_POLICIES,
                        default=policies.DEFAULT,
                        help='What to do with a same_host scheduler hint '
                             'that names instances which no longer exist '
                             'in any cell (same-host-gone): report it '
                             '(default; it counts as drift and is listed '
                             'in reported_only, the hint is not rewritten, '
                             'other drifted fields are healed, note '
                             'same-host-left), or prune the gone uuids '
                             'from same_host, with any entry that is not a '
                             'string (it names no instance either; the '
                             'change names it); the key goes when none is '
                             'left, and every other hint stays as it is.')
    parser.add_argument('--flavor-policy',
                        choices=policies.FLAVOR_POLICIES,
                        default=policies.DEFAULT,
                        help='What to do with a spec flavor that differs '
                             'from the instance\'s embedded flavor only in '
                             'extra specs that are the flavor\'s current '
                             'definition, as after an operator rewrote the '
                             'spec from the changed flavor '
                             '(flavor-propagated): report it (default; it '
                             'counts as drift and is listed in '
                             'reported_only, the flavor is not rewritten, '
                             'other drifted fields are healed, note '
                             'flavor-propagated-left), or heal it to the '
                             'instance\'s embedded flavor (instance).')
    parser.add_argument('--create-missing', action='store_true',
                        help='Recreate the request spec of an instance '
                             'that has none, from its instance record, as '
                             'Nova builds one from components (the pinned '
                             'zone: the instance\'s, or none with '
                             '--az-policy unpin), reported healed with '
                             'reason spec-missing and drift spec. Without '
                             'it, a missing spec is an error '
                             '(spec-missing).')
    parser.add_argument('--target-release', metavar='RELEASE',
                        help='Apply the rules and object versions of this '
                             'Nova release (series, codename or Nova '
                             'major version, e.g. 2023.1, antelope or 27) '
                             'instead of the one detected from the '
                             'deployment (default: '
                             '[healreq]/target_release, else detected). '
                             'Detection: the nova-conductor and '
                             'nova-scheduler rows decide (those up, else '
                             'all); without any, nothing is written unless '
                             'the release is named. A nova-osapi_compute '
                             'row (no heartbeat under WSGI) older than '
                             'them refuses writing, unless too old to run '
                             'beside their release (then named stale); '
                             'computes never count. '
                             'Supported: %s.' % ', '.join(
                                 r.series for r in releases.RELEASES))


def _add_pacing_options(parser):
    """How fast and how parallel a run goes."""
    parser.add_argument('--workers', metavar='N', default=1,
                        type=common.bounded_int(1, WORKERS_LIMIT),
                        help='Process up to N cells in parallel (N is %s, '
                             'default 1), each with its own connection '
                             'pool; results are reported in cell order, '
                             'exactly as a serial run reports them, and '
                             '--max-count counts across all of them.'
                             % common.range_text(1, WORKERS_LIMIT))
    parser.add_argument('--sleep', metavar='SECONDS',
                        type=common.bounded_float(0.0, SLEEP_LIMIT),
                        default=0.0,
                        help='Pause this long after each batch (%s '
                             'seconds), to spare a busy database.'
                             % common.range_text(0, SLEEP_LIMIT))
    parser.add_argument('--max-rate', metavar='N',
                        type=common.bounded_float(MIN_RATE, MAX_RATE),
                        help='Check at most N instances per second (N is '
                             '%s).' % common.range_text(MIN_RATE, MAX_RATE))


def _add_output_options(parser):
    """What a run writes besides the database: report, plan, metrics."""
    common.add_output_option(
        parser, '--plan', 'FILE',
        'With --dry-run: write every change the run would make to FILE, '
        'for review and for "nova-heal apply FILE".')
    common.add_output_option(
        parser, '--metrics-file', 'PATH',
        'At the end, whatever the exit code, write Prometheus metrics '
        '(text format, written atomically) for node_exporter\'s textfile '
        'collector.')
    parser.add_argument('--quiet', action='store_true',
                        help='No progress (otherwise a line on stderr '
                             'when it is a terminal, else a log line every '
                             '[healreq]/progress_interval seconds: '
                             'instances done and total, rate, ETA, drift '
                             'so far) and no text report (for cron); errors '
                             'still go to stderr and the exit code tells '
                             'the outcome.')
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='Report format on stdout (default: text).')
    parser.add_argument('--verbose', action='store_true',
                        help='Explain each drift and log progress to '
                             'stderr.')


def _options(conf):
    command = conf.command
    instance = common.uuid_option(command.instance, 'instance')
    cell = common.uuid_option(command.cell, 'cell')
    common.non_empty(command.plan, '--plan', 'a path')
    common.non_empty(command.metrics_file, '--metrics-file', 'a path')
    if command.force and not instance:
        raise exception.InvalidInput('--force requires --instance')
    if command.plan and not command.dry_run:
        raise exception.InvalidInput('--plan requires --dry-run')
    checked = tuple(name.strip() for name in command.fields.split(',')
                    if name.strip())
    if not checked or set(checked) - set(field_checks.FIELD_NAMES):
        raise exception.InvalidInput(
            '--fields takes a comma-separated list of %s; got %r'
            % (', '.join(field_checks.FIELD_NAMES), command.fields))
    return api.Options.from_conf(
        conf, dry_run=command.dry_run, instance_uuid=instance, cell_uuid=cell,
        max_count=command.max_count, batch_size=command.batch_size,
        collect_plan=bool(command.plan), sleep=command.sleep,
        workers=command.workers, max_rate=command.max_rate,
        target_release=command.target_release, force=command.force,
        checked_fields=checked, az_policy=command.az_policy,
        hint_policy=command.hint_policy, flavor_policy=command.flavor_policy,
        create_missing=command.create_missing)


def run(conf, argv):
    """Run request-specs through the API; print the report and problems.

    The first SIGHUP, SIGINT or SIGTERM stops the run after the current
    batch; what was done is reported and the exit code is 129, 130 or
    143.
    """
    options = _options(conf)
    collector.tune(options.batch_size)
    command = conf.command
    display = progress.for_command(conf, sys.stderr, 'drifted',
                                   limit=options.max_count)
    try:
        with interruption.deferred():
            result = api.run_request_specs(
                conf, options, plan_file=command.plan,
                metrics_file=command.metrics_file,
                command=common.command_line(argv), progress=display,
                stop_check=interruption.check)
    finally:
        if display is not None:
            display.close()
    for notice in result.notices:
        print(visible.escape(notice), file=sys.stderr)
    _render(conf, options, result)
    for problem in result.problems:
        print(visible.escape(problem), file=sys.stderr)
    return result.exit_code


def _render(conf, options, result):
    command = conf.command
    json_format = command.format == 'json'
    if json_format or not command.quiet:
        output.print_report(
            result.report, result.exit_code, result.run_id, json_format,
            verbose=command.verbose,
            list_skipped=command.verbose or bool(options.instance_uuid),
            problems=result.problems)
    if not json_format and not command.quiet:
        if command.plan and not result.problems:
            common.emit('Plan of %d change(s) written to %s; review it, '
                        'then run "nova-heal apply %s".'
                        % (len(result.report.planned), command.plan,
                           command.plan))
