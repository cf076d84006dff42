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

"""Standard streams that can neither fail a command nor take its files.

The exit code is the run's outcome whatever happens to stdout and stderr:
closed when the command starts (``>&-``, ``2>&-``), a pipe whose reader
went away (EPIPE), a terminal that hung up (EIO).

* A descriptor 0, 1 or 2 closed at the start would be the number the
  next opened file gets, a database included, and the report would be
  written into it: each is reopened on /dev/null first.
* While the command runs, stdout and stderr never raise: after the
  first failed write or flush, the descriptor is pointed at /dev/null and
  what follows is dropped, so that neither the command nor Python's own
  flush at exit fails.
"""

import contextlib
import io
import os
import sys

_STREAMS = (('stdin', 0, os.O_RDONLY), ('stdout', 1, os.O_WRONLY),
            ('stderr', 2, os.O_WRONLY))


def reopen_closed():
    """Reopen closed descriptors 0, 1 and 2 on /dev/null.

    ``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` are None when their
    descriptor was closed as Python started: each gets a stream on
    /dev/null instead.
    """
    for name, fd, flags in _STREAMS:
        try:
            os.fstat(fd)
        except OSError:
            _null_onto(fd, flags)
            if getattr(sys, name) is None:
                setattr(sys, name, _null_stream(fd, flags))
        if getattr(sys, name) is None:
            # Open again since Python started: not ours to write to.
            null = os.open(os.devnull, flags | os.O_CLOEXEC)
            setattr(sys, name, _null_stream(null, flags, closefd=True))


def _null_onto(fd, flags):
    null = os.open(os.devnull, flags)
    if null != fd:
        os.dup2(null, fd)
        os.close(null)


def _null_stream(fd, flags, closefd=False):
    mode = 'r' if flags == os.O_RDONLY else 'w'
    return open(fd, mode, encoding='utf-8', errors='backslashreplace',
                closefd=closefd)


class Guarded(object):
    """A text stream whose ``write`` and ``flush`` never raise.

    The first OSError or ValueError (a closed file) marks it ``failed``
    and points its descriptor at /dev/null; later output is dropped.
    Everything else is the wrapped stream's.
    """

    def __init__(self, stream):
        self.stream = stream
        self.failed = False

    def write(self, text):
        if not self.failed:
            try:
                return self.stream.write(text)
            except UnicodeError:
                raise  # the text, not the stream
            except (OSError, ValueError):
                self._fail()
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if not self.failed:
            try:
                self.stream.flush()
            except (OSError, ValueError):
                self._fail()

    def _fail(self):
        self.failed = True
        try:
            fd = self.stream.fileno()
            _null_onto(fd, os.O_WRONLY)
        except (OSError, ValueError, AttributeError,
                io.UnsupportedOperation):
            pass  # not a file (tests capture output): nothing to redirect

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextlib.contextmanager
def guarded():
    """Guard stdout and stderr within the block; flush them at its end.

    The streams in place before are put back afterwards.
    """
    saved = sys.stdout, sys.stderr
    guards = sys.stdout, sys.stderr = Guarded(saved[0]), Guarded(saved[1])
    try:
        yield
    finally:
        for guard in guards:
            guard.flush()
        sys.stdout, sys.stderr = saved
