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

"""Flavor definitions that operators propagated into specs on purpose.

An operator changed a flavor's extra specs, then rewrote specs from the
flavor's current definition: the spec's flavor differs from the embedded
one in extra specs only, and those are the definition's. It is reported
(flavor-propagated) and left alone unless --flavor-policy instance says
otherwise; instances whose embedded flavor is older than the definition
are counted.
"""

import copy
import json
import os

import fixtures
import sqlalchemy as sa

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case

DATA = 'nova_object.data'

# a2.medium as the operator changed it: a new aggregate requirement, a
# trait, and os:secure_boot removed.
CHANGED_SPECS = dict(demo.A2_MEDIUM[DATA]['extra_specs'], **{
    'aggregate_instance_extra_specs:ssd': 'true',
    'trait:HW_CPU_X86_AVX2': 'required'})
del CHANGED_SPECS['os:secure_boot']
CHANGED_KEYS = ['aggregate_instance_extra_specs:ssd', 'os:secure_boot',
                'trait:HW_CPU_X86_AVX2']


def with_extra_specs(flavor, extra_specs):
    """A copy of Flavor primitive ``flavor`` with other extra specs."""
    flavor = copy.deepcopy(flavor)
    flavor[DATA]['extra_specs'] = dict(extra_specs)
    return flavor


def as_defined(flavor, extra_specs):
    """The flavor as Flavor.get_by_flavor_id loads it from its definition.

    A script that propagates the definition stores this whole object.
    """
    flavor = with_extra_specs(flavor, extra_specs)
    flavor[DATA].update(description='Four shared vCPUs',
                        updated_at='2026-11-02T08:00:00Z')
    return flavor


class FlavorPolicyTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.deployment.define_flavor(demo.A2_MEDIUM, CHANGED_SPECS)
        # Booted before the change, its spec rewritten from the definition.
        self.propagated = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM,
            spec_flavor=as_defined(demo.A2_MEDIUM, CHANGED_SPECS))
        # Booted before the change, its spec left as it was.
        self.older = self.deployment.add_instance(self.cell2,
                                                  demo.A2_MEDIUM)
        # Booted after the change.
        self.newer = self.deployment.add_instance(
            self.cell1, with_extra_specs(demo.A2_MEDIUM, CHANGED_SPECS))
        # m1.small was deleted: no definition, nothing to compare with.
        self.deleted_flavor = self.add_consistent(self.cell2)
        self.originals = self.all_spec_texts()

    def result(self, document, uuid):
        found, = [r for r in document['results']
                  if r['instance_uuid'] == uuid]
        return found

    def summary(self, document):
        return [(r['instance_uuid'], r['status'], r['reason'], r['drift'],
                 r['reported_only']) for r in document['results']]

    def test_dry_run_finds_it(self):
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'drifted', 'flavor-propagated',
                           ['flavor'], ['flavor'])], self.summary(document))
        found = self.result(document, self.propagated)
        self.assertEqual(
            [{'field': 'flavor',
              'before': 'a2.medium(982) [extra specs %s as currently '
                        'defined]' % ', '.join(CHANGED_KEYS),
              'after': 'a2.medium(982) (not rewritten: --flavor-policy '
                       'report)'}], found['changes'])
        self.assertIn('only in extra specs (%s)' % ', '.join(CHANGED_KEYS),
                      found['detail'])
        self.assertEqual(self.originals, self.all_spec_texts())
        text = self.heal('--dry-run')
        self.assertEqual(0, text.code, text.stdout + text.stderr)
        self.assertIn('DRIFTED   %s cell1 flavor-propagated: flavor: '
                      'a2.medium(982) [extra specs %s as currently defined] '
                      '-> a2.medium(982) (not rewritten: --flavor-policy '
                      'report)' % (self.propagated, ', '.join(CHANGED_KEYS)),
                      text.stdout.splitlines())

    def test_left_alone_by_default(self):
        metrics = os.path.join(self.state_path, 'heal.prom')
        result, document = self.heal_json('--metrics-file', metrics)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'drifted', 'flavor-propagated',
                           ['flavor'], ['flavor'])], self.summary(document))
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])
        with open(metrics) as handle:
            text = handle.read()
        for metric in ('drift_by_field', 'reported_only_by_field'):
            self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                          'field="flavor"} 1' % (metric, self.cell1.uuid),
                          text)
        # Nothing was written: the next run reports it again.
        result, document = self.heal_json('--flavor-policy', 'report')
        self.assertEqual([(self.propagated, 'drifted', 'flavor-propagated',
                           ['flavor'], ['flavor'])], self.summary(document))

    def test_instance_policy_heals_audits_and_reverts(self):
        result, document = self.heal_json('--dry-run', '--flavor-policy',
                                          'instance')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'drifted', 'flavor-propagated',
                           ['flavor'], [])], self.summary(document))
        self.assertEqual(self.originals, self.all_spec_texts())
        result, document = self.heal_json('--flavor-policy', 'instance')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'healed', 'flavor-propagated',
                           ['flavor'], [])], self.summary(document))
        self.assertEqual(
            'a2.medium(982)',
            self.result(document, self.propagated)['changes'][0]['after'])
        embedded = self.instance_flavors(self.cell1, self.propagated)['cur']
        self.assertEqual(embedded[DATA]['extra_specs'],
                         self.spec_flavor(self.propagated)[DATA][
                             'extra_specs'])
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(
            ('applied', ['flavor'], self.originals[self.propagated],
             self.deployment.spec_text(self.propagated)),
            (change['state'], change['fields'], change['before'],
             change['after']))
        self.assertEqual(4, self.heal('--flavor-policy', 'instance').code)
        result, _ = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_plan_and_apply_carry_the_policy(self):
        directory = self.useFixture(fixtures.TempDir()).path
        default_plan = os.path.join(directory, 'default.json')
        result = self.heal('--dry-run', '--plan', default_plan)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(default_plan) as handle:
            document = json.load(handle)
        self.assertEqual(('report', []),
                         (document['settings']['flavor_policy'],
                          document['changes']))
        path = os.path.join(directory, 'plan.json')
        result = self.heal('--dry-run', '--flavor-policy', 'instance',
                           '--plan', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(path) as handle:
            document = json.load(handle)
        self.assertEqual('instance', document['settings']['flavor_policy'])
        self.assertEqual([self.propagated],
                         [c['instance_uuid'] for c in document['changes']])
        result, applied = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'healed', 'recorded-change')],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in applied['results']])
        self.assertEqual(document['changes'][0]['after'],
                         self.deployment.spec_text(self.propagated))
        self.assertEqual(4, self.heal('--flavor-policy', 'instance').code)

    def test_plan_of_an_earlier_release_heals_as_it_did(self):
        """Releases before --flavor-policy healed propagated flavors."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--flavor-policy', 'instance',
                           '--plan', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(path) as handle:
            document = json.load(handle)
        del document['settings']['flavor_policy']
        with open(path, 'w') as handle:
            json.dump(document, handle)
        result, applied = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'healed')],
                         [(r['instance_uuid'], r['status'])
                          for r in applied['results']])
        self.assertEqual(document['changes'][0]['after'],
                         self.deployment.spec_text(self.propagated))

    def test_mixed_drift_heals_the_rest_and_leaves_the_flavor(self):
        spec_image = dep.image(min_ram=0)
        mixed = self.deployment.add_instance(
            self.cell2, demo.A2_MEDIUM,
            spec_flavor=as_defined(demo.A2_MEDIUM, CHANGED_SPECS),
            system_metadata=dep.image_system_metadata(min_ram=1024),
            spec_fields=dict(spec_image=spec_image))
        originals = self.all_spec_texts()
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result(document, mixed)
        self.assertEqual(('healed', 'spec-drift', ['flavor', 'image'],
                          ['flavor']),
                         (found['status'], found['reason'], found['drift'],
                          found['reported_only']))
        note, = [n for n in found['notes']
                 if n['code'] == 'flavor-propagated-left']
        self.assertIn('only image is healed', note['detail'])
        self.assertEqual([], [n for n in found['notes']
                              if n['code'] == 'az-pin-left'])
        data = self.spec(mixed)[DATA]
        self.assertEqual(1024, data['image'][DATA]['min_ram'])
        before = json.loads(originals[mixed])[DATA]
        self.assertEqual(before['flavor'], data['flavor'])
        change, = self.changes_by_instance(document['run_id']).values()
        self.assertEqual(['image'], change['fields'])
        # A verification run reports the propagated flavor alone.
        result, document = self.heal_json('--dry-run')
        found = self.result(document, mixed)
        self.assertEqual(('drifted', 'flavor-propagated', ['flavor'], []),
                         (found['status'], found['reason'], found['drift'],
                          found['notes']))

    def test_mixed_drift_heals_both_with_instance_policy(self):
        mixed = self.deployment.add_instance(
            self.cell2, demo.A2_MEDIUM,
            spec_flavor=as_defined(demo.A2_MEDIUM, CHANGED_SPECS),
            system_metadata=dep.image_system_metadata(min_ram=1024),
            spec_fields=dict(spec_image=dep.image(min_ram=0)))
        result, document = self.heal_json('--flavor-policy', 'instance')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result(document, mixed)
        self.assertEqual(('healed', ['flavor', 'image'], [], []),
                         (found['status'], found['drift'],
                          found['reported_only'], found['notes']))
        self.assertEqual(demo.A2_MEDIUM[DATA]['extra_specs'],
                         self.spec_flavor(mixed)[DATA]['extra_specs'])

    def test_spec_flavor_matching_neither_is_drift(self):
        neither = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=with_extra_specs(
                demo.A2_MEDIUM, dict(CHANGED_SPECS, **{
                    'hw:cpu_policy': 'dedicated'})))
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result(document, neither)
        self.assertEqual(('drifted', 'spec-drift', ['flavor'], []),
                         (found['status'], found['reason'], found['drift'],
                          found['reported_only']))
        self.assertEqual('a2.medium(982) [extra_specs differ]',
                         found['changes'][0]['before'])

    def test_recreated_flavor_is_not_the_definition(self):
        """A flavorid deleted and defined again names another flavor."""
        t = tables.flavors
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.flavor_extra_specs.delete())
            conn.execute(t.delete())
        self.deployment.define_flavor(dep.flavor(
            990, 'a2.medium', flavorid='026050'), CHANGED_SPECS)
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.propagated, 'drifted', 'spec-drift',
                           ['flavor'], [])], self.summary(document))
        self.assertEqual(0, document['summary']['flavor_outdated'])

    def test_instances_with_an_older_flavor_are_counted(self):
        metrics = os.path.join(self.state_path, 'heal.prom')
        result, document = self.heal_json('--dry-run', '--metrics-file',
                                          metrics)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(2, document['summary']['flavor_outdated'])
        self.assertEqual({self.cell1.uuid: 1, self.cell2.uuid: 1},
                         {c['cell_uuid']: c['flavor_outdated']
                          for c in document['cells']})
        self.assertEqual(
            sorted([(self.propagated, self.cell1.uuid, CHANGED_KEYS),
                    (self.older, self.cell2.uuid, CHANGED_KEYS)]),
            sorted((o['instance_uuid'], o['cell_uuid'], o['extra_specs'])
                   for o in document['flavor_outdated']))
        # Information, not drift: the older instance is consistent.
        self.assertNotIn(self.older, [r['instance_uuid']
                                      for r in document['results']])
        self.assertEqual(1, document['summary']['drifted'])
        with open(metrics) as handle:
            text = handle.read()
        self.assertIn('nova_heal_request_specs_flavor_outdated{cell_uuid='
                      '"%s",cell_name="cell2"} 1' % self.cell2.uuid, text)
        plain = self.heal('--dry-run')
        self.assertIn('2 instance(s) run an older copy of their flavor than '
                      'its current definition (extra specs differ; '
                      'information, not drift); --verbose lists them.',
                      plain.stdout.splitlines())
        self.assertNotIn(self.older, plain.stdout)
        verbose = self.heal('--dry-run', '--verbose')
        self.assertIn('INFO      %s cell2 flavor-outdated: extra specs %s '
                      'differ from its flavor\'s current definition'
                      % (self.older, ', '.join(CHANGED_KEYS)),
                      verbose.stdout.splitlines())

    def test_definitions_read_once_per_batch(self):
        for _ in range(3):
            self.deployment.add_instance(self.cell1, demo.A2_MEDIUM)
        statements = []
        engine = self.deployment.api_engine

        def remember(conn, cursor, statement, *args):
            if 'flavor_extra_specs' in statement:
                statements.append(statement)

        # The command opens its own engine: count on every engine.
        sa.event.listen(sa.engine.Engine, 'before_cursor_execute',
                        remember)
        self.addCleanup(sa.event.remove, sa.engine.Engine,
                        'before_cursor_execute', remember)
        self.assertIsNotNone(engine)
        result, document = self.heal_json('--dry-run', '--batch-size', '2')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(5, document['summary']['flavor_outdated'])
        # cell1 holds 5 instances (3 batches), cell2 2 (1 batch).
        self.assertEqual(4, len(statements))
