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

"""Per-instance decisions: skips, errors, drift and its likely cause."""

import copy
import datetime
import functools
import json

import testtools

from healreq.heal import decisions
from healreq.heal import findings
from healreq.objects import flavor as flavor_obj
from healreq.objects import primitive
from healreq.testing import deployment as dep

Status = findings.Status

INSTANCE_UUID = dep.INSTANCE_UUID
MIGRATION_UUID = '4b0f7d8e-2c1a-4e6f-9a3b-5c7d9e1f2a3b'
CELL = dep.CELL_MAPPING
CELL0 = {'id': 3, 'uuid': dep.CELL0_UUID, 'name': 'cell0'}
NOW = datetime.datetime(2024, 6, 1, 12, 0, 0)

A2_MEDIUM = dep.flavor(982, 'a2.medium', vcpus=4, memory_mb=8192,
                       root_gb=80, flavorid='026050', extra_specs={
                           'hw:cpu_max_sockets': '1',
                           'hw:cpu_policy': 'shared',
                           'os:secure_boot': 'disabled',
                           'quota:cpu_shares': '400'},
                       description='Shared CPU, 4 vCPU')
E2_MEDIUM = dep.flavor(831, 'e2.medium', vcpus=4, memory_mb=8192,
                       root_gb=25, flavorid='022050', extra_specs={
                           'hw:cpu_max_sockets': '1',
                           'hw:cpu_policy': 'shared',
                           'quota:cpu_shares': '400'})
M1_SMALL = dep.flavor(2, 'm1.small', vcpus=1, memory_mb=2048, root_gb=20)

SKIP_CODES = ('instance-deleted', 'cell0', 'hidden', 'queued-for-delete',
              'not-scheduled', 'soft-deleted', 'building', 'task-in-progress',
              'resize-awaiting-confirm', 'migration-in-progress',
              'recently-updated', 'no-host')


def _settings(**kwargs):
    # These tests are about the flavor; the other fields have their own.
    values = dict(skip_updated_within=60, force=False,
                  checked_fields=('flavor',))
    values.update(kwargs)
    return decisions.Settings(**values)


# An a2.medium instance whose spec agrees with it, unless overridden.
_record = functools.partial(dep.instance_record, A2_MEDIUM)


def _migration(status='running', migration_type='resize',
               uuid=MIGRATION_UUID):
    return {'id': 12, 'uuid': uuid, 'instance_uuid': INSTANCE_UUID,
            'status': status, 'migration_type': migration_type}


def _evaluate(record, cell=CELL, now=NOW, **settings):
    return decisions.evaluate(record, cell, now, _settings(**settings))


class ConsistentTest(testtools.TestCase):

    def test_consistent(self):
        evaluation = _evaluate(_record())
        finding = evaluation.finding
        self.assertEqual(Status.CONSISTENT, finding.status)
        self.assertEqual(INSTANCE_UUID, finding.instance_uuid)
        self.assertEqual(CELL['uuid'], finding.cell_uuid)
        self.assertIsNone(finding.reason)
        self.assertEqual([], finding.changes)
        self.assertEqual([], finding.notes)
        self.assertIsNone(evaluation.new_spec)

    def test_cosmetic_differences_are_not_drift(self):
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        data = spec_flavor[primitive.DATA]
        data.update(description='Something else', rxtx_factor=3.0,
                    vcpu_weight=7, created_at='2019-01-01T00:00:00Z',
                    updated_at='2024-02-02T02:02:02Z', memory_mb='8192',
                    vcpus='4', disabled=True, is_public=False)
        data['extra_specs'] = dict(sorted(data['extra_specs'].items(),
                                          reverse=True))
        spec_flavor[primitive.DATA] = dict(reversed(list(data.items())))
        spec_flavor[primitive.CHANGES] = ['id', 'name', 'description']
        evaluation = _evaluate(_record(spec_flavor=spec_flavor))
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status)
        self.assertIsNone(evaluation.new_spec)

    def test_older_spec_flavor_version_is_not_drift(self):
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        spec_flavor[primitive.VERSION] = '1.1'
        del spec_flavor[primitive.DATA]['description']
        evaluation = _evaluate(_record(spec_flavor=spec_flavor))
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status)

    def test_no_checked_fields(self):
        evaluation = _evaluate(_record(spec_flavor=E2_MEDIUM),
                               checked_fields=())
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status)
        self.assertIsNone(evaluation.new_spec)

    def test_does_not_mutate_the_record(self):
        record = _record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM)
        before = copy.deepcopy(record)
        _evaluate(record)
        self.assertEqual(before, record)


