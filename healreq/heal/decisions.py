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


"""Pure decisions for one instance: skip it, fail it, or compare it.

Nothing here touches a database: the engine hands in the rows it read
for a batch and gets back a finding and, for drift, the healed spec text.
"""

import dataclasses
import datetime

from healreq import conf
from healreq.heal import field_checks
from healreq.heal.findings import FieldChange
from healreq.heal.findings import Finding
from healreq.heal.findings import Note
from healreq.heal.findings import Status
from healreq.heal import recreate
from healreq import nova_constants
from healreq.objects import flavor as flavor_obj
from healreq.objects import image as image_obj
from healreq.objects import primitive
from healreq.objects import request_spec
from healreq.objects import versions
from healreq import policies

# Skip rules that --force may override for a single instance: they guard
# against stale records (a migration row stuck in a non-terminal status,
# an updated_at in the future) rather than against a running operation.
FORCEABLE_SKIPS = frozenset(['migration-in-progress', 'recently-updated',
                             'no-host'])

# The forced destinations a rebuild persists with its internal hint
# (internal-hint-persisted).
FORCED_FIELDS = frozenset(['force_hosts', 'force_nodes'])

# Flavor mirrors kept on the instances row (Instance._set_instance_info).
_MIRRORED_SIZES = ('vcpus', 'memory_mb', 'root_gb', 'ephemeral_gb')


@dataclasses.dataclass
class InstanceRecord:
    """Everything read about one instance for one batch.

    ``system_metadata`` holds ``(key, value, deleted)`` tuples in row id
    order.
    """
    instance: dict
    mapping: dict = None
    extras: list = dataclasses.field(default_factory=list)
    migrations: list = dataclasses.field(default_factory=list)
    spec_row: dict = None
    failed_resize_flavor_ids: frozenset = frozenset()
    system_metadata: list = dataclasses.field(default_factory=list)
    block_devices: list = dataclasses.field(default_factory=list)
    spec: request_spec.RequestSpecDocument = None
    spec_error: str = None
    # The server groups of the instance (membership rows, first is
    # Nova's) and which group uuids named by the batch's specs exist.
    groups: list = dataclasses.field(default_factory=list)
    known_groups: frozenset = frozenset()
    # The zones of its host's aggregates; every zone an aggregate with a
    # host carries; the zones only aggregates without hosts carry.
    host_zones: list = dataclasses.field(default_factory=list)
    zones: frozenset = frozenset()
    hostless_zones: frozenset = frozenset()
    # Of the instance uuids the batch's scheduler hints name: those gone
    # from every cell, and those only unreadable cells may hold (uuid ->
    # the uuids of those cells).
    gone_instances: frozenset = frozenset()
    unverified_instances: dict = dataclasses.field(default_factory=dict)
    # The current definitions of the batch's flavors, by flavorid
    # ({'id', 'extra_specs'}); a deleted flavor has none.
    flavor_definitions: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Settings:
    """How ``evaluate`` decides, for a run.

    A setting read from the configuration defaults to its option's
    default, as does every setting of the command line to its
    argument's: ``api.Options.from_conf`` reads the configured values.
    """
    # [healreq]/skip_updated_within; --force overrides it.
    skip_updated_within: int = conf.option(
        'healreq', 'skip_updated_within').default
    force: bool = False
    checked_fields: tuple = field_checks.FIELD_NAMES
    # --az-policy, --create-missing, [DEFAULT]/default_availability_zone.
    az_policy: str = policies.DEFAULT
    create_missing: bool = False
    default_zone: str = field_checks.DEFAULT_ZONE
    # --hint-policy.
    hint_policy: str = policies.DEFAULT
    # --flavor-policy.
    flavor_policy: str = policies.DEFAULT

    @property
    def read_fields(self):
        """The fields whose rows are read.

        A spec recreated from the instance record needs the rows of every
        field, whatever --fields checks.
        """
        if self.create_missing:
            return field_checks.FIELD_NAMES
        return self.checked_fields


@dataclasses.dataclass
class Evaluation:
    finding: Finding
    new_spec: str = None


class _Decided(Exception):
    """Raised to end an evaluation early: the finding is decided."""

    def __init__(self, status, reason, detail):
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail


