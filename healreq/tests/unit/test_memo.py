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

"""Memos: remembered once, bounded, shared values frozen."""

import copy
import json
import pickle

import testtools

from healreq import memo


def _counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value
    return compute, calls


class MemoTest(testtools.TestCase):

    def test_a_value_is_computed_once_per_key(self):
        remembered = memo.Memo()
        compute, calls = _counting({'a': 1})
        first = remembered.get('k', compute)
        second = remembered.get('k', compute)
        self.assertIs(first, second)
        self.assertEqual(1, len(calls))

    def test_it_starts_again_when_full(self):
        remembered = memo.Memo(maxsize=3)
        for key in range(3):
            remembered.get(key, lambda: key)
        self.assertEqual(3, len(remembered))
        remembered.get(3, lambda: 3)
        self.assertEqual(1, len(remembered))

    def test_an_exception_is_raised_and_nothing_remembered(self):
        remembered = memo.Memo()

        def fail():
            raise ValueError('no')
        self.assertRaises(ValueError, remembered.get, 'k', fail)
        self.assertEqual(0, len(remembered))

    def test_disabled_computes_anew_and_empties(self):
        remembered = memo.Memo()
        remembered.get('k', lambda: 1)
        compute, calls = _counting(2)
        with memo.disabled():
            self.assertFalse(memo.enabled())
            self.assertEqual(0, len(remembered))
            self.assertEqual(2, remembered.get('k', compute))
            self.assertEqual(2, remembered.get('k', compute))
        self.assertTrue(memo.enabled())
        self.assertEqual(2, len(calls))


class FrozenTest(testtools.TestCase):

    def shared(self):
        value = {'props': {'hw_cpu_policy': 'dedicated'},
                 'cells': [{'cpus': [0, 1]}], 'pair': ({'x': 1}, [2])}
        return memo.Memo().get('k', lambda: value)

    def test_every_nested_change_is_refused(self):
        value = self.shared()
        changes = [
            lambda: value.__setitem__('new', 1),
            lambda: value.pop('props'),
            lambda: value.update(a=1),
            lambda: value.setdefault('a', 1),
            lambda: value.clear(),
            lambda: value['props'].__setitem__('hw_cpu_policy', 'shared'),
            lambda: value['props'].__delitem__('hw_cpu_policy'),
            lambda: value['cells'].append({}),
            lambda: value['cells'][0]['cpus'].extend([2]),
            lambda: value['cells'][0]['cpus'].sort(),
            lambda: value['cells'].__setitem__(0, {}),
            lambda: value['pair'][0].__setitem__('x', 2),
            lambda: value['pair'][1].insert(0, 1),
        ]
        for change in changes:
            self.assertRaises(TypeError, change)
        self.assertEqual({'hw_cpu_policy': 'dedicated'}, value['props'])
        self.assertEqual([{'cpus': [0, 1]}], value['cells'])

    def test_in_place_operators_are_refused(self):
        value = self.shared()
        cells = value['cells']

        def extend():
            nonlocal cells
            cells += [{}]

        def merge():
            props = value['props']
            props |= {'a': 1}
        self.assertRaises(TypeError, extend)
        self.assertRaises(TypeError, merge)
        self.assertEqual(1, len(value['cells']))

    def test_copies_are_plain_and_changeable(self):
        value = self.shared()
        deep = copy.deepcopy(value)
        self.assertIs(dict, type(deep))
        self.assertIs(dict, type(deep['props']))
        self.assertIs(list, type(deep['cells'][0]['cpus']))
        deep['cells'][0]['cpus'].append(2)
        self.assertEqual([0, 1], value['cells'][0]['cpus'])
        shallow = copy.copy(value)
        self.assertIs(dict, type(shallow))
        shallow['new'] = 1
        self.assertNotIn('new', value)

    def test_frozen_values_serialise_as_the_plain_ones(self):
        plain = {'props': {'a': [1, 2]}, 'n': None}
        value = memo.frozen(plain)
        self.assertEqual(plain, value)
        self.assertEqual(json.dumps(plain, sort_keys=True),
                         json.dumps(value, sort_keys=True))
        loaded = pickle.loads(pickle.dumps(value))
        self.assertEqual(plain, loaded)
        self.assertIs(dict, type(loaded))

    def test_values_are_frozen_with_the_memos_off_too(self):
        with memo.disabled():
            value = memo.Memo().get('k', lambda: {'a': []})
        self.assertRaises(TypeError, value['a'].append, 1)

    def test_other_values_are_left_as_they_are(self):
        marker = object()
        self.assertIs(marker, memo.frozen(marker))
        self.assertEqual('text', memo.frozen('text'))
        self.assertEqual((1, 'a'), memo.frozen((1, 'a')))


class DocumentKeyTest(testtools.TestCase):

    def test_equal_keys_for_equal_documents_and_types_matter(self):
        self.assertEqual(memo.document_key({'f': {'a': 1}}, 'f'),
                         memo.document_key({'f': {'a': 1}}, 'f'))
        self.assertNotEqual(memo.document_key({'f': True}, 'f'),
                            memo.document_key({'f': 1}, 'f'))
        self.assertNotEqual(memo.document_key({'f': 1.0}, 'f'),
                            memo.document_key({'f': 1}, 'f'))
        self.assertNotEqual(memo.document_key({'f': None}, 'f'),
                            memo.document_key({}, 'f'))
        self.assertEqual(memo.ABSENT, memo.document_key({}, 'f'))
