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

"""The files of an SQLite audit store: the store and its lock files.

They live in a directory an operator may not fully control; whatever is
found there, the command ends with one line and never writes elsewhere.
The deployment's backend does not matter here: these run on SQLite.
"""

import json
import os

from healreq.tests.functional import audit_case
from healreq.tests.functional import backends
from healreq.tests.functional import other_user

SQLITE = [s for s in backends.SCENARIOS if s[0] == 'SQLite']


class StoreFilesTestCase(audit_case.AuditTestCase):

    scenarios = SQLITE

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)

    def assert_one_line(self, result, code, *expected):
        self.assertEqual(code, result.code, result.stdout + result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith('nova-heal: error: audit '
                                            'store: '), lines[0])
        for text in expected:
            self.assertIn(text, lines[0])
        return lines[0]


class LeaseFileNotCreatedTest(StoreFilesTestCase):
    """A store file the user can write, in a directory it cannot."""

    def setUp(self):
        super().setUp()
        other_user.require_root(self)
        self.heal_run('--dry-run')
        self.runs = self.audit_runs()
        os.chown(self.audit_path(), other_user.NOBODY, other_user.NOBODY)
        other_user.open_to_all(os.path.dirname(self.config_file),
                               self.db.directory)
        os.chmod(self.state_path, 0o755)

    def test_run_is_refused_in_one_line(self):
        before = self.deployment.spec_text(self.drifted)
        for argv, json_format in ((['request-specs', '--dry-run'], False),
                                  (['request-specs'], False),
                                  (['request-specs', '--format', 'json'],
                                   True)):
            result = other_user.run_as(
                other_user.NOBODY,
                ['--config-file', self.config_file] + argv)
            line = self.assert_one_line(
                result, 127, 'cannot take the lease of a new run',
                'cannot create the lock file %s.run-' % self.audit_path(),
                'Permission denied')
            if json_format:
                self.assertEqual({'error': {'exit_code': 127,
                                            'message': line}},
                                 json.loads(result.stdout))
        self.assertEqual(before, self.deployment.spec_text(self.drifted))
        self.assertEqual(self.runs, self.audit_runs())
        self.assertEqual(['audit.sqlite'], os.listdir(self.state_path))
