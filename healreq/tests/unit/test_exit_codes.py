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

"""Exit codes of a run and UUID arguments."""

import itertools

import testtools

from healreq.cmd import common
from healreq import exception
from healreq.heal import findings

Status = findings.Status
ExitCode = common.ExitCode

CELL_UUID = '7cad283c-1d2e-4f5a-8b9c-0d1e2f3a4b5c'
UUIDS = ('982c3ead-59b1-4acd-876b-d55166d8e7f0',
         '9499ac88-bf3d-4af1-a960-141108c695cb',
         '0f3e6a1b-7c2d-4e8f-9a0b-1c2d3e4f5a6b',
         '5d6e7f80-9a1b-4c2d-8e3f-4a5b6c7d8e9f',
         'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d')
_REASONS = {Status.DRIFTED: 'spec-drift', Status.HEALED: 'spec-drift',
            Status.SKIPPED: 'task-in-progress',
            Status.ERROR: 'spec-missing', Status.CONFLICT: 'spec-changed',
            Status.CONSISTENT: None}


def _report(*statuses, cell_error=None, more_remain=False, dry_run=False):
    cell = findings.CellReport(uuid=CELL_UUID, name='cell1',
                               error=cell_error)
    report = findings.RunReport(dry_run=dry_run, cells=[cell],
                                more_remain=more_remain)
    for uuid, status in zip(UUIDS, statuses):
        finding = findings.Finding(instance_uuid=uuid, cell_uuid=CELL_UUID,
                                   status=status, reason=_REASONS[status])
        cell.count(finding)
        if status is Status.CONSISTENT:
            continue
        report.findings.append(finding)
    return report


