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

"""Drift that the report policies leave as it is, counted apart.

A dry run promises only the heals that a heal makes; a heal that writes
nothing does not say it healed; a spec whose internal hints are removed
while a gone same_host stays reports the hint as the other mixed cases
do; a pruned same_host names the entries that are not uuids.
"""

import copy
import os

from healreq.testing import demo
from healreq.tests.functional import audit_case

DATA = 'nova_object.data'
POLICIES = '--hint-policy, --az-policy, --flavor-policy'
# a2.medium as an operator changed it since its instances were built.
CHANGED_SPECS = dict(demo.A2_MEDIUM[DATA]['extra_specs'],
                     **{'trait:HW_CPU_X86_AVX2': 'required'})


class _ReportedCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.deleted = self.add_consistent(
            self.cell1, deleted=True, queued_for_delete=True, spec=None)

    def add_report_only_drift(self):
        """A gone same_host, a moved pin and a propagated flavor."""
        self.hinted = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'same_host': [self.deleted]}))
        self.deployment.add_aggregate('agg-1', 'az1', ['compute-1'])
        self.deployment.add_aggregate('agg-2', 'az2', ['compute-2'])
        self.pinned = self.add_consistent(
            self.cell2, host='compute-2', availability_zone='az2',
            spec_fields=dict(availability_zone='az1'))
        self.deployment.define_flavor(demo.A2_MEDIUM, CHANGED_SPECS)
        propagated = copy.deepcopy(demo.A2_MEDIUM)
        propagated[DATA]['extra_specs'] = dict(CHANGED_SPECS)
        self.propagated = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=propagated)

    def result_of(self, document, uuid):
        found, = [r for r in document['results']
                  if r['instance_uuid'] == uuid]
        return found

    def metrics(self, *args):
        """Run a heal with ``args`` and a metrics file; its text."""
        path = os.path.join(self.state_path, 'heal.prom')
        self.assertEqual(0, self.heal('--metrics-file', path, *args).code)
        with open(path) as handle:
            return handle.read()


class DryRunPromisesTest(_ReportedCase):
    """The counts of a dry run and of the heal after it agree."""

    def test_dry_run_counts_only_the_heals_it_would_make(self):
        self.add_report_only_drift()
        healable = self.add_consistent(self.cell2,
                                       spec_fields=dict(is_bfv=True))
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn(
            'Dry run: nothing was written; 1 instance(s) would be healed; '
            '3 drifted instance(s) only reported under the report policies '
            '(%s): nothing is written for them.' % POLICIES,
            result.stdout.splitlines())
        self.assertEqual('Exit code 0 (drift found).',
                         result.stdout.splitlines()[-1])
        result, document = self.heal_json('--dry-run')
        self.assertEqual((4, 3), (document['summary']['drifted'],
                                  document['summary']['reported_only']))
        self.assertEqual(
            {self.cell1.uuid: 2, self.cell2.uuid: 1},
            {c['cell_uuid']: c['reported_only'] for c in document['cells']
             if c['cell_uuid'] in (self.cell1.uuid, self.cell2.uuid)})
        # The heal makes exactly the promised heal, and says what it left.
        result = self.heal()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        lines = result.stdout.splitlines()
        self.assertIn('3 drifted instance(s) only reported under the report '
                      'policies (%s): nothing was written for them.'
                      % POLICIES, lines)
        self.assertEqual('Exit code 0 (healed).', lines[-1])
        self.assertTrue(any(line.startswith('HEALED    %s' % healable)
                            for line in lines), lines)
        result, document = self.heal_json('--dry-run')
        self.assertEqual((3, 3), (document['summary']['drifted'],
                                  document['summary']['reported_only']))

    def test_a_heal_that_writes_nothing_does_not_say_healed(self):
        self.add_report_only_drift()
        originals = self.all_spec_texts()
        result = self.heal('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        lines = result.stdout.splitlines()
        self.assertIn('Dry run: nothing was written; 0 instance(s) would be '
                      'healed; 3 drifted instance(s) only reported under '
                      'the report policies (%s): nothing is written for '
                      'them.' % POLICIES, lines)
        result = self.heal()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(
            ['3 drifted instance(s) only reported under the report policies '
             '(%s): nothing was written for them.' % POLICIES,
             'Exit code 0 (drift found, nothing written).'],
            [lines[-3], lines[-1]])
        self.assertNotIn('healed)', result.stdout)
        result, document = self.heal_json()
        self.assertEqual(
            (0, 3, 0, 3),
            (result.code, document['summary']['drifted'],
             document['summary']['healed'],
             document['summary']['reported_only']))
        self.assertEqual(originals, self.all_spec_texts())
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])

    def test_only_the_policies_that_left_drift_are_named(self):
        self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'same_host': [self.deleted]}))
        result = self.heal('--dry-run')
        self.assertIn('Dry run: nothing was written; 0 instance(s) would be '
                      'healed; 1 drifted instance(s) only reported under '
                      'the report policies (--hint-policy): nothing is '
                      'written for them.', result.stdout.splitlines())
        result = self.heal('--dry-run', '--hint-policy', 'prune')
        self.assertIn('Dry run: nothing was written; 1 instance(s) would be '
                      'healed.', result.stdout.splitlines())

    def test_metrics_count_the_instances_only_reported(self):
        self.add_report_only_drift()
        self.add_consistent(self.cell2, spec_fields=dict(is_bfv=True))
        text = self.metrics('--dry-run')
        for cell, drifted, reported in ((self.cell1, 2, 2),
                                        (self.cell2, 2, 1)):
            for metric, count in (('drifted', drifted),
                                  ('reported_only', reported)):
                self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                              'cell_name="%s"} %d'
                              % (metric, cell.uuid, cell.name, count), text)


