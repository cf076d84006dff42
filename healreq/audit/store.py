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


"""The audit store: runs, their findings, and every change they made.

A change is recorded as an intent (before and after values and their
digests) and committed BEFORE the spec is written, then marked applied or
refused. ``recover`` settles intents a crash left pending by looking at
the row itself, so the store and Nova's database always agree.

This module opens the store and records runs; ``history`` reads them
back and ``recovery`` settles what dead runs left pending.

Every run holds a lease (``healreq.audit.lease``) from ``start_run`` to
``finish_run`` (or ``release``); ``recover`` only settles the intents of
runs whose lease is free, so it never races a live run.
"""

import errno
import hashlib
import json
import os
import socket
import stat
import time
import urllib.parse
import uuid as uuidlib

import sqlalchemy as sa

from healreq.audit import history
from healreq.audit import identity
from healreq.audit import lease
from healreq.audit import migrations
from healreq.audit import recovery
from healreq.audit import schema
from healreq import clock
from healreq.db import engines
from healreq import exception
from healreq import version

# What callers name through this module: a change's states and actions.
APPLIED = history.APPLIED
REFUSED = history.REFUSED
PENDING = history.PENDING
UNKNOWN = history.UNKNOWN
UPDATE = history.UPDATE
INSERT = history.INSERT
DELETE = history.DELETE
LEGACY_RUN_GRACE_NS = recovery.LEGACY_RUN_GRACE_NS


def digest(text):
    """SHA-256 of a spec text, as recorded in the audit and in plans.

    None for no text (the before of an insert, the after of a delete).
    """
    if text is None:
        return None
    if not isinstance(text, bytes):
        text = text.encode('utf-8')
    return hashlib.sha256(text).hexdigest()


class UnsafeStorePath(ValueError):
    """The SQLite store's path is a symbolic link or not a regular file."""


def _sqlite_file(url):
    """The file of an SQLite store URL; None for another store."""
    path = sa.engine.make_url(url).database
    if not url.startswith('sqlite') or not path or path == ':memory:':
        return None
    return path


def _refuse_link(path):
    """Refuse a symbolic link where the store is (its target is not ours)."""
    if os.path.islink(path):
        raise UnsafeStorePath(
            '%s is a symbolic link; the audit store must be a regular file '
            '(nothing is created or changed through a link)' % path)


def _prepare_sqlite_file(url):
    """Create an SQLite store's directory and file, owner-only.

    Never through a symbolic link: a link is refused (UnsafeStorePath),
    and the file is opened with O_NOFOLLOW and made owner-only through
    that descriptor.
    """
    path = _sqlite_file(url)
    if path is None:
        return
    _refuse_link(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW
                             | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted meanwhile
            _refuse_link(path)
        raise
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise UnsafeStorePath('%s is not a regular file' % path)
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)


def _utf8mb4(url):
    """``url``, talking utf8mb4 to a MySQL server whatever it names.

    oslo.db would ask for utf8 (utf8mb3), as would the usual OpenStack
    URL's ``?charset=utf8``; neither, nor any other character set, can
    carry every text a finding may quote into the utf8mb4 tables.
    """
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != 'mysql':
        return url
    return parsed.update_query_dict({'charset': 'utf8mb4'}).render_as_string(
        hide_password=False)


