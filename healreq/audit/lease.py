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

A run holds its lease for its whole life. A free lease proves the run
can write nothing more; a run whose lease may be free writes nothing.

* On a MySQL/MariaDB store the lease is the row ``run-<run id>`` of the
  ``leases`` table, which a thread of the run renews every
  RENEW_INTERVAL seconds through the store's pool, whichever server and
  connection a proxy gives it. Every node of a Galera cluster and every
  client sees the row: the lease is free once its last renewal is more
  than EXPIRY seconds old by the database's clock, or once the row is
  gone. No connection holds it, so a proxy or a server that closes an
  idle connection takes nothing from the run. The run itself writes
  only while its last renewal is recent (``check``): a run whose
  renewals failed for WRITABLE_FOR seconds, or whose row was deleted
  because another invocation judged it dead, stops before its next
  write.
* On an SQLite file store it is an exclusive ``flock`` on the owner-only
  file ``<store file>.run-<run id>.lock``, removed when the run ends.
* An in-memory SQLite store lives in one process: its leases are kept in
  that process.

Runs recorded by earlier releases on a MySQL store held the named lock
``healreq-run-<run id>`` (kind NAMED_LOCK); they are judged as then.
"""

import contextlib
import errno
import fcntl
import logging
import os
import threading
import time
import weakref

from oslo_db import exception as db_exc
import sqlalchemy as sa

from healreq.db import engines

LOG = logging.getLogger(__name__)

ROW_LEASE = 'mysql-row'
NAMED_LOCK = 'mysql-lock'
FILE_LOCK = 'flock'
IN_PROCESS = 'process'

_in_process = set()

# Seconds between two renewals of a lease row, and the age past which a
# lease row that was not renewed is free: its holder died (or has lost
# the cluster, where it can write nothing either).
RENEW_INTERVAL = 5
EXPIRY = 30
# How long after its last renewal a run still writes: half the expiry,
# so that a write begun then (its statements bounded by the lock wait)
# ends long before anyone may judge the run dead.
WRITABLE_FOR = EXPIRY / 2

# The database server's clock in microseconds, and its name: one clock
# for every client whatever its host's, and the server whose named locks
# a client sees.
_NOW_US = 'CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS SIGNED)'
_SERVER = "CONCAT(@@hostname, ':', @@port)"


def kind_for(engine):
    """The kind of lease the store behind ``engine`` gives its runs."""
    if engine.dialect.name == 'mysql':
        return ROW_LEASE
    if _sqlite_path(engine) is None:
        return IN_PROCESS
    return FILE_LOCK


def acquire(engine, run_id):
    """Take run ``run_id``'s lease; return it.

    It has ``check()``, which raises LeaseLost unless the run may still
    write, and ``release()``. Raises LeaseError if it cannot be taken
    (its lock file cannot be created, or a file is already at its place).
    """
    kind = kind_for(engine)
    if kind == ROW_LEASE:
        return _RowLease(engine, run_id)
    if kind == FILE_LOCK:
        return _FileLock(_lock_path(engine, run_id))
    return _InProcess(run_id)


def is_free(engine, kind, run_id):
    """Whether run ``run_id``'s lease of ``kind`` is free (the run died).

    Raises LeaseError if its lock file cannot be checked.
    """
    if kind == ROW_LEASE:
        # On a Galera node, after the cluster's latest commits: a row the
        # run deleted or renewed on another node is seen here too.
        with engines.synced_reads(engine) as conn:
            row = lease_row(conn, _row_name(run_id))
        return row is None or row.age_us > EXPIRY * 10 ** 6
    if kind == NAMED_LOCK:
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


def claim_if_free(engine, kind, run_id):
    """Whether run ``run_id``'s lease is free; for good if it is.

    A lease row that expired is deleted in the same statement that
    finds it expired: a run that was only cut off finds its row gone at
    its next renewal and writes nothing more, and a row renewed meanwhile
    is left, its run alive. The other kinds are as ``is_free``.
    """
    if kind != ROW_LEASE:
        return is_free(engine, kind, run_id)
    name = _row_name(run_id)
    try:
        with engine.begin() as conn:
            claimed = conn.execute(sa.text(
                'DELETE FROM leases WHERE name = :name AND renewed_us < '
                '%s - :expiry_us' % _NOW_US),
                {'name': name, 'expiry_us': EXPIRY * 10 ** 6}).rowcount
    except db_exc.DBDeadlock:
        # On Galera: the row was renewed on another node meanwhile.
        return False
    if claimed:
        return True
    with engines.synced_reads(engine) as conn:
        return lease_row(conn, name) is None


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


class LeaseLost(Exception):
    """A run may no longer write: its lease may be free, or is gone.

    The store turns it into the AuditStoreError that stops the run
    before its next write.
    """


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


class _RowLease(object):

    def __init__(self, engine, run_id):
        self._row = _row_name(run_id)
        with engine.begin() as conn:
            insert_row(conn, self._row)
        self._engine = engine
        self._renewer = Renewer(engine, self._row)

    def check(self):
        self._renewer.check()

    def release(self):
        if self._renewer is None:
            return
        renewer, self._renewer = self._renewer, None
        renewer.stop()
        try:
            with self._engine.begin() as conn:
                delete_row(conn, self._row)
        except Exception as exc:
            # Left behind, it expires: nobody waits longer than EXPIRY.
            LOG.debug('cannot delete lease %s: %s', self._row, exc)


# Held by each Renewer while it renews: a process forked while none
# renews inherits no lock a renewal holds (see ``quiesced``).
_RENEWING = threading.Lock()
_renewer_threads = weakref.WeakSet()


def renewer_threads():
    """The threads of this process that renew leases."""
    return set(_renewer_threads)


@contextlib.contextmanager
def quiesced():
    """Within the block, no Renewer of this process is renewing.

    A process forked within it inherits no lock that a renewal holds
    (the pool's, the driver's), so it may fork although the renewers'
    threads run: they only wait for their next turn meanwhile.
    """
    with _RENEWING:
        yield


class Renewer(object):
    """A daemon thread renewing lease row ``name`` until ``stop()``.

    It knows when the row was last renewed (by this process's monotonic
    clock, from before the renewal was sent), and whether the row is
    gone: ``check`` says whether its holder may still write.
    """

    def __init__(self, engine, name, interval=None):
        self._engine = engine
        self._name = name
        self._interval = interval or RENEW_INTERVAL
        # The row was inserted, renewed, just before this.
        self._renewed_at = time.monotonic()
        self._gone = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name='lease-%s' % name, daemon=True)
        _renewer_threads.add(self._thread)
        self._thread.start()

    def _run(self):
        while not self._stopped.wait(self._interval):
            sent = time.monotonic()
            try:
                with _RENEWING, self._engine.begin() as conn:
                    renewed = renew_row(conn, self._name)
            except Exception as exc:
                # A connection the proxy or the server closed, a node
                # that failed: the next renewal goes through another.
                LOG.debug('cannot renew lease %s: %s', self._name, exc)
                continue
            if not renewed:
                # Judged dead and settled by another invocation.
                self._gone = True
                return
            self._renewed_at = sent

    def check(self):
        """Raise LeaseLost unless the row is held and renewed recently."""
        if self._gone:
            raise LeaseLost('its lease row %s was deleted: another '
                            'invocation judged the run dead' % self._name)
        age = time.monotonic() - self._renewed_at
        if age > WRITABLE_FOR:
            raise LeaseLost('its lease row %s was last renewed %d s ago '
                            '(the store did not answer); the lease may '
                            'be judged free after %d s' % (
                                self._name, age, EXPIRY))

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

    def check(self):
        pass  # held by this process's descriptor until released

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

    def check(self):
        pass

    def release(self):
        _in_process.discard(self._run_id)
