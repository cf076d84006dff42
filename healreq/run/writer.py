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


"""The one way a spec is written: decide again, record, swap, resolve.

Heal, revert and apply all write through ``SpecWriter.write``:

1. the caller decides again, on the rows as they are now, that the
   change still holds (each command brings its own decision), and
   writes only if it does;
2. the intent (before and after values) is recorded in the audit store;
3. the row is compared and swapped: it is written only if it still holds
   the exact text that was read;
4. the intent is marked applied or refused, unless it is no longer
   pending.

``write`` returns how the write ended, a ``findings.Outcome``, which
``findings.settle`` turns into the finding's final status.

An intent is settled once. If another invocation's recovery settled it
first (a release that did not know the run was alive), the recorded state
stands and the row is brought to agree with it: a write it recorded as
refused is undone by a compare-and-swap back to the before text.
"""

import dataclasses
import time

from oslo_db import exception as db_exc
from oslo_log import log as logging

from healreq.audit import store as audit_store
from healreq.db import api_queries
from healreq.db import engines
from healreq import exception
from healreq.heal import findings
from healreq.heal.findings import Outcome
from healreq.heal.findings import Status
from healreq import masking

SPEC_CHANGED_DETAIL = ('request_specs.spec changed after it was read; '
                       'left alone, run again to re-check')
SPEC_LOCKED_DETAIL = ('another session holds a lock on the request_specs '
                      'row ([healreq]/lock_wait_timeout passed); left alone, '
                      'run again to re-check')
MAPPING_LOCKED_DETAIL = ('another session holds a lock on the instance\'s '
                         'instance_mappings row ([healreq]/lock_wait_timeout '
                         'passed); the spec was not recreated, run again to '
                         're-check')
SPEC_APPEARED_DETAIL = ('a request_specs row appeared for the instance '
                        'while it was being recreated; left alone, run '
                        'again to re-check')
INSTANCE_ARCHIVED_DETAIL = ('the instance was deleted and archived before '
                            'its spec was recreated: it has no instance '
                            'mapping any more; nothing written')
INSTANCE_QUEUED_DETAIL = ('the instance was deleted through the API before '
                          'its spec was recreated; nothing written')
INSTANCE_MOVED_DETAIL = ('the instance mapping moved to cell id %s before '
                         'the spec was recreated; left alone')
SPEC_CONTENDED_DETAIL = ('the write of the request_specs row kept colliding '
                         'with concurrent writes of other sessions (deadlocks '
                         'or Galera certification failures) for %d s '
                         '([healreq]/lock_wait_timeout) while the row held '
                         'what was read; left alone, run again to re-check')
SETTLED_ELSEWHERE_DETAIL = ('the audit intent was settled as %s by another '
                            'invocation before this write was marked; %s')


LOG = logging.getLogger(__name__)

# Seconds between the attempts of a write that collided, at first; the
# pause doubles up to the longest.
RETRY_PAUSE = 0.05
RETRY_PAUSE_MAX = 1.0
# The start of each log line of a write that collided.
COLLIDED_LOG = ('Instance %s: the write of its request spec collided with a '
                'concurrent write (deadlock or certification failure, '
                'attempt %d) ')


def _is_collision(exc):
    """Whether ``exc`` rolled the write back for a concurrent write.

    A deadlock the server resolved, or on Galera a certification failure
    (reported as a deadlock, error 1213, at COMMIT or at the next
    statement): the transaction is already rolled back. A lock wait that
    timed out is no collision (oslo.db calls it a deadlock too).
    """
    return (isinstance(exc, db_exc.DBDeadlock)
            and not exception.is_lock_wait_timeout(exc))


# What a change does to the request_specs row of its instance.
UPDATE = 'update'  # ``before`` becomes ``after`` (row ``spec_id``)
INSERT = 'insert'  # a row holding ``after`` is created (there is none)
DELETE = 'delete'  # row ``spec_id``, holding ``before``, is removed