class SkipTest(testtools.TestCase):

    def assertSkipped(self, code, evaluation, detail=None):
        finding = evaluation.finding
        self.assertEqual((Status.SKIPPED, code),
                         (finding.status, finding.reason), finding.detail)
        self.assertIsNone(evaluation.new_spec)
        if detail is not None:
            self.assertEqual(detail, finding.detail)
        self.assertIn(code, findings.REASONS[Status.SKIPPED])

    def test_precedence(self):
        # Pile up every skip condition (the drifted spec would otherwise
        # be healed), then remove them from the top: each time the next
        # rule in line must be the one reported.
        values = dict(spec_flavor=E2_MEDIUM, deleted=17, hidden=True,
                      vm_state='soft-delete', task_state='deleting',
                      host=None, updated_at=NOW,
                      migrations=[_migration()])
        record = _record(**values)
        record.mapping['queued_for_delete'] = True
        record.mapping['cell_id'] = None
        steps = [
            ('instance-deleted', lambda r: r.instance.update(deleted=0)),
            ('cell0', None),
            ('hidden', lambda r: r.instance.update(hidden=False)),
            ('queued-for-delete',
             lambda r: r.mapping.update(queued_for_delete=False)),
            ('not-scheduled', lambda r: r.mapping.update(cell_id=CELL['id'])),
            ('soft-deleted',
             lambda r: r.instance.update(vm_state='building')),
            ('building', lambda r: r.instance.update(vm_state='resized')),
            ('task-in-progress',
             lambda r: r.instance.update(task_state=None)),
            ('resize-awaiting-confirm',
             lambda r: r.instance.update(vm_state='active')),
            ('migration-in-progress', lambda r: r.migrations.clear()),
            ('recently-updated',
             lambda r: r.instance.update(updated_at=dep.LONG_AGO)),
            ('no-host', lambda r: r.instance.update(host='compute-1')),
        ]
        self.assertEqual(list(SKIP_CODES), [code for code, _ in steps])
        for code, remove in steps:
            if code == 'cell0':
                cell0_record = copy.deepcopy(record)
                cell0_record.mapping['cell_id'] = CELL0['id']
                self.assertSkipped(code, _evaluate(cell0_record,
                                                   cell=CELL0))
            else:
                self.assertSkipped(code, _evaluate(record))
            if remove is not None:
                remove(record)
        self.assertEqual(Status.DRIFTED, _evaluate(record).finding.status)

    def test_deleted(self):
        self.assertSkipped('instance-deleted',
                           _evaluate(_record(deleted=17)),
                           'the instance is deleted')

    def test_deleted_without_mapping_or_rows(self):
        self.assertSkipped('instance-deleted', _evaluate(_record(
            deleted=17, mapping=None, extras=[], spec=None)))

    def test_cell0(self):
        record = _record()
        record.mapping['cell_id'] = CELL0['id']
        self.assertSkipped('cell0', _evaluate(record, cell=CELL0),
                           'the instance is in cell0')

    def test_hidden(self):
        self.assertSkipped('hidden', _evaluate(_record(hidden=True)))

    def test_not_scheduled(self):
        # The conductor creates the rows of a multi-create in their cell
        # before it maps each of them.
        record = _record(vm_state='building', task_state='scheduling',
                         host=None, extras=[])
        record.mapping['cell_id'] = None
        self.assertSkipped('not-scheduled', _evaluate(record),
                           'the instance mapping has no cell yet '
                           '(vm_state building, task_state scheduling)')

    def test_in_flight_skips_come_before_the_mapping(self):
        # A cross-cell resize moves the mapping while the copy it no
        # longer names (or does not name yet) is in flight.
        cases = {
            'task-in-progress': dict(task_state='resize_migrated'),
            'resize-awaiting-confirm': dict(vm_state='resized'),
            'migration-in-progress': dict(migrations=[_migration()]),
        }
        for code, values in cases.items():
            record = _record(spec_flavor=E2_MEDIUM, **values)
            record.mapping['cell_id'] = 2
            self.assertSkipped(code, _evaluate(record))

    def test_hidden_mapped_to_the_other_cell(self):
        # During a cross-cell resize the mapping points to the target cell
        # while the hidden copy stays in the source cell.
        record = _record(hidden=True)
        record.mapping['cell_id'] = 2
        self.assertSkipped('hidden', _evaluate(record))

    def test_queued_for_delete(self):
        record = _record()
        record.mapping['queued_for_delete'] = True
        self.assertSkipped('queued-for-delete', _evaluate(record))

    def test_soft_deleted(self):
        self.assertSkipped('soft-deleted',
                           _evaluate(_record(vm_state='soft-delete')))

    def test_building(self):
        self.assertSkipped('building', _evaluate(_record(
            vm_state='building', host=None, extras=[])))

    def test_task_in_progress(self):
        self.assertSkipped('task-in-progress', _evaluate(_record(
            task_state='resize_migrating')), 'task_state is resize_migrating')

    def test_resized(self):
        # The spec legitimately holds the new flavor until confirm/revert.
        self.assertSkipped('resize-awaiting-confirm', _evaluate(_record(
            vm_state='resized', spec_flavor=E2_MEDIUM, new=E2_MEDIUM,
            old=A2_MEDIUM)))

    def test_migration_in_progress(self):
        self.assertSkipped(
            'migration-in-progress',
            _evaluate(_record(migrations=[_migration('post-migrating',
                                                     'live-migration')])),
            'migration %s (live-migration) is post-migrating'
            % MIGRATION_UUID)

    def test_migration_without_uuid_named_by_id(self):
        self.assertSkipped(
            'migration-in-progress',
            _evaluate(_record(migrations=[_migration(uuid=None)])),
            'migration 12 (resize) is running')

    def test_recently_updated(self):
        updated = NOW - datetime.timedelta(seconds=59)
        self.assertSkipped('recently-updated',
                           _evaluate(_record(updated_at=updated)),
                           'updated at 2024-06-01T11:59:01Z')

    def test_updated_exactly_at_the_window(self):
        updated = NOW - datetime.timedelta(seconds=60)
        self.assertEqual(Status.CONSISTENT,
                         _evaluate(_record(updated_at=updated))
                         .finding.status)

    def test_window_is_configurable(self):
        updated = NOW - datetime.timedelta(seconds=3600)
        record = _record(updated_at=updated)
        self.assertSkipped('recently-updated',
                           _evaluate(record, skip_updated_within=3601))
        self.assertEqual(
            Status.CONSISTENT,
            _evaluate(record, skip_updated_within=0).finding.status)

    def test_updated_in_the_future(self):
        future = NOW + datetime.timedelta(hours=1)
        self.assertSkipped('recently-updated', _evaluate(
            _record(updated_at=future), skip_updated_within=0))

    def test_updated_within_this_second_is_not_in_the_future(self):
        # now is to the second; the update came 0.6 s after it began.
        updated = NOW + datetime.timedelta(microseconds=600000)
        self.assertEqual(Status.CONSISTENT, _evaluate(
            _record(updated_at=updated), skip_updated_within=0)
            .finding.status)

    def test_never_updated(self):
        self.assertEqual(Status.CONSISTENT,
                         _evaluate(_record(updated_at=None)).finding.status)

    def test_no_host(self):
        self.assertSkipped('no-host', _evaluate(_record(host=None)),
                           'the instance has no host')

    def test_shelved_offloaded_without_host_is_checked(self):
        evaluation = _evaluate(_record(host=None, vm_state='shelved_offloaded',
                                       spec_flavor=E2_MEDIUM))
        self.assertEqual(Status.DRIFTED, evaluation.finding.status)

    def test_stopped_and_error_instances_are_checked(self):
        for vm_state in ('stopped', 'error', 'paused', 'suspended',
                         'shelved', 'rescued'):
            evaluation = _evaluate(_record(vm_state=vm_state,
                                           spec_flavor=E2_MEDIUM))
            self.assertEqual(Status.DRIFTED, evaluation.finding.status,
                             vm_state)

    def test_skip_reason_matches_evaluate(self):
        record = _record(task_state='rebooting')
        self.assertEqual(('task-in-progress', 'task_state is rebooting'),
                         decisions.skip_reason(record, CELL, NOW, _settings()))
        self.assertIsNone(decisions.skip_reason(_record(), CELL, NOW,
                                                _settings()))


