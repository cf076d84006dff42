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

"""Object primitive envelopes and JSON as Nova writes it."""

import json

import testtools

from healreq.objects import primitive
from healreq.testing import deployment as dep

WHAT = 'request_specs.spec of instance 42'
INSTANCE_UUID = '982c3ead-59b1-4acd-876b-d55166d8e7f0'


def _envelope(**overrides):
    document = dep.envelope('Flavor', '1.2', {'id': 1})
    document.update(overrides)
    return document


class UnwrapTest(testtools.TestCase):

    def assertRejected(self, document, *fragments):
        error = self.assertRaises(primitive.PrimitiveError, primitive.unwrap,
                                  document, 'Flavor', WHAT)
        self.assertIn(WHAT, str(error))
        for fragment in fragments:
            self.assertIn(fragment, str(error))
        return error

    def test_returns_data(self):
        document = _envelope()
        self.assertIs(document[primitive.DATA],
                      primitive.unwrap(document, 'Flavor', WHAT))

    def test_changes_are_allowed(self):
        document = _envelope(**{primitive.CHANGES: ['id']})
        self.assertEqual({'id': 1},
                         primitive.unwrap(document, 'Flavor', WHAT))

    def test_wrong_name(self):
        self.assertRejected(_envelope(**{primitive.NAME: 'ImageMeta'}),
                            'ImageMeta', 'Flavor')

    def test_missing_name(self):
        document = _envelope()
        del document[primitive.NAME]
        self.assertRejected(document, 'Flavor')

    def test_wrong_namespace(self):
        self.assertRejected(_envelope(**{primitive.NAMESPACE: 'cinder'}),
                            'cinder')

    def test_missing_namespace(self):
        document = _envelope()
        del document[primitive.NAMESPACE]
        self.assertRejected(document, 'namespace')

    def test_bad_versions(self):
        for version in ('1', 'a.b', None, '1.2.3', '', ' 1.2', '1.x', 1.2,
                        ['1', '2']):
            self.assertRejected(_envelope(**{primitive.VERSION: version}),
                                'version', repr(version))

    def test_missing_version(self):
        document = _envelope()
        del document[primitive.VERSION]
        self.assertRejected(document, 'version')

    def test_data_not_a_dict(self):
        for data in (None, [], 'x', 1, [['id', 1]]):
            self.assertRejected(_envelope(**{primitive.DATA: data}), 'data')

    def test_missing_data(self):
        document = _envelope()
        del document[primitive.DATA]
        self.assertRejected(document, 'data')

    def test_not_a_dict(self):
        for document in (None, [], 'Flavor', 1, [_envelope()]):
            self.assertRejected(document, 'primitive')

    def test_error_is_a_value_error(self):
        self.assertTrue(issubclass(primitive.PrimitiveError, ValueError))

    def test_hostile_envelopes_raise_only_primitive_errors(self):
        # Whatever a document holds, unwrap raises PrimitiveError alone
        # (callers rely on it), with a bounded message.
        deep = []
        for _level in range(100000):
            deep = [deep]
        hostile = (10 ** 5000, -10 ** 5000, [10 ** 5000], deep,
                   {'a': deep}, '1.' + '9' * 5000, '9' * 5000 + '.1',
                   '\u0661.\u0662' * 10, float('nan'), 'x' * 100000)
        for key in (primitive.NAME, primitive.NAMESPACE, primitive.VERSION):
            for value in hostile:
                error = self.assertRejected(_envelope(**{key: value}))
                self.assertLess(len(str(error)), 200)


class ShortTest(testtools.TestCase):

    def test_bounded(self):
        self.assertEqual("'Flavor'", primitive.short('Flavor'))
        self.assertLess(len(primitive.short('x' * 100000)), 40)
        self.assertLess(len(primitive.short(list(range(1000)))), 60)

    def test_never_raises(self):
        class Unprintable(object):
            def __repr__(self):
                raise RuntimeError('no')

        deep = []
        for _level in range(100000):
            deep = [deep]
        self.assertEqual('<16610-bit integer>', primitive.short(10 ** 5000))
        self.assertEqual('[<16610-bit integer>]',
                         primitive.short([-10 ** 5000]))
        self.assertEqual('[[[[[[[...]]]]]]]', primitive.short(deep))
        self.assertIn('Unprintable', primitive.short(Unprintable()))


class ParseVersionTest(testtools.TestCase):

    def test_valid(self):
        self.assertEqual((1, 15), primitive.parse_version('1.15', WHAT))
        self.assertEqual((10, 0), primitive.parse_version('10.0', WHAT))

    def test_compares_numerically(self):
        self.assertLess(primitive.parse_version('1.9', WHAT),
                        primitive.parse_version('1.10', WHAT))

    def test_invalid(self):
        for version in ('1', 'a.b', None, '1.', '.1', '1.2.3', 'v1.2', 12):
            error = self.assertRaises(primitive.PrimitiveError,
                                      primitive.parse_version, version, WHAT)
            self.assertIn(WHAT, str(error))