class InternalHintsWithGoneSameHostTest(_ReportedCase):
    """Internal hints removed while a gone same_host stays, as reported."""

    def setUp(self):
        super().setUp()
        self.mixed = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'_nova_check_type': ['rebuild'],
                             'same_host': [self.deleted]}))

    def test_reported_as_the_hint_left_beside_other_drift(self):
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, self.mixed)
        self.assertEqual(('drifted', 'internal-hint-persisted',
                          ['scheduler_hints'], ['scheduler_hints']),
                         (found['status'], found['reason'], found['drift'],
                          found['reported_only']))
        # It is written: a heal, not only a report.
        self.assertEqual((1, 0), (document['summary']['drifted'],
                                  document['summary']['reported_only']))
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, self.mixed)
        self.assertEqual(('healed', ['scheduler_hints']),
                         (found['status'], found['reported_only']))
        note, = [n for n in found['notes'] if n['code'] == 'same-host-left']
        self.assertIn(self.deleted, note['detail'])
        self.assertIn('only the internal hints _nova_check_type are removed',
                      note['detail'])
        self.assertEqual({'same_host': [self.deleted]},
                         self.spec(self.mixed)[DATA]['scheduler_hints'])
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(['scheduler_hints'], change['fields'])
        # The next run reports the hint alone, and writes nothing for it.
        result, document = self.heal_json('--dry-run')
        found = self.result_of(document, self.mixed)
        self.assertEqual(('same-host-gone', ['scheduler_hints'], 1),
                         (found['reason'], found['reported_only'],
                          document['summary']['reported_only']))

    def test_metrics_count_the_hint_left(self):
        text = self.metrics()
        for metric in ('drift_by_field', 'reported_only_by_field'):
            self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                          'field="scheduler_hints"} 1'
                          % (metric, self.cell1.uuid), text)

    def test_with_other_drift_too(self):
        both = self.add_consistent(self.cell2, spec_fields=dict(
            is_bfv=True, scheduler_hints={'_nova_check_type': ['rebuild'],
                                          'same_host': [self.deleted]}))
        result, document = self.heal_json()
        found = self.result_of(document, both)
        note, = [n for n in found['notes'] if n['code'] == 'same-host-left']
        self.assertIn('only the internal hints _nova_check_type are removed '
                      'and is_bfv is healed', note['detail'])
        self.assertEqual((['is_bfv', 'scheduler_hints'], ['scheduler_hints']),
                         (found['drift'], found['reported_only']))

    def test_prune_leaves_nothing_reported(self):
        result, document = self.heal_json('--hint-policy', 'prune')
        found = self.result_of(document, self.mixed)
        self.assertEqual(('healed', [], []),
                         (found['status'], found['reported_only'],
                          [n['code'] for n in found['notes']]))
        self.assertEqual({}, self.spec(self.mixed)[DATA]['scheduler_hints'])


class PruneEntriesNotUuidsTest(_ReportedCase):
    """Entries of same_host that are not strings name no instance."""

    def setUp(self):
        super().setUp()
        self.alive = self.add_consistent(self.cell2)
        self.hinted = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'same_host': [self.deleted, 5, {'a': 'b'},
                                           self.alive],
                             'build_near_host_ip': ['192.0.2.1']}))
        self.before = ("same_host names %s, gone; same_host entries 5, "
                       "{'a': 'b'} are not instance uuids" % self.deleted)

    def test_named_in_the_report(self):
        result, document = self.heal_json('--dry-run')
        found = self.result_of(document, self.hinted)
        self.assertEqual(
            {'field': 'scheduler_hints', 'before': self.before,
             'after': 'same_host %s (not rewritten: --hint-policy report)'
                      % self.alive}, found['changes'][0])
        self.assertIn("it also holds 5, {'a': 'b'}, which name no instance",
                      found['detail'])

    def test_prune_removes_them_and_says_so(self):
        result = self.heal('--dry-run', '--hint-policy', 'prune')
        self.assertIn('DRIFTED   %s cell1 same-host-gone: scheduler_hints: '
                      '%s -> same_host %s' % (self.hinted, self.before,
                                              self.alive),
                      result.stdout.splitlines())
        result, document = self.heal_json('--hint-policy', 'prune')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, self.hinted)
        self.assertEqual(('healed', self.before),
                         (found['status'], found['changes'][0]['before']))
        self.assertEqual({'same_host': [self.alive],
                          'build_near_host_ip': ['192.0.2.1']},
                         self.spec(self.hinted)[DATA]['scheduler_hints'])
        self.assertEqual(4, self.heal('--hint-policy', 'prune').code)
