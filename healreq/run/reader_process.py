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


"""Read the cells' pages in a process of their own.

Reading a page costs about as much CPU as deciding it: the driver decodes
every row in Python, and the threads of one process share one interpreter
lock. A CellsReader reads the pages of a walk's cells in a child process,
on another core, while the walk decides the pages already read. The child
runs each cell's keyset-paginated page query and, for each page, one
query per table in the cell and in the API database
(``records.read_page``), two pages at a time on connections of its own;
it hands over plain rows, and the walk parses and decides everything. It
reads the cells one after the other through the same pipeline, so the
next cell's first pages are read while the walk decides the last of the
one before. A CellReader reads one cell (a walk with ``--workers`` has
one per cell).

The child is forked from the walk when the walk runs in one thread (or
beside it only the threads that renew the run's lease, kept from
renewing while it forks: lease.quiesced), so it starts at once with
everything imported; a walk forks it before it
learns the release, while its memory is still small, and the child reads
the first pages meanwhile. A walk with ``--workers``
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

import contextlib
import dataclasses
import gc
import logging as std_logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import traceback

from oslo_log import log as logging

from healreq.audit import lease
from healreq.db import cell_queries
from healreq.db import engines
from healreq import exception
from healreq.run import read_threads
from healreq.run import records

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
    answer_timeout: int = None


class CellsReader(object):
    """The PageRows of several cells, read in order by one child process.

    Use as a context manager; ``pages(cell_uuid)`` iterates over a cell's
    pages. The child reads the cells of ``specs`` one after the other,
    loading the next cell's first pages while it hands over the last of
    the one before, so the walk finds them read when it gets there.
    The walk asks for the cells in the order of ``specs`` and may pass
    over some (what the child read of them is dropped); it cannot go
    back. ``stop_check()`` is called while waiting for a page, and
    raises to stop. A cell database error is raised as CellDatabaseError
    by that cell's pages, and the child goes on with the next cell; an
    API database error is raised as ApiDatabaseError, and ends the
    child. Leaving ends the child.
    """

    def __init__(self, specs, stop_check):
        self._specs = tuple(specs)
        self._stop_check = stop_check
        self._process = None
        self._pipe = None
        self._ended = None  # (kind, message) that ended the child

    def __enter__(self):
        # Flushed before the fork: the child flushes its copies on exit.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):
                pass  # none, closed or gone: nothing to write twice
        context, quiet = _process_context()
        self._pipe, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_serve, args=(self._specs, sender), daemon=True,
            name='healreq-read-%s' % self._specs[0].cell['uuid']
            if len(self._specs) == 1 else 'healreq-read')
        try:
            with quiet():
                self._process.start()
        finally:
            sender.close()
        return self

    def __exit__(self, *exc_info):
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._pipe.close()
        return False

    def reads(self, cell_uuid):
        """Whether the child reads the pages of cell ``cell_uuid``."""
        return any(spec.cell['uuid'] == cell_uuid for spec in self._specs)

    def pages(self, cell_uuid):
        """Iterate over the PageRows of cell ``cell_uuid``."""
        cell = next(spec.cell for spec in self._specs
                    if spec.cell['uuid'] == cell_uuid)
        while True:
            if self._ended is not None:
                raise _error(*self._ended, cell=cell)
            uuid, kind, value = self._receive()
            if uuid != cell_uuid and kind in ('page', 'end', 'cell'):
                continue  # of a cell the walk passed over
            if kind == 'page':
                yield value
            elif kind == 'end':
                return
            elif kind == 'cell':
                raise _error(kind, value, cell)
            else:
                self._ended = (kind, value)

    def _receive(self):
        """The child's next message; ('gone', exit code) if it ended."""
        while not self._pipe.poll(_POLL_SECONDS):
            self._stop_check()
        try:
            return pickle.loads(self._pipe.recv_bytes())
        except EOFError:
            self._process.join()
            return None, 'gone', self._process.exitcode


class CellReader(CellsReader):
    """Iterate over the PageRows of one cell, read in a child process.

    Use as a context manager (see CellsReader).
    """

    def __init__(self, spec, stop_check):
        super().__init__([spec], stop_check)

    def __iter__(self):
        return self.pages(self._specs[0].cell['uuid'])


def _process_context():
    """``(context, quiet)``: how to start the child, and around what.

    Fork while the walk's only other threads are lease renewers, kept
    from renewing meanwhile (lease.quiesced); else use the fork server.
    """
    others = set(threading.enumerate()) - {threading.current_thread()}
    if not others:
        return _FORK, contextlib.nullcontext
    if others <= lease.renewer_threads():
        return _FORK, lease.quiesced
    return _FORK_SERVER, contextlib.nullcontext


