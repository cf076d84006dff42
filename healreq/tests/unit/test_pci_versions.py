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


import json

import testtools

from healreq.objects import pci
from healreq.objects import primitive
from healreq.objects import versions
from healreq import releases
from healreq.testing import deployment as dep

T4 = {'count': 1, 'spec': [{'vendor_id': '10de', 'product_id': '1eb8'}],
      'alias_name': 't4', 'is_new': False, 'numa_policy': 'preferred',
      'request_id': 'e2394b25-5c6e-4bcb-9a57-8d9e1f2a3b4c',
      'requester_id': None}
PORT = {'count': 1, 'spec': [{'physical_network': 'physnet1'}],
        'alias_name': None, 'request_id': None,
        'requester_id': '0b5e1f4c-1111-4222-8333-944455556666'}


def _spec_requests(*requests, version='1.4'):
    return dep.envelope('InstancePCIRequests', '1.1', {'requests': [
        dep.envelope('InstancePCIRequest', version, dict(r))
        for r in requests]})


class PciTest(testtools.TestCase):
    def test_null_and_empty_mean_no_requests(self):
        self.assertEqual([], pci.from_instance_extra(None))
        self.assertEqual([], pci.from_instance_extra('[]'))
        self.assertEqual([], pci.from_instance_extra('null'))
        self.assertEqual([], pci.from_primitive(None, 'spec'))

    def test_defaults_applied_as_nova_loads(self):
        legacy = dict(T4, is_new=True)
        del legacy['numa_policy']
        request, = pci.from_instance_extra(json.dumps([legacy]))
        self.assertEqual('legacy', request['numa_policy'])
        self.assertFalse(request['is_new'])

    def test_host_annotations_are_not_drift(self):
        annotated = dict(T4, spec=[dict(T4['spec'][0],
                                        rp_uuids='a,b')])
        instance = pci.from_instance_extra(json.dumps([annotated]))
        spec = pci.from_primitive(_spec_requests(T4), 'spec')
        self.assertEqual(pci.alias_requests(instance),
                         pci.alias_requests(spec))

    def test_alias_count_and_spec_are_compared(self):
        spec = pci.alias_requests(pci.from_primitive(
            _spec_requests(T4), 'spec'))
        for changed in (dict(T4, count=2), dict(T4, alias_name='a100'),
                        dict(T4, spec=[{'vendor_id': '10de'}])):
            self.assertNotEqual(spec, pci.alias_requests(
                pci.from_instance_extra(json.dumps([changed]))))

    def test_port_requests_are_not_alias_requests(self):
        requests = pci.from_primitive(_spec_requests(T4, PORT), 'spec')
        self.assertEqual(1, len(pci.alias_requests(requests)))
        self.assertEqual([None], [r['alias_name']
                                  for r in pci.port_requests(requests)])
        self.assertEqual('t4 x1', pci.describe(requests))
        self.assertEqual('none', pci.describe([]))

    def test_malformed(self):
        for text in ('{}', '[1]', '[{"count": "1", "spec": []}]',
                     '[{"count": 1, "spec": {}}]',
                     '[{"count": 1, "spec": [], "alias_name": 3}]'):
            self.assertRaises(primitive.PrimitiveError,
                              pci.from_instance_extra, text)
        self.assertRaises(primitive.PrimitiveError, pci.from_primitive,
                          dep.envelope('InstancePCIRequests', '1.1',
                                       {'requests': {}}), 'spec')

    def test_to_primitive_drops_fields_of_newer_versions(self):
        requests = pci.from_instance_extra(json.dumps([T4]))
        document = pci.to_primitive(requests, None, '1.1', '1.1')
        data = document[primitive.DATA]['requests'][0][primitive.DATA]
        self.assertNotIn('instance_uuid', document[primitive.DATA])
        self.assertEqual({'count', 'spec', 'alias_name', 'is_new',
                          'request_id'}, set(data))
        document = pci.to_primitive(requests, 'u', '1.1', '1.4')
        data = document[primitive.DATA]['requests'][0][primitive.DATA]
        self.assertEqual('u', document[primitive.DATA]['instance_uuid'])
        self.assertEqual('preferred', data['numa_policy'])
        self.assertIn('requester_id', data)


class VersionProfileTest(testtools.TestCase):
    def test_defaults_to_the_newest_of_the_release(self):
        self.assertEqual('1.44', versions.VersionProfile().version(
            'ImageMetaProps'))
        zed = versions.VersionProfile(releases.by_name('zed'))
        self.assertEqual('1.34', zed.version('ImageMetaProps'))
        self.assertEqual('1.14', zed.version('RequestSpec'))

    def test_never_above_what_the_release_loads(self):
        profile = versions.VersionProfile()
        profile.observe(dep.request_spec(
            'u', dep.flavor(1, 'f'), spec_image=dep.image(
                props_version='1.44')))
        caracal = profile.for_release(releases.by_name('2024.1'))
        self.assertEqual('1.37', caracal.version('ImageMetaProps'))
        self.assertEqual('1.44', profile.version('ImageMetaProps'))
        self.assertFalse(caracal.can_write('ImageMetaProps', '1.38'))
        self.assertTrue(caracal.can_write('ImageMetaProps', '1.37'))
        self.assertFalse(caracal.can_write('ImageMetaProps', None))

    def test_highest_version_seen_wins(self):
        profile = versions.VersionProfile()
        for props in ('1.29', '1.44', '1.9'):
            profile.observe(dep.request_spec(
                'u', dep.flavor(1, 'f'),
                spec_image=dep.image(props_version=props)))
        self.assertEqual('1.44', profile.version('ImageMetaProps'))
        self.assertEqual('1.15', profile.version('RequestSpec'))

    def test_invalid_versions_are_ignored(self):
        profile = versions.VersionProfile()
        profile.observe({primitive.NAME: 'InstanceNUMACell',
                         primitive.VERSION: 'x'})
        self.assertEqual('1.6', profile.version('InstanceNUMACell'))

    def test_nested_versions(self):
        document = dep.request_spec('u', dep.flavor(1, 'f'))
        self.assertEqual('1.44', versions.first_nested_version(
            document[primitive.DATA]['image'], 'properties', None))
        self.assertEqual('1.0', versions.first_nested_version(
            {primitive.DATA: {'cells': []}}, 'cells', '1.0'))
        self.assertEqual('d', versions.version_of(None, 'd'))
