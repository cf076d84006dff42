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


"""``nova-heal audit``, ``revert`` and ``apply``: review and undo."""

import difflib
import glob
import json
import os
import sys

from oslo_config import cfg

from healreq import api
from healreq.audit import identity
from healreq.cmd import common
from healreq.cmd import interruption
from healreq.cmd import output
from healreq.cmd import visible
from healreq import exception

LIST_LIMIT = 100000  # most runs "audit list" shows at once

_FORMAT_HELP = 'Output format on stdout (default: text).'


def add_parsers(subparsers):
    """Add the audit, revert and apply commands."""
    _add_audit_parser(subparsers)
    _add_revert_parser(subparsers)
    _add_apply_parser(subparsers)


def _add_audit_parser(subparsers):
    audit = subparsers.add_parser(
        'audit', help='Review past runs and their changes.',
        description='Every run of request-specs, revert and apply is '
                    'recorded in the audit store ([healreq]/'
                    'audit_connection) with its findings, and every change '
                    'before it is written. A run records its operator by '
                    'the real user id of the process (its passwd name and '
                    'uid, "root (uid 0)", or uid=N without a name); '
                    'SUDO_USER or LOGNAME, when set and different, only as '
                    'a labelled annotation.')
    actions = audit.add_subparsers(dest='audit_action', metavar='ACTION',
                                   help='list or show.')
    actions.required = True
    listing = actions.add_parser('list', help='List the latest runs.')
    listing.add_argument('--limit', default=20, metavar='N',
                         type=common.bounded_int(1, LIST_LIMIT),
                         help='How many runs, %s (default 20).'
                              % common.range_text(1, LIST_LIMIT))
    listing.add_argument('--format', choices=('text', 'json'),
                         default='text', help=_FORMAT_HELP)
    listing.set_defaults(handler=audit_list)
    show = actions.add_parser('show', help='Show one run and its changes.')
    show.add_argument('run_id', metavar='RUN_ID',
                      help='The run to show, as "audit list" and every '
                           'report print it ("Run id: ...").')
    show.add_argument('--format', choices=('text', 'json'), default='text',
                      help=_FORMAT_HELP)
    show.set_defaults(handler=audit_show)


def _add_revert_parser(subparsers):
    revert = subparsers.add_parser(
        'revert', help='Put back the values a run replaced.',
        description='Write back the before value of every change RUN_ID '
                    'applied, only where the row still holds the value the '
                    'run wrote, no operation is in flight, and the recorded '
                    'value matches its recorded digest and is a RequestSpec '
                    'of that instance and row. Audited as a run of its '
                    'own. A run still running (audit list shows no exit '
                    'code, and its process or connection is alive) is '
                    'never reverted in part: refused (exit %d) before '
                    'anything is written, unless --wait waits for its end. '
                    'A run that crashed is reverted as it is.'
                    % exception.ExitCode.CONFLICT,
        epilog=common.REVERT_EXIT_CODES_HELP,
        formatter_class=common.HelpFormatter)
    revert.add_argument('run_id', metavar='RUN_ID',
                        help='The run whose applied changes to put back '
                             '(see "nova-heal audit list").')
    revert.add_argument('--instance', metavar='UUID',
                        help='Only this instance.')
    revert.add_argument('--dry-run', action='store_true',
                        help='Report what would be written back; write '
                             'nothing.')
    revert.add_argument('--wait', action='store_true',
                        help='If RUN_ID is still running, wait for it to '
                             'end, then revert all it did. A signal '
                             '(SIGHUP, SIGINT, SIGTERM) ends the wait; '
                             'nothing is reverted or recorded.')
    revert.add_argument('--format', choices=('text', 'json'), default='text',
                        help=_FORMAT_HELP)
    revert.set_defaults(handler=revert_run, verbose=True)