def _error(kind, message, cell):
    """The exception the walk raises for the child's message of ``kind``.

    ``cell`` is the cell whose pages the walk asked for.
    """
    if kind == 'cell':
        return exception.CellDatabaseError(message, cell['uuid'])
    if kind == 'gone':
        return exception.CellDatabaseError(
            'the process reading the cell ended unexpectedly (exit code '
            '%s)' % message, cell['uuid'])
    if kind == 'api':
        return exception.ApiDatabaseError(message)
    LOG.error('The process reading cell %s failed: %s', cell['uuid'],
              message)
    return RuntimeError('the process reading cell %s failed: %s'
                        % (cell['uuid'], message.splitlines()[-1]))


def _serve(specs, pipe):
    """The child: send the pages of ``specs``' cells over ``pipe``.

    Each message is ``(cell uuid, kind, value)``: each page of a cell
    ('page'), then 'end'; or, at a cell database error, 'cell' and its
    message. The cells are read in turn through one pipeline of loads,
    so that the next cell's first pages are read while the last of the
    one before are handed over. An API database error ('api') or any
    other ('bug') ends the child. Nothing is logged here: what the walk
    must know it is told.
    """
    for number in _SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    _detach(pipe)
    cells = None
    uuid = None
    try:
        cells = _CellEngines(specs)
        for spec, kind, message in read_threads.loaded(
                _reads(specs, cells), cells.load, LOADERS):
            uuid = spec.cell['uuid']
            if kind == 'end':
                cells.dispose(spec)
            pipe.send_bytes(message)
    except exception.ApiDatabaseError as exc:
        pipe.send_bytes(_message(uuid, 'api', str(exc)))
    except BrokenPipeError:
        pass  # the walk has stopped
    except Exception as exc:
        pipe.send_bytes(_message(uuid, 'bug', '%s%s: %s' % (
            ''.join(traceback.format_tb(exc.__traceback__)),
            type(exc).__name__, exception.first_line(exc))))
    finally:
        if cells is not None:
            cells.close()
        pipe.close()


def _reads(specs, cells):
    """``(spec, kind, rows)`` to load, cell by cell.

    A page of a cell's live instance rows ('page', with the id it
    follows), read by id (keyset pagination), until there are none left,
    then 'end'. A cell whose
    page query fails gets 'cell' and its error instead of its next page;
    one whose load failed gets no more pages.
    """
    for spec in specs:
        after_id = 0
        while not cells.failed(spec):
            try:
                with cells.engine(spec).connect() as conn:
                    page = cell_queries.get_instance_page(
                        conn, after_id, spec.batch_size)
            except exception.DB_ERRORS as exc:
                yield spec, 'cell', cells.fail(spec, exc)
                break
            if not page:
                break
            yield spec, 'page', (after_id, page)
            after_id = page[-1]['id']
        yield spec, 'end', None


class _CellEngines(object):
    """The child's engines, and what loads each cell's pages."""

    def __init__(self, specs):
        # Connections are opened when first used.
        self._api = engines.create_engine(
            specs[0].api_url, pool_size=LOADERS,
            lock_wait_timeout=specs[0].lock_wait_timeout,
            answer_timeout=specs[0].answer_timeout)
        self._cells = {}
        self._failed = set()

    def engine(self, spec):
        uuid = spec.cell['uuid']
        if uuid not in self._cells:
            self._cells[uuid] = engines.create_engine(
                spec.cell_url, pool_size=LOADERS + 1,
                lock_wait_timeout=spec.lock_wait_timeout,
                answer_timeout=spec.answer_timeout)
        return self._cells[uuid]

    def load(self, read):
        """A read of ``_reads`` loaded: ``(spec, kind, message)``.

        The message is what to send, serialised: a page's instance rows
        become its PageRows; a cell database error 'cell' and its
        message. Serialised at once, so that a page waiting for its turn
        takes the room of its bytes, not of its rows.
        """
        spec, kind, value = read
        if kind == 'page':
            after_id, page = value
            try:
                with self.engine(spec).connect() as conn:
                    value = records.read_page(conn, self._api, page,
                                              spec.fields, after_id)
            except exception.DB_ERRORS as exc:
                kind, value = 'cell', self.fail(spec, exc)
        return spec, kind, _message(spec.cell['uuid'], kind, value)

    def fail(self, spec, exc):
        """The message of cell database error ``exc``; no more reads."""
        self._failed.add(spec.cell['uuid'])
        return str(records.cell_error(spec.cell, exc))

    def failed(self, spec):
        return spec.cell['uuid'] in self._failed

    def dispose(self, spec):
        engine = self._cells.pop(spec.cell['uuid'], None)
        if engine is not None:
            engine.dispose()

    def close(self):
        for engine in [self._api] + list(self._cells.values()):
            engine.dispose()


def _message(uuid, kind, value):
    """A message of the child, as the walk receives it (see _serve)."""
    return pickle.dumps((uuid, kind, value), pickle.HIGHEST_PROTOCOL)


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
