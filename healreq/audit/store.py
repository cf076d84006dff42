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

Every run holds a lease (``healreq.audit.lease``) from ``start_run`` to
``finish_run`` (or ``release``); ``recover`` only settles the intents of
runs whose lease is free, so it never races a live run.
"""

import errno
import functools
import hashlib
import json
import os
import socket
import stat
import time
import urllib.parse
import uuid as uuidlib

import sqlalchemy as sa

from healreq.audit import identity
from healreq.audit import lease
from healreq.audit import migrations
from healreq.audit import schema
from healreq import clock
from healreq.db import api_queries
from healreq.db import engines
from healreq import exception
from healreq import version

APPLIED = 'applied'
REFUSED = 'refused'
PENDING = 'pending'
UNKNOWN = 'unknown'

# What a change does to its spec row (see healreq.run.writer).
UPDATE = 'update'
INSERT = 'insert'
DELETE = 'delete'

# A run recorded before leases existed that never ended counts as dead
# once it started this long ago (a heal of 100k instances takes minutes).
LEGACY_RUN_GRACE_NS = 24 * 3600 * 10 ** 9

# Run ids looked up per query when cleaning up lock files.
_IN_CHUNK = 500


def digest(text):
    """SHA-256 of a spec text, as recorded in the audit and in plans.

    None for no text (the before of an insert, the after of a delete).
    """
    if text is None:
        return None
    if not isinstance(text, bytes):
        text = text.encode('utf-8')
    return hashlib.sha256(text).hexdigest()


def _store_errors(method):
    """Raise the database errors of an AuditStore method as its own."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with exception.reraised_as(exception.AuditStoreError):
            return method(*args, **kwargs)
    return wrapper


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


