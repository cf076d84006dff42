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

"""Image derivation from system metadata, primitives and comparison."""

import copy
import json
import random

import testtools

from healreq.objects import image
from healreq.objects import image_fields
from healreq.objects import image_primitive
from healreq.objects import numa
from healreq.objects import numa_constraints
from healreq.objects import primitive
from healreq import releases

REF = '3e1f7a52-9c0b-4d8e-a6f3-2b7c9d1e4f60'
OTHER_REF = '9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d'


def _props(**raw):
    return image.props_from_strings(raw)


def _stored_image():
    """The ImageMeta of the reference's example spec (section 2.4)."""
    return {
        'nova_object.name': 'ImageMeta', 'nova_object.namespace': 'nova',
        'nova_object.version': '1.8',
        'nova_object.data': {
            'id': REF, 'name': 'ubuntu-24.04-server', 'status': 'active',
            'checksum': 'a3f1c9e0b7d24e6f8c5b1a2d3e4f5a6b',
            'owner': 'b18c2da2dbfa45138fb6077eafb2aa51',
            'size': 2361393152, 'container_format': 'bare',
            'disk_format': 'raw', 'created_at': '2025-09-01T10:00:00Z',
            'updated_at': '2025-09-01T10:05:28Z', 'min_ram': 512,
            'min_disk': 10,
            'properties': {
                'nova_object.name': 'ImageMetaProps',
                'nova_object.namespace': 'nova',
                'nova_object.version': '1.44',
                'nova_object.data': {
                    'hw_architecture': 'x86_64',
                    'hw_cpu_thread_policy': 'prefer',
                    'hw_disk_bus': 'scsi', 'hw_firmware_type': 'uefi',
                    'hw_machine_type': 'q35', 'hw_mem_page_size': '2048',
                    'hw_qemu_guest_agent': True,
                    'hw_scsi_model': 'virtio-scsi', 'os_distro': 'ubuntu',
                    'os_require_quiesce': True, 'os_type': 'linux',
                    'traits_required': ['CUSTOM_SSD']},
                'nova_object.changes': ['os_require_quiesce']},
        },
        'nova_object.changes': ['properties'],
    }


def _sysmeta():
    """System metadata of the same instance (flavor root_gb 40)."""
    return {
        'image_hw_architecture': 'x86_64',
        'image_hw_cpu_thread_policy': 'prefer',
        'image_hw_disk_bus': 'scsi', 'image_hw_firmware_type': 'uefi',
        'image_hw_machine_type': 'q35', 'image_hw_mem_page_size': '2048',
        'image_hw_qemu_guest_agent': 'yes',
        'image_hw_scsi_model': 'virtio-scsi', 'image_os_distro': 'ubuntu',
        'image_os_require_quiesce': 'True', 'image_os_type': 'linux',
        'image_trait:CUSTOM_SSD': 'required',
        'image_owner_specified.openstack.md5': 'abc',
        'image_stores': 'rbd', 'image_base_image_ref': REF,
        'image_min_ram': '512', 'image_min_disk': '40',
        'image_disk_format': 'raw', 'image_container_format': 'bare',
        'owner_user_name': 'demo', 'boot_roles': 'member,reader',
    }