def _add_apply_parser(subparsers):
    apply = subparsers.add_parser(
        'apply', help='Apply the changes of a reviewed plan file.',
        description='Apply the changes of a plan written by '
                    '"request-specs --dry-run --plan FILE", each only where '
                    'the row still holds the value the plan recorded '
                    '(by digest), no operation is in flight, and a heal '
                    'would write exactly the plan\'s new value now (the '
                    'decision is taken again on the instance\'s current '
                    'records). The decision follows the settings the plan '
                    'recorded: its --az-policy, and its Nova release: one '
                    'named when the plan was written is applied as named; '
                    'one detected then must be the one detected now, or '
                    'the plan is refused (exit %d; write a new plan). '
                    'Audited as a run of its own.'
                    % exception.ExitCode.INVALID_INPUT,
        epilog=common.APPLY_EXIT_CODES_HELP,
        formatter_class=common.HelpFormatter)
    apply.add_argument('plan_file', metavar='PLAN_FILE',
                       help='A plan written by "request-specs --dry-run '
                            '--plan PLAN_FILE".')
    apply.add_argument('--dry-run', action='store_true',
                       help='Check the plan against the database and report '
                            'what would be written; write nothing.')
    apply.add_argument('--format', choices=('text', 'json'), default='text',
                       help=_FORMAT_HELP)
    apply.set_defaults(handler=apply_plan, verbose=True)


def _require_configuration(conf):
    """Refuse to read the default store when no configuration was read.

    As request-specs refuses without [api_database]/connection: the
    store must be the one the configuration names (a configuration file,
    a --config-dir file, or the environment naming the store), not
    whatever the default place holds.
    """
    if conf.config_file or any(
            glob.glob(os.path.join(directory, '*.conf'))
            for directory in conf.config_dir or ()):
        return
    for name in ('state_path', 'audit_connection'):
        where = conf.get_location(name, 'healreq')
        if where is not None and where.location not in (
                cfg.Locations.opt_default, cfg.Locations.set_default):
            return
    raise exception.InvalidInput(
        'no configuration file was read, so the audit store is not known; '
        'pass --config-file /etc/nova/nova.conf (the store is [healreq]/'
        'state_path or [healreq]/audit_connection)')


def _warn(line):
    print(visible.escape(line), file=sys.stderr)


def audit_list(conf, argv):
    _require_configuration(conf)
    runs = api.list_runs(conf, conf.command.limit, warn=_warn)
    if conf.command.format == 'json':
        common.emit(json.dumps([_run_dict(r) for r in runs], indent=2))
        return 0
    for line in _table(LIST_COLUMNS, [_list_row(run) for run in runs]):
        common.emit(line)
    return 0


# The columns of "audit list", as nova-manage's list commands head them.
LIST_COLUMNS = ('RUN ID', 'STARTED', 'MODE', 'EXIT', 'OPERATOR@HOST',
                'SUMMARY')


def _list_row(run):
    """The cells of ``run``'s line in "audit list", escaped."""
    summary = run['summary'] or {}
    return [visible.escape(str(cell)) for cell in (
        run['id'], run['started_at'], run['mode'],
        '-' if run['exit_code'] is None else run['exit_code'],
        '%s@%s' % (_printable(run['operator']), _printable(run['host'])),
        ', '.join('%s %s' % (k, v) for k, v in summary.items()
                  if k in ('drifted', 'healed', 'errors', 'conflicts')))]


def _table(header, rows):
    """A header line then a line per row, columns two spaces apart."""
    widths = [max(len(cell) for cell in column)
              for column in zip(header, *rows)]
    for row in [header] + rows:
        yield '  '.join(cell.ljust(width) for cell, width
                        in zip(row, widths)).rstrip()


def _emit_line(text):
    """Print one line of text output, its control characters escaped."""
    common.emit(visible.escape(text))


def _printable(text):
    # Runs recorded by earlier releases may hold any character there.
    return identity.printable(text or '')


def _run_dict(run):
    result = dict(run)
    for key in ('started_at', 'ended_at'):
        result[key] = run[key] and run[key].isoformat()
    return result


