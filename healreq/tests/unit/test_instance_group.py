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

"""The server group a spec names, and the group primitive it stores."""

import datetime

import testtools

from healreq.objects import instance_group
from healreq.objects import primitive
from healreq.testing import deployment as dep

GROUP = '5d3f9a2e-8b1c-4e7f-a6d0-1c2b3a4f5e6d'
OTHER = '9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b'


def _row(**values):
    """An instance_groups row with its first policy row, as read."""
    row = {'id': 3, 'user_id': dep.USER_ID, 'project_id': dep.PROJECT_ID,
           'uuid': GROUP, 'name': 'web', 'policy': 'anti-affinity',
           'rules': '{"max_server_per_host": 1}',
           'created_at': datetime.datetime(2025, 3, 4, 5, 6, 7, 890123),
           'updated_at': None}
    row.update(values)
    return row


class NamedTest(testtools.TestCase):
    """Which group Nova would read for a stored spec."""

    def test_no_group_and_no_hint(self):
        self.assertEqual(instance_group.Named(False, None, None),
                         instance_group.named({'instance_group': None,
                                               'scheduler_hints': {}}))

    def test_the_hint_alone(self):
        self.assertEqual(
            instance_group.Named(False, None, GROUP),
            instance_group.named({'scheduler_hints': {'group': [GROUP]}}))

    def test_the_group_and_its_hint(self):
        data = {'instance_group': dep.stored_group(GROUP, 'web'),
                'scheduler_hints': {'group': [GROUP]}}
        self.assertEqual(instance_group.Named(True, GROUP, GROUP),
                         instance_group.named(data))

    def test_the_group_uuid_wins_over_another_hint(self):
        data = {'instance_group': dep.stored_group(GROUP, 'web'),
                'scheduler_hints': {'group': [OTHER]}}
        self.assertEqual(instance_group.Named(True, GROUP, OTHER),
                         instance_group.named(data))

    def test_a_group_without_uuid_is_named_by_its_hint(self):
        group = dep.stored_group(GROUP, 'web')
        del group[primitive.DATA]['uuid']
        self.assertEqual(
            instance_group.Named(True, OTHER, OTHER),
            instance_group.named({'instance_group': group,
                                  'scheduler_hints': {'group': [OTHER]}}))
        # Without the hint it names nothing (bug 1830747).
        self.assertEqual(
            instance_group.Named(True, None, None),
            instance_group.named({'instance_group': group,
                                  'scheduler_hints': None}))

    def test_malformed_hints_name_nothing(self):
        for hints in (None, [], 'x', {'group': GROUP}, {'group': []},
                      {'group': [GROUP, OTHER]}, {'group': [7]}):
            self.assertIsNone(
                instance_group.named({'scheduler_hints': hints}).hint,
                hints)

    def test_a_group_nova_cannot_read_is_refused(self):
        group = dep.stored_group(GROUP, 'web')
        group[primitive.DATA]['uuid'] = 12
        for value in ({'nova_object.name': 'Flavor'}, 'web', group):
            self.assertRaises(primitive.PrimitiveError, instance_group.named,
                              {'instance_group': value})


class WithHintTest(testtools.TestCase):

    def test_other_hints_are_kept_in_a_copy(self):
        hints = {'same_host': ['x'], 'group': [OTHER]}
        self.assertEqual({'same_host': ['x'], 'group': [GROUP]},
                         instance_group.with_hint(hints, GROUP))
        self.assertEqual({'same_host': ['x'], 'group': [OTHER]}, hints)

    def test_no_hints(self):
        for hints in (None, [], 'x'):
            self.assertEqual({'group': [GROUP]},
                             instance_group.with_hint(hints, GROUP))


class RulesTest(testtools.TestCase):
    """A policy row's rules as InstanceGroup._rules (a dict of strings)."""

    def test_none_and_empty(self):
        for text in (None, ''):
            self.assertEqual({}, instance_group.rules(text))

    def test_values_become_strings(self):
        self.assertEqual({'max_server_per_host': '2'},
                         instance_group.rules('{"max_server_per_host": 2}'))

    def test_text_nova_cannot_load(self):
        for text in ('{"max_server_per_host": ', '[1]', '"x"', '3'):
            self.assertRaises(instance_group.GroupError,
                              instance_group.rules, text)


class ToPrimitiveTest(testtools.TestCase):
    """The group as Nova stores it in a spec."""

    def test_as_nova_34_stores_it(self):
        document = instance_group.to_primitive(_row(), '1.11')
        self.assertEqual(
            ('InstanceGroup', 'nova', '1.11', ['members', 'hosts']),
            (document[primitive.NAME], document[primitive.NAMESPACE],
             document[primitive.VERSION], document[primitive.CHANGES]))
        data = document[primitive.DATA]
        self.assertEqual(
            ['id', 'user_id', 'project_id', 'uuid', 'name', 'policies',
             'members', 'hosts', 'policy', '_rules', 'created_at',
             'updated_at', 'deleted_at', 'deleted'], list(data))
        self.assertEqual(
            (3, GROUP, 'web', ['anti-affinity'], None, None,
             'anti-affinity', {'max_server_per_host': '1'},
             '2025-03-04T05:06:07Z', None, None, False),
            (data['id'], data['uuid'], data['name'], data['policies'],
             data['members'], data['hosts'], data['policy'], data['_rules'],
             data['created_at'], data['updated_at'], data['deleted_at'],
             data['deleted']))

    def test_a_group_without_policy(self):
        data = instance_group.to_primitive(
            _row(policy=None, rules=None), '1.11')[primitive.DATA]
        self.assertEqual(([], None, {}),
                         (data['policies'], data['policy'], data['_rules']))

    def test_before_1_11_the_policy_is_in_policies_only(self):
        data = instance_group.to_primitive(_row(), '1.10')[primitive.DATA]
        self.assertNotIn('policy', data)
        self.assertEqual((['anti-affinity'], {'max_server_per_host': '1'}),
                         (data['policies'], data['_rules']))

    def test_rules_nova_cannot_load_are_refused(self):
        self.assertRaises(instance_group.GroupError,
                          instance_group.to_primitive,
                          _row(rules='{"max'), '1.11')
