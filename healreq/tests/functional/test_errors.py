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

"""Records that cannot be trusted are reported, never guessed at."""

import copy
import json

from healreq.cmd import common
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import clocks
from healreq.tests.functional import deployment_case

UNREACHABLE_URL = 'mysql+pymysql://u:SECRETPW@127.0.0.1:1/x'


class InstanceErrorTest(deployment_case.DeploymentTestCase):
    """Each broken instance is an error (exit 2) and nothing is written."""

    def assertError(self, uuid, reason):
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'error', reason)],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in doc['results']])
        self.assertEqual(1, doc['summary']['errors'])
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def test_spec_missing(self):
        self.assertError(self.add_drifted(self.cell1, spec=None),
                         'spec-missing')

    def test_spec_not_json(self):
        self.assertError(self.add_drifted(self.cell1, spec='{"nova_obj'),
                         'spec-unparsable')

    def test_spec_not_a_request_spec(self):
        self.assertError(
            self.add_drifted(self.cell1, spec=json.dumps(dep.envelope(
                'Instance', '2.8', {'uuid': 'x'}))),
            'spec-unparsable')

    def test_spec_without_flavor(self):
        spec = dep.request_spec('x', demo.M1_SMALL)
        del spec['nova_object.data']['flavor']
        self.assertError(self.add_drifted(self.cell1, spec=json.dumps(spec)),
                         'spec-unparsable')

    def test_instance_extra_missing(self):
        self.assertError(self.add_drifted(self.cell1, extra=None),
                         'instance-extra-missing')

    def test_instance_flavor_null(self):
        uuid = self.add_drifted(self.cell1)
        self.update_extra(self.cell1, uuid, flavor=None)
        self.assertError(uuid, 'instance-flavor-missing')

    def test_instance_flavor_unparsable(self):
        self.assertError(self.add_drifted(self.cell1, extra='{"cur": 1}'),
                         'instance-flavor-unparsable')

    def test_instance_type_id_disagrees(self):
        self.assertError(self.add_drifted(self.cell1, instance_type_id=2),
                         'instance-flavor-inconsistent')

    def test_not_mapped(self):
        self.assertError(self.add_drifted(self.cell1, mapping=False),
                         'instance-not-mapped')

    def test_mapped_elsewhere(self):
        self.assertError(self.add_drifted(self.cell1,
                                          mapping_cell_id=self.cell2.id),
                         'instance-mapped-elsewhere')


class CosmeticTest(deployment_case.DeploymentTestCase):
    """Differences Nova itself makes or ignores are not drift."""

    def assertConsistent(self, spec_flavor=None, spec_text=None):
        uuid = self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                            spec_flavor=spec_flavor)
        if spec_text is not None:
            self.deployment.set_spec(uuid, spec_text(self.spec(uuid)))
        before = self.deployment.spec_text(uuid)
        result, doc = self.heal_json()
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([], doc['results'])
        self.assertEqual(1, doc['summary']['consistent'])
        self.assertEqual(before, self.deployment.spec_text(uuid))

    def flavor(self, **data):
        flavor = copy.deepcopy(demo.M1_SMALL)
        flavor['nova_object.data'].update(data)
        return flavor

    def test_description(self):
        """instance_extra nulls the description; the spec keeps it."""
        self.assertEqual('General purpose, 1 vCPU',
                         demo.M1_SMALL['nova_object.data']['description'])
        self.assertConsistent(spec_flavor=demo.M1_SMALL)

    def test_key_order(self):
        self.assertConsistent(spec_text=lambda spec: json.dumps(
            spec, sort_keys=True))

    def test_whitespace(self):
        self.assertConsistent(spec_text=lambda spec: json.dumps(
            spec, indent=4, separators=(',', ' :  ')))

    def test_changes(self):
        flavor = copy.deepcopy(demo.M1_SMALL)
        flavor['nova_object.changes'] = ['name', 'memory_mb', 'vcpus']
        self.assertConsistent(spec_flavor=flavor)

    def test_no_changes(self):
        flavor = copy.deepcopy(demo.M1_SMALL)
        del flavor['nova_object.changes']
        self.assertConsistent(spec_flavor=flavor)

    def test_flavor_version(self):
        self.assertConsistent(spec_flavor=dep.flavor(
            2, 'm1.small', vcpus=1, memory_mb=2048, root_gb=20,
            version='1.1'))

    def test_timestamps(self):
        self.assertConsistent(spec_flavor=self.flavor(
            created_at='2019-01-01T00:00:00Z',
            updated_at='2025-06-01T12:00:00Z'))

    def test_coerced_types(self):
        """Nova coerces '2048' to 2048 and extra spec values to strings."""
        self.assertConsistent(spec_flavor=self.flavor(memory_mb='2048'))


