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

"""Clocks for the tests: now as Nova stores it, and one that acts.

A run's clock (``api.run_request_specs(clock=...)``) is read at known
points of the walk; ``ActingClock`` changes the deployment at one of
them, so a test can race the run deterministically.
"""

import datetime


def utcnow():
    """Naive UTC now, as Nova stores timestamps."""
    return datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None, microsecond=0)


class ActingClock(object):
    """A run's clock that runs ``action`` once, on call ``on_call``.

    The walker reads the clock once per batch right after reading the
    batch (call 1), then for each drifted instance after re-reading it
    (call 2, right before the write) and for the write's updated_at.
    """

    def __init__(self, action, on_call):
        self.action = action
        self.on_call = on_call
        self.calls = 0
        self.fired = False

    def __call__(self):
        self.calls += 1
        if self.calls == self.on_call:
            self.action()
            self.fired = True
        return utcnow()
