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

"""Every command's JSON report says why it did not exit 0 or 4.

A failure besides the results (a metrics file that cannot be written)
is listed under ``problems`` in the JSON report of every command, as
well as on stderr, and counted in the exit code.
"""

import os

import fixtures

from healreq.tests.functional import deployment_case

# What each command needs to run and end with exit 4.
COMMANDS = {
    'request-specs': ['--dry-run'],
    'allocations': [],
    'hosts': [],
}


class UnwritableMetricsTest(deployment_case.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.add_placement()
        # A path whose directory does not exist: it cannot be written.
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'gone', 'metrics.prom')

    def test_every_command_lists_it_in_its_report(self):
        for command, argv in COMMANDS.items():
            result, document = self.run_json(
                command, *(argv + ['--metrics-file', self.path]))
            self.assertEqual(2, result.code, '%s: %s' % (
                command, result.stdout + result.stderr))
            self.assertEqual(2, document['exit_code'])
            problem, = document['problems']
            self.assertTrue(problem.startswith(
                'nova-heal: error: cannot write metrics file %s: '
                % self.path), problem)
            self.assertEqual([problem], result.stderr.splitlines())
            self.assertFalse(os.path.exists(self.path))
