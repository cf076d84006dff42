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

"""Runs follow the deployment's own Nova release.

The release is detected from the services registered in the cells (and
the API schema and the newest specs where releases share a service
version), stated in the report, overridable with --target-release, and
decides the rules of every derivation and the object versions written.
"""

import json
import os

import fixtures
import sqlalchemy as sa

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import field_case

ZED_LINE = ('Nova release: 2022.2 Zed (Nova 26), detected from service '
            'version 64')


class ReleaseTestCase(field_case.FieldTestCase):

    def set_service_versions(self, version, binary=None):
        """Set the version of every (``binary``) service of every cell."""
        for cell in self.deployment.cells:
            query = tables.services.update().values(version=version)
            if binary is not None:
                query = query.where(tables.services.c.binary == binary)
            with cell.engine.begin() as conn:
                conn.execute(query)

    def remove_services(self):
        for cell in self.deployment.cells:
            with cell.engine.begin() as conn:
                conn.execute(tables.services.delete())

    def add_zed_instance(self, **properties):
        """An instance with a spec as Zed's Nova saves it.

        RequestSpec 1.14, ImageMetaProps 1.34; ``properties`` are added
        to the image's system metadata.
        """
        raw = dict(dep.IMAGE_PROPERTIES, **properties)
        return self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(raw, min_disk=20),
            spec_fields={'version': '1.14',
                         'spec_image': dep.image(props_version='1.34')})


class DetectionTest(ReleaseTestCase):

    def test_release_is_stated_in_text_and_json(self):
        self.set_service_versions(64)
        self.add_zed_instance()
        result = self.heal('--dry-run')
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertIn(ZED_LINE, result.stdout.splitlines())
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(
            {'series': '2022.2', 'codename': 'zed', 'nova': 26,
             'source': 'detected', 'evidence': 'service version 64',
             'supported': True, 'writable': True, 'refusal': None,
             'notes': [], 'down_services': [], 'stale_services': []},
            doc['release'])

    def test_oldest_spec_reader_decides(self):
        # A conductor upgraded to 2026.1, a scheduler still on 2025.1:
        # the release whose Nova loads the specs last is the older one.
        self.set_service_versions(72)
        dep.add_service(self.cell0.engine, 'nova-scheduler', 68)
        dep.add_service(self.cell2.engine, 'nova-compute', 64,
                        host='old-compute')
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(('2025.1', 'service version 68'),
                         (doc['release']['series'],
                          doc['release']['evidence']))

    def test_image_props_tell_2024_2_from_2024_1(self):
        self.set_service_versions(67)
        self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            spec_fields={'spec_image': dep.image(props_version='1.37')})
        result, doc = self.heal_json('--dry-run')
        self.assertEqual('2024.1', doc['release']['series'])
        self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            spec_fields={'spec_image': dep.image(props_version='1.38')})
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(('2024.2', 'service version 67, ImageMetaProps '
                          '1.38 in specs'),
                         (doc['release']['series'],
                          doc['release']['evidence']))

    def test_api_schema_tells_2023_2_from_2023_1(self):
        self.set_service_versions(66)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual('2023.1', doc['release']['series'])
        with self.deployment.api_engine.begin() as conn:
            conn.execute(sa.text('CREATE TABLE alembic_version '
                                 '(version_num VARCHAR(32) NOT NULL)'))
            conn.execute(sa.text("INSERT INTO alembic_version VALUES "
                                 "('cdeec0c85668')"))
        result, doc = self.heal_json('--dry-run')
        self.assertEqual('2023.2', doc['release']['series'])

    def test_option_overrides_detection(self):
        self.set_service_versions(64)
        result, doc = self.heal_json('--dry-run', '--target-release',
                                     'caracal')
        self.assertEqual(('2024.1', 'option'), (doc['release']['series'],
                                                doc['release']['source']))
        config = self.write_config('target_release = 2025.2\n')
        result, doc = self.heal_json('--dry-run', config_file=config)
        self.assertEqual('2025.2', doc['release']['series'])
        result, doc = self.heal_json('--dry-run', '--target-release', '29',
                                     config_file=config)
        self.assertEqual('2024.1', doc['release']['series'])

    def test_unknown_release_name_is_invalid_input(self):
        result = self.heal('--dry-run', '--target-release', 'yoga')
        self.assertEqual(127, result.code)
        self.assertEqual(["nova-heal: error: unknown Nova release 'yoga'; "
                          "supported: 2022.2, 2023.1, 2023.2, 2024.1, "
                          "2024.2, 2025.1, 2025.2, 2026.1, 2026.2"],
                         result.stderr.splitlines())