class ForceTest(testtools.TestCase):

    FORCEABLE = {
        'migration-in-progress': dict(migrations=[_migration('running')]),
        'recently-updated': dict(updated_at=NOW),
        'no-host': dict(host=None),
    }

    def test_forceable_set(self):
        self.assertEqual(frozenset(self.FORCEABLE), decisions.FORCEABLE_SKIPS)

    def test_force_overrides_forceable_skips(self):
        for code, values in self.FORCEABLE.items():
            record = _record(spec_flavor=E2_MEDIUM, **values)
            skipped = _evaluate(record)
            self.assertEqual(code, skipped.finding.reason)
            evaluation = _evaluate(record, force=True)
            finding = evaluation.finding
            self.assertEqual(Status.DRIFTED, finding.status, code)
            self.assertIsNotNone(evaluation.new_spec)
            forced = [n for n in finding.notes if n.code == 'forced']
            self.assertEqual(1, len(forced), code)
            self.assertIn(code, forced[0].detail)
            self.assertIn(skipped.finding.detail, forced[0].detail)

    def test_forced_consistent_instance_keeps_the_note(self):
        evaluation = _evaluate(_record(host=None), force=True)
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status)
        self.assertEqual(['forced'],
                         [n.code for n in evaluation.finding.notes])

    def test_force_does_not_override_other_skips(self):
        cases = {
            'instance-deleted': dict(deleted=17),
            'hidden': dict(hidden=True),
            'soft-deleted': dict(vm_state='soft-delete'),
            'building': dict(vm_state='building'),
            'task-in-progress': dict(task_state='migrating'),
            'resize-awaiting-confirm': dict(vm_state='resized'),
        }
        for code, values in cases.items():
            evaluation = _evaluate(_record(spec_flavor=E2_MEDIUM, **values),
                                   force=True)
            self.assertEqual((Status.SKIPPED, code),
                             (evaluation.finding.status,
                              evaluation.finding.reason))
            self.assertEqual([], evaluation.finding.notes)
            self.assertIsNone(evaluation.new_spec)

    def test_force_does_not_override_queued_for_delete_or_cell0(self):
        record = _record(spec_flavor=E2_MEDIUM)
        record.mapping['queued_for_delete'] = True
        self.assertEqual('queued-for-delete',
                         _evaluate(record, force=True).finding.reason)
        record = _record(spec_flavor=E2_MEDIUM)
        record.mapping['cell_id'] = CELL0['id']
        self.assertEqual('cell0', _evaluate(record, cell=CELL0,
                                            force=True).finding.reason)

    def test_force_with_a_task_and_a_migration(self):
        evaluation = _evaluate(_record(task_state='resize_prep',
                                       migrations=[_migration()]),
                               force=True)
        self.assertEqual('task-in-progress', evaluation.finding.reason)

    def test_force_does_not_override_errors(self):
        evaluation = _evaluate(_record(host=None, extras=[]), force=True)
        self.assertEqual((Status.ERROR, 'instance-extra-missing'),
                         (evaluation.finding.status,
                          evaluation.finding.reason))

    def test_no_note_without_a_skip(self):
        evaluation = _evaluate(_record(spec_flavor=E2_MEDIUM), force=True)
        self.assertEqual(Status.DRIFTED, evaluation.finding.status)
        self.assertEqual([], evaluation.finding.notes)


