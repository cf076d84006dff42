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


"""The instance's image: derivation from system metadata and primitives.

Nova rebuilds a RequestSpec's image with ``ImageMeta.from_instance``: the
``image_*`` system metadata become top-level attributes (``min_ram``,
``min_disk``, ``disk_format``, ``container_format``) or image properties,
which ``ImageMetaProps.from_dict`` maps from legacy names, coerces by
field type and validates. This module reproduces that for each supported
release: the fields Nova 34.0.0 knows (ImageMeta 1.8, ImageMetaProps
1.44), less those and the enum values an older release's ImageMetaProps
does not know yet, and its release's version-predicate grammar;
healreq.objects.image_primitive reads and writes the stored primitives.

Values are held as Nova holds them: booleans, integers, canonical enum
strings, lists of strings or integers, and ``hw_numa_cpus`` as a list of
sets of integers.
"""

import collections.abc
import datetime
import functools
import re

from oslo_utils import strutils
from oslo_utils import versionutils
from packaging import version as packaging_version

from healreq.objects import notation
from healreq.objects import primitive
from healreq import releases

PrimitiveError = primitive.PrimitiveError

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

# Enums whose coercion lower-cases the value and maps aliases before
# validating; all other enums take the value verbatim.
_ENUM_ALIASES = {
    'architecture': {'i386': 'i686', 'i486': 'i686', 'i586': 'i686',
                     'x86_32': 'i686', 'x86_32p': 'i686',
                     'amd64': 'x86_64'},
    'hv_type': {'xapi': 'xen'},
    'os_type': {},
    'scsi_model': {'lsilogicsas': 'lsisas1068',
                   'paravirtual': 'vmpvscsi'},
    'vif_model': {'virtuale1000': 'e1000', 'virtuale1000e': 'e1000e',
                  'virtualpcnet32': 'pcnet',
                  'virtualsriovethernetcard': 'sriov',
                  'virtualvmxnet': 'vmxnet', 'virtualvmxnet3': 'vmxnet3'},
    'vm_mode': {'pv': 'xen', 'hv': 'hvm', 'baremetal': 'hvm'},
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
# Parts of a derived image compared with the stored one (min_disk is
# flavor-adjusted in system metadata, so it differs by construction).
COMPARED_IMAGE_FIELDS = ('id', 'min_ram', 'disk_format', 'container_format')
# Properties system metadata never keeps (SM_SKIP_KEYS): a spec written
# from Glance may hold them, a derived image never does.
UNDERIVABLE_PROPERTIES = ('img_mappings', 'img_block_device_mapping')


def _refuse(name, value, reason):
    return ImageMetaError('image %s=%s: %s'
                          % (name, primitive.short(value), reason))


def _as_string(name, value):
    # Nova's String fields accept these types and store str(value).
    if isinstance(value, (str, int, float, datetime.datetime)):
        return str(value)
    raise _refuse(name, value, 'not a string')


def _as_int(name, value):
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _refuse(name, value, 'not an integer')


def _too_new(name, value, release):
    for field, newer, added in TOO_NEW_VALUES:
        if field == name and value == newer:
            return added > release.props_version
    return False


def _as_enum(name, kind, value, release):
    aliases = _ENUM_ALIASES.get(kind)
    if aliases is not None:
        if not isinstance(value, str):
            raise _refuse(name, value, 'not a string')
        value = value.lower()
        value = aliases.get(value, value)
    if (not isinstance(value, str) or value not in ENUM_VALUES[kind]
            or _too_new(name, value, release)):
        raise _refuse(name, value, 'not a valid %s' % kind.replace('_', ' '))
    return value


# The packaging grammar of oslo.utils' VersionPredicate, for oslo.utils
# releases before 7.4 (Zed's 6.0.2 included), which lack it.
_PREDICATE_PART = re.compile(r'^\s*(<=|>=|<|>|!=|==)\s*([^\s]+)\s*$')


def _check_packaging_predicate(value):
    predicate = getattr(versionutils, 'VersionPredicate', None)
    if predicate is not None:
        predicate(value)
        return
    for part in value.split(','):
        match = _PREDICATE_PART.match(part)
        if not match:
            raise ValueError('bad package restriction syntax: %s' % part)
        try:
            packaging_version.Version(match.group(2))
        except packaging_version.InvalidVersion as exc:
            raise ValueError(str(exc))


# distutils' VersionPredicate, which oslo.versionedobjects before 3.6
# applied to 'check (VALUE)': a package name, then a parenthesised list
# of comparisons with StrictVersion numbers (1.2, 1.2.3, 1.2a1...).
_DISTUTILS_NAME = re.compile(r'(?i)^\s*([a-z_]\w*(?:\.[a-z_]\w*)*)(.*)',
                             re.ASCII)
_DISTUTILS_PARENS = re.compile(r'^\s*\((.*)\)\s*$')
_DISTUTILS_PART = re.compile(r'^\s*(<=|>=|<|>|!=|==)\s*([^\s,]+)\s*$')
_STRICT_VERSION = re.compile(r'^(\d+) \. (\d+) (\. (\d+))? ([ab](\d+))?$',
                             re.VERBOSE | re.ASCII)


def _check_distutils_predicate(value):
    text = ('check (%s)' % value).strip()
    rest = _DISTUTILS_NAME.match(text).group(2).strip()
    if not rest:
        return
    parens = _DISTUTILS_PARENS.match(rest)
    if not parens:
        raise ValueError('expected parenthesized list: %r' % rest)
    for part in parens.group(1).split(','):
        comparison = _DISTUTILS_PART.match(part)
        if not comparison:
            raise ValueError('bad package restriction syntax: %r' % part)
        if not _STRICT_VERSION.match(comparison.group(2)):
            raise ValueError('invalid version number %r'
                             % comparison.group(2))


def _as_version_predicate(name, value, release):
    if not isinstance(value, str):
        raise _refuse(name, value, 'not a string')
    try:
        if release.version_predicates == releases.DISTUTILS:
            _check_distutils_predicate(value)
        else:
            _check_packaging_predicate(value)
    except ValueError as exc:
        raise _refuse(name, value, 'not a version predicate (%s)' % exc)
    return value


def _as_dict_list(name, value):
    if (not isinstance(value, collections.abc.Iterable)
            or isinstance(value, (str, collections.abc.Mapping))):
        raise _refuse(name, value, 'not a list')
    result = []
    for item in value:
        if not isinstance(item, dict):
            raise _refuse(name, value, 'not a list of dicts')
        entry = {}
        for key, element in item.items():
            if not isinstance(key, str):
                raise _refuse(name, value, 'has a non-string key')
            entry[key] = (None if element is None
                          else _as_string(name, element))
        result.append(entry)
    return result


def _parse_cpu_spec(name, spec):
    """CPU ids of a spec like ``0-3,^2,6`` (hardware.parse_cpu_spec)."""
    if not isinstance(spec, str):
        raise _refuse(name, spec, 'not a CPU set string')
    try:
        return _coerced_set(notation.parse_cpu_list(spec))
    except notation.NotationError as exc:
        raise _refuse(name, spec, str(exc))


def _coerced_set(values):
    """The copy of a set that ImageMetaProps' set field coercion stores.

    Its iteration order can differ from the parsed set's, and Nova's
    manual NUMA layout check reports the first fault in that order.
    """
    coerced = set()
    for value in values:
        coerced.add(value)
    stored = set()
    stored.update(coerced)
    return stored


def known_properties(release):
    """The ImageMetaProps fields ``release`` knows, in declaration order."""
    return _known_properties(release.props_version)


@functools.lru_cache(maxsize=None)
def _known_properties(props_version):
    return tuple(name for name, (kind, added) in PROPS_FIELDS.items()
                 if added <= props_version)


def coerce_property(name, value, release=releases.LATEST):
    """Coerce one value set on ImageMetaProps field ``name`` as Nova does.

    ``release`` is the Nova release whose rules apply.
    """
    kind = PROPS_FIELDS[name][0]
    if value is None:
        raise _refuse(name, value, 'cannot be None')
    if kind == BOOLEAN:
        return strutils.bool_from_string(value)
    if kind == INTEGER:
        return _as_int(name, value)
    if kind == STRING:
        return _as_string(name, value)
    if kind == UUID:
        # Nova only warns about a malformed UUID and keeps the text.
        return '%s' % (value,)
    if kind == VERSION_PREDICATE:
        return _as_version_predicate(name, value, release)
    if kind == DICT_LIST:
        return _as_dict_list(name, value)
    if kind in ENUM_VALUES:
        return _as_enum(name, kind, value, release)
    raise _refuse(name, value, 'cannot be set from a single value')


def _numbered(raw, field, parse):
    values = []
    for key, value in notation.per_node(raw, field):
        if value is None:
            raise _refuse(key, value, 'cannot be None')
        values.append(parse(key, value))
    return values


def props_from_strings(raw, release=releases.LATEST):
    """Image properties as Nova's ``ImageMetaProps.from_dict`` holds them.

    ``raw`` maps property names to the strings Glance or system metadata
    give. Legacy names are applied first so current names win;
    ``hw_numa_cpus.N``/``hw_numa_mem.N`` are read up to the first gap;
    ``trait:NAME=required`` entries form ``traits_required``; names
    ``release`` does not know are ignored. Raises ImageMetaError where
    that release's Nova raises.
    """
    props = {}
    for legacy, current in LEGACY_NAMES.items():
        if legacy in raw:
            props[current] = coerce_property(current, raw[legacy], release)
    adapter = raw.get('vmware_adaptertype')
    if adapter == 'ide':
        props['hw_disk_bus'] = 'ide'
    elif adapter:
        props['hw_disk_bus'] = 'scsi'
        props['hw_scsi_model'] = coerce_property('hw_scsi_model', adapter,
                                                 release)
    for name in known_properties(release):
        if name == 'hw_numa_cpus':
            cells = _numbered(raw, name, _parse_cpu_spec)
            if cells:
                props[name] = cells
        elif name == 'hw_numa_mem':
            cells = _numbered(raw, name, _as_int)
            if cells:
                props[name] = cells
        elif name != 'traits_required' and name in raw:
            props[name] = coerce_property(name, raw[name], release)
    traits = [str(key)[len(TRAIT_PREFIX):] for key, value in raw.items()
              if str(key).startswith(TRAIT_PREFIX)
              and str(value) == 'required']
    if traits:
        props['traits_required'] = traits
    return props


def image_from_system_metadata(sysmeta, image_ref, release=releases.LATEST):
    """The image ``ImageMeta.from_instance`` derives for an instance.

    ``sysmeta`` maps instance_system_metadata keys to values (None values
    are skipped); ``image_ref`` is ``instances.image_ref``; ``release``
    the Nova release whose rules apply. Returns the
    fields Nova sets: ``id`` (only for a non-empty image_ref), each of
    ``min_ram``, ``min_disk``, ``disk_format``, ``container_format`` that
    system metadata holds, and ``properties``. Raises ImageMetaError
    where Nova raises.
    """
    inherited = {}
    properties = {}
    for key, value in sysmeta.items():
        if not isinstance(key, str):
            raise ImageMetaError('system metadata key %s is not a string'
                                 % primitive.short(key))
        if value is None:
            continue
        if not isinstance(value, str):
            value = _as_string('system_metadata[%s]' % key, value)
        # Every key is considered, not only image_* ones, as Nova does.
        if key.startswith(SM_IMAGE_PROP_PREFIX):
            key = key[len(SM_IMAGE_PROP_PREFIX):]
        if key in SM_SKIP_KEYS:
            continue
        if key in SM_INHERITABLE_KEYS:
            inherited[key] = value
        else:
            properties[key] = value
    image = {}
    if image_ref is not None:
        image_ref = _as_string('image_ref', image_ref)
        if image_ref:
            image['id'] = image_ref
    for key in SM_INHERITABLE_KEYS:
        if key not in inherited:
            continue
        if key in ('min_ram', 'min_disk'):
            image[key] = _as_int(key, inherited[key])
        else:
            image[key] = _as_string(key, inherited[key])
    image['properties'] = props_from_strings(properties, release)
    return image


def truncate_utf8(value, length=SM_VALUE_BYTES):
    """``value`` cut to ``length`` UTF-8 bytes on a character boundary."""
    encoded = value.encode('utf-8')[:length]
    # Only a character cut at the end can be incomplete.
    return encoded.decode('utf-8', 'ignore')


def _same_property(stored, derived):
    if stored == derived:
        return True
    if isinstance(stored, str) and isinstance(derived, str):
        try:
            return truncate_utf8(stored) == derived
        except UnicodeEncodeError:
            return False
    return False


def _property_order(names):
    known = [n for n in PROPS_FIELDS if n in names]
    return known + sorted(n for n in names if n not in PROPS_FIELDS)


def differing_fields(stored, derived):
    """Comparable parts that differ between a stored and a derived image.

    Compares ``id`` (when the derived image has one), ``min_ram``, the
    formats and every property either side sets except the block device
    mappings system metadata cannot hold; a derived string property equal
    to the stored one truncated to 255 UTF-8 bytes (as system metadata
    keeps it) counts as equal. Returns names such as ``'id'`` or
    ``'properties.hw_disk_bus'``.
    """
    names = []
    for field in COMPARED_IMAGE_FIELDS:
        if field == 'id' and 'id' not in derived:
            continue
        if stored.get(field) != derived.get(field):
            names.append(field)
    stored_props = stored.get('properties') or {}
    derived_props = derived.get('properties') or {}
    compared = (set(stored_props) | set(derived_props)) - set(
        UNDERIVABLE_PROPERTIES)
    for name in _property_order(compared):
        if name in stored_props and name in derived_props:
            if _same_property(stored_props[name], derived_props[name]):
                continue
        names.append('properties.%s' % name)
    return names