class UnsupportedReleaseTest(ReleaseTestCase):

    def assert_write_refused(self, message):
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(['drifted'], [r['status'] for r in doc['results']])
        self.assertFalse(doc['release']['supported'])
        result = self.heal()
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(['nova-heal: error: %s: refusing to write; '
                          '--dry-run still reports, and --target-release '
                          'names the release if it is known' % message],
                         result.stderr.splitlines()[-1:])
        self.assertEqual(before, self.deployment.spec_text(uuid))
        return uuid

    def test_newer_than_supported(self):
        self.set_service_versions(75)
        self.assert_write_refused(
            'the deployment runs no supported Nova release (service '
            'version 75, newer than 2026.2 Hibiscus (Nova 34))')
        result = self.heal('--dry-run')
        self.assertIn('Nova release: 2026.2 Hibiscus (Nova 34), detected '
                      'from service version 75, newer than 2026.2 Hibiscus '
                      '(Nova 34); not supported: its rules are '
                      'approximated, and nothing is written',
                      result.stdout.splitlines())

    def test_older_than_supported(self):
        self.set_service_versions(61)
        self.assert_write_refused(
            'the deployment runs no supported Nova release (service '
            'version 61, older than 2022.2 Zed (Nova 26))')

    def test_no_service_registered(self):
        self.remove_services()
        uuid = self.assert_write_refused(
            'cannot tell which Nova release runs (no nova-conductor or '
            'nova-scheduler service registered in any cell)')
        result, doc = self.heal_json('--target-release', '2026.2')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])


