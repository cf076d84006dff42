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

"""Instances Nova may be working on are skipped and never written."""

import os

import fixtures

from healreq import api
from healreq.db import tables
from healreq.testing import demo
from healreq.tests.functional import clocks
from healreq.tests.functional import deployment_case


class _SkipTestCase(deployment_case.DeploymentTestCase):
    """Each instance is drifted; the runs are real ones, not dry runs."""

    def assertSkipped(self, uuid, reason, *args):
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json(*args)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'skipped', reason)],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in doc['results']])
        self.assertEqual(before, self.deployment.spec_text(uuid))
        return doc['results'][0]

    def assertHealed(self, uuid, *args):
        result, doc = self.heal_json(*args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed')],
                         [(r['instance_uuid'], r['status'])
                          for r in doc['results']])
        return doc['results'][0]


class SkipTest(_SkipTestCase):

    def test_task_state(self):
        uuid = self.add_drifted(self.cell1, task_state='resize_migrating')
        self.assertSkipped(uuid, 'task-in-progress')

    def test_resized(self):
        uuid = self.add_drifted(self.cell1, vm_state='resized')
        self.assertSkipped(uuid, 'resize-awaiting-confirm')

    def test_building(self):
        uuid = self.add_drifted(self.cell1, vm_state='building')
        self.assertSkipped(uuid, 'building')

    def test_soft_deleted(self):
        uuid = self.add_drifted(self.cell1, vm_state='soft-delete')
        self.assertSkipped(uuid, 'soft-deleted')

    def test_hidden(self):
        uuid = self.add_drifted(self.cell1, hidden=True)
        self.assertSkipped(uuid, 'hidden')

    def test_hidden_mapped_to_the_other_cell(self):
        """The hidden copy of a cross-cell resize is mapped elsewhere."""
        uuid = self.add_drifted(self.cell1, hidden=True,
                                mapping_cell_id=self.cell2.id)
        self.assertSkipped(uuid, 'hidden')

    def test_deleted_instance_option(self):
        uuid = self.add_drifted(self.cell1, deleted=True)
        self.assertSkipped(uuid, 'instance-deleted', '--instance', uuid)

    def test_deleted_instance_not_listed(self):
        uuid = self.add_drifted(self.cell1, deleted=True)
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual(0, doc['summary']['instances_checked'])
        self.assertEqual([], doc['results'])
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def test_queued_for_delete(self):
        uuid = self.add_drifted(self.cell1, queued_for_delete=True)
        self.assertSkipped(uuid, 'queued-for-delete')

    def test_migration_migrating(self):
        uuid = self.add_drifted(self.cell1,
                                migrations=[dict(status='migrating')])
        self.assertSkipped(uuid, 'migration-in-progress')

    def test_migration_finished(self):
        """'finished' waits for confirm: still in progress."""
        uuid = self.add_drifted(self.cell1, migrations=[dict(
            status='finished', migration_type='migration')])
        self.assertSkipped(uuid, 'migration-in-progress')

    def test_migration_without_status(self):
        uuid = self.add_drifted(self.cell1, migrations=[dict(status=None)])
        self.assertSkipped(uuid, 'migration-in-progress')

    def test_terminal_migrations_do_not_skip(self):
        uuid = self.add_drifted(self.cell1, migrations=[
            dict(status='error'), dict(status='confirmed'),
            dict(status='migrating', deleted=1)])
        self.assertHealed(uuid)

    def test_recently_updated(self):
        uuid = self.add_drifted(self.cell1, updated_at=clocks.utcnow())
        self.assertSkipped(uuid, 'recently-updated')

    def test_no_host(self):
        uuid = self.add_drifted(self.cell1, host=None)
        self.assertSkipped(uuid, 'no-host')

    def test_shelved_offloaded_without_host(self):
        uuid = self.add_drifted(self.cell1, host=None,
                                vm_state='shelved_offloaded')
        self.assertHealed(uuid)


class ForceTest(_SkipTestCase):
    """--force --instance overrides the skips guarding stale records."""

    def assertForced(self, uuid):
        finding = self.assertHealed(uuid, '--force', '--instance', uuid)
        self.assertIn('forced', [n['code'] for n in finding['notes']])
        self.assertEqual('m1.large',
                         self.spec_flavor(uuid)['nova_object.data']['name'])

    def test_force_migration_in_progress(self):
        self.assertForced(self.add_drifted(
            self.cell1, migrations=[dict(status='migrating')]))

    def test_force_recently_updated(self):
        self.assertForced(self.add_drifted(self.cell1,
                                           updated_at=clocks.utcnow()))

    def test_force_no_host(self):
        self.assertForced(self.add_drifted(self.cell1, host=None))

    def test_force_does_not_override_task_state(self):
        uuid = self.add_drifted(self.cell1, task_state='migrating')
        self.assertSkipped(uuid, 'task-in-progress',
                           '--force', '--instance', uuid)

    def test_force_does_not_override_resized(self):
        uuid = self.add_drifted(self.cell1, vm_state='resized')
        self.assertSkipped(uuid, 'resize-awaiting-confirm',
                           '--force', '--instance', uuid)

    def test_force_does_not_override_deletion(self):
        uuid = self.add_drifted(self.cell1, deleted=True)
        self.assertSkipped(uuid, 'instance-deleted',
                           '--force', '--instance', uuid)


