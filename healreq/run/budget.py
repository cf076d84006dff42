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


"""How much a run may do, and how fast: --max-count, --sleep, --max-rate.

One Budget serves every cell worker of a run, so it is thread-safe.
"""

import threading
import time

# Called after each batch's pause, in the thread that walks the cell
# (tests use it to hold a run between two batches for as long as they
# need).
between_batches = None


class Budget(object):
    """The heals a run may still make, and its pace.

    ``max_count`` bounds the heals (or would-be heals, in a dry run);
    ``sleep`` is the pause after each batch and ``max_rate`` the most
    instances checked per second.
    """

    def __init__(self, max_count=None, sleep=0.0, max_rate=None,
                 sleep_function=time.sleep, monotonic=time.monotonic):
        self.max_count = max_count
        self.sleep = sleep
        self.max_rate = max_rate
        self._sleep = sleep_function
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._heals = 0
        self._checked = 0
        self._started = monotonic()

    def start(self):
        """Start the clock of --max-rate (when the walk begins)."""
        self._started = self._monotonic()

    def used_up(self):
        """Whether --max-count heals were made (or would be)."""
        with self._lock:
            return self.max_count is not None and self._heals >= self.max_count

    def take(self):
        """Reserve one heal; False when none is left."""
        with self._lock:
            if self.max_count is not None and self._heals >= self.max_count:
                return False
            self._heals += 1
            return True

    def give_back(self):
        """Return the reservation of a heal that was not made."""
        with self._lock:
            self._heals -= 1

    def checked(self, count):
        """Count ``count`` more instances checked (for --max-rate)."""
        with self._lock:
            self._checked += count

    def pause(self):
        """Pause after a batch: --sleep, then down to --max-rate."""
        if self.sleep:
            self._sleep(self.sleep)
        if self.max_rate:
            with self._lock:
                checked = self._checked
            ahead = (checked / self.max_rate
                     - (self._monotonic() - self._started))
            if ahead > 0:
                self._sleep(ahead)
        if between_batches is not None:
            between_batches()
