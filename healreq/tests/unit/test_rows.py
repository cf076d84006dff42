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

"""One object for the equal strings of a result's rows."""

import testtools

from healreq.db import rows


class OneCopyTest(testtools.TestCase):

    def test_equal_strings_become_the_first_seen(self):
        one = rows.OneCopy()
        first = ''.join(['sc', 'si'])
        second = ''.join(['s', 'csi'])
        self.assertIsNot(first, second)
        self.assertIs(first, one(first))
        self.assertIs(first, one(second))

    def test_other_values_are_left_alone(self):
        one = rows.OneCopy()
        values = [None, 3, b'scsi', 2.5, ['scsi'], True]
        for value in values:
            self.assertIs(value, one(value))
