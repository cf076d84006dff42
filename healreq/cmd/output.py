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


"""Rendering a RunReport as text or as one JSON document."""

import itertools
import json

from healreq.cmd import common
from healreq.cmd import visible
from healreq.heal.findings import Status
from healreq.heal.findings import SUMMARY_KEYS

# The option whose report policy leaves a drifted field as it is.
_REPORT_POLICIES = (('scheduler_hints', '--hint-policy'),
                    ('availability_zone', '--az-policy'),
                    ('flavor', '--flavor-policy'))


def _finding_dict(finding):
    return {
        'instance_uuid': finding.instance_uuid,
        'cell_uuid': finding.cell_uuid,
        'status': finding.status.value,
        'drift': finding.drift,
        'reported_only': finding.reported_only,
        'reason': finding.reason,
        'detail': finding.detail,
        'changes': [{'field': c.field, 'before': c.before, 'after': c.after}
                    for c in finding.changes],
        'notes': [{'code': n.code, 'detail': n.detail}
                  for n in finding.notes],
    }


def _cell_dict(cell):
    counts = {key: getattr(cell, key) for key in SUMMARY_KEYS[1:]}
    return dict(cell_uuid=cell.uuid, name=cell.name,
                instances_checked=cell.checked, error=cell.error,
                flavor_outdated=cell.flavor_outdated,
                reported_only=cell.reported_only, **counts)


def _outdated_dict(finding):
    return {'instance_uuid': finding.instance_uuid,
            'cell_uuid': finding.cell_uuid,
            'extra_specs': list(finding.flavor_outdated)}


# How the text report of ``revert`` and ``apply`` speaks of a change
# written (healed), of one a dry run would write (drifted), and of the
# outcomes of exit codes 0 and 4. The JSON statuses stay those of a heal.
REPLAY_WORDS = {
    'revert': dict(done='REVERTED', would='WOULD REVERT', past='reverted',
                   nothing='nothing to revert'),
    'apply': dict(done='APPLIED', would='WOULD APPLY', past='applied',
                  nothing='nothing to apply'),
}


def print_report(report, exit_code, run_id=None, json_format=False,
                 verbose=False, list_skipped=False, problems=(),
                 replay=None):
    """Print ``report`` on stdout: one JSON document, or the text report.

    Skipped instances are only counted in the text unless
    ``list_skipped``: on a busy cloud many instances are mid-operation at
    any time. ``problems`` (one-line errors that the exit code counts)
    are in the JSON document; the caller prints them on stderr.
    ``replay`` ('revert' or 'apply', a key of REPLAY_WORDS) makes the
    text speak of what that command does.
    """
    if json_format:
        common.emit_pieces(json_chunks(report, exit_code, run_id, problems),
                           '')
    else:
        common.emit_pieces(text_lines(report, exit_code, verbose,
                                      list_skipped, run_id, replay))


def json_chunks(report, exit_code, run_id=None, problems=()):
    """The report as one JSON document, in pieces.

    The document is never built whole; the README describes its keys.
    """
    document = {
        'problems': list(problems),
        'run_id': run_id,
        'summary': report.summary(),
        'dry_run': report.dry_run,
        'more_remain': report.more_remain,
        'exit_code': int(exit_code),
        'release': _release_dict(report.release),
        'cells': [_cell_dict(c) for c in report.cells],
        'results': [_finding_dict(f) for f in report.findings],
        'notices': [_finding_dict(f) for f in report.notices],
        'flavor_outdated': [_outdated_dict(f)
                            for f in report.outdated_flavors],
    }
    return json.JSONEncoder(indent=2).iterencode(document)


def _release_dict(detection):
    if detection is None:
        return None
    release = detection.release
    return {
        'series': release and release.series,
        'codename': release and release.codename,
        'nova': release and release.nova,
        'source': detection.source,
        'evidence': detection.evidence,
        'supported': detection.supported,
        'writable': detection.supported and detection.refusal is None,
        'refusal': detection.refusal,
        'notes': list(detection.notes),
        'down_services': [s.as_dict() for s in detection.down_services],
        'stale_services': [s.written_dict()
                           for s in detection.stale_services],
    }


def release_lines(detection):
    """The release line, then what else the evidence says, if anything.

    E.g. ``Nova release: 2024.1 Caracal (Nova 29), detected from ...``.
    """
    if detection.release is None:
        yield 'Nova release: unknown (%s)' % detection.evidence
    else:
        how = (detection.evidence if detection.named
               else 'detected from %s' % detection.evidence)
        line = 'Nova release: %s, %s' % (detection.release.label, how)
        if not detection.supported:
            line += '; not supported: its rules are approximated, and '
            line += 'nothing is written'
        yield line
    for note in detection.notes:
        yield '  note: %s' % note
    if detection.refusal is not None:
        yield '  nothing may be written: %s' % detection.refusal


def _counts(values):
    return ', '.join('%s %d' % (key.replace('instances_', ''), values[key])
                     for key in SUMMARY_KEYS)


def _status_label(status, words):
    """The label of a finding line: its status, or what replay did."""
    if words and status is Status.HEALED:
        return words['done']
    if words and status is Status.DRIFTED:
        return words['would']
    return status.value.upper()