def parse_spec(record):
    """Parse the record's spec row and keep the result on the record.

    A run does this once per batch; ``evaluate`` then reuses it.
    Returns the parsed spec, or None if there is none or it is unusable.
    """
    if (record.spec is None and record.spec_error is None
            and record.spec_row is not None):
        record.spec, record.spec_error = _parsed(record.spec_row)
    return record.spec


def _parsed(spec_row):
    try:
        spec = request_spec.RequestSpecDocument(spec_row['spec'])
        spec.flavor_key()
    except primitive.PrimitiveError as exc:
        return None, str(exc)
    except RecursionError:
        return None, 'the document is nested too deeply to be read'
    return spec, None


def evaluate(record, cell, now, settings, profile=None):
    """Decide what to do with one instance.

    ``cell`` is a cell_mappings row (id, uuid); ``now`` a naive UTC
    datetime; ``profile`` the run's VersionProfile, which names the Nova
    release whose rules apply (default: the newest). Returns an Evaluation;
    ``new_spec`` is set for drift only.
    """
    uuid = record.instance['uuid']
    finding = Finding(instance_uuid=uuid, cell_uuid=cell['uuid'],
                      status=Status.CONSISTENT)
    profile = profile or versions.VersionProfile()
    try:
        _check_skips(record, cell, now, settings, finding)
        current = _current_flavor(record)
        _note_leftovers(current, record, finding)
        if 'flavor' in settings.checked_fields:
            finding.flavor_outdated = field_checks.outdated_extra_specs(
                current, _flavor_definition(record, current))
        if record.spec_row is None and settings.create_missing:
            return _recreated(record, current, settings, profile, finding)
        spec = _parse_spec(record)
        _check_spec_owner(spec, uuid)
        inputs = _inputs(record, current, settings, profile.release)
        finding.notes.extend(_spec_notes(spec, inputs, settings))
        changes, replacements, version = field_checks.compare(
            settings.checked_fields, spec, inputs, profile)
        propagated = (field_checks.propagated_extra_specs(spec, inputs)
                      if 'flavor' in settings.checked_fields else None)
        new_spec = None
        if replacements:
            if not profile.named:
                _check_no_downgrade(spec, replacements, version)
            new_spec = spec.with_fields(
                replacements, version, field_checks.UNRECORDED_RESETS)
    except field_checks.DerivationError as exc:
        finding.status, finding.reason, finding.detail = (
            Status.ERROR, exc.reason, exc.detail)
        return Evaluation(finding)
    except _Decided as decided:
        finding.status = decided.status
        finding.reason = decided.reason
        finding.detail = decided.detail
        return Evaluation(finding)
    if not changes:
        return Evaluation(finding)
    finding.status = Status.DRIFTED
    finding.changes = changes
    finding.reason, finding.detail = _likely_cause(spec, current, record,
                                                   changes, propagated)
    if 'availability_zone' in finding.reported_only and finding.rewritten:
        finding.notes.append(_pin_left(changes))
    if 'scheduler_hints' in finding.reported_only and finding.rewritten:
        finding.notes.append(_same_host_left(spec, record, changes))
    if 'flavor' in finding.reported_only and finding.rewritten:
        finding.notes.append(_flavor_left(changes, propagated))
    return Evaluation(finding, new_spec)


def _same_host_left(spec, record, changes):
    """The note of a same_host hint left as it is, the rest healed.

    The rest may be the internal hints of the same scheduler_hints.
    """
    gone = field_checks.gone_same_host(spec, record.gone_instances)
    healed = [c.field for c in changes
              if c.rewritten and c.field != 'scheduler_hints']
    parts = []
    if any(c.field == 'scheduler_hints' and c.rewritten for c in changes):
        parts.append('the internal hints %s are removed' % ', '.join(
            field_checks.internal_hints(spec.data['scheduler_hints'])))
    if healed:
        parts.append('%s %s healed' % (', '.join(healed),
                                       'is' if len(healed) == 1 else 'are'))
    return Note('same-host-left', (
        'the same_host hint names %s, gone (same-host-gone), and is left '
        'as --hint-policy report says; only %s'
        % (', '.join(gone), ' and '.join(parts))))


