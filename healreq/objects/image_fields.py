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


"""What Nova's ImageMeta and ImageMetaProps are: their fields and kinds.

The field table of Nova 34.0.0 (ImageMeta 1.8, ImageMetaProps 1.44): the
object names, each field's kind and the version that added it, the valid
enum values and the values newer versions added, the legacy property
names, and the system metadata keys that image properties are kept
under; known_properties gives the fields an older release knows. Also
ImageMetaError, the refusal that any of Nova's image rules can give.
"""

import functools

IMAGE_NAME = 'ImageMeta'
PROPS_NAME = 'ImageMetaProps'


class ImageMetaError(ValueError):
    """Nova's ImageMeta.from_instance would raise for these records."""


# Field kinds. Every other kind is an enum named in ENUM_VALUES.
BOOLEAN = 'flexible_boolean'
INTEGER = 'integer'
STRING = 'string'
UUID = 'uuid'
VERSION_PREDICATE = 'version_predicate'
STRING_LIST = 'list_of_strings'
INTEGER_LIST = 'list_of_integers'
INTEGER_SET_LIST = 'list_of_sets_of_integers'
DICT_LIST = 'list_of_dicts_of_nullable_strings'

_ARCHITECTURES = (
    'alpha', 'armv6', 'armv7l', 'armv7b', 'aarch64', 'cris', 'i686', 'ia64',
    'lm32', 'm68k', 'microblaze', 'microblazeel', 'mips', 'mipsel',
    'mips64', 'mips64el', 'openrisc', 'parisc', 'parisc64', 'ppc', 'ppcle',
    'ppc64', 'ppc64le', 'ppcemb', 's390', 's390x', 'sh4', 'sh4eb', 'sparc',
    'sparc64', 'unicore32', 'x86_64', 'xtensa', 'xtensaeb')

# Valid values of each enum kind (nova/objects/fields.py, Nova 34.0.0).
ENUM_VALUES = {
    'architecture': _ARCHITECTURES,
    'block_device_encryption_format': ('plain', 'luks', 'luksv2'),
    'block_device_type': ('cdrom', 'disk', 'floppy', 'fs', 'lun'),
    'config_drive_policy': ('optional', 'mandatory'),
    'cpu_allocation_policy': ('dedicated', 'shared', 'mixed'),
    'cpu_thread_allocation_policy': ('prefer', 'isolate', 'require'),
    'disk_bus': ('fdc', 'ide', 'sata', 'scsi', 'usb', 'virtio', 'xen', 'lxc',
                 'uml'),
    'firmware_type': ('uefi', 'bios'),
    'hv_type': ('baremetal', 'bhyve', 'docker', 'fake', 'hyperv', 'ironic',
                'kqemu', 'kvm', 'lxc', 'lxd', 'openvz', 'parallels', 'phyp',
                'qemu', 'test', 'uml', 'vbox', 'vz', 'vmware', 'xen', 'zvm',
                'prsm'),
    'image_signature_hash_type': ('SHA-224', 'SHA-256', 'SHA-384',
                                  'SHA-512'),
    'image_signature_key_type': ('DSA', 'ECC_SECP384R1', 'ECC_SECP521R1',
                                 'ECC_SECT409K1', 'ECC_SECT409R1',
                                 'ECC_SECT571K1', 'ECC_SECT571R1', 'RSA-PSS'),
    'input_bus': ('usb', 'virtio'),
    'max_phys_addr_mode': ('passthrough', 'emulate'),
    'mem_encryption_model': ('amd-sev', 'amd-sev-es', 'amd-sev-snp',
                             'intel-tdx'),
    'os_type': ('linux', 'windows'),
    'pci_numa_affinity_policy': ('required', 'legacy', 'preferred',
                                 'socket'),
    'pointer_model': ('usbtablet',),
    'rng_model': ('virtio',),
    'scsi_model': ('buslogic', 'ibmvscsi', 'lsilogic', 'lsisas1068',
                   'lsisas1078', 'virtio-scsi', 'vmpvscsi'),
    'secure_boot': ('required', 'disabled', 'optional'),
    'sound_model': ('sb16', 'es1370', 'pcspk', 'ac97', 'ich6', 'ich9', 'usb',
                    'virtio'),
    'tpm_model': ('tpm-tis', 'tpm-crb'),
    'tpm_version': ('1.2', '2.0'),
    'usb_controller_model': ('none', 'nec-xhci', 'qemu-xhci'),
    'video_model': ('cirrus', 'qxl', 'vga', 'vmvga', 'xen', 'virtio', 'gop',
                    'none', 'bochs'),
    'vif_model': ('virtio', 'ne2k_pci', 'pcnet', 'rtl8139', 'e1000',
                  'e1000e', 'netfront', 'spapr-vlan', 'lan9118', 'sriov',
                  'vmxnet', 'vmxnet3', 'igb'),
    'viommu_model': ('intel', 'smmuv3', 'virtio', 'auto'),
    'vm_mode': ('hvm', 'xen', 'uml', 'exe'),
    'watchdog_action': ('none', 'pause', 'poweroff', 'reset', 'disabled'),
}

