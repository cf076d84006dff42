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

"""The release table, release detection, and the rules that differ."""

import importlib
import os
import sys

import fixtures
import testtools

from healreq.heal import evidence
from healreq.objects import image
from healreq.objects import image_coercion
from healreq.objects import image_fields
from healreq.objects import numa
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq import releases
from healreq.testing import deployment as dep
from healreq.tests.unit import setup_cfg

ZED = releases.by_name('zed')
CARACAL = releases.by_name('2024.1')
EPOXY = releases.by_name('2025.1')
LATEST = releases.LATEST
_TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')


class TableTest(testtools.TestCase):

    def test_oldest_first_and_service_versions_never_go_down(self):
        self.assertEqual(
            [26, 27, 28, 29, 30, 31, 32, 33, 34],
            [r.nova for r in releases.RELEASES])
        versions = [r.service_version for r in releases.RELEASES]
        self.assertEqual(sorted(versions), versions)

    def test_names(self):
        for name in ('2023.1', 'Antelope', ' antelope ', '27'):
            self.assertEqual('2023.1', releases.by_name(name).series)
        self.assertIs(releases.LATEST, releases.by_name('hibiscus'))
        error = self.assertRaises(ValueError, releases.by_name, 'yoga')
        self.assertIn("unknown Nova release 'yoga'", str(error))

    def test_newest_versions(self):
        self.assertEqual((1, 14), ZED.newest('RequestSpec'))
        self.assertEqual((1, 15), CARACAL.newest('RequestSpec'))
        self.assertEqual((1, 37), CARACAL.newest('ImageMetaProps'))
        self.assertTrue(CARACAL.can_load('ImageMetaProps', (1, 37)))
        self.assertFalse(CARACAL.can_load('ImageMetaProps', (1, 38)))
        self.assertFalse(CARACAL.can_load('ImageMetaProps', (2, 0)))
        self.assertEqual('2024.1 Caracal (Nova 29)', CARACAL.label)

    def test_installation_data(self):
        pythons = setup_cfg.supported_pythons()
        directory = os.path.join(_TOP, 'tools', 'constraints')
        for release in releases.RELEASES:
            self.assertTrue(os.path.isfile(os.path.join(
                directory, 'upper-constraints-%s.txt' % release.constraints)))
            oldest, newest = release.pythons
            self.assertIn(oldest, pythons)
            self.assertIn(newest, pythons)
            self.assertLessEqual(pythons.index(oldest), pythons.index(newest))
            self.assertEqual(release.nova,
                             int(release.nova_point.split('.')[0]))

    def test_check_constraints_reads_the_same_table(self):
        tools = os.path.join(_TOP, 'tools')
        self.useFixture(fixtures.MonkeyPatch('sys.path',
                                             [tools] + sys.path))
        check = importlib.import_module('check_constraints')
        self.assertEqual(
            [(r.constraints, r.pythons) for r in releases.RELEASES],
            check.read_releases())


class DetectTest(testtools.TestCase):

    def detect(self, service_version, head=None, props=None):
        return evidence.detect(service_version, head, props)

    def test_each_release_by_its_own_evidence(self):
        for release in releases.RELEASES:
            found = self.detect(release.service_version,
                                release.api_schema_head,
                                release.props_version)
            self.assertEqual((release, True), (found.release,
                                               found.supported))

    def test_without_evidence_the_older_of_a_shared_version(self):
        self.assertEqual('2023.1', self.detect(66).release.series)
        self.assertEqual('2024.1', self.detect(67, 'cdeec0c85668',
                                               (1, 37)).release.series)

    def test_development_versions_between_releases(self):
        self.assertEqual('2025.1', self.detect(69).release.series)
        self.assertEqual('2022.2', self.detect(65).release.series)

    def test_unsupported(self):
        newer = self.detect(75)
        self.assertEqual((LATEST, False), (newer.release, newer.supported))
        older = self.detect(63)
        self.assertEqual((releases.OLDEST, False),
                         (older.release, older.supported))
        unknown = self.detect(None)
        self.assertEqual((None, False), (unknown.release, unknown.supported))

    def test_named(self):
        named = evidence.named(ZED)
        self.assertEqual((ZED, 'option', True),
                         (named.release, named.source, named.supported))


