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


"""The README documents every public code the tool can emit."""

import os

import testtools

from healreq.cmd import common
from healreq.heal import findings

_README = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                       'README.rst')


class ReadmeTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        with open(_README) as handle:
            self.readme = handle.read()

    def test_every_reason_code_is_documented(self):
        codes = [code for reasons in findings.REASONS.values()
                 for code in reasons] + list(findings.NOTES)
        missing = [code for code in codes
                   if '``%s``' % code not in self.readme]
        self.assertEqual([], missing)

    def test_every_exit_code_is_documented(self):
        for code in common.ExitCode:
            self.assertIn('\n%-5d  ' % code.value, self.readme)
            self.assertIn('  %d' % code.value, common.EXIT_CODES_HELP)