class _MappingCase(_SkipTestCase):

    def map_to(self, uuid, cell):
        """Point the instance mapping of ``uuid`` at ``cell`` (or none)."""
        t = tables.instance_mappings
        with self.deployment.api_engine.begin() as conn:
            conn.execute(t.update().where(t.c.instance_uuid == uuid).values(
                cell_id=cell.id if cell is not None else None))

    def results(self, document):
        return sorted((r['instance_uuid'], r['cell_uuid'], r['status'],
                       r['reason']) for r in document['results'])

    def assertAllSkipped(self, expected, *args):
        """Run with ``args``: exit 4, ``expected`` results, nothing written.

        ``expected`` holds (uuid, cell, reason) tuples.
        """
        before = self.all_spec_texts()
        result, document = self.heal_json(*args)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(sorted((uuid, cell.uuid, 'skipped', reason)
                                for uuid, cell, reason in expected),
                         self.results(document))
        self.assertEqual(before, self.all_spec_texts())


class NotScheduledTest(_MappingCase):
    """A multi-create: the conductor maps each instance after its row."""

    def setUp(self):
        super().setUp()
        # The first is mapped already, the second not yet.
        self.mapped = self.add_drifted(self.cell1, vm_state='building',
                                       task_state='scheduling', host=None)
        self.booting = self.add_drifted(self.cell1, vm_state='building',
                                        task_state='scheduling', host=None)
        self.map_to(self.booting, None)
        self.expected = [(self.mapped, self.cell1, 'building'),
                         (self.booting, self.cell1, 'not-scheduled')]

    def test_walk(self):
        self.assertAllSkipped(self.expected)

    def test_dry_run(self):
        self.assertAllSkipped(self.expected, '--dry-run')

    def test_cell_option(self):
        self.assertAllSkipped(self.expected, '--cell', self.cell1.uuid)

    def test_detail(self):
        result, document = self.heal_json('--cell', self.cell1.uuid)
        detail, = [r['detail'] for r in document['results']
                   if r['instance_uuid'] == self.booting]
        self.assertEqual('the instance mapping has no cell yet (vm_state '
                         'building, task_state scheduling)', detail)

    def test_instance_option(self):
        # Found where its row is and skipped there, as the walk skips it.
        result, document = self.heal_json('--instance', self.booting)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(self.booting, self.cell1.uuid, 'skipped', 'not-scheduled')],
            self.results(document))

    def test_idle_instance_without_a_cell_is_an_error(self):
        idle = self.add_drifted(self.cell2)
        self.map_to(idle, None)
        before = self.deployment.spec_text(idle)
        result, document = self.heal_json('--cell', self.cell2.uuid)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(idle, self.cell2.uuid, 'error', 'instance-mapped-elsewhere')],
            self.results(document))
        self.assertIn('names no cell', document['results'][0]['detail'])
        self.assertEqual(before, self.deployment.spec_text(idle))


# The states of a cross-cell resize in which both copies are visible
# (hidden false), while the conductor swaps which one the mapping names:
# (source task_state, target vm_state, target task_state, mapped cell).
# Finishing: the destination finished (the target copy is resized, its
# migration finished), the source copy still reads resize_migrated.
# Reverting: both copies read resize_reverting.
_FINISHING = ('resize_migrated', 'resized', None)
_REVERTING = ('resize_reverting', 'resized', 'resize_reverting')


