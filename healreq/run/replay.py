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


"""Writing recorded spec values back: ``apply`` of a plan, ``revert``.

Each change goes through the SpecWriter; deciding again means: the
instance has no operation in flight, and the row still holds exactly the
text the plan or the audit recorded. A plan is only a proposal: ``apply``
also derives the spec again from the instance's current records, exactly
as a heal would, and writes a change only if its new value is that.
"""

import dataclasses
import json

from healreq.audit import store as audit_store
from healreq.db import api_queries
from healreq.db import cell_queries
from healreq.db import engines
from healreq import exception
from healreq.heal import decisions
from healreq.heal import field_checks
from healreq.heal import findings
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import Note
from healreq.heal.findings import Outcome
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq import releases
from healreq.run import records
from healreq.run import writer as spec_writer

SPEC_CHANGED_DETAIL = 'the spec changed during the write; left alone'


class Replayer(object):
    """Writes a list of recorded changes in a RunContext; a RunReport."""

    def __init__(self, context, settings, audit, run_id, dry_run=False,
                 rederive=False, revert_of=None, check_release=None):
        """Prepare writing recorded changes of run ``run_id``.

        With ``rederive`` (apply), a change is written only if a heal
        would write exactly its new value now, by the rules of the
        deployment's release (the context's target release if named);
        ``check_release(detection)``, once it is known, may refuse it
        (InvalidInput) before anything is written.
        ``revert_of`` is the run a revert undoes: an earlier revert of it
        recorded in the audit store is nothing to do again.
        """
        self.context = context
        self.check_release = check_release
        self.rederive = rederive
        self.revert_of = revert_of
        self.settings = settings
        self.audit = audit
        self.run_id = run_id
        self._cells = {}
        self.report = RunReport(dry_run=dry_run)
        self.writer = spec_writer.SpecWriter(
            context.api_engine, context.clock, audit=audit, run_id=run_id,
            dry_run=dry_run, spec_changed_detail=SPEC_CHANGED_DETAIL,
            retry_within=context.lock_wait_timeout)

    def run(self, changes):
        """Write ``changes`` (writer.Change), in order."""
        cells = {c['id']: c for c in self.context.cells()}
        with exception.reraised_as(exception.ApiDatabaseError):
            with self.context.api_engine.connect() as conn:
                mappings = api_queries.get_instance_mappings(
                    conn, [c.instance_uuid for c in changes])
        if self.rederive:
            self.report.release = self.context.learn_release()
        if changes:
            self.context.check_writable(
                self.writer, {change.action for change in changes},
                remedy=releases.PLAN_REMEDY)
        # After the deployment's own refusals, which say more.
        if self.check_release is not None:
            self.check_release(self.report.release)
        for change in changes:
            mapping = mappings.get(change.instance_uuid)
            cell = cells.get(mapping['cell_id']) if mapping else None
            finding = self._replay(change, cell, mapping)
            self._cell_report(cell).count(finding)
            findings.keep(finding, self.report.findings, self.report.notices)
        self._record_findings()
        return self.report

    def _record_findings(self):
        """Record the findings; a store that refuses them is reported."""
        findings.record(self.audit, self.run_id, self.report.findings,
                        self.report)

    def _cell_report(self, cell):
        key = cell['uuid'] if cell else None
        if key not in self._cells:
            self._cells[key] = CellReport(uuid=key,
                                          name=cell['name'] if cell else None)
            self.report.cells.append(self._cells[key])
        return self._cells[key]

    def _replay(self, change, cell, mapping):
        """Write ``change`` if it still holds; the instance's Finding."""
        finding = Finding(change.instance_uuid, cell['uuid'] if cell else None,
                          Status.DRIFTED, 'recorded-change',
                          'fields: %s' % ', '.join(change.fields))
        if cell is not None:
            # An insert is written only while the instance is mapped here.
            change = dataclasses.replace(change, cell_id=cell['id'])
        outcome = (self._decide_again(change, cell, mapping)
                   or self.writer.write(change, finding.cell_uuid))
        return findings.settle(finding, outcome)

    def _decide_again(self, change, cell, mapping):
        """None if ``change`` may be written now, else the Outcome instead.

        ``cell`` is the cell that ``mapping`` (the instance mapping, or
        None) names.
        """
        # apply derives the value again, and refuses what it cannot.
        invalid = None if self.rederive else _invalid_record(change)
        if invalid:
            return Outcome(Status.ERROR, 'audit-record-invalid',
                           invalid + '; left alone')
        current = self._current_spec(change)
        reverted_by = self._reverted_by(change)
        settled = self._settled_before(change, cell, current, reverted_by)
        if settled is not None:
            return settled
        if cell is None:
            return _unmapped(change, mapping, current)
        refusal = (self._in_flight(change, cell, current)
                   or self._row_differs(change, current))
        if refusal is None and self.rederive:
            return self._derived_again(change, cell)
        return refusal

    def _current_spec(self, change):
        """The instance's request_specs row as it is now (None: none)."""
        with exception.reraised_as(exception.ApiDatabaseError):
            with engines.synced_reads(self.context.api_engine) as conn:
                return api_queries.get_request_specs(
                    conn, [change.instance_uuid]).get(change.instance_uuid)

    def _settled_before(self, change, cell, current, reverted_by):
        """The Outcome if row ``current`` needs no write any more, or None.

        It was archived with its instance, or already holds the value to
        write, or an earlier revert (run ``reverted_by``) undid the change.
        """
        if (cell is None and current is None and reverted_by is None
                and change.action == spec_writer.DELETE):
            # Not reverted: the archive removed the row with the instance.
            return _archived()
        if _written(current, change):
            return _nothing_to_do('already-written',
                                  self._already_written(reverted_by))
        if reverted_by is not None and not _holds(current, change):
            # Whatever changed the row since, reverting again cannot
            # help: the run's change was undone once already.
            return _nothing_to_do(
                'already-reverted',
                'already reverted (by run %s); the row changed since and '
                'is left alone; nothing to do' % reverted_by)
        return None

    def _in_flight(self, change, cell, current):
        """The refusal while the instance forbids a write now, or None.

        The instance is deleted, or an operation is in flight (the skip
        rules of a heal). The unchanged row a run inserted for a deleted
        instance is removed all the same.
        """
        try:
            busy = self._busy(change, cell)
        except exception.CellDatabaseError as exc:
            return Outcome(Status.ERROR, 'cell-unreachable', str(exc))
        if not busy:
            return None
        code, detail = busy
        if code != 'instance-deleted':
            return Outcome(Status.CONFLICT, code, detail)
        if _own_insert_to_remove(current, change):
            # Nova leaves the row of a deleted instance to the archive;
            # the unchanged row the run inserted goes now.
            return None
        return Outcome(Status.SKIPPED, code, detail)

    def _row_differs(self, change, current):
        """The refusal if row ``current`` is not the one recorded, or None."""
        if (self.rederive and current is not None
                and change.action == spec_writer.UPDATE
                and current['id'] != change.spec_id):
            return Outcome(
                Status.ERROR, 'plan-spec-id-mismatch',
                'the plan names request_specs row %s; the instance\'s row '
                'is %s; left alone' % (change.spec_id, current['id']))
        if not _holds(current, change):
            return Outcome(
                Status.CONFLICT, 'spec-changed',
                'the spec no longer holds the recorded value; left alone')
        return None

    def _reverted_by(self, change):
        """The earlier revert run that undid ``change`` and still stands.

        The newest changes the audit store recorded as applied to the
        instance's spec are all those of reverts of the same run, and one
        of them wrote this very change. None if not (or this is no revert).
        """
        if self.revert_of is None:
            return None
        for applied in self.audit.applied_changes(change.instance_uuid):
            if (applied['run_id'] == self.run_id
                    or applied['mode'] != 'revert'
                    or applied['filters'].get('revert_of') != self.revert_of):
                return None
            if ((applied['action'], applied['before_digest'],
                 applied['after_digest']) == (
                    change.action, change.before_digest,
                    change.after_digest)):
                return applied['run_id']
        return None

    def _already_written(self, reverted_by):
        """The detail of a change the row already holds."""
        if reverted_by is not None:
            return ('already reverted (by run %s): the row already holds '
                    'the value to write back; nothing to do' % reverted_by)
        if self.revert_of is not None:
            return ('already reverted: the row already holds the value '
                    'the run replaced; nothing to do')
        return ('the row already holds the value to write (written '
                'before?); nothing to do')

    def _derived_again(self, change, cell):
        """None if a heal of the instance now writes ``change.after``.

        The decision is the heal's own, on the instance's current records
        and row, for the fields the change names; else the refusal.
        """
        if change.action != spec_writer.INSERT and not _known_fields(
                change.fields):
            return _not_derived('the plan names fields %s'
                                % ', '.join(map(str, change.fields)))
        fields, settings = self._heal_settings(change)
        try:
            found = records.read_instance(
                self.context.api_engine, self.context.cell_engine(cell),
                change.instance_uuid, fields, self.context.hinted_instances)
        except exception.DB_ERRORS as exc:
            return Outcome(Status.ERROR, 'cell-unreachable',
                           str(records.cell_error(cell, exc)))
        if not found:
            return Outcome(Status.SKIPPED, 'instance-deleted',
                           'the instance is gone')
        again = decisions.evaluate(found[0], cell, self.context.clock(),
                                   settings, self.context.profile)
        return _unlike_the_heal(again, change)

    def _heal_settings(self, change):
        """The fields a heal of ``change``'s instance reads, its Settings.

        Those the change names; a recreated spec is all of them.
        """
        if change.action == spec_writer.INSERT:
            return field_checks.FIELD_NAMES, dataclasses.replace(
                self.settings, create_missing=True,
                checked_fields=field_checks.FIELD_NAMES)
        fields = tuple(change.fields)
        return fields, dataclasses.replace(self.settings,
                                           checked_fields=fields)

    def _busy(self, change, cell):
        """The skip rule that forbids writing now, as (code, detail)."""
        uuid = change.instance_uuid
        engine = self.context.cell_engine(cell)
        try:
            with engines.synced_reads(engine) as conn:
                instance = cell_queries.get_instances(conn, [uuid]).get(uuid)
                migrations = cell_queries.get_migrations_in_progress(
                    conn, [uuid]).get(uuid, [])
        except exception.DB_ERRORS as exc:
            raise records.cell_error(cell, exc) from exc
        if instance is None:
            return 'instance-deleted', 'the instance is gone'
        record = decisions.InstanceRecord(instance=instance,
                                          migrations=migrations)
        return decisions.skip_reason(record, cell, self.context.clock(),
                                     self.settings)