class ErrorTest(testtools.TestCase):

    def assertError(self, code, record, *fragments):
        evaluation = _evaluate(record)
        finding = evaluation.finding
        self.assertEqual((Status.ERROR, code),
                         (finding.status, finding.reason), finding.detail)
        self.assertIsNone(evaluation.new_spec)
        self.assertEqual([], finding.changes)
        self.assertIn(code, findings.REASONS[Status.ERROR])
        for fragment in fragments:
            self.assertIn(fragment, finding.detail)
        return finding

    def test_not_mapped(self):
        self.assertError('instance-not-mapped', _record(mapping=None))

    def test_mapped_elsewhere(self):
        record = _record()
        record.mapping['cell_id'] = 2
        self.assertError('instance-mapped-elsewhere', record, '2')

    def test_mapped_to_no_cell_without_an_operation(self):
        record = _record()
        record.mapping['cell_id'] = None
        self.assertError('instance-mapped-elsewhere', record,
                         'names no cell', 'no operation in flight')

    def test_mapping_comes_before_the_stale_record_rules(self):
        # Neither rule says an operation is in flight.
        for values in (dict(updated_at=NOW), dict(host=None)):
            record = _record(**values)
            record.mapping['cell_id'] = 2
            self.assertError('instance-mapped-elsewhere', record)

    def test_forced_skip_then_mapping(self):
        record = _record(migrations=[_migration()])
        record.mapping['cell_id'] = 2
        finding = _evaluate(record, force=True).finding
        self.assertEqual((Status.ERROR, 'instance-mapped-elsewhere'),
                         (finding.status, finding.reason))

    def test_extra_missing(self):
        self.assertError('instance-extra-missing', _record(extras=[]))

    def test_extra_duplicate(self):
        record = _record()
        record.extras.append(dict(record.extras[0], id=9))
        self.assertError('instance-extra-duplicate', record, '2', '5, 9')

    def test_flavor_missing(self):
        record = _record()
        record.extras[0]['flavor'] = None
        self.assertError('instance-flavor-missing', record)

    def test_flavor_unparsable(self):
        bad_new = copy.deepcopy(E2_MEDIUM)
        bad_new[primitive.DATA]['vcpus'] = 'four'
        for text in ('', '{"cur": ', '{}', '{"cur": null}',
                     json.dumps({'cur': {'id': 1}}),
                     dep.instance_flavors(A2_MEDIUM, new=bad_new)):
            record = _record()
            record.extras[0]['flavor'] = text
            self.assertError('instance-flavor-unparsable', record,
                             'instance_extra.flavor')

    def test_flavor_inconsistent_type_id(self):
        self.assertError('instance-flavor-inconsistent',
                         _record(instance_type_id=831),
                         'a2.medium(982)', 'instance_type_id=831 vs id=982')

    def test_flavor_inconsistent_sizes(self):
        for size, value in (('vcpus', 8), ('memory_mb', 4096),
                            ('root_gb', 25), ('ephemeral_gb', 10)):
            self.assertError('instance-flavor-inconsistent',
                             _record(**{size: value}), size)

    def test_null_mirrors_are_not_inconsistent(self):
        record = _record(instance_type_id=None, vcpus=None, memory_mb=None,
                         root_gb=None, ephemeral_gb=None)
        self.assertEqual(Status.CONSISTENT, _evaluate(record).finding.status)

    def test_spec_missing(self):
        self.assertError('spec-missing', _record(spec=None))

    def test_spec_unparsable(self):
        no_flavor = dep.request_spec(INSTANCE_UUID, None)
        bad_flavor = dep.request_spec(INSTANCE_UUID, {'id': 982})
        wrong_name = dep.request_spec(INSTANCE_UUID, A2_MEDIUM)
        wrong_name[primitive.NAME] = 'BuildRequest'
        for text in (None, '', 'not json', '[]', json.dumps(no_flavor),
                     json.dumps(bad_flavor), json.dumps(wrong_name)):
            record = _record()
            record.spec_row['spec'] = text
            self.assertError('spec-unparsable', record, 'request_specs.spec')

    def test_skips_come_before_row_errors(self):
        evaluation = _evaluate(_record(task_state='spawning', extras=[],
                                       spec=None))
        self.assertEqual('task-in-progress', evaluation.finding.reason)

    def test_instance_errors_come_before_spec_errors(self):
        self.assertError('instance-extra-missing',
                         _record(extras=[], spec=None))