class ReleaseRulesTest(ReleaseTestCase):
    """The same records, judged by the rules of different releases."""

    def test_memory_encryption_is_checked_from_nova_34_on(self):
        # Encrypted memory on an image without UEFI firmware: Nova 34's
        # numa_get_constraints refuses it; before, it was left to the
        # virt driver, and the request needs no NUMA topology.
        self.set_service_versions(64)
        flavor = dep.flavor(5, 'm1.sev', vcpus=1, memory_mb=2048,
                            root_gb=20,
                            extra_specs={'hw:mem_encryption': 'true'})
        uuid = self.deployment.add_instance(
            self.cell1, flavor, spec_fields={
                'version': '1.14',
                'spec_image': dep.image(props_version='1.34')})
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        result, doc = self.heal_json('--target-release', '2026.2')
        self.assertEqual(
            [(uuid, 'error', 'numa-constraints-invalid')],
            [(r['instance_uuid'], r['status'], r['reason'])
             for r in doc['results']])
        self.assertIn('FlavorImageConflict', doc['results'][0]['detail'])

    def test_enum_values_follow_the_release(self):
        # hw_vif_model=igb is valid from 2025.1 (ImageMetaProps 1.39) on.
        self.set_service_versions(68)
        raw = dict(dep.IMAGE_PROPERTIES, hw_vif_model='igb')
        uuid = self.deployment.add_instance(
            self.cell1, demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(raw, min_disk=20),
            spec_fields={'spec_image': dep.image(properties=raw,
                                                 props_version='1.39')})
        self.assert_consistent()
        result, doc = self.heal_json('--target-release', '2024.1')
        self.assertEqual(
            [(uuid, 'error', 'instance-image-invalid')],
            [(r['instance_uuid'], r['status'], r['reason'])
             for r in doc['results']])
        self.assertIn("hw_vif_model='igb': not a valid vif model",
                      doc['results'][0]['detail'])

    def test_page_size_units_follow_the_release(self):
        # oslo.utils learnt the units above T (here P) in 2023.2.
        self.set_service_versions(64)
        flavor = dep.flavor(5, 'm1.huge', vcpus=1, memory_mb=2048,
                            root_gb=20,
                            extra_specs={'hw:mem_page_size': '1PB'})
        uuid = self.deployment.add_instance(self.cell1, flavor)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(
            [(uuid, 'error', 'numa-constraints-invalid')],
            [(r['instance_uuid'], r['status'], r['reason'])
             for r in doc['results']])
        self.assertIn('MemoryPageSizeInvalid', doc['results'][0]['detail'])
        result, doc = self.heal_json('--dry-run', '--target-release',
                                     '2023.2')
        self.assertEqual([(uuid, 'drifted', ['numa_topology'])], [
            (r['instance_uuid'], r['status'], r['drift'])
            for r in doc['results']])

    def test_new_objects_get_versions_the_release_loads(self):
        # No spec holds an image, so nothing tells the ImageMetaProps
        # version Zed writes: the newest Zed loads (1.34) is used.
        self.set_service_versions(64)
        uuid = self.add_zed_instance()
        document = json.loads(self.deployment.spec_text(uuid))
        document['nova_object.data']['image'] = None
        self.deployment.set_spec(uuid, json.dumps(document))
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        healed = json.loads(self.deployment.spec_text(uuid))
        image = healed['nova_object.data']['image']
        self.assertEqual(
            ('1.14', '1.8', '1.34'),
            (healed['nova_object.version'], image['nova_object.version'],
             image['nova_object.data']['properties']['nova_object.version']))

    def test_legacy_cells_the_point_releases_load_differently(self):
        # Dedicated InstanceNUMACell 1.5 cells listing their CPUs in both
        # cpuset and pcpuset: Zed (and 2024.1.0) move cpuset into
        # pcpuset, which is the derived topology; 2025.1 (and 2024.1's
        # later point releases) leave them alone, a drift.
        document = demo.numa_request(demo.C1_PINNED)
        for cell in document['nova_object.data']['cells']:
            cell['nova_object.version'] = '1.5'
            data = cell['nova_object.data']
            data['cpuset'] = list(data['pcpuset'])
        # Specs as Zed saves them, which every later release loads.
        zed = {'version': '1.14', 'spec_image': dep.image(
            props_version='1.34')}
        uuid = self.deployment.add_instance(
            self.cell1, demo.C1_PINNED,
            spec_fields=dict(zed, numa_topology=document))
        # A newer spec, as the running Nova writes them (cells at 1.6).
        self.deployment.add_instance(
            self.cell2, demo.C1_PINNED, spec_fields=dict(
                zed, numa_topology=demo.numa_request(demo.C1_PINNED)))
        self.set_service_versions(64)
        self.assert_consistent()
        self.set_service_versions(68)
        result, doc = self.heal_json('--dry-run')
        self.assertEqual([(uuid, ['numa_topology'])], [
            (r['instance_uuid'], r['drift']) for r in doc['results']])
        # 2024.1: either load may be Nova's, so the topology is rewritten
        # at the versions the deployment writes, which every point
        # release loads alike.
        self.set_service_versions(67)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])
        self.assertIn('load differently', doc['results'][0]['changes'][0][
            'before'])
        healed = json.loads(self.deployment.spec_text(uuid))
        cells = healed['nova_object.data']['numa_topology'][
            'nova_object.data']['cells']
        self.assertEqual(
            [('1.6', [], [0, 1]), ('1.6', [], [2, 3])],
            [(c['nova_object.version'], c['nova_object.data']['cpuset'],
              c['nova_object.data']['pcpuset']) for c in cells])
        for services in (64, 67, 68):
            self.set_service_versions(services)
            self.assert_consistent()