def _flavor_left(changes, propagated):
    """The note of a propagated flavor left while other fields heal."""
    healed = [c.field for c in changes if c.rewritten]
    return Note('flavor-propagated-left', (
        'the spec\'s extra specs %s are the flavor\'s current definition '
        '(flavor-propagated) and are left as --flavor-policy report says; '
        'only %s %s healed' % (', '.join(propagated), ', '.join(healed),
                               'is' if len(healed) == 1 else 'are')))


def _pin_left(changes):
    """The note of a pin left as it is while other fields are healed."""
    pin = next(c for c in changes if c.field == 'availability_zone')
    return Note('az-pin-left', (
        'the pin %s differs from the instance\'s zone (az-pin-differs) '
        'and is left as --az-policy report says; only %s %s healed'
        % (pin.before, ', '.join(c.field for c in changes if c.rewritten),
           'is' if sum(c.rewritten for c in changes) == 1 else 'are')))


def _recreated(record, current, settings, profile, finding):
    """The Evaluation of an instance whose spec is missing: recreate it."""
    inputs = _inputs(record, current, settings, profile.release,
                     field_checks.FIELD_NAMES)
    text = primitive.dump_json(recreate.document(inputs, profile))
    finding.status = Status.DRIFTED
    finding.reason = 'spec-missing'
    finding.detail = ('no request_specs row: built from the instance '
                      'record as Nova builds one from components')
    finding.changes = [FieldChange('spec', 'missing',
                                   recreate.describe(inputs))]
    return Evaluation(finding, text)


def _spec_notes(spec, inputs, settings):
    """What is worth knowing about zones, drift or not."""
    notes = []
    if 'availability_zone' in settings.checked_fields:
        notes.extend(field_checks.zone_notes(spec, inputs))
    if 'scheduler_hints' in settings.checked_fields:
        notes.extend(field_checks.hint_notes(spec, inputs))
    return notes


def _inputs(record, current, settings, release, checked_fields=None):
    """Collect what the checked fields are derived from."""
    extra = record.extras[0]
    system_metadata, items = read_system_metadata(record.system_metadata)
    instance = record.instance
    checked = set(checked_fields or settings.checked_fields)
    if checked & field_checks.NEEDS_SYSTEM_METADATA:
        base = system_metadata.get('image_base_image_ref')
        if base and instance['image_ref'] and base != instance['image_ref']:
            raise _Decided(Status.ERROR, 'instance-image-inconsistent',
                           'instances.image_ref %s but system metadata '
                           'describes image %s (a failed rebuild?)'
                           % (instance['image_ref'], base))
    roots = [b for b in record.block_devices if b['boot_index'] == 0]
    return field_checks.Inputs(
        instance=instance, flavors=current,
        system_metadata=system_metadata, system_metadata_items=items,
        root_bdm=roots[0] if roots else None,
        extra_pci_requests=extra.get('pci_requests'), release=release,
        groups=tuple(record.groups), known_groups=record.known_groups,
        host_zones=tuple(record.host_zones), zones=record.zones,
        hostless_zones=record.hostless_zones,
        default_zone=settings.default_zone, az_policy=settings.az_policy,
        gone_instances=record.gone_instances,
        unverified_instances=record.unverified_instances,
        hint_policy=settings.hint_policy,
        flavor_definition=_flavor_definition(record, current),
        flavor_policy=settings.flavor_policy)


def _flavor_definition(record, current):
    """The current definition of the instance's flavor, or None."""
    return record.flavor_definitions.get(current.key('cur')['flavorid'])


def read_system_metadata(rows):
    """``(values, sorted items)`` of system metadata rows.

    The items are those the image derivation reads
    (image.derivation_items), which key its memo; all of them when one
    is not text, and None if a value is unhashable. The rows themselves
    are not remembered: they differ between instances of one image (the
    owner's names and roles), so a memo of them would mostly miss.
    """
    values = system_metadata_values(rows)
    try:
        items = image_obj.derivation_items(values)
        if items is None:
            items = tuple(sorted(values.items()))
        hash(items)
    except TypeError:
        items = None
    return values, items


