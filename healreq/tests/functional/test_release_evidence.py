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

"""The release is judged from evidence, not from rows left behind.

Services that have not reported within ``[DEFAULT]/service_down_time``
are down and outranked by those that are up; forced-down and deleted
services do not count; the object versions of the newest specs must
agree with the services, and the controllers that are up with each
other. Otherwise nothing is written.
"""

import datetime
import json
import os
import random

import fixtures
import sqlalchemy as sa
import testscenarios

from healreq import clock
from healreq.db import tables
from healreq import releases
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import backends
from healreq.tests.functional import field_case

# Properties Nova 34 knows and Zed does not: ImageMetaProps 1.35, 1.36,
# 1.40. Nova uses them to choose hosts.
NEWER_PROPERTIES = {'hw_virtio_packed_ring': 'true',
                    'hw_maxphysaddr_mode': 'passthrough',
                    'hw_sound_model': 'ich9'}
NEWER_CODED = {'hw_virtio_packed_ring': True,
               'hw_maxphysaddr_mode': 'passthrough',
               'hw_sound_model': 'ich9'}
LONG_AGO = datetime.datetime(2024, 1, 10, 11, 26, 50)
REFUSAL_END = (': refusing to write; --dry-run still reports, and '
               '--target-release names the release if it is known')


class EvidenceTestCase(field_case.FieldTestCase):

    def add_nova34_instance(self, spec_properties=None):
        """A consistent instance whose image uses Nova 34's properties."""
        raw = dict(dep.IMAGE_PROPERTIES, **NEWER_PROPERTIES)
        coded = dict(dep.IMAGE_PROPERTIES, **NEWER_CODED)
        if spec_properties is not None:
            coded = spec_properties
        return self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(raw, min_disk=20),
            spec_fields={'spec_image': dep.image(properties=coded)})

    def stale_service(self, version, binary='nova-conductor',
                      host='ctl-decommissioned', **kwargs):
        kwargs.setdefault('last_seen_up', LONG_AGO)
        dep.add_service(self.cell1.engine, binary, version, host=host,
                        **kwargs)


class StaleServiceTest(EvidenceTestCase):

    def test_stale_controller_row_changes_nothing(self):
        uuid = self.add_nova34_instance()
        self.assert_consistent()
        # A controller decommissioned while on Zed, its row never deleted.
        self.stale_service(64)
        self.assert_consistent('--dry-run')
        self.assert_consistent()
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(('2026.2', 'service version 74'),
                         (doc['release']['series'],
                          doc['release']['evidence']))
        self.assertEqual(
            [{'cell': 'cell1', 'host': 'ctl-decommissioned',
              'binary': 'nova-conductor', 'version': 64,
              'last_report': '2024-01-10T11:26:50Z'}],
            doc['release']['down_services'])
        result = self.heal('--dry-run')
        self.assertIn(
            '  note: 1 service(s) down for more than 60 s, ignored: '
            'nova-conductor on ctl-decommissioned (version 64, last report '
            '2024-01-10T11:26:50Z)', result.stdout.splitlines())
        self.assertIn('hw_sound_model', self.deployment.spec_text(uuid))

    def test_forced_down_and_deleted_services_do_not_count(self):
        self.add_nova34_instance()
        # Reporting, but forced down by the operator; and a deleted row.
        self.stale_service(64, last_seen_up=clock.utcnow(),
                           forced_down=True)
        self.stale_service(64, host='ctl-deleted', deleted=True)
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(('2026.2', []), (doc['release']['series'],
                                          doc['release']['notes']))

    def test_service_down_time_comes_from_nova_conf(self):
        self.add_nova34_instance()
        self.stale_service(64, last_seen_up=clock.utcnow()
                           - datetime.timedelta(seconds=600))
        config = self.write_config_text(
            open(self.config_file).read().replace(
                '[DEFAULT]\n', '[DEFAULT]\nservice_down_time = 3600\n'))
        result, doc = self.heal_json('--dry-run', config_file=config)
        # Up for an hour's down time: an upgrade seems in progress.
        self.assertFalse(doc['release']['writable'])
        self.assertIn('an upgrade is in progress',
                      doc['release']['refusal'])
        result, doc = self.heal_json('--dry-run')
        self.assertTrue(doc['release']['writable'])

    def test_apply_takes_the_down_time_from_nova_conf_too(self):
        drifted = self.add_drifted(self.cell1)
        self.stale_service(64, last_seen_up=clock.utcnow()
                           - datetime.timedelta(seconds=600))
        plan = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--plan', plan)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        config = self.write_config_text(
            open(self.config_file).read().replace(
                '[DEFAULT]\n', '[DEFAULT]\nservice_down_time = 3600\n'))
        before = self.deployment.spec_text(drifted)
        # Up for an hour's down time: an upgrade seems in progress.
        result = self.run_cli('apply', plan, config_file=config)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertIn('an upgrade is in progress', result.stderr)
        self.assertEqual(before, self.deployment.spec_text(drifted))
        result = self.run_cli('apply', plan)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertNotEqual(before, self.deployment.spec_text(drifted))


