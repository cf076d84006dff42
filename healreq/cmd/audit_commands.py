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
import json

from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq.audit import plan
from healreq.audit import replay
from healreq.audit import store as audit_store
from healreq.cmd import common
from healreq.cmd import output

ExitCode = common.ExitCode

_REPLAY_EXIT_CODES = """\
exit codes:
  0    changes written (with --dry-run: would be written)
  2    some changes could not be evaluated (instance or cell missing)
  3    some changes were refused: the row changed since, or an operation
       is in flight on the instance
  4    nothing to do
  127  invalid input (unknown run, unreadable or edited plan)
  255  unexpected error"""

_FORMAT_HELP = 'Output format on stdout (default: text).'


def add_parsers(subparsers):
    audit = subparsers.add_parser(
        'audit', help='Review past runs and their changes.',
        description='Every run of request-specs, revert and apply is '
                    'recorded in the audit store ([healreq]/'
                    'audit_connection) with its findings, and every change '
                    'before it is written.')
    actions = audit.add_subparsers(dest='audit_action', metavar='ACTION',
                                   help='list or show.')
    actions.required = True
    listing = actions.add_parser('list', help='List the latest runs.')
    listing.add_argument('--limit', type=int, default=20, metavar='N',
                         help='How many runs (default 20).')
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

    revert = subparsers.add_parser(
        'revert', help='Put back the values a run replaced.',
        description='Write back the before value of every change RUN_ID '
                    'applied, only where the row still holds the value the '
                    'run wrote and no operation is in flight. Audited as a '
                    'run of its own.',
        epilog=_REPLAY_EXIT_CODES,
        formatter_class=common.HelpFormatter)
    revert.add_argument('run_id', metavar='RUN_ID',
                        help='The run whose applied changes to put back '
                             '(see "nova-heal audit list").')
    revert.add_argument('--instance', metavar='UUID',
                        help='Only this instance.')
    revert.add_argument('--dry-run', action='store_true',
                        help='Report what would be written back; write '
                             'nothing.')
    revert.add_argument('--format', choices=('text', 'json'), default='text',
                        help=_FORMAT_HELP)
    revert.set_defaults(handler=revert_run, verbose=True)

    apply = subparsers.add_parser(
        'apply', help='Apply the changes of a reviewed plan file.',
        description='Apply exactly the changes of a plan written by '
                    '"request-specs --dry-run --plan FILE", each only where '
                    'the row still holds the value the plan recorded '
                    '(by digest) and no operation is in flight. Audited as '
                    'a run of its own.',
        epilog=_REPLAY_EXIT_CODES,
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


def audit_list(conf, argv):
    if conf.command.limit < 1:
        raise common.invalid('--limit must be a positive integer')
    store = common.open_audit(conf)
    try:
        runs = store.list_runs(conf.command.limit)
    finally:
        store.dispose()
    if conf.command.format == 'json':
        common.emit(json.dumps([_run_dict(r) for r in runs], indent=2))
        return 0
    for run in runs:
        summary = json.loads(run['summary'] or '{}')
        common.emit('%s  %s  %-8s exit %s  %s@%s  %s' % (
            run['id'], run['started_at'], run['mode'],
            '-' if run['exit_code'] is None else run['exit_code'],
            run['operator'], run['host'], ', '.join(
                '%s %s' % (k, v) for k, v in summary.items()
                if k in ('drifted', 'healed', 'errors', 'conflicts'))))
    return 0


def _run_dict(run):
    result = dict(run)
    for key in ('started_at', 'ended_at'):
        result[key] = run[key] and run[key].isoformat()
    for key in ('filters', 'summary'):
        result[key] = json.loads(run[key]) if run[key] else None
    return result


def _change_dict(change):
    return {key: change[key] for key in (
        'instance_uuid', 'cell_uuid', 'spec_id', 'state', 'detail',
        'before_digest', 'after_digest')} | {
        'fields': json.loads(change['fields']),
        'before': change['before_text'], 'after': change['after_text']}


def readable_diff(before, after, fields):
    """A unified diff of the changed fields, pretty-printed."""
    def lines(text):
        try:
            data = json.loads(text)['nova_object.data']
            shown = {f: data.get(f) for f in fields}
        except (ValueError, KeyError, TypeError):
            shown = text
        return json.dumps(shown, indent=2, sort_keys=True).splitlines()
    return list(difflib.unified_diff(lines(before), lines(after),
                                     'before', 'after', lineterm=''))


def audit_show(conf, argv):
    store = common.open_audit(conf)
    try:
        run = store.get_run(conf.command.run_id)
        if run is None:
            raise common.invalid('no run %s in the audit store'
                                 % conf.command.run_id)
        changes = store.changes(run['id'])
        findings = store.run_findings(run['id'])
    finally:
        store.dispose()
    if conf.command.format == 'json':
        document = _run_dict(run)
        document['changes'] = [_change_dict(c) for c in changes]
        document['findings'] = [dict(f, drift=json.loads(f['drift'] or '[]'))
                                for f in findings]
        common.emit(json.dumps(document, indent=2))
        return 0
    common.emit('Run %s (%s) by %s@%s, healreq %s' % (
        run['id'], run['mode'], run['operator'], run['host'],
        run['tool_version']))
    common.emit('  command: %s' % run['command'])
    common.emit('  started %s, ended %s, exit code %s' % (
        run['started_at'], run['ended_at'] or '-', run['exit_code']))
    common.emit('  summary: %s' % run['summary'])
    for finding in findings:
        common.emit('  %-9s %s %s %s' % (
            finding['status'].upper(), finding['instance_uuid'],
            finding['reason'] or '', finding['detail'] or ''))
    for change in changes:
        fields = json.loads(change['fields'])
        common.emit('\nChange %d: instance %s, fields %s: %s%s' % (
            change['id'], change['instance_uuid'], ', '.join(fields),
            change['state'], ' (%s)' % change['detail']
            if change['detail'] else ''))
        for line in readable_diff(change['before_text'],
                                  change['after_text'], fields):
            common.emit('    ' + line)
    return 0


def _replay(conf, argv, mode, swaps, filters):
    """Run ``swaps`` as an audited run; print the report; return the code."""
    with common.api_engine(conf) as api_engine:
        store = common.open_audit(conf)
        try:
            store.recover(api_engine)
            run_id = store.start_run(mode, common.command_line(argv),
                                     filters)
            try:
                report = replay.Replayer(
                    api_engine, conf.database.connection,
                    common.settings(conf), store, run_id,
                    dry_run=conf.command.dry_run).run(swaps)
            except (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError) as exc:
                store.finish_run(run_id, {}, ExitCode.NEEDS_ATTENTION)
                raise common.Stop(ExitCode.NEEDS_ATTENTION,
                                  'nova-heal: error: API database: %s'
                                  % common.first_line(exc))
            code = common.exit_code_for(report)
            store.finish_run(run_id, report.summary(), code)
        finally:
            store.dispose()
    if conf.command.format == 'json':
        common.emit_pieces(output.json_chunks(report, code, run_id), '')
    else:
        common.emit_pieces(output.text_lines(report, code, verbose=True,
                                             list_skipped=True,
                                             run_id=run_id))
    return code


def revert_run(conf, argv):
    instance = common.uuid_option(conf.command.instance, 'instance')
    store = common.open_audit(conf)
    try:
        # Settle a crashed run's intents first: a write that went through
        # must be reverted too.
        with common.api_engine(conf) as api_engine:
            store.recover(api_engine)
        if store.get_run(conf.command.run_id) is None:
            raise common.invalid('no run %s in the audit store'
                                 % conf.command.run_id)
        changes = store.changes(conf.command.run_id, instance,
                                audit_store.APPLIED)
    finally:
        store.dispose()
    # Newest first: if a run touched a row twice, undo in reverse order.
    swaps = [replay.Swap(
        instance_uuid=c['instance_uuid'], spec_id=c['spec_id'],
        expected=c['after_text'], new=c['before_text'],
        fields=json.loads(c['fields']), expected_digest=c['after_digest'])
        for c in reversed(changes)]
    return _replay(conf, argv, 'revert', swaps,
                   {'revert_of': conf.command.run_id, 'instance': instance})


def apply_plan(conf, argv):
    try:
        planned_by, swaps = plan.read_plan(conf.command.plan_file)
    except plan.PlanError as exc:
        raise common.invalid(exc)
    return _replay(conf, argv, 'apply', swaps,
                   {'plan': conf.command.plan_file, 'plan_run': planned_by})
