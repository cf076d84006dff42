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


"""Run a command; write its wall time, CPU time, peak RSS and exit status.

Usage: ``python -I -S measure.py RESULT_FILE COMMAND [ARGS...]``.

The command may start processes of its own (the tool's cell readers,
forked from it or from multiprocessing's fork server, which it starts
with a resource tracker). So that all of them count:

* Memory: every ``SAMPLE_SECONDS`` until the command ends, the resident
  sizes (``VmRSS`` in ``/proc/<pid>/status``) of every process descended
  from this launcher are added up; the largest sum is the peak RSS of
  the whole process tree. Pages that a forked process shares with its
  parent count in both, so the sum is an upper bound of the memory the
  tree takes; a peak shorter than a sample can be missed. The launcher
  is a bare interpreter (a few MiB) and does not count itself. Every
  ``PSS_EVERY`` samples, the proportional sizes (``Pss`` in
  ``/proc/<pid>/smaps_rollup``, which share each page between the
  processes mapping it) are added up as well: their largest sum is what
  the tree takes, not more, but reading them costs the kernel a walk of
  every page table (about a millisecond per 150 MiB), so they are
  sampled less often.
* CPU time: this launcher makes itself the subreaper of the command's
  tree (``PR_SET_CHILD_SUBREAPER``), so a process whose parent ends
  first is handed to it rather than to init; once the command has ended
  it waits for every such process. Every process of the tree is then
  waited for, by its parent or by this launcher, and
  ``RUSAGE_CHILDREN`` holds the user and system time of them all, the
  command and every descendant, with all their threads.
* Wall time: from the start of the command to its end, not counting the
  wait for any process it left behind.

The largest single process's peak (``ru_maxrss``) is written too.
"""

import ctypes
import ctypes.util
import json
import os
import resource
import sys
import threading
import time

SAMPLE_SECONDS = 0.02
PSS_EVERY = 10
# How long processes left behind by the command may take to end.
STRAY_SECONDS = 30.0
_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper():
    """Adopt the orphans of the tree; False where Linux does not allow it."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c'), use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _read(path):
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except OSError:  # the process has ended
        return None


def _parent(pid):
    stat = _read('/proc/%d/stat' % pid)
    if stat is None:
        return None
    # pid (comm) state ppid ...: comm may hold spaces and parentheses.
    return int(stat[stat.rindex(b')') + 2:].split(None, 2)[1])


def _field_kib(path, name):
    found = _read(path)
    for line in (found or b'').splitlines():
        if line.startswith(name):
            return int(line.split()[1])
    return 0  # ended, or a zombie


def _rss_kib(pid):
    return _field_kib('/proc/%d/status' % pid, b'VmRSS:')


def _pss_kib(pid):
    return _field_kib('/proc/%d/smaps_rollup' % pid, b'Pss:')


class TreeSampler(object):
    """Sample the summed RSS of the processes descended from ``root``."""

    def __init__(self, root):
        self.root = root
        self.peak_kib = 0
        self.peak_pss_kib = 0
        self.samples = 0
        self._inside = {}  # pid -> whether it descends from root
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()
        return False

    def _descends(self, pid, seen):
        """Whether ``pid`` descends from the root; remembered per pid."""
        if pid in self._inside:
            return self._inside[pid]
        parent = _parent(pid)
        if parent is None or parent <= 1 or pid in seen:
            inside = False
        elif parent == self.root:
            inside = True
        else:
            seen.add(pid)
            inside = self._descends(parent, seen)
        self._inside[pid] = inside
        return inside

    def sample(self):
        pids = {int(name) for name in os.listdir('/proc') if name.isdigit()}
        # A pid that has gone may come back as another process.
        for pid in set(self._inside) - pids:
            del self._inside[pid]
        tree = [pid for pid in pids if self._descends(pid, set())]
        self.peak_kib = max(self.peak_kib, sum(map(_rss_kib, tree)))
        if self.samples % PSS_EVERY == 0:
            self.peak_pss_kib = max(self.peak_pss_kib,
                                    sum(map(_pss_kib, tree)))
        self.samples += 1

    def _run(self):
        while True:
            self.sample()
            if self._stop.wait(SAMPLE_SECONDS):
                return


def reap_strays(deadline):
    """Wait for the processes handed to this launcher; how many remain."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            if time.monotonic() > deadline:
                return len([p for p in os.listdir('/proc') if p.isdigit()
                            and _parent(int(p)) == os.getpid()])
            time.sleep(SAMPLE_SECONDS)


def main(argv):
    result_file, command = argv[0], argv[1:]
    subreaper = become_subreaper()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    # Forked first: the command does not start from a threaded process.
    with TreeSampler(os.getpid()) as sampler:
        _pid, status, usage = os.wait4(pid, 0)
        wall = time.monotonic() - started
    strays = reap_strays(time.monotonic() + STRAY_SECONDS)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(result_file, 'w') as handle:
        json.dump({'wall': wall, 'rss_kib': sampler.peak_kib,
                   'pss_kib': sampler.peak_pss_kib,
                   'process_rss_kib': children.ru_maxrss,
                   'cpu': children.ru_utime + children.ru_stime,
                   'command_cpu': usage.ru_utime + usage.ru_stime,
                   'samples': sampler.samples,
                   'sample_seconds': SAMPLE_SECONDS,
                   'pss_every': PSS_EVERY, 'subreaper': subreaper,
                   'strays': strays,
                   'code': os.waitstatus_to_exitcode(status)}, handle)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
