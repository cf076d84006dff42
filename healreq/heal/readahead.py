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
"""

import collections
from concurrent import futures
import queue
import threading

_END = object()
# How often a blocked reader looks whether the caller has gone.
_POLL_SECONDS = 0.1


class _Failure(object):
    def __init__(self, exc):
        self.exc = exc


class ReadAhead(object):
    """Iterate over ``batches`` (an iterable) one item ahead, in a thread.

    Use as a context manager; leaving it early stops the reader, which
    then reads at most the item it was reading. An exception raised by
    the iterable is raised again by the iteration, in the caller.
    """

    def __init__(self, batches, on_wait=None):
        """Read ``batches`` ahead, once entered.

        ``on_wait()``, if given, is called whenever the reader, one item
        ahead, waits for the caller to take the next one.
        """
        self._batches = batches
        self._on_wait = on_wait
        self._queue = queue.Queue(maxsize=1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True,
                                        name='healreq-read-ahead')

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc_info):
        self._stop.set()
        # Unblock a reader waiting for room, then wait for it to finish.
        while self._thread.is_alive():
            try:
                self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(_POLL_SECONDS)
        return False

    def __iter__(self):
        while True:
            item = self._queue.get()
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
        try:
            for item in self._batches:
                if not self._put(item):
                    return
        except Exception as exc:  # handed over to the caller
            self._put(_Failure(exc))
            return
        self._put(_END)


def loaded(pages, load, loaders):
    """Yield ``load(page)`` for each of ``pages``, in order.

    Up to ``loaders`` pages are loaded at once, each in a thread of its
    own; the next page is taken only when one of them is yielded, so at
    most ``loaders`` loaded pages exist besides the one yielded last. An
    exception of ``load`` is raised when its page's turn comes; closing
    the generator waits for the loads in progress.
    """
    pending = collections.deque()
    with futures.ThreadPoolExecutor(
            loaders, thread_name_prefix='healreq-load') as pool:
        try:
            for page in pages:
                pending.append(pool.submit(load, page))
                if len(pending) == loaders:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
