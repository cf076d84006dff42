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


"""Read the next batches while the current one is being processed.

Most of a batch's wall time outside Python is spent waiting for the
database to run its queries. A reader thread fetching batch N+1 while
the caller evaluates batch N hides that wait; it holds at most one batch
besides the caller's, so memory stays bounded by the batch size.
``loaded`` goes further: it loads several batches at once, each on its
own connection, so that the server runs one batch's queries while
Python decodes another's rows.

The caller never waits for a database in a way it cannot leave: while it
waits, it calls ``stop_check`` (which raises to stop the run, e.g. on a
signal), and a reader blocked by a lock another session holds is left
behind, a daemon thread whose result nobody takes. Nothing is written in
these threads, so none of them holds a write that must finish.
"""

import collections
from concurrent import futures
import queue
import threading

_END = object()
# How often a waiting caller calls stop_check, and a blocked reader looks
# whether the caller has gone.
_POLL_SECONDS = 0.1


def _no_stop():
    pass


class _Failure(object):
    def __init__(self, exc):
        self.exc = exc


class ReadAhead(object):
    """Iterate over ``batches`` (an iterable) one item ahead, in a thread.

    Use as a context manager; leaving it early stops the reader, which
    then reads at most the item it was reading. An exception raised by
    the iterable is raised again by the iteration, in the caller.
    """

    def __init__(self, batches, on_wait=None, stop_check=_no_stop):
        """Read ``batches`` ahead, once entered.

        ``on_wait()``, if given, is called whenever the reader, one item
        ahead, waits for the caller to take the next one;
        ``stop_check()`` whenever the caller waits for the reader.
        """
        self._batches = batches
        self._on_wait = on_wait
        self._stop_check = stop_check
        self._queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        name='healreq-read-ahead')

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._stop.set()
        # Unblock a reader waiting for room, then wait for it to finish,
        # unless the caller leaves on an exception: a reader blocked by a
        # lock may not finish for a long time, and its item is not needed.
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            if exc_type is not None:
                break
            self._thread.join(_POLL_SECONDS)
        return False

    def __iter__(self):
        while True:
            try:
                item = self._queue.get(timeout=_POLL_SECONDS)
            except queue.Empty:
                self._stop_check()
                continue
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.exc
            yield item

    def _put(self, item):
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                if self._on_wait is not None:
                    self._on_wait()
        return False

    def _read(self):
        batches = iter(self._batches)
        try:
            for item in batches:
                if not self._put(item):
                    return
        except Exception as exc:  # handed over to the caller
            self._put(_Failure(exc))
            return
        finally:
            # A generator left unfinished is closed here, in this thread,
            # not later by the garbage collector in whichever thread runs.
            getattr(batches, 'close', lambda: None)()
        self._put(_END)


def _in_daemon_thread(call, *args):
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
    future = _in_daemon_thread(call)
    while True:
        try:
            return future.result(timeout=_POLL_SECONDS)
        except futures.TimeoutError:
            stop_check()


def loaded(pages, load, loaders):
    """Yield ``load(page)`` for each of ``pages``, in order.

    Up to ``loaders`` pages are loaded at once, each in a thread of its
    own; the next page is taken only when one of them is yielded, so at
    most ``loaders`` loaded pages exist besides the one yielded last. An
    exception of ``load`` is raised when its page's turn comes; closing
    the generator cancels the loads not started and leaves those under
    way to finish on their own (their results are dropped).
    """
    pending = collections.deque()
    try:
        for page in pages:
            pending.append(_in_daemon_thread(load, page))
            if len(pending) == loaders:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
