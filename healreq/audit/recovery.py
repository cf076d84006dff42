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


"""Settling the intents that runs which died left pending.

A change is recorded as an intent before its spec is written, then
settled applied or refused. A run that dies in between leaves it
pending; ``Recovery.recover`` settles it from the row itself, once the
run is provably over: its lease (``healreq.audit.lease``) is free, or it
ended.
"""

import time

import sqlalchemy as sa

from healreq.audit.history import APPLIED
from healreq.audit.history import INSERT
from healreq.audit.history import PENDING
from healreq.audit.history import REFUSED
from healreq.audit.history import UNKNOWN
from healreq.audit.history import UPDATE
from healreq.audit import lease
from healreq.audit import schema
from healreq.db import api_queries
from healreq import exception

# A run recorded before leases existed that never ended counts as dead
# once it started this long ago (a heal of 100k instances takes minutes).
LEGACY_RUN_GRACE_NS = 24 * 3600 * 10 ** 9

# Run ids looked up per query when cleaning up lock files.
_IN_CHUNK = 500


class Recovery(object):
    """The recovery of the store on ``engine``.

    ``resolve`` settles an intent as AuditStore.resolve does; ``held``
    maps the ids of the runs whose leases this store holds (alive, never
    settled here) to their leases.
    """

    def __init__(self, engine, resolve, held):
        self.engine = engine
        self._resolve = resolve
        self._held = held

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
            if self._resolve(change['id'], change['state'],
                             change['detail'],
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
                   if run_id not in self._held]
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
        return self.is_over(change['run_id'], run['run_lease'],
                            run['run_ended_at'], run['run_started_ns'],
                            claim=True)

    def is_over(self, run_id, lease_kind, ended_at, started_ns,
                claim=False):
        """Whether the run can write nothing more (see ``recover``).

        With ``claim``, a free lease is claimed for good
        (lease.claim_if_free): recovery settles only runs that can
        never write again.
        """
        if run_id in self._held:
            return False
        if ended_at is not None:
            return True
        if lease_kind is None:
            return time.time_ns() - started_ns > LEGACY_RUN_GRACE_NS
        free = lease.claim_if_free if claim else lease.is_free
        try:
            return free(self.engine, lease_kind, run_id)
        except lease.LeaseError as exc:
            raise lease_error('cannot tell whether run %s is over'
                              % run_id, exc)


def lease_error(doing, exc):
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
