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

from healreq.tests.functional import fixtures


class _SkipTestCase(fixtures.DeploymentTestCase):
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
        uuid = self.add_drifted(self.cell1, updated_at=fixtures.utcnow())
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
                                           updated_at=fixtures.utcnow()))

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