class NewestVersionTest(testtools.TestCase):

    def test_loadable_up_to_the_newest_of_the_same_major(self):
        self.assertTrue(primitive.loadable('ImageMetaProps', (1, 44)))
        self.assertTrue(primitive.loadable('ImageMetaProps', (1, 0)))
        self.assertFalse(primitive.loadable('ImageMetaProps', (1, 45)))
        self.assertFalse(primitive.loadable('InstanceNUMACell', (2, 0)))
        self.assertFalse(primitive.loadable('InstanceNUMACell', (0, 9)))

    def test_target_versions(self):
        self.assertEqual((1, 4), primitive.target_version(
            'InstanceNUMACell', '1.4'))
        self.assertEqual((1, 3), primitive.target_version(
            'InstanceNUMATopology', '1.3'))
        for name, version in (('InstanceNUMACell', '1.7'),
                              ('ImageMeta', '2.0'), ('Flavor', '1.x'),
                              ('RequestSpec', None)):
            error = self.assertRaises(primitive.PrimitiveError,
                                      primitive.target_version, name,
                                      version)
            self.assertIn(name, str(error))


class LoadJsonTest(testtools.TestCase):

    def test_text(self):
        self.assertEqual({'a': [1, None]},
                         primitive.load_json('{"a": [1, null]}', WHAT))

    def test_utf8_bytes(self):
        self.assertEqual({'name': 'caf\xe9'}, primitive.load_json(
            '{"name": "caf\xe9"}'.encode('utf-8'), WHAT))
        self.assertEqual({'a': 1}, primitive.load_json(
            bytearray(b'{"a": 1}'), WHAT))

    def test_invalid_json(self):
        for text in ('', '{', '{"a": 1,}', "{'a': 1}", 'nova', '{"a": 1} x'):
            error = self.assertRaises(primitive.PrimitiveError,
                                      primitive.load_json, text, WHAT)
            self.assertIn(WHAT, str(error))
            self.assertIn('JSON', str(error))

    def test_invalid_utf8(self):
        error = self.assertRaises(primitive.PrimitiveError,
                                  primitive.load_json, b'{"name": "caf\xe9"}',
                                  WHAT)
        self.assertIn(WHAT, str(error))
        self.assertIn('UTF-8', str(error))

    def test_none(self):
        error = self.assertRaises(primitive.PrimitiveError,
                                  primitive.load_json, None, WHAT)
        self.assertIn(WHAT, str(error))

    def test_deeply_nested(self):
        error = self.assertRaises(primitive.PrimitiveError,
                                  primitive.load_json, '[' * 100000, WHAT)
        self.assertIn(WHAT, str(error))


class DumpJsonTest(testtools.TestCase):

    def _spec_text(self):
        flavor = dep.flavor(982, 'a2.medium', extra_specs={
            'hw:cpu_policy': 'shared', 'quota:cpu_shares': '400'},
            description='G\xe9n\xe9ral \u2013 4 vCPU \U0001f680')
        spec = dep.request_spec(INSTANCE_UUID, flavor, spec_id=7,
                                availability_zone='az1')
        spec['nova_object.data']['scheduler_hints'] = {
            'group': ['b7e2'], 'ratio': [0.5, 1.0, 1e-07, 12345678901234]}
        # What Nova writes: jsonutils.dumps(), i.e. json.dumps defaults.
        return json.dumps(spec)

    def test_round_trips_byte_for_byte(self):
        text = self._spec_text()
        self.assertEqual(text, primitive.dump_json(
            primitive.load_json(text, WHAT)))

    def test_round_trips_from_bytes(self):
        text = self._spec_text()
        self.assertEqual(text, primitive.dump_json(
            primitive.load_json(text.encode('utf-8'), WHAT)))

    def test_writes_like_nova(self):
        self.assertEqual('{"b": [1, 2.5], "a": "\\u00e9", "c": null}',
                         primitive.dump_json({'b': [1, 2.5], 'a': '\xe9',
                                              'c': None}))


class WrapTest(testtools.TestCase):

    def test_clean_envelope(self):
        data = {'id': 1}
        document = primitive.wrap('Flavor', '1.1', data)
        self.assertEqual({'nova_object.name': 'Flavor',
                          'nova_object.namespace': 'nova',
                          'nova_object.version': '1.1',
                          'nova_object.data': {'id': 1}}, document)
        self.assertNotIn(primitive.CHANGES, document)
        self.assertIs(data, primitive.unwrap(document, 'Flavor', WHAT))
