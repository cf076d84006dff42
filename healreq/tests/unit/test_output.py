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

"""The text and JSON reports."""

import contextlib
import io
import json

import testtools

from healreq.cmd import common
from healreq.cmd import output
from healreq.heal import findings

Status = findings.Status
ExitCode = common.ExitCode


def printed(report, code, **kwargs):
    """What the commands print for ``report``: stdout of print_report."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        output.print_report(report, code, **kwargs)
    return out.getvalue()


CELL1 = '7cad283c-1d2e-4f5a-8b9c-0d1e2f3a4b5c'
CELL2 = 'c2a9e3f1-6b7d-4c8e-9f0a-1b2c3d4e5f60'
DRIFTED = '982c3ead-59b1-4acd-876b-d55166d8e7f0'
SKIPPED = '9499ac88-bf3d-4af1-a960-141108c695cb'
ERROR = '0f3e6a1b-7c2d-4e8f-9a0b-1c2d3e4f5a6b'
NOTICE = '5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f'
CONSISTENT = 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d'

SUMMARY_CONTRACT = ('instances_checked', 'consistent', 'drifted', 'healed',
                    'skipped', 'errors', 'conflicts')
RESULT_CONTRACT = ('instance_uuid', 'cell_uuid', 'status', 'drift',
                   'reason')


def _report(dry_run=True, more_remain=False):
    """A report shaped like a run's: consistent ones only counted."""
    cell1 = findings.CellReport(uuid=CELL1, name='cell1')
    cell2 = findings.CellReport(
        uuid=CELL2, name='cell2',
        error='cell database unreachable: (2003, "Can\'t connect")')
    report = findings.RunReport(dry_run=dry_run, cells=[cell1, cell2],
                                more_remain=more_remain)
    drifted = findings.Finding(
        DRIFTED, CELL1, Status.DRIFTED, 'failed-resize-leftover',
        "spec flavor e2.medium(831) equals instance_extra.flavor['new']; "
        "a resize to it never completed",
        changes=[findings.FieldChange('flavor', 'e2.medium(831)',
                                      'a2.medium(982)')],
        notes=[findings.Note('flavor-leftover-new',
                             "instance_extra.flavor['new'] is "
                             "e2.medium(831) but no migration is in "
                             "progress")])
    skipped = findings.Finding(SKIPPED, CELL1, Status.SKIPPED,
                               'task-in-progress',
                               'task_state is resize_migrating')
    error = findings.Finding(ERROR, CELL1, Status.ERROR, 'spec-missing',
                             'no request_specs row for this instance')
    notice = findings.Finding(
        NOTICE, CELL1, Status.CONSISTENT,
        notes=[findings.Note('flavor-leftover-old',
                             "instance_extra.flavor['old'] is "
                             "m1.small(2) but no migration is in "
                             "progress")])
    consistent = findings.Finding(CONSISTENT, CELL1, Status.CONSISTENT)
    for finding in (drifted, skipped, error, notice, consistent):
        cell1.count(finding)
        if finding.status is not Status.CONSISTENT:
            report.findings.append(finding)
        elif finding.notes:
            report.notices.append(finding)
    return report


class RenderJsonTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.report = _report()
        self.text = printed(self.report, ExitCode.NEEDS_ATTENTION,
                            json_format=True)
        self.document = json.loads(self.text)

    def test_one_document(self):
        decoder = json.JSONDecoder()
        document, end = decoder.raw_decode(self.text)
        self.assertEqual('', self.text[end:].strip())
        self.assertIsInstance(document, dict)

    def test_summary(self):
        summary = self.document['summary']
        for key in SUMMARY_CONTRACT:
            self.assertIn(key, summary)
        self.assertEqual(
            {'instances_checked': 5, 'consistent': 2, 'drifted': 1,
             'healed': 0, 'skipped': 1, 'errors': 1, 'conflicts': 0},
            {key: summary[key] for key in SUMMARY_CONTRACT})
        self.assertEqual(1, summary['cells_failed'])

    def test_top_level(self):
        self.assertIs(True, self.document['dry_run'])
        self.assertIs(False, self.document['more_remain'])
        self.assertEqual(2, self.document['exit_code'])
        self.assertIsInstance(self.document['exit_code'], int)

    def test_results(self):
        results = self.document['results']
        self.assertEqual([DRIFTED, SKIPPED, ERROR],
                         [r['instance_uuid'] for r in results])
        for result in results:
            for key in RESULT_CONTRACT:
                self.assertIn(key, result)
            self.assertEqual(CELL1, result['cell_uuid'])
        drifted, skipped, error = results
        self.assertEqual('drifted', drifted['status'])
        self.assertEqual(['flavor'], drifted['drift'])
        self.assertEqual('failed-resize-leftover', drifted['reason'])
        self.assertEqual([{'field': 'flavor', 'before': 'e2.medium(831)',
                           'after': 'a2.medium(982)'}], drifted['changes'])
        self.assertEqual(['flavor-leftover-new'],
                         [n['code'] for n in drifted['notes']])
        self.assertEqual(('skipped', [], 'task-in-progress'),
                         (skipped['status'], skipped['drift'],
                          skipped['reason']))
        self.assertEqual(('error', 'spec-missing'),
                         (error['status'], error['reason']))

    def test_consistent_instances_are_not_results(self):
        uuids = [r['instance_uuid'] for r in self.document['results']]
        self.assertNotIn(CONSISTENT, uuids)
        self.assertNotIn(NOTICE, uuids)
        self.assertNotIn('consistent',
                         [r['status'] for r in self.document['results']])
        self.assertNotIn(CONSISTENT, self.text)

    def test_notices(self):
        notices = self.document['notices']
        self.assertEqual([NOTICE], [n['instance_uuid'] for n in notices])
        self.assertEqual('consistent', notices[0]['status'])
        self.assertEqual(['flavor-leftover-old'],
                         [n['code'] for n in notices[0]['notes']])

    def test_cells(self):
        cells = self.document['cells']
        self.assertEqual([CELL1, CELL2], [c['cell_uuid'] for c in cells])
        self.assertEqual(['cell1', 'cell2'], [c['name'] for c in cells])
        self.assertEqual(5, cells[0]['instances_checked'])
        self.assertIsNone(cells[0]['error'])
        self.assertIn('unreachable', cells[1]['error'])
        for cell in cells:
            for key in SUMMARY_CONTRACT:
                self.assertIn(key, cell)

    def test_empty_report(self):
        document = json.loads(printed(
            findings.RunReport(dry_run=False), ExitCode.NOTHING_TO_HEAL,
            json_format=True))
        self.assertEqual([], document['results'])
        self.assertEqual(4, document['exit_code'])
        self.assertEqual(0, document['summary']['instances_checked'])