def _finding_line(finding, cell_names, verbose, words=None):
    cell = cell_names.get(finding.cell_uuid) or finding.cell_uuid
    if finding.status is Status.CONSISTENT:
        return ['%-9s %s %s %s: %s' % ('NOTICE', finding.instance_uuid, cell,
                                       note.code, note.detail)
                for note in finding.notes]
    what = '; '.join(str(c) for c in finding.changes) or finding.detail
    lines = ['%-9s %s %s %s: %s' % (
        _status_label(finding.status, words), finding.instance_uuid, cell,
        finding.reason, what)]
    if verbose and finding.changes and finding.detail:
        lines.append('          why: %s' % finding.detail)
    for note in finding.notes:
        lines.append('          note %s: %s' % (note.code, note.detail))
    return lines


def _outcome(exit_code, report, words=None):
    if words and exit_code == 0:
        if report.dry_run:
            return words['would'].lower()
        return (words['past'] if report.summary()['healed']
                else 'nothing written')
    if words and exit_code == 4:
        return words['nothing']
    if exit_code == 0:
        if report.dry_run:
            return 'drift found'
        return ('healed' if report.summary()['healed']
                else 'drift found, nothing written')
    return {1: 'max count reached, more remain',
            2: 'needs manual attention',
            3: 'concurrent changes, run again',
            4: 'nothing to heal',
            129: 'hung up by SIGHUP after the work above, run again',
            130: 'interrupted by SIGINT after the work above, run again',
            143: 'terminated by SIGTERM after the work above, run again',
            }.get(int(exit_code), 'error')


def _outdated_lines(report, cell, cell_names):
    """A line per instance of ``cell`` that runs an older flavor copy."""
    for finding in report.outdated_flavors:
        if finding.cell_uuid == cell.uuid:
            yield '%-9s %s %s flavor-outdated: extra specs %s differ from ' \
                'its flavor\'s current definition' % (
                    'INFO', finding.instance_uuid,
                    cell_names.get(cell.uuid) or cell.uuid,
                    ', '.join(finding.flavor_outdated))


def _outdated_total(summary, verbose):
    """The line counting instances that run an older flavor copy."""
    count = summary['flavor_outdated']
    if count:
        yield ('%d instance(s) run an older copy of their flavor than its '
               'current definition (extra specs differ; information, not '
               'drift)%s.' % (count, '' if verbose
                              else '; --verbose lists them'))


def _closing_counts(report, words=None):
    """What a dry run would heal; the drift of which nothing is written."""
    summary = report.summary()
    reported = summary['reported_only']
    why = ''
    if reported:
        fields = report.reported_only_fields()
        why = ('%d drifted instance(s) only reported under the report '
               'policies (%s): nothing %s written for them' % (
                   reported, ', '.join(option for field, option
                                       in _REPORT_POLICIES
                                       if field in fields),
                   'is' if report.dry_run else 'was'))
    if report.dry_run:
        yield ('Dry run: nothing was written; %d instance(s) would be '
               '%s%s.' % (summary['drifted'] - reported,
                          words['past'] if words else 'healed',
                          '; ' + why if why else ''))
    elif why:
        yield why + '.'


def print_error(exit_code, message):
    """Print the JSON document of a command that ended with an error."""
    common.emit(json.dumps({'error': {'exit_code': int(exit_code),
                                      'message': message}}, indent=2))


def text_lines(report, exit_code, verbose=False, list_skipped=False,
               run_id=None, replay=None):
    """The text report, one line at a time.

    A line per listed finding and a summary per cell, then the totals.
    Control characters in the values (see ``visible``) are escaped.
    ``replay`` is as for print_report.
    """
    for line in _text_lines(report, exit_code, verbose, list_skipped,
                            run_id, REPLAY_WORDS.get(replay)):
        yield visible.escape(line)


def _text_lines(report, exit_code, verbose, list_skipped, run_id, words):
    cell_names = {c.uuid: c.name for c in report.cells}
    hidden = 0
    for cell in report.cells:
        label = '%s(%s)' % (cell.uuid, cell.name) if cell.name else str(
            cell.uuid)
        for finding in itertools.chain(report.findings, report.notices):
            if finding.cell_uuid != cell.uuid:
                continue
            if finding.status is Status.SKIPPED and not list_skipped:
                hidden += 1
            else:
                yield from _finding_line(finding, cell_names, verbose,
                                         words)
        if verbose:
            yield from _outdated_lines(report, cell, cell_names)
        if cell.error:
            yield 'Cell %s: ERROR %s' % (label, cell.error)
        counts = _cell_dict(cell)
        counts['instances_checked'] = cell.checked
        yield 'Cell %s: %s' % (label, _counts(counts))
    yield 'Total: %s' % _counts(report.summary())
    yield from _outdated_total(report.summary(), verbose)
    if report.release is not None:
        yield from release_lines(report.release)
    if hidden:
        yield ('%d skipped instance(s) not listed; --verbose lists them.'
               % hidden)
    if report.more_remain:
        yield 'Max count reached; more instances remain: run again.'
    yield from _closing_counts(report, words)
    if run_id:
        yield 'Run id: %s ("nova-heal audit show %s")' % (run_id, run_id)
    yield 'Exit code %d (%s).' % (exit_code,
                                  _outcome(exit_code, report, words))
