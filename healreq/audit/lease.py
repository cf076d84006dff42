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
  open for the run.
* On an SQLite file store it is an exclusive ``flock`` on the owner-only
  file ``<store file>.run-<run id>.lock``, removed when the run ends.
* An in-memory SQLite store lives in one process: its leases are kept in
  that process.
"""

import errno
import fcntl
import os

import sqlalchemy as sa

NAMED_LOCK = 'mysql-lock'
FILE_LOCK = 'flock'
IN_PROCESS = 'process'

_in_process = set()


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
        with engine.connect() as conn:
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


def _lock_name(run_id):
    return 'healreq-run-%s' % run_id


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
        self._conn = engine.connect()
        try:
            with self._conn.begin():
                taken = self._conn.execute(
                    sa.text('SELECT GET_LOCK(:name, 0)'),
                    {'name': self._name}).scalar()
        except BaseException:
            self._conn.invalidate()
            self._conn.close()
            raise
        if taken != 1:
            self._conn.close()
            raise LeaseError('lock %s is held elsewhere' % self._name)

    def release(self):
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        try:
            with conn.begin():
                conn.execute(sa.text('SELECT RELEASE_LOCK(:name)'),
                             {'name': self._name})
        except Exception:
            # A connection in doubt must not go back to the pool holding
            # the lock: closing it for good releases the lock.
            conn.invalidate()
        finally:
            conn.close()


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
