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

"""Flavor primitives: parsing, comparison and the spec's healed flavor."""

import copy
import json

import testtools

from healreq.objects import flavor as flavor_obj
from healreq.objects import primitive
from healreq.testing import deployment as dep

WHAT = "instance_extra.flavor['cur']"


def _a2_medium(**kwargs):
    values = dict(vcpus=4, memory_mb=8192, root_gb=80, flavorid='026050',
                  extra_specs={'hw:cpu_policy': 'shared',
                               'quota:cpu_shares': '400'})
    values.update(kwargs)
    return dep.flavor(982, 'a2.medium', **values)


def _data(document):
    return document[primitive.DATA]


class ParseTest(testtools.TestCase):

    def test_compare_key(self):
        self.assertEqual(
            {'id': 982, 'name': 'a2.medium', 'flavorid': '026050',
             'memory_mb': 8192, 'vcpus': 4, 'root_gb': 80,
             'ephemeral_gb': 0, 'swap': 0,
             'extra_specs': {'hw:cpu_policy': 'shared',
                             'quota:cpu_shares': '400'}},
            flavor_obj.parse(_a2_medium(), WHAT))

    def test_coerces_numeric_strings(self):
        document = _a2_medium()
        _data(document).update(id='982', memory_mb='8192', vcpus='4',
                               root_gb='80', ephemeral_gb='10', swap='512')
        key = flavor_obj.parse(document, WHAT)
        self.assertEqual((982, 8192, 4, 80, 10, 512),
                         (key['id'], key['memory_mb'], key['vcpus'],
                          key['root_gb'], key['ephemeral_gb'], key['swap']))

    def test_missing_or_null_optional_sizes_are_zero(self):
        for how in ('missing', 'null'):
            document = _a2_medium(ephemeral_gb=5, swap=1024)
            for field in ('root_gb', 'ephemeral_gb', 'swap'):
                if how == 'missing':
                    del _data(document)[field]
                else:
                    _data(document)[field] = None
            key = flavor_obj.parse(document, WHAT)
            self.assertEqual((0, 0, 0), (key['root_gb'], key['ephemeral_gb'],
                                         key['swap']), how)

    def test_required_fields(self):
        for field in ('id', 'memory_mb', 'vcpus'):
            for how in ('missing', 'null'):
                document = _a2_medium()
                if how == 'missing':
                    del _data(document)[field]
                else:
                    _data(document)[field] = None
                error = self.assertRaises(primitive.PrimitiveError,
                                          flavor_obj.parse, document, WHAT)
                self.assertIn('%s.%s' % (WHAT, field), str(error))

    def test_rejects_booleans_as_integers(self):
        for field in ('id', 'memory_mb', 'vcpus', 'root_gb', 'ephemeral_gb',
                      'swap'):
            for value in (True, False):
                document = _a2_medium()
                _data(document)[field] = value
                error = self.assertRaises(primitive.PrimitiveError,
                                          flavor_obj.parse, document, WHAT)
                self.assertIn('%s.%s' % (WHAT, field), str(error))

    def test_rejects_non_integers(self):
        for value in ('abc', '', '8.5', 8192.0, [8192], {'v': 1}):
            document = _a2_medium()
            _data(document)['memory_mb'] = value
            error = self.assertRaises(primitive.PrimitiveError,
                                      flavor_obj.parse, document, WHAT)
            self.assertIn('%s.memory_mb' % WHAT, str(error))

    def test_rejects_non_string_names(self):
        for field in ('name', 'flavorid'):
            document = _a2_medium()
            _data(document)[field] = 982
            error = self.assertRaises(primitive.PrimitiveError,
                                      flavor_obj.parse, document, WHAT)
            self.assertIn('%s.%s' % (WHAT, field), str(error))

    def test_rejects_non_dict_extra_specs(self):
        for value in ([], ['hw:cpu_policy'], 'hw:cpu_policy=shared', 1,
                      [['hw:cpu_policy', 'shared']]):
            document = _a2_medium()
            _data(document)['extra_specs'] = value
            error = self.assertRaises(primitive.PrimitiveError,
                                      flavor_obj.parse, document, WHAT)
            self.assertIn('%s.extra_specs' % WHAT, str(error))

    def test_missing_or_null_extra_specs_are_empty(self):
        document = _a2_medium()
        del _data(document)['extra_specs']
        self.assertEqual({}, flavor_obj.parse(document, WHAT)['extra_specs'])
        _data(document)['extra_specs'] = None
        self.assertEqual({}, flavor_obj.parse(document, WHAT)['extra_specs'])

    def test_extra_spec_values_become_strings(self):
        document = _a2_medium(extra_specs={'hw:numa_nodes': 2,
                                           'trait:X': None})
        self.assertEqual({'hw:numa_nodes': '2', 'trait:X': None},
                         flavor_obj.parse(document, WHAT)['extra_specs'])

    def test_checks_the_envelope(self):
        document = _a2_medium()
        document[primitive.NAME] = 'RequestSpec'
        error = self.assertRaises(primitive.PrimitiveError, flavor_obj.parse,
                                  document, WHAT)
        self.assertIn(WHAT, str(error))

    def test_does_not_mutate(self):
        document = _a2_medium()
        _data(document)['memory_mb'] = '8192'
        before = copy.deepcopy(document)
        flavor_obj.parse(document, WHAT)
        self.assertEqual(before, document)

    def test_label(self):
        self.assertEqual('a2.medium(982)',
                         flavor_obj.label(flavor_obj.parse(_a2_medium(),
                                                           WHAT)))


