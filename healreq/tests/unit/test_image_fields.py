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

"""The ImageMeta and ImageMetaProps field table."""

import testtools

from healreq.objects import image_fields


class FieldTableTest(testtools.TestCase):

    def test_86_fields_with_kinds_and_versions(self):
        self.assertEqual(86, len(image_fields.PROPS_FIELDS))
        kinds = [kind for kind, _added in image_fields.PROPS_FIELDS.values()]
        self.assertEqual(20, kinds.count(image_fields.BOOLEAN))
        self.assertEqual(14, kinds.count(image_fields.INTEGER))
        self.assertEqual(11, kinds.count(image_fields.STRING))
        self.assertEqual(2, kinds.count(image_fields.UUID))
        self.assertEqual(2, kinds.count(image_fields.DICT_LIST))
        for kind in kinds:
            self.assertTrue(kind in image_fields.ENUM_VALUES or '_' in kind
                            or kind in (image_fields.BOOLEAN,
                                        image_fields.INTEGER,
                                        image_fields.STRING,
                                        image_fields.UUID), kind)
        self.assertEqual(('cpu_allocation_policy', (1, 0)),
                         image_fields.PROPS_FIELDS['hw_cpu_policy'])
        self.assertEqual((image_fields.STRING_LIST, (1, 20)),
                         image_fields.PROPS_FIELDS['traits_required'])
        self.assertEqual(('mem_encryption_model', (1, 42)),
                         image_fields.PROPS_FIELDS['hw_mem_encryption_model'])
        self.assertEqual(22, len(image_fields.LEGACY_NAMES))
