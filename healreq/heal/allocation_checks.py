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

"""``nova-heal allocations``: compare an instance's allocations with Nova's.

Pure: an AllocationRecord (the instance's rows, its migrations, the
compute node it runs on and the allocations of its consumers, as read),
and what Nova would allocate for it (``expected``, from
``healreq.objects.allocations``) -> an AllocationResult with its status,
problems, consumers and remedy. Reason codes are public (ALLOCATION_REASONS);
add freely, never rename or reuse one.
"""

import dataclasses
import typing

from healreq.heal import audit_report
from healreq.heal import decisions
from healreq import nova_constants

MISMATCH = 'mismatch'
PENDING = 'pending'
SKIPPED = 'skipped'
ERROR = 'error'
CONSISTENT = 'consistent'
STATUSES = (MISMATCH, PENDING, SKIPPED, ERROR)

# The classes healreq derives on the compute node's provider: only these
# are compared; a consumer's other classes (VGPU on a child provider,
# port bandwidth, accelerators) are neither found wrong nor required.
DERIVED_CLASSES = ('VCPU', 'PCPU', 'MEMORY_MB', 'DISK_GB')

# Migration statuses after which a migration consumer holds nothing.
ENDED_MIGRATION_STATUSES = nova_constants.TERMINAL_MIGRATION_STATUSES

# code -> one-line meaning, by the status that carries it. The operator
# guide is generated from this table.
ALLOCATION_REASONS = {
    MISMATCH: {
        'wrong-flavor':
            'the instance\'s consumer holds, on the provider of its compute '
            'node, other amounts than its current flavor (and image) '
            'derive, as after a resize whose finish_migration failed',
        'wrong-provider':
            'the instance\'s consumer holds derived resources on a provider '
            'other than its compute node\'s, as after a live migration that '
            'failed in the source\'s driver',
        'missing':
            'the instance\'s consumer holds nothing while its flavor '
            'derives resources',
        'leftover-migration':
            'a migration consumer still holds resources after its '
            'migration ended (confirmed, reverted, completed, error, '
            'failed, done, cancelled), or its migration row or its '
            'instance is deleted',
        'unexpected':
            'the instance\'s consumer holds resources where Nova expects '
            'none (shelved-offloaded, no host, or a deleted instance)',
    },
    PENDING: {
        'evacuation-not-cleaned':
            'an evacuation is done but its source compute has not cleaned '
            'up yet: the instance\'s consumer legitimately holds the '
            'source and the destination until then',
    },
    SKIPPED: {
        'not-scheduled':
            'its instance mapping names no cell yet and no cell holds it: '
            'Nova is still scheduling it',
        'task-in-progress': 'task_state is set: an operation is in flight',
        'building': 'vm_state is building',
        'resize-awaiting-confirm':
            'vm_state is resized: the migration consumer holds the old '
            'flavor until the resize is confirmed or reverted',
        'migration-in-progress':
            'a migration of the instance has not ended (finished, '
            'awaiting confirmation, counts as in progress)',
        'hidden': 'inactive copy of an instance during a cross-cell resize',
        'instance-deleted':
            'the instance is deleted (its leftover migration consumers are '
            'still reported)',
        'ironic':
            'the instance runs on an ironic node: its custom resource '
            'class is not checked',
    },
    ERROR: {
        'instance-extra-missing': 'no live instance_extra row',
        'instance-flavor-unparsable':
            'instance_extra.flavor is missing or not a usable flavor '
            'document',
        'instance-image-invalid':
            'Nova cannot build the image from system metadata',
        'compute-node-missing':
            'no live compute node has the instance\'s host and node',
        'derivation-failed':
            'the resources of the flavor and image cannot be derived',
        'instance-mapped-elsewhere':
            '--instance only: the instance mapping points to another cell '
            'than the one holding the instance, or to none, while no '
            'operation is in flight (an instance in flight is judged by '
            'its skip rule first, as request-specs does); its allocations '
            'are not compared',
    },
}


@dataclasses.dataclass
class AllocationRecord:
    """What the comparison of one instance needs, as read.

    ``instance`` has uuid, host, node, vm_state, task_state, deleted,
    hidden, project_id, user_id; ``migrations`` are its migration rows
    (soft-deleted ones included); ``compute_node`` the live compute node
    of its host and node, or None; ``found`` the allocations of its
    consumers, ``{consumer uuid: {provider uuid: {class: amount}}}``.
    """
    instance: dict
    cell_uuid: str
    migrations: list = dataclasses.field(default_factory=list)
    compute_node: dict = None
    found: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Consumer:
    consumer_uuid: str
    kind: str  # 'instance' or 'migration'
    provider_uuid: str
    found: dict
    expected: dict

    def as_dict(self):
        return dataclasses.asdict(self)