class CoercionTest(testtools.TestCase):

    def test_flexible_booleans(self):
        for value, expected in (('yes', True), ('True', True), (' on ', True),
                                ('1', True), ('t', True), ('Y', True),
                                ('no', False), ('FALSE', False),
                                ('maybe', False), ('', False), ('2', False)):
            self.assertIs(expected,
                          _props(hw_qemu_guest_agent=value)[
                              'hw_qemu_guest_agent'], value)

    def test_integers(self):
        for value, expected in (('4', 4), (' 8 ', 8), ('-1', -1),
                                ('+3', 3), ('1_000', 1000), ('07', 7),
                                ('\u0663', 3)):
            self.assertEqual(expected,
                             _props(hw_cpu_cores=value)['hw_cpu_cores'])
        for value in ('two', '', '4.0', '0x10', '1e3'):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              hw_cpu_cores=value)

    def test_strings_and_uuids_are_kept(self):
        props = _props(hw_mem_page_size=' large ', os_distro='',
                       img_signature_certificate_uuid='not-a-uuid')
        self.assertEqual({'hw_mem_page_size': ' large ', 'os_distro': '',
                          'img_signature_certificate_uuid': 'not-a-uuid'},
                         props)

    def test_version_predicates(self):
        for value in ('>=2.6', '>= 2.6, <3', '!= 1.0', '<1.0a1',
                      ' >=1.0 '):
            self.assertEqual(value, _props(img_hv_requested_version=value)[
                'img_hv_requested_version'])
        for value in ('2.6', '>=abc', '', '>=1.0,', '=>1.0', '>=1.*'):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              img_hv_requested_version=value)

    def test_plain_enums_take_exact_values(self):
        self.assertEqual('scsi', _props(hw_disk_bus='scsi')['hw_disk_bus'])
        self.assertEqual('mixed',
                         _props(hw_cpu_policy='mixed')['hw_cpu_policy'])
        for field, value in (('hw_disk_bus', 'SCSI'),
                             ('hw_disk_bus', ' scsi'),
                             ('hw_cpu_policy', 'Dedicated'),
                             ('hw_video_model', 'foo'),
                             ('img_signature_hash_method', 'sha-256'),
                             ('hw_watchdog_action', '')):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              **{field: value})

    def test_canonicalised_enums(self):
        for field, value, expected in (
                ('hw_architecture', 'AMD64', 'x86_64'),
                ('hw_architecture', 'i386', 'i686'),
                ('hw_emulation_architecture', 'x86_32p', 'i686'),
                ('hw_architecture', 'AArch64', 'aarch64'),
                ('img_hv_type', 'XAPI', 'xen'),
                ('img_hv_type', 'QEMU', 'qemu'),
                ('hw_vm_mode', 'pv', 'xen'),
                ('hw_vm_mode', 'HV', 'hvm'),
                ('hw_vm_mode', 'baremetal', 'hvm'),
                ('os_type', 'Windows', 'windows'),
                ('hw_scsi_model', 'lsilogicsas', 'lsisas1068'),
                ('hw_scsi_model', 'Paravirtual', 'vmpvscsi'),
                ('hw_scsi_model', 'LsiLogic', 'lsilogic'),
                ('hw_vif_model', 'VirtualE1000', 'e1000'),
                ('hw_vif_model', 'virtualvmxnet3', 'vmxnet3'),
                ('hw_vif_model', 'E1000E', 'e1000e')):
            self.assertEqual(expected, _props(**{field: value})[field])
        for field, value in (('hw_architecture', 'x86'),
                             ('hw_architecture', ' x86_64'),
                             ('img_hv_type', 'esx'),
                             ('os_type', 'bsd')):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              **{field: value})

    def test_lists_of_dicts_cannot_come_from_strings(self):
        self.assertRaises(image_fields.ImageMetaError, _props,
                          img_mappings='[{"virtual": "root"}]')
        self.assertEqual(
            {'img_block_device_mapping': [{'device_name': 'vda',
                                           'size': '1', 'x': None}]},
            _props(img_block_device_mapping=[
                {'device_name': 'vda', 'size': 1, 'x': None}]))

    def test_none_for_a_known_field_raises(self):
        self.assertRaises(image_fields.ImageMetaError, _props,
                          hw_disk_bus=None)
        self.assertRaises(image_fields.ImageMetaError, _props,
                          hw_qemu_guest_agent=None)

    def test_unknown_keys_are_ignored(self):
        self.assertEqual({}, _props(stores='rbd', base_image_ref=REF,
                                    owner_user_name='demo', hw_disk='x',
                                    traits_required='CUSTOM_A',
                                    hw_numa_cpus='0-1'))