def system_metadata_values(rows):
    """System metadata as Nova reads it: key -> value.

    ``rows`` are ``(key, value, deleted)`` tuples in row id order. Nova
    reads system metadata whatever its deleted flag; of duplicate keys, a
    live row wins over soft-deleted ones, then the newest row.
    """
    values = {key: value for key, value, is_deleted in rows
              if not is_deleted}
    if len(values) < len(rows):  # soft-deleted rows, or repeated keys
        live = set(values)
        values.update((key, value) for key, value, is_deleted in rows
                      if is_deleted and key not in live)
    return values


def skip_reason(record, cell, now, settings):
    """Return ``(code, detail)`` of the first skip rule that applies."""
    return (_operation_skip(record, cell)
            or _stale_skip(record, now, settings))


def _operation_skip(record, cell):
    """The skip rules of an instance Nova is working on, or not using.

    They come before the mapping check: while Nova boots an instance or
    moves it between cells, its mapping may not name the cell its row is
    in yet (or any more).
    """
    instance = record.instance
    mapping = record.mapping
    if instance['deleted']:
        return 'instance-deleted', 'the instance is deleted'
    if cell['uuid'] == nova_constants.CELL0_UUID:
        return 'cell0', 'the instance is in cell0'
    if instance['hidden']:
        return 'hidden', 'hidden copy of a cross-cell resize'
    if mapping is not None and mapping['queued_for_delete']:
        return 'queued-for-delete', 'the instance is queued for delete'
    vm_state = instance['vm_state']
    if (mapping is not None and mapping['cell_id'] is None
            and (vm_state == 'building'
                 or instance['task_state'] is not None)):
        # The conductor creates the rows of a multi-create in their cells
        # before it maps each of them.
        return ('not-scheduled', 'the instance mapping has no cell yet '
                '(vm_state %s, task_state %s)'
                % (vm_state, instance['task_state']))
    if vm_state == 'soft-delete':
        return 'soft-deleted', 'vm_state is soft-delete'
    if vm_state == 'building':
        return 'building', 'vm_state is building'
    if instance['task_state'] is not None:
        return ('task-in-progress',
                'task_state is %s' % instance['task_state'])
    if vm_state == 'resized':
        return ('resize-awaiting-confirm',
                'vm_state is resized (confirm or revert pending)')
    if record.migrations:
        migration = record.migrations[0]
        return ('migration-in-progress',
                'migration %s (%s) is %s' % (
                    migration['uuid'] or migration['id'],
                    migration['migration_type'], migration['status']))
    return None


def _stale_skip(record, now, settings):
    """The skip rules guarding against a record that may be stale."""
    instance = record.instance
    updated_at = instance['updated_at']
    if updated_at is not None:
        # To the second, as ``now`` is: an SQLite database may hold
        # fractions, which would put an update of this second ahead of it.
        updated_at = updated_at.replace(microsecond=0)
    window = datetime.timedelta(seconds=settings.skip_updated_within)
    if updated_at is not None and now - updated_at < window:
        return ('recently-updated',
                'updated at %sZ' % updated_at.isoformat(timespec='seconds'))
    if (instance['host'] is None
            and instance['vm_state'] != 'shelved_offloaded'):
        return 'no-host', 'the instance has no host'
    return None


def _check_skips(record, cell, now, settings, finding):
    """Raise _Decided for a skip or a wrong mapping.

    An instance with an operation in flight is skipped whatever its
    mapping says; a mapping that is wrong for any other is an error, even
    if its record merely looks stale.
    """
    _skip_unless_forced(_operation_skip(record, cell), settings, finding)
    _check_mapping(record, cell)
    _skip_unless_forced(_stale_skip(record, now, settings), settings,
                        finding)


def _check_mapping(record, cell):
    """Raise _Decided unless the instance mapping names ``cell``.

    Deleted and hidden instances were skipped before.
    """
    problem = mapping_problem(record.mapping, cell)
    if problem is not None:
        raise _Decided(Status.ERROR, *problem)


def mapping_problem(mapping, cell):
    """``(reason, detail)`` unless instance mapping ``mapping`` names ``cell``.

    ``cell`` holds the instance, which has no operation in flight.
    """
    if mapping is None:
        return ('instance-not-mapped', 'no instance_mappings row; see '
                'nova-manage cell_v2 verify_instance')
    if mapping['cell_id'] is None:
        return ('instance-mapped-elsewhere', 'the instance mapping names no '
                'cell, but the instance is in this one with no operation '
                'in flight')
    if mapping['cell_id'] != cell['id']:
        return ('instance-mapped-elsewhere', 'the instance mapping points to '
                'cell id %s' % mapping['cell_id'])
    return None


