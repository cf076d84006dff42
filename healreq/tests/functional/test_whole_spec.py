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

"""The rest of the persisted spec: zone pins, server groups, missing rows.

Each drift is found in a dry run, healed, audited and reverted byte for
byte; a recreated spec is inserted, and reverting it leaves no row.
"""

import json
import os
import threading
import time

import fixtures
import sqlalchemy as sa

from healreq import api
from healreq.db import tables
from healreq import exception
from healreq.heal import decisions
from healreq.heal import findings
from healreq.run import writer
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case
from healreq.tests.functional import clocks

DATA = 'nova_object.data'


class _WholeSpecCase(audit_case.AuditTestCase):

    def results(self, document):
        return [(r['instance_uuid'], r['status'], r['reason'], r['drift'])
                for r in document['results']]

    def data(self, uuid):
        return self.spec(uuid)[DATA]

    def assert_reverted(self, run_id, originals):
        result, document = self.run_json('revert', run_id)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(originals, self.all_spec_texts())


class AvailabilityZoneTest(_WholeSpecCase):

    def setUp(self):
        super().setUp()
        self.deployment.add_aggregate('agg-1', 'az1', ['compute-1'])
        self.deployment.add_aggregate('agg-2', 'az2', ['compute-2'])
        # A forced live migration moved it to az2; the spec pins az1.
        self.moved = self.add_consistent(
            self.cell1, host='compute-2', availability_zone='az2',
            spec_fields=dict(availability_zone='az1'))
        self.pinned = self.add_consistent(
            self.cell1, host='compute-1', availability_zone='az1',
            spec_fields=dict(availability_zone='az1'))
        self.unpinned = self.add_consistent(
            self.cell2, host='compute-2', availability_zone='az2')
        self.offloaded = self.add_consistent(
            self.cell2, host=None, vm_state='shelved_offloaded',
            availability_zone=None,
            spec_fields=dict(availability_zone='az1'))
        self.originals = self.all_spec_texts()

    def test_report_counts_and_writes_nothing(self):
        for args in (('--dry-run',), ()):
            result, document = self.heal_json(*args)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertEqual([(self.moved, 'drifted', 'az-pin-differs',
                               ['availability_zone'])],
                             self.results(document))
            change, = document['results'][0]['changes']
            self.assertEqual(('az1', 'az2 (not rewritten: --az-policy '
                              'report)'), (change['before'], change['after']))
            self.assertEqual((['availability_zone'], []),
                             (document['results'][0]['reported_only'],
                              document['results'][0]['notes']))
            self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])
        metrics = os.path.join(self.state_path, 'heal.prom')
        self.heal('--metrics-file', metrics)
        with open(metrics) as handle:
            text = handle.read()
        for metric in ('drift_by_field', 'reported_only_by_field'):
            self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                          'field="availability_zone"} 1'
                          % (metric, self.cell1.uuid), text)

    def heal_pins(self, policy):
        """Dry run, then heal under ``policy``; the audit holds the change.

        Returns the heal's run id.
        """
        result, document = self.heal_json('--dry-run', '--az-policy', policy)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.moved, 'drifted', 'az-pin-differs',
                           ['availability_zone'])], self.results(document))
        self.assertEqual(self.originals, self.all_spec_texts())
        result, document = self.heal_json('--az-policy', policy)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.moved, 'healed', 'az-pin-differs',
                           ['availability_zone'])], self.results(document))
        self.assertEqual([], document['results'][0]['reported_only'])
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(
            ('applied', ['availability_zone'], self.originals[self.moved],
             self.deployment.spec_text(self.moved)),
            (change['state'], change['fields'], change['before'],
             change['after']))
        self.assertEqual(4, self.heal('--az-policy', policy).code)
        return document['run_id']

    def test_repin(self):
        run_id = self.heal_pins('repin')
        self.assertEqual('az2', self.data(self.moved)['availability_zone'])
        before, after = (json.loads(self.originals[self.moved]),
                         self.spec(self.moved))
        before[DATA]['availability_zone'] = 'az2'
        self.assertEqual(before, after)
        self.assert_reverted(run_id, self.originals)

    def test_unpin(self):
        run_id = self.heal_pins('unpin')
        self.assertIsNone(self.data(self.moved)['availability_zone'])
        self.assertEqual('az1', self.data(self.pinned)['availability_zone'])
        self.assert_reverted(run_id, self.originals)

    def test_plan_and_apply_follow_the_policy(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--az-policy', 'repin', '--plan',
                           path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        result, document = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual('az2', self.data(self.moved)['availability_zone'])
        self.assertEqual(4, self.heal('--az-policy', 'repin').code)

    def test_mixed_drift_heals_the_rest_and_leaves_the_pin(self):
        mixed = self.add_consistent(
            self.cell2, host='compute-2', availability_zone='az2',
            spec_fields=dict(availability_zone='az1', is_bfv=True))
        originals = self.all_spec_texts()

        def mixed_result(document):
            return next(r for r in document['results']
                        if r['instance_uuid'] == mixed)

        metrics = os.path.join(self.state_path, 'heal.prom')
        for args in (('--dry-run',), ('--metrics-file', metrics)):
            result, document = self.heal_json(*args)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            found = mixed_result(document)
            self.assertEqual(
                ('drifted' if '--dry-run' in args else 'healed',
                 'spec-drift', ['is_bfv', 'availability_zone'],
                 ['availability_zone']),
                (found['status'], found['reason'], found['drift'],
                 found['reported_only']))
            note, = [n for n in found['notes'] if n['code'] == 'az-pin-left']
            self.assertIn('the pin az1 differs', note['detail'])
            self.assertIn('only is_bfv is healed', note['detail'])
        heal_run = document['run_id']
        data = self.data(mixed)
        self.assertEqual((False, 'az1'),
                         (data['is_bfv'], data['availability_zone']))
        change, = self.audit_show(heal_run)['changes']
        self.assertEqual((mixed, ['is_bfv']),
                         (change['instance_uuid'], change['fields']))
        with open(metrics) as handle:
            text = handle.read()
        for metric, field in (('drift_by_field', 'is_bfv'),
                              ('drift_by_field', 'availability_zone'),
                              ('reported_only_by_field',
                               'availability_zone')):
            self.assertIn('nova_heal_request_specs_%s{cell_uuid="%s",'
                          'field="%s"} 1' % (metric, self.cell2.uuid, field),
                          text)
        self.assertNotIn('reported_only_by_field{cell_uuid="%s",'
                         'field="is_bfv"}' % self.cell2.uuid, text)
        # A verification run still reports the pin the heal left.
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        found = mixed_result(document)
        self.assertEqual(('drifted', 'az-pin-differs', ['availability_zone'],
                          ['availability_zone'], []),
                         (found['status'], found['reason'], found['drift'],
                          found['reported_only'], found['notes']))
        self.assert_reverted(heal_run, originals)

    def test_notes_on_a_vanished_zone_and_a_moved_host(self):
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.aggregate_metadata.update().values(
                value='az9').where(tables.aggregate_metadata.c.value ==
                                   'az1'))
        result, document = self.heal_json('--dry-run')
        notes = {(n['instance_uuid'], note['code'])
                 for n in document['results'] + document['notices']
                 for note in n['notes']}
        self.assertIn((self.moved, 'az-pin-gone'), notes)
        self.assertIn((self.pinned, 'az-pin-gone'), notes)
        self.assertIn((self.pinned, 'host-az-differs'), notes)
        self.assertNotIn((self.unpinned, 'host-az-differs'), notes)
        self.assertIn('the pinned zone az1 is carried by no aggregate: '
                      'Nova\'s scheduler then requires none and may place '
                      'the instance on any host',
                      self.heal('--dry-run').stdout)

    def test_a_zone_whose_aggregates_hold_no_host_is_gone(self):
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.aggregate_hosts.delete().where(
                tables.aggregate_hosts.c.host == 'compute-1'))
        result, document = self.heal_json('--dry-run')
        notes = {(n['instance_uuid'], note['code'])
                 for n in document['results'] + document['notices']
                 for note in n['notes']}
        self.assertIn((self.moved, 'az-pin-gone'), notes)
        self.assertNotIn((self.unpinned, 'az-pin-gone'), notes)
        detail, = [note['detail'] for r in document['results']
                   if r['instance_uuid'] == self.moved
                   for note in r['notes'] if note['code'] == 'az-pin-gone']
        self.assertEqual('the pinned zone az1 is carried only by aggregates '
                         'that hold no host: Nova\'s scheduler still '
                         'requires those aggregates, so every move fails '
                         'with NoValidHost', detail)

    def test_fields_option(self):
        result, document = self.heal_json('--fields', 'flavor,image')
        self.assertEqual(4, result.code, result.stdout + result.stderr)