class LegacyNameTest(testtools.TestCase):

    def test_legacy_names_map_to_current_fields(self):
        self.assertEqual(
            {'hw_architecture': 'x86_64', 'img_hv_type': 'xen',
             'hw_vm_mode': 'hvm', 'hw_auto_disk_config': 'False',
             'img_version': 2, 'img_use_agent': True,
             'img_hv_requested_version': '>=6.0',
             'img_root_device_name': '/dev/vda', 'os_distro': 'windows9'},
            _props(architecture='amd64', hypervisor_type='xapi',
                   vm_mode='hv', auto_disk_config='False',
                   vmware_image_version='2', xenapi_use_agent='true',
                   hypervisor_version_requires='>=6.0',
                   root_device_name='/dev/vda', vmware_ostype='windows9'))

    def test_current_name_wins(self):
        self.assertEqual(
            {'hw_architecture': 'aarch64', 'hw_vm_mode': 'exe'},
            _props(architecture='x86_64', hw_architecture='aarch64',
                   hw_vm_mode='exe', vm_mode='xen'))

    def test_invalid_legacy_value_raises_even_when_overridden(self):
        self.assertRaises(image_fields.ImageMetaError, _props,
                          architecture='pdp11', hw_architecture='x86_64')
        self.assertRaises(image_fields.ImageMetaError, _props,
                          vmware_image_version='two', img_version='2')

    def test_vmware_adapter_type(self):
        self.assertEqual({'hw_disk_bus': 'ide'},
                         _props(vmware_adaptertype='ide'))
        self.assertEqual({'hw_disk_bus': 'scsi',
                          'hw_scsi_model': 'lsisas1068'},
                         _props(vmware_adaptertype='lsiLogicsas'))
        self.assertEqual({}, _props(vmware_adaptertype=''))
        # Only exactly 'ide' means IDE; anything else is a SCSI model.
        self.assertRaises(image_fields.ImageMetaError, _props,
                          vmware_adaptertype='IDE')
        self.assertEqual({'hw_disk_bus': 'sata',
                          'hw_scsi_model': 'buslogic'},
                         _props(vmware_adaptertype='busLogic',
                                hw_disk_bus='sata'))


class TraitTest(testtools.TestCase):

    def test_required_traits_in_order(self):
        raw = {'trait:CUSTOM_B': 'required', 'trait:CUSTOM_A': 'required',
               'trait:CUSTOM_C': 'forbidden', 'trait:CUSTOM_D': 'Required',
               'trait:CUSTOM_E': ' required', 'trait:': 'required',
               'Trait:CUSTOM_F': 'required', 'trait:CUSTOM_G': None}
        self.assertEqual({'traits_required': ['CUSTOM_B', 'CUSTOM_A', '']},
                         image.props_from_strings(raw))

    def test_no_required_trait_leaves_the_field_unset(self):
        self.assertEqual({}, _props(**{'trait:CUSTOM_A': 'forbidden'}))