class DifferingFieldsTest(testtools.TestCase):

    def _differ(self, spec_document, instance_document=None):
        return flavor_obj.differing_fields(
            flavor_obj.parse(spec_document, 'spec'),
            flavor_obj.parse(instance_document or _a2_medium(), 'cur'))

    def test_identical(self):
        self.assertEqual([], self._differ(_a2_medium()))

    def test_cosmetic_differences(self):
        spec = _a2_medium(description='Shared CPU, 4 vCPU')
        data = _data(spec)
        data.update(created_at='2020-01-01T00:00:00Z',
                    updated_at='2024-05-05T10:00:00Z',
                    deleted_at=None, rxtx_factor=2.5, vcpu_weight=10,
                    disabled=True, is_public=False, memory_mb='8192')
        spec[primitive.CHANGES] = ['name', 'memory_mb', 'extra_specs']
        # Key order, including inside extra_specs.
        data['extra_specs'] = dict(reversed(list(
            data['extra_specs'].items())))
        reordered = dict(reversed(list(data.items())))
        spec[primitive.DATA] = reordered
        instance = _a2_medium(version='1.1')
        del instance[primitive.CHANGES]
        self.assertEqual([], self._differ(spec, instance))

    def test_each_compared_field(self):
        changes = {'id': 983, 'name': 'a2.large', 'flavorid': '026051',
                   'memory_mb': 16384, 'vcpus': 8, 'root_gb': 160,
                   'ephemeral_gb': 20, 'swap': 2048}
        for field, value in changes.items():
            spec = _a2_medium()
            _data(spec)[field] = value
            self.assertEqual([field], self._differ(spec), field)

    def test_extra_spec_added(self):
        spec = _a2_medium()
        _data(spec)['extra_specs']['os:secure_boot'] = 'disabled'
        self.assertEqual(['extra_specs'], self._differ(spec))

    def test_extra_spec_removed(self):
        spec = _a2_medium()
        del _data(spec)['extra_specs']['quota:cpu_shares']
        self.assertEqual(['extra_specs'], self._differ(spec))

    def test_extra_spec_value_changed(self):
        spec = _a2_medium()
        _data(spec)['extra_specs']['hw:cpu_policy'] = 'dedicated'
        self.assertEqual(['extra_specs'], self._differ(spec))

    def test_several_in_report_order(self):
        spec = dep.flavor(831, 'e2.medium', vcpus=4, memory_mb=8192,
                          root_gb=25, flavorid='022050',
                          extra_specs={'hw:cpu_policy': 'shared'})
        self.assertEqual(['id', 'name', 'flavorid', 'root_gb',
                          'extra_specs'], self._differ(spec))


