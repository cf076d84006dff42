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


"""Read a cell's pages in a process of its own.

Reading a page costs about as much CPU as deciding it: the driver decodes
every row in Python, and the threads of one process share one interpreter
lock. A CellReader reads the pages of one cell in a child process, on
another core, while the walk decides the pages already read. The child
runs the keyset-paginated page query and, for each page, one query per
table in the cell and in the API database (``records.read_page``), two
pages at a time on connections of its own; it hands over plain rows, and
the walk parses and decides everything.

The child is forked from the walk when the walk runs in one thread, so
it starts at once with everything imported. A walk with ``--workers``
runs threads, and a child forked from a threaded process may inherit a
lock that another thread held and wait for it forever: its children come
from multiprocessing's fork server instead, a single-threaded process
that imports this module once. Either way the child leaves alone what it
may inherit: it closes its copies of the walk's file descriptors at once
(or the walk's audit lease and database sessions would outlive the walk
in it), never collects the objects it inherited (whose finalizers would
close descriptors it reuses), opens connections of its own, writes only
to its pipe, and ends without running the interpreter's exit handlers.
It ignores the signals a terminal sends to its process group: the walk
ends it when it stops, even while one of its reads waits for a lock. It
reads at most a few pages ahead of the walk, so memory stays bounded by
the batch size.
"""

import dataclasses
import gc
import logging as std_logging
import multiprocessing
import os
import signal
import sys
import threading
import traceback

from oslo_log import log as logging

from healreq.db import cell_queries
from healreq.db import engines
from healreq import exception
from healreq.heal import readahead
from healreq.heal import records

LOG = logging.getLogger(__name__)

# Pages the child loads at once, each on a connection of its own: the
# server runs one page's queries while the child decodes another's rows.
LOADERS = 2
# How often the walk, waiting for a page, calls its stop check.
_POLL_SECONDS = 0.1
_FORK = multiprocessing.get_context('fork')
_FORK_SERVER = multiprocessing.get_context('forkserver')
_FORK_SERVER.set_forkserver_preload([__name__])
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_MAX_DESCRIPTORS = os.sysconf('SC_OPEN_MAX')


@dataclasses.dataclass(frozen=True)
class ReadSpec:
    """What the child reads: the cell's pages, for these fields.

    ``cell`` is the cell_mappings row, ``cell_url`` and ``api_url`` the
    databases' URLs (with their passwords: the child inherits them, or
    gets them through the fork server's socket, never a command line).
    """
    cell: dict
    cell_url: str
    api_url: str
    batch_size: int
    fields: tuple
    lock_wait_timeout: int


class CellReader(object):
    """Iterate over the PageRows of a cell, read in a child process.

    Use as a context manager. ``stop_check()`` is called while waiting for
    a page, and raises to stop. A cell database error is raised as
    CellDatabaseError, an API database error as ApiDatabaseError, in turn
    after the pages read before it. Leaving ends the child.
    """

    def __init__(self, spec, stop_check):
        self._spec = spec
        self._stop_check = stop_check
        self._process = None
        self._pages = None

    def __enter__(self):
        # Flushed before the fork: the child flushes its copies on exit.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass  # none, closed or gone: nothing to write twice
        context = _process_context()
        self._pages, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_serve, args=(self._spec, sender), daemon=True,
            name='healreq-read-%s' % self._spec.cell['uuid'])
        try:
            self._process.start()
        finally:
            sender.close()
        return self

    def __exit__(self, *exc_info):
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._pages.close()
        return False

    def __iter__(self):
        while True:
            while not self._pages.poll(_POLL_SECONDS):
                self._stop_check()
            try:
                kind, value = self._pages.recv()
            except EOFError:
                self._process.join()
                raise exception.CellDatabaseError(
                    'the process reading the cell ended unexpectedly (exit '
                    'code %s)' % self._process.exitcode,
                    self._spec.cell['uuid'])
            if kind == 'page':
                yield value
            elif kind == 'end':
                return
            else:
                raise _error(kind, value, self._spec.cell)


def _process_context():
    """Fork while the walk is single-threaded; else use the fork server."""
    if threading.active_count() == 1:
        return _FORK
    return _FORK_SERVER


def _error(kind, message, cell):
    if kind == 'cell':
        return exception.CellDatabaseError(message, cell['uuid'])
    if kind == 'api':
        return exception.ApiDatabaseError(message)
    LOG.error('The process reading cell %s failed: %s', cell['uuid'],
              message)
    return RuntimeError('the process reading cell %s failed: %s'
                        % (cell['uuid'], message.splitlines()[-1]))


def _serve(spec, pages):
    """The child: send ``spec``'s pages over ``pages``, then 'end'.

    Or, at the first error, its kind ('cell', 'api' or 'bug') and
    message. Nothing is logged here: what the walk must know it is told.
    """
    for number in _SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    _detach(pages)
    cell_engine = api_engine = None
    try:
        cell_engine = engines.create_engine(
            spec.cell_url, pool_size=LOADERS + 1,
            lock_wait_timeout=spec.lock_wait_timeout)
        api_engine = engines.create_engine(
            spec.api_url, pool_size=LOADERS,
            lock_wait_timeout=spec.lock_wait_timeout)
        for page in readahead.loaded(_instance_pages(cell_engine, spec),
                                     _loader(cell_engine, api_engine, spec),
                                     LOADERS):
            pages.send(('page', page))
        pages.send(('end', None))
    except exception.ApiDatabaseError as exc:
        pages.send(('api', str(exc)))
    except exception.DB_ERRORS as exc:
        pages.send(('cell', str(records.cell_error(spec.cell, exc))))
    except BrokenPipeError:
        pass  # the walk has stopped
    except Exception as exc:
        pages.send(('bug', '%s%s: %s' % (
            ''.join(traceback.format_tb(exc.__traceback__)),
            type(exc).__name__, exception.first_line(exc))))
    finally:
        for engine in (cell_engine, api_engine):
            if engine is not None:
                engine.dispose()
        pages.close()


def _detach(pages):
    """Let go of what the child inherited from the walk, but ``pages``.

    Its objects are frozen, never collected; its descriptors closed but
    the standard streams, ``pages`` and the parent sentinel; its log
    handlers dropped (nothing the child logs reaches a terminal).
    """
    gc.freeze()
    keep = {0, 1, 2, pages.fileno()}
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        keep.add(parent.sentinel)
    low = 0
    for descriptor in sorted(keep) + [_MAX_DESCRIPTORS]:
        if low < descriptor:  # an empty range would close them all
            os.closerange(low, descriptor)
        low = descriptor + 1
    std_logging.getLogger().handlers[:] = [std_logging.NullHandler()]


def _instance_pages(engine, spec):
    """Yield pages of live instance rows, by id (keyset pagination)."""
    after_id = 0
    while True:
        with engine.connect() as conn:
            page = cell_queries.get_instance_page(conn, after_id,
                                                  spec.batch_size)
        if not page:
            return
        yield page
        after_id = page[-1]['id']


def _loader(cell_engine, api_engine, spec):
    def load(page):
        with cell_engine.connect() as conn:
            return records.read_page(conn, api_engine, page, spec.fields)
    return load