class NumaTest(testtools.TestCase):

    def test_cells_collected_until_the_first_gap(self):
        raw = {'hw_numa_cpus.0': '0-1', 'hw_numa_cpus.1': '2,3',
               'hw_numa_cpus.3': '5', 'hw_numa_mem.0': '512',
               'hw_numa_mem.1': ' 1024 ', 'hw_numa_mem.2': '64'}
        self.assertEqual({'hw_numa_cpus': [{0, 1}, {2, 3}],
                          'hw_numa_mem': [512, 1024, 64]},
                         image.props_from_strings(raw))

    def test_no_cell_zero_means_unset(self):
        self.assertEqual({}, _props(**{'hw_numa_cpus.1': '0',
                                       'hw_numa_mem.1': 'x',
                                       'hw_numa_mem.00': '1'}))

    def test_at_most_128_cells(self):
        raw = {'hw_numa_mem.%d' % i: str(i) for i in range(129)}
        raw['hw_numa_mem.128'] = 'not read'
        self.assertEqual(list(range(128)),
                         image.props_from_strings(raw)['hw_numa_mem'])

    def test_cpu_specs(self):
        for spec, expected in (('0-3,^2', {0, 1, 3}), (' 1 - 2 ', {1, 2}),
                               ('1,,2', {1, 2}), ('^1', set()),
                               ('0-2,^0-1', {2}), ('', set()),
                               ('4-4', {4}), ('0-7,^3-4,9',
                                              {0, 1, 2, 5, 6, 7, 9})):
            self.assertEqual([expected], _props(**{
                'hw_numa_cpus.0': spec})['hw_numa_cpus'], spec)
        for spec in ('3-1', 'a', '^', '1-', '-1', '^-1', '1-2-3', '^ x'):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              **{'hw_numa_cpus.0': spec})

    def test_cell_sets_iterate_as_novas(self):
        # Nova 34 stores [11, 1, 2, 3] for '11,1-3' and so reports the
        # vCPU out of range before the duplicate; the flavor form of the
        # same layout (a set used as parsed) reports the duplicate.
        layout = {'hw_numa_nodes': '2', 'hw_numa_cpus.0': '0-1',
                  'hw_numa_cpus.1': '11,1-3', 'hw_numa_mem.0': '1024',
                  'hw_numa_mem.1': '1024'}
        props = _props(**layout)
        self.assertEqual([11, 1, 2, 3], list(props['hw_numa_cpus'][1]))
        exc = self.assertRaises(numa.ConstraintError,
                                numa_constraints.constraints, 4, 2048,
                                {}, props)
        self.assertEqual('ImageNUMATopologyCPUOutOfRange', exc.nova_exception)
        specs = {key.replace('hw_', 'hw:'): value
                 for key, value in layout.items()}
        exc = self.assertRaises(numa.ConstraintError,
                                numa_constraints.constraints, 4, 2048,
                                specs, {})
        self.assertEqual('ImageNUMATopologyCPUDuplicates', exc.nova_exception)

    def test_invalid_cell_raises_even_after_a_valid_one(self):
        self.assertRaises(image_fields.ImageMetaError, _props,
                          **{'hw_numa_mem.0': '512', 'hw_numa_mem.1': 'x'})

    def test_absurdly_wide_cpu_ranges_are_refused(self):
        # Nova would expand them and can run out of memory instead.
        for spec in ('0-99999999999', '0-600000,^600001-1200000'):
            self.assertRaises(image_fields.ImageMetaError, _props,
                              **{'hw_numa_cpus.0': spec})
        self.assertEqual(100000, len(_props(**{
            'hw_numa_cpus.0': '0-99999'})['hw_numa_cpus'][0]))


class FromSystemMetadataTest(testtools.TestCase):

    def test_example_instance(self):
        derived = image.image_from_system_metadata(_sysmeta(), REF)
        self.assertEqual(
            {'id': REF, 'min_ram': 512, 'min_disk': 40, 'disk_format': 'raw',
             'container_format': 'bare',
             'properties': {
                 'hw_architecture': 'x86_64',
                 'hw_cpu_thread_policy': 'prefer', 'hw_disk_bus': 'scsi',
                 'hw_firmware_type': 'uefi', 'hw_machine_type': 'q35',
                 'hw_mem_page_size': '2048', 'hw_qemu_guest_agent': True,
                 'hw_scsi_model': 'virtio-scsi', 'os_distro': 'ubuntu',
                 'os_require_quiesce': True, 'os_type': 'linux',
                 'traits_required': ['CUSTOM_SSD']}},
            derived)

    def test_id_only_for_a_non_empty_image_ref(self):
        for ref in ('', None):
            derived = image.image_from_system_metadata({}, ref)
            self.assertEqual({'properties': {}}, derived)
        self.assertEqual('not-a-uuid', image.image_from_system_metadata(
            {}, 'not-a-uuid')['id'])

    def test_inheritable_and_skipped_keys(self):
        sysmeta = {'image_min_ram': '0', 'min_disk': '5',
                   'image_disk_format': '', 'image_container_format': None,
                   'image_mappings': 'not json', 'block_device_mapping': '[',
                   'image_img_mappings': 'x',
                   'image_img_block_device_mapping': 'y'}
        self.assertEqual({'min_ram': 0, 'min_disk': 5, 'disk_format': '',
                          'properties': {}},
                         image.image_from_system_metadata(sysmeta, None))

    def test_later_key_wins_when_prefixed_and_bare_collide(self):
        self.assertEqual(
            {'min_ram': 2, 'properties': {'hw_disk_bus': 'ide'}},
            image.image_from_system_metadata(
                {'image_min_ram': '1', 'min_ram': '2',
                 'image_hw_disk_bus': 'sata', 'hw_disk_bus': 'ide'}, ''))

    def test_none_values_are_skipped(self):
        self.assertEqual({'properties': {}}, image.image_from_system_metadata(
            {'image_hw_disk_bus': None, 'image_min_ram': None}, None))

    def test_invalid_values_raise(self):
        for sysmeta in ({'image_min_ram': 'lots'}, {'image_min_disk': ''},
                        {'image_hw_disk_bus': 'foo'},
                        {'hw_cpu_policy': 'Shared'},
                        {'image_architecture': 'pdp11'}):
            self.assertRaises(image_fields.ImageMetaError,
                              image.image_from_system_metadata, sysmeta, REF)

    def test_records_are_not_modified(self):
        sysmeta = _sysmeta()
        sysmeta['image_hw_numa_mem.0'] = '512'
        before = copy.deepcopy(sysmeta)
        image.image_from_system_metadata(sysmeta, REF)
        self.assertEqual(before, sysmeta)


