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


import threading

import testtools

from healreq.run import read_threads


class _Source(object):
    """An iterable of 0..count-1 that counts what it has produced."""

    def __init__(self, count, fail_at=None):
        self.count = count
        self.fail_at = fail_at
        self.produced = 0
        self.reader = None

    def __iter__(self):
        self.reader = threading.current_thread()
        for number in range(self.count):
            if number == self.fail_at:
                raise RuntimeError('database went away at %d' % number)
            self.produced += 1
            yield number


class InterruptibleTest(testtools.TestCase):

    def test_result_and_failure_of_the_call(self):
        self.assertEqual(42, read_threads.interruptible(lambda: 42))

        def fail():
            raise RuntimeError('cell gone')
        error = self.assertRaises(RuntimeError, read_threads.interruptible,
                                  fail)
        self.assertEqual('cell gone', str(error))

    def test_stop_check_ends_the_wait_for_a_blocked_call(self):
        release = threading.Event()
        caller = []

        def read():
            caller.append(threading.current_thread())
            release.wait(30)  # a read waiting for a lock
            return 'late'

        def stop_check():
            raise KeyboardInterrupt('stop')
        self.assertRaises(KeyboardInterrupt, read_threads.interruptible, read,
                          stop_check)
        release.set()
        self.assertIsNot(threading.current_thread(), caller[0])
        self.assertTrue(caller[0].daemon)


class LoadedTest(testtools.TestCase):

    def test_loads_in_order_in_other_threads(self):
        threads = set()

        def load(number):
            threads.add(threading.current_thread())
            return number * 10
        self.assertEqual([n * 10 for n in range(30)],
                         list(read_threads.loaded(_Source(30), load, 2)))
        self.assertNotIn(threading.current_thread(), threads)

    def test_loads_after_the_first_run_at_once(self):
        """Two loads are under way together: each waits for the other."""
        both = threading.Barrier(2, timeout=30)

        def load(number):
            if number > 0:
                both.wait()
            return number
        self.assertEqual([0, 1, 2, 3, 4],
                         list(read_threads.loaded(_Source(5), load, 2)))

    def test_first_page_is_loaded_alone(self):
        under_way = []
        lock = threading.Lock()

        def load(number):
            with lock:
                under_way.append(number)
            return number
        source = _Source(100)
        pages = read_threads.loaded(source, load, 2)
        self.assertEqual(0, next(pages))
        self.assertEqual([0], under_way)
        self.assertEqual(1, source.produced)
        pages.close()

    def test_takes_a_page_only_when_one_is_yielded(self):
        source = _Source(100)
        pages = read_threads.loaded(source, lambda number: number, 2)
        self.assertEqual(0, next(pages))
        self.assertEqual(1, next(pages))
        # The two yielded, the one loaded next, and none more.
        self.assertEqual(3, source.produced)
        pages.close()

    def test_loads_run_in_daemon_threads(self):
        threads = []

        def load(number):
            threads.append(threading.current_thread())
            return number
        self.assertEqual([0, 1, 2],
                         list(read_threads.loaded(_Source(3), load, 2)))
        self.assertEqual([True] * 3, [thread.daemon for thread in threads])

    def test_failure_comes_in_its_turn(self):
        def load(number):
            if number == 3:
                raise ValueError('page %d unreadable' % number)
            return number
        seen = []
        error = self.assertRaises(
            ValueError, seen.extend,
            read_threads.loaded(_Source(10), load, 2))
        self.assertEqual([0, 1, 2], seen)
        self.assertEqual('page 3 unreadable', str(error))
