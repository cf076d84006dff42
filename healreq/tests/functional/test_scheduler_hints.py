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

"""same_host hints naming instances that no longer exist: --hint-policy."""

import json
import os
import uuid as uuidlib

import fixtures

from healreq.tests.functional import audit_case

DATA = 'nova_object.data'
UNREACHABLE_URL = 'mysql+pymysql://u:secret@127.0.0.1:1/x'


class _HintCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.alive = self.add_consistent(self.cell1)
        # Deleted: its row is soft-deleted, its mapping queued for delete.
        self.deleted = self.add_consistent(
            self.cell1, deleted=True, queued_for_delete=True, spec=None)
        # Archived: neither a row nor a mapping is left.
        self.archived = str(uuidlib.uuid4())

    def add_hinted(self, cell=None, **hints):
        """An instance whose spec carries ``hints`` (and another hint)."""
        hints.setdefault('build_near_host_ip', ['192.0.2.1'])
        return self.add_consistent(cell or self.cell1, spec_fields=dict(
            scheduler_hints=hints))

    def hints(self, uuid):
        return self.spec(uuid)[DATA]['scheduler_hints']

    def result_of(self, document, uuid):
        found, = [r for r in document['results'] + document['notices']
                  if r['instance_uuid'] == uuid]
        return found


class GoneSameHostTest(_HintCase):

    def setUp(self):
        super().setUp()
        self.alone = self.add_hinted(same_host=[self.deleted])
        self.partly = self.add_hinted(
            self.cell2, same_host=[self.alive, self.archived])
        self.apart = self.add_hinted(different_host=[self.deleted])
        self.kept = self.add_hinted(self.cell2, same_host=[self.alive])
        self.originals = self.all_spec_texts()

    def test_found_reported_and_left_alone_by_default(self):
        for args in (('--dry-run',), ()):
            result, document = self.heal_json(*args)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertEqual(
                sorted([(self.alone, 'drifted', 'same-host-gone',
                         ['scheduler_hints'], ['scheduler_hints']),
                        (self.partly, 'drifted', 'same-host-gone',
                         ['scheduler_hints'], ['scheduler_hints'])]),
                sorted((r['instance_uuid'], r['status'], r['reason'],
                        r['drift'], r['reported_only'])
                       for r in document['results']
                       if r['instance_uuid'] in (self.alone, self.partly)))
            alone = self.result_of(document, self.alone)
            self.assertIn('names %s, which no longer exist in any cell'
                          % self.deleted, alone['detail'])
            self.assertIn('every move fails with NoValidHost',
                          alone['detail'])
            partly = self.result_of(document, self.partly)
            self.assertIn(self.archived, partly['detail'])
            self.assertNotIn(self.alive, partly['detail'])
            self.assertEqual(
                {'field': 'scheduler_hints',
                 'before': 'same_host names %s, gone' % self.archived,
                 'after': 'same_host %s (not rewritten: --hint-policy '
                          'report)' % self.alive},
                partly['changes'][0])
            self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])

    def test_different_host_naming_a_gone_instance_is_a_note(self):
        result, document = self.heal_json('--dry-run')
        apart = self.result_of(document, self.apart)
        self.assertEqual(('consistent', ['different-host-gone']),
                         (apart['status'],
                          [note['code'] for note in apart['notes']]))
        self.assertIn(self.deleted, apart['notes'][0]['detail'])
        kept = [r for r in document['results'] + document['notices']
                if r['instance_uuid'] == self.kept]
        self.assertEqual([], kept)

    def test_counts_in_the_metrics(self):
        metrics = os.path.join(self.state_path, 'heal.prom')
        self.assertEqual(0, self.heal('--metrics-file', metrics).code)
        with open(metrics) as handle:
            text = handle.read()
        for metric in ('drift_by_field', 'reported_only_by_field'):
            self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                          'field="scheduler_hints"} 1'
                          % (metric, self.cell1.uuid), text)

    def test_prune_audited_and_reverted(self):
        result, document = self.heal_json('--hint-policy', 'prune')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            sorted([(self.alone, 'healed', ['scheduler_hints'], []),
                    (self.partly, 'healed', ['scheduler_hints'], [])]),
            sorted((r['instance_uuid'], r['status'], r['drift'],
                    r['reported_only']) for r in document['results']
                   if r['status'] == 'healed'))
        self.assertEqual({'build_near_host_ip': ['192.0.2.1']},
                         self.hints(self.alone))
        self.assertEqual({'build_near_host_ip': ['192.0.2.1'],
                          'same_host': [self.alive]},
                         self.hints(self.partly))
        self.assertEqual({'build_near_host_ip': ['192.0.2.1'],
                          'different_host': [self.deleted]},
                         self.hints(self.apart))
        # Only the hints changed.
        for uuid in (self.alone, self.partly):
            before = json.loads(self.originals[uuid])
            before[DATA]['scheduler_hints'] = self.hints(uuid)
            self.assertEqual(before, self.spec(uuid))
        changes = self.audit_show(document['run_id'])['changes']
        self.assertEqual(
            sorted([(self.alone, ['scheduler_hints']),
                    (self.partly, ['scheduler_hints'])]),
            sorted((c['instance_uuid'], c['fields']) for c in changes))
        self.assertEqual(4, self.heal('--hint-policy', 'prune').code)
        result, _ = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_plan_written_with_prune_applies_under_prune(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--hint-policy', 'prune', '--plan',
                           path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(path) as handle:
            plan = json.load(handle)
        self.assertEqual('prune', plan['settings']['hint_policy'])
        self.assertEqual(2, len(plan['changes']))
        self.assertEqual(self.originals, self.all_spec_texts())
        result, document = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            ['healed', 'healed'],
            [r['status'] for r in document['results']])
        self.assertNotIn('same_host', self.hints(self.alone))
        self.assertEqual([self.alive], self.hints(self.partly)['same_host'])
        self.assertEqual(4, self.heal('--hint-policy', 'prune').code)

    def test_fields_option_leaves_hints_out(self):
        result, document = self.heal_json('--fields', 'flavor,image')
        self.assertEqual(4, result.code, result.stdout + result.stderr)