def _skip_unless_forced(skip, settings, finding):
    """Raise _Decided for ``skip`` unless --force overrides it."""
    if skip is None:
        return
    code, detail = skip
    if settings.force and code in FORCEABLE_SKIPS:
        finding.notes.append(Note('forced', 'ignored %s: %s'
                                  % (code, detail)))
        return
    raise _Decided(Status.SKIPPED, code, detail)


def _current_flavor(record):
    """Return the instance's embedded flavors, cross-checked."""
    extras = record.extras
    if not extras:
        raise _Decided(Status.ERROR, 'instance-extra-missing',
                       'no live instance_extra row')
    if len(extras) > 1:
        raise _Decided(Status.ERROR, 'instance-extra-duplicate',
                       '%d live instance_extra rows (ids %s)' % (
                           len(extras),
                           ', '.join(str(e['id']) for e in extras)))
    text = extras[0]['flavor']
    if text is None:
        raise _Decided(Status.ERROR, 'instance-flavor-missing',
                       'instance_extra.flavor is NULL')
    try:
        flavors = field_checks.instance_flavors(text)
    except primitive.PrimitiveError as exc:
        raise _Decided(Status.ERROR, 'instance-flavor-unparsable', str(exc))
    current = flavors.key('cur')
    instance = record.instance
    mismatched = []
    if (instance['instance_type_id'] is not None
            and instance['instance_type_id'] != current['id']):
        mismatched.append('instance_type_id=%s vs id=%s' % (
            instance['instance_type_id'], current['id']))
    for size in _MIRRORED_SIZES:
        if instance[size] is not None and instance[size] != current[size]:
            mismatched.append('%s=%s vs %s' % (size, instance[size],
                                               current[size]))
    if mismatched:
        raise _Decided(Status.ERROR, 'instance-flavor-inconsistent',
                       'instances row disagrees with instance_extra.flavor'
                       "['cur'] %s: %s" % (flavor_obj.label(current),
                                           '; '.join(mismatched)))
    return flavors


def _note_leftovers(current, record, finding):
    if record.migrations:
        return
    for slot in ('new', 'old'):
        key = current.key(slot)
        if key is not None:
            finding.notes.append(Note(
                'flavor-leftover-%s' % slot,
                "instance_extra.flavor['%s'] is %s but no migration is in "
                "progress" % (slot, flavor_obj.label(key))))


def _parse_spec(record):
    if record.spec_row is None:
        raise _Decided(Status.ERROR, 'spec-missing',
                       'no request_specs row for this instance; '
                       'request-specs --create-missing recreates it')
    spec, error = record.spec, record.spec_error
    if spec is None and error is None:
        spec, error = _parsed(record.spec_row)
    if spec is None:
        raise _Decided(Status.ERROR, 'spec-unparsable', error)
    return spec


def _check_spec_owner(spec, instance_uuid):
    """Refuse a spec document that names another instance.

    Nova takes the instance uuid from the row's column and would load
    the document as this instance's: a copy of another instance's spec
    is corruption that needs a human, never a heal.
    """
    named = spec.data.get('instance_uuid')
    if named is not None and named != instance_uuid:
        raise _Decided(Status.ERROR, 'spec-instance-mismatch',
                       'the spec document names instance %r, not this one; '
                       'left alone' % (named,))


def _check_no_downgrade(spec, replacements, version):
    """Refuse a heal that lowers an object version the spec holds.

    The deployment's own Nova wrote the stored versions; writing older
    ones means the release was misjudged, unless the operator named it.
    Only what the heal replaces can change: the replaced fields and the
    RequestSpec version.
    """
    before = {name: spec.data.get(name) for name in replacements}
    lowered = versions.lowered(
        primitive.wrap(request_spec.OBJECT_NAME,
                       spec.document[primitive.VERSION], before),
        primitive.wrap(request_spec.OBJECT_NAME, version, replacements))
    if lowered:
        raise field_checks.DerivationError(
            'object-version-downgrade',
            'the heal would lower %s; left alone (name the release with '
            '--target-release if it is right)' % ', '.join(
                '%s %s to %s' % change for change in lowered))


