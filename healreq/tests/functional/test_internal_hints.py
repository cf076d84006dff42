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

"""Nova's internal ``_nova*`` hints persisted in a spec, and the forced
destinations a rebuild stored with them (internal-hint-persisted).

Each is found in a dry run, healed, audited and reverted byte for byte,
carried through a plan, and healed along with other drift.
"""

import json
import os

import fixtures

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case

DATA = 'nova_object.data'
CHANGES = 'nova_object.changes'
REASON = 'internal-hint-persisted'
REBUILD = ['rebuild']
HINT_FIELDS = ['scheduler_hints', 'force_hosts', 'force_nodes']


def rebuilt_spec(uuid, flavor=demo.M1_SMALL, hints=None, host='compute-1',
                 **fields):
    """A spec a rebuild with a new image saved (through the is_bfv heal).

    It holds the hint, the forced host and node, and that save's changes.
    """
    spec = dep.request_spec(uuid, flavor, **fields)
    spec[DATA]['scheduler_hints'] = dict(
        hints or {'rack': ['r1']}, _nova_check_type=REBUILD)
    spec[DATA]['force_hosts'] = [host]
    spec[DATA]['force_nodes'] = [host]
    spec[CHANGES] = ['force_hosts', 'force_nodes', 'is_bfv']
    return spec


def expected_heal(spec, *removed):
    """What Nova would have stored: no internal hint, nothing forced."""
    spec = json.loads(json.dumps(spec))
    for key in removed or ('_nova_check_type',):
        del spec[DATA]['scheduler_hints'][key]
    spec[DATA]['force_hosts'] = None
    spec[DATA]['force_nodes'] = None
    spec[CHANGES] = [c for c in spec[CHANGES]
                     if c not in ('force_hosts', 'force_nodes')]
    return spec


class _HintCase(audit_case.AuditTestCase):

    def results(self, document):
        return [(r['instance_uuid'], r['status'], r['reason'], r['drift'])
                for r in document['results']]

    def add_rebuilt(self, cell, spec_builder=rebuilt_spec, **kwargs):
        uuid = self.add_consistent(cell)
        self.deployment.set_spec(uuid, json.dumps(spec_builder(uuid,
                                                               **kwargs)))
        return uuid


class RebuildHintTest(_HintCase):

    def setUp(self):
        super().setUp()
        self.rebuilt = self.add_rebuilt(self.cell1)
        # Its twin, whose spec kept is_bfv: the rebuild saved nothing.
        self.twin = self.add_consistent(
            self.cell2, spec_fields=dict(scheduler_hints={'rack': ['r1']}))
        # Forced at boot by its user: a request, left alone.
        self.forced = self.add_consistent(self.cell2)
        spec = self.spec(self.forced)
        spec[DATA]['force_hosts'] = ['compute-1']
        spec[DATA]['force_nodes'] = ['compute-1']
        self.deployment.set_spec(self.forced, json.dumps(spec))
        self.originals = self.all_spec_texts()

    def test_found_healed_audited_and_reverted(self):
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn(
            "DRIFTED   %s cell1 %s: scheduler_hints: "
            "_nova_check_type=['rebuild'] -> removed; force_hosts: "
            "['compute-1'] -> None; force_nodes: ['compute-1'] -> None"
            % (self.rebuilt, REASON), result.stdout.splitlines())
        self.assertEqual(self.originals, self.all_spec_texts())
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.rebuilt, 'healed', REASON, HINT_FIELDS)],
                         self.results(document))
        self.assertEqual(expected_heal(json.loads(
            self.originals[self.rebuilt])), self.spec(self.rebuilt))
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(
            ('applied', HINT_FIELDS, self.originals[self.rebuilt],
             self.deployment.spec_text(self.rebuilt)),
            (change['state'], change['fields'], change['before'],
             change['after']))
        self.assertEqual(4, self.heal().code)
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_plan_and_apply(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--plan', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        result, document = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.rebuilt, 'healed', 'recorded-change')],
                         [r[:3] for r in self.results(document)])
        self.assertEqual(expected_heal(json.loads(
            self.originals[self.rebuilt])), self.spec(self.rebuilt))
        self.assertEqual(4, self.heal().code)

    def test_forced_hosts_checked_with_the_hints(self):
        result, document = self.heal_json('--dry-run', '--fields',
                                          'scheduler_hints')
        self.assertEqual([(self.rebuilt, 'drifted', REASON, HINT_FIELDS)],
                         self.results(document))
        result, document = self.heal_json('--fields', 'force_nodes')
        self.assertEqual([(self.rebuilt, 'healed', REASON, ['force_nodes'])],
                         self.results(document))
        data = self.spec(self.rebuilt)[DATA]
        self.assertEqual((['compute-1'], None, REBUILD),
                         (data['force_hosts'], data['force_nodes'],
                          data['scheduler_hints']['_nova_check_type']))
        result, document = self.heal_json('--fields', 'flavor,is_bfv')
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        result, document = self.heal_json()
        self.assertEqual([(self.rebuilt, 'healed', REASON,
                           ['scheduler_hints', 'force_hosts'])],
                         self.results(document))
        self.assertEqual(expected_heal(json.loads(
            self.originals[self.rebuilt])), self.spec(self.rebuilt))

    def test_metrics_count_the_fields(self):
        metrics = os.path.join(self.state_path, 'heal.prom')
        self.assertEqual(0, self.heal('--dry-run', '--metrics-file',
                                      metrics).code)
        with open(metrics) as handle:
            text = handle.read()
        for field in HINT_FIELDS:
            self.assertIn('nova_heal_request_specs_drift_by_field{'
                          'cell_uuid="%s",field="%s"} 1'
                          % (self.cell1.uuid, field), text)