class ImageRulesTest(testtools.TestCase):

    def test_unknown_properties_are_ignored(self):
        raw = {'hw_firmware_stateless': 'true', 'os_distro': 'ubuntu'}
        self.assertEqual({'os_distro': 'ubuntu'},
                         image.props_from_strings(raw, ZED))
        self.assertEqual({'os_distro': 'ubuntu',
                          'hw_firmware_stateless': True},
                         image.props_from_strings(raw, LATEST))
        self.assertNotIn('hw_firmware_stateless',
                         image_fields.known_properties(CARACAL))

    def test_enum_values_newer_than_the_release(self):
        self.assertRaises(image_fields.ImageMetaError,
                          image_coercion.coerce_property,
                          'hw_vif_model', 'igb', CARACAL)
        self.assertEqual('igb', image_coercion.coerce_property(
            'hw_vif_model', 'igb', EPOXY))
        self.assertEqual('bochs', image_coercion.coerce_property(
            'hw_video_model', 'bochs', ZED))

    def test_version_predicates(self):
        # distutils' StrictVersion grammar up to 2024.2, packaging since.
        for value in ('>=1.0', '>= 2.3.4, < 3.0', '==1.0a1'):
            self.assertEqual(value, image_coercion.coerce_property(
                'img_hv_requested_version', value, ZED))
            self.assertEqual(value, image_coercion.coerce_property(
                'img_hv_requested_version', value, LATEST))
        for value in ('>=1.0.0.0', '>=1.0rc1', '>=v1.0', '>=1'):
            self.assertRaises(image_fields.ImageMetaError,
                              image_coercion.coerce_property,
                              'img_hv_requested_version', value, ZED)
            self.assertEqual(value, image_coercion.coerce_property(
                'img_hv_requested_version', value, EPOXY))
        for value in ('1.0', '>=', '>=1.0)(x'):
            self.assertRaises(image_fields.ImageMetaError,
                              image_coercion.coerce_property,
                              'img_hv_requested_version', value, ZED)


class NumaRulesTest(testtools.TestCase):

    def constraints(self, specs, props=None, release=LATEST):
        return numa_constraints.constraints(2, 2048, specs, props or {},
                                            release)

    def test_page_size_units(self):
        specs = {'hw:mem_page_size': '1PB'}
        topology = self.constraints(specs)
        self.assertEqual(1024 ** 4, topology.cells[0].pagesize)
        error = self.assertRaises(numa.ConstraintError, self.constraints,
                                  specs, release=ZED)
        self.assertEqual('MemoryPageSizeInvalid', error.nova_exception)
        self.assertEqual(1024 ** 3, self.constraints(
            {'hw:mem_page_size': '1TB'}, release=ZED).cells[0].pagesize)

    def test_memory_encryption_checked_from_nova_34(self):
        specs = {'hw:mem_encryption': 'true'}
        error = self.assertRaises(numa.ConstraintError, self.constraints,
                                  specs)
        self.assertEqual('FlavorImageConflict', error.nova_exception)
        for release in releases.RELEASES[:-1]:
            self.assertIsNone(self.constraints(specs, release=release))


def _cell(version, **data):
    data = dict({'id': 0, 'memory': 1024, 'cpu_policy': 'dedicated'}, **data)
    return dep.envelope('InstanceNUMACell', version, data)


def _topology(*cells):
    return dep.envelope('InstanceNUMATopology', '1.3', {'cells': list(cells)})


class LegacyCellsTest(testtools.TestCase):

    def test_victoria_rule_moves_any_dedicated_cpuset(self):
        document = _topology(_cell('1.5', cpuset=[0, 1], pcpuset=[2, 3]))
        old = numa_primitive.from_primitive(document, 'spec', ZED)
        self.assertEqual((frozenset(), frozenset([0, 1])),
                         (old.cells[0].cpuset, old.cells[0].pcpuset))
        # The current rule leaves this inconsistent 1.5 cell alone.
        new = numa_primitive.from_primitive(document, 'spec', EPOXY)
        self.assertEqual((frozenset([0, 1]), frozenset([2, 3])),
                         (new.cells[0].cpuset, new.cells[0].pcpuset))
        # 2024.1's point releases disagree on it: neither load is trusted.
        self.assertRaises(numa.AmbiguousTopology,
                          numa_primitive.from_primitive, document, 'spec',
                          CARACAL)

    def test_cells_before_1_4_without_instance_uuid(self):
        document = _topology(_cell('1.3', cpuset=[0, 1]))
        self.assertEqual(frozenset([0, 1]), numa_primitive.from_primitive(
            document, 'spec', ZED).cells[0].pcpuset)
        self.assertRaises(numa.UnloadableTopology,
                          numa_primitive.from_primitive, document, 'spec',
                          EPOXY)
        self.assertRaises(numa.AmbiguousTopology,
                          numa_primitive.from_primitive, document, 'spec',
                          CARACAL)

    def test_current_cells_load_alike_everywhere(self):
        document = _topology(_cell('1.6', cpuset=[], pcpuset=[0, 1]),
                             _cell('1.6', id=1, cpuset=[2, 3], pcpuset=[],
                                   cpu_policy='shared'))
        loads = {numa_primitive.from_primitive(document, 'spec', release)
                 for release in releases.RELEASES}
        self.assertEqual(1, len(loads))
