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

"""Drift in image, is_bfv and the owner fields; --fields; per-request keys.

NUMA topology and PCI requests are in test_fields_numa_pci.
"""

import copy
import json
import uuid as uuidlib

from healreq.heal import field_checks
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import field_case

DATA = 'nova_object.data'
VERSION = 'nova_object.version'
OTHER_IMAGE_ID = '9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d'
OTHER_OWNER_ID = '0d1e2f3a4b5c4d6e8f7a6b5c4d3e2f1a'
# ImageMeta attributes a heal of the same image keeps from the spec: what
# only Glance knew, and min_disk (flavor-adjusted in system metadata).
KEPT_IMAGE_KEYS = ('id', 'name', 'status', 'checksum', 'owner', 'size',
                   'min_disk', 'created_at', 'updated_at')
# A kernel command line of 6 + 400 UTF-8 bytes; system metadata keeps
# its first 255 bytes, cut on a character boundary (254 bytes).
LONG_VALUE = 'quiet ' + '\u00e9' * 200
LONG_VALUE_TRUNCATED = 'quiet ' + '\u00e9' * 124


props = field_case.image_properties
without = field_case.without_keys


class _FieldsTestCase(field_case.FieldTestCase):

    def add(self, cur=demo.M1_LARGE, sysmeta_props=None, system_metadata=None,
            spec_fields=None, **kwargs):
        """An instance in cell1 booted from the default image.

        ``sysmeta_props`` are the image properties its system metadata
        holds (default: the default image's).
        """
        if system_metadata is None:
            system_metadata = dep.image_system_metadata(
                properties=sysmeta_props,
                min_disk=cur['nova_object.data']['root_gb'])
        return self.deployment.add_instance(
            self.cell1, cur, system_metadata=system_metadata,
            spec_fields=spec_fields, **kwargs)