class InjectedHintTest(_HintCase):
    """Internal hints a user sent at boot before Nova 34 stripped them."""

    def test_every_internal_hint_removed_and_the_rest_kept(self):
        hints = {'_nova_check_type': REBUILD, '_nova_other': ['x'],
                 'different_host': ['5b1d6c3e-0f2a-4b7c-9d8e-1f2a3b4c5d6e'],
                 'query': ['[">=", "$free_ram_mb", 1024]'],
                 'nova_rack': ['r2']}
        uuid = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints=dict(hints)))
        originals = self.all_spec_texts()
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed', REASON, ['scheduler_hints'])],
                         self.results(document))
        self.assertEqual(
            ("_nova_check_type=['rebuild'], _nova_other=['x']", 'removed'),
            (document['results'][0]['changes'][0]['before'],
             document['results'][0]['changes'][0]['after']))
        expected = json.loads(originals[uuid])
        for key in ('_nova_check_type', '_nova_other'):
            del expected[DATA]['scheduler_hints'][key]
        self.assertEqual(expected, self.spec(uuid))
        self.run_json('revert', document['run_id'])
        self.assertEqual(originals, self.all_spec_texts())

    def test_forced_hosts_without_the_rebuild_hint_kept(self):
        uuid = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'_nova_check_type': ['live_migrate']}))
        spec = self.spec(uuid)
        spec[DATA]['force_hosts'] = ['compute-7']
        self.deployment.set_spec(uuid, json.dumps(spec))
        result, document = self.heal_json()
        self.assertEqual([(uuid, 'healed', REASON, ['scheduler_hints'])],
                         self.results(document))
        data = self.spec(uuid)[DATA]
        self.assertEqual(({}, ['compute-7'], None),
                         (data['scheduler_hints'], data['force_hosts'],
                          data['force_nodes']))


class MixedDriftTest(_HintCase):

    def test_with_flavor_drift(self):
        uuid = self.deployment.add_instance(self.cell1, demo.M1_LARGE)
        spec = rebuilt_spec(uuid)
        self.deployment.set_spec(uuid, json.dumps(spec))
        originals = self.all_spec_texts()
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed', REASON,
                           ['flavor'] + HINT_FIELDS)], self.results(document))
        healed = self.spec(uuid)
        self.assertEqual('m1.large', healed[DATA]['flavor'][DATA]['name'])
        healed[DATA]['flavor'] = spec[DATA]['flavor']
        self.assertEqual(expected_heal(spec), healed)
        self.assertEqual(4, self.heal().code)
        self.run_json('revert', document['run_id'])
        self.assertEqual(originals, self.all_spec_texts())

    def test_with_an_old_flavor_leftover(self):
        uuid = self.deployment.add_instance(self.cell1, demo.M1_LARGE,
                                            old=demo.M1_SMALL)
        self.deployment.set_spec(uuid, json.dumps(rebuilt_spec(uuid)))
        result, document = self.heal_json()
        self.assertEqual([(uuid, 'healed', 'old-flavor-leftover',
                           ['flavor'] + HINT_FIELDS)], self.results(document))
        self.assertNotIn('_nova_check_type',
                         self.spec(uuid)[DATA]['scheduler_hints'])

    def test_with_a_lost_group_both_hint_edits_apply(self):
        uuid = self.add_consistent(self.cell1)
        group = self.deployment.add_group('web', members=[uuid])
        self.deployment.set_spec(uuid, json.dumps(rebuilt_spec(uuid)))
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed', REASON,
                           ['instance_group'] + HINT_FIELDS)],
                         self.results(document))
        data = self.spec(uuid)[DATA]
        self.assertEqual({'rack': ['r1'], 'group': [group]},
                         data['scheduler_hints'])
        self.assertEqual(group, data['instance_group'][DATA]['uuid'])
        self.assertEqual(4, self.heal().code)