class ToPrimitiveTest(testtools.TestCase):

    def test_latest_version_keeps_everything(self):
        props = {'hw_numa_cpus': [{3, 1}, {2}], 'hw_cpu_policy': 'mixed',
                 'traits_required': ['A'], 'hw_qemu_guest_agent': True}
        document = image_primitive.props_to_primitive(props, '1.44')
        self.assertEqual(
            {'nova_object.name': 'ImageMetaProps',
             'nova_object.namespace': 'nova', 'nova_object.version': '1.44',
             'nova_object.data': {'hw_cpu_policy': 'mixed',
                                  'hw_numa_cpus': [[1, 3], [2]],
                                  'hw_qemu_guest_agent': True,
                                  'traits_required': ['A']}},
            document)
        # Field order follows Nova's declaration order.
        self.assertEqual(['hw_cpu_policy', 'hw_numa_cpus',
                          'hw_qemu_guest_agent', 'traits_required'],
                         list(document[primitive.DATA]))

    def test_fields_newer_than_the_target_are_dropped(self):
        props = {'hw_mem_encryption_model': 'amd-sev', 'hw_pmu': True,
                 'traits_required': ['A'], 'hw_disk_bus': 'virtio',
                 'hw_sound_model': 'ich9'}
        self.assertEqual({'hw_disk_bus': 'virtio', 'hw_pmu': True,
                          'traits_required': ['A']},
                         image_primitive.props_to_primitive(props, '1.39')[
                             primitive.DATA])
        self.assertEqual({'hw_disk_bus': 'virtio'},
                         image_primitive.props_to_primitive(props, '1.19')[
                             primitive.DATA])

    def test_signature_fields_are_kept_below_1_12(self):
        props = {'img_signature': 'c2ln', 'os_secure_boot': 'required'}
        self.assertEqual({'img_signature': 'c2ln'},
                         image_primitive.props_to_primitive(props, '1.11')[
                             primitive.DATA])

    def test_disabled_watchdog_is_dropped_below_1_16(self):
        for action, expected in (('disabled', {}),
                                 ('reset', {'hw_watchdog_action': 'reset'})):
            self.assertEqual(expected, image_primitive.props_to_primitive(
                {'hw_watchdog_action': action}, '1.15')[primitive.DATA])
        self.assertEqual({'hw_watchdog_action': 'disabled'},
                         image_primitive.props_to_primitive(
                             {'hw_watchdog_action': 'disabled'}, '1.16')[
                                 primitive.DATA])

    def test_values_too_new_for_the_target_raise(self):
        for field, value, first in (
                ('hw_cpu_policy', 'mixed', 26),
                ('hw_video_model', 'bochs', 30),
                ('hw_video_model', 'gop', 22),
                ('hw_vif_model', 'igb', 39),
                ('hw_pci_numa_affinity_policy', 'socket', 28),
                ('hw_mem_encryption_model', 'intel-tdx', 44),
                ('hw_mem_encryption_model', 'amd-sev-snp', 43),
                ('hw_disk_bus', 'uml', 6)):
            props = {field: value}
            image_primitive.props_to_primitive(props, '1.%d' % first)
            self.assertRaises(image_fields.ImageMetaError,
                              image_primitive.props_to_primitive, props,
                              '1.%d' % (first - 1))
        # Checked before the field itself is dropped, as Nova does.
        self.assertRaises(image_fields.ImageMetaError,
                          image_primitive.props_to_primitive,
                          {'hw_pci_numa_affinity_policy': 'socket'}, '1.20')
        self.assertEqual({}, image_primitive.props_to_primitive(
            {'hw_pci_numa_affinity_policy': 'preferred'}, '1.20')[
                primitive.DATA])

    def test_unknown_versions_and_fields_raise(self):
        for version in ('1.45', '2.0', '1', 'x'):
            self.assertRaises(image_fields.ImageMetaError,
                              image_primitive.props_to_primitive, {}, version)
        self.assertRaises(image_fields.ImageMetaError,
                          image_primitive.props_to_primitive,
                          {'hw_bogus': 1}, '1.44')

    def test_image_primitive_round_trip(self):
        stored = json.loads(json.dumps(_stored_image()))
        parsed = image_primitive.image_from_primitive(stored, 'spec.image')
        written = image_primitive.image_to_primitive(parsed, '1.8', '1.44')
        self.assertEqual(
            json.loads(json.dumps(written)),
            {k: v for k, v in stored.items() if k != primitive.CHANGES}
            | {primitive.DATA: dict(
                stored[primitive.DATA],
                properties={k: v for k, v in stored[primitive.DATA][
                    'properties'].items() if k != primitive.CHANGES})})

    def test_image_properties_written_at_the_props_version(self):
        derived = image.image_from_system_metadata(
            {'image_hw_time_hpet': 'yes', 'image_hw_pmu': 'no'}, REF)
        written = image_primitive.image_to_primitive(derived, '1.8', '1.21')
        self.assertEqual({'hw_time_hpet': True},
                         written[primitive.DATA]['properties'][
                             primitive.DATA])
        self.assertEqual('1.21', written[primitive.DATA]['properties'][
            primitive.VERSION])