class DriftTest(testtools.TestCase):

    def assertDrift(self, reason, record, before='e2.medium(831)',
                    after='a2.medium(982)'):
        evaluation = _evaluate(record)
        finding = evaluation.finding
        self.assertEqual((Status.DRIFTED, reason),
                         (finding.status, finding.reason), finding.detail)
        self.assertEqual([findings.FieldChange('flavor', before, after)],
                         finding.changes)
        self.assertEqual(['flavor'], finding.drift)
        self.assertIsNotNone(evaluation.new_spec)
        self.assertIn(reason, findings.REASONS[Status.DRIFTED])
        return evaluation

    def test_failed_resize_leftover_via_new(self):
        evaluation = self.assertDrift('failed-resize-leftover', _record(
            spec_flavor=E2_MEDIUM, new=E2_MEDIUM))
        self.assertIn('e2.medium(831)', evaluation.finding.detail)
        self.assertIn("['new']", evaluation.finding.detail)

    def test_failed_resize_leftover_via_failed_migration(self):
        evaluation = self.assertDrift('failed-resize-leftover', _record(
            spec_flavor=E2_MEDIUM, failed_resize_flavor_ids={831}))
        self.assertIn('failed resize', evaluation.finding.detail)
        self.assertEqual([], evaluation.finding.notes)

    def test_old_flavor_leftover(self):
        evaluation = self.assertDrift('old-flavor-leftover', _record(
            spec_flavor=E2_MEDIUM, old=E2_MEDIUM))
        self.assertIn("['old']", evaluation.finding.detail)

    def test_new_wins_over_old(self):
        self.assertDrift('failed-resize-leftover', _record(
            spec_flavor=E2_MEDIUM, new=E2_MEDIUM, old=E2_MEDIUM))

    def test_failed_migration_wins_over_old(self):
        self.assertDrift('failed-resize-leftover', _record(
            spec_flavor=E2_MEDIUM, old=E2_MEDIUM,
            failed_resize_flavor_ids={831}))

    def test_spec_drift(self):
        evaluation = self.assertDrift('spec-drift',
                                      _record(spec_flavor=E2_MEDIUM))
        self.assertEqual('the spec disagrees with the instance record',
                         evaluation.finding.detail)

    def test_unrelated_leftovers_are_spec_drift(self):
        self.assertDrift('spec-drift', _record(
            spec_flavor=E2_MEDIUM, new=M1_SMALL, old=M1_SMALL,
            failed_resize_flavor_ids={2, 4}))

    def test_same_flavor_id_is_spec_drift(self):
        # A leftover only explains a spec naming another flavor.
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        del spec_flavor[primitive.DATA]['extra_specs']['os:secure_boot']
        self.assertDrift('spec-drift',
                         _record(spec_flavor=spec_flavor, new=spec_flavor,
                                 failed_resize_flavor_ids={982}),
                         before='a2.medium(982) [extra_specs differ]')

    def test_same_label_lists_the_differing_fields(self):
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        spec_flavor[primitive.DATA].update(vcpus=2, swap=512)
        self.assertDrift('spec-drift', _record(spec_flavor=spec_flavor),
                         before='a2.medium(982) [vcpus, swap differ]')

    def test_leftover_notes(self):
        evaluation = _evaluate(_record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM,
                                       old=M1_SMALL))
        notes = evaluation.finding.notes
        self.assertEqual(['flavor-leftover-new', 'flavor-leftover-old'],
                         [n.code for n in notes])
        self.assertEqual("instance_extra.flavor['new'] is e2.medium(831) but "
                         "no migration is in progress", notes[0].detail)
        self.assertIn('m1.small(2)', notes[1].detail)
        for note in notes:
            self.assertIn(note.code, findings.NOTES)

    def test_leftover_notes_on_a_consistent_instance(self):
        evaluation = _evaluate(_record(old=M1_SMALL))
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status)
        self.assertEqual(['flavor-leftover-old'],
                         [n.code for n in evaluation.finding.notes])
        self.assertIsNone(evaluation.new_spec)

    def test_no_leftover_notes_during_a_migration(self):
        evaluation = _evaluate(_record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM,
                                       migrations=[_migration()]),
                               force=True)
        self.assertEqual(['forced'],
                         [n.code for n in evaluation.finding.notes])
        self.assertEqual('failed-resize-leftover', evaluation.finding.reason)

    def test_new_spec_changes_only_the_flavor(self):
        record = _record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM)
        evaluation = _evaluate(record)
        original = json.loads(record.spec_row['spec'])
        healed = json.loads(evaluation.new_spec)
        self.assertEqual(list(original), list(healed))
        self.assertEqual(list(original[primitive.DATA]),
                         list(healed[primitive.DATA]))
        new_flavor = healed[primitive.DATA].pop('flavor')
        original[primitive.DATA].pop('flavor')
        self.assertEqual(original, healed)
        # The flavor is the instance's current one as stored in
        # instance_extra (description nulled), at the spec's version.
        cur = flavor_obj.parse_instance_flavors(
            record.extras[0]['flavor'])['cur']
        self.assertEqual(flavor_obj.for_request_spec(cur, '1.2'), new_flavor)
        self.assertEqual(flavor_obj.parse(cur, 'cur'),
                         flavor_obj.parse(new_flavor, 'healed'))

    def test_new_spec_is_serialised_like_nova(self):
        record = _record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM)
        evaluation = _evaluate(record)
        healed = json.loads(evaluation.new_spec)
        self.assertEqual(json.dumps(healed), evaluation.new_spec)
        old_flavor = json.dumps(json.loads(record.spec_row['spec'])[
            primitive.DATA]['flavor'])
        new_flavor = json.dumps(healed[primitive.DATA]['flavor'])
        self.assertEqual(
            record.spec_row['spec'].replace(old_flavor, new_flavor),
            evaluation.new_spec)

    def test_new_spec_keeps_an_older_flavor_version(self):
        spec_flavor = copy.deepcopy(E2_MEDIUM)
        spec_flavor[primitive.VERSION] = '1.1'
        del spec_flavor[primitive.DATA]['description']
        evaluation = _evaluate(_record(spec_flavor=spec_flavor))
        new_flavor = json.loads(evaluation.new_spec)[primitive.DATA]['flavor']
        self.assertEqual('1.1', new_flavor[primitive.VERSION])
        self.assertNotIn('description', new_flavor[primitive.DATA])
        self.assertNotIn(primitive.CHANGES, new_flavor)
        self.assertEqual(982, new_flavor[primitive.DATA]['id'])

    def test_new_spec_is_consistent(self):
        record = _record(spec_flavor=E2_MEDIUM, new=E2_MEDIUM)
        evaluation = _evaluate(record)
        record.spec_row['spec'] = evaluation.new_spec
        again = _evaluate(record)
        self.assertEqual(Status.CONSISTENT, again.finding.status)
        self.assertIsNone(again.new_spec)