class FallbackTest(EvidenceTestCase):

    def make_every_service_stale(self):
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.update().values(
                    last_seen_up=LONG_AGO))

    def test_no_controller_up_judges_every_registered_service(self):
        # An offline copy of the databases: nobody reports any more.
        uuid = self.add_drifted(self.cell1)
        self.make_every_service_stale()
        result, doc = self.heal_json('--dry-run')
        self.assertEqual('2026.2', doc['release']['series'])
        self.assertEqual(2, len(doc['release']['notes']))
        self.assertIn('no controller service has reported within 60 s',
                      doc['release']['notes'][0])
        self.assertIn('judged from every nova-conductor and '
                      'nova-scheduler row that is not forced down',
                      doc['release']['notes'][0])
        # The services that are down are named in the text report too.
        lines = self.heal('--dry-run').stdout.splitlines()
        self.assertIn(
            '  note: 6 service(s) down for more than 60 s: nova-compute on '
            'cell0-nova-compute (version 74, last report '
            '2024-01-10T11:26:50Z), nova-compute on cell1-nova-compute '
            '(version 74, last report 2024-01-10T11:26:50Z), nova-compute '
            'on cell2-nova-compute (version 74, last report '
            '2024-01-10T11:26:50Z), nova-conductor on cell0-nova-conductor '
            '(version 74, last report 2024-01-10T11:26:50Z), nova-conductor '
            'on cell1-nova-conductor (version 74, last report '
            '2024-01-10T11:26:50Z) and 1 more', lines)
        result, doc = self.heal_json()
        self.assertEqual([(uuid, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])

    def test_controllers_at_different_versions_refuse_writing(self):
        uuid = self.add_nova34_instance()
        drifted = self.add_drifted(self.cell1)
        self.make_every_service_stale()
        self.stale_service(64)
        before = self.all_spec_texts()
        result = self.heal()
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ['nova-heal: error: an upgrade is in progress: the controllers '
             'run service versions 64, 74 (nova-conductor on '
             'ctl-decommissioned (version 64, last report '
             '2024-01-10T11:26:50Z), nova-conductor on cell0-nova-conductor '
             '(version 74, last report 2024-01-10T11:26:50Z), '
             'nova-conductor on cell1-nova-conductor (version 74, last '
             'report 2024-01-10T11:26:50Z), nova-conductor on '
             'cell2-nova-conductor (version 74, last report '
             '2024-01-10T11:26:50Z))' + REFUSAL_END],
            result.stderr.splitlines())
        self.assertEqual(before, self.all_spec_texts())
        result, doc = self.heal_json('--dry-run')
        self.assertFalse(doc['release']['writable'])
        self.assertIn(drifted, [r['instance_uuid'] for r in doc['results']])
        self.assertIn('hw_sound_model', self.deployment.spec_text(uuid))

    def test_no_controller_up_ignores_an_older_compute(self):
        # An offline copy: a compute still on 2026.1, which Nova 34 runs
        # beside it. Computes never load the specs.
        uuid = self.add_nova34_instance()
        drifted = self.add_drifted(self.cell1)
        self.make_every_service_stale()
        self.stale_service(72, binary='nova-compute', host='cmp-n-1')
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(('2026.2', True), (doc['release']['series'],
                                            doc['release']['writable']))
        self.assertIn({'cell': 'cell1', 'host': 'cmp-n-1',
                       'binary': 'nova-compute', 'version': 72,
                       'last_report': '2024-01-10T11:26:50Z'},
                      doc['release']['down_services'])
        self.assertEqual([(drifted, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])
        self.assertIn('hw_sound_model', self.deployment.spec_text(uuid))

    def test_no_controller_up_names_an_old_api_row_stale(self):
        uuid = self.add_nova34_instance()
        drifted = self.add_drifted(self.cell1)
        self.make_every_service_stale()
        dep.add_wsgi_service(self.cell1.engine, 57, host='api-xena',
                             created_at=LONG_AGO)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ('2026.2', [{'cell': 'cell1', 'host': 'api-xena',
                         'binary': 'nova-osapi_compute', 'version': 57,
                         'last_written': '2024-01-10T11:26:50Z'}]),
            (doc['release']['series'], doc['release']['stale_services']))
        self.assertEqual([(drifted, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])
        self.assertIn('hw_sound_model', self.deployment.spec_text(uuid))

    def test_without_any_controller_the_release_must_be_named(self):
        drifted = self.add_drifted(self.cell1)
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.delete().where(
                    tables.services.c.binary == 'nova-conductor'))
        dep.add_wsgi_service(self.cell1.engine, 74)
        before = self.all_spec_texts()
        result = self.heal()
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ['nova-heal: error: cannot tell which Nova release runs (no '
             'nova-conductor or nova-scheduler service registered in any '
             'cell)' + REFUSAL_END], result.stderr.splitlines())
        self.assertEqual(before, self.all_spec_texts())
        result, doc = self.heal_json('--target-release', '2026.2')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(drifted, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])


