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
"""

import functools
import getpass
import hashlib
import json
import os
import socket
import time
import uuid as uuidlib

from oslo_db.sqlalchemy import engines
import sqlalchemy as sa

from healreq.audit import migrations
from healreq.audit import schema
from healreq import clock
from healreq.db import tables
from healreq import exception
from healreq import version

APPLIED = 'applied'
REFUSED = 'refused'
PENDING = 'pending'
UNKNOWN = 'unknown'


def digest(text):
    """SHA-256 of a spec text, as recorded in the audit and in plans."""
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


def _prepare_sqlite_file(url):
    """Create an SQLite store's directory and file, owner-only."""
    path = sa.engine.make_url(url).database
    if not path or path == ':memory:':
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    descriptor = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.close(descriptor)
    os.chmod(path, 0o600)


class AuditStore(object):
    """A SQL audit store reached through oslo.db."""

    def __init__(self, url):
        if url.startswith('sqlite'):
            _prepare_sqlite_file(url)
        self.engine = engines.create_engine(
            url, max_retries=0, mysql_sql_mode='TRADITIONAL')
        migrations.upgrade(self.engine)

    def dispose(self):
        self.engine.dispose()

    # -- runs --------------------------------------------------------------

    @_store_errors
    def start_run(self, mode, command, filters):
        """Record the start of a run; return its id."""
        run_id = str(uuidlib.uuid4())
        with self.engine.begin() as conn:
            conn.execute(schema.runs.insert().values(
                id=run_id, started_at=clock.utcnow(),
                started_ns=time.time_ns(),
                mode=mode, command=command,
                operator=getpass.getuser(), host=socket.gethostname(),
                tool_version=version.version_info.release_string(),
                filters=json.dumps(filters, sort_keys=True)))
        return run_id

    @_store_errors
    def finish_run(self, run_id, summary, exit_code):
        with self.engine.begin() as conn:
            conn.execute(schema.runs.update().where(
                schema.runs.c.id == run_id).values(
                ended_at=clock.utcnow(), summary=json.dumps(summary),
                exit_code=int(exit_code)))

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
               before, after):
        """Record a change about to be written; return its id."""
        with self.engine.begin() as conn:
            result = conn.execute(schema.changes.insert().values(
                run_id=run_id, instance_uuid=instance_uuid,
                cell_uuid=cell_uuid, spec_id=spec_id,
                fields=json.dumps(list(fields)), before_text=before,
                after_text=after, before_digest=digest(before),
                after_digest=digest(after), state=PENDING,
                created_at=clock.utcnow()))
            return result.inserted_primary_key[0]

    @_store_errors
    def resolve(self, change_id, state, detail=None):
        with self.engine.begin() as conn:
            conn.execute(schema.changes.update().where(
                schema.changes.c.id == change_id).values(
                state=state, detail=detail, resolved_at=clock.utcnow()))

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
    def recover(self, api_engine):
        """Settle intents left pending by a crash; return them, settled.

        The row tells what happened: it holds the after value (the write
        went through), the before value (it did not), or neither (someone
        changed it since: flagged ``unknown`` for a human).
        """
        t = schema.changes
        with self.engine.connect() as conn:
            pending = [dict(r._mapping) for r in conn.execute(
                sa.select(t).where(t.c.state == PENDING).order_by(t.c.id))]
        if not pending:
            return []
        specs = tables.request_specs
        with exception.reraised_as(exception.ApiDatabaseError):
            with api_engine.connect() as conn:
                current = {row.id: row.spec for row in conn.execute(
                    sa.select(specs.c.id, specs.c.spec).where(
                        specs.c.id.in_([c['spec_id'] for c in pending])))}
        for change in pending:
            text = current.get(change['spec_id'])
            if text == change['after_text']:
                change['state'] = APPLIED
                detail = 'recovered: the row holds the new value'
            elif text == change['before_text']:
                change['state'] = REFUSED
                detail = 'recovered: interrupted before the write'
            else:
                change['state'] = UNKNOWN
                detail = ('recovered: the row holds neither value; it '
                          'changed after the interrupted run')
            change['detail'] = detail
            self.resolve(change['id'], change['state'], detail)
        return pending