class RenderTextTest(testtools.TestCase):

    def _lines(self, report=None, code=ExitCode.NEEDS_ATTENTION, **kwargs):
        report = report or _report()
        return printed(report, code, **kwargs).splitlines()

    def _lines_about(self, uuid, lines):
        return [line for line in lines if uuid in line]

    def test_drift_line(self):
        lines = self._lines_about(DRIFTED, self._lines())
        self.assertEqual(1, len(lines))
        line = lines[0]
        self.assertTrue(line.startswith('DRIFTED '), line)
        self.assertIn(' cell1 ', line)
        self.assertIn('failed-resize-leftover', line)
        self.assertIn('flavor: e2.medium(831) -> a2.medium(982)', line)

    def test_one_line_per_listed_finding(self):
        lines = self._lines(list_skipped=True)
        for uuid, status in ((DRIFTED, 'DRIFTED'), (SKIPPED, 'SKIPPED'),
                             (ERROR, 'ERROR'), (NOTICE, 'NOTICE')):
            about = self._lines_about(uuid, lines)
            self.assertEqual(1, len(about), uuid)
            self.assertTrue(about[0].startswith(status + ' '), about[0])
        self.assertIn('no request_specs row for this instance',
                      self._lines_about(ERROR, lines)[0])
        self.assertEqual([], self._lines_about(CONSISTENT, lines))

    def test_skipped_counted_not_listed_by_default(self):
        lines = self._lines()
        self.assertEqual([], self._lines_about(SKIPPED, lines))
        self.assertIn('1 skipped instance(s) not listed; --verbose lists '
                      'them.', lines)
        listed = self._lines(list_skipped=True)
        self.assertEqual([], [line for line in listed
                              if 'not listed' in line])

    def test_notes_follow_their_finding(self):
        lines = self._lines()
        index = lines.index(self._lines_about(DRIFTED, lines)[0])
        self.assertIn('note flavor-leftover-new:', lines[index + 1])

    def test_cell_summary_lines(self):
        lines = self._lines()
        self.assertIn('Cell %s(cell1): checked 5, consistent 2, drifted 1, '
                      'healed 0, skipped 1, errors 1, conflicts 0' % CELL1,
                      lines)
        self.assertIn('Cell %s(cell2): checked 0, consistent 0, drifted 0, '
                      'healed 0, skipped 0, errors 0, conflicts 0' % CELL2,
                      lines)
        self.assertIn('Total: checked 5, consistent 2, drifted 1, healed 0, '
                      'skipped 1, errors 1, conflicts 0', lines)

    def test_cell_error_line(self):
        lines = self._lines()
        errors = [line for line in lines
                  if line.startswith('Cell %s(cell2): ERROR' % CELL2)]
        self.assertEqual(1, len(errors))
        self.assertIn('unreachable', errors[0])

    def test_findings_precede_their_cell_summary(self):
        lines = self._lines()
        summary = [i for i, line in enumerate(lines)
                   if line.startswith('Cell %s(cell1): checked' % CELL1)][0]
        finding = lines.index(self._lines_about(DRIFTED, lines)[0])
        self.assertLess(finding, summary)

    def test_dry_run_and_exit_code(self):
        lines = self._lines(code=ExitCode.NEEDS_ATTENTION)
        self.assertIn('Dry run: nothing was written; 1 instance(s) would be '
                      'healed.', lines)
        self.assertTrue(lines[-1].startswith('Exit code 2 '), lines[-1])

    def test_not_a_dry_run(self):
        lines = self._lines(report=_report(dry_run=False))
        self.assertEqual([], [line for line in lines
                              if line.startswith('Dry run')])

    def test_more_remain(self):
        lines = self._lines(report=_report(more_remain=True),
                            code=ExitCode.MAX_COUNT_REACHED)
        self.assertIn('Max count reached; more instances remain: run again.',
                      lines)
        self.assertTrue(lines[-1].startswith('Exit code 1 '), lines[-1])

    def test_verbose_explains_drift(self):
        quiet = self._lines()
        verbose = self._lines(verbose=True)
        self.assertEqual([], [line for line in quiet if 'why:' in line])
        why = [line for line in verbose if 'why:' in line]
        self.assertEqual(1, len(why))
        self.assertIn('never completed', why[0])