class ComputeApiTest(EvidenceTestCase):
    """Nova 34's compute API writes its row at start, then never again."""

    def test_wsgi_api_rows_are_not_down(self):
        self.add_nova34_instance()
        # One started long ago and restarted since, one started now.
        dep.add_wsgi_service(self.cell0.engine, 74, host='api-1',
                             created_at=LONG_AGO,
                             updated_at=LONG_AGO + datetime.timedelta(1))
        dep.add_wsgi_service(self.cell0.engine, 74, host='api-2')
        dep.add_wsgi_service(self.cell0.engine, 74, host='api-1',
                             binary='nova-metadata', created_at=LONG_AGO)
        self.assert_consistent()
        drifted = self.add_drifted(self.cell1)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ('2026.2', True, [], [], []),
            (doc['release']['series'], doc['release']['writable'],
             doc['release']['notes'], doc['release']['down_services'],
             doc['release']['stale_services']))
        self.assertEqual([(drifted, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])

    def test_older_api_refuses_writing(self):
        drifted = self.add_drifted(self.cell1)
        dep.add_wsgi_service(self.cell0.engine, 74, host='api-1')
        dep.add_wsgi_service(self.cell0.engine, 72, host='api-2',
                             created_at=LONG_AGO - datetime.timedelta(9),
                             updated_at=LONG_AGO)
        before = self.all_spec_texts()
        result = self.heal()
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ['nova-heal: error: an upgrade is in progress: 1 compute API '
             'service(s) older than the controllers (service version 74, '
             '2026.2 Hibiscus (Nova 34)) may not load what their release '
             'writes: nova-osapi_compute on api-2 (version 72, last '
             'written 2024-01-10T11:26:50Z); finish the upgrade, delete the '
             'stale service record (openstack compute service delete), or '
             'name the release (--target-release)' + REFUSAL_END],
            result.stderr.splitlines())
        self.assertEqual(before, self.all_spec_texts())
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn(drifted, result.stdout)
        self.assertTrue(any(
            line.startswith('  nothing may be written: an upgrade is in '
                            'progress: 1 compute API service(s)')
            for line in result.stdout.splitlines()), result.stdout)
        result, doc = self.heal_json('--target-release', '2026.2')
        self.assertEqual(0, result.code, result.stdout + result.stderr)

    def test_stale_api_is_named_and_does_not_block(self):
        drifted = self.add_drifted(self.cell1)
        dep.add_wsgi_service(self.cell0.engine, 74, host='api-1')
        dep.add_wsgi_service(self.cell0.engine, 57, host='api-xena',
                             created_at=LONG_AGO)
        result = self.heal('--dry-run')
        self.assertIn(
            '  note: 1 compute API service(s) older than any release that '
            'runs beside 2026.2 Hibiscus (Nova 34) (service version 72 on), '
            'stale and ignored: nova-osapi_compute on api-xena (version 57, '
            'last written 2024-01-10T11:26:50Z)', result.stdout.splitlines())
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [{'cell': 'cell0', 'host': 'api-xena',
              'binary': 'nova-osapi_compute', 'version': 57,
              'last_written': '2024-01-10T11:26:50Z'}],
            doc['release']['stale_services'])
        self.assertEqual([], doc['release']['down_services'])
        self.assertEqual([(drifted, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])


class UpgradeInProgressTest(EvidenceTestCase):

    def test_controllers_up_at_different_versions_refuse_writing(self):
        uuid = self.add_drifted(self.cell1)
        dep.add_service(self.cell0.engine, 'nova-scheduler', 72,
                        host='sched-1')
        before = self.all_spec_texts()
        result = self.heal()
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertIn('nova-heal: error: an upgrade is in progress: the '
                      'controllers that are up run service versions 72, '
                      '74 (nova-scheduler on sched-1 (version 72, last '
                      'report ', result.stderr)
        self.assertTrue(result.stderr.rstrip().endswith(REFUSAL_END))
        self.assertEqual(before, self.all_spec_texts())
        # The dry run still reports, by the oldest controller's release.
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn(uuid, result.stdout)
        lines = result.stdout.splitlines()
        self.assertIn('Nova release: 2026.1 Gazpacho (Nova 33), detected '
                      'from service version 72', lines)
        self.assertTrue(any(line.startswith(
            '  nothing may be written: an upgrade is in progress')
            for line in lines))


class WriteGuardTest(EvidenceTestCase):
    """Per spec, the last line of defence when the sample missed it.

    Zed's services, and newest specs that Zed wrote; but older specs were
    saved by a newer Nova. A heal by Zed's rules would lower their
    ImageMetaProps version or drop a property both the spec and the
    instance hold: it leaves them alone, unless the release is named.
    """

    def setUp(self):
        super().setUp()
        # The newest two specs stand for the sample of a large cloud.
        self.useFixture(fixtures.MonkeyPatch(
            'healreq.run.records.VERSION_SAMPLE', 2))
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.update().values(version=64))
        # Both images drifted (hw_disk_bus), their specs are at 1.44.
        self.losing = self.add_newer_spec(hw_sound_model='ich9')
        self.lowering = self.add_newer_spec()
        for _ in range(2):
            self.deployment.add_instance(
                self.cell1, demo.M1_SMALL, system_metadata=(
                    dep.image_system_metadata(min_disk=20)),
                spec_fields={'version': '1.14',
                             'spec_image': dep.image(props_version='1.34')})

    def add_newer_spec(self, **shared):
        raw = dict(dep.IMAGE_PROPERTIES, hw_disk_bus='scsi', **shared)
        return self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(raw, min_disk=20),
            spec_fields={'spec_image': dep.image(properties=dict(
                dep.IMAGE_PROPERTIES, hw_disk_bus='ide', **shared))})

    def test_guarded_unless_the_release_is_named(self):
        before = self.all_spec_texts()
        result, doc = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(('2022.2', True), (doc['release']['series'],
                                            doc['release']['writable']))
        self.assertEqual(
            sorted([(self.losing, 'error', 'image-property-would-be-lost'),
                    (self.lowering, 'error', 'object-version-downgrade')]),
            sorted((r['instance_uuid'], r['status'], r['reason'])
                   for r in doc['results']))
        self.assertEqual(before, self.all_spec_texts())
        result, doc = self.heal_json('--target-release', 'zed')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual({(self.losing, 'healed'), (self.lowering, 'healed')},
                         {(r['instance_uuid'], r['status'])
                          for r in doc['results']})
        for uuid in (self.losing, self.lowering):
            props = self.spec(uuid)['nova_object.data']['image'][
                'nova_object.data']['properties']
            self.assertEqual('1.34', props['nova_object.version'])
        self.assertNotIn('hw_sound_model', self.deployment.spec_text(
            self.losing))