class SystemMetadataValuesTest(testtools.TestCase):
    """Which row of a duplicated system metadata key Nova reads."""

    def test_every_key_whatever_its_prefix(self):
        self.assertEqual(
            {'image_hw_disk_bus': 'scsi', 'boot_roles': 'member'},
            decisions.system_metadata_values(
                [('image_hw_disk_bus', 'scsi', 0),
                 ('boot_roles', 'member', 0)]))

    def test_soft_deleted_rows_are_read(self):
        self.assertEqual({'image_min_ram': '512'},
                         decisions.system_metadata_values(
                             [('image_min_ram', '512', 3)]))

    def test_live_row_wins_whatever_the_order(self):
        for rows in ([('image_os_type', 'linux', 0),
                      ('image_os_type', 'windows', 2)],
                     [('image_os_type', 'windows', 1),
                      ('image_os_type', 'linux', 0)]):
            self.assertEqual({'image_os_type': 'linux'},
                             decisions.system_metadata_values(rows))

    def test_newest_row_wins_among_equals(self):
        self.assertEqual(
            {'a': '2', 'b': '4'}, decisions.system_metadata_values(
                [('a', '1', 0), ('b', '3', 5), ('a', '2', 0), ('b', '4', 6)]))


def _pinned(zone, spec_flavor=A2_MEDIUM):
    """An a2.medium record on a host of az2 whose spec pins ``zone``."""
    spec = dep.request_spec(INSTANCE_UUID, copy.deepcopy(spec_flavor),
                            spec_id=7, availability_zone=zone)
    record = _record(spec=json.dumps(spec), availability_zone='az2')
    record.zones = frozenset(['az2'])
    record.host_zones = ['az2']
    return record


