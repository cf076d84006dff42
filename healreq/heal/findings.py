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


"""What a run finds: per-instance findings, reason codes and summaries.

Reason codes are public: operators alert and search on them. Add new
codes freely; never rename or reuse one.
"""

import dataclasses
import enum

from healreq import exception
from healreq import nova_constants


class Status(str, enum.Enum):
    CONSISTENT = 'consistent'
    DRIFTED = 'drifted'
    HEALED = 'healed'
    SKIPPED = 'skipped'
    ERROR = 'error'
    CONFLICT = 'conflict'


# code -> one-line meaning, grouped by the status that carries it.
REASONS = {
    Status.DRIFTED: {
        'failed-resize-leftover':
            'the spec holds the flavor of a resize that failed '
            '(instance_extra.flavor["new"], or the new flavor of a resize '
            'migration in status error or failed) while the instance runs '
            'its current flavor',
        'old-flavor-leftover':
            'the spec holds the flavor the instance was resized away from '
            '(instance_extra.flavor["old"])',
        'legacy-spec':
            'the spec was saved by an old Nova and lacks fields that Nova '
            'now expects (is_bfv, user_id, project_id); Nova itself would '
            'add them at the next move',
        'group-lost':
            'the spec does not name the server group of which the '
            'instance is a member (instance_group null or without uuid, or '
            'no group scheduler hint): moves fail in the conductor, and a '
            'forced evacuation ignores the group\'s policy',
        'group-without-uuid':
            'the spec holds a server group without uuid and without a '
            'group scheduler hint (the shape of bug 1830747) while the '
            'instance is a member of no group: Nova cannot load the spec '
            '(GET /servers/{id} fails from microversion 2.96, and so do '
            'moves); the group is removed (instance_group null), as Nova '
            'stores it for an instance in no group',
        'az-pin-differs':
            'the pinned availability zone (the spec\'s availability_zone) '
            'is not the zone the instance is in, as after a forced live '
            'migration or evacuation at microversion 2.67 or older; every '
            'later move is filtered back to the pin. Rewritten only as '
            '--az-policy says (repin, unpin); with report it counts as '
            'drift and nothing is written',
        'internal-hint-persisted':
            'the spec holds scheduler hints that are Nova\'s own '
            '(_nova*), persisted by a rebuild with a new image of a spec '
            'saved again on the way (one without is_bfv, from before '
            'Rocky), or sent by a user at boot before Nova 34: every later '
            'move is then scheduled as a rebuild, which skips Placement and '
            'claims nothing on the destination. The internal hints are '
            'removed, every other hint kept; forced hosts and nodes stored '
            'with a rebuild\'s hint are reset (null) as Nova resets them',
        'same-host-gone':
            'the same_host scheduler hint names instances that no longer '
            'exist in any cell (deleted, or archived with their mapping); '
            'the detail names them. SameHostFilter passes only hosts that '
            'run an instance the hint names, so once all are gone every '
            'move ends in NoValidHost. Rewritten only as --hint-policy '
            'says (prune: the gone uuids are removed, with any entry '
            'that is not a string, which names no instance either and '
            'which the change names, and the key when none is left); with '
            'report it counts as drift and nothing is written',
        'flavor-propagated':
            'the spec\'s flavor equals the instance\'s embedded flavor '
            '(instance_extra.flavor["cur"]) in everything but extra specs, '
            'and its extra specs are the flavor\'s current definition '
            '(flavors and flavor_extra_specs, same flavorid, not deleted): '
            'an operator rewrote the spec from the changed flavor so that '
            'later moves follow it. The detail names the extra specs that '
            'differ. Rewritten to the instance record only with '
            '--flavor-policy instance; with report it counts as drift and '
            'nothing is written',
        'spec-missing':
            'the instance had no request_specs row; with --create-missing '
            'one is built from the instance record as Nova builds one from '
            'components, and inserted',
        'spec-drift':
            'the spec disagrees with the instance record; the records do '
            'not show why (for example a rebuild before Nova blocked '
            'NUMA-changing rebuilds)',
        'recorded-change':
            'apply or revert: a value recorded in a plan or in the audit '
            'is (with --dry-run: would be) written back',
    },
    Status.SKIPPED: {
        'cell0': 'the instance is in cell0 (never scheduled)',
        'not-scheduled':
            'the instance mapping has no cell yet: the instance is being '
            'built (the conductor creates the instances of a multi-create '
            'in their cell before it maps each of them). A walk reports it '
            'so when the instance it finds in a cell is building or has a '
            'task; --instance without reading the cells',
        'instance-deleted':
            'the instance is deleted (for revert and apply also: deleted '
            'and archived, its instance mapping and request_specs row '
            'gone)',
        'queued-for-delete': 'the instance was deleted through the API',
        'hidden': 'inactive copy of an instance during a cross-cell resize',
        'soft-deleted': 'vm_state is soft-delete',
        'building': 'vm_state is building',
        'task-in-progress': 'task_state is set: an operation is in flight',
        'resize-awaiting-confirm':
            'vm_state is resized: the spec legitimately holds the new '
            'flavor until the resize is confirmed or reverted',
        'migration-in-progress':
            'a migration of the instance is not in a terminal status (%s; '
            'finished counts as in progress)'
            % ', '.join(nova_constants.TERMINAL_MIGRATION_STATUSES),
        'recently-updated':
            'the instance was updated within [healreq]/skip_updated_within '
            'seconds',
        'no-host': 'the instance has no host and is not shelved-offloaded',
    },
    Status.ERROR: {
        'spec-missing': 'no request_specs row for a live instance',
        'spec-unparsable': 'request_specs.spec is not a usable RequestSpec',
        'instance-extra-missing': 'no live instance_extra row',
        'instance-extra-duplicate':
            'more than one live instance_extra row; Nova reads an '
            'arbitrary one',
        'instance-flavor-missing': 'instance_extra.flavor is NULL',
        'instance-flavor-unparsable':
            'instance_extra.flavor is not a usable flavor document',
        'instance-flavor-inconsistent':
            'instances.instance_type_id (or the vcpus, memory or disk '
            'columns that mirror the flavor) disagrees with '
            'instance_extra.flavor["cur"]; the instance record itself '
            'needs attention, so the spec is not touched',
        'instance-image-invalid':
            'the image system metadata holds a value Nova rejects '
            '(ImageMeta.from_instance would raise); the detail gives '
            'Nova\'s reason',
        'instance-image-inconsistent':
            'instances.image_ref disagrees with image_base_image_ref in '
            'system metadata (a failed rebuild?)',
        'numa-constraints-invalid':
            'Nova refuses the NUMA request of the instance\'s flavor and '
            'image (numa_get_constraints would raise); the detail names '
            'Nova\'s exception',
        'instance-pci-unparsable':
            'instance_extra.pci_requests is not a usable list of requests',
        'spec-owner-mismatch':
            'the spec names another project or user than the instance; '
            'Nova never changes the owner, so this is corruption for a '
            'human to look at',
        'spec-group-not-member':
            'the spec names a server group (as its instance_group or its '
            'group scheduler hint) of which the instance is not a member: '
            'it is in another group, or in none. Membership does not say '
            'which group the spec should name; nothing is written',
        'spec-group-gone':
            'the spec names a server group (as its instance_group or its '
            'group scheduler hint) that no longer exists, whether the '
            'instance is a member of another group or of none. Nova '
            'loads such a spec without the group, and without the group '
            'hint unless the hint alone names it, and an evacuation\'s '
            'destination finds no group by a hint it kept. Moves succeed '
            'and ignore the deleted group\'s policy; a cold migration of '
            'a spec whose instance_group names it saves the spec without '
            'group or hint. Membership does not say which group the spec '
            'should name; nothing is written',
        'instance-in-several-groups':
            'the instance is a member of more than one server group '
            '(Nova\'s API forbids it, but the database allows it) and the '
            'spec names one of them (as its instance_group or its group '
            'scheduler hint) that is not the one Nova reads as the '
            'instance\'s group, its first membership. The detail names '
            'every group of the instance. Membership does not say which '
            'group the spec should name; nothing is written',
        'group-unloadable':
            'the server group of the instance has policy rules Nova cannot '
            'load',
        'spec-instance-mismatch':
            'the spec document names another instance than its row; '
            'nothing is written',
        'object-version-downgrade':
            'the heal would write an object at a lower version than the '
            'spec holds (the release looks misjudged); nothing is written '
            'unless the release is named with --target-release',
        'image-property-would-be-lost':
            'the heal would drop an image property that both the spec and '
            'the instance record hold (the release looks misjudged); '
            'nothing is written unless the release is named with '
            '--target-release',
        'audit-record-invalid':
            'revert or apply: the value to write back does not match its '
            'recorded digest, or is not a RequestSpec of that instance '
            'and row; nothing is written',
        'spec-version-too-old':
            'a missing field cannot be added: the spec\'s RequestSpec '
            'version lacks it and the deployment writes no newer one',
        'numa-version-incompatible':
            'the derived NUMA request cannot be expressed at an object '
            'version the deployment loads',
        'image-version-incompatible':
            'the derived image cannot be expressed at the object version '
            'the deployment uses',
        'instance-not-mapped': 'no instance_mappings row for the instance',
        'cell-unreachable':
            'apply or revert: the instance\'s cell database cannot be '
            'read to check that no operation is in flight',
        'instance-mapped-elsewhere':
            'the instance mapping points to another cell, or to none, '
            'while the instance has no operation in flight (an instance in '
            'flight is skipped by its skip rule first, as both copies of an '
            'instance during a cross-cell resize are); with --instance, '
            'the instance is then looked for in the other cells',
        'internal-error':
            'evaluating or writing the instance failed unexpectedly, for '
            'example a spec nested too deeply to be written back (the '
            'detail names the exception); nothing is written for it and '
            'the run goes on',
        'write-failed':
            'the API database refused the compare-and-swap of this '
            'instance while it kept serving others (for example a '
            'statement over max_allowed_packet); nothing is written and '
            'the audited intent is settled as refused. An API database '
            'that can no longer be reached still ends the run',
        'change-not-derived':
            'apply: the plan\'s new value is not what a heal would write '
            'for the instance now (not JSON, not a RequestSpec of that '
            'instance, or not the derived value: the instance changed '
            'since the plan was written, or the plan was altered); nothing '
            'is written. Write a new plan',
        'plan-spec-id-mismatch':
            'apply: the plan names another request_specs row than the '
            'instance\'s; nothing is written',
    },
    Status.CONFLICT: {
        'spec-changed':
            'request_specs.spec changed between read and write; left alone',
        'instance-changed':
            'the instance record changed between read and write (for '
            'example an operation started, or the instance mapping of a '
            'spec being recreated moved to another cell); left alone',
        'spec-locked':
            'another session held a lock on the request_specs row (or, '
            'for a spec being recreated, on the instance_mappings row) '
            'for longer than [healreq]/lock_wait_timeout; left alone',
        'spec-contended':
            'the write of the request_specs row kept colliding with '
            'concurrent writes of other sessions (deadlocks, or Galera '
            'certification failures of writes through other nodes) for '
            '[healreq]/lock_wait_timeout while the row held what was read, '
            'each retry logged as a warning; left alone',
    },
}