class AuditStore(object):
    """A SQL audit store reached through oslo.db."""

    def __init__(self, url):
        if url.startswith('sqlite'):
            _prepare_sqlite_file(url)
        # oslo.db's pool: runs of several workers share the store. The
        # migration lock waits as long as another command migrates.
        self.engine = engines.create_engine(
            _utf8mb4(url), pool_size=None, lock_wait_timeout=None)
        migrations.upgrade(self.engine)
        # The leases of the runs this store started and has not ended.
        self._leases = {}

    @classmethod
    def reading(cls, engine):
        """A store on ``engine`` that only reads.

        It is never migrated, and starts no run, so it holds no lease.
        """
        store = cls.__new__(cls)
        store.engine = engine
        store._leases = {}
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

    # -- runs --------------------------------------------------------------

    @_store_errors
    def start_run(self, mode, command, filters):
        """Record the start of a run and take its lease; return its id.

        The lease is taken before the run is recorded, so no other
        invocation ever sees the run without it.
        """
        run_id = str(uuidlib.uuid4())
        try:
            self._leases[run_id] = lease.acquire(self.engine, run_id)
        except lease.LeaseError as exc:
            raise _lease_error('cannot take the lease of a new run', exc)
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

    @_store_errors
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

    @_store_errors
    def record_findings(self, run_id, findings):
        """Record non-consistent findings (dry runs build a history)."""
        rows = [dict(run_id=run_id, instance_uuid=f.instance_uuid,
                     cell_uuid=f.cell_uuid, status=f.status.value,
                     reason=f.reason, drift=json.dumps(f.drift),
                     detail=f.detail) for f in findings]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(schema.findings.insert(), rows)

    @_store_errors
    def list_runs(self, limit):
        t = schema.runs
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(t).order_by(t.c.started_ns.desc(),
                                      t.c.id).limit(limit))]

    @_store_errors
    def get_run(self, run_id):
        t = schema.runs
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t).where(t.c.id == run_id)).first()
        return dict(row._mapping) if row else None

    @_store_errors
    def run_findings(self, run_id):
        t = schema.findings
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))]

    # -- changes -----------------------------------------------------------

    @_store_errors
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

    @_store_errors
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

    @_store_errors
    def change_state(self, change_id):
        """The recorded state and detail of change ``change_id``."""
        t = schema.changes
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.c.state, t.c.detail).where(
                t.c.id == change_id)).one()
        return row.state, row.detail

    @_store_errors
    def changes(self, run_id, instance_uuid=None, state=None):
        t = schema.changes
        query = sa.select(t).where(t.c.run_id == run_id)
        if instance_uuid:
            query = query.where(t.c.instance_uuid == instance_uuid)
        if state:
            query = query.where(t.c.state == state)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                query.order_by(t.c.id))]

    @_store_errors
    def applied_changes(self, instance_uuid, limit=100):
        """The newest applied changes of ``instance_uuid``, newest first.

        Dicts of the changes' columns, each with its run's ``mode`` and
        ``filters`` (decoded; {} if they are not a JSON object) added.
        """
        c, r = schema.changes, schema.runs
        query = sa.select(c, r.c.mode, r.c.filters.label('run_filters')).join(
            r, r.c.id == c.c.run_id).where(
            c.c.instance_uuid == instance_uuid).where(
            c.c.state == APPLIED).order_by(c.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            rows = [dict(row._mapping) for row in conn.execute(query)]
        for change in rows:
            try:
                filters = json.loads(change.pop('run_filters') or '{}')
            except ValueError:
                filters = None
            change['filters'] = filters if isinstance(filters, dict) else {}
        return rows

    @_store_errors
    def recover(self, api_engine):
        """Settle the intents dead runs left pending; return those settled.

        Only runs that are provably dead are settled: their lease is free
        (the process or its connection is gone), or they ended, or,
        recorded before leases existed, they started more than
        LEGACY_RUN_GRACE_NS ago. The lease is checked BEFORE the row is
        read, so a dead run cannot write after the row was read. The
        row tells what happened: it holds the after value (the write
        went through), the before value (it did not), or neither
        (someone changed it since: flagged ``unknown`` for a human).

        The lock files of dead runs are removed on the way, whether they
        left pending intents or not.
        """
        self._remove_dead_lock_files()
        pending = [c for c in self._pending_with_runs()
                   if self._run_is_dead(c)]
        if not pending:
            return []
        with exception.reraised_as(exception.ApiDatabaseError):
            with api_engine.connect() as conn:
                by_id = api_queries.get_spec_texts(
                    conn, [c['spec_id'] for c in pending
                           if c['action'] == UPDATE])
                by_instance = api_queries.get_request_specs(
                    conn, [c['instance_uuid'] for c in pending
                           if c['action'] != UPDATE])
        settled = []
        for change in pending:
            row = by_instance.get(change['instance_uuid'])
            if change['action'] == UPDATE:
                text, spec_id = by_id.get(change['spec_id']), None
            else:
                text, spec_id = (None, None) if row is None else (
                    row['spec'], row['id'])
            change['state'], change['detail'] = _recovered_state(
                change, text)
            # Settled meanwhile (the run ended after all): leave it.
            if self.resolve(change['id'], change['state'], change['detail'],
                            spec_id=spec_id if change['action'] == INSERT
                            else None):
                settled.append(change)
        return settled

    def _remove_dead_lock_files(self):
        """Remove the lock files of dead runs, pending intents or not.

        A run killed outright (SIGKILL) leaves its file behind. Only the
        files of recorded runs are looked at: a run takes its lock before
        it is recorded, so the file of a recorded run is locked for as
        long as the run lives, while the file of a run not recorded yet
        may be one whose lock is being taken.
        """
        run_ids = [run_id for run_id in lease.lock_file_runs(self.engine)
                   if run_id not in self._leases]
        t = schema.runs
        for start in range(0, len(run_ids), _IN_CHUNK):
            chunk = run_ids[start:start + _IN_CHUNK]
            with self.engine.connect() as conn:
                recorded = conn.execute(sa.select(t.c.id).where(
                    t.c.id.in_(chunk))).scalars().all()
            for run_id in recorded:
                try:
                    lease.is_free(self.engine, lease.FILE_LOCK, run_id)
                except (lease.LeaseError, OSError):
                    # Left in place. Nothing depends on it, unless its run
                    # left intents, which recovery then refuses to guess.
                    pass

    def _pending_with_runs(self):
        t, runs = schema.changes, schema.runs
        query = sa.select(
            t, runs.c.lease.label('run_lease'),
            runs.c.ended_at.label('run_ended_at'),
            runs.c.started_ns.label('run_started_ns')).select_from(
            t.join(runs, t.c.run_id == runs.c.id)).where(
            t.c.state == PENDING).order_by(t.c.id)
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        extra = ('run_lease', 'run_ended_at', 'run_started_ns')
        return [dict({k: v for k, v in row.items() if k not in extra},
                     _run={k: row[k] for k in extra}) for row in rows]

    def _run_is_dead(self, change):
        run = change.pop('_run')
        return self._is_over(change['run_id'], run['run_lease'],
                             run['run_ended_at'], run['run_started_ns'])

    @_store_errors
    def is_running(self, run_id):
        """Whether run ``run_id`` may still write: it is alive.

        False for a run that ended, or whose lease is free (it crashed),
        or that is not recorded. Raises AuditStoreError (exit 127) if its
        lease cannot be checked.
        """
        run = self.get_run(run_id)
        if run is None:
            return False
        return not self._is_over(run_id, run['lease'], run['ended_at'],
                                 run['started_ns'])

    def _is_over(self, run_id, lease_kind, ended_at, started_ns):
        """Whether the run can write nothing more (see ``recover``)."""
        if run_id in self._leases:
            return False
        if ended_at is not None:
            return True
        if lease_kind is None:
            return time.time_ns() - started_ns > LEGACY_RUN_GRACE_NS
        try:
            return lease.is_free(self.engine, lease_kind, run_id)
        except lease.LeaseError as exc:
            raise _lease_error('cannot tell whether run %s is over'
                               % run_id, exc)


def _lease_error(doing, exc):
    """The AuditStoreError of LeaseError ``exc``: the store is unusable.

    Exit code 127, as for a store that cannot be opened: nothing has been
    recorded or written.
    """
    error = exception.AuditStoreError(
        '%s: %s' % (doing, exc), exit_code=exception.ExitCode.INVALID_INPUT)
    error.__cause__ = exc
    return error


def _recovered_state(change, text):
    """The state and detail of a dead run's intent, from the row's text.

    ``text`` is None where there is no row: what an insert's before and
    a delete's after are.
    """
    if text == change['after_text']:
        return APPLIED, ('recovered: the row holds the new value'
                         if text is not None else
                         'recovered: the row is gone')
    if text == change['before_text']:
        return REFUSED, 'recovered: interrupted before the write'
    return UNKNOWN, ('recovered: the row holds neither value; it '
                     'changed after the interrupted run')


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