class ForRequestSpecTest(testtools.TestCase):

    def test_keeps_target_version(self):
        for version in ('1.0', '1.1', '1.2', '1.3'):
            healed = flavor_obj.for_request_spec(_a2_medium(), version)
            self.assertEqual(version, healed[primitive.VERSION])
            self.assertEqual('Flavor', healed[primitive.NAME])
            self.assertEqual('nova', healed[primitive.NAMESPACE])

    def test_drops_description_below_1_2(self):
        instance = _a2_medium(description='Shared CPU')
        for version in ('1.0', '1.1'):
            healed = flavor_obj.for_request_spec(instance, version)
            self.assertNotIn('description', _data(healed))

    def test_keeps_description_from_1_2(self):
        instance = _a2_medium(description='Shared CPU')
        for version in ('1.2', '1.10'):
            healed = flavor_obj.for_request_spec(instance, version)
            self.assertEqual('Shared CPU', _data(healed)['description'])

    def test_defaults_disabled_and_is_public(self):
        instance = _a2_medium()
        del _data(instance)['disabled']
        del _data(instance)['is_public']
        healed = _data(flavor_obj.for_request_spec(instance, '1.2'))
        self.assertIs(False, healed['disabled'])
        self.assertIs(True, healed['is_public'])

    def test_keeps_explicit_disabled_and_is_public(self):
        instance = _a2_medium()
        _data(instance).update(disabled=True, is_public=False)
        healed = _data(flavor_obj.for_request_spec(instance, '1.2'))
        self.assertIs(True, healed['disabled'])
        self.assertIs(False, healed['is_public'])

    def test_copies_data(self):
        instance = _a2_medium()
        healed = flavor_obj.for_request_spec(instance, '1.2')
        self.assertEqual(_data(instance), _data(healed))
        self.assertIsNot(_data(instance), _data(healed))
        self.assertEqual(list(_data(instance)), list(_data(healed)))

    def test_no_change_list(self):
        instance = _a2_medium()
        self.assertIn(primitive.CHANGES, instance)
        healed = flavor_obj.for_request_spec(instance, '1.2')
        self.assertNotIn(primitive.CHANGES, healed)
        self.assertEqual(
            sorted([primitive.NAME, primitive.NAMESPACE, primitive.VERSION,
                    primitive.DATA]), sorted(healed))

    def test_does_not_mutate_input(self):
        instance = _a2_medium(description='Shared CPU', version='1.2')
        del _data(instance)['disabled']
        del _data(instance)['is_public']
        before = copy.deepcopy(instance)
        healed = flavor_obj.for_request_spec(instance, '1.1')
        self.assertEqual(before, instance)
        _data(healed)['name'] = 'changed'
        self.assertEqual(before, instance)

    def test_result_parses_to_the_same_key(self):
        instance = _a2_medium()
        healed = flavor_obj.for_request_spec(instance, '1.1')
        self.assertEqual(flavor_obj.parse(instance, 'cur'),
                         flavor_obj.parse(healed, 'healed'))

    def test_invalid_target_version(self):
        self.assertRaises(primitive.PrimitiveError,
                          flavor_obj.for_request_spec, _a2_medium(), '1')


class ParseInstanceFlavorsTest(testtools.TestCase):

    def test_cur_only(self):
        text = json.dumps({'cur': _a2_medium()})
        flavors = flavor_obj.parse_instance_flavors(text)
        self.assertEqual({'cur': _a2_medium(), 'old': None, 'new': None},
                         flavors)

    def test_as_nova_stores_it(self):
        e2 = dep.flavor(831, 'e2.medium', root_gb=25)
        text = dep.instance_flavors(_a2_medium(), new=e2)
        flavors = flavor_obj.parse_instance_flavors(text)
        self.assertIsNone(flavors['old'])
        self.assertEqual(831, _data(flavors['new'])['id'])
        self.assertEqual(982, _data(flavors['cur'])['id'])

    def test_old_and_new(self):
        old = dep.flavor(2, 'm1.small')
        new = dep.flavor(4, 'm1.large')
        flavors = flavor_obj.parse_instance_flavors(
            json.dumps({'cur': _a2_medium(), 'old': old, 'new': new}))
        self.assertEqual(old, flavors['old'])
        self.assertEqual(new, flavors['new'])

    def test_bytes(self):
        flavors = flavor_obj.parse_instance_flavors(
            json.dumps({'cur': _a2_medium()}).encode('utf-8'))
        self.assertEqual(_a2_medium(), flavors['cur'])

    def test_missing_cur(self):
        for document in ({'old': None, 'new': None}, {}, [], 'cur', None):
            error = self.assertRaises(primitive.PrimitiveError,
                                      flavor_obj.parse_instance_flavors,
                                      json.dumps(document))
            self.assertIn('instance_extra.flavor', str(error))
            self.assertIn('cur', str(error))

    def test_null_cur(self):
        error = self.assertRaises(
            primitive.PrimitiveError, flavor_obj.parse_instance_flavors,
            json.dumps({'cur': None, 'old': None, 'new': None}))
        self.assertIn("instance_extra.flavor['cur']", str(error))

    def test_cur_invalid(self):
        cur = _a2_medium()
        del _data(cur)['vcpus']
        error = self.assertRaises(primitive.PrimitiveError,
                                  flavor_obj.parse_instance_flavors,
                                  json.dumps({'cur': cur}))
        self.assertIn("instance_extra.flavor['cur'].vcpus", str(error))

    def test_new_invalid(self):
        new = dep.flavor(4, 'm1.large')
        new[primitive.VERSION] = '1'
        error = self.assertRaises(
            primitive.PrimitiveError, flavor_obj.parse_instance_flavors,
            json.dumps({'cur': _a2_medium(), 'old': None, 'new': new}))
        self.assertIn("instance_extra.flavor['new']", str(error))

    def test_old_invalid(self):
        error = self.assertRaises(
            primitive.PrimitiveError, flavor_obj.parse_instance_flavors,
            json.dumps({'cur': _a2_medium(), 'old': {'id': 2}}))
        self.assertIn("instance_extra.flavor['old']", str(error))

    def test_not_json(self):
        for text in (None, '', '{"cur": ', b'\xff\xfe'):
            error = self.assertRaises(primitive.PrimitiveError,
                                      flavor_obj.parse_instance_flavors,
                                      text)
            self.assertIn('instance_extra.flavor', str(error))
