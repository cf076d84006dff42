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

"""The memos change nothing: the same runs with them on and off.

A deployment with every kind of drift, and many instances sharing each
flavor and image (what the memos remember), is checked, healed and
reverted once with the memos on and once with them off: the reports,
the audit records and the rows written are byte for byte the same.
"""

import json

from healreq.heal import field_checks
from healreq import memo
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case

HEAL_ARGS = ('--create-missing', '--az-policy', 'repin')

# What differs between two runs whatever they find.
_PER_RUN_KEYS = frozenset(['run_id', 'id', 'started_at', 'ended_at',
                           'created_at', 'started_ns', 'elapsed_seconds'])


def _without_run_identity(value):
    """``value`` with its run ids and times left out, recursively.

    So is the id of a row a change inserts: MySQL does not reuse the id of
    the row that the revert deleted.
    """
    if isinstance(value, dict):
        inserted = 'spec_id' in value and value.get('before') is None
        return {key: _without_run_identity(item)
                for key, item in value.items() if key not in _PER_RUN_KEYS
                and not (inserted and key == 'spec_id')}
    if isinstance(value, list):
        return [_without_run_identity(item) for item in value]
    return value


class MemosChangeNothingTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.deployment.add_aggregate('agg-1', 'az1', ['compute-1'])
        self.deployment.add_aggregate('agg-2', 'az2', ['compute-2'])
        for cell in (self.cell1, self.cell2):
            for _ in range(4):
                self.add_consistent(cell)
                self.deployment.add_instance(cell, demo.M1_LARGE)
        rebuilt = dep.image_system_metadata(dict(
            dep.IMAGE_PROPERTIES, hw_disk_bus='scsi',
            hw_scsi_model='virtio-scsi'))
        for cell in (self.cell1, self.cell2):
            # Failed resizes, to a shared and to a pinned NUMA flavor.
            self.deployment.add_instance(
                cell, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM,
                new=demo.E2_MEDIUM, migrations=[dict(
                    old_instance_type_id=982, new_instance_type_id=831)])
            self.deployment.add_instance(
                cell, demo.M1_LARGE, spec_flavor=demo.C1_PINNED,
                new=demo.C1_PINNED, spec_fields=dict(
                    numa_topology=demo.numa_request(demo.C1_PINNED)))
            # Two rebuilt with the same new image; and one whose spec
            # holds that new image while its record holds the image every
            # consistent instance has (only the spec tells them apart).
            for _ in range(2):
                self.deployment.add_instance(cell, demo.M1_LARGE,
                                             system_metadata=rebuilt)
            self.deployment.add_instance(cell, demo.M1_LARGE, spec_fields=dict(
                spec_image=dep.image(properties=dict(
                    dep.IMAGE_PROPERTIES, hw_disk_bus='scsi',
                    hw_scsi_model='virtio-scsi'))))
            # Moved to another zone with the pin left behind.
            self.add_consistent(cell, host='compute-2',
                                availability_zone='az2',
                                spec_fields=dict(availability_zone='az1'))
            self.add_consistent(cell, spec=None, availability_zone='az1')
        self.deployment.add_group('web', members=[
            self.add_consistent(self.cell1), self.add_consistent(self.cell2)])
        self.originals = self.all_spec_texts()

    def runs(self):
        """Dry run, heal, revert: their documents and the rows after each."""
        documents = []
        for args in (('--dry-run',) + HEAL_ARGS, HEAL_ARGS):
            result, document = self.heal_json(*args)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            documents.append(document)
        healed = self.all_spec_texts()
        audit = self.audit_show(documents[-1]['run_id'])
        result, reverted = self.run_json('revert', documents[-1]['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        return dict(reports=_without_run_identity(documents),
                    healed=healed, audit=_without_run_identity(audit),
                    revert=_without_run_identity(reverted))

    def test_same_reports_audits_and_rows(self):
        remembered = self.runs()
        self.assertGreater(len(field_checks._RESULTS), 0)
        with memo.disabled():
            derived = self.runs()
            self.assertEqual(0, len(field_checks._RESULTS))
        # Every kind of drift is there, and healed.
        reasons = sorted({result['reason'] for result
                          in remembered['reports'][1]['results']})
        self.assertEqual(['az-pin-differs', 'failed-resize-leftover',
                          'group-lost', 'spec-drift', 'spec-missing'],
                         reasons)
        self.assertNotEqual(self.originals, remembered['healed'])
        for name in ('reports', 'healed', 'audit', 'revert'):
            self.assertEqual(
                json.dumps(remembered[name], sort_keys=True, indent=1),
                json.dumps(derived[name], sort_keys=True, indent=1), name)
