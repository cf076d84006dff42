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

"""The stored RequestSpec document."""

import copy
import json

import testtools

from healreq.objects import primitive
from healreq.objects import request_spec
from healreq.testing import deployment as dep

INSTANCE_UUID = '982c3ead-59b1-4acd-876b-d55166d8e7f0'


def _spec(spec_flavor=None, **kwargs):
    spec_flavor = spec_flavor or dep.flavor(831, 'e2.medium', root_gb=25)
    return dep.request_spec(INSTANCE_UUID, spec_flavor, spec_id=7, **kwargs)


class ParseTest(testtools.TestCase):

    def test_parses(self):
        document = _spec()
        spec = request_spec.RequestSpecDocument(json.dumps(document))
        self.assertEqual(document, spec.document)
        self.assertEqual(document[primitive.DATA], spec.data)
        self.assertEqual(document[primitive.DATA]['flavor'], spec.flavor())

    def test_bytes(self):
        spec = request_spec.RequestSpecDocument(
            json.dumps(_spec()).encode('utf-8'))
        self.assertEqual(831, spec.flavor()[primitive.DATA]['id'])

    def test_wrong_object(self):
        document = _spec()
        document[primitive.NAME] = 'Flavor'
        error = self.assertRaises(primitive.PrimitiveError,
                                  request_spec.RequestSpecDocument,
                                  json.dumps(document))
        self.assertIn('request_specs.spec', str(error))

    def test_bad_version(self):
        for version in ('1', 'a.b', None):
            document = _spec()
            document[primitive.VERSION] = version
            error = self.assertRaises(primitive.PrimitiveError,
                                      request_spec.RequestSpecDocument,
                                      json.dumps(document))
            self.assertIn('request_specs.spec', str(error))

    def test_not_a_document(self):
        for text in (None, '', 'null', '[]', '"spec"', '{"a": 1}',
                     b'\xc3\x28'):
            error = self.assertRaises(primitive.PrimitiveError,
                                      request_spec.RequestSpecDocument, text)
            self.assertIn('request_specs.spec', str(error))

    def test_flavor_validated(self):
        for value in (None, {}, dep.envelope('ImageMeta', '1.8', {}),
                      dep.envelope('Flavor', '1.2', {'id': 1})):
            document = _spec()
            document[primitive.DATA]['flavor'] = value
            spec = request_spec.RequestSpecDocument(json.dumps(document))
            error = self.assertRaises(primitive.PrimitiveError, spec.flavor)
            self.assertIn('request_specs.spec flavor', str(error))

    def test_flavor_missing(self):
        document = _spec()
        del document[primitive.DATA]['flavor']
        spec = request_spec.RequestSpecDocument(json.dumps(document))
        self.assertRaises(primitive.PrimitiveError, spec.flavor)


class WithFieldsTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.original = _spec()
        self.text = json.dumps(self.original)
        self.spec = request_spec.RequestSpecDocument(self.text)
        self.new_flavor = primitive.wrap(
            'Flavor', '1.2',
            dep.flavor(982, 'a2.medium')[primitive.DATA])

    def test_no_replacements_round_trips(self):
        self.assertEqual(self.text, self.spec.with_fields({}))

    def test_replaces_only_the_named_field(self):
        new = json.loads(self.spec.with_fields({'flavor': self.new_flavor}))
        self.assertEqual(self.new_flavor, new[primitive.DATA]['flavor'])
        expected = copy.deepcopy(self.original)
        expected[primitive.DATA]['flavor'] = self.new_flavor
        self.assertEqual(expected, new)

    def test_keeps_key_order(self):
        new = json.loads(self.spec.with_fields({'flavor': self.new_flavor}))
        self.assertEqual(list(self.original), list(new))
        self.assertEqual(list(self.original[primitive.DATA]),
                         list(new[primitive.DATA]))

    def test_keeps_change_list_and_versions(self):
        new = json.loads(self.spec.with_fields({'flavor': self.new_flavor}))
        self.assertEqual(self.original[primitive.CHANGES],
                         new[primitive.CHANGES])
        self.assertEqual('1.15', new[primitive.VERSION])
        data = new[primitive.DATA]
        self.assertEqual('1.8', data['image'][primitive.VERSION])
        self.assertEqual(
            '1.44', data['image'][primitive.DATA]['properties'][
                primitive.VERSION])
        self.assertEqual(['objects'],
                         data['security_groups'][primitive.CHANGES])

    def test_serialised_like_nova(self):
        new_text = self.spec.with_fields({'flavor': self.new_flavor})
        expected = copy.deepcopy(self.original)
        expected[primitive.DATA]['flavor'] = self.new_flavor
        self.assertEqual(json.dumps(expected), new_text)

    def test_only_the_replaced_text_changes(self):
        new_text = self.spec.with_fields({'flavor': self.new_flavor})
        old_flavor = json.dumps(self.original[primitive.DATA]['flavor'])
        self.assertEqual(1, self.text.count(old_flavor))
        self.assertEqual(
            self.text.replace(old_flavor, json.dumps(self.new_flavor)),
            new_text)

    def test_does_not_mutate_the_parsed_document(self):
        snapshot = copy.deepcopy(self.spec.document)
        self.spec.with_fields({'flavor': self.new_flavor,
                               'availability_zone': 'az2'})
        self.assertEqual(snapshot, self.spec.document)
        self.assertIs(self.spec.data, self.spec.document[primitive.DATA])
        self.assertEqual(self.text, self.spec.with_fields({}))

    def test_several_fields(self):
        new = json.loads(self.spec.with_fields(
            {'availability_zone': 'az2', 'flavor': self.new_flavor}))
        self.assertEqual('az2', new[primitive.DATA]['availability_zone'])
        self.assertEqual(self.new_flavor, new[primitive.DATA]['flavor'])
        self.assertEqual(list(self.original[primitive.DATA]),
                         list(new[primitive.DATA]))
