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

"""How the report words the differences of a drifted image."""

import testtools

from healreq.heal import describe

REF = '3e1f7a52-9c0b-4d8e-a6f3-2b7c9d1e4f60'
OTHER_REF = '9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d'


def _image(image_id=REF, min_ram=512, **properties):
    """An image as healreq.objects.image holds it (parts that matter)."""
    image = {'min_ram': min_ram, 'disk_format': 'raw',
             'container_format': 'bare', 'properties': dict(
                 {'hw_architecture': 'x86_64', 'hw_disk_bus': 'scsi',
                  'os_type': 'linux', 'hw_qemu_guest_agent': True},
                 **properties)}
    if image_id is not None:
        image['id'] = image_id
    return image


class DescribeDifferenceTest(testtools.TestCase):

    def test_differences_are_named(self):
        stored = _image()
        derived = _image(OTHER_REF, min_ram=1024, hw_disk_bus='virtio',
                         hw_pmu=True)
        del derived['properties']['os_type']
        names = ['id', 'min_ram', 'properties.hw_disk_bus',
                 'properties.hw_pmu', 'properties.os_type']
        self.assertEqual(
            ('id 3e1f7a52.., min_ram=512, hw_disk_bus=scsi, hw_pmu unset, '
             'os_type=linux',
             'id 9a0b1c2d.., min_ram=1024, hw_disk_bus=virtio, hw_pmu=true, '
             'os_type unset'),
            describe.describe_difference(stored, derived, names))

    def test_a_missing_id(self):
        self.assertEqual(('no id', 'id 3e1f7a52..'),
                         describe.describe_difference(_image(None), _image(),
                                                      ['id']))

    def test_long_values_are_shortened_in_descriptions(self):
        stored = _image(hw_numa_cpus=[{0, 1}, {2, 3}],
                        os_command_line='x' * 100)
        before, after = describe.describe_difference(
            stored, _image(), ['properties.hw_numa_cpus',
                               'properties.os_command_line'])
        self.assertEqual('hw_numa_cpus=[{0,1},{2,3}], os_command_line='
                         + 'x' * 37 + '...', before)
        self.assertEqual('hw_numa_cpus unset, os_command_line unset', after)