class CrossCellResizeTest(_MappingCase):
    """Both copies are skipped, whichever cell the mapping names."""

    def resize(self, state, mapped):
        """An instance resized from cell1 to cell2, in ``state``."""
        source_task, target_vm, target_task = state
        uuid = self.add_drifted(self.cell1, task_state=source_task,
                                migrations=[dict(status='post-migrating')])
        self.deployment.add_instance(
            self.cell2, demo.M1_LARGE, uuid=uuid, mapping=False,
            spec=None, vm_state=target_vm, task_state=target_task,
            host='compute-2', migrations=[dict(status='finished')])
        self.map_to(uuid, mapped)
        return uuid

    def expected(self, uuid, state):
        source_task, _, target_task = state
        return [(uuid, self.cell1, 'task-in-progress'),
                (uuid, self.cell2, 'task-in-progress' if target_task
                 else 'resize-awaiting-confirm')]

    def test_finishing_mapping_not_yet_moved(self):
        uuid = self.resize(_FINISHING, self.cell1)
        self.assertAllSkipped(self.expected(uuid, _FINISHING))

    def test_finishing_mapping_moved(self):
        uuid = self.resize(_FINISHING, self.cell2)
        self.assertAllSkipped(self.expected(uuid, _FINISHING))

    def test_reverting_mapping_not_yet_moved_back(self):
        uuid = self.resize(_REVERTING, self.cell2)
        self.assertAllSkipped(self.expected(uuid, _REVERTING))

    def test_reverting_mapping_moved_back(self):
        uuid = self.resize(_REVERTING, self.cell1)
        self.assertAllSkipped(self.expected(uuid, _REVERTING))

    def test_dry_run(self):
        uuid = self.resize(_FINISHING, self.cell2)
        self.assertAllSkipped(self.expected(uuid, _FINISHING), '--dry-run')

    def test_cell_option_on_the_unmapped_source_copy(self):
        uuid = self.resize(_FINISHING, self.cell2)
        self.assertAllSkipped([(uuid, self.cell1, 'task-in-progress')],
                              '--cell', self.cell1.uuid)

    def test_cell_option_on_the_unmapped_target_copy(self):
        uuid = self.resize(_REVERTING, self.cell1)
        self.assertAllSkipped([(uuid, self.cell2, 'task-in-progress')],
                              '--cell', self.cell2.uuid, '--dry-run')

    def test_instance_option(self):
        uuid = self.resize(_FINISHING, self.cell2)
        self.assertAllSkipped([(uuid, self.cell2, 'resize-awaiting-confirm')],
                              '--instance', uuid)

    def test_idle_copy_mapped_elsewhere_is_an_error(self):
        """Without an operation in flight, a wrong mapping is an error."""
        uuid = self.add_drifted(self.cell1, mapping_cell_id=self.cell2.id,
                                updated_at=clocks.utcnow())
        result, document = self.heal_json('--cell', self.cell1.uuid)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(uuid, self.cell1.uuid, 'error', 'instance-mapped-elsewhere')],
            self.results(document))


class ReplayTest(_MappingCase):
    """revert and apply decide again: an instance in flight is left alone.

    As for any operation in flight, such a change is a conflict (exit 3)
    that names the skip rule.
    """

    def setUp(self):
        super().setUp()
        self.uuid = self.add_drifted(self.cell1)
        self.plan_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'plan.json')

    def healed(self):
        """Heal the instance; return the run id."""
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        return document['run_id']

    def planned(self):
        result, document = self.heal_json('--dry-run', '--plan',
                                          self.plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)

    def assertLeftAlone(self, reason, *argv):
        before = self.all_spec_texts()
        result, document = self.run_json(*argv)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.uuid, 'conflict', reason)],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in document['results']])
        self.assertEqual(before, self.all_spec_texts())

    def boot_again(self):
        """The instance as a booting one whose mapping has no cell yet."""
        self.update_instance(self.cell1, self.uuid, vm_state='building',
                             task_state='scheduling', host=None)
        self.map_to(self.uuid, None)

    def test_revert_of_an_instance_not_scheduled(self):
        run_id = self.healed()
        self.boot_again()
        self.assertLeftAlone('not-scheduled', 'revert', run_id)

    def test_apply_to_an_instance_not_scheduled(self):
        self.planned()
        self.boot_again()
        self.assertLeftAlone('not-scheduled', 'apply', self.plan_path)

    def test_revert_during_a_cross_cell_resize(self):
        run_id = self.healed()
        self.update_instance(self.cell1, self.uuid,
                             task_state='resize_migrated')
        self.deployment.add_instance(
            self.cell2, demo.M1_LARGE, uuid=self.uuid,
            mapping=False, spec=None, vm_state='resized')
        self.map_to(self.uuid, self.cell2)
        self.assertLeftAlone('resize-awaiting-confirm', 'revert', run_id)

    def test_apply_while_the_mapping_moves(self):
        """The mapping moves to the target cell while apply decides.

        apply read the mapping first; the cell it names then holds the
        source copy, now in flight, mapped to the other cell.
        """
        self.planned()

        def finish_resize():
            self.deployment.add_instance(
                self.cell2, demo.M1_LARGE, uuid=self.uuid,
                mapping=False, spec=None, vm_state='resized')
            self.map_to(self.uuid, self.cell2)
            self.update_instance(self.cell1, self.uuid,
                                 task_state='resize_migrated')
        # Clock call 1: right after apply read the instance to check that
        # no operation is in flight, before it derives the spec again.
        clock = clocks.ActingClock(finish_resize, 1)
        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        before = self.all_spec_texts()
        result = api.apply_plan(conf, self.plan_path, clock=clock)
        self.assertTrue(clock.fired)
        self.assertEqual(3, result.exit_code, result.problems)
        self.assertEqual(
            [(self.uuid, 'conflict', 'task-in-progress')],
            [(f.instance_uuid, f.status.value, f.reason)
             for f in result.report.findings])
        self.assertEqual(before, self.all_spec_texts())