class ImageTest(_FieldsTestCase):

    def test_stale_property_healed(self):
        """image_property set changed system metadata, not the spec."""
        self.add()  # a neighbour written at ImageMetaProps 1.44
        spec_image = dep.image(properties=props(hw_disk_bus='virtio'),
                               props_version='1.40')
        spec_image[VERSION] = '1.7'
        uuid = self.add(sysmeta_props=props(hw_disk_bus='scsi'),
                        spec_fields=dict(spec_image=spec_image))
        before = self.spec(uuid)
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'hw_disk_bus=virtio', 'hw_disk_bus=scsi')])
        image = after[DATA]['image']
        self.assertEqual(('ImageMeta', '1.7'),
                         (image['nova_object.name'], image[VERSION]))
        self.assertEqual('1.40', image[DATA]['properties'][VERSION])
        self.assertEqual(props(hw_disk_bus='scsi'),
                         image[DATA]['properties'][DATA])
        self.assertEqual(sorted(spec_image[DATA]), sorted(image[DATA]))
        for key in KEPT_IMAGE_KEYS:
            self.assertEqual(spec_image[DATA][key], image[DATA][key], key)
        self.assertEqual(without(before, 'image'), without(after, 'image'))

    def test_derived_attributes_replaced(self):
        """min_ram and the formats come from system metadata."""
        spec_image = dep.image(min_ram=0)
        spec_image[DATA]['disk_format'] = 'qcow2'
        system_metadata = dep.image_system_metadata(min_ram=1024)
        uuid = self.add(system_metadata=system_metadata,
                        spec_fields=dict(spec_image=spec_image))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'min_ram=0, disk_format=qcow2',
              'min_ram=1024, disk_format=raw')])
        image = after[DATA]['image'][DATA]
        self.assertEqual((1024, 'raw', 'bare'),
                         (image['min_ram'], image['disk_format'],
                          image['container_format']))
        self.assertEqual('ubuntu-24.04-server', image['name'])

    def test_other_image_replaced_by_derived_one(self):
        """A rebuild the spec missed: the spec names another image."""
        spec_image = dep.image(image_id=OTHER_IMAGE_ID,
                               properties=props(os_distro='centos'))
        uuid = self.add(spec_fields=dict(spec_image=spec_image))
        before = self.spec(uuid)
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'id 9a0b1c2d.., os_distro=centos',
              'id 3e1f7a52.., os_distro=ubuntu')])
        image = after[DATA]['image']
        self.assertEqual('1.8', image[VERSION])
        self.assertEqual({'id': dep.IMAGE_ID, 'min_ram': 0, 'min_disk': 80,
                          'disk_format': 'raw', 'container_format': 'bare'},
                         {k: v for k, v in image[DATA].items()
                          if k != 'properties'})
        self.assertEqual(('1.44', dep.IMAGE_PROPERTIES),
                         (image[DATA]['properties'][VERSION],
                          image[DATA]['properties'][DATA]))
        self.assertEqual(without(before, 'image'), without(after, 'image'))

    def test_property_newer_than_stored_props_version(self):
        """The spec's ImageMetaProps 1.20 cannot hold hw_tpm_* (1.27).

        A spec saved by an old Nova for an image with TPM properties: a
        heal must leave nothing to heal behind, not report the same
        drift on every run.
        """
        self.add()  # the deployment writes ImageMetaProps 1.44
        uuid = self.add(
            sysmeta_props=props(hw_disk_bus='scsi', hw_tpm_model='tpm-crb',
                                hw_tpm_version='2.0'),
            spec_fields=dict(spec_image=dep.image(
                properties=props(hw_disk_bus='virtio'),
                props_version='1.20')))
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(uuid, 'healed', ['image'])],
                         [(r['instance_uuid'], r['status'], r['drift'])
                          for r in doc['results']])
        healed = self.spec(uuid)[DATA]['image'][DATA]['properties'][DATA]
        self.assertEqual('scsi', healed['hw_disk_bus'])
        again = self.heal()
        self.assertEqual(4, again.code, again.stdout + again.stderr)

    def test_formats_missing_from_system_metadata(self):
        """What a heal reports as the image afterwards is what it writes.

        Without image_disk_format in system metadata, Nova derives no
        disk_format; a run after the first must find nothing to heal.
        """
        system_metadata = dep.image_system_metadata()
        del system_metadata['image_disk_format']
        uuid = self.add(system_metadata=system_metadata)
        result, doc = self.heal_json()
        self.assertIn(result.code, (0, 4), result.stdout + result.stderr)
        claimed = [change['after'] for finding in doc['results']
                   for change in finding['changes']]
        if 'disk_format' in self.spec(uuid)[DATA]['image'][DATA]:
            self.assertNotIn('disk_format unset', claimed)
        again = self.heal()
        self.assertEqual(4, again.code, again.stdout + again.stderr)

    def test_min_disk_not_compared(self):
        self.add(system_metadata=dep.image_system_metadata(min_disk=40))
        self.add(system_metadata=dep.image_system_metadata(min_disk=0))
        self.assert_consistent()

    def test_glance_only_attributes_not_compared(self):
        """System metadata has no name, checksum, size, owner, tags..."""
        spec_image = dep.image()
        spec_image[DATA].update(tags=['golden'], visibility='public',
                                protected=True, virtual_size=10737418240)
        self.add(spec_fields=dict(spec_image=spec_image))
        self.assertNotIn('image_name', dep.image_system_metadata())
        self.assert_consistent()

    def test_truncated_property_matches_full_value(self):
        self.add(sysmeta_props=props(os_command_line=LONG_VALUE_TRUNCATED),
                 spec_fields=dict(spec_image=dep.image(
                     properties=props(os_command_line=LONG_VALUE))))
        self.assertEqual(254, len(LONG_VALUE_TRUNCATED.encode('utf-8')))
        self.assert_consistent()

    def test_truncated_property_differing_inside_limit_drifts(self):
        """Only the cut-off tail may differ, not the stored 255 bytes."""
        stored = 'loud ' + LONG_VALUE_TRUNCATED[5:]
        uuid = self.add(
            sysmeta_props=props(os_command_line=stored),
            spec_fields=dict(spec_image=dep.image(
                properties=props(os_command_line=LONG_VALUE))))
        # Long values are shown cut to 40 characters.
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'os_command_line=%s...' % LONG_VALUE[:37],
              'os_command_line=%s...' % stored[:37])])
        self.assertEqual(stored, after[DATA]['image'][DATA]['properties']
                         [DATA]['os_command_line'])

    def test_legacy_names_and_coercion_not_drift(self):
        """System metadata keeps Glance's raw names and strings."""
        system_metadata = dep.image_system_metadata(properties={
            'architecture': 'AMD64', 'os_distro': 'ubuntu',
            'hw_vif_multiqueue_enabled': 'yes', 'hw_video_ram': '64'})
        self.add(system_metadata=system_metadata,
                 spec_fields=dict(spec_image=dep.image(properties=props(
                     hw_vif_multiqueue_enabled=True, hw_video_ram=64))))
        self.assert_consistent()

    def test_invalid_enum_value_refused(self):
        uuid = self.add(sysmeta_props=props(hw_disk_bus='floppy-invalid'),
                        spec_flavor=demo.M1_SMALL)
        finding = self.assert_refused(self.cell1, uuid,
                                      'instance-image-invalid',
                                      'hw_disk_bus')
        self.assertIn('floppy-invalid', finding['detail'])

    def test_invalid_integer_refused(self):
        uuid = self.add(sysmeta_props=props(hw_numa_nodes='two'))
        finding = self.assert_refused(self.cell1, uuid,
                                      'instance-image-invalid',
                                      'hw_numa_nodes')
        self.assertIn("'two'", finding['detail'])

    def test_base_image_ref_disagrees(self):
        """A rebuild that failed half-way: image_ref is already new."""
        system_metadata = dep.image_system_metadata(image_id=OTHER_IMAGE_ID)
        uuid = self.add(system_metadata=system_metadata,
                        spec_flavor=demo.M1_SMALL)
        finding = self.assert_refused(self.cell1, uuid,
                                      'instance-image-inconsistent',
                                      OTHER_IMAGE_ID)
        self.assertIn(dep.IMAGE_ID, finding['detail'])