def _likely_cause(spec, current, record, changes, propagated=None):
    """Return ``(reason code, detail)`` explaining a drift.

    ``propagated`` names the extra specs of a spec flavor an operator
    rewrote from the flavor's current definition, if it is one.
    """
    if all(change.before == 'missing' for change in changes):
        return ('legacy-spec',
                'the spec was saved by an old Nova and lacks %s'
                % ', '.join(change.field for change in changes))
    flavor_cause = _flavor_cause(spec, current, record)
    if flavor_cause is not None:
        return flavor_cause
    fields = {change.field for change in changes}
    internal = field_checks.internal_hints(spec.data.get('scheduler_hints'))
    if internal and 'scheduler_hints' in fields or fields & FORCED_FIELDS:
        return ('internal-hint-persisted', 'the spec holds Nova\'s internal '
                'scheduler hints (%s): every later move is then scheduled as '
                'a rebuild, which claims nothing in Placement'
                % ', '.join(internal))
    if propagated is not None and fields == {'flavor'}:
        return ('flavor-propagated', 'the spec\'s flavor %s differs from '
                'instance_extra.flavor[\'cur\'] only in extra specs (%s), '
                'which are the flavor\'s current definition: an operator '
                'propagated it to the spec; healed only with --flavor-policy '
                'instance' % (flavor_obj.label(current.key('cur')),
                              ', '.join(propagated)))
    if 'instance_group' in fields and not record.groups:
        return ('group-without-uuid', 'the spec holds a server group '
                'without uuid or group hint, which Nova cannot load, and '
                'the instance is a member of no group')
    if 'instance_group' in fields:
        return ('group-lost', 'the spec does not name the server group of '
                'which the instance is a member (moves then fail, and a '
                'forced evacuation ignores the group\'s policy)')
    if fields == {'availability_zone'}:
        return ('az-pin-differs', 'the pinned zone is not the zone the '
                'instance is in (a forced live migration or evacuation '
                'moved it); every move is filtered back to the pin')
    if fields == {'scheduler_hints'}:
        return _same_host_gone(spec, record)
    return 'spec-drift', 'the spec disagrees with the instance record'


def _same_host_gone(spec, record):
    """The reason of a same_host hint naming instances that are gone."""
    gone = field_checks.gone_same_host(spec, record.gone_instances)
    named = field_checks.hinted_instances(spec.data.get('scheduler_hints'),
                                          field_checks.SAME_HOST)
    if set(named) <= set(gone):
        effect = ('SameHostFilter then passes no host: every move fails '
                  'with NoValidHost')
    else:
        effect = ('SameHostFilter passes only the hosts of the others it '
                  'names')
    not_uuids = field_checks.not_uuids(spec.data.get('scheduler_hints'))
    if not_uuids:
        effect += ('; it also holds %s, which name no instance (not '
                   'strings)' % ', '.join(primitive.short(entry)
                                          for entry in not_uuids))
    return ('same-host-gone', 'the same_host hint names %s, which no '
            'longer exist in any cell; %s' % (', '.join(gone), effect))


def _flavor_cause(spec, current, record):
    """The resize that left the spec's flavor behind, or None."""
    spec_flavor = spec.flavor_key()
    if spec_flavor['id'] != current.key('cur')['id']:
        new = current.key('new')
        if new is not None and new['id'] == spec_flavor['id']:
            return ('failed-resize-leftover',
                    "spec flavor %s equals instance_extra.flavor['new']; "
                    "a resize to it never completed"
                    % flavor_obj.label(spec_flavor))
        if spec_flavor['id'] in record.failed_resize_flavor_ids:
            return ('failed-resize-leftover',
                    'spec flavor %s is the target of a failed resize '
                    'migration' % flavor_obj.label(spec_flavor))
        old = current.key('old')
        if old is not None and old['id'] == spec_flavor['id']:
            return ('old-flavor-leftover',
                    "spec flavor %s equals instance_extra.flavor['old']"
                    % flavor_obj.label(spec_flavor))
    return None