def _invalid_record(change):
    """Why the value ``change`` would write cannot be trusted, or None.

    The value must be what was recorded with it (its digest) and a
    RequestSpec document of the change's instance and row. Audit rows
    and plans are inputs like any other: they may have been edited.
    """
    # A digest goes with every recorded text (None only with no text), so
    # a missing digest is as untrustworthy as a wrong one.
    if audit_store.digest(change.after) != change.after_digest:
        return 'the recorded value does not match its recorded digest'
    if change.action == spec_writer.DELETE:
        # Nothing is written; the row must hold exactly the recorded
        # text (checked by its digest) for it to go.
        return None
    problem = _not_the_spec_of(change.after, change.instance_uuid)
    if problem:
        return problem
    document = json.loads(change.after)
    spec_id = document['nova_object.data'].get('id')
    if spec_id is not None and spec_id != change.spec_id:
        return ('the recorded value is the document of request_specs row '
                '%r, not of row %s' % (spec_id, change.spec_id))
    return None


def _not_the_spec_of(text, instance_uuid):
    """Why ``text`` is not a RequestSpec of ``instance_uuid``, or None."""
    try:
        document = json.loads(text)
    except (TypeError, ValueError):
        return 'the new value is not JSON'
    data = (document.get('nova_object.data')
            if isinstance(document, dict) else None)
    if (not isinstance(data, dict)
            or document.get('nova_object.name') != 'RequestSpec'):
        return 'the new value is not a RequestSpec document'
    if data.get('instance_uuid') != instance_uuid:
        return 'the new value is the RequestSpec of another instance'
    return None


