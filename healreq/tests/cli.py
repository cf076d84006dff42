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

"""Run ``nova-heal`` in-process and capture what it prints, or as a child."""

import contextlib
import dataclasses
import io
import itertools
import os
import signal
import subprocess
import sys
import time

import fixtures

from healreq.cmd import main
from healreq.run import budget


@dataclasses.dataclass
class Result:
    """The exit code and the output of one run."""
    code: int
    stdout: str
    stderr: str


def run_main(argv):
    """Run ``nova-heal argv`` in-process; return its code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main.main(argv)
    return Result(code, out.getvalue(), err.getvalue())


# nova-heal as a child process, run by the interpreter running the tests
# through the console script's entrance.
NOVA_HEAL = [sys.executable, '-m', 'healreq']

# What a child's signal handling depends on: a test run started in the
# background or under nohup passes these on ignored.
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def spawn(argv, preexec_fn=None, **kwargs):
    """Start ``argv`` as ``subprocess.Popen`` does, signals reset.

    The child starts with the default disposition of every signal a test
    sends, whatever the test run inherited, then runs ``preexec_fn``.
    """
    def reset_signals():
        for number in _SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        if preexec_fn is not None:
            preexec_fn()

    return subprocess.Popen(argv, preexec_fn=reset_signals, **kwargs)


# Lease timing for tests that wait for a lease row to expire: renewed
# every RENEW seconds, free EXPIRY seconds after its last renewal.
FAST_LEASES = dict(RENEW_INTERVAL=0.2, EXPIRY=2, WRITABLE_FOR=1)


def fast_leases_code():
    """Python that gives the process it runs in FAST_LEASES."""
    return 'from healreq.audit import lease; %s; ' % '; '.join(
        'lease.%s = %r' % item for item in FAST_LEASES.items())


class FastLeases(fixtures.Fixture):
    """FAST_LEASES in this process, for the test's length."""

    def _setUp(self):
        from healreq.audit import lease
        for name, value in FAST_LEASES.items():
            self.useFixture(fixtures.MonkeyPatch(
                'healreq.audit.lease.%s' % name, value))
        self.expired = lambda: time.sleep(lease.EXPIRY * 1.5)


class Gate(fixtures.Fixture):
    """Holds a child nova-heal after each batch until the test lets it on.

    The child runs ``argv()``. Once its n-th batch is done (after any
    --sleep), it creates ``reached-<n>`` in ``directory`` and waits until
    ``on-<n>`` or ``open`` is there: the test acts at a point of the run
    it chose, for as long as it needs, whatever the machine's speed. As
    a fixture, the directory is a temporary one.
    """

    def __init__(self, directory=None, fast_leases=False):
        super().__init__()
        self.directory = directory
        # The child renews and judges leases as FastLeases does.
        self.fast_leases = fast_leases

    def _setUp(self):
        if self.directory is None:
            self.directory = self.useFixture(fixtures.TempDir()).path

    def argv(self):
        """NOVA_HEAL, gated."""
        return [sys.executable, '-c',
                'import sys; from healreq.tests import cli; '
                'cli.Gate(sys.argv.pop(1)).hold(); '
                + (fast_leases_code() if self.fast_leases else '')
                + 'from healreq.cmd import entry_point; '
                'sys.exit(entry_point.main())',
                self.directory]

    def _path(self, name):
        return os.path.join(self.directory, name)

    def _create(self, name):
        with open(self._path(name), 'x'):
            pass

    def reach(self, batch, process, seconds=120):
        """Return once the child holds after ``batch``; it must not end.

        The batches before are let on as they are done.
        """
        deadline = time.monotonic() + seconds
        for done in range(1, batch + 1):
            while not os.path.exists(self._path('reached-%d' % done)):
                if process.poll() is not None:
                    raise AssertionError('the run ended before batch %d '
                                         'was done' % done)
                if time.monotonic() > deadline:
                    raise AssertionError('batch %d was not done in %d s'
                                         % (done, seconds))
                time.sleep(0.01)
            if done < batch:
                self._create('on-%d' % done)

    def open(self):
        """Let the child on, through every batch from now on."""
        self._create('open')

    def hold(self):
        """In the child: hold after each batch as described above."""
        batches = itertools.count(1)

        def held():
            batch = next(batches)
            self._create('reached-%d' % batch)
            on = self._path('on-%d' % batch)
            while not (os.path.exists(on)
                       or os.path.exists(self._path('open'))):
                time.sleep(0.01)

        budget.between_batches = held