class ServerGroupTest(_WholeSpecCase):

    def setUp(self):
        super().setUp()
        self.lost = self.add_consistent(self.cell1)
        self.peer = self.add_consistent(self.cell2)
        self.group = self.deployment.add_group(
            'web', rules={'max_server_per_host': '1'},
            members=[self.lost, self.peer])
        self.set_group(self.peer, dep.stored_group(self.group, 'web'),
                       {'group': [self.group]})

    def set_group(self, uuid, group, hints):
        spec = self.spec(uuid)
        spec[DATA]['instance_group'] = group
        spec[DATA]['scheduler_hints'] = hints
        self.deployment.set_spec(uuid, json.dumps(spec))

    def test_lost_group_is_healed_as_nova_stores_it(self):
        originals = self.all_spec_texts()
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'drifted', 'group-lost',
                           ['instance_group'])], self.results(document))
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        data = self.data(self.lost)
        expected = dep.stored_group(self.group, 'web',
                                    rules={'max_server_per_host': '1'})
        with self.deployment.api_engine.connect() as conn:
            expected[DATA]['id'] = conn.execute(sa.select(
                tables.instance_groups.c.id)).scalar()
        self.assertEqual(expected, data['instance_group'])
        self.assertEqual({'group': [self.group]}, data['scheduler_hints'])
        self.assertEqual(4, self.heal().code)
        self.assert_reverted(document['run_id'], originals)

    def assert_found_healed_and_reverted(self):
        """A dry run finds the lost group, a heal writes it; a revert."""
        originals = self.all_spec_texts()
        result, document = self.heal_json('--dry-run')
        self.assertEqual([(self.lost, 'drifted', 'group-lost',
                           ['instance_group'])], self.results(document))
        self.assertEqual(originals, self.all_spec_texts())
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(
            ('applied', originals[self.lost],
             self.deployment.spec_text(self.lost)),
            (change['state'], change['before'], change['after']))
        healed = self.spec(self.lost)
        self.assert_reverted(document['run_id'], originals)
        return healed

    def test_missing_hint_is_added_and_other_hints_kept(self):
        self.set_group(self.lost, dep.stored_group(self.group, 'web'),
                       {'different_host': ['x']})
        before = self.spec(self.lost)
        after = self.assert_found_healed_and_reverted()
        self.assertEqual({'different_host': ['x'], 'group': [self.group]},
                         after[DATA]['scheduler_hints'])
        before[DATA]['scheduler_hints']['group'] = [self.group]
        self.assertEqual(before, after)

    def test_group_without_uuid_or_hint(self):
        group = dep.stored_group(self.group, 'web')
        del group[DATA]['uuid']
        self.set_group(self.lost, group, {})
        healed = self.assert_found_healed_and_reverted()
        self.assertEqual(self.group,
                         healed[DATA]['instance_group'][DATA]['uuid'])
        self.assertEqual({'group': [self.group]},
                         healed[DATA]['scheduler_hints'])

    def test_deleted_group_of_a_member_is_an_error(self):
        gone = '7f0c7d0e-52f2-4b1e-9c4a-0f1e2d3c4b5a'
        self.set_group(self.lost, dep.stored_group(gone, 'old'),
                       {'group': [gone]})
        before = self.deployment.spec_text(self.lost)
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'error', 'spec-group-gone', [])],
                         self.results(document))
        self.assertIn('no longer exists', document['results'][0]['detail'])
        self.assertEqual(before, self.deployment.spec_text(self.lost))

    def test_existing_group_named_for_an_instance_in_none(self):
        alone = self.add_consistent(self.cell1)
        other = self.deployment.add_group('db', policy='affinity')
        self.set_group(alone, dep.stored_group(other, 'db', 'affinity'),
                       {'group': [other]})
        before = self.deployment.spec_text(alone)
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(sorted([(alone, 'error', 'spec-group-not-member',
                                  []),
                                 (self.lost, 'healed', 'group-lost',
                                  ['instance_group'])]),
                         sorted(self.results(document)))
        self.assertIn('a member of no group',
                      [r for r in document['results']
                       if r['instance_uuid'] == alone][0]['detail'])
        self.assertEqual(before, self.deployment.spec_text(alone))

    def test_rules_nova_cannot_load_are_an_error(self):
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.instance_group_policy.update().values(
                rules='{"max_server_per_host": '))
        before = self.deployment.spec_text(self.lost)
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'error', 'group-unloadable', [])],
                         self.results(document))
        self.assertEqual(before, self.deployment.spec_text(self.lost))

    def test_spec_naming_another_group_is_an_error(self):
        other = self.deployment.add_group('db', policy='affinity')
        self.set_group(self.lost, dep.stored_group(other, 'db', 'affinity'),
                       {'group': [other]})
        before = self.deployment.spec_text(self.lost)
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'error', 'spec-group-not-member', [])],
                         self.results(document))
        self.assertEqual(before, self.deployment.spec_text(self.lost))

    def in_two_groups(self):
        """``self.lost`` joins a second group, after web; its uuid."""
        other = self.deployment.add_group('db', policy='affinity',
                                          members=[self.lost])
        return other

    def assertInSeveralGroups(self, other, *args):
        before = self.all_spec_texts()
        result, document = self.heal_json(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'error', 'instance-in-several-groups',
                           [])], self.results(document))
        detail = document['results'][0]['detail']
        self.assertIn('the spec names group %s' % other, detail)
        self.assertIn('a member of 2 server groups: anti-affinity group '
                      'web (%s), affinity group db (%s)'
                      % (self.group, other), detail)
        self.assertNotIn('not a member', detail)
        self.assertEqual(before, self.all_spec_texts())

    def test_spec_naming_the_second_group_of_an_instance_in_two(self):
        """Nova's API forbids it, the database allows it: no guess."""
        other = self.in_two_groups()
        self.set_group(self.lost, dep.stored_group(other, 'db', 'affinity'),
                       {'group': [other]})
        self.assertInSeveralGroups(other)
        self.assertInSeveralGroups(other, '--dry-run')
        self.assertInSeveralGroups(other, '--instance', self.lost)

    def test_hint_naming_the_second_group_of_an_instance_in_two(self):
        other = self.in_two_groups()
        self.set_group(self.lost, None, {'group': [other]})
        self.assertInSeveralGroups(other, '--cell', self.cell1.uuid)

    def test_other_group_named_for_an_instance_in_two(self):
        """Every group of the instance is named in the detail."""
        other = self.in_two_groups()
        third = self.deployment.add_group('cache', policy='affinity')
        self.set_group(self.lost, dep.stored_group(third, 'cache',
                                                   'affinity'),
                       {'group': [third]})
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.lost, 'error', 'spec-group-not-member', [])],
                         self.results(document))
        self.assertIn('a member of 2 server groups: anti-affinity group web '
                      '(%s), affinity group db (%s)' % (self.group, other),
                      document['results'][0]['detail'])

    def test_deleted_group_named_for_an_instance_in_none(self):
        # As its instance_group (with the hint) or as the hint alone: an
        # error of its own, counted in the exit code, nothing written.
        gone = '7f0c7d0e-52f2-4b1e-9c4a-0f1e2d3c4b5a'
        whole = self.add_consistent(self.cell1)
        self.set_group(whole, dep.stored_group(gone, 'old'),
                       {'group': [gone]})
        hinted = self.add_consistent(self.cell2)
        self.set_group(hinted, None, {'group': [gone]})
        originals = self.all_spec_texts()
        for args in (('--dry-run',), ()):
            result, document = self.heal_json('--fields', 'instance_group',
                                              *args)
            self.assertEqual(2, result.code, result.stdout + result.stderr)
            self.assertEqual(
                sorted([(whole, 'error', 'spec-group-gone', []),
                        (hinted, 'error', 'spec-group-gone', []),
                        (self.lost, 'drifted' if args else 'healed',
                         'group-lost', ['instance_group'])]),
                sorted(self.results(document)))
            self.assertEqual([], document['notices'])
            details = {r['instance_uuid']: r['detail']
                       for r in document['results']}
            for uuid in (whole, hinted):
                self.assertIn('%s, which no longer exists, and the '
                              'instance is a member of no group' % gone,
                              details[uuid])
                self.assertEqual(originals[uuid],
                                 self.deployment.spec_text(uuid))
            self.assertEqual(2, document['summary']['errors'])

    def test_group_without_uuid_for_an_instance_in_none(self):
        alone = self.add_consistent(self.cell1)
        group = dep.stored_group(self.group, 'web')
        del group[DATA]['uuid']
        # same_host names a live instance: only the group drifts.
        self.set_group(alone, group, {'same_host': [self.lost]})
        originals = self.all_spec_texts()
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn((alone, 'drifted', 'group-without-uuid',
                       ['instance_group']), self.results(document))
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn((alone, 'healed', 'group-without-uuid',
                       ['instance_group']), self.results(document))
        healed = self.data(alone)
        self.assertEqual((None, {'same_host': [self.lost]}),
                         (healed['instance_group'],
                          healed['scheduler_hints']))
        self.assertEqual(4, self.heal().code)
        self.assert_reverted(document['run_id'], originals)

    def test_existing_group_named_by_the_hint_alone(self):
        alone = self.add_consistent(self.cell1)
        other = self.deployment.add_group('db', policy='affinity')
        self.set_group(alone, None, {'group': [other]})
        before = self.deployment.spec_text(alone)
        result, document = self.heal_json('--dry-run')
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertIn((alone, 'error', 'spec-group-not-member', []),
                      self.results(document))
        self.assertEqual(before, self.deployment.spec_text(alone))