def _release_scenarios():
    return [(release.series, dict(release=release))
            for release in releases.RELEASES]


# Properties and the ImageMetaProps version that added each.
_PROPERTY_VERSIONS = (
    ('hw_disk_bus', (1, 0), 'scsi', 'scsi'),
    ('hw_time_hpet', (1, 21), 'true', True),
    ('hw_input_bus', (1, 29), 'usb', 'usb'),
    ('hw_virtio_packed_ring', (1, 35), 'true', True),
    ('hw_maxphysaddr_mode', (1, 36), 'emulate', 'emulate'),
    ('hw_firmware_stateless', (1, 38), 'false', False),
    ('hw_sound_model', (1, 40), 'ich9', 'ich9'),
)


class StaleRowsPropertyTest(EvidenceTestCase):
    """Any stale, forced-down or deleted row changes no written byte.

    For every supported release, a deployment whose specs that release
    wrote is healed; then, several times over, rows of other releases'
    services that are down, forced down, deleted or never reported are
    added at random, and the same heal must write the very same bytes.
    """

    scenarios = testscenarios.multiply_scenarios(backends.SCENARIOS,
                                                 _release_scenarios())
    TRIALS = 3

    def setUp(self):
        super().setUp()
        release = self.release
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.update().values(
                    version=release.service_version))
        if release.api_schema_head != releases.RELEASES[1].api_schema_head:
            with self.deployment.api_engine.begin() as conn:
                conn.execute(sa.text('CREATE TABLE alembic_version '
                                     '(version_num VARCHAR(32) NOT NULL)'))
                conn.execute(sa.text('INSERT INTO alembic_version VALUES '
                                     '(:head)'),
                             {'head': release.api_schema_head})
        self.build_instances()

    def build_instances(self):
        """Instances whose specs the release wrote: some drift, some not."""
        release = self.release
        raw, coded = dict(dep.IMAGE_PROPERTIES), dict(dep.IMAGE_PROPERTIES)
        for name, added, text, value in _PROPERTY_VERSIONS:
            if added <= release.props_version:
                raw[name], coded[name] = text, value
        fields = {'version': release.newest_text('RequestSpec'),
                  'spec_image': dep.image(
                      properties=coded,
                      props_version=release.newest_text('ImageMetaProps'))}
        system_metadata = dep.image_system_metadata(raw, min_disk=20)
        for cell in (self.cell1, self.cell2):
            self.deployment.add_instance(
                cell, demo.M1_SMALL, system_metadata=system_metadata,
                spec_fields=fields)
            self.deployment.add_instance(
                cell, demo.M1_LARGE, spec_flavor=demo.M1_SMALL,
                system_metadata=dep.image_system_metadata(raw, min_disk=80),
                spec_fields=fields)
        # An image property set since boot (image_property set): drift.
        newer = dict(raw, hw_qemu_guest_agent='yes')
        self.deployment.add_instance(
            self.cell2, demo.M1_SMALL, spec_fields=fields,
            system_metadata=dep.image_system_metadata(newer, min_disk=20))

    def add_random_rows(self, generator):
        # Every other release's, and older and newer than supported.
        others = [r.service_version for r in releases.RELEASES
                  if r.service_version != self.release.service_version]
        others += [61, 99]
        now = clock.utcnow()
        for number in range(generator.randint(1, 4)):
            other = generator.choice(others)
            kind = generator.choice(('stale', 'forced', 'deleted', 'never'))
            # A compute API row counts whatever its age (see
            # test_api_and_compute_rows_change_no_written_byte).
            binary = generator.choice(
                ('nova-conductor', 'nova-scheduler', 'nova-compute')
                + (('nova-osapi_compute',) if kind in ('forced', 'deleted')
                   else ()))
            values = {
                'stale': dict(last_seen_up=now - datetime.timedelta(
                    seconds=generator.randint(61, 10 ** 8))),
                'forced': dict(last_seen_up=now, forced_down=True),
                'deleted': dict(last_seen_up=now, deleted=True),
                'never': dict(last_seen_up=None),
            }[kind]
            dep.add_service(generator.choice(self.deployment.cells).engine,
                            binary, other,
                            host='random-%d-%s' % (number, kind), **values)

    def remove_random_rows(self):
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.delete().where(
                    tables.services.c.host.like('random-%')))

    def heal_outcome(self, before):
        for uuid, text in before.items():
            self.deployment.set_spec(uuid, text)
        result, doc = self.heal_json()
        return (result.code, [(r['instance_uuid'], r['status'], r['drift'])
                              for r in doc['results']],
                doc['release']['series'], self.all_spec_texts())

    def test_stale_rows_change_no_written_byte(self):
        before = self.all_spec_texts()
        expected = self.heal_outcome(before)
        self.assertEqual(0, expected[0])
        self.assertEqual(self.release.series, expected[2])
        self.assertEqual(3, len(expected[1]))
        generator = random.Random(self.release.series)
        for trial in range(self.TRIALS):
            self.remove_random_rows()
            self.add_random_rows(generator)
            self.assertEqual(expected, self.heal_outcome(before),
                             'trial %d' % trial)
        # And the healed specs are what the release's own rules make.
        for text in expected[3].values():
            document = json.loads(text)
            self.assertEqual(self.release.newest_text('RequestSpec'),
                             document['nova_object.version'])

    def set_controllers_seen(self, last_seen_up):
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.update().where(
                    tables.services.c.binary == 'nova-conductor').values(
                        last_seen_up=last_seen_up))

    def add_random_api_and_compute_rows(self, generator, blocking):
        """Add rows of any version and age; return whether one blocks.

        ``blocking`` adds a compute API older than the controllers, but
        recent enough to run beside them.
        """
        release = self.release
        now = clock.utcnow()
        when = (None, LONG_AGO, now, now - datetime.timedelta(
            seconds=generator.randint(61, 10 ** 8)))
        versions = [generator.randint(50, 80)
                    for _ in range(generator.randint(1, 5))]
        binaries = [generator.choice(('nova-osapi_compute', 'nova-compute',
                                      'nova-metadata')) for _ in versions]
        if blocking:
            versions.append(generator.randint(
                release.oldest_supported_service,
                release.service_version - 1))
            binaries.append('nova-osapi_compute')
        for number, (binary, version) in enumerate(zip(binaries, versions)):
            cell = generator.choice(self.deployment.cells)
            host = 'random-%d' % number
            if binary == 'nova-compute':
                dep.add_service(cell.engine, binary, version, host=host,
                                last_seen_up=generator.choice(when))
            else:
                dep.add_wsgi_service(
                    cell.engine, version, host=host, binary=binary,
                    created_at=generator.choice(when[1:]),
                    updated_at=generator.choice(when))
        return any(binary == 'nova-osapi_compute'
                   and release.runs_beside(version)
                   and version < release.service_version
                   for binary, version in zip(binaries, versions))

    def test_api_and_compute_rows_change_no_written_byte(self):
        # Computes of any release and compute APIs at the controllers'
        # version or newer, or too old to run beside them, change nothing,
        # with the controllers up or, in an offline copy, all down; a
        # compute API that may be older than the controllers refuses.
        before = self.all_spec_texts()
        expected = self.heal_outcome(before)
        generator = random.Random('api-' + self.release.series)
        can_block = (self.release.oldest_supported_service
                     < self.release.service_version)
        for trial in range(self.TRIALS):
            self.remove_random_rows()
            self.set_controllers_seen(generator.choice(
                (clock.utcnow(), LONG_AGO)))
            blocks = self.add_random_api_and_compute_rows(
                generator, can_block and trial == self.TRIALS - 1)
            if not blocks:
                self.assertEqual(expected, self.heal_outcome(before),
                                 'trial %d' % trial)
                continue
            for uuid, text in before.items():
                self.deployment.set_spec(uuid, text)
            result = self.heal()
            self.assertEqual(127, result.code, result.stdout + result.stderr)
            self.assertIn('compute API service(s) older than the '
                          'controllers', result.stderr)
            self.assertEqual(before, self.all_spec_texts())
