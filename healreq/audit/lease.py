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


"""Run leases: proof that a run is alive, released when its process dies.

A run holds its lease for its whole life. The operating system or the
database server releases it when the process or its connection dies, so
a free lease proves the run can write nothing more.

* On a MySQL/MariaDB store the lease is the named lock
  ``healreq-run-<run id>``, taken with ``GET_LOCK`` on a connection kept
  open for the run, and, where the server is a Galera node, the row
  ``run-<run id>`` of the ``leases`` table, which a thread of the run
  renews every RENEW_INTERVAL seconds. A named
  lock is seen only by the server holding it: on a Galera cluster a
  client of another node finds it free. The row is seen by every node,
  so such a client judges the lease by it: free once its last renewal is
  more than EXPIRY seconds old (by the database's clock), or gone. A
  client of the server named in the row trusts the named lock, which
  the server releases the moment the run's connection dies.
* On an SQLite file store it is an exclusive ``flock`` on the owner-only
  file ``<store file>.run-<run id>.lock``, removed when the run ends.
* An in-memory SQLite store lives in one process: its leases are kept in
  that process.
"""

import errno
import fcntl
import logging
import os
import threading

import sqlalchemy as sa

from healreq.db import engines

LOG = logging.getLogger(__name__)

NAMED_LOCK = 'mysql-lock'
FILE_LOCK = 'flock'
IN_PROCESS = 'process'

_in_process = set()

# Seconds between two renewals of a lease row, and the age past which a
# lease row that was not renewed is free: its holder died (or has lost
# the cluster, where it can write nothing either).
RENEW_INTERVAL = 5
EXPIRY = 30

# The database server's clock in microseconds, and its name: one clock
# for every client whatever its host's, and the server whose named locks
# a client sees.
_NOW_US = 'CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)'
_SERVER = "CONCAT(@@hostname, ':', @@port)"


def kind_for(engine):
    """The kind of lease the store behind ``engine`` gives its runs."""
    if engine.dialect.name == 'mysql':
        return NAMED_LOCK
    if _sqlite_path(engine) is None:
        return IN_PROCESS
    return FILE_LOCK


def acquire(engine, run_id):
    """Take run ``run_id``'s lease; return an object with ``release()``.

    Raises LeaseError if it cannot be taken (its lock file cannot be
    created, or a file is already at its place).
    """
    kind = kind_for(engine)
    if kind == NAMED_LOCK:
        return _NamedLock(engine, run_id)
    if kind == FILE_LOCK:
        return _FileLock(_lock_path(engine, run_id))
    return _InProcess(run_id)


def is_free(engine, kind, run_id):
    """Whether run ``run_id``'s lease of ``kind`` is free (the run died).

    Raises LeaseError if its lock file cannot be checked.
    """
    if kind == NAMED_LOCK:
        # On a Galera node, after the cluster's latest commits: a row the
        # run deleted on another node is gone here too.
        with engines.synced_reads(engine) as conn:
            row = lease_row(conn, _row_name(run_id))
            if row is not None and row.server != row.here:
                return row.age_us > EXPIRY * 10 ** 6
            free = conn.execute(sa.text('SELECT IS_FREE_LOCK(:name)'),
                                {'name': _lock_name(run_id)}).scalar()
        return bool(free)
    if kind == FILE_LOCK:
        return _file_lock_free(_lock_path(engine, run_id))
    return run_id not in _in_process


def lock_file_runs(engine):
    """The run ids of the lock files beside an SQLite file store.

    Empty for the other kinds of store, or if the directory cannot be
    read.
    """
    if kind_for(engine) != FILE_LOCK:
        return []
    directory, name = os.path.split(_sqlite_path(engine))
    prefix, suffix = name + '.run-', '.lock'
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [entry[len(prefix):-len(suffix)] for entry in names
            if entry.startswith(prefix) and entry.endswith(suffix)
            and len(entry) > len(prefix) + len(suffix)]


def insert_row(conn, name):
    """Insert lease row ``name``, held by ``conn``'s server, renewed now.

    Raises the database's duplicate-key error if the row exists.
    """
    conn.execute(sa.text(
        'INSERT INTO leases (name, server, renewed_us) VALUES '
        '(:name, %s, %s)' % (_SERVER, _NOW_US)), {'name': name})


def renew_row(conn, name):
    """Set lease row ``name``'s renewal to now; False if it is gone."""
    return conn.execute(sa.text(
        'UPDATE leases SET renewed_us = %s WHERE name = :name' % _NOW_US),
        {'name': name}).rowcount == 1


def delete_row(conn, name, renewed_us=None):
    """Delete lease row ``name`` (only if renewed at ``renewed_us``)."""
    query = 'DELETE FROM leases WHERE name = :name'
    if renewed_us is not None:
        query += ' AND renewed_us = :renewed_us'
    return conn.execute(sa.text(query), {
        'name': name, 'renewed_us': renewed_us}).rowcount == 1


