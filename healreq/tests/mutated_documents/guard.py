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

"""Calls bounded in time and memory, and how their errors read."""

import contextlib
import os
import resource
import signal
import traceback

from healreq.tests.mutated_documents import corpus

# Seconds of CPU one call may use before it counts as a hang (documents
# take milliseconds; CPU time, so that a loaded machine does not make a
# slow call a hang), and the memory a pass may add to the process before
# allocations fail (a MemoryError then counts as a crash instead of
# exhausting the machine).
DEADLINE = 1.0
MEMORY_HEADROOM = 256 << 20


class Deadline(BaseException):
    """A call ran out of time (raised from SIGPROF or SIGALRM)."""


def _expire(signum, frame):
    raise Deadline('still running when its time ran out')


@contextlib.contextmanager
def guarded_pass():
    """Bound the memory of a pass and arm the per-call deadline."""
    saved_limit = None
    try:
        with open('/proc/self/statm') as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        saved_limit = resource.getrlimit(resource.RLIMIT_AS)
    except (OSError, ValueError):
        pass
    if saved_limit is not None:
        soft, hard = saved_limit
        limit = size + MEMORY_HEADROOM
        for bound in (soft, hard):
            if bound != resource.RLIM_INFINITY:
                limit = min(limit, bound)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    previous = {number: signal.signal(number, _expire)
                for number in (signal.SIGPROF, signal.SIGALRM)}
    try:
        yield
    finally:
        for timer in (signal.ITIMER_PROF, signal.ITIMER_REAL):
            signal.setitimer(timer, 0)
        for number, handler in previous.items():
            signal.signal(number, handler)
        if saved_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, saved_limit)


def call(function, *args, seconds=DEADLINE, wall_clock=False):
    """``(result, None)`` or ``(None, exception)``, within ``seconds``.

    Seconds of the process's CPU time, or with ``wall_clock`` of real
    time (for a call that waits on databases). Only usable inside
    ``guarded_pass``.
    """
    timer = signal.ITIMER_REAL if wall_clock else signal.ITIMER_PROF
    result = error = None
    try:
        signal.setitimer(timer, seconds)
        try:
            result = function(*args)
        except (Exception, Deadline) as exc:
            error = exc
        finally:
            signal.setitimer(timer, 0)
    except Deadline as exc:
        # Expired while a long C call (which does not look at signals)
        # was ending: still a call that ran out of time.
        result, error = None, error or exc
    return result, error


def _frame_name(frame):
    filename = frame.filename
    marker = 'healreq' + os.sep
    if marker in filename:
        filename = filename[filename.rindex(marker):]
    return '%s:%d (%s)' % (filename.replace(os.sep, '/'), frame.lineno,
                           frame.name)


def location(exc):
    """The innermost healreq (non-test) frame, and the entry into healreq.

    E.g. ``healreq/objects/pci.py:89 (_alias_key) via
    healreq/heal/decisions.py:118 (evaluate)``.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    product = [f for f in frames if 'healreq' + os.sep in f.filename
               and os.sep + 'tests' + os.sep not in f.filename]
    if not product:
        return _frame_name(frames[-1])
    if len(product) == 1:
        return _frame_name(product[0])
    return '%s via %s' % (_frame_name(product[-1]), _frame_name(product[0]))


def describe_exception(exc):
    try:
        message = str(exc)
    except ValueError:
        message = '<unprintable>'
    return '%s: %s' % (type(exc).__name__,
                       corpus.preview(message, 160)[1:-1] if message else '')
