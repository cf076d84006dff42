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

"""Tests that need root skip without it, or fail where root is required."""

import unittest

import fixtures
import testtools

from healreq.tests.functional import other_user


class RequireRootTest(testtools.TestCase):

    def run_as(self, uid, required):
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.tests.functional.other_user.REQUIRE_ROOT', required))
        self.useFixture(fixtures.MonkeyPatch('os.getuid', lambda: uid))
        return other_user.require_root(self)

    def test_root_runs(self):
        self.assertIsNone(self.run_as(0, False))
        self.assertIsNone(self.run_as(0, True))

    def test_another_user_skips(self):
        error = self.assertRaises(unittest.SkipTest, self.run_as,
                                  other_user.NOBODY, False)
        self.assertEqual('switching users needs root', str(error))

    def test_another_user_fails_where_root_is_required(self):
        error = self.assertRaises(AssertionError, self.run_as,
                                  other_user.NOBODY, True)
        self.assertEqual('switching users needs root '
                         '(HEALREQ_TEST_REQUIRE_ROOT is set)', str(error))