class MixedDriftTest(_HintCase):

    def setUp(self):
        super().setUp()
        self.mixed = self.add_consistent(self.cell2, spec_fields=dict(
            is_bfv=True, scheduler_hints={
                'same_host': [self.deleted], 'different_host': [self.alive]}))
        self.originals = self.all_spec_texts()

    def test_report_heals_the_rest_and_leaves_the_hint(self):
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, self.mixed)
        self.assertEqual(('healed', ['is_bfv', 'scheduler_hints'],
                          ['scheduler_hints']),
                         (found['status'], found['drift'],
                          found['reported_only']))
        note, = [n for n in found['notes'] if n['code'] == 'same-host-left']
        self.assertIn(self.deleted, note['detail'])
        self.assertIn('only is_bfv is healed', note['detail'])
        data = self.spec(self.mixed)[DATA]
        self.assertEqual((False, {'same_host': [self.deleted],
                                  'different_host': [self.alive]}),
                         (data['is_bfv'], data['scheduler_hints']))
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(['is_bfv'], change['fields'])
        # A verification run still reports the hint.
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, self.mixed)
        self.assertEqual(('drifted', 'same-host-gone', ['scheduler_hints']),
                         (found['status'], found['reason'], found['drift']))

    def test_prune_heals_both_in_one_change_and_reverts(self):
        result, document = self.heal_json('--hint-policy', 'prune')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(['is_bfv', 'scheduler_hints'], change['fields'])
        self.assertEqual({'different_host': [self.alive]},
                         self.hints(self.mixed))
        self.assertEqual(0, self.run_cli('revert',
                                         document['run_id']).code)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_prune_keeps_the_group_hint_it_heals(self):
        member = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'same_host': [self.archived, self.alive]}))
        group = self.deployment.add_group('web', members=[member])
        result, document = self.heal_json('--hint-policy', 'prune')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = self.result_of(document, member)
        self.assertEqual(['instance_group', 'scheduler_hints'],
                         found['drift'])
        self.assertEqual({'group': [group], 'same_host': [self.alive]},
                         self.hints(member))
        self.assertEqual(group, self.spec(member)[DATA]['instance_group'][
            DATA]['uuid'])


class WhereInstancesAreTest(_HintCase):

    def test_a_live_instance_of_another_cell_without_mapping_exists(self):
        elsewhere = self.add_consistent(self.cell2, mapping=False)
        hinted = self.add_hinted(same_host=[elsewhere])
        result, document = self.heal_json('--dry-run', '--hint-policy',
                                          'prune', '--cell', self.cell1.uuid)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([], [r for r in document['results']
                              if r['instance_uuid'] == hinted])

    def test_a_deleted_row_under_a_live_mapping_is_gone(self):
        # Deleted in its cell, the mapping not yet marked.
        gone = self.add_consistent(self.cell2, deleted=True, spec=None)
        hinted = self.add_hinted(same_host=[gone])
        result, document = self.heal_json('--dry-run', '--cell',
                                          self.cell1.uuid)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual('same-host-gone',
                         self.result_of(document, hinted)['reason'])

    def test_an_unreadable_cell_is_not_guessed(self):
        hinted = self.add_hinted(same_host=[self.archived])
        broken = self.deployment.add_cell('broken', UNREACHABLE_URL,
                                          create_schema=False)
        before = self.all_spec_texts()
        result, document = self.heal_json('--hint-policy', 'prune',
                                          '--cell', self.cell1.uuid)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        found = self.result_of(document, hinted)
        self.assertEqual(('consistent', ['same-host-unverified']),
                         (found['status'],
                          [note['code'] for note in found['notes']]))
        self.assertIn(broken.uuid, found['notes'][0]['detail'])
        self.assertIn(self.archived, found['notes'][0]['detail'])
        self.assertEqual(before, self.all_spec_texts())

    def test_a_lone_string_hint(self):
        hinted = self.add_consistent(self.cell1, spec_fields=dict(
            scheduler_hints={'same_host': self.deleted}))
        result, document = self.heal_json('--hint-policy', 'prune')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual({}, self.hints(hinted))