class ExitCodeForTest(testtools.TestCase):

    def test_values_are_the_public_contract(self):
        self.assertEqual(
            {'HEALED': 0, 'MAX_COUNT_REACHED': 1, 'NEEDS_ATTENTION': 2,
             'CONFLICT': 3, 'NOTHING_TO_HEAL': 4, 'INVALID_INPUT': 127,
             'HANGUP': 129, 'INTERRUPTED': 130, 'TERMINATED': 143,
             'UNEXPECTED_ERROR': 255},
            {code.name: code.value for code in ExitCode})

    def test_empty_run(self):
        self.assertEqual(ExitCode.NOTHING_TO_HEAL,
                         common.exit_code_for(findings.RunReport(False)))

    def test_all_consistent(self):
        self.assertEqual(ExitCode.NOTHING_TO_HEAL, common.exit_code_for(
            _report(Status.CONSISTENT, Status.CONSISTENT)))

    def test_only_skipped(self):
        self.assertEqual(ExitCode.NOTHING_TO_HEAL, common.exit_code_for(
            _report(Status.SKIPPED, Status.CONSISTENT)))

    def test_healed(self):
        self.assertEqual(ExitCode.HEALED, common.exit_code_for(
            _report(Status.HEALED, Status.CONSISTENT)))

    def test_drifted_in_a_dry_run(self):
        self.assertEqual(ExitCode.HEALED, common.exit_code_for(
            _report(Status.DRIFTED, dry_run=True)))

    def test_report_only_drift_exits_0_and_says_so(self):
        # A pin under --az-policy report stays drifted in every run: a
        # verification never reaches 4 while it remains.
        report = _report(Status.DRIFTED)
        report.findings[0].changes = [findings.FieldChange(
            'availability_zone', 'az1', 'az2', rewritten=False)]
        self.assertEqual(ExitCode.HEALED, common.exit_code_for(report))
        meaning = exception.MEANINGS[ExitCode.HEALED]
        self.assertIn('only reported', meaning.text)
        self.assertIn('reported_only', meaning.text)
        self.assertIn('Report-only drift keeps the verification at 0',
                      meaning.action)

    def test_more_remain(self):
        self.assertEqual(ExitCode.MAX_COUNT_REACHED, common.exit_code_for(
            _report(Status.HEALED, more_remain=True)))

    def test_max_count_reached_without_more_remaining(self):
        # --max-count 2 healed two instances: exit 1 only if more remain.
        self.assertEqual(ExitCode.HEALED, common.exit_code_for(
            _report(Status.HEALED, Status.HEALED, more_remain=False)))
        self.assertEqual(ExitCode.MAX_COUNT_REACHED, common.exit_code_for(
            _report(Status.HEALED, Status.HEALED, more_remain=True)))

    def test_conflict(self):
        self.assertEqual(ExitCode.CONFLICT, common.exit_code_for(
            _report(Status.CONFLICT)))

    def test_error(self):
        self.assertEqual(ExitCode.NEEDS_ATTENTION, common.exit_code_for(
            _report(Status.ERROR)))

    def test_cell_error(self):
        self.assertEqual(ExitCode.NEEDS_ATTENTION, common.exit_code_for(
            _report(Status.CONSISTENT,
                    cell_error='cell database unreachable: timed out')))

    def test_notices_do_not_count(self):
        report = _report(Status.CONSISTENT)
        report.notices.append(findings.Finding(
            UUIDS[0], CELL_UUID, Status.CONSISTENT,
            notes=[findings.Note('flavor-leftover-old', 'x')]))
        self.assertEqual(ExitCode.NOTHING_TO_HEAL,
                         common.exit_code_for(report))

    def test_precedence(self):
        # Each outcome with everything less severe: the most severe wins.
        outcomes = [
            (ExitCode.NEEDS_ATTENTION, dict(statuses=[Status.ERROR])),
            (ExitCode.NEEDS_ATTENTION, dict(cell_error='unreachable')),
            (ExitCode.CONFLICT, dict(statuses=[Status.CONFLICT])),
            (ExitCode.MAX_COUNT_REACHED, dict(more_remain=True)),
            (ExitCode.HEALED, dict(statuses=[Status.HEALED])),
            (ExitCode.HEALED, dict(statuses=[Status.DRIFTED])),
            (ExitCode.NOTHING_TO_HEAL, dict(statuses=[Status.SKIPPED,
                                                      Status.CONSISTENT])),
        ]
        severity = list(exception.SEVERITY)
        for size in range(1, len(outcomes) + 1):
            for combination in itertools.combinations(outcomes, size):
                statuses = []
                kwargs = {}
                for _, parts in combination:
                    statuses.extend(parts.get('statuses', []))
                    for key in ('cell_error', 'more_remain'):
                        if key in parts:
                            kwargs[key] = parts[key]
                expected = min((code for code, _ in combination),
                               key=severity.index)
                report = _report(*statuses, **kwargs)
                self.assertEqual(expected, common.exit_code_for(report),
                                 combination)

    def test_result_is_an_exit_code(self):
        code = common.exit_code_for(_report(Status.HEALED))
        self.assertIsInstance(code, ExitCode)
        self.assertEqual(0, int(code))

    def test_help_lists_every_code_in_severity_order(self):
        for code in ExitCode:
            self.assertIn('\n  %-5d' % code.value, common.EXIT_CODES_HELP)
        self.assertIn('255, 127, 2, 3, 1, 0, 4', common.EXIT_CODES_HELP)