def lease_row(conn, name):
    """Lease row ``name``; None if there is none.

    Its ``server``, ``renewed_us`` and ``age_us``, and ``here``, the
    server ``conn`` talks to.
    """
    return conn.execute(sa.text(
        'SELECT server, renewed_us, %s - renewed_us AS age_us, %s AS here '
        'FROM leases WHERE name = :name' % (_NOW_US, _SERVER)),
        {'name': name}).first()


def _lock_name(run_id):
    return 'healreq-run-%s' % run_id


def _row_name(run_id):
    return 'run-%s' % run_id


def _sqlite_path(engine):
    path = engine.url.database
    if not path or path == ':memory:':
        return None
    return os.path.abspath(path)


def _lock_path(engine, run_id):
    return '%s.run-%s.lock' % (_sqlite_path(engine), run_id)


class LeaseError(Exception):
    """A run's lease could not be taken or checked.

    Not a HealreqError: the store turns it into the AuditStoreError that
    ends the command (exit 127), naming the store, which only it knows.
    """


def _file_error(doing, path, exc):
    """The LeaseError of OSError ``exc`` raised ``doing`` lock file ``path``.

    A symbolic link is never followed (O_NOFOLLOW): it is named as such.
    """
    reason = exc.strerror or str(exc)
    if os.path.islink(path):
        reason = 'it is a symbolic link'
    return LeaseError('cannot %s the lock file %s: %s'
                      % (doing, path, reason))


class _NamedLock(object):

    def __init__(self, engine, run_id):
        self._name = _lock_name(run_id)
        self._row = _row_name(run_id)
        self._conn = engine.connect()
        try:
            with self._conn.begin():
                taken = self._conn.execute(
                    sa.text('SELECT GET_LOCK(:name, 0)'),
                    {'name': self._name}).scalar()
                # Only another node of a cluster needs the row: on a
                # plain server every client sees the named lock, and no
                # thread runs beside the run (its reader is then forked).
                clustered = taken == 1 and engines.is_galera_node(
                    self._conn)
            if clustered:
                with self._conn.begin():
                    insert_row(self._conn, self._row)
        except BaseException:
            self._conn.invalidate()
            self._conn.close()
            raise
        if taken != 1:
            self._conn.close()
            raise LeaseError('lock %s is held elsewhere' % self._name)
        self._renewer = Renewer(engine, self._row) if clustered else None

    def release(self):
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        if self._renewer is not None:
            self._renewer.stop()
        try:
            if self._renewer is not None:
                with conn.begin():
                    delete_row(conn, self._row)
            with conn.begin():
                conn.execute(sa.text('SELECT RELEASE_LOCK(:name)'),
                             {'name': self._name})
        except Exception:
            # A connection in doubt must not go back to the pool holding
            # the lock: closing it for good releases the lock. The row, if
            # left, expires.
            conn.invalidate()
        finally:
            conn.close()


class Renewer(object):
    """A daemon thread renewing lease row ``name`` until ``stop()``."""

    def __init__(self, engine, name, interval=None):
        self._engine = engine
        self._name = name
        self._interval = interval or RENEW_INTERVAL
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name='lease-%s' % name, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stopped.wait(self._interval):
            try:
                with self._engine.begin() as conn:
                    renew_row(conn, self._name)
            except Exception as exc:
                # The run's own statements fail too and end it; a lease
                # left unrenewed expires, as it should for a run cut off.
                LOG.debug('cannot renew lease %s: %s', self._name, exc)

    def stop(self):
        self._stopped.set()
        # Not forever: a renewal may hang on a server that went away.
        self._thread.join(timeout=self._interval)


class _FileLock(object):

    def __init__(self, path):
        self._path = path
        # Created here, exclusively, never through a symbolic link.
        try:
            self._fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR
                               | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise _file_error('create', path, exc) from exc
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException as exc:
            os.close(self._fd)
            if isinstance(exc, OSError):
                raise _file_error('lock', path, exc) from exc
            raise

    def release(self):
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Removed while still locked: anyone who opened it before
            # finds it free only once this run can write nothing more.
            os.unlink(self._path)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)


def _file_lock_free(path):
    """Whether nobody holds the lock file; removes it if so."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise _file_error('check', path, exc) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return False
            raise _file_error('check', path, exc) from exc
        # The run died without removing its file (SIGKILL): its id is
        # never used again, so the file can go.
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return True
    finally:
        os.close(fd)


class _InProcess(object):

    def __init__(self, run_id):
        self._run_id = run_id
        _in_process.add(run_id)

    def release(self):
        _in_process.discard(self._run_id)
