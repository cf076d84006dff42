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

"""The exit code is the run's outcome whatever happens to stdout and stderr.

Each test runs the installed ``nova-heal`` console script and ``python -m
healreq`` in a subprocess with stdout or stderr closed at the start, or
writing into a pipe whose reader has exited, and checks the exit code, the
rows and the audit run: a heal that heals (0), a dry run with nothing to
do (4), an invalid option (127).
"""

import os
import subprocess
import sys
import sysconfig

from healreq.tests.functional import audit_case

CONSOLE_SCRIPT = [os.path.join(sysconfig.get_path('scripts'), 'nova-heal')]
PYTHON_M = [sys.executable, '-m', 'healreq']


class StreamsTestCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.assertTrue(os.access(CONSOLE_SCRIPT[0], os.X_OK),
                        'the nova-heal console script is not installed')

    def run_with(self, streams, command, *argv):
        """Run ``command argv`` with ``streams``; (code, stdout, stderr).

        ``streams`` is a shell redirection closing descriptors (``>&-``)
        or ``stdout-reader-gone`` / ``stderr-reader-gone``. What cannot be
        read is returned as None.
        """
        argv = command + ['--config-file', self.config_file] + list(argv)
        if streams.endswith('-reader-gone'):
            reader, writer = os.pipe()
            os.close(reader)
            broken = streams.split('-')[0]
            kwargs = {'stdout': subprocess.PIPE, 'stderr': subprocess.PIPE,
                      broken: writer}
            try:
                process = subprocess.run(argv, timeout=300, **kwargs)
            finally:
                os.close(writer)
        else:
            process = subprocess.run(
                ['sh', '-c', 'exec "$0" "$@" %s' % streams] + argv,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        out = process.stdout.decode() if process.stdout is not None else None
        err = process.stderr.decode() if process.stderr is not None else None
        if '>&-' in streams.split():
            self.assertEqual('', out)
        if '2>&-' in streams.split():
            self.assertEqual('', err)
        return process.returncode, out, err

    def assert_outcomes(self, streams):
        # A heal that heals, through the console script.
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)
        runs = self.audit_runs()
        code, out, err = self.run_with(streams, CONSOLE_SCRIPT,
                                       'request-specs')
        self.assertEqual(0, code, err)
        self.assertNotEqual(before, self.deployment.spec_text(uuid))
        self.assert_run_closed(runs, 'heal', 0, healed=1)
        self.assert_no_traceback(err)
        if out:
            self.assertIn('Exit code 0 (healed).', out)

        # A dry run with nothing to do.
        runs = self.audit_runs()
        code, out, err = self.run_with(streams, CONSOLE_SCRIPT,
                                       'request-specs', '--dry-run')
        self.assertEqual(4, code, err)
        self.assert_run_closed(runs, 'dry-run', 4)
        self.assert_no_traceback(err)

        # An invalid option: refused before any run is recorded.
        runs = self.audit_runs()
        code, out, err = self.run_with(streams, CONSOLE_SCRIPT,
                                       'request-specs', '--batch-size', 'x')
        self.assertEqual(127, code, err)
        self.assertEqual(runs, self.audit_runs())
        if err:
            self.assertIn('--batch-size', err)
            self.assert_no_traceback(err)

        # A heal through "python -m healreq".
        uuid = self.add_drifted(self.cell2)
        before = self.deployment.spec_text(uuid)
        runs = self.audit_runs()
        code, out, err = self.run_with(streams, PYTHON_M, 'request-specs',
                                       '--format', 'json')
        self.assertEqual(0, code, err)
        self.assertNotEqual(before, self.deployment.spec_text(uuid))
        self.assert_run_closed(runs, 'heal', 0, healed=1)
        self.assert_no_traceback(err)

    def assert_run_closed(self, runs_before, mode, code, **summary):
        """One new run, of ``mode``, closed with ``code``."""
        new = [run for run_id, run in self.audit_runs().items()
               if run_id not in runs_before]
        self.assertEqual(1, len(new), new)
        run = new[0]
        self.assertEqual((mode, code), (run['mode'], run['exit_code']))
        self.assertIsNotNone(run['ended_at'])
        for key, value in summary.items():
            self.assertEqual(value, run['summary'][key])

    def assert_no_traceback(self, err):
        if err is not None:
            self.assertNotIn('Traceback', err)
            self.assertNotIn('Error in sys.excepthook', err)
            self.assertNotIn('Exception ignored', err)


class ClosedStreamsTest(StreamsTestCase):
    """Descriptors closed when the command starts."""

    def test_stdout_closed(self):
        self.assert_outcomes('>&-')

    def test_stderr_closed(self):
        self.assert_outcomes('2>&-')

    def test_both_closed(self):
        self.assert_outcomes('>&- 2>&-')


class GoneReaderTest(StreamsTestCase):
    """Pipes whose reader has exited (EPIPE on every write)."""

    def test_stdout_reader_gone(self):
        self.assert_outcomes('stdout-reader-gone')

    def test_stderr_reader_gone(self):
        self.assert_outcomes('stderr-reader-gone')