_V1_0 = (1, 0)

# ImageMetaProps 1.44 fields in Nova's declaration order (the order
# obj_to_primitive writes them): name -> (kind, version added).
PROPS_FIELDS = dict([
    ('hw_architecture', ('architecture', _V1_0)),
    ('hw_emulation_architecture', ('architecture', (1, 31))),
    ('hw_auto_disk_config', (STRING, _V1_0)),
    ('hw_boot_menu', (BOOLEAN, _V1_0)),
    ('hw_cdrom_bus', ('disk_bus', _V1_0)),
    ('hw_cpu_cores', (INTEGER, _V1_0)),
    ('hw_cpu_sockets', (INTEGER, _V1_0)),
    ('hw_cpu_max_cores', (INTEGER, _V1_0)),
    ('hw_cpu_max_sockets', (INTEGER, _V1_0)),
    ('hw_cpu_max_threads', (INTEGER, _V1_0)),
    ('hw_cpu_policy', ('cpu_allocation_policy', _V1_0)),
    ('hw_cpu_thread_policy', ('cpu_thread_allocation_policy', (1, 9))),
    ('hw_cpu_realtime_mask', (STRING, (1, 10))),
    ('hw_cpu_threads', (INTEGER, _V1_0)),
    ('hw_device_id', (INTEGER, _V1_0)),
    ('hw_disk_bus', ('disk_bus', _V1_0)),
    ('hw_disk_type', (STRING, _V1_0)),
    ('hw_floppy_bus', ('disk_bus', _V1_0)),
    ('hw_firmware_type', ('firmware_type', (1, 11))),
    ('hw_firmware_stateless', (BOOLEAN, (1, 38))),
    ('hw_input_bus', ('input_bus', (1, 29))),
    ('hw_ipxe_boot', (BOOLEAN, _V1_0)),
    ('hw_locked_memory', (BOOLEAN, (1, 33))),
    ('hw_machine_type', (STRING, _V1_0)),
    ('hw_mem_encryption', (BOOLEAN, (1, 24))),
    ('hw_mem_encryption_model', ('mem_encryption_model', (1, 42))),
    ('hw_mem_page_size', (STRING, _V1_0)),
    ('hw_numa_nodes', (INTEGER, _V1_0)),
    ('hw_numa_cpus', (INTEGER_SET_LIST, _V1_0)),
    ('hw_numa_mem', (INTEGER_LIST, _V1_0)),
    ('hw_pci_numa_affinity_policy', ('pci_numa_affinity_policy', (1, 25))),
    ('hw_pointer_model', ('pointer_model', (1, 14))),
    ('hw_pmu', (BOOLEAN, (1, 23))),
    ('hw_qemu_guest_agent', (BOOLEAN, _V1_0)),
    ('hw_rescue_bus', ('disk_bus', (1, 15))),
    ('hw_rescue_device', ('block_device_type', (1, 15))),
    ('hw_rng_model', ('rng_model', _V1_0)),
    ('hw_time_hpet', (BOOLEAN, (1, 21))),
    ('hw_serial_port_count', (INTEGER, _V1_0)),
    ('hw_scsi_model', ('scsi_model', _V1_0)),
    ('hw_video_model', ('video_model', _V1_0)),
    ('hw_video_ram', (INTEGER, _V1_0)),
    ('hw_vif_model', ('vif_model', _V1_0)),
    ('hw_viommu_model', ('viommu_model', (1, 34))),
    ('hw_vm_mode', ('vm_mode', _V1_0)),
    ('hw_watchdog_action', ('watchdog_action', _V1_0)),
    ('hw_vif_multiqueue_enabled', (BOOLEAN, (1, 4))),
    ('hw_tpm_model', ('tpm_model', (1, 27))),
    ('hw_tpm_version', ('tpm_version', (1, 27))),
    ('hw_ephemeral_encryption', (BOOLEAN, (1, 32))),
    ('hw_ephemeral_encryption_format',
     ('block_device_encryption_format', (1, 32))),
    ('hw_ephemeral_encryption_secret_uuid', (UUID, (1, 37))),
    ('hw_virtio_packed_ring', (BOOLEAN, (1, 35))),
    ('hw_maxphysaddr_mode', ('max_phys_addr_mode', (1, 36))),
    ('hw_maxphysaddr_bits', (INTEGER, (1, 36))),
    ('hw_sound_model', ('sound_model', (1, 40))),
    ('hw_usb_model', ('usb_controller_model', (1, 41))),
    ('hw_redirected_usb_ports', (INTEGER, (1, 41))),
    ('img_bittorrent', (BOOLEAN, _V1_0)),
    ('img_bdm_v2', (BOOLEAN, _V1_0)),
    ('img_block_device_mapping', (DICT_LIST, _V1_0)),
    ('img_cache_in_nova', (BOOLEAN, _V1_0)),
    ('img_compression_level', (INTEGER, _V1_0)),
    ('img_hv_requested_version', (VERSION_PREDICATE, (1, 2))),
    ('img_hv_type', ('hv_type', (1, 2))),
    ('img_config_drive', ('config_drive_policy', (1, 7))),
    ('img_linked_clone', (BOOLEAN, _V1_0)),
    ('img_mappings', (DICT_LIST, _V1_0)),
    ('img_owner_id', (STRING, _V1_0)),
    ('img_root_device_name', (STRING, _V1_0)),
    ('img_use_agent', (BOOLEAN, _V1_0)),
    ('img_version', (INTEGER, _V1_0)),
    ('img_signature', (STRING, (1, 12))),
    ('img_signature_hash_method', ('image_signature_hash_type', (1, 12))),
    ('img_signature_certificate_uuid', (UUID, (1, 12))),
    ('img_signature_key_type', ('image_signature_key_type', (1, 12))),
    ('img_hide_hypervisor_id', (BOOLEAN, (1, 19))),
    ('os_admin_user', (STRING, (1, 5))),
    ('os_command_line', (STRING, _V1_0)),
    ('os_distro', (STRING, _V1_0)),
    ('os_require_quiesce', (BOOLEAN, (1, 1))),
    ('os_secure_boot', ('secure_boot', (1, 13))),
    ('os_skip_agent_inject_files_at_boot', (BOOLEAN, _V1_0)),
    ('os_skip_agent_inject_ssh', (BOOLEAN, _V1_0)),
    ('os_type', ('os_type', _V1_0)),
    ('traits_required', (STRING_LIST, (1, 20))),
])

