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
import signal
import subprocess
import sys

from healreq.cmd import main


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


# nova-heal as a child process, run by the interpreter running the tests.
NOVA_HEAL = [sys.executable, '-c',
             'import sys; from healreq.cmd import main; sys.exit(main.main())']

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
