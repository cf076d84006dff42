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


"""Reads in threads: several pages at once, or one that may block.

``loaded`` loads several pages at once, each on its own connection, so
that the server runs one page's queries while Python decodes another's
rows. ``interruptible`` runs one read in a thread of its own while the
caller calls ``stop_check`` (which raises to stop the run, e.g. on a
signal): a read blocked by a lock another session holds is left behind,
a daemon thread whose result nobody takes. Nothing is written in these
threads, so none of them holds a write that must finish.
"""

import collections
from concurrent import futures
import threading

# How often a waiting caller calls stop_check.
_POLL_SECONDS = 0.1


def _no_stop():
    pass


def started(call, *args):
    """A Future of ``call(*args)``, run in a daemon thread of its own.

    Unlike a ThreadPoolExecutor's threads, which the interpreter joins at
    exit, a daemon thread blocked by a lock does not keep a stopped
    command from ending.
    """
    future = futures.Future()

    def run():
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(call(*args))
        except BaseException as exc:
            future.set_exception(exc)
    threading.Thread(target=run, daemon=True, name='healreq-load').start()
    return future


def interruptible(call, stop_check=_no_stop):
    """``call()``, run in a daemon thread; ``stop_check()`` while waiting.

    When ``stop_check`` raises, the caller goes on with the exception and
    the call is left to finish, or not, on its own.
    """
    return waited(started(call), stop_check)


def waited(future, stop_check=_no_stop):
    """The result of ``future``; ``stop_check()`` while waiting for it.

    As ``interruptible`` does, for a call started earlier.
    """
    while True:
        try:
            return future.result(timeout=_POLL_SECONDS)
        except futures.TimeoutError:
            stop_check()


def loaded(pages, load, loaders, stop_check=_no_stop):
    """Yield ``load(page)`` for each of ``pages``, in order.

    Up to ``loaders`` pages are loaded at once, each in a thread of its
    own; the next page is taken only when one of them is yielded, so at
    most ``loaders`` loaded pages exist besides the one yielded last. The
    first page is loaded alone: the caller has nothing else to work on
    meanwhile, and loads sharing the process would make it wait longer.
    An exception of ``load`` is raised when its page's turn comes; closing
    the generator cancels the loads not started and leaves those under
    way to finish on their own (their results are dropped). A load is
    waited for as ``waited`` waits, calling ``stop_check``.
    """
    pending = collections.deque()
    first = True
    try:
        for page in pages:
            pending.append(started(load, page))
            if first or len(pending) == loaders:
                first = False
                yield waited(pending.popleft(), stop_check)
        while pending:
            yield waited(pending.popleft(), stop_check)
    finally:
        for future in pending:
            future.cancel()
