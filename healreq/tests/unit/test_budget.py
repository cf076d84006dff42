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

"""The pause between two batches, and the hook that tests hold it with."""

import fixtures
import testtools

from healreq.run import budget


class PauseTest(testtools.TestCase):

    def test_between_batches_is_called_after_the_sleep(self):
        calls = []
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.run.budget.between_batches',
            lambda: calls.append('between')))
        pace = budget.Budget(sleep=0.5,
                             sleep_function=lambda s: calls.append(s))
        pace.pause()
        pace.pause()
        self.assertEqual([0.5, 'between', 0.5, 'between'], calls)

    def test_no_hook_by_default(self):
        self.assertIsNone(budget.between_batches)
        calls = []
        budget.Budget(sleep_function=calls.append).pause()
        self.assertEqual([], calls)