class MeaningsTest(testtools.TestCase):
    """Each exit code's meaning is written once, in healreq.exception."""

    def test_every_code_has_a_meaning_and_an_action(self):
        self.assertEqual(list(ExitCode), list(exception.MEANINGS))
        for code, meaning in exception.MEANINGS.items():
            self.assertTrue(meaning.text, code)
            self.assertTrue(meaning.action, code)

    def test_revert_and_apply_never_exit_1(self):
        self.assertEqual(
            [code for code in ExitCode
             if code is not ExitCode.MAX_COUNT_REACHED],
            list(exception.REPLAY_MEANINGS))
        self.assertEqual(exception.MEANINGS[ExitCode.UNEXPECTED_ERROR],
                         exception.REPLAY_MEANINGS[ExitCode.UNEXPECTED_ERROR])
        self.assertNotEqual(exception.MEANINGS[ExitCode.HEALED],
                            exception.REPLAY_MEANINGS[ExitCode.HEALED])

    def test_severity_orders_every_outcome_of_a_run(self):
        signals = {ExitCode.HANGUP, ExitCode.INTERRUPTED,
                   ExitCode.TERMINATED}
        self.assertEqual(set(ExitCode) - signals, set(exception.SEVERITY))
        self.assertEqual(
            [ExitCode.UNEXPECTED_ERROR, ExitCode.INVALID_INPUT,
             ExitCode.NEEDS_ATTENTION, ExitCode.CONFLICT, ExitCode.HEALED,
             ExitCode.NOTHING_TO_HEAL],
            exception.severity_order(exception.REPLAY_MEANINGS))

    def test_help_is_generated_from_the_meanings(self):
        for text, meanings in (
                (common.EXIT_CODES_HELP, exception.MEANINGS),
                (common.REPLAY_EXIT_CODES_HELP, exception.REPLAY_MEANINGS),
                (common.REVERT_EXIT_CODES_HELP, exception.REVERT_MEANINGS),
                (common.APPLY_EXIT_CODES_HELP, exception.APPLY_MEANINGS)):
            table = text.split('\nWhen several apply')[0]
            rows = [line for line in table.splitlines()[1:]
                    if not line.startswith('       ')]
            self.assertEqual(['%d' % code for code in meanings],
                             [row.split()[0] for row in rows])
            for meaning in meanings.values():
                self.assertIn(meaning.text, ' '.join(table.split()))
        for text in (common.REPLAY_EXIT_CODES_HELP,
                     common.REVERT_EXIT_CODES_HELP,
                     common.APPLY_EXIT_CODES_HELP):
            self.assertIn('most severe wins: 255, 127, 2, 3, 0, 4.', text)

    def test_revert_and_apply_help_each_speak_of_their_command(self):
        self.assertEqual(list(exception.REPLAY_MEANINGS),
                         list(exception.REVERT_MEANINGS))
        self.assertEqual(list(exception.REPLAY_MEANINGS),
                         list(exception.APPLY_MEANINGS))
        for meaning in exception.REVERT_MEANINGS.values():
            self.assertNotIn('apply', meaning.text + meaning.action)
            self.assertNotIn('plan', meaning.text + meaning.action)
        for meaning in exception.APPLY_MEANINGS.values():
            self.assertNotIn('revert', meaning.text + meaning.action)


class CanonicalUuidTest(testtools.TestCase):

    UUID = '982c3ead-59b1-4acd-876b-d55166d8e7f0'

    def test_canonical(self):
        self.assertEqual(self.UUID,
                         common.canonical_uuid(self.UUID, 'instance'))

    def test_upper_case(self):
        self.assertEqual(self.UUID,
                         common.canonical_uuid(self.UUID.upper(), 'instance'))

    def test_surrounding_spaces(self):
        for value in (' %s ', '\t%s\n', '  %s'):
            self.assertEqual(self.UUID, common.canonical_uuid(
                value % self.UUID.upper(), 'instance'))

    def test_rejected(self):
        for value in ('', ' ', 'nope', self.UUID.replace('-', ''),
                      '{%s}' % self.UUID, 'urn:uuid:%s' % self.UUID,
                      self.UUID[:-1], self.UUID + '0',
                      self.UUID.replace('9', 'g'),
                      self.UUID.replace('-', '_'),
                      self.UUID[:7] + '-' + self.UUID[7] + self.UUID[9:],
                      self.UUID.replace('-', ' '),
                      self.UUID + '\n' + self.UUID,
                      '%s %s' % (self.UUID, self.UUID)):
            error = self.assertRaises(ValueError, common.canonical_uuid,
                                      value, 'cell')
            self.assertIn('cell', str(error))
            self.assertIn(repr(value), str(error))