# Nova's backport never removes the 1.12 signature fields, so they stay in
# primitives for targets below 1.12 too.
KEPT_BELOW_ADDED = frozenset([
    'img_signature', 'img_signature_hash_method',
    'img_signature_certificate_uuid', 'img_signature_key_type'])

# (field, value, first version that accepts it): backporting a primitive
# holding the value to an older target fails. Nova checks these before it
# drops fields, so a value of a dropped field can still refuse.
TOO_NEW_VALUES = (
    ('hw_mem_encryption_model', 'intel-tdx', (1, 44)),
    ('hw_mem_encryption_model', 'amd-sev-snp', (1, 43)),
    ('hw_vif_model', 'igb', (1, 39)),
    ('hw_video_model', 'bochs', (1, 30)),
    ('hw_pci_numa_affinity_policy', 'socket', (1, 28)),
    ('hw_cpu_policy', 'mixed', (1, 26)),
    ('hw_video_model', 'gop', (1, 22)),
    ('hw_video_model', 'virtio', (1, 22)),
    ('hw_video_model', 'none', (1, 22)),
    ('hw_disk_bus', 'lxc', (1, 6)),
    ('hw_disk_bus', 'uml', (1, 6)),
)

# Legacy property name -> current field, applied before current names.
LEGACY_NAMES = dict([
    ('architecture', 'hw_architecture'),
    ('owner_id', 'img_owner_id'),
    ('vmware_disktype', 'hw_disk_type'),
    ('vmware_image_version', 'img_version'),
    ('vmware_ostype', 'os_distro'),
    ('auto_disk_config', 'hw_auto_disk_config'),
    ('ipxe_boot', 'hw_ipxe_boot'),
    ('xenapi_device_id', 'hw_device_id'),
    ('xenapi_image_compression_level', 'img_compression_level'),
    ('vmware_linked_clone', 'img_linked_clone'),
    ('xenapi_use_agent', 'img_use_agent'),
    ('xenapi_skip_agent_inject_ssh', 'os_skip_agent_inject_ssh'),
    ('xenapi_skip_agent_inject_files_at_boot',
     'os_skip_agent_inject_files_at_boot'),
    ('cache_in_nova', 'img_cache_in_nova'),
    ('vm_mode', 'hw_vm_mode'),
    ('bittorrent', 'img_bittorrent'),
    ('mappings', 'img_mappings'),
    ('block_device_mapping', 'img_block_device_mapping'),
    ('bdm_v2', 'img_bdm_v2'),
    ('root_device_name', 'img_root_device_name'),
    ('hypervisor_version_requires', 'img_hv_requested_version'),
    ('hypervisor_type', 'img_hv_type'),
])