def _unmapped(change, mapping, current):
    """The refusal of ``change`` when no cell holds its instance, or None.

    The unchanged row a run inserted for an instance archived meanwhile
    (an orphan) is removed: nothing else removes it. ``mapping`` is the
    instance mapping (None if there is none), ``current`` the spec row.
    """
    if _own_insert_to_remove(current, change):
        return None
    if mapping is not None and mapping['cell_id'] is None:
        # Booting, as a run reports it: an operation in flight.
        return Outcome(Status.CONFLICT, 'not-scheduled',
                       'the instance mapping has no cell yet; left alone')
    if current is None and change.action != spec_writer.INSERT:
        return _archived()
    return Outcome(Status.ERROR, 'instance-not-mapped',
                   'no instance mapping with a cell')


def _known_fields(fields):
    """Whether ``fields`` are some of the fields a heal checks."""
    return bool(fields) and set(fields) <= set(field_checks.FIELD_NAMES)


def _unlike_the_heal(again, change):
    """Why evaluation ``again`` does not write ``change.after``, or None."""
    finding = again.finding
    if finding.status in (Status.ERROR, Status.SKIPPED):
        status = (Status.ERROR if finding.status is Status.ERROR
                  else Status.CONFLICT)
        return Outcome(status, finding.reason, finding.detail)
    if again.new_spec is None:
        return _not_derived('the spec is consistent with the instance now')
    if again.new_spec != change.after:
        return _not_derived(_mismatch(change.after, change.instance_uuid))
    return None


