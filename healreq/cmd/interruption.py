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


"""SIGHUP, SIGINT and SIGTERM: stop the command cleanly.

By default a signal raises ``exception.Interrupted`` at once. While a
heal walks the cells (``deferred``), the first signal only asks the run
to stop after the current batch, so that what was done is reported and
the audit run is closed; a second signal stops at once.

SIGHUP is what a command gets when its terminal or ssh session goes away:
it is handled like SIGTERM (the report may then be lost with the
terminal, see ``streams``; the audit run and the metrics are not). A
signal that was ignored when the command started (``nohup``) stays
ignored.
"""

import contextlib
import signal
import threading

from oslo_log import log as logging

from healreq import exception

LOG = logging.getLogger(__name__)

_SIGNALS = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)


class _State(object):
    deferring = False
    received = None  # (number, name) of the signal that asked to stop


_state = _State()


def _name(number):
    return signal.Signals(number).name


def _handler(number, frame):
    if _state.deferring and _state.received is None:
        _state.received = (number, _name(number))
        LOG.warning('%s received: stopping after the current batch (send '
                    'it again to stop at once)', _name(number))
        return
    raise exception.Interrupted(number, _name(number))


@contextlib.contextmanager
def handled():
    """Handle the signals as described above within the block.

    The previous handlers are put back afterwards. Outside the main
    thread (where signals cannot be handled) nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.deferring = False
    _state.received = None
    previous = {number: signal.signal(number, _handler)
                for number in _SIGNALS
                if signal.getsignal(number) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def check():
    """Raise Interrupted if a deferred signal asked the run to stop."""
    if _state.received is not None:
        raise exception.Interrupted(*_state.received)


@contextlib.contextmanager
def deferred():
    """Within the block the first signal only sets a flag; see check()."""
    _state.deferring = True
    try:
        yield
    finally:
        _state.deferring = False