@dataclasses.dataclass
class Change:
    """Replace ``before`` by ``after`` in request spec row ``spec_id``.

    ``action`` INSERT (no row before: ``before`` and ``spec_id`` are None)
    and DELETE (no row after: ``after`` is None) recreate a missing spec
    and undo that. An INSERT is written only while the instance mapping
    names cell ``cell_id`` (the cell the decision was taken in).
    """
    instance_uuid: str
    spec_id: int
    fields: list
    before: str
    after: str
    # The digests ``before`` and ``after`` were recorded with, checked
    # again if set.
    before_digest: str = None
    after_digest: str = None
    action: str = UPDATE
    cell_id: int = None

    def inverse(self, spec_id=None):
        """The change that undoes this one (``spec_id``: of an insert)."""
        action = {UPDATE: UPDATE, INSERT: DELETE, DELETE: INSERT}[
            self.action]
        return dataclasses.replace(
            self, action=action, before=self.after, after=self.before,
            before_digest=self.after_digest, after_digest=self.before_digest,
            spec_id=None if action == INSERT else spec_id or self.spec_id)


class SpecWriter(object):
    """Writes spec changes of run ``run_id`` into the API database.

    ``audit`` (an AuditStore, or None to record nothing) receives each
    intent before its write; ``clock`` gives the written updated_at. In
    a dry run, nothing is recorded or written.
    """

    def __init__(self, api_engine, clock, audit=None, run_id=None,
                 dry_run=False, spec_changed_detail=SPEC_CHANGED_DETAIL,
                 retry_within=engines.LOCK_WAIT_TIMEOUT):
        self.api_engine = api_engine
        # Seconds a write that keeps colliding is retried
        # ([healreq]/lock_wait_timeout, the bound of a lock wait).
        self.retry_within = retry_within
        self.audit = audit
        self.run_id = run_id
        self.dry_run = dry_run
        self._clock = clock
        self._spec_changed_detail = spec_changed_detail

    def write(self, change, cell_uuid, budget=None):
        """Write ``change``, of an instance of cell ``cell_uuid``.

        The caller has decided again that the change still holds. Returns
        the findings.Outcome: WRITTEN, WOULD_WRITE in a dry run, or the
        refusal (the row changed, or the write failed for this change
        alone). ``budget`` (a Budget: --max-count), if given, reserves
        the write first and takes back the reservation of a refused one;
        None, touching nothing, when it is used up.
        """
        if budget is not None and not budget.take():
            return None
        if self.dry_run:
            return findings.WOULD_WRITE
        outcome = self._record_and_swap(change, cell_uuid)
        if outcome.refused and budget is not None:
            budget.give_back()
        return outcome

    def check_writable(self, actions=(UPDATE,)):
        """Raise ApiDatabaseError unless request_specs may be written.

        ``actions`` are what the run may do (UPDATE, INSERT, DELETE).
        Called before anything is recorded, so that a run by an account
        without a privilege it needs stops before its first intent. A
        dry run writes nothing and needs no privilege.
        """
        if self.dry_run:
            return
        for action in (UPDATE, INSERT, DELETE):
            if action not in actions:
                continue
            try:
                with self.api_engine.connect() as conn:
                    transaction = conn.begin()
                    try:
                        api_queries.try_spec_write(conn, action)
                    finally:
                        transaction.rollback()
            except exception.DB_ERRORS as exc:
                raise exception.ApiDatabaseError(
                    'cannot write request_specs (the %s privilege on '
                    'request_specs is needed; dry runs need none): %s'
                    % (action.upper(), exception.describe_db_error(exc))
                ) from exc

    def _record_and_swap(self, change, cell_uuid):
        """Record the intent, swap the row, mark the intent; the Outcome."""
        change_id = None
        if self.audit is not None:
            # A run that may be judged dead writes nothing more.
            self.audit.check_lease(self.run_id)
            change_id = self.audit.intent(
                self.run_id, change.instance_uuid, cell_uuid,
                change.spec_id, change.fields, change.before, change.after,
                action=change.action)
        try:
            swapped, spec_id, refusal = self._swap_until_settled(change)
        except exception.DB_ERRORS as exc:
            if exception.is_lock_wait_timeout(exc):
                return self._row_locked(change_id, change)
            return self._swap_failed(change, change_id, exc)
        if swapped:
            outcome = findings.WRITTEN
        else:
            outcome = refusal or self._row_changed(change)
        if change_id is None:
            return outcome
        # The audit records why the mapping forbade an insert.
        return self._mark_intent(change_id, change, spec_id, outcome,
                                 None if refusal is None else refusal.detail)

    def _row_changed(self, change):
        """The refusal of a change whose row changed, or appeared."""
        return Outcome(Status.CONFLICT, 'spec-changed',
                       self._spec_changed_detail
                       if change.action != INSERT else SPEC_APPEARED_DETAIL)

    def _row_locked(self, change_id, change):
        """Settle a swap that waited too long for another session's lock.

        Someone else is writing the row: this is a concurrent change,
        reported at once, not retried (a retry would wait as long again).
        An insert locks the instance's mapping row, which it names.
        """
        detail = (MAPPING_LOCKED_DETAIL if change.action == INSERT
                  else SPEC_LOCKED_DETAIL)
        if change_id is not None:
            self.audit.resolve(change_id, audit_store.REFUSED, detail=detail)
        return Outcome(Status.CONFLICT, 'spec-locked', detail)

    def _swap_failed(self, change, change_id, exc):
        """Settle a compare-and-swap that raised ``exc``; the Outcome.

        The row is read again, on a fresh connection. If that fails too,
        or the account lacks a privilege, the API database is what failed
        and the run ends (an intent stays pending for recovery to settle
        from the row). Otherwise the statement failed for this change
        alone (a statement over MySQL's max_allowed_packet, a value too
        long): the intent is settled from the row and the instance is an
        error, unless the row holds the new value after all.
        """
        message = masking.mask_password(exception.describe_db_error(exc))
        if exception.is_privilege_error(exc):
            raise exception.ApiDatabaseError(message) from exc
        try:
            with engines.synced_reads(self.api_engine) as conn:
                current = _current_text(conn, change)
        except exception.DB_ERRORS:
            raise exception.ApiDatabaseError(message) from exc
        applied = current == change.after
        if change_id is not None:
            self.audit.resolve(change_id, audit_store.APPLIED if applied
                               else audit_store.REFUSED, detail=message)
        if applied:
            return findings.WRITTEN
        return Outcome(Status.ERROR, 'write-failed',
                       'the compare-and-swap failed: %s' % message,
                       drop_changes=True)

    def _mark_intent(self, change_id, change, spec_id, outcome,
                     audit_detail):
        """Mark the intent as ``outcome`` says; the Outcome the audit agrees.

        ``audit_detail`` is recorded with the intent's state.

        When the intent was already settled, its recorded state stands:
        a write recorded as not applied is undone (compare-and-swap from
        the after text back to the before text), so the row agrees.
        """
        state = (audit_store.REFUSED if outcome.refused
                 else audit_store.APPLIED)
        if self.audit.resolve(change_id, state, spec_id=spec_id,
                              detail=audit_detail):
            return outcome
        recorded, _ = self.audit.change_state(change_id)
        if recorded == state:
            return outcome
        if outcome.refused:
            # The row held the after text, written by someone else: this
            # run wrote nothing, which is what it reports.
            return dataclasses.replace(
                outcome, detail=SETTLED_ELSEWHERE_DETAIL % (
                    recorded, 'this run wrote nothing'))
        with exception.reraised_as(exception.ApiDatabaseError):
            undone, _, _ = self._swap_until_settled(change.inverse(spec_id))
        return dataclasses.replace(
            self._row_changed(change), detail=SETTLED_ELSEWHERE_DETAIL % (
                recorded, 'the write was undone' if undone else
                'the row changed again after the write'))

    def _swap_until_settled(self, change):
        """``_swap``, again after each collision that left the row as read.

        A write that collided with a concurrent one (``_is_collision``)
        was rolled back. The row is read again, waiting for the cluster's
        latest commits: if it no longer holds what was read, the change
        is refused as ``_swap`` refuses it (someone changed the row).
        Otherwise the collision was with another column or row, and the
        write is tried again, each attempt logged, for at most
        ``retry_within`` seconds; then the refusal is ``spec-contended``.
        """
        deadline = time.monotonic() + self.retry_within
        pause = RETRY_PAUSE
        attempt = 1
        while True:
            try:
                return self._swap(change)
            except db_exc.DBDeadlock as exc:
                if not _is_collision(exc):
                    raise
            with engines.synced_reads(self.api_engine) as conn:
                current = _current_text(conn, change)
            if current != change.before:
                LOG.warning(COLLIDED_LOG + 'that changed the row; left alone',
                            change.instance_uuid, attempt)
                return False, change.spec_id, None
            left = deadline - time.monotonic()
            if left <= 0:
                LOG.warning(COLLIDED_LOG + 'for %d s; left alone',
                            change.instance_uuid, attempt, self.retry_within)
                return False, change.spec_id, Outcome(
                    Status.CONFLICT, 'spec-contended',
                    SPEC_CONTENDED_DETAIL % self.retry_within)
            LOG.warning(COLLIDED_LOG + 'while the row held what was read; '
                        'retrying, attempt %d', change.instance_uuid,
                        attempt, attempt + 1)
            attempt += 1
            time.sleep(min(pause, left))
            pause = min(pause * 2, RETRY_PAUSE_MAX)

    def _swap(self, change):
        """Write ``change`` if the row is as it expects.

        Returns ``(done, row id, refusal)``: ``refusal`` says why an
        insert was not written when the instance mapping forbade it
        (None otherwise: a row changed or appeared).
        """
        if change.action == INSERT:
            return self._insert(change)
        with self.api_engine.begin() as conn:
            if change.action == DELETE:
                return api_queries.delete_request_spec(
                    conn, change.spec_id, change.instance_uuid,
                    change.before), change.spec_id, None
            return api_queries.swap_request_spec(
                conn, change.spec_id, change.instance_uuid, change.before,
                change.after, self._clock()), change.spec_id, None

    def _insert(self, change):
        """Create the row of a live instance; as ``_swap``."""
        try:
            with self.api_engine.begin() as conn:
                spec_id = api_queries.insert_request_spec(
                    conn, change.instance_uuid, change.after,
                    self._clock(), change.cell_id)
                if spec_id is not None:
                    return True, spec_id, None
                mapping = api_queries.get_instance_mapping(
                    conn, change.instance_uuid)
        except db_exc.DBDuplicateEntry:
            return False, None, None
        return False, None, unmapped_refusal(mapping, change.cell_id)