class ZoneTest(testtools.TestCase):
    """Zone pins: the note per case, and a pin left under report."""

    def notes(self, record):
        finding = _evaluate(record, checked_fields=(
            'availability_zone',)).finding
        return [(note.code, note.detail) for note in finding.notes]

    def test_a_zone_no_aggregate_carries(self):
        code, detail = self.notes(_pinned('az1'))[0]
        self.assertEqual('az-pin-gone', code)
        self.assertEqual(
            'the pinned zone az1 is carried by no aggregate: Nova\'s '
            'scheduler then requires none and may place the instance on '
            'any host, ignoring the pin (on Zed, an enabled '
            'AvailabilityZoneFilter finds no host instead)', detail)

    def test_a_zone_whose_aggregates_hold_no_host(self):
        record = _pinned('az1')
        record.hostless_zones = frozenset(['az1'])
        code, detail = self.notes(record)[0]
        self.assertEqual('az-pin-gone', code)
        self.assertEqual(
            'the pinned zone az1 is carried only by aggregates that hold '
            'no host: Nova\'s scheduler still requires those aggregates, so '
            'every move fails with NoValidHost', detail)

    def test_a_zone_with_a_host_or_the_default_zone_is_not_gone(self):
        for zone in ('az2', 'nova'):
            self.assertEqual([], self.notes(_pinned(zone)))

    def test_pin_left_when_other_fields_are_healed(self):
        record = _pinned('az1', spec_flavor=E2_MEDIUM)
        record.zones = frozenset(['az1', 'az2'])
        evaluation = _evaluate(record, checked_fields=(
            'flavor', 'availability_zone'))
        finding = evaluation.finding
        self.assertEqual(
            (Status.DRIFTED, 'spec-drift', ['flavor', 'availability_zone'],
             ['availability_zone'], ['flavor']),
            (finding.status, finding.reason, finding.drift,
             finding.reported_only, finding.rewritten))
        self.assertEqual(['az-pin-left'], [n.code for n in finding.notes])
        healed = json.loads(evaluation.new_spec)[primitive.DATA]
        self.assertEqual('az1', healed['availability_zone'])
        # Alone, the pin is the reason and nothing is written.
        record = _pinned('az1')
        record.zones = frozenset(['az1', 'az2'])
        evaluation = _evaluate(record, checked_fields=('availability_zone',))
        finding = evaluation.finding
        self.assertEqual(('az-pin-differs', ['availability_zone'], [], None),
                         (finding.reason, finding.reported_only,
                          finding.notes, evaluation.new_spec))