@dataclasses.dataclass
class AllocationResult:
    """The outcome for one instance (or one orphaned migration consumer)."""
    instance_uuid: str
    cell_uuid: str
    status: str
    problems: list = dataclasses.field(default_factory=list)
    consumers: list = dataclasses.field(default_factory=list)
    remedy: list = dataclasses.field(default_factory=list)
    reason: str = None
    message: str = None
    not_checked: tuple = ()

    def as_dict(self):
        result = {'instance_uuid': self.instance_uuid,
                  'cell_uuid': self.cell_uuid, 'status': self.status,
                  'problems': list(self.problems),
                  'consumers': [c.as_dict() for c in self.consumers],
                  'remedy': list(self.remedy)}
        return audit_report.with_optional(result, self)


def skip_reason(record):
    """``(status, reason)`` if the instance is not compared now, else None.

    Operations in flight are never judged: their allocations are moving.
    """
    instance = record.instance
    if instance['deleted']:
        return SKIPPED, 'instance-deleted'
    if instance.get('hidden'):
        return SKIPPED, 'hidden'
    if instance['task_state']:
        return SKIPPED, 'task-in-progress'
    if instance['vm_state'] == 'building':
        return SKIPPED, 'building'
    if instance['vm_state'] == 'resized':
        return SKIPPED, 'resize-awaiting-confirm'
    live = [m for m in record.migrations if not m['deleted']]
    if any(m['status'] not in ENDED_MIGRATION_STATUSES for m in live):
        return SKIPPED, 'migration-in-progress'
    if any(_evacuation_not_cleaned(m) for m in live):
        return PENDING, 'evacuation-not-cleaned'
    return None


def _evacuation_not_cleaned(migration):
    # The destination sets 'done'; the source's cleanup, 'completed'.
    return (migration['migration_type'] == 'evacuation'
            and migration['status'] == 'done')


def leftover_migrations(record):
    """The migrations of ``record`` whose consumer should hold nothing."""
    leftovers = []
    for migration in record.migrations:
        if migration['uuid'] not in record.found:
            continue
        ended = migration['status'] in ENDED_MIGRATION_STATUSES
        if ended or migration['deleted'] or record.instance['deleted']:
            leftovers.append(migration)
    return leftovers


def derived_part(allocations):
    """``{provider: {class: amount}}`` of the derived classes only."""
    part = {}
    for provider, by_class in allocations.items():
        kept = {name: amount for name, amount in by_class.items()
                if name in DERIVED_CLASSES and amount}
        if kept:
            part[provider] = kept
    return part


def evaluate(record, expected=None, heal_resources=None):
    """The AllocationResult of ``record``, or None if it is consistent.

    ``expected`` is the Expected of the instance's current flavor and
    image (``resources``, ``not_checked``), None where Nova expects no
    allocation (shelved-offloaded, no host); ``heal_resources`` what
    ``nova-manage placement heal_allocations`` would derive, to tell
    whether its ``--force`` would be right.
    """
    instance = record.instance
    result = AllocationResult(instance['uuid'], record.cell_uuid, MISMATCH)
    leftovers = leftover_migrations(record)
    for migration in leftovers:
        _add_leftover(result, record, migration)
    skipped = skip_reason(record)
    if skipped is not None:
        if skipped[1] == 'instance-deleted':
            _add_unexpected_own(result, record)
            if result.problems:
                return result
        result.status, result.reason = skipped
        result.problems = []
        result.consumers = []
        result.remedy = []
        return result
    if expected is None:
        _add_unexpected_own(result, record)
    else:
        result.not_checked = tuple(expected.not_checked)
        _compare_own(result, record, expected, heal_resources)
    return result if result.problems else None


def _add_leftover(result, record, migration):
    _add_problem(result, 'leftover-migration')
    for provider, by_class in sorted(record.found[migration['uuid']].items()):
        result.consumers.append(Consumer(migration['uuid'], 'migration',
                                         provider, dict(by_class), {}))
    result.remedy.append('openstack resource provider allocation delete %s'
                         % migration['uuid'])


def _add_unexpected_own(result, record):
    uuid = record.instance['uuid']
    own = record.found.get(uuid)
    if not own:
        return
    _add_problem(result, 'unexpected')
    for provider, by_class in sorted(own.items()):
        result.consumers.append(Consumer(uuid, 'instance', provider,
                                         dict(by_class), {}))
    result.remedy.append('openstack resource provider allocation delete %s'
                         % uuid)


