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

"""How often the cycle collector runs: per few batches of the run's size."""

import gc

import testtools

from healreq.cmd import collector


class TuneTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.addCleanup(gc.set_threshold, *gc.get_threshold())
        gc.set_threshold(700, 10, 10)

    def test_four_batches_worth_of_containers(self):
        collector.tune(500)
        self.assertEqual((200000, 10, 10), gc.get_threshold())

    def test_the_option_default_when_no_size_is_given(self):
        collector.tune()
        self.assertEqual(collector.first_threshold(500),
                         gc.get_threshold()[0])

    def test_a_larger_batch_collects_less_often(self):
        collector.tune()
        collector.tune(10000)
        self.assertEqual(4000000, gc.get_threshold()[0])

    def test_never_more_often_than_once_per_50000(self):
        collector.tune(1)
        self.assertEqual(50000, gc.get_threshold()[0])

    def test_never_more_often_than_already_set(self):
        gc.set_threshold(9000000, 10, 10)
        collector.tune(500)
        self.assertEqual(9000000, gc.get_threshold()[0])