class IsBfvTest(_FieldsTestCase):

    def volume_image(self):
        """The spec image of a volume-backed instance (no image id)."""
        image = dep.image()
        del image[DATA]['id']
        return image

    def test_volume_backed(self):
        uuid = self.add(
            image_ref='', block_devices=[dict(boot_index=0)],
            system_metadata=dep.image_system_metadata(image_id=''),
            spec_fields=dict(spec_image=self.volume_image(), is_bfv=False))
        before = self.spec(uuid)
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('is_bfv', 'False', 'True')])
        self.assertIs(True, after[DATA]['is_bfv'])
        self.assertEqual(without(before, 'is_bfv'), without(after, 'is_bfv'))

    def test_volume_backed_with_image_ref(self):
        """Booted with an image onto a volume: the root BDM decides."""
        uuid = self.add(
            block_devices=[dict(source_type='image', boot_index=0)],
            spec_fields=dict(is_bfv=False))
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('is_bfv', 'False', 'True')])
        self.assertIs(True, after[DATA]['is_bfv'])

    def test_no_root_mapping_and_no_image(self):
        """Without a root BDM, an empty image_ref means volume-backed."""
        uuid = self.add(
            image_ref='',
            system_metadata=dep.image_system_metadata(image_id=''),
            spec_fields=dict(spec_image=self.volume_image(), is_bfv=False))
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('is_bfv', 'False', 'True')])
        self.assertIs(True, after[DATA]['is_bfv'])

    def test_image_backed_with_data_volume(self):
        """Only the root (boot_index 0) mapping decides."""
        uuid = self.add(
            block_devices=[dict(source_type='image',
                                destination_type='local'),
                           dict(boot_index=None),
                           dict(boot_index=0, deleted=1)],
            spec_fields=dict(is_bfv=True))
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('is_bfv', 'True', 'False')])
        self.assertIs(False, after[DATA]['is_bfv'])

    def test_legacy_spec(self):
        """A spec saved at RequestSpec 1.10 gets is_bfv and Nova's 1.15."""
        self.add()  # the deployment writes RequestSpec 1.15
        uuid = str(uuidlib.uuid4())
        legacy = dep.request_spec(uuid, demo.M1_LARGE, version='1.10')
        for key in ('is_bfv', 'user_id', 'requested_resources'):
            del legacy[DATA][key]
        self.add(uuid=uuid, spec=json.dumps(legacy))
        after = self.assert_heals(
            self.cell1, uuid, 'legacy-spec',
            [('is_bfv', 'missing', 'False'),
             ('user_id', 'missing', dep.USER_ID)])
        self.assertEqual('1.15', after[VERSION])
        self.assertEqual((False, dep.USER_ID),
                         (after[DATA]['is_bfv'], after[DATA]['user_id']))
        self.assertEqual(without(legacy, 'is_bfv', 'user_id')[DATA],
                         without(after, 'is_bfv', 'user_id')[DATA])
        self.assertEqual(legacy['nova_object.changes'],
                         after['nova_object.changes'])

    def add_legacy(self, cell):
        """An instance whose spec was saved at RequestSpec 1.10."""
        uuid = str(uuidlib.uuid4())
        legacy = dep.request_spec(uuid, demo.M1_LARGE, version='1.10')
        for key in ('is_bfv', 'requested_resources'):
            del legacy[DATA][key]
        self.deployment.add_instance(cell, demo.M1_LARGE, uuid=uuid,
                                     spec=json.dumps(legacy))
        return uuid

    def test_legacy_spec_healed_alone(self):
        """--instance, as the operator guide suggests trying first."""
        self.add()
        uuid = self.add_legacy(self.cell1)
        after = self.assert_heals(self.cell1, uuid, 'legacy-spec',
                                  [('is_bfv', 'missing', 'False')],
                                  '--instance', uuid)
        self.assertEqual('1.15', after[VERSION])

    def test_legacy_spec_before_newer_ones(self):
        """The 1.15 specs are in a cell processed after the legacy one."""
        self.deployment.add_instance(self.cell2, demo.M1_LARGE)
        uuid = self.add_legacy(self.cell1)
        after = self.assert_heals(self.cell1, uuid, 'legacy-spec',
                                  [('is_bfv', 'missing', 'False')])
        self.assertEqual('1.15', after[VERSION])

    def test_field_added_without_version_bump(self):
        """RequestSpec 1.11 has user_id already: its version is kept."""
        self.add()
        uuid = str(uuidlib.uuid4())
        legacy = dep.request_spec(uuid, demo.M1_LARGE, version='1.11')
        del legacy[DATA]['user_id']
        self.add(uuid=uuid, spec=json.dumps(legacy))
        after = self.assert_heals(self.cell1, uuid, 'legacy-spec',
                                  [('user_id', 'missing', dep.USER_ID)])
        self.assertEqual('1.11', after[VERSION])

    def test_every_spec_too_old(self):
        """No spec of the deployment is newer than 1.8: nothing to copy."""
        uuid = str(uuidlib.uuid4())
        legacy = dep.request_spec(uuid, demo.M1_LARGE, version='1.8')
        for key in ('is_bfv', 'user_id', 'requested_resources'):
            del legacy[DATA][key]
        self.add(uuid=uuid, spec=json.dumps(legacy))
        self.assert_refused(self.cell1, uuid, 'spec-version-too-old',
                            'RequestSpec 1.8')