TRAIT_PREFIX = 'trait:'

SM_IMAGE_PROP_PREFIX = 'image_'
SM_INHERITABLE_KEYS = ('min_ram', 'min_disk', 'disk_format',
                       'container_format')
SM_SKIP_KEYS = ('mappings', 'block_device_mapping', 'img_mappings',
                'img_block_device_mapping')
SM_VALUE_BYTES = 255

# ImageMeta 1.8 fields in declaration order: name -> kind. The timestamps
# are kept as the ISO 8601 strings the primitive holds.
IMAGE_FIELDS = dict([
    ('id', UUID), ('name', STRING), ('status', STRING),
    ('visibility', STRING), ('protected', BOOLEAN), ('checksum', STRING),
    ('owner', STRING), ('size', INTEGER), ('virtual_size', INTEGER),
    ('container_format', STRING), ('disk_format', STRING),
    ('created_at', 'datetime'), ('updated_at', 'datetime'),
    ('tags', STRING_LIST), ('direct_url', STRING), ('min_ram', INTEGER),
    ('min_disk', INTEGER), ('properties', 'object'),
])


def known_properties(release):
    """The ImageMetaProps fields ``release`` knows, in declaration order."""
    return _known_properties(release.props_version)


@functools.lru_cache(maxsize=None)
def _known_properties(props_version):
    return tuple(name for name, (kind, added) in PROPS_FIELDS.items()
                 if added <= props_version)