class FromPrimitiveTest(testtools.TestCase):

    def test_stored_example(self):
        parsed = image_primitive.image_from_primitive(
            _stored_image(), 'spec.image')
        self.assertEqual('ubuntu-24.04-server', parsed['name'])
        self.assertEqual('2025-09-01T10:00:00Z', parsed['created_at'])
        self.assertEqual(['CUSTOM_SSD'],
                         parsed['properties']['traits_required'])
        self.assertIs(True, parsed['properties']['hw_qemu_guest_agent'])

    def test_props_round_trip_to_sets(self):
        props = {'hw_numa_cpus': [{0, 1}, {2}], 'hw_numa_mem': [512, 512],
                 'img_mappings': [{'virtual': 'root', 'device': None}],
                 'hw_cpu_cores': 2, 'os_type': 'linux'}
        document = json.loads(json.dumps(
            image_primitive.props_to_primitive(props, '1.44')))
        self.assertEqual(
            props, image_primitive.props_from_primitive(document, 'p'))

    def test_unknown_keys_ignored_and_invalid_enum_kept(self):
        document = image_primitive.props_to_primitive(
            {'hw_disk_bus': 'ide'}, '1.44')
        document[primitive.DATA].update(hw_future='x', hw_video_model='vga2')
        self.assertEqual({'hw_disk_bus': 'ide', 'hw_video_model': 'vga2'},
                         image_primitive.props_from_primitive(document, 'p'))

    def test_malformed_props(self):
        good = image_primitive.props_to_primitive({}, '1.44')
        for change in ({'hw_cpu_cores': '2'}, {'hw_cpu_cores': True},
                       {'hw_pmu': 'yes'}, {'hw_disk_bus': None},
                       {'hw_numa_cpus': [[0, 'x']]}, {'hw_numa_cpus': [1]},
                       {'traits_required': 'CUSTOM_A'},
                       {'img_mappings': [{'a': 1}]}):
            document = copy.deepcopy(good)
            document[primitive.DATA].update(change)
            self.assertRaises(primitive.PrimitiveError,
                              image_primitive.props_from_primitive,
                              document, 'p')
        for envelope in ({primitive.NAME: 'ImageMeta'},
                         {primitive.VERSION: '1.45'},
                         {primitive.VERSION: '2.0'},
                         {primitive.DATA: None}):
            document = dict(good, **envelope)
            self.assertRaises(primitive.PrimitiveError,
                              image_primitive.props_from_primitive,
                              document, 'p')

    def test_hostile_documents_raise_primitive_errors(self):
        deep = []
        for _ in range(5000):
            deep = [deep]
        good = image_primitive.props_to_primitive({}, '1.44')
        for document in (dict(good, **{primitive.VERSION: '1.' + '9' * 5000}),
                         dict(good, **{primitive.VERSION: deep}),
                         dict(good, **{primitive.DATA: {
                             'hw_vif_model': deep}})):
            exc = self.assertRaises(primitive.PrimitiveError,
                                    image_primitive.props_from_primitive,
                                    document, 'p')
            self.assertLess(len(str(exc)), 200)

    def test_errors_show_values_briefly(self):
        exc = self.assertRaises(image_fields.ImageMetaError, _props,
                                hw_disk_bus='x' * 1000)
        self.assertLess(len(str(exc)), 200)

    def test_malformed_image(self):
        for change in ({'min_ram': '512'}, {'name': None},
                       {'tags': 'a'}, {'protected': 'no'},
                       {'created_at': 5}, {'properties': {}}):
            document = _stored_image()
            document[primitive.DATA].update(change)
            self.assertRaises(primitive.PrimitiveError,
                              image_primitive.image_from_primitive,
                              document, 'i')
        document = _stored_image()
        document[primitive.VERSION] = '1.9'
        self.assertRaises(primitive.PrimitiveError,
                          image_primitive.image_from_primitive,
                          document, 'i')


class CompareTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.stored = image_primitive.image_from_primitive(
            _stored_image(), 'image')
        self.derived = image.image_from_system_metadata(_sysmeta(), REF)

    def test_example_agrees(self):
        # min_disk 10 vs 40 and the Glance-only fields are not compared.
        self.assertEqual([], image.differing_fields(self.stored,
                                                    self.derived))

    def test_differences_are_named(self):
        sysmeta = _sysmeta()
        sysmeta.update(image_hw_disk_bus='virtio', image_min_ram='1024',
                       image_hw_pmu='yes')
        del sysmeta['image_os_type']
        derived = image.image_from_system_metadata(sysmeta, OTHER_REF)
        names = image.differing_fields(self.stored, derived)
        self.assertEqual(['id', 'min_ram', 'properties.hw_disk_bus',
                          'properties.hw_pmu', 'properties.os_type'], names)

    def test_id_compared_only_when_derived_has_one(self):
        derived = image.image_from_system_metadata(_sysmeta(), '')
        self.assertEqual([], image.differing_fields(self.stored, derived))
        stored = dict(self.stored)
        del stored['id']
        self.assertEqual(['id'], image.differing_fields(stored,
                                                        self.derived))

    def test_block_device_mappings_are_not_compared(self):
        # Glance gives them to the boot-time spec; system metadata skips
        # them, so no derived image has them.
        self.stored['properties'].update(
            img_block_device_mapping=[{'boot_index': '0'}],
            img_mappings=[{'virtual': 'root', 'device': 'vda'}])
        self.assertEqual([], image.differing_fields(self.stored,
                                                    self.derived))

    def test_formats_compared_with_absence(self):
        sysmeta = _sysmeta()
        del sysmeta['image_disk_format']
        derived = image.image_from_system_metadata(sysmeta, REF)
        self.assertEqual(['disk_format'],
                         image.differing_fields(self.stored, derived))

    def test_truncated_strings_are_equal(self):
        long_value = 'k' * 253 + '\u00e9\u00e9'
        truncated = image.truncate_utf8(long_value)
        self.assertEqual('k' * 253 + '\u00e9', truncated)
        self.assertEqual(255, len(truncated.encode('utf-8')))
        self.stored['properties']['os_command_line'] = long_value
        self.derived['properties']['os_command_line'] = truncated
        self.assertEqual([], image.differing_fields(self.stored,
                                                    self.derived))
        self.derived['properties']['os_command_line'] = truncated[:-1]
        self.assertEqual(['properties.os_command_line'],
                         image.differing_fields(self.stored, self.derived))
        # Cut inside a two-byte character: the whole character goes.
        self.assertEqual('k' * 254, image.truncate_utf8('k' * 254 + '\u00e9'))