def _nothing_to_do(reason, detail):
    """The Outcome of a change the row needs no more: a notice."""
    return Outcome(Status.CONSISTENT, reason, detail,
                   notes=(Note(reason, detail),))


def _archived():
    """The refusal of a change whose instance was archived."""
    # nova-manage db archive_deleted_rows removes both.
    return Outcome(
        Status.SKIPPED, 'instance-deleted',
        'the instance was deleted and archived: it has no instance mapping '
        'and no request_specs row any more')


def _own_insert_to_remove(current, change):
    """Whether ``change`` deletes a row that still holds what was inserted.

    Such a row is removed whether or not its instance exists.
    """
    return change.action == spec_writer.DELETE and _holds(current, change)


def _not_derived(why):
    return Outcome(
        Status.ERROR, 'change-not-derived',
        '%s: the plan\'s new value is not what a heal writes now; left '
        'alone, write a new plan' % why)


def _mismatch(after, instance_uuid):
    """Why the plan's new value ``after`` is not the derived one."""
    return (_not_the_spec_of(after, instance_uuid)
            or 'the new value differs from the derived one')


def _holds(current, change):
    """Whether spec row ``current`` still holds ``change``'s before.

    Before an insert there must be no row.
    """
    if change.action == spec_writer.INSERT:
        return current is None
    return (current is not None and current['id'] == change.spec_id
            and current['spec'] == change.before
            and (not change.before_digest or audit_store.digest(
                current['spec']) == change.before_digest))


def _written(current, change):
    """Whether spec row ``current`` already is what ``change`` writes."""
    if change.action == spec_writer.DELETE:
        return current is None
    return (current is not None and current['spec'] == change.after
            and (change.action == spec_writer.INSERT
                 or current['id'] == change.spec_id))
