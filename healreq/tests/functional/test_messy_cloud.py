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

"""One whole walk over a messy 2026.2 cloud on MariaDB.

Service rows of older releases left behind (a decommissioned controller,
a forced-down scheduler and compute, a deleted conductor), an audit
database created latin1, flavor names and image properties that hold
line breaks, terminal escapes and text beyond latin1, and a spec row
another session holds locked. The walk
writes nothing beyond what 2026.2 derives, reports every instance, and
its audit agrees with the rows.
"""

import datetime
import json

import sqlalchemy as sa

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

DATA = 'nova_object.data'
LONG_AGO = datetime.datetime(2024, 1, 10, 11, 26, 50)
# Properties 2026.2 knows and Zed does not (ImageMetaProps 1.35 to 1.40).
NEWER_RAW = {'hw_virtio_packed_ring': 'true', 'hw_sound_model': 'ich9'}
NEWER_CODED = {'hw_virtio_packed_ring': True, 'hw_sound_model': 'ich9'}
# A flavor name that would forge a report line and drive the terminal.
HOSTILE_NAME = 'm1.évil\nHEALED    forged\x1b[31m\u202e🙂'
HOSTILE_DISTRO = 'ubuntu\r\nCell forged\x1b]0;owned\x07 €'


class MessyCloudTest(audit_case.AuditTestCase):

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def setUp(self):
        super().setUp()
        self.audit_db = self.db.latin1_database_url('audit')
        self.config = self.write_config(
            'audit_connection = %s\nlock_wait_timeout = 1\n' % self.audit_db)
        # Left behind: a controller decommissioned on Zed, a scheduler of
        # Zed forced down while it still reports, a compute of 2023.1
        # forced down, and a deleted conductor of 2023.2.
        dep.add_service(self.cell1.engine, 'nova-conductor', 64,
                        host='ctl-old', last_seen_up=LONG_AGO)
        dep.add_service(self.cell1.engine, 'nova-scheduler', 64,
                        host='sched-old', forced_down=True)
        dep.add_service(self.cell2.engine, 'nova-compute', 66,
                        host='cmp-old', forced_down=True)
        dep.add_service(self.cell2.engine, 'nova-conductor', 66,
                        host='ctl-gone', deleted=True)
        raw = dict(dep.IMAGE_PROPERTIES, **NEWER_RAW)
        coded = dict(dep.IMAGE_PROPERTIES, **NEWER_CODED)
        newer_image = dict(
            system_metadata=dep.image_system_metadata(raw, min_disk=20),
            spec_fields={'spec_image': dep.image(properties=coded)})
        self.consistent = [
            self.deployment.add_instance(cell, demo.M1_SMALL, **newer_image)
            for cell in (self.cell1, self.cell2)]
        # A failed resize on an image of 2026.2's properties.
        self.resized = self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, spec_flavor=demo.M1_LARGE,
            new=demo.M1_LARGE, **newer_image)
        hostile = dep.flavor(7, HOSTILE_NAME, vcpus=4, memory_mb=8192,
                             root_gb=80)
        self.hostile_flavor = self.deployment.add_instance(
            self.cell2, demo.M1_SMALL, spec_flavor=hostile, new=hostile)
        # Rebuilt on an image whose os_distro is hostile.
        self.hostile_image = self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(
                dict(dep.IMAGE_PROPERTIES, os_distro=HOSTILE_DISTRO),
                min_disk=20))
        self.locked = self.add_drifted(self.cell2)
        self.originals = self.all_spec_texts()
        self.hold_row(self.locked)

    def hold_row(self, uuid):
        """Another session holds the spec row of ``uuid`` locked."""
        conn = self.deployment.api_engine.connect()
        self.addCleanup(conn.close)
        transaction = conn.begin()
        self.addCleanup(transaction.rollback)
        conn.execute(sa.text("SELECT spec FROM request_specs WHERE "
                             "instance_uuid = '%s' FOR UPDATE" % uuid))

    def test_walk(self):
        healed = {self.resized: ['flavor'],
                  self.hostile_flavor: ['flavor'],
                  self.hostile_image: ['image']}
        # The text report: one line per finding, nothing forged, nothing
        # that drives the terminal.
        dry = self.heal('--dry-run', config_file=self.config)
        self.assertEqual(0, dry.code, dry.stdout + dry.stderr)
        lines = dry.stdout.splitlines()
        self.assertEqual(
            sorted(list(healed) + [self.locked]),
            sorted(line.split()[1] for line in lines
                   if line.startswith('DRIFTED')))
        self.assertEqual([], [line for line in lines
                              if line.startswith(('HEALED', 'Cell forged'))])
        self.assertNotIn('\x1b', dry.stdout + dry.stderr)
        self.assertNotIn('\u202e', dry.stdout + dry.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

        result, document = self.heal_json(config_file=self.config)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        # The release is 2026.2's; the rows left behind are notes only.
        release = document['release']
        self.assertEqual(('2026.2', True, None), (
            release['series'], release['writable'], release['refusal']))
        self.assertEqual([('ctl-old', 64)], [
            (s['host'], s['version']) for s in release['down_services']])
        self.assertEqual([], document['problems'])
        # Every instance is reported.
        self.assertEqual(dict(instances_checked=6, consistent=2, healed=3,
                              conflicts=1, errors=0, skipped=0),
                         {key: document['summary'][key] for key in (
                             'instances_checked', 'consistent', 'healed',
                             'conflicts', 'errors', 'skipped')})
        self.assertEqual(
            dict({uuid: ('healed', fields) for uuid, fields in
                  healed.items()},
                 **{self.locked: ('conflict', ['flavor'])}),
            {r['instance_uuid']: (r['status'], r['drift'])
             for r in document['results']})
        # Nothing written beyond what 2026.2 derives.
        rows = self.all_spec_texts()
        for uuid in self.consistent + [self.locked]:
            self.assertEqual(self.originals[uuid], rows[uuid], uuid)
        for uuid, fields in healed.items():
            before = json.loads(self.originals[uuid])[DATA]
            after = json.loads(rows[uuid])[DATA]
            self.assertEqual(sorted(fields), sorted(
                key for key in set(before) | set(after)
                if before.get(key) != after.get(key)), uuid)
        self.assertEqual(NEWER_CODED, {
            key: value for key, value in json.loads(rows[self.resized])[DATA][
                'image'][DATA]['properties'][DATA].items()
            if key in NEWER_CODED})
        self.assertEqual(HOSTILE_DISTRO, json.loads(
            rows[self.hostile_image])[DATA]['image'][DATA]['properties'][
                DATA]['os_distro'])
        # The audit agrees with the rows, every text whole.
        result, shown = self.run_json('audit', 'show', document['run_id'],
                                      config_file=self.config)
        self.assertEqual(0, result.code, result.stderr)
        changes = {c['instance_uuid']: c for c in shown['changes']}
        self.assertEqual(set(healed) | {self.locked}, set(changes))
        for uuid in healed:
            self.assertEqual(('applied', self.originals[uuid], rows[uuid]),
                             (changes[uuid]['state'],
                              changes[uuid]['before'],
                              changes[uuid]['after']))
        # Its intent was recorded, and the write refused: the row is as
        # it was.
        self.assertEqual(('refused', self.originals[self.locked]), (
            changes[self.locked]['state'], changes[self.locked]['before']))
        findings = {f['instance_uuid']: f for f in shown['findings']}
        # Every result of the report is recorded as it was reported, and
        # nothing else.
        self.assertEqual(
            {r['instance_uuid']: (r['status'], r['reason'])
             for r in document['results']},
            {uuid: (f['status'], f['reason'])
             for uuid, f in findings.items()})
        self.assertEqual(('conflict', 'spec-locked'), (
            findings[self.locked]['status'],
            findings[self.locked]['reason']))
        self.assertIn(json.dumps(HOSTILE_NAME, ensure_ascii=False)[1:-1],
                      json.dumps(findings[self.hostile_flavor],
                                 ensure_ascii=False))
        # A verification run finds only the locked instance left, as does
        # one by 2026.2's rules named, without the rows left behind: what
        # was written is what 2026.2 derives, no more.
        result, again = self.heal_json('--dry-run', config_file=self.config)
        self.assertEqual([self.locked], [
            r['instance_uuid'] for r in again['results']])
        for cell in (self.cell1, self.cell2):
            with cell.engine.begin() as conn:
                conn.execute(sa.text(
                    "DELETE FROM services WHERE host IN ('ctl-old', "
                    "'sched-old', 'cmp-old', 'ctl-gone')"))
        result, named = self.heal_json('--dry-run', '--target-release',
                                       '2026.2', config_file=self.config)
        self.assertEqual([self.locked], [
            r['instance_uuid'] for r in named['results']])
