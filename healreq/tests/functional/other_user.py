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

"""Run ``nova-heal`` as another user, in a child process.

The tests run as root, which file permissions do not stop: what an
operator without root meets, or a container started under an arbitrary
UID, is only seen from a process that gave root up. The child is forked,
not executed, so that the interpreter need not be reachable by that user
(it may live under root's home directory). Run as another user, such a
test is skipped, unless HEALREQ_TEST_REQUIRE_ROOT is set, in which case
it fails: CI sets it.
"""

# What the command imports only when it needs it, imported here before
# the fork: the user the child becomes may not read the interpreter's
# library.
import multiprocessing.connection  # noqa: F401
import multiprocessing.popen_fork  # noqa: F401
import os
import pwd
import sys
import tempfile
import traceback
import unittest

from healreq.cmd import main
from healreq.tests import cli

# The user of unprivileged processes on most systems.
NOBODY = 65534

REQUIRE_ROOT = os.environ.get('HEALREQ_TEST_REQUIRE_ROOT', '') not in (
    '', '0')


def require_root(test):
    """Skip ``test`` unless it runs as root (fail it if root is required)."""
    if os.getuid() != 0:
        message = 'switching users needs root'
        if REQUIRE_ROOT:
            test.fail(message + ' (HEALREQ_TEST_REQUIRE_ROOT is set)')
        raise unittest.SkipTest(message)


def uid_without_passwd_entry():
    """A UID no passwd entry names."""
    uid = 54321
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


def open_to_all(*directories):
    """Let any user read the files of ``directories``, and list them."""
    for directory in directories:
        os.chmod(directory, 0o755)
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if os.path.isfile(path) and not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o044)


def run_as(uid, argv, environ=None):
    """Run ``nova-heal argv`` as ``uid`` (its group too, nothing more).

    ``environ`` replaces the environment. Returns a cli.Result.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            _child(uid, argv, environ, out.fileno(), err.fileno())
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        out.seek(0)
        err.seek(0)
        return cli.Result(code, out.read().decode(), err.read().decode())


def _child(uid, argv, environ, out, err):
    code = 255
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = open(1, 'w', closefd=False)
        sys.stderr = open(2, 'w', closefd=False)
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if environ is not None:
            os.environ.clear()
            os.environ.update(environ)
        code = main.main(list(argv))
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