class AuditStore(history.RunHistory):
    """A SQL audit store reached through oslo.db."""

    def __init__(self, url, answer_timeout=None):
        if url.startswith('sqlite'):
            _prepare_sqlite_file(url)
        # oslo.db's pool: runs of several workers share the store. The
        # migration lock waits as long as another command migrates.
        super().__init__(engines.create_engine(
            _utf8mb4(url), pool_size=None, lock_wait_timeout=None,
            answer_timeout=answer_timeout))
        migrations.upgrade(self.engine)
        # The leases of the runs this store started and has not ended.
        self._leases = {}
        self._recovery = recovery.Recovery(self.engine, self.resolve,
                                           self._leases)

    @classmethod
    def reading(cls, engine):
        """A store on ``engine`` that only reads.

        It is never migrated, and starts no run, so it holds no lease.
        """
        store = cls.__new__(cls)
        history.RunHistory.__init__(store, engine)
        store._leases = {}
        store._recovery = recovery.Recovery(engine, store.resolve,
                                            store._leases)
        return store

    def dispose(self):
        """Release every lease still held, then close the connections."""
        for run_id in list(self._leases):
            self.release(run_id)
        self.engine.dispose()

    def release(self, run_id):
        """Release run ``run_id``'s lease, if this store still holds it.

        After this, ``recover`` may settle the run's pending intents:
        call it only once the run can write nothing more.
        """
        held = self._leases.pop(run_id, None)
        if held is not None:
            held.release()

    def check_lease(self, run_id):
        """Raise AuditStoreError unless run ``run_id`` may still write.

        Its lease must be held by this store and, on a MySQL store,
        renewed recently (lease.Renewer.check); a run that may no longer
        write stops before its next write.
        """
        held = self._leases.get(run_id)
        if held is None:
            raise exception.AuditStoreError(
                'run %s no longer holds its lease; nothing more is '
                'written' % run_id)
        try:
            held.check()
        except lease.LeaseLost as exc:
            raise exception.AuditStoreError(
                'run %s stopped before its next write: %s; run again'
                % (run_id, exc))

    # -- runs --------------------------------------------------------------

    @history.store_errors
    def start_run(self, mode, command, filters):
        """Record the start of a run and take its lease; return its id.

        The lease is taken before the run is recorded, so no other
        invocation ever sees the run without it.
        """
        run_id = str(uuidlib.uuid4())
        try:
            self._leases[run_id] = lease.acquire(self.engine, run_id)
        except lease.LeaseError as exc:
            raise recovery.lease_error(
                'cannot take the lease of a new run', exc)
        try:
            with self.engine.begin() as conn:
                conn.execute(schema.runs.insert().values(
                    id=run_id, started_at=clock.utcnow(),
                    started_ns=time.time_ns(),
                    mode=mode, command=command,
                    operator=identity.operator(),
                    host=socket.gethostname(),
                    tool_version=version.version_info.release_string(),
                    filters=json.dumps(filters, sort_keys=True),
                    lease=lease.kind_for(self.engine)))
        except BaseException:
            self.release(run_id)
            raise
        return run_id

    @history.store_errors
    def finish_run(self, run_id, summary, exit_code):
        """Record the end of a run, then release its lease."""
        try:
            with self.engine.begin() as conn:
                conn.execute(schema.runs.update().where(
                    schema.runs.c.id == run_id).values(
                    ended_at=clock.utcnow(), summary=json.dumps(summary),
                    exit_code=int(exit_code)))
        finally:
            self.release(run_id)

    @history.store_errors
    def record_findings(self, run_id, findings):
        """Record non-consistent findings (dry runs build a history)."""
        rows = [dict(run_id=run_id, instance_uuid=f.instance_uuid,
                     cell_uuid=f.cell_uuid, status=f.status.value,
                     reason=f.reason, drift=json.dumps(f.drift),
                     detail=f.detail) for f in findings]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(schema.findings.insert(), rows)

    # -- changes -----------------------------------------------------------

    @history.store_errors
    def intent(self, run_id, instance_uuid, cell_uuid, spec_id, fields,
               before, after, action=UPDATE):
        """Record a change about to be written; return its id.

        ``action`` is update, insert (``before`` and ``spec_id`` None) or
        delete (``after`` None).
        """
        with self.engine.begin() as conn:
            result = conn.execute(schema.changes.insert().values(
                run_id=run_id, instance_uuid=instance_uuid,
                cell_uuid=cell_uuid, spec_id=spec_id,
                fields=json.dumps(list(fields)), before_text=before,
                after_text=after, before_digest=digest(before),
                after_digest=digest(after), state=PENDING, action=action,
                created_at=clock.utcnow()))
            return result.inserted_primary_key[0]

    @history.store_errors
    def resolve(self, change_id, state, detail=None, spec_id=None):
        """Settle a pending intent; False if it was already settled.

        An intent is settled once: a settled one is never overwritten.
        ``spec_id`` records the row an insert created.
        """
        t = schema.changes
        values = dict(state=state, detail=detail,
                      resolved_at=clock.utcnow())
        if spec_id is not None:
            values['spec_id'] = spec_id
        with self.engine.begin() as conn:
            result = conn.execute(t.update().where(
                t.c.id == change_id).where(t.c.state == PENDING).values(
                **values))
            return result.rowcount == 1

    @history.store_errors
    def recover(self, api_engine):
        """Settle the intents dead runs left pending; return those settled.

        See recovery.Recovery.recover: only runs that are provably over
        are settled, from what the row holds now.
        """
        return self._recovery.recover(api_engine)

    @history.store_errors
    def is_running(self, run_id):
        """Whether run ``run_id`` may still write: it is alive.

        False for a run that ended, or whose lease is free (it crashed),
        or that is not recorded. Raises AuditStoreError (exit 127) if its
        lease cannot be checked.
        """
        run = self.get_run(run_id)
        if run is None:
            return False
        return not self._recovery.is_over(
            run_id, run['lease'], run['ended_at'], run['started_ns'])


def open_read_only(url):
    """A read-only store on an existing SQLite file at the head revision.

    None where that does not apply (another backend, no file yet, an
    older schema): the store is then opened as usual. Raises
    UnsafeStorePath if the file is a symbolic link.
    """
    path = _sqlite_file(url)
    if path is None:
        return None
    _refuse_link(path)
    if not os.path.isfile(path):
        return None
    engine = engines.create_engine(
        'sqlite:///file:%s?mode=ro&uri=true'
        % urllib.parse.quote(os.path.abspath(path)), pool_size=None)
    version_table = sa.table(migrations.VERSION_TABLE,
                             sa.column('version_num'))
    try:
        with engine.connect() as conn:
            current = conn.execute(sa.select(
                version_table.c.version_num)).scalars().all()
    except exception.DB_ERRORS:
        current = None  # no version table: a legacy or empty store
    except Exception:
        engine.dispose()
        raise
    if current == [migrations.HEAD]:
        return AuditStore.reading(engine)
    engine.dispose()
    return None