class OwnerTest(_FieldsTestCase):

    def test_null_user_id_healed(self):
        uuid = self.add(spec_fields=dict(user_id=None))
        before = self.spec(uuid)
        after = self.assert_heals(self.cell1, uuid, 'spec-drift',
                                  [('user_id', 'None', dep.USER_ID)])
        self.assertEqual(dep.USER_ID, after[DATA]['user_id'])
        self.assertEqual('1.15', after[VERSION])
        self.assertEqual(without(before, 'user_id'),
                         without(after, 'user_id'))

    def test_other_project_refused(self):
        uuid = self.add(spec_flavor=demo.M1_SMALL,
                        spec_fields=dict(project_id=OTHER_OWNER_ID))
        finding = self.assert_refused(self.cell1, uuid,
                                      'spec-owner-mismatch',
                                      OTHER_OWNER_ID)
        self.assertIn(dep.PROJECT_ID, finding['detail'])

    def test_other_user_refused(self):
        uuid = self.add(spec_flavor=demo.M1_SMALL,
                        spec_fields=dict(user_id=OTHER_OWNER_ID))
        self.assert_refused(self.cell1, uuid, 'spec-owner-mismatch',
                            'user_id')

    def test_spec_of_another_instance_refused(self):
        # A spec document copied from another instance: its flavor drifts
        # from this instance's, but it is not this instance's to heal.
        other = str(uuidlib.uuid4())
        uuid = self.add(spec=json.dumps(dep.request_spec(other,
                                                         demo.M1_SMALL)))
        finding = self.assert_refused(self.cell1, uuid,
                                      'spec-instance-mismatch', other)
        self.assertIn('not this one', finding['detail'])


