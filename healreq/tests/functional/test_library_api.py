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

"""The library API runs as the command does, under one configuration."""

import datetime
import json

from healreq import api
from healreq.cmd import output
from healreq.tests.functional import clocks
from healreq.tests.functional import deployment_case

# Not the options' defaults (60 seconds, 500 instances).
CONFIGURED = 'skip_updated_within = 3600\nbatch_size = 1\n'


class LibraryAgreesWithCommandTest(deployment_case.DeploymentTestCase):
    """A library caller and the command read the same configuration."""

    def setUp(self):
        super().setUp()
        self.config_file = self.write_config(CONFIGURED)
        self.drifted = self.add_drifted(self.cell1)
        # Skipped only under the configured window, not the default one.
        self.recent = self.add_drifted(
            self.cell1,
            updated_at=clocks.utcnow() - datetime.timedelta(minutes=10))
        self.consistent = self.add_consistent(self.cell2)

    def library_document(self, **overrides):
        """Run request-specs through the API; return its JSON report."""
        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        options = api.Options.from_conf(conf, **overrides)
        self.assertEqual((1, 3600), (options.batch_size,
                                     options.settings.skip_updated_within))
        result = api.run_request_specs(conf, options)
        return json.loads(''.join(output.json_chunks(
            result.report, result.exit_code, result.run_id,
            result.problems)))

    def assertSameReport(self, command, library):
        self.assertNotEqual(command.pop('run_id'), library.pop('run_id'))
        self.assertEqual(command, library)

    def test_dry_run(self):
        result, command = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        library = self.library_document(dry_run=True)
        self.assertEqual(
            {self.drifted: ('drifted', 'spec-drift'),
             self.recent: ('skipped', 'recently-updated')},
            {r['instance_uuid']: (r['status'], r['reason'])
             for r in library['results']})
        self.assertEqual((3, 1), (library['summary']['instances_checked'],
                                  library['summary']['consistent']))
        self.assertSameReport(command, library)

    def test_arguments_given_to_both(self):
        result, command = self.heal_json(
            '--dry-run', '--instance', self.recent, '--force')
        self.assertEqual(0, result.code, result.stderr)
        library = self.library_document(
            dry_run=True, instance_uuid=self.recent, force=True)
        self.assertEqual([(self.recent, 'drifted')],
                         [(r['instance_uuid'], r['status'])
                          for r in library['results']])
        self.assertSameReport(command, library)