# Notes describe something worth knowing that does not block a heal.
NOTES = {
    'flavor-leftover-new':
        'instance_extra.flavor["new"] is set but no migration is in '
        'progress (a failed resize was never cleaned up)',
    'flavor-leftover-old':
        'instance_extra.flavor["old"] is set but no migration is in '
        'progress',
    'forced': '--force overrode a skip rule for this instance',
    'az-pin-gone':
        'no host is in the pinned zone. If only aggregates without a host '
        'carry it, Nova\'s scheduler still requires those aggregates and '
        'every move fails with NoValidHost; if no aggregate carries it, '
        'the scheduler requires none and may place the instance on any '
        'host, ignoring the pin (on Zed, an enabled AvailabilityZoneFilter '
        'finds no host instead)',
    'az-pin-left':
        'the pin differs from the instance\'s zone (az-pin-differs) and '
        'is left as --az-policy report says, while the other drifted '
        'fields are healed: availability_zone stays in drift and in '
        'reported_only, and the next run reports the pin again',
    'same-host-left':
        'the same_host hint names gone instances (same-host-gone) and is '
        'left as --hint-policy report says, while the other drifted '
        'fields are healed (Nova\'s internal hints, if the spec holds '
        'any, are removed from the same scheduler_hints): scheduler_hints '
        'stays in drift and in reported_only, and the next run reports '
        'the hint again',
    'same-host-unverified':
        'the same_host hint names instances that no cell which could be '
        'read holds live, and a cell could not be read (the detail names '
        'it): they are not taken for gone, and nothing is written for '
        'them',
    'different-host-gone':
        'the different_host hint names instances that no longer exist; '
        'DifferentHostFilter passes every host for them, so moves are not '
        'affected and the hint is left as it is',
    'flavor-propagated-left':
        'the spec\'s flavor is the flavor\'s current definition '
        '(flavor-propagated) and is left as --flavor-policy report says, '
        'while the other drifted fields are healed: flavor stays in drift '
        'and in reported_only, and the next run reports it again',
    'host-az-differs':
        'the zone of the instance\'s host by its aggregates is not '
        'instances.availability_zone',
    'already-written':
        'revert or apply: the row already holds the value to write (the '
        'run was reverted, or the plan applied, before; the detail names '
        'the earlier revert the audit store recorded)',
    'already-reverted':
        'revert: an earlier revert of the same run (named in the detail) '
        'undid the change, and the row changed since; reverting again '
        'cannot help, nothing is written',
}


