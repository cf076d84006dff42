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

"""Inputs a script can get wrong must never widen what a run touches."""

import json
import os

from healreq.tests.functional import fixtures


class EmptyFilterTest(fixtures.DeploymentTestCase):
    """An empty ``$UUID`` in a cron line must not mean "everything"."""

    def setUp(self):
        super().setUp()
        self.drifted = [self.add_drifted(self.cell1),
                        self.add_drifted(self.cell2)]

    def assert_refused_untouched(self, result, option):
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertIn(option, lines[0])
        self.assertIn('empty', lines[0])

    def test_request_specs_refuses_empty_filters(self):
        before = self.all_spec_texts()
        for option in ('--instance', '--cell'):
            for value in ('', ' ', '\t\n'):
                for extra in ([], ['--dry-run']):
                    result = self.heal(option, value, *extra)
                    self.assert_refused_untouched(result, option)
        self.assertEqual(before, self.all_spec_texts())
        self.assertEqual([], os.listdir(self.state_path))

    def test_empty_output_paths_are_refused(self):
        for option in ('--plan', '--metrics-file'):
            result = self.heal('--dry-run', option, '')
            self.assert_refused_untouched(result, option)

    def test_revert_refuses_an_empty_instance(self):
        heal = self.heal('--format', 'json')
        self.assertEqual(0, heal.code, heal.stderr)
        run_id = json.loads(heal.stdout)['run_id']
        healed = self.all_spec_texts()
        for value in ('', '  '):
            result = fixtures.run_main(['--config-file', self.config_file,
                                        'revert', run_id, '--instance',
                                        value])
            self.assert_refused_untouched(result, '--instance')
        self.assertEqual(healed, self.all_spec_texts())
