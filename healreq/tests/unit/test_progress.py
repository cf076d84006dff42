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

"""The progress of a run: its figures, the terminal line, the log lines."""

import io
import logging
import threading

import fixtures
import testtools

from healreq.cmd import progress

CELL1 = {'uuid': 'c1', 'name': 'cell1'}
CELL2 = {'uuid': 'c2', 'name': 'cell2'}


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class RunProgressTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.clock = Clock()
        self.shown = []

    def run_progress(self, limit=None):
        return progress.RunProgress(self.shown.append, 'drifted', limit,
                                    clock=self.clock)

    def test_the_whole_run_adds_up_its_cells(self):
        run = self.run_progress()
        run.planned(CELL1, 100)
        run.planned(CELL2, 300)
        self.clock.now += 10
        run.advanced(CELL1, 100, 3)
        self.clock.now += 10
        run.advanced(CELL2, 100, 2)
        last = self.shown[-1]
        self.assertEqual((200, 400, 5), (last.done, last.total, last.found))
        self.assertEqual(10.0, last.rate)
        self.assertEqual(20.0, last.eta_seconds())
        self.assertEqual([True, False], [c.finished() for c in last.cells])

    def test_a_cell_whose_count_failed_makes_the_total_unknown(self):
        run = self.run_progress()
        run.planned(CELL1, 100)
        run.planned(CELL2, None)
        self.clock.now += 1
        run.advanced(CELL1, 50, 0)
        self.assertIsNone(self.shown[-1].total)
        self.assertIsNone(self.shown[-1].eta_seconds())

    def test_max_count_caps_the_total(self):
        run = self.run_progress(limit=150)
        run.planned(CELL1, 100)
        run.planned(CELL2, 300)
        self.clock.now += 1
        run.advanced(CELL1, 100, 0)
        self.assertEqual(150, self.shown[-1].total)

    def test_cells_of_several_workers_count_once_each(self):
        run = self.run_progress()
        cells = [{'uuid': 'c%d' % n, 'name': 'cell%d' % n} for n in range(8)]
        for cell in cells:
            run.planned(cell, 1000)
        self.clock.now += 1

        def walk(cell):
            for done in range(1, 1001):
                run.advanced(cell, done, done // 10)
        threads = [threading.Thread(target=walk, args=(c,)) for c in cells]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        last = self.shown[-1]
        self.assertEqual((8000, 8000, 800), (last.done, last.total,
                                             last.found))


class LinesTest(testtools.TestCase):
    def snapshot(self, *cells, rate=25.0):
        return progress.Snapshot(
            done=sum(c.done for c in cells),
            total=sum(c.total for c in cells), found=4, rate=rate,
            cells=list(cells))

    def test_summary(self):
        snapshot = self.snapshot(
            progress.CellCounts('cell1', total=5000, done=5000, started=True),
            progress.CellCounts('cell2', total=5000, done=0))
        self.assertEqual('5000/10000 instances (50%), 25/s, ETA 0:03:20, '
                         '4 drifted', progress.summary(snapshot, 'drifted'))

    def test_terminal_line_folds_the_cells_into_one_line(self):
        stream = io.StringIO()
        line = progress.TerminalLine(stream, 'mismatched', width=200)
        line(self.snapshot(
            progress.CellCounts('cell1', total=10, done=10, started=True),
            progress.CellCounts('cell2', total=10, done=4, started=True),
            progress.CellCounts('cell\x1b3', total=10, done=2,
                                started=True),
            progress.CellCounts('cell4', total=10)))
        line.close()
        self.assertEqual(
            '\r\x1b[K16/40 instances (40%), 25/s, ETA 0:00:01, '
            '4 mismatched; cells 1/4 done (cell2 4/10, cell\\x1b3 2/10)\n',
            stream.getvalue())

    def test_terminal_line_fits_the_terminal(self):
        stream = io.StringIO()
        line = progress.TerminalLine(stream, 'drifted', width=40)
        line(self.snapshot(progress.CellCounts('cell1', total=10, done=1,
                                               started=True)))
        written = stream.getvalue()
        self.assertEqual(39, len(written[len('\r\x1b[K'):]))

    def test_log_lines_come_at_the_interval(self):
        logged = self.useFixture(fixtures.FakeLogger(
            name='healreq.cmd.progress', level=logging.INFO,
            format='%(message)s'))
        clock = Clock()
        lines = progress.LogLines(30, 'drifted', clock=clock)
        snapshot = self.snapshot(
            progress.CellCounts('cell1', total=100, done=60, started=True),
            progress.CellCounts('c3', total=50, done=0))
        for step in (10, 10, 10, 10, 21):
            clock.now += step
            lines(snapshot)
        self.assertEqual(
            ['Progress: 60/150 instances (40%), 25/s, ETA 0:00:04, '
             '4 drifted; cell1 60/100, c3 0/50'] * 2,
            logged.output.splitlines())

    def test_durations(self):
        self.assertEqual(['?', '0:00:00', '0:01:01', '27:46:40'],
                         [progress.duration(s)
                          for s in (None, 0.2, 61, 100000)])


class ForCommandTest(testtools.TestCase):
    class Conf(object):
        def __init__(self, quiet=False, interval=30):
            self.command = type('Command', (), {'quiet': quiet})()
            self.healreq = type('Section', (), {
                'progress_interval': interval})()

    class Stream(io.StringIO):
        def __init__(self, tty):
            super().__init__()
            self.tty = tty

        def isatty(self):
            return self.tty

    def test_terminal_gets_the_line_and_other_streams_log_lines(self):
        on_terminal = progress.for_command(self.Conf(), self.Stream(True),
                                           'drifted')
        self.assertIsInstance(on_terminal._show, progress.TerminalLine)
        elsewhere = progress.for_command(self.Conf(), self.Stream(False),
                                         'drifted')
        self.assertIsInstance(elsewhere._show, progress.LogLines)
        self.assertEqual(30, elsewhere._show.interval)

    def test_quiet_or_no_interval_shows_nothing(self):
        self.assertIsNone(progress.for_command(
            self.Conf(quiet=True), self.Stream(True), 'drifted'))
        self.assertIsNone(progress.for_command(
            self.Conf(interval=0), self.Stream(False), 'drifted'))
        self.assertIsNotNone(progress.for_command(
            self.Conf(interval=0), self.Stream(True), 'drifted'))