@dataclasses.dataclass(frozen=True)
class Note:
    code: str
    detail: str


@dataclasses.dataclass(frozen=True)
class FieldChange:
    """One drifted RequestSpec field, as shown to the operator.

    ``rewritten`` is False for drift that is only reported (a zone pin
    under --az-policy report): it counts, and nothing is written for it.
    ``partly_reported`` marks a rewritten field part of whose drift is
    only reported (internal hints removed, a gone same_host kept under
    --hint-policy report): it is listed as both.
    """
    field: str
    before: str
    after: str
    rewritten: bool = True
    partly_reported: bool = False

    def __str__(self):
        return '%s: %s -> %s' % (self.field, self.before, self.after)


@dataclasses.dataclass
class Finding:
    """The outcome for one instance."""
    instance_uuid: str
    cell_uuid: str
    status: Status
    reason: str = None
    detail: str = None
    changes: list = dataclasses.field(default_factory=list)
    notes: list = dataclasses.field(default_factory=list)
    # The extra specs in which the embedded flavor differs from the
    # flavor's current definition (it is older), or None. Information,
    # not drift.
    flavor_outdated: list = None

    @property
    def drift(self):
        """Every drifted field, rewritten or only reported."""
        return [change.field for change in self.changes]

    @property
    def reported_only(self):
        """The drifted fields whose drift, or part of it, is never written."""
        return [change.field for change in self.changes
                if not change.rewritten or change.partly_reported]

    @property
    def rewritten(self):
        """The drifted fields a heal writes (with --dry-run: would)."""
        return [change.field for change in self.changes if change.rewritten]

    @property
    def only_reported(self):
        """Whether this is drift of which nothing is written, or would be.

        Every drifted field is only reported, as its policy says.
        """
        return (self.status is Status.DRIFTED and bool(self.changes)
                and not self.rewritten)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How the write a finding asked for ended: its final status and why.

    A write made (HEALED), or that a dry run would make (DRIFTED), keeps
    the finding's reason and detail, which explain the drift. Any other
    outcome refuses the write and gives its own ``reason`` and
    ``detail``; ``drop_changes`` when none of the finding's changes was
    made (the instance is an error), ``notes`` are added to the
    finding's.
    """
    status: Status
    reason: str = None
    detail: str = None
    drop_changes: bool = False
    notes: tuple = ()

    @property
    def refused(self):
        """Whether the write was refused (not made, nor to be made)."""
        return self.status not in (Status.HEALED, Status.DRIFTED)


# The change was written; what a dry run would write.
WRITTEN = Outcome(Status.HEALED)
WOULD_WRITE = Outcome(Status.DRIFTED)


def settle(finding, outcome):
    """The Finding ``finding`` becomes once its write ended as ``outcome``.

    The one place where a decided finding takes its final status.
    """
    if not outcome.refused:
        return dataclasses.replace(finding, status=outcome.status)
    return dataclasses.replace(
        finding, status=outcome.status, reason=outcome.reason,
        detail=outcome.detail,
        changes=[] if outcome.drop_changes else finding.changes,
        notes=finding.notes + list(outcome.notes))


@dataclasses.dataclass
class CellReport:
    """Per-cell counters, plus the error that stopped the cell, if any."""
    uuid: str
    name: str
    checked: int = 0
    consistent: int = 0
    drifted: int = 0
    healed: int = 0
    skipped: int = 0
    errors: int = 0
    conflicts: int = 0
    error: str = None
    # Instances whose embedded flavor is older than its definition.
    flavor_outdated: int = 0
    # Drifted instances of which nothing is written (only reported).
    reported_only: int = 0

    def count(self, finding):
        self.checked += 1
        if finding.flavor_outdated:
            self.flavor_outdated += 1
        if finding.only_reported:
            self.reported_only += 1
        attribute = {Status.CONSISTENT: 'consistent',
                     Status.DRIFTED: 'drifted',
                     Status.HEALED: 'healed',
                     Status.SKIPPED: 'skipped',
                     Status.ERROR: 'errors',
                     Status.CONFLICT: 'conflicts'}[finding.status]
        setattr(self, attribute, getattr(self, attribute) + 1)


SUMMARY_KEYS = ('instances_checked', 'consistent', 'drifted', 'healed',
                'skipped', 'errors', 'conflicts')


@dataclasses.dataclass
class RunReport:
    """Everything a run found; consistent instances are only counted."""
    dry_run: bool
    cells: list = dataclasses.field(default_factory=list)
    findings: list = dataclasses.field(default_factory=list)
    notices: list = dataclasses.field(default_factory=list)
    # The findings of instances whose embedded flavor is older than its
    # current definition (Finding.flavor_outdated), whatever their status.
    outdated_flavors: list = dataclasses.field(default_factory=list)
    # (finding, spec row, new spec text) of each would-be heal, for --plan.
    planned: list = dataclasses.field(default_factory=list)
    more_remain: bool = False
    # The releases.Detection whose rules the run applied.
    release: object = None
    # The line of the audit store error that stopped recording findings.
    audit_error: str = None

    def summary(self):
        totals = dict.fromkeys(SUMMARY_KEYS, 0)
        for cell in self.cells:
            totals['instances_checked'] += cell.checked
            for key in SUMMARY_KEYS[1:]:
                totals[key] += getattr(cell, key)
        totals['cells_failed'] = sum(1 for c in self.cells if c.error)
        totals['flavor_outdated'] = sum(c.flavor_outdated
                                        for c in self.cells)
        totals['reported_only'] = sum(c.reported_only for c in self.cells)
        return totals

    def reported_only_fields(self):
        """The fields of the drift of which nothing is written, sorted."""
        return sorted({field for finding in self.findings
                       if finding.only_reported
                       for field in finding.reported_only})


def keep(finding, findings, notices, outdated=None):
    """Keep ``finding`` where a report shows it, once it is counted.

    A consistent instance is only counted, unless the finding has notes:
    it then goes to ``notices``. Every other finding goes to ``findings``.
    An instance whose embedded flavor is older than its definition also
    goes to ``outdated``, if given.
    """
    if finding.flavor_outdated and outdated is not None:
        outdated.append(finding)
    if finding.status is Status.CONSISTENT:
        if finding.notes:
            notices.append(finding)
    else:
        findings.append(finding)


def record(audit, run_id, findings, report):
    """Record ``findings`` of run ``run_id`` in the AuditStore ``audit``.

    Findings only describe the run; its changes are recorded apart,
    before each write. A store that refuses findings therefore stops
    their recording, not the run: the error's line becomes
    ``report.audit_error`` (a RunReport; the run's exit code says it).
    Returns the AuditStoreError, or None once they are recorded.
    """
    try:
        audit.record_findings(run_id, findings)
    except exception.AuditStoreError as exc:
        report.audit_error = exc.line()
        return exc
    return None
