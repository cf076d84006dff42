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

"""``revert`` and ``apply`` each speak of what they do.

Their text reports say REVERTED or APPLIED (WOULD REVERT, WOULD APPLY
in a dry run) and end with their own outcome; their --help describes
their own exit codes. The JSON statuses stay those of a heal.
"""

import os

import fixtures

from healreq.tests.functional import audit_case


class ReplayWordingTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        self.plan = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'plan.json')

    def finding_lines(self, result):
        return [line for line in result.stdout.splitlines()
                if self.drifted in line]

    def assert_report(self, argv, label, outcome, code=0):
        result = self.run_cli(*argv)
        self.assertEqual(code, result.code, result.stdout + result.stderr)
        lines = self.finding_lines(result)
        self.assertEqual(1, len(lines), result.stdout)
        self.assertTrue(lines[0].startswith(
            '%-9s %s cell1 recorded-change: fields: flavor'
            % (label, self.drifted)), lines[0])
        self.assertNotIn('HEALED', result.stdout)
        self.assertNotIn('DRIFTED', result.stdout)
        self.assertEqual('Exit code %d (%s).' % (code, outcome),
                         result.stdout.splitlines()[-1])
        return result

    def test_revert_says_reverted(self):
        heal_run = self.heal_run()
        dry = self.assert_report(('revert', '--dry-run', heal_run),
                                 'WOULD REVERT', 'would revert')
        self.assertIn('Dry run: nothing was written; 1 instance(s) would '
                      'be reverted.', dry.stdout)
        self.assert_report(('revert', heal_run), 'REVERTED', 'reverted')
        again = self.run_cli('revert', heal_run)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual('Exit code 4 (nothing to revert).',
                         again.stdout.splitlines()[-1])

    def test_apply_says_applied(self):
        result = self.heal('--dry-run', '--plan', self.plan)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        dry = self.assert_report(('apply', '--dry-run', self.plan),
                                 'WOULD APPLY', 'would apply')
        self.assertIn('Dry run: nothing was written; 1 instance(s) would '
                      'be applied.', dry.stdout)
        self.assert_report(('apply', self.plan), 'APPLIED', 'applied')
        again = self.run_cli('apply', self.plan)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual('Exit code 4 (nothing to apply).',
                         again.stdout.splitlines()[-1])

    def test_json_statuses_are_unchanged(self):
        heal_run = self.heal_run()
        result, document = self.run_json('revert', '--dry-run', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([('drifted', 'recorded-change')],
                         [(r['status'], r['reason'])
                          for r in document['results']])
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([('healed', 'recorded-change')],
                         [(r['status'], r['reason'])
                          for r in document['results']])
        self.assertEqual(1, document['summary']['healed'])

    def help_text(self, command):
        result = self.run_cli(command, '--help')
        self.assertEqual(0, result.code, result.stderr)
        return ' '.join(result.stdout.split('exit codes:')[1].split())

    def test_help_describes_the_commands_own_exit_codes(self):
        revert, apply = self.help_text('revert'), self.help_text('apply')
        self.assertIn('0 every change reverted', revert)
        self.assertIn('4 nothing to revert', revert)
        self.assertIn('a revert that writes nothing never exits 0', revert)
        self.assertIn('0 every change of the plan applied', apply)
        self.assertIn('4 nothing to apply', apply)
        self.assertIn('an apply that writes nothing never exits 0', apply)
        self.assertNotIn('revert', apply)
        self.assertNotIn('plan', revert)