def unmapped_refusal(mapping, cell_id):
    """Why an insert for cell ``cell_id`` was refused, from ``mapping``.

    ``mapping`` is the instance mapping read after the refusal (None if
    there is none, as after nova-manage db archive_deleted_rows).
    """
    if mapping is None:
        return Outcome(Status.SKIPPED, 'instance-deleted',
                       INSTANCE_ARCHIVED_DETAIL)
    if mapping['queued_for_delete']:
        return Outcome(Status.SKIPPED, 'queued-for-delete',
                       INSTANCE_QUEUED_DETAIL)
    if mapping['cell_id'] != cell_id:
        return Outcome(Status.CONFLICT, 'instance-changed',
                       INSTANCE_MOVED_DETAIL % mapping['cell_id'])
    # The mapping allows the insert now: it changed during the statement.
    return Outcome(Status.CONFLICT, 'instance-changed',
                   'the instance mapping changed while the spec was '
                   'recreated; left alone, run again to re-check')


def _current_text(conn, change):
    """The text the change's row holds now (None: no row)."""
    if change.action == UPDATE:
        return api_queries.get_spec_text(conn, change.spec_id)
    row = api_queries.get_request_specs(conn, [change.instance_uuid]).get(
        change.instance_uuid)
    return None if row is None else row['spec']
