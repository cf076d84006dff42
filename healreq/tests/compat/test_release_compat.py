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


"""The Release record of the installed Nova says what that Nova does.

Every field of ``base.RELEASE`` is checked against the installed nova
package: its object and service versions, its API schema head, the
page-size units and version-predicate grammar of its libraries, and the
legacy-cell rule of the installed point release. The differential tests
call our derivations with this record, so a wrong record would make them
prove the wrong rules.
"""

import os
import warnings

from alembic import script as alembic_script

from healreq.heal import evidence
from healreq.objects import notation
from healreq import releases
from healreq.tests.compat import base

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        from nova.db import migration as nova_migration
        from nova import objects as nova_objects
        from nova.objects import service as nova_service
        from oslo_utils import strutils
        from oslo_versionedobjects import fields as ovo_fields
except ImportError:  # pragma: no cover - depends on the environment
    nova_objects = None

# Predicates the packaging grammar accepts and distutils' refuses.
PACKAGING_ONLY = ('>=1.0.post1', '>=1.0.0.0', '==1.0rc1')
UUID = '2b8f3c1e-6a4d-4e7b-9c0f-5d1e2a3b4c5d'


class ReleaseRecordTest(base.NovaTestCase):
    """``base.RELEASE`` against the installed nova package."""

    def test_expected_nova_installed(self):
        """The tox environment runs the Nova it names (if it names one)."""
        wanted = os.environ.get('HEALREQ_TEST_NOVA_VERSION')
        if wanted:
            self.assertEqual(wanted,
                             '.'.join(str(p) for p in base.NOVA_VERSION))
        base.record_summary('release %s, legacy NUMA cells by the %s rule'
                            % (base.RELEASE.label,
                               base.POINT_RELEASE.legacy_cell_rules[0]))

    def test_object_versions(self):
        release = base.RELEASE
        for name in ('RequestSpec', 'Flavor', 'ImageMeta', 'ImageMetaProps',
                     'InstanceNUMATopology', 'InstanceNUMACell',
                     'InstancePCIRequests', 'InstancePCIRequest'):
            self.assertEqual(getattr(nova_objects, name).VERSION,
                             '%d.%d' % release.newest(name), name)

    def test_service_version(self):
        self.assertEqual(nova_service.SERVICE_VERSION,
                         base.RELEASE.service_version)

    def test_api_schema_head(self):
        config = nova_migration._find_alembic_conf('api')
        head = alembic_script.ScriptDirectory.from_config(
            config).get_current_head()
        self.assertEqual(head, base.RELEASE.api_schema_head)

    def test_detected_from_its_own_records(self):
        release = base.RELEASE
        detection = evidence.detect(release.service_version,
                                    release.api_schema_head,
                                    release.props_version)
        self.assertEqual(release, detection.release)
        self.assertTrue(detection.supported)

    def test_page_size_prefixes(self):
        known = ''
        for prefix in notation.ALL_PREFIXES:
            try:
                strutils.string_to_bytes('1%sB' % prefix, 'IEC',
                                         return_int=True)
            except ValueError:
                continue
            known += prefix
        self.assertEqual(known, base.RELEASE.page_size_prefixes)

    def test_version_predicate_grammar(self):
        accepted = []
        for value in PACKAGING_ONLY:
            try:
                ovo_fields.VersionPredicate().coerce(None, 'x', value)
            except ValueError:
                continue
            accepted.append(value)
        if base.RELEASE.version_predicates == releases.PACKAGING:
            self.assertEqual(list(PACKAGING_ONLY), accepted)
        else:
            self.assertEqual(releases.DISTUTILS,
                             base.RELEASE.version_predicates)
            self.assertEqual([], accepted)

    def test_legacy_cell_rule(self):
        """The installed point release loads legacy cells by our rule.

        A dedicated InstanceNUMACell 1.3 with its CPUs in cpuset: the
        VICTORIA rule moves them to pcpuset, the CURRENT rule leaves a
        cell that old alone.
        """
        rule = base.POINT_RELEASE.legacy_cell_rules[0]
        self.assertIn(rule, base.RELEASE.legacy_cell_rules)
        document = {
            'nova_object.name': 'InstanceNUMATopology',
            'nova_object.namespace': 'nova', 'nova_object.version': '1.3',
            'nova_object.data': {
                'instance_uuid': UUID, 'emulator_threads_policy': None,
                'cells': [{
                    'nova_object.name': 'InstanceNUMACell',
                    'nova_object.namespace': 'nova',
                    'nova_object.version': '1.3',
                    'nova_object.data': {
                        'id': 0, 'cpuset': [0, 1], 'memory': 1024,
                        'pagesize': None, 'cpu_pinning_raw': None,
                        'cpu_policy': 'dedicated',
                        'cpu_thread_policy': None}}]}}
        topology = nova_objects.InstanceNUMATopology.obj_from_primitive(
            document)
        nova_objects.InstanceNUMATopology.\
            _migrate_legacy_dedicated_instance_cpuset(topology)
        cell = topology.cells[0]
        moved = not cell.cpuset and set(cell.pcpuset) == {0, 1}
        self.assertEqual(releases.VICTORIA if moved else releases.CURRENT,
                         rule)