class CellErrorTest(deployment_case.DeploymentTestCase):
    """A broken cell is reported; the other cells are still healed."""

    def setUp(self):
        super().setUp()
        self.healthy = [self.add_drifted(self.cell1),
                        self.add_drifted(self.cell2)]

    def assertCellFailed(self, broken, *args):
        result, doc = self.heal_json(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(2, doc['summary']['healed'])
        self.assertEqual(1, doc['summary']['cells_failed'])
        failed = [c for c in doc['cells'] if c['error']]
        self.assertEqual([broken.uuid], [c['cell_uuid'] for c in failed])
        for uuid in self.healthy:
            self.assertEqual(
                'm1.large', self.spec_flavor(uuid)['nova_object.data']['name'])
        return result

    def test_unreachable_cell(self):
        broken = self.deployment.add_cell('broken', UNREACHABLE_URL,
                                          create_schema=False)
        self.assertCellFailed(broken)

    def test_unreachable_cell_text(self):
        broken = self.deployment.add_cell('broken', UNREACHABLE_URL,
                                          create_schema=False)
        result = self.heal()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertIn('Cell %s(broken): ERROR ' % broken.uuid, result.stdout)

    def test_password_never_shown(self):
        self.deployment.add_cell('broken', UNREACHABLE_URL,
                                 create_schema=False)
        for args in ((), ('--verbose',), ('--format', 'json'),
                     ('--format', 'json', '--verbose')):
            result = self.heal(*args)
            self.assertEqual(2, result.code, args)
            self.assertNotIn('SECRETPW', result.stdout, args)
            self.assertNotIn('SECRETPW', result.stderr, args)

    def test_password_never_shown_for_one_instance(self):
        broken = self.deployment.add_cell('broken', UNREACHABLE_URL,
                                          create_schema=False)
        uuid = self.add_drifted(self.cell1, mapping_cell_id=broken.id)
        result = self.heal('--instance', uuid, '--verbose')
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertIn(broken.uuid, result.stdout + result.stderr)
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)

    def test_missing_sqlite_directory(self):
        broken = self.deployment.add_cell(
            'broken', 'sqlite:////nonexistent-healreq-dir/nova.sqlite',
            create_schema=False)
        self.assertCellFailed(broken)

    def test_malformed_port(self):
        """A URL SQLAlchemy cannot parse is a broken cell, not a crash."""
        broken = self.deployment.add_cell(
            'broken', 'mysql+pymysql://u:SECRETPW@127.0.0.1:nonsense/x',
            create_schema=False)
        result = self.assertCellFailed(broken)
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)

    def test_template_cannot_be_formatted(self):
        broken = self.deployment.add_cell('broken', '{nonsense}',
                                          create_schema=False)
        result = self.assertCellFailed(broken)
        # The error names the failure, never the stored value, which may
        # hold a password.
        self.assertIn('template cannot be formatted', result.stdout)
        self.assertIn('KeyError', result.stdout)

    def test_template_with_password(self):
        """A template failing after {password} must not show it either."""
        broken = self.deployment.add_cell(
            'broken', '{scheme}://{username}:SECRETPW@{hostname}/{nonsense}',
            create_schema=False)
        result = self.assertCellFailed(broken)
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)


class ExitCodeTest(deployment_case.DeploymentTestCase):
    """The most severe outcome wins: 2, 3, 1, 0, 4."""

    def test_error_beats_healed(self):
        healed = self.add_drifted(self.cell1)
        self.add_drifted(self.cell2, spec=None)
        result, doc = self.heal_json()
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(2, doc['exit_code'])
        self.assertEqual(
            'm1.large', self.spec_flavor(healed)['nova_object.data']['name'])

    def test_error_beats_max_count(self):
        self.add_drifted(self.cell1, spec=None)
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell1)
        result = self.heal('--max-count', '1')
        self.assertEqual(2, result.code, result.stdout + result.stderr)

    def test_error_beats_conflict(self):
        self.add_drifted(self.cell1, spec=None)
        raced = self.add_drifted(self.cell1)
        clock = clocks.ActingClock(
            lambda: self.deployment.set_spec(raced, '{"changed": 1}'),
            on_call=2)
        report = self.run_in_process(clock=clock, cell_uuid=self.cell1.uuid)
        self.assertTrue(clock.fired)
        self.assertEqual(['error', 'conflict'],
                         [f.status.value for f in report.findings])
        self.assertEqual(common.ExitCode.NEEDS_ATTENTION,
                         common.exit_code_for(report))