class FieldsOptionTest(_FieldsTestCase):

    def test_flavor_only(self):
        """Image drift, even an invalid image, is not looked at."""
        drifted = self.add(sysmeta_props=props(hw_disk_bus='scsi'))
        invalid = self.add(sysmeta_props=props(hw_disk_bus='floppy-invalid'))
        self.assert_consistent('--fields', 'flavor')
        result, doc = self.heal_json('--dry-run')
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(drifted, 'drifted', ['image']), (invalid, 'error', [])],
            [(r['instance_uuid'], r['status'], r['drift'])
             for r in doc['results']])

    def test_image_and_is_bfv_only(self):
        uuid = self.add(spec_flavor=demo.M1_SMALL,
                        sysmeta_props=props(hw_disk_bus='scsi'),
                        spec_fields=dict(is_bfv=True, user_id=None))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('image', 'hw_disk_bus unset', 'hw_disk_bus=scsi'),
             ('is_bfv', 'True', 'False')],
            '--fields', 'image,is_bfv')
        self.assertEqual('m1.small', after[DATA]['flavor'][DATA]['name'])
        self.assertIsNone(after[DATA]['user_id'])
        result, doc = self.heal_json('--fields', ' user_id , flavor ')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([['flavor', 'user_id']],
                         [r['drift'] for r in doc['results']])
        self.assert_consistent()

    def test_unknown_field(self):
        uuid = self.add(spec_flavor=demo.M1_SMALL)
        before = self.deployment.spec_text(uuid)
        for value in ('bogus', 'flavor,bogus', ',', 'Flavor'):
            result = self.heal('--fields', value)
            self.assertEqual(127, result.code, value)
            self.assertEqual('', result.stdout, value)
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertIn('--fields', lines[0])
            self.assertIn(repr(value), lines[0])
        self.assertEqual(before, self.deployment.spec_text(uuid))


class PerRequestFieldsTest(_FieldsTestCase):
    """What only the boot request said is never derived nor rewritten.

    The pinned zone, which differs from the instance's, and the group the
    spec names, which no longer exists while the instance is in none (an
    error, spec-group-gone), are checked in test_whole_spec; here the
    other fields are.
    """

    PER_REQUEST = {
        'availability_zone': 'az2',
        # same_host names the instance itself: a live one.
        'scheduler_hints': {
            'same_host': None,
            'query': ['[">=", "$free_ram_mb", 1024]']},
        'instance_group': dep.envelope('InstanceGroup', '1.11', {
            'uuid': '4e0c9d2a-6b1f-4c3e-8a7d-5f6e7a8b9c0d',
            'name': 'db-cluster', 'policy': 'anti-affinity',
            'rules': {'max_server_per_host': '1'},
            'members': None, 'hosts': ['compute-1', 'compute-4'],
            'user_id': dep.USER_ID, 'project_id': dep.PROJECT_ID},
            ['hosts', 'policy']),
        'force_hosts': ['compute-7'],
        'force_nodes': ['compute-7.example.org'],
        'ignore_hosts': ['compute-3'],
        'limits': dep.envelope('SchedulerLimits', '1.0', {
            'numa_topology': None, 'vcpu': 16, 'disk_gb': 500,
            'memory_mb': 65536}),
        'num_instances': 3,
        'security_groups': dep.envelope('SecurityGroupList', '1.1', {
            'objects': [dep.envelope('SecurityGroup', '1.2',
                                     {'name': name}, ['name'])
                        for name in ('default', 'web', 'ssh-admin')]},
            ['objects']),
    }

    def test_kept_exactly(self):
        uuid = str(uuidlib.uuid4())
        stored = dep.request_spec(
            uuid, demo.M1_SMALL, user_id=None, is_bfv=True,
            spec_image=dep.image(properties=props(hw_disk_bus='virtio')))
        per_request = copy.deepcopy(self.PER_REQUEST)
        per_request['scheduler_hints']['same_host'] = [uuid]
        stored[DATA].update(copy.deepcopy(per_request))
        self.add(uuid=uuid, sysmeta_props=props(hw_disk_bus='scsi'),
                 spec=json.dumps(stored))
        after = self.assert_heals(
            self.cell1, uuid, 'spec-drift',
            [('flavor', 'm1.small(2)', 'm1.large(4)'),
             ('image', 'hw_disk_bus=virtio', 'hw_disk_bus=scsi'),
             ('is_bfv', 'True', 'False'),
             ('user_id', 'None', dep.USER_ID)], '--fields', ','.join(
                 f for f in field_checks.FIELD_NAMES
                 if f not in ('availability_zone', 'instance_group')))
        for key, value in per_request.items():
            self.assertEqual(value, after[DATA][key], key)
        healed = ('flavor', 'image', 'is_bfv', 'user_id')
        self.assertEqual(without(stored, *healed), without(after, *healed))