def _compare_own(result, record, expected, heal_resources):
    uuid = record.instance['uuid']
    provider = record.compute_node['uuid']
    wanted = {name: amount for name, amount in expected.resources.items()
              if amount}
    own = record.found.get(uuid, {})
    found = derived_part(own)
    found, shared = _apart_shared_disk(found, provider, wanted)
    if shared:
        result.not_checked = tuple(sorted(set(result.not_checked)
                                          | {'shared-storage disk'}))
        wanted = {k: v for k, v in wanted.items() if k != 'DISK_GB'}
    if found == ({provider: wanted} if wanted else {}):
        return
    if not own:
        code = 'missing'
    elif set(found) - {provider}:
        code = 'wrong-provider'
    else:
        code = 'wrong-flavor'
    _add_problem(result, code)
    providers = sorted(set(found) | {provider})
    for each in providers:
        result.consumers.append(Consumer(
            uuid, 'instance', each, dict(found.get(each, {})),
            dict(wanted) if each == provider else {}))
    result.remedy.extend(_heal_commands(record, provider, expected,
                                        heal_resources, code))


def _apart_shared_disk(found, provider, wanted):
    """Leave out DISK_GB held alone on another provider (shared storage).

    ``(found without it, whether it was)``: healreq does not read which
    providers share storage with the compute node, so such disk is
    reported as not checked rather than guessed.
    """
    others = [p for p, by_class in found.items()
              if p != provider and set(by_class) == {'DISK_GB'}]
    if not others or 'DISK_GB' in found.get(provider, {}):
        return found, False
    return {p: by_class for p, by_class in found.items()
            if p not in others}, True


def _heal_commands(record, provider, expected, heal_resources, code):
    uuid = record.instance['uuid']
    wanted = dict(expected.resources)
    if heal_resources is None or _nonzero(heal_resources) == _nonzero(
            wanted):
        force = '' if code == 'missing' else ' --force'
        return ['nova-manage placement heal_allocations --instance %s%s'
                % (uuid, force)]
    amounts = ','.join('%s=%d' % (name, amount)
                       for name, amount in sorted(wanted.items()) if amount)
    return ['# heal_allocations would allocate %s, not what the scheduler '
            'allocates (%s): set the allocation instead'
            % (_text(heal_resources), _text(wanted)),
            'openstack --os-placement-api-version 1.28 resource provider '
            'allocation set %s --allocation rp=%s,%s --project-id %s '
            '--user-id %s' % (uuid, provider, amounts,
                              record.instance['project_id'],
                              record.instance['user_id'])]


def _nonzero(resources):
    return {name: amount for name, amount in resources.items() if amount}


def _text(resources):
    return ', '.join('%s=%d' % item for item in sorted(
        _nonzero(resources).items()))


def _add_problem(result, code):
    if code not in result.problems:
        result.problems.append(code)


def error_result(record, reason, message):
    """The AllocationResult of an instance that cannot be evaluated."""
    return AllocationResult(record.instance['uuid'], record.cell_uuid,
                            ERROR, reason=reason, message=message)


def unscheduled_result(instance_uuid):
    """The AllocationResult of an instance Nova has not scheduled yet."""
    return AllocationResult(instance_uuid, None, SKIPPED,
                            reason='not-scheduled',
                            message='the instance mapping has no cell yet')


def misplaced_result(record, mapping, cell):
    """The error of an instance found in a cell its mapping does not name.

    None if ``mapping`` (its instance_mappings row) names ``cell``, or if
    an operation is in flight: Nova moves the mapping during some, and
    request-specs, whose wording this is, skips the instance first too.
    """
    if skip_reason(record) is not None:
        return None
    problem = decisions.mapping_problem(mapping, cell)
    if problem is None:
        return None
    return error_result(record, *problem)


def orphan_result(cell_uuid, instance, migration, found):
    """The result of a migration consumer whose instance was not walked.

    ``instance`` is its instance row (None once archived); ``found`` the
    consumer's allocations. None unless the consumer is a leftover (its
    migration ended or is deleted, or its instance is deleted): nothing
    else is judged for the instance.
    """
    if instance is None:
        instance = {'uuid': migration['instance_uuid'], 'deleted': 1}
    record = AllocationRecord(instance=instance, cell_uuid=cell_uuid,
                              migrations=[migration],
                              found={migration['uuid']: found})
    if not leftover_migrations(record):
        return None
    result = AllocationResult(migration['instance_uuid'], cell_uuid,
                              MISMATCH)
    _add_leftover(result, record, migration)
    return result


@dataclasses.dataclass
class AllocationReport(audit_report.AuditReport):
    """What a run of ``allocations`` found, in walk order."""
    PROBLEMS: typing.ClassVar[tuple] = tuple(ALLOCATION_REASONS[MISMATCH])
    instances_checked: int = 0
    release: object = None
    unattributed: int = 0

    def summary(self):
        return {'instances_checked': self.instances_checked,
                'mismatched': self.count(MISMATCH),
                'pending': self.count(PENDING),
                'skipped': self.count(SKIPPED),
                'errors': self.count(ERROR) + len(self.cell_errors)}
