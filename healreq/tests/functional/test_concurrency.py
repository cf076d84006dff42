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

"""Changes made by Nova between our read and our write win.

request-specs runs in-process with a clock that makes a concurrent change
through a separate connection at the right moment (see ActingClock).
"""

import json

from healreq.cmd import common
from healreq.db import tables
from healreq.heal.findings import Status
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import clocks
from healreq.tests.functional import deployment_case

# ActingClock calls: 1 = right after the batch was read (before the
# re-read of the instance), 2 = right before the spec is written.
AFTER_READ = 1
BEFORE_WRITE = 2


class ConcurrencyTest(deployment_case.DeploymentTestCase):

    def race(self, uuid, action, on_call, **options):
        """Run request-specs on ``uuid`` with ``action`` racing it."""
        clock = clocks.ActingClock(action, on_call)
        options.setdefault('instance_uuid', uuid)
        report = self.run_in_process(clock=clock, **options)
        self.assertTrue(clock.fired, 'the concurrent change never ran')
        return report

    def assertConflict(self, report, uuid, reason):
        self.assertEqual([(uuid, Status.CONFLICT, reason)],
                         [(f.instance_uuid, f.status, f.reason)
                          for f in report.findings])
        self.assertEqual(common.ExitCode.CONFLICT,
                         common.exit_code_for(report))

    def write_spec_later(self, uuid, text):
        return lambda: self.deployment.set_spec(uuid, text)

    def test_spec_changed(self):
        uuid = self.add_drifted(self.cell1)
        nova = json.dumps(dep.request_spec(uuid, demo.M1_LARGE))
        report = self.race(uuid, self.write_spec_later(uuid, nova),
                           BEFORE_WRITE)
        self.assertConflict(report, uuid, 'spec-changed')
        self.assertEqual(nova, self.deployment.spec_text(uuid))
        self.assertIsNone(self.spec_updated_at(uuid))

    def test_instance_changed(self):
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)
        report = self.race(uuid, lambda: self.update_instance(
            self.cell1, uuid, task_state='resize_prep'), AFTER_READ)
        self.assertConflict(report, uuid, 'instance-changed')
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def test_instance_changed_in_dry_run(self):
        """The dry run also re-reads the instance before it would write."""
        uuid = self.add_drifted(self.cell1)
        report = self.race(uuid, lambda: self.update_instance(
            self.cell1, uuid, vm_state='resized'), AFTER_READ, dry_run=True)
        self.assertConflict(report, uuid, 'instance-changed')

    def test_migration_started(self):
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)

        def migrate():
            with self.cell1.engine.begin() as conn:
                conn.execute(tables.migrations.insert().values(
                    instance_uuid=uuid, deleted=0, status='pre-migrating',
                    migration_type='live-migration'))
        report = self.race(uuid, migrate, AFTER_READ)
        self.assertConflict(report, uuid, 'instance-changed')
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def test_case_only_change(self):
        """MySQL's case-insensitive collation must not hide a change."""
        uuid = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM,
            new=demo.E2_MEDIUM)
        before = self.deployment.spec_text(uuid)
        changed = before.replace('"e2.medium"', '"E2.medium"')
        self.assertNotEqual(before, changed)
        report = self.race(uuid, self.write_spec_later(uuid, changed),
                           BEFORE_WRITE)
        self.assertConflict(report, uuid, 'spec-changed')
        self.assertEqual(changed, self.deployment.spec_text(uuid))

    def test_trailing_space_change(self):
        """MySQL's PAD SPACE collation must not hide a change either."""
        uuid = self.add_drifted(self.cell1)
        changed = self.deployment.spec_text(uuid) + ' '
        report = self.race(uuid, self.write_spec_later(uuid, changed),
                           BEFORE_WRITE)
        self.assertConflict(report, uuid, 'spec-changed')
        self.assertEqual(changed, self.deployment.spec_text(uuid))

    def test_next_run_heals(self):
        uuid = self.add_drifted(self.cell1)
        stale = json.dumps(self.spec(uuid), indent=2)
        report = self.race(uuid, self.write_spec_later(uuid, stale),
                           BEFORE_WRITE)
        self.assertConflict(report, uuid, 'spec-changed')
        result = self.heal('--instance', uuid)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual('m1.large',
                         self.spec_flavor(uuid)['nova_object.data']['name'])

    def test_conflict_does_not_use_up_max_count(self):
        """A refused write is not a heal: --max-count goes on to the next."""
        raced = self.add_drifted(self.cell1)
        other = self.add_drifted(self.cell1)
        report = self.race(
            raced, self.write_spec_later(raced, '{}'), BEFORE_WRITE,
            instance_uuid=None, cell_uuid=self.cell1.uuid, max_count=1)
        self.assertEqual(
            [(raced, Status.CONFLICT, 'spec-changed'),
             (other, Status.HEALED, 'spec-drift')],
            [(f.instance_uuid, f.status, f.reason) for f in report.findings])
        self.assertFalse(report.more_remain)
        self.assertEqual(3, common.exit_code_for(report))
