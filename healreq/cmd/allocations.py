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

"""``nova-heal allocations``: audit Placement allocations. Read only."""

import sys

from healreq import api
from healreq.cmd import common
from healreq.cmd import interruption
from healreq.cmd import progress
from healreq import exception
from healreq.heal import allocation_checks

INTERRUPTIONS = (exception.ExitCode.HANGUP, exception.ExitCode.INTERRUPTED,
                 exception.ExitCode.TERMINATED)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        'allocations',
        help='Audit Placement allocations against what Nova would '
             'allocate (read only).',
        description='Compare each live instance\'s allocations in the '
                    'Placement database, and those of its migrations, '
                    'with what the deployment\'s Nova release would '
                    'allocate for its current flavor and image on its '
                    'compute node, and print the commands that make '
                    'Placement agree. Nothing is written to any database '
                    'and no audit run is recorded. Needs '
                    '[placement_database]/connection: pass placement.conf '
                    'as a second --config-file.',
        epilog=common.ALLOCATIONS_EXIT_CODES_HELP,
        formatter_class=common.HelpFormatter)
    target = parser.add_mutually_exclusive_group()
    target.add_argument('--instance', metavar='UUID',
                        help='Only this instance, in the cell that holds '
                             'it: the one instance_mappings names, else '
                             'any other, where it is an error '
                             '(instance-mapped-elsewhere) unless an '
                             'operation is in flight.')
    target.add_argument('--cell', metavar='UUID',
                        help='Only this cell. cell0 is refused: it only '
                             'holds instances that were never scheduled.')
    common.add_batch_size_option(parser)
    common.add_audit_output_options(parser)
    parser.add_argument('--quiet', action='store_true',
                        help='No progress (otherwise a line on stderr '
                             'when it is a terminal, else a log line every '
                             '[healreq]/progress_interval seconds) and no '
                             'text report; errors still go to stderr and '
                             'the exit code tells the outcome.')
    parser.add_argument('--verbose', action='store_true',
                        help='Also list skipped instances, with the found '
                             'and expected resources of every consumer.')
    parser.set_defaults(handler=run,
                        failure_metrics=api.write_allocations_failure_metrics)


def run(conf, argv):
    """Run the audit through the API; print the report; return the code.

    The first SIGHUP, SIGINT or SIGTERM stops the audit after the current
    batch; what was checked is reported and the exit code is 129, 130 or
    143.
    """
    command = conf.command
    common.non_empty(command.metrics_file, '--metrics-file', 'a path')
    instance_uuid = common.uuid_option(command.instance, 'instance')
    cell_uuid = common.uuid_option(command.cell, 'cell')
    display = progress.for_command(conf, sys.stderr, 'mismatched')
    try:
        with interruption.deferred():
            result = api.run_allocations(
                conf, instance_uuid=instance_uuid, cell_uuid=cell_uuid,
                batch_size=command.batch_size,
                metrics_file=command.metrics_file, progress=display,
                stop_check=interruption.check)
    finally:
        if display is not None:
            display.close()
    return common.print_audit_report(command, result, report_document,
                                     text_lines)


def report_document(result):
    """The JSON report: summary, results, cell errors, exit code.

    ``problems`` are the one-line errors the exit code counts besides
    the results (a metrics file that could not be written), as in the
    report of request-specs.
    """
    report = result.report
    return {
        'problems': list(result.problems),
        'summary': report.summary(),
        'results': [r.as_dict() for r in report.results],
        'cell_errors': list(report.cell_errors),
        'unattributed_consumers': report.unattributed,
        'release': report.release and report.release.series,
        'exit_code': int(result.exit_code),
    }


def text_lines(result, verbose=False):
    """The text report, one line at a time, control characters escaped."""
    report = result.report
    yield from common.audit_result_lines(
        report, allocation_checks.SKIPPED, verbose, _result_lines)
    summary = report.summary()
    yield ('Checked %(instances_checked)d instance(s): %(mismatched)d '
           'mismatched, %(pending)d pending, %(skipped)d skipped, '
           '%(errors)d error(s).' % summary)
    if report.unattributed:
        yield ('%d consumer(s) holding allocations are no instance or '
               'migration of the cells read (not judged).'
               % report.unattributed)
    if result.exit_code in INTERRUPTIONS:
        yield 'Exit code %d: %s.' % (
            result.exit_code,
            exception.ALLOCATIONS_MEANINGS[result.exit_code].text)


def _result_lines(found, verbose):
    label = found.status.upper()
    detail = ', '.join(found.problems) or found.reason or ''
    yield '%s %s (cell %s): %s' % (label, found.instance_uuid,
                                   found.cell_uuid, detail)
    if found.message:
        yield '  %s' % found.message
    for consumer in found.consumers:
        yield '  %s %s on %s: found %s, expected %s' % (
            consumer.kind, consumer.consumer_uuid, consumer.provider_uuid,
            _amounts(consumer.found), _amounts(consumer.expected))
    if found.not_checked:
        yield '  not checked: %s' % ', '.join(found.not_checked)
    if found.remedy:
        yield '  remedy, in this order:'
        for command in found.remedy:
            yield '    %s' % command


def _amounts(resources):
    return ', '.join('%s=%d' % item for item in sorted(
        resources.items())) or 'nothing'