def _change_dict(change):
    return {key: change[key] for key in (
        'instance_uuid', 'cell_uuid', 'spec_id', 'action', 'state', 'detail',
        'before_digest', 'after_digest', 'fields')} | {
        'before': change['before_text'], 'after': change['after_text']}


def readable_diff(before, after, fields, action='update'):
    """A unified diff of the changed fields, pretty-printed.

    An insert or a delete shows the whole document created or removed.
    """
    def lines(text):
        if text is None:
            return []
        if action != 'update':
            return _document_lines(text)
        try:
            data = json.loads(text)['nova_object.data']
            shown = {f: data.get(f) for f in fields}
        except (ValueError, KeyError, TypeError):
            shown = text
        return json.dumps(shown, indent=2, sort_keys=True).splitlines()
    return list(difflib.unified_diff(lines(before), lines(after),
                                     'before', 'after', lineterm=''))


def _document_lines(text):
    """A whole spec document, pretty-printed (as it is if not JSON)."""
    try:
        shown = json.loads(text)
    except ValueError:
        return text.splitlines()
    return json.dumps(shown, indent=2, sort_keys=True).splitlines()


def _change_title(change, fields):
    """What a change did, as ``audit show`` heads it."""
    if change['action'] == 'update':
        return 'fields %s' % ', '.join(fields)
    return '%s of the whole spec (request_specs row %s)' % (
        change['action'], change['spec_id'] or '-')


def audit_show(conf, argv):
    _require_configuration(conf)
    shown = api.show_run(conf,
                         common.run_id_argument(conf.command.run_id),
                         warn=_warn)
    run = shown.run
    if conf.command.format == 'json':
        document = _run_dict(run)
        document['changes'] = [_change_dict(c) for c in shown.changes]
        document['findings'] = shown.findings
        common.emit(json.dumps(document, indent=2))
        return 0
    _emit_line('Run %s (%s) by %s@%s, healreq %s' % (
        run['id'], run['mode'], _printable(run['operator']),
        _printable(run['host']), run['tool_version']))
    _emit_line('  command: %s' % run['command'])
    _emit_line('  started %s, ended %s, exit code %s' % (
        run['started_at'], run['ended_at'] or '-', run['exit_code']))
    _emit_line('  summary: %s' % shown.summary_text)
    for finding in shown.findings:
        _emit_line('  %-9s %s %s %s' % (
            finding['status'].upper(), finding['instance_uuid'],
            finding['reason'] or '', finding['detail'] or ''))
    for change in shown.changes:
        common.emit('')
        _emit_line('Change %d: instance %s, %s: %s%s' % (
            change['id'], change['instance_uuid'],
            _change_title(change, change['fields']), change['state'],
            ' (%s)' % change['detail'] if change['detail'] else ''))
        for line in readable_diff(change['before_text'],
                                  change['after_text'], change['fields'],
                                  change['action']):
            _emit_line('    ' + line)
    return 0


def _render(conf, result, replay):
    """Print a revert or apply (``replay``) report; return the exit code."""
    output.print_report(result.report, result.exit_code, result.run_id,
                        conf.command.format == 'json', verbose=True,
                        list_skipped=True, problems=result.problems,
                        replay=replay)
    for problem in result.problems:
        print(visible.escape(problem), file=sys.stderr)
    return result.exit_code


def revert_run(conf, argv):
    instance = common.uuid_option(conf.command.instance, 'instance')
    return _render(conf, api.revert(
        conf, common.run_id_argument(conf.command.run_id),
        instance_uuid=instance, dry_run=conf.command.dry_run,
        wait=conf.command.wait,
        command=common.command_line(argv), stop_check=interruption.check,
        deferring=interruption.deferred), 'revert')


def apply_plan(conf, argv):
    return _render(conf, api.apply_plan(
        conf, conf.command.plan_file, dry_run=conf.command.dry_run,
        command=common.command_line(argv)), 'apply')