class PlanReleaseTest(ReleaseTestCase):
    """A plan records its release; apply derives under it again."""

    def setUp(self):
        super().setUp()
        self.plan_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'plan.json')

    def write_plan(self, *args):
        result, doc = self.heal_json('--dry-run', '--plan', self.plan_path,
                                     *args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(self.plan_path) as handle:
            return json.load(handle)

    def apply(self, *args):
        return self.run_json('apply', self.plan_path, *args)

    def assert_refused(self, line, dry_run_line=None):
        """apply refuses the plan with ``line``, also with --dry-run.

        With --dry-run the line is ``dry_run_line`` if given.
        """
        texts = self.all_spec_texts()
        for extra, expected in (((), line),
                                (('--dry-run',), dry_run_line or line)):
            result = self.run_cli('apply', self.plan_path, *extra)
            self.assertEqual(127, result.code, result.stdout + result.stderr)
            self.assertEqual(['nova-heal: error: ' + expected],
                             result.stderr.splitlines())
        self.assertEqual(texts, self.all_spec_texts())

    def test_named_release_on_an_offline_copy(self):
        self.remove_services()
        uuid = self.add_drifted(self.cell1)
        plan = self.write_plan('--target-release', '2026.2', '--az-policy',
                               'repin')
        self.assertEqual({'release': {'series': '2026.2', 'named': True},
                          'az_policy': 'repin', 'hint_policy': 'report',
                          'flavor_policy': 'report'},
                         plan['settings'])
        result, doc = self.apply()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(('2026.2', 'option'), (doc['release']['series'],
                                                doc['release']['source']))
        self.assertEqual([(uuid, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])
        self.assertEqual(plan['changes'][0]['after'],
                         self.deployment.spec_text(uuid))

    def test_named_release_differs_from_the_detected_one(self):
        # As in test_page_size_units_follow_the_release: only 2023.2 on
        # derives a topology from a page size in P.
        self.set_service_versions(64)
        flavor = dep.flavor(5, 'm1.huge', vcpus=1, memory_mb=2048,
                            root_gb=20,
                            extra_specs={'hw:mem_page_size': '1PB'})
        uuid = self.deployment.add_instance(self.cell1, flavor)
        plan = self.write_plan('--target-release', '2023.2')
        self.assertEqual([uuid], [c['instance_uuid']
                                  for c in plan['changes']])
        result, doc = self.apply()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed')], [
            (r['instance_uuid'], r['status']) for r in doc['results']])
        self.assertEqual(plan['changes'][0]['after'],
                         self.deployment.spec_text(uuid))

    def test_detected_release_that_changed_since(self):
        self.set_service_versions(64)
        uuid = self.deployment.add_instance(
            self.cell1, demo.M1_LARGE, spec_flavor=demo.M1_SMALL,
            spec_fields={'version': '1.14',
                         'spec_image': dep.image(props_version='1.34')})
        plan = self.write_plan()
        self.assertEqual({'release': {'series': '2022.2', 'named': False},
                          'az_policy': 'report', 'hint_policy': 'report',
                          'flavor_policy': 'report'},
                         plan['settings'])
        # 2023.1 loads Zed's specs: only the release differs.
        self.set_service_versions(66)
        self.assert_refused(
            'the plan was written under 2022.2 Zed (Nova 26), detected, '
            'but the deployment now runs 2023.1 Antelope (Nova 27), '
            'detected from service version 66: refusing to apply it; '
            'write a new plan')
        # The same release again: applied.
        self.set_service_versions(64)
        result, doc = self.apply()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(plan['changes'][0]['after'],
                         self.deployment.spec_text(uuid))

    def test_refusals_name_only_what_apply_accepts(self):
        self.add_drifted(self.cell1)
        self.write_plan()
        self.remove_services()
        unknown = ('no nova-conductor or nova-scheduler service registered '
                   'in any cell')
        refusal = ('cannot tell which Nova release runs (%s): refusing to '
                   'write; --dry-run still reports, and a plan written under '
                   'a named release is applied under it' % unknown)
        self.assert_refused(
            refusal,
            'the plan was written under 2026.2 Hibiscus (Nova 34), detected, '
            'but the deployment now cannot tell which Nova release it runs '
            '(%s): refusing to apply it; write a new plan' % unknown)
        # A plan of an earlier release, which recorded no release.
        with open(self.plan_path) as handle:
            plan = json.load(handle)
        del plan['settings']
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        result = self.run_cli('apply', self.plan_path)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(['nova-heal: error: ' + refusal],
                         result.stderr.splitlines())

    def test_plan_of_an_earlier_release_applies_as_before(self):
        uuid = self.add_drifted(self.cell1)
        plan = self.write_plan()
        del plan['settings']
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        result, doc = self.apply()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(plan['changes'][0]['after'],
                         self.deployment.spec_text(uuid))

    def test_unknown_setting_is_refused(self):
        self.add_drifted(self.cell1)
        plan = self.write_plan()
        plan['settings']['host_policy'] = 'keep'
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        self.assert_refused(
            'plan %s is malformed or newer than this release: setting '
            'host_policy "keep"' % self.plan_path)