class MissingSpecTest(_WholeSpecCase):

    def setUp(self):
        super().setUp()
        self.deployment.add_aggregate('agg-1', 'az1', ['compute-1'])
        self.missing = self.add_consistent(self.cell1, spec=None,
                                           availability_zone='az1')
        self.group = self.deployment.add_group('web',
                                               members=[self.missing])

    def test_without_the_option_it_is_an_error(self):
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.missing, 'error', 'spec-missing', [])],
                         self.results(document))
        self.assertIn('--create-missing', document['results'][0]['detail'])

    def test_recreated_inserted_audited_and_reverted(self):
        result, document = self.heal_json('--create-missing', '--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.missing, 'drifted', 'spec-missing',
                           ['spec'])], self.results(document))
        self.assertIsNone(self.deployment.spec_text(self.missing))
        result, document = self.heal_json('--create-missing')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.missing, 'healed', 'spec-missing',
                           ['spec'])], self.results(document))
        data = self.data(self.missing)
        self.assertEqual(
            (self.missing, 'az1', 1, {'group': [self.group]}, False,
             '1.15', demo.M1_SMALL[DATA]['id']),
            (data['instance_uuid'], data['availability_zone'],
             data['num_instances'], data['scheduler_hints'],
             data['is_bfv'], self.spec(self.missing)['nova_object.version'],
             data['flavor'][DATA]['id']))
        self.assertNotIn('id', data)
        # The recreated spec is consistent: nothing more to heal.
        self.assertEqual(4, self.heal().code)
        change, = self.audit_show(document['run_id'])['changes']
        self.assertEqual(('applied', None),
                         (change['state'], change['before']))
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIsNone(self.deployment.spec_text(self.missing))
        self.assertEqual(2, self.heal().code)

    def test_fields_do_not_limit_what_is_recreated(self):
        # The whole record is read for a recreated spec, not only the rows
        # of the fields checked: the same spec with and without --fields.
        result, document = self.heal_json('--create-missing')
        whole = self.deployment.spec_text(self.missing)
        self.run_json('revert', document['run_id'])
        self.assertIsNone(self.deployment.spec_text(self.missing))
        result = self.heal('--create-missing', '--fields', 'flavor')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(whole, self.deployment.spec_text(self.missing))
        self.assertEqual({'group': [self.group]},
                         self.data(self.missing)['scheduler_hints'])

    def test_revert_leaves_a_recreated_spec_nova_saved_since(self):
        result, document = self.heal_json('--create-missing')
        saved = self.spec(self.missing)
        saved[DATA]['num_instances'] = 1
        saved[DATA]['scheduler_hints'] = {'group': [self.group],
                                          'same_host': ['x']}
        self.deployment.set_spec(self.missing, json.dumps(saved))
        text = self.deployment.spec_text(self.missing)
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.missing, 'conflict')],
                         [(r['instance_uuid'], r['status'])
                          for r in revert['results']])
        self.assertEqual(text, self.deployment.spec_text(self.missing))

    def test_unpin_pins_nothing(self):
        self.heal('--create-missing', '--az-policy', 'unpin')
        self.assertIsNone(self.data(self.missing)['availability_zone'])

    def test_a_row_that_appears_meanwhile_is_a_conflict(self):
        text = json.dumps(dep.request_spec(self.missing, demo.M1_SMALL))

        def insert():
            with self.deployment.api_engine.begin() as conn:
                conn.execute(tables.request_specs.insert().values(
                    instance_uuid=self.missing, spec=text))
        # Call 2: after the re-read, right before the write.
        clock = clocks.ActingClock(insert, 2)
        report = self.run_in_process(clock=clock, settings=self.settings(
            create_missing=True))
        self.assertTrue(clock.fired)
        self.assertEqual(exception.ExitCode.CONFLICT,
                         api.exit_code_for(report))
        finding, = report.findings
        self.assertEqual((findings.Status.CONFLICT, 'spec-changed'),
                         (finding.status, finding.reason))
        self.assertEqual(text, self.deployment.spec_text(self.missing))
        state, = {c['state'] for c in self.audit_show_any()}
        self.assertEqual('refused', state)

    def archive_mapping(self):
        """Remove the instance mapping, as an archive of the instance does."""
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.instance_mappings.delete().where(
                tables.instance_mappings.c.instance_uuid == self.missing))

    def archive_instance(self, keep_spec=False):
        """Archive the instance: no mapping, spec (unless kept) or rows."""
        self.archive_mapping()
        with self.deployment.api_engine.begin() as conn:
            if not keep_spec:
                conn.execute(tables.request_specs.delete().where(
                    tables.request_specs.c.instance_uuid == self.missing))
        with self.cell1.engine.begin() as conn:
            for table in (tables.instance_extra,
                          tables.instance_system_metadata,
                          tables.block_device_mapping):
                conn.execute(table.delete().where(
                    table.c.instance_uuid == self.missing))
            conn.execute(tables.instances.delete().where(
                tables.instances.c.uuid == self.missing))

    def test_an_instance_archived_before_the_insert_gets_no_row(self):
        # Right before the write, another session archives the instance:
        # it deletes the mapping and holds the lock while the insert is
        # attempted, then commits. The insert waits for it, sees no
        # mapping and writes nothing.
        archiver = _LockingArchiver(self.deployment.api_engine, self.missing)
        clock = clocks.ActingClock(archiver.start, 2)
        report = self.run_in_process(clock=clock, settings=self.settings(
            create_missing=True))
        archiver.join()
        self.assertTrue(clock.fired)
        if self.deployment.api_engine.dialect.name == 'mysql':
            self.assertTrue(archiver.waited_for, 'the insert took no lock')
        finding, = report.findings
        self.assertEqual(
            (findings.Status.SKIPPED, 'instance-deleted',
             writer.INSTANCE_ARCHIVED_DETAIL),
            (finding.status, finding.reason, finding.detail))
        self.assertEqual(exception.ExitCode.NOTHING_TO_HEAL,
                         api.exit_code_for(report))
        self.assertEqual({}, self.all_spec_texts())
        change, = self.audit_show_any()
        self.assertEqual(('refused', writer.INSTANCE_ARCHIVED_DETAIL),
                         (change['state'], change['detail']))

    def test_an_instance_queued_for_delete_before_the_insert(self):
        def queue_for_delete():
            with self.deployment.api_engine.begin() as conn:
                conn.execute(tables.instance_mappings.update().where(
                    tables.instance_mappings.c.instance_uuid
                    == self.missing).values(queued_for_delete=True))
        clock = clocks.ActingClock(queue_for_delete, 2)
        report = self.run_in_process(clock=clock, settings=self.settings(
            create_missing=True))
        finding, = report.findings
        self.assertEqual((findings.Status.SKIPPED, 'queued-for-delete'),
                         (finding.status, finding.reason))
        self.assertEqual({}, self.all_spec_texts())

    def test_an_instance_mapped_elsewhere_before_the_insert(self):
        def move():
            with self.deployment.api_engine.begin() as conn:
                conn.execute(tables.instance_mappings.update().where(
                    tables.instance_mappings.c.instance_uuid
                    == self.missing).values(cell_id=self.cell2.id))
        clock = clocks.ActingClock(move, 2)
        report = self.run_in_process(clock=clock, settings=self.settings(
            create_missing=True))
        finding, = report.findings
        self.assertEqual(
            (findings.Status.CONFLICT, 'instance-changed',
             writer.INSTANCE_MOVED_DETAIL % self.cell2.id),
            (finding.status, finding.reason, finding.detail))
        self.assertEqual({}, self.all_spec_texts())

    def test_revert_removes_the_row_of_an_instance_archived_since(self):
        # The archive ran before the insert committed (an earlier
        # release): the row belongs to no instance and nothing else
        # removes it.
        result, document = self.heal_json('--create-missing')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.archive_instance(keep_spec=True)
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.missing, 'healed', 'recorded-change', [])],
                         self.results(revert))
        self.assertEqual({}, self.all_spec_texts())

    def test_revert_removes_the_row_of_a_deleted_instance(self):
        result, document = self.heal_json('--create-missing')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.update_instance(self.cell1, self.missing, deleted=1)
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual({}, self.all_spec_texts())

    def test_revert_after_the_instance_was_archived_skips_it(self):
        result, document = self.heal_json('--create-missing')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.archive_instance()
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(self.missing, None, 'skipped', 'instance-deleted',
              'the instance was deleted and archived: it has no instance '
              'mapping and no request_specs row any more')],
            [(r['instance_uuid'], r['cell_uuid'], r['status'], r['reason'],
              r['detail']) for r in revert['results']])
        self.assertEqual([], revert['notices'])

    def test_audit_show_labels_the_insert_and_its_delete(self):
        result, document = self.heal_json('--create-missing')
        inserted = self.deployment.spec_text(self.missing)
        result, revert = self.run_json('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        for run_id, action, sign in ((document['run_id'], 'insert', '+'),
                                     (revert['run_id'], 'delete', '-')):
            change, = self.audit_show(run_id)['changes']
            self.assertEqual(action, change['action'])
            text = self.run_cli('audit', 'show', run_id).stdout
            self.assertIn('%s of the whole spec' % action, text)
            self.assertNotIn('"spec": null', text)
            shown = [line[len('    ' + sign):]
                     for line in text.splitlines()
                     if line.startswith('    ' + sign)
                     and not line.startswith('    ' + sign * 3)]
            self.assertEqual(json.loads(inserted), json.loads(
                '\n'.join(shown)))

    def settings(self, **values):
        return decisions.Settings(skip_updated_within=60, **values)

    def audit_show_any(self):
        changes = []
        for run_id in self.audit_runs():
            changes += self.audit_show(run_id)['changes']
        return changes

    def test_plan_and_apply(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'plan.json')
        result = self.heal('--dry-run', '--create-missing', '--plan', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        with open(path) as handle:
            planned, = json.load(handle)['changes']
        self.assertEqual((writer.INSERT, None, None),
                         (planned['action'], planned['spec_id'],
                          planned['before']))
        result, document = self.run_json('apply', path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(planned['after'],
                         self.deployment.spec_text(self.missing))
        self.assertEqual(4, self.run_cli('apply', path).code)


class _LockingArchiver(object):
    """Deletes an instance mapping in a transaction it holds open a while.

    ``start()`` returns once the mapping row is deleted (and locked: the
    row on MySQL, the database on SQLite); the transaction commits when
    another session waits for the lock (seen on MySQL: ``waited_for``)
    or after a while.
    """

    def __init__(self, engine, instance_uuid):
        self.engine = engine
        self.instance_uuid = instance_uuid
        self.deleted = threading.Event()
        self.waited_for = False
        self.thread = threading.Thread(target=self._archive)

    def start(self):
        self.thread.start()
        self.deleted.wait(10)

    def join(self):
        self.thread.join(10)

    def _archive(self):
        mappings = tables.instance_mappings
        with self.engine.begin() as conn:
            conn.execute(mappings.delete().where(
                mappings.c.instance_uuid == self.instance_uuid))
            self.deleted.set()
            self.waited_for = self._lock_waited_for()

    def _lock_waited_for(self):
        """Whether the spec insert runs while this transaction is open.

        On MySQL the insert is looked for in the process list during ten
        seconds (a loaded machine may take a while to reach it). The
        process list rather than INNODB_TRX: depending on the plan, the
        server waits for the mapping's lock while it optimises the
        statement, before the transaction shows as waiting. SQLite shows
        no waits: a second.
        """
        mysql = self.engine.dialect.name == 'mysql'
        deadline = time.monotonic() + (10 if mysql else 1)
        while time.monotonic() < deadline:
            if mysql:
                with self.engine.connect() as conn:
                    if conn.exec_driver_sql(
                            "SELECT COUNT(*) FROM information_schema."
                            "PROCESSLIST WHERE INFO LIKE "
                            "'INSERT INTO request_specs%%'").scalar():
                        return True
            time.sleep(0.05)
        return False
