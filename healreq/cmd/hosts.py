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

"""``nova-heal hosts``: what the scheduler reads about hosts. Read only."""


from healreq import api
from healreq.cmd import common
from healreq.cmd import interruption
from healreq.cmd import visible
from healreq import exception
from healreq.heal import host_checks

INTERRUPTIONS = (exception.ExitCode.HANGUP, exception.ExitCode.INTERRUPTED,
                 exception.ExitCode.TERMINATED)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        'hosts',
        help='Audit what the scheduler reads about each host: Placement '
             'aggregates and providers, pinned CPUs, PCI devices (read '
             'only).',
        description='Compare each host\'s Nova aggregates with its '
                    'resource provider\'s Placement aggregates, every '
                    'compute node with its provider and every root '
                    'provider with the compute nodes, and check the pinned '
                    'CPUs of the instances on each host and the PCI '
                    'devices held for them; print the commands that make '
                    'them agree, or what an operator must decide. Nothing '
                    'is written to any database and no audit run is '
                    'recorded. Needs [placement_database]/connection: '
                    'pass placement.conf as a second --config-file.',
        epilog=common.HOSTS_EXIT_CODES_HELP,
        formatter_class=common.HelpFormatter)
    target = parser.add_mutually_exclusive_group()
    target.add_argument('--host', metavar='NAME',
                        help='Only this host (compute nodes of its name in '
                             'every cell). Orphaned providers are judged '
                             'only without --host and --cell.')
    target.add_argument('--cell', metavar='UUID',
                        help='Only this cell\'s hosts. cell0 is refused: '
                             'it has no hosts.')
    common.add_batch_size_option(parser, 'Hosts')
    common.add_audit_output_options(parser)
    parser.add_argument('--verbose', action='store_true',
                        help='Also list skipped hosts, whose pinned CPUs '
                             'and PCI devices were not judged.')
    parser.set_defaults(handler=run,
                        failure_metrics=api.write_hosts_failure_metrics)


def run(conf, argv):
    """Run the audit through the API; print the report; return the code.

    The first SIGHUP, SIGINT or SIGTERM stops the audit after the current
    page of hosts; what was checked is reported and the exit code is 129,
    130 or 143.
    """
    command = conf.command
    common.non_empty(command.metrics_file, '--metrics-file', 'a path')
    common.non_empty(command.host, '--host', 'a host name')
    cell_uuid = common.uuid_option(command.cell, 'cell')
    with interruption.deferred():
        result = api.run_hosts(
            conf, host=command.host, cell_uuid=cell_uuid,
            batch_size=command.batch_size, metrics_file=command.metrics_file,
            stop_check=interruption.check)
    return common.print_audit_report(command, result, report_document,
                                     text_lines)


def report_document(result):
    """The JSON report: problems, summary, results, cell errors, exit code."""
    report = result.report
    return {
        'problems': list(result.problems),
        'summary': report.summary(),
        'results': [r.as_dict() for r in report.results],
        'cell_errors': list(report.cell_errors),
        'not_checked': list(report.not_checked),
        'exit_code': int(result.exit_code),
    }


def text_lines(result, verbose=False):
    """The text report, one line at a time, control characters escaped."""
    report = result.report
    yield from common.audit_result_lines(
        report, host_checks.SKIPPED, verbose, _result_lines)
    for note in report.not_checked:
        yield visible.escape('Not checked: %s.' % note)
    summary = report.summary()
    yield ('Checked %(hosts_checked)d host(s) and %(providers_checked)d '
           'provider(s): %(mismatched)d mismatched, %(skipped)d skipped, '
           '%(errors)d error(s).' % summary)
    if result.exit_code in INTERRUPTIONS:
        yield 'Exit code %d: %s.' % (
            result.exit_code,
            exception.HOSTS_MEANINGS[result.exit_code].text)


def _result_lines(found, verbose):
    label = found.status.upper()
    what = ('host %s (cell %s)' % (found.host, found.cell_uuid)
            if found.host is not None
            else 'provider %s' % found.provider_uuid)
    detail = ', '.join(found.problems) or found.reason or ''
    yield '%s %s: %s' % (label, what, detail)
    if found.message:
        yield '  %s' % found.message
    if found.not_checked:
        yield '  not checked (%s): %s' % (
            found.reason, ', '.join(found.not_checked))
    for item in found.details:
        yield '  %s' % _detail_text(item)
    if found.remedy:
        yield '  remedy, in this order:'
        for command in found.remedy:
            yield '    %s' % command


def _detail_text(item):
    parts = []
    for key in host_checks.DETAIL_KEYS.get(item['reason'], ()):
        if key not in item:
            continue
        value = item[key]
        if isinstance(value, list):
            value = ','.join(_short(v) for v in value) or '-'
        parts.append('%s=%s' % (key, value))
    return '%s: %s' % (item['reason'], ' '.join(parts))


def _short(value):
    if isinstance(value, dict):
        return '%s(%s:%s)' % (value.get('consumer_uuid'), value.get('kind'),
                              '+'.join('%s=%s' % kv for kv in sorted(
                                  value.get('resources', {}).items())))
    return str(value)