class DerivationItemsTest(testtools.TestCase):
    """The items that key the image memo decide the derived image."""

    POOL = [
        ('image_hw_cpu_policy', 'dedicated'), ('image_hw_disk_bus', 'scsi'),
        ('image_hw_scsi_model', 'virtio-scsi'), ('image_os_distro', 'ubuntu'),
        ('image_hw_video_model', 'qxl'), ('image_min_ram', '512'),
        ('image_min_disk', '20'), ('image_disk_format', 'qcow2'),
        ('image_container_format', 'bare'), ('image_base_image_ref', 'x'),
        ('image_architecture', 'x86_64'), ('image_hypervisor_type', 'kvm'),
        ('image_hw_numa_nodes', '2'), ('image_hw_numa_cpus.0', '0-1'),
        ('image_hw_numa_cpus.1', '2-3'), ('image_hw_numa_mem.0', '1024'),
        ('image_hw_numa_mem.1', '1024'), ('image_trait:CUSTOM_A', 'required'),
        ('image_vmware_adaptertype', 'lsiLogic'),
        ('image_vmware_ostype', 'otherGuest'), ('image_mappings', '[]'),
        ('image_hw_cpu_policy', 'bogus'), ('hw_cpu_policy', 'shared'),
        ('image_img_config_drive', 'mandatory'), ('image_hw_machine_type',
                                                  'q35'),
        ('owner_user_name', 'alice'), ('owner_project_name', 'p1'),
        ('boot_roles', 'member,reader'), ('clean_attempts', '1'),
        ('image_hw_mem_page_size', 'large'), ('image_owner_specified.x', 'y'),
        ('image_hw_numa_mem.0', 'lots'), ('image_signature', None),
    ]

    def derive(self, sysmeta, release):
        try:
            return image.image_from_system_metadata(sysmeta, 'ref', release)
        except image_fields.ImageMetaError as exc:
            return ('error', str(exc))

    def test_per_user_records_are_left_out(self):
        alice = {'image_hw_disk_bus': 'scsi', 'owner_user_name': 'alice',
                 'owner_project_name': 'p1', 'boot_roles': 'member'}
        bob = dict(alice, owner_user_name='bob', owner_project_name='p2',
                   boot_roles='admin')
        self.assertEqual(image.derivation_items(alice),
                         image.derivation_items(bob))
        self.assertEqual((('image_hw_disk_bus', 'scsi'),),
                         image.derivation_items(alice))
        other = dict(alice, image_hw_disk_bus='ide')
        self.assertNotEqual(image.derivation_items(alice),
                            image.derivation_items(other))

    def test_values_that_are_not_text_keep_every_item(self):
        self.assertIsNone(image.derivation_items({'owner_user_name': 5}))
        self.assertIsNone(image.derivation_items({1: 'x'}))

    def test_the_items_derive_the_same_image_as_the_whole(self):
        # In key order, as the memo derives (where a name is there with
        # and without the image_ prefix, the order decides which wins).
        chooser = random.Random(20261202)
        for trial in range(400):
            sysmeta = dict(sorted(
                chooser.sample(self.POOL, chooser.randint(0, 12))))
            items = image.derivation_items(sysmeta)
            for release in releases.RELEASES:
                self.assertEqual(self.derive(sysmeta, release),
                                 self.derive(dict(items), release),
                                 (trial, sysmeta, release.label))