class PropagatedFlavorTest(testtools.TestCase):
    """A spec flavor rewritten from the flavor's current definition."""

    CHANGED = dict(A2_MEDIUM['nova_object.data']['extra_specs'],
                   **{'trait:CUSTOM_SSD': 'required'})

    def _record(self, spec_specs, defined_specs=None, defined_id=982):
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        spec_flavor['nova_object.data']['extra_specs'] = spec_specs
        record = _record(spec_flavor=spec_flavor)
        if defined_specs is not None:
            record.flavor_definitions = {'026050': {
                'id': defined_id, 'extra_specs': defined_specs}}
        return record

    def test_reported_and_not_written_by_default(self):
        evaluation = _evaluate(self._record(self.CHANGED, self.CHANGED))
        finding = evaluation.finding
        self.assertEqual((Status.DRIFTED, 'flavor-propagated', ['flavor']),
                         (finding.status, finding.reason,
                          finding.reported_only))
        self.assertIn('(trait:CUSTOM_SSD)', finding.detail)
        self.assertIsNone(evaluation.new_spec)
        self.assertEqual(['trait:CUSTOM_SSD'], finding.flavor_outdated)

    def test_healed_with_the_instance_policy(self):
        evaluation = _evaluate(self._record(self.CHANGED, self.CHANGED),
                               flavor_policy='instance')
        finding = evaluation.finding
        self.assertEqual(('flavor-propagated', []),
                         (finding.reason, finding.reported_only))
        healed = json.loads(evaluation.new_spec)['nova_object.data']
        self.assertEqual(A2_MEDIUM['nova_object.data']['extra_specs'],
                         healed['flavor']['nova_object.data']['extra_specs'])

    def test_not_the_definition_is_drift(self):
        for record in (
                # The definition differs from the spec's flavor.
                self._record(self.CHANGED, {'hw:cpu_policy': 'dedicated'}),
                # No definition: the flavor was deleted.
                self._record(self.CHANGED),
                # The flavorid was deleted and defined again.
                self._record(self.CHANGED, self.CHANGED, defined_id=990)):
            evaluation = _evaluate(record)
            self.assertEqual(('spec-drift', []),
                             (evaluation.finding.reason,
                              evaluation.finding.reported_only))
            self.assertIsNotNone(evaluation.new_spec)

    def test_other_differences_are_not_propagation(self):
        spec_flavor = copy.deepcopy(A2_MEDIUM)
        spec_flavor['nova_object.data'].update(extra_specs=self.CHANGED,
                                               vcpus=8)
        record = _record(spec_flavor=spec_flavor)
        record.flavor_definitions = {'026050': {
            'id': 982, 'extra_specs': self.CHANGED}}
        self.assertEqual('spec-drift', _evaluate(record).finding.reason)

    def test_outdated_embedded_flavor_is_information(self):
        evaluation = _evaluate(self._record(
            A2_MEDIUM['nova_object.data']['extra_specs'], self.CHANGED))
        finding = evaluation.finding
        self.assertEqual((Status.CONSISTENT, ['trait:CUSTOM_SSD']),
                         (finding.status, finding.flavor_outdated))
        current = _evaluate(self._record(self.CHANGED, self.CHANGED),
                            checked_fields=('image',))
        self.assertIsNone(current.finding.flavor_outdated)


class SettleTest(testtools.TestCase):
    """How the outcome of a write gives a finding its final status."""

    def drifted(self):
        return findings.Finding(
            INSTANCE_UUID, CELL['uuid'], Status.DRIFTED, 'spec-drift',
            'the flavor changed',
            changes=[findings.FieldChange('flavor', 'a', 'b')])

    def test_a_write_keeps_the_explanation_of_the_drift(self):
        for outcome in (findings.WRITTEN, findings.WOULD_WRITE):
            drifted = self.drifted()
            settled = findings.settle(drifted, outcome)
            self.assertEqual(
                (outcome.status, 'spec-drift', 'the flavor changed',
                 drifted.changes),
                (settled.status, settled.reason, settled.detail,
                 settled.changes))

    def test_a_refusal_gives_its_own_reason(self):
        drifted = self.drifted()
        settled = findings.settle(drifted, findings.Outcome(
            Status.CONFLICT, 'spec-changed', 'the row changed'))
        self.assertEqual(
            (Status.CONFLICT, 'spec-changed', 'the row changed', ['flavor']),
            (settled.status, settled.reason, settled.detail, settled.drift))
        # The finding that was decided is left as it was.
        self.assertEqual(Status.DRIFTED, drifted.status)

    def test_an_error_drops_the_changes_and_notes_are_added(self):
        note = findings.Note('already-written', 'nothing to do')
        error = findings.settle(self.drifted(), findings.Outcome(
            Status.ERROR, 'write-failed', 'too long', drop_changes=True))
        noticed = findings.settle(self.drifted(), findings.Outcome(
            Status.CONSISTENT, 'already-written', 'nothing to do',
            notes=(note,)))
        self.assertEqual(([], [note]), (error.changes, noticed.notes))
