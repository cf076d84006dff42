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


"""Progress on a terminal: per cell, instances done / total, rate, ETA."""

import threading
import time

from healreq.cmd import visible


class Progress(object):
    """Rewrites one status line on ``stream`` (a terminal) per batch."""

    def __init__(self, stream, clock=time.monotonic):
        self.stream = stream
        self._clock = clock
        self._started = {}
        self._open = False
        # Cells processed by parallel workers report from several threads.
        self._lock = threading.Lock()

    def __call__(self, cell, report, total):
        with self._lock:
            self._show(cell, report, total)

    def _show(self, cell, report, total):
        now = self._clock()
        started = self._started.setdefault(cell['uuid'], now)
        done = report.checked
        elapsed = now - started
        rate = done / elapsed if elapsed > 0 else 0.0
        if rate and total:
            eta = '%ds' % max(0, (total - done) / rate)
        else:
            eta = '-'
        self.stream.write('\r\x1b[K%s: %d/%s instances, %.0f/s, ETA %s' % (
            visible.escape(cell['name'] or cell['uuid']), done,
            '?' if total is None else total, rate, eta))
        self._open = True
        if total is not None and done >= total:
            self.close()
        self.stream.flush()

    def close(self):
        """End the status line so that later output starts afresh."""
        if self._open:
            self.stream.write('\n')
            self.stream.flush()
            self._open = False
