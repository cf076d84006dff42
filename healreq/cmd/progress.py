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


"""Progress of a long run: instances done out of the total, rate, ETA.

The walks tell a RunProgress each cell's total before they start
(``planned``) and each cell's counts after every batch (``advanced``);
cells walked by --workers report from their own threads. It keeps the
whole run's figures and shows them one of two ways:

* on a terminal, one line for the whole run, rewritten in place, with
  the cells folded in (``TerminalLine``);
* anywhere else (cron, a container's log, ``| tee``), a log line every
  ``[healreq]/progress_interval`` seconds through the tool's logging,
  with each cell's figures (``LogLines``).
"""

import dataclasses
import shutil
import threading
import time

from oslo_log import log as logging

from healreq.cmd import visible

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class CellCounts:
    """One cell's figures: instances done, its total, findings so far."""
    name: str
    total: object = None  # None: unknown (its count could not be read)
    done: int = 0
    found: int = 0
    started: bool = False

    def finished(self):
        return self.total is not None and self.done >= self.total


@dataclasses.dataclass
class Snapshot:
    """The whole run's figures at one moment (see RunProgress)."""
    done: int
    total: object  # None: unknown
    found: int
    rate: float
    cells: list  # of CellCounts, in walk order

    def eta_seconds(self):
        """Seconds left at the current rate, or None if unknown."""
        if self.total is None or not self.rate:
            return None
        return max(0.0, (self.total - self.done) / self.rate)


class RunProgress(object):
    """The figures of one run, shown by ``show(snapshot)`` on each change.

    ``found_word`` names the findings ('drifted', 'mismatched');
    ``limit`` caps the total (--max-count).
    """

    def __init__(self, show, found_word, limit=None, clock=time.monotonic):
        self._show = show
        self.found_word = found_word
        self._limit = limit
        self._clock = clock
        self._started = None
        self._cells = {}
        self._lock = threading.Lock()

    def planned(self, cell, total):
        """Announce ``cell`` (a cell mapping) and its live instances."""
        with self._lock:
            if self._started is None:
                self._started = self._clock()
            self._cells[cell['uuid']] = CellCounts(
                name=cell['name'] or cell['uuid'], total=total)

    def advanced(self, cell, done, found):
        """``cell`` has checked ``done`` instances and found ``found``."""
        with self._lock:
            counts = self._cells.setdefault(
                cell['uuid'], CellCounts(name=cell['name'] or cell['uuid']))
            if self._started is None:
                self._started = self._clock()
            counts.started = True
            counts.done, counts.found = done, found
            self._show(self._snapshot())

    def _snapshot(self):
        cells = list(self._cells.values())
        done = sum(c.done for c in cells)
        total = None
        if all(c.total is not None for c in cells):
            total = sum(c.total for c in cells)
            if self._limit is not None:
                total = min(total, self._limit)
        elapsed = self._clock() - self._started
        return Snapshot(done=done, total=total,
                        found=sum(c.found for c in cells),
                        rate=done / elapsed if elapsed > 0 else 0.0,
                        cells=cells)

    def close(self):
        """End what the display shows (a terminal's line)."""
        close = getattr(self._show, 'close', None)
        if close is not None:
            close()


def duration(seconds):
    """``seconds`` as H:MM:SS, or '?' if None."""
    if seconds is None:
        return '?'
    minutes, seconds = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return '%d:%02d:%02d' % (hours, minutes, seconds)


def summary(snapshot, found_word):
    """The run-wide part of a progress line."""
    if snapshot.total is None:
        done = '%d/? instances' % snapshot.done
    else:
        percent = (100 * snapshot.done // snapshot.total
                   if snapshot.total else 100)
        done = '%d/%d instances (%d%%)' % (snapshot.done, snapshot.total,
                                           percent)
    return '%s, %.0f/s, ETA %s, %d %s' % (
        done, snapshot.rate, duration(snapshot.eta_seconds()),
        snapshot.found, found_word)


def cell_figures(cells):
    """Each cell's done/total, in walk order."""
    return ', '.join(
        '%s %d/%s' % (visible.escape(c.name), c.done,
                      '?' if c.total is None else c.total) for c in cells)


class TerminalLine(object):
    """Rewrites one status line for the whole run on ``stream``."""

    def __init__(self, stream, found_word, width=None):
        self.stream = stream
        self.found_word = found_word
        self._width = width
        self._open = False

    def __call__(self, snapshot):
        finished = sum(1 for c in snapshot.cells if c.finished())
        line = '%s; cells %d/%d done' % (
            summary(snapshot, self.found_word), finished, len(snapshot.cells))
        running = [c for c in snapshot.cells
                   if c.started and not c.finished()]
        if running:
            line += ' (%s)' % cell_figures(running)
        width = self._width or shutil.get_terminal_size().columns
        self.stream.write('\r\x1b[K' + line[:max(width - 1, 20)])
        self.stream.flush()
        self._open = True

    def close(self):
        """End the status line so that later output starts afresh."""
        if self._open:
            self.stream.write('\n')
            self.stream.flush()
            self._open = False


class LogLines(object):
    """Logs the whole run's and each cell's figures every ``interval`` s.

    The first line comes ``interval`` seconds after the run starts: a run
    shorter than that logs none.
    """

    def __init__(self, interval, found_word, clock=time.monotonic):
        self.interval = interval
        self.found_word = found_word
        self._clock = clock
        self._next = clock() + interval

    def __call__(self, snapshot):
        now = self._clock()
        if now < self._next:
            return
        self._next = now + self.interval
        LOG.info('Progress: %s; %s', summary(snapshot, self.found_word),
                 cell_figures(snapshot.cells))


def for_command(conf, stream, found_word, limit=None):
    """The RunProgress of a command, or None (--quiet, or no interval).

    On a terminal ``stream`` gets the line; elsewhere the progress is
    logged every ``[healreq]/progress_interval`` seconds (0: never).
    """
    if getattr(conf.command, 'quiet', False):
        return None
    if stream.isatty():
        return RunProgress(TerminalLine(stream, found_word), found_word,
                           limit)
    interval = conf.healreq.progress_interval
    if not interval:
        return None
    # The tool logs warnings only, unless --verbose: progress lines are
    # asked for by the interval itself.
    LOG.logger.setLevel(logging.INFO)
    return RunProgress(LogLines(interval, found_word), found_word, limit)
