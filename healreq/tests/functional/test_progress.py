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

"""Progress of a long run, off a terminal (log lines) and on one.

Each test runs the real command in a process of its own, its stderr a
file (as under cron, in a container or behind ``| tee``) or a pseudo
terminal.
"""

import os
import pty
import re
import subprocess

import fixtures

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import allocations_case

# cell1 holds 3 instances (1 drifted, 2 mismatched), cell2 2.
LOG_LINE = re.compile(
    r'INFO healreq\.cmd\.progress \[-\] Progress: (\d+)/5 instances '
    r'\((\d+)%\), \d+/s, ETA \d+:\d\d:\d\d, (\d) (drifted|mismatched); '
    r'cell1 (\d)/3, cell2 (\d)/2$')
TERMINAL_LINE = re.compile(
    r'^(\d+)/5 instances \(\d+%\), \d+/s, ETA \d+:\d\d:\d\d, \d drifted; '
    r'cells (\d)/2 done')


class ProgressTest(allocations_case.AllocationsTestCase):
    def setUp(self):
        super().setUp()
        self.deployment.add_instance(self.cell1, demo.M1_LARGE,
                                     spec_flavor=demo.M1_SMALL)
        self.small()
        self.small(allocate=False)
        node3 = dep.add_compute_node(self.cell2.engine, 'compute-3')
        for _ in range(2):
            self.placement.allocate(
                self.small(self.cell2, allocate=False, host='compute-3'),
                node3, allocations_case.SMALL)
        self.folder = self.useFixture(fixtures.TempDir()).path

    def interval_config(self, seconds):
        path = os.path.join(self.folder, 'progress.conf')
        with open(path, 'w') as handle:
            handle.write('[healreq]\nprogress_interval = %s\n' % seconds)
        return path

    def run_with_stderr_to_file(self, *argv, interval='0.000001'):
        """Run ``argv`` with stderr a file; (exit code, stderr lines)."""
        path = os.path.join(self.folder, 'stderr.log')
        with open(path, 'w') as stderr:
            process = cli.spawn(
                cli.NOVA_HEAL + [
                    '--config-file', self.config_file,
                    '--config-file', self.interval_config(interval)]
                + list(argv), stdout=subprocess.DEVNULL, stderr=stderr)
            code = process.wait(timeout=120)
        with open(path) as handle:
            return code, handle.read().splitlines()

    def progress_lines(self, lines):
        return [LOG_LINE.search(line) for line in lines
                if 'Progress:' in line]

    def assert_counts_up_to_the_end(self, found, progress, word):
        self.assertGreaterEqual(len(progress), 3, progress)
        self.assertNotIn(None, progress)
        done = [int(match.group(1)) for match in progress]
        self.assertEqual(sorted(done), done)
        last = progress[-1].groups()
        self.assertEqual(('5', '100', found, word, '3', '2'), last)
        # The run's figures are the cells' sum on every line.
        for match in progress:
            self.assertEqual(int(match.group(1)),
                             int(match.group(5)) + int(match.group(6)))

    def test_request_specs_logs_progress_off_a_terminal(self):
        code, lines = self.run_with_stderr_to_file(
            'request-specs', '--dry-run', '--batch-size', '1')
        self.assertEqual(0, code, lines)
        self.assert_counts_up_to_the_end('1', self.progress_lines(lines),
                                         'drifted')

    def test_the_same_under_workers(self):
        code, lines = self.run_with_stderr_to_file(
            'request-specs', '--dry-run', '--batch-size', '1',
            '--workers', '2')
        self.assertEqual(0, code, lines)
        self.assert_counts_up_to_the_end('1', self.progress_lines(lines),
                                         'drifted')

    def test_allocations_logs_progress_off_a_terminal(self):
        code, lines = self.run_with_stderr_to_file(
            'allocations', '--batch-size', '1')
        self.assertEqual(0, code, lines)
        self.assert_counts_up_to_the_end('2', self.progress_lines(lines),
                                         'mismatched')

    def test_no_line_before_the_interval_nor_with_quiet(self):
        code, lines = self.run_with_stderr_to_file(
            'request-specs', '--dry-run', '--batch-size', '1',
            interval='30')
        self.assertEqual((0, []), (code, lines))
        code, lines = self.run_with_stderr_to_file(
            'allocations', '--batch-size', '1', '--quiet')
        self.assertEqual((0, []), (code, lines))
        code, lines = self.run_with_stderr_to_file(
            'request-specs', '--dry-run', '--batch-size', '1', interval='0')
        self.assertEqual((0, []), (code, lines))

    def test_one_line_for_the_whole_run_on_a_terminal(self):
        primary, secondary = pty.openpty()
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', self.config_file,
                             'request-specs', '--dry-run', '--batch-size',
                             '1', '--workers', '2'],
            stdout=subprocess.DEVNULL, stderr=secondary)
        os.close(secondary)
        written = b''
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            written += chunk
        os.close(primary)
        self.assertEqual(0, process.wait(timeout=120))
        text = written.decode()
        self.assertTrue(text.endswith('\r\n'), text)
        updates = text[:-2].split('\r\x1b[K')
        self.assertEqual('', updates.pop(0))
        matches = [TERMINAL_LINE.match(update) for update in updates]
        self.assertNotIn(None, matches, updates)
        self.assertEqual(5, len(matches))
        # Whichever worker reports, the line counts the whole run.
        self.assertEqual(['1', '2', '3', '4', '5'],
                         [m.group(1) for m in matches])
        self.assertEqual('2', matches[-1].group(2))
