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


"""Reading back what the audit store recorded.

The runs, their findings and their changes, as dicts of their columns:
for ``audit list`` and ``audit show``, for revert (what a run applied)
and for the writer (whether a change was settled, what was applied to
an instance before).
"""

import functools
import json

import sqlalchemy as sa

from healreq.audit import schema
from healreq import exception

# The states of a recorded change.
APPLIED = 'applied'
REFUSED = 'refused'
PENDING = 'pending'
UNKNOWN = 'unknown'

# What a change does to its spec row (see healreq.run.writer).
UPDATE = 'update'
INSERT = 'insert'
DELETE = 'delete'


def store_errors(method):
    """Raise the database errors of a store method as AuditStoreError."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with exception.reraised_as(exception.AuditStoreError):
            return method(*args, **kwargs)
    return wrapper


class RunHistory(object):
    """The runs, findings and changes recorded in the store on ``engine``."""

    def __init__(self, engine):
        self.engine = engine

    @store_errors
    def list_runs(self, limit):
        """The latest ``limit`` runs, newest first."""
        t = schema.runs
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(t).order_by(t.c.started_ns.desc(),
                                      t.c.id).limit(limit))]

    @store_errors
    def get_run(self, run_id):
        """Run ``run_id``, or None if it is not recorded."""
        t = schema.runs
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t).where(t.c.id == run_id)).first()
        return dict(row._mapping) if row else None

    @store_errors
    def run_findings(self, run_id):
        """The findings run ``run_id`` recorded, in order."""
        t = schema.findings
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(t).where(t.c.run_id == run_id).order_by(t.c.id))]

    @store_errors
    def change_state(self, change_id):
        """The recorded state and detail of change ``change_id``."""
        t = schema.changes
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(t.c.state, t.c.detail).where(
                t.c.id == change_id)).one()
        return row.state, row.detail

    @store_errors
    def changes(self, run_id, instance_uuid=None, state=None):
        """Run ``run_id``'s changes in order, of one instance or state."""
        t = schema.changes
        query = sa.select(t).where(t.c.run_id == run_id)
        if instance_uuid:
            query = query.where(t.c.instance_uuid == instance_uuid)
        if state:
            query = query.where(t.c.state == state)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                query.order_by(t.c.id))]

    @store_errors
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
