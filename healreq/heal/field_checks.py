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


"""Per-field checks: derive a RequestSpec field from the instance record
the way Nova derives it, compare it with the stored one, and build the
replacement primitive.

Each check returns None when the field is consistent, or
``(FieldChange, primitive)`` when it drifted. Derivations that Nova would
refuse raise DerivationError; nothing is then written for the instance.
FIELD_NAMES is the order of checks and of the report.
"""

import copy
import dataclasses

from healreq import conf
from healreq.heal import describe
from healreq.heal.findings import FieldChange
from healreq.heal.findings import Note
from healreq import memo
from healreq.objects import flavor as flavor_obj
from healreq.objects import image as image_obj
from healreq.objects import image_fields
from healreq.objects import image_primitive
from healreq.objects import instance_group as group_obj
from healreq.objects import numa as numa_obj
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq.objects import pci as pci_obj
from healreq.objects import primitive
from healreq.objects import versions
from healreq import policies
from healreq import releases

FIELD_NAMES = ('flavor', 'image', 'numa_topology', 'pci_requests', 'is_bfv',
               'project_id', 'user_id', 'availability_zone', 'instance_group',
               'scheduler_hints', 'force_hosts', 'force_nodes')

# Which instance records each field is derived from (what to read).
NEEDS_SYSTEM_METADATA = frozenset(['image', 'numa_topology'])
NEEDS_BLOCK_DEVICES = frozenset(['is_bfv'])
NEEDS_GROUPS = frozenset(['instance_group'])
NEEDS_ZONES = frozenset(['availability_zone'])
NEEDS_HINTED_INSTANCES = frozenset(['scheduler_hints'])
NEEDS_FLAVOR_DEFINITIONS = frozenset(['flavor'])

# The scheduler hints that name instances (SameHostFilter's and
# DifferentHostFilter's).
SAME_HOST = 'same_host'
DIFFERENT_HOST = 'different_host'

# The zone of hosts in no aggregate that names one, unless configured
# otherwise ([DEFAULT]/default_availability_zone's default).
DEFAULT_ZONE = conf.option('DEFAULT', 'default_availability_zone').default

# System metadata keys of image properties (utils.SM_IMAGE_PROP_PREFIX).
_IMAGE_PREFIX = 'image_'

# Scheduler hints whose keys start so are Nova's own, never a user's:
# Nova never persists one legitimately.
INTERNAL_HINT_PREFIX = '_nova'

# The internal hint a rebuild with a new image adds, with the instance's
# host and node as forced destinations (scheduler utils'
# request_is_rebuild tests exactly this value).
REBUILD_HINT = '_nova_check_type'
REBUILD_HINT_VALUE = ['rebuild']

# Fields checked whenever another one is: the forced destinations are
# judged by the rebuild hint, so they are never left behind without it.
COMPANION_FIELDS = {'scheduler_hints': ('force_hosts', 'force_nodes')}

# Fields whose reset Nova does not record in the spec's change list
# (RequestSpec.reset_forced_destinations resets their changes).
UNRECORDED_RESETS = frozenset(['force_hosts', 'force_nodes'])

# RequestSpec version that added a field (1.0 when absent).
_SPEC_FIELD_ADDED = {'user_id': (1, 9), 'is_bfv': (1, 11)}


class DerivationError(Exception):
    """Nova would refuse to derive a field from these instance records.

    Not a HealreqError: it never ends a command. The decision turns it
    into the instance's error finding (its reason and detail), and the
    walk goes on with the next instance.
    """

    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


class InstanceFlavors(object):
    """The instance's embedded flavors with their compare keys."""

    def __init__(self, flavors):
        self.primitives = flavors
        self._keys = memo.frozen({slot: None if value is None else
                                  flavor_obj.parse(value, slot)
                                  for slot, value in flavors.items()})

    def key(self, slot):
        return self._keys[slot]


@dataclasses.dataclass
class Inputs:
    """What a field is derived from, for one instance.

    ``system_metadata`` maps key -> value; ``root_bdm`` is the live
    boot_index 0 block device mapping or None; ``release`` the Nova
    release whose rules derive the fields.
    """
    instance: dict
    flavors: InstanceFlavors
    system_metadata: dict = None
    # ``sorted(system_metadata.items())`` as a tuple, when known.
    system_metadata_items: tuple = None
    root_bdm: dict = None
    extra_pci_requests: str = None
    release: releases.Release = releases.LATEST
    # The server groups the instance is a member of (first is Nova's).
    groups: tuple = ()
    # Which group uuids the API database holds, of those specs name.
    known_groups: frozenset = frozenset()
    # The availability zones of its host's aggregates; every zone some
    # aggregate with a host carries; the zones only aggregates without
    # hosts carry; the zone of hosts in none.
    host_zones: tuple = ()
    zones: frozenset = frozenset()
    hostless_zones: frozenset = frozenset()
    default_zone: str = DEFAULT_ZONE
    az_policy: str = policies.DEFAULT
    # Of the instance uuids the batch's hints name: those that are no
    # live instance in any cell, and those a cell that could not be read
    # may hold (uuid -> the uuids of those cells).
    gone_instances: frozenset = frozenset()
    unverified_instances: dict = dataclasses.field(default_factory=dict)
    hint_policy: str = policies.DEFAULT
    # The current definition of the instance's flavor (flavors and
    # flavor_extra_specs: its id and extra specs), None if deleted.
    flavor_definition: dict = None
    flavor_policy: str = policies.DEFAULT

    def __post_init__(self):
        self._cache = {}

    def _once(self, name, derive):
        if name not in self._cache:
            try:
                self._cache[name] = (derive(), None)
            except DerivationError as exc:
                self._cache[name] = (None, exc)
        value, error = self._cache[name]
        if error is not None:
            raise error
        return value

    def image_key(self):
        """The derivation cache key, or None if a value is unhashable."""
        items = self.system_metadata_items
        if items is None:
            items = tuple(sorted((self.system_metadata or {}).items()))
        key = (items, self.instance['image_ref'])
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def image(self):
        """The image Nova derives from system metadata (from_instance).

        Shared between instances with the same image: treat as read-only.
        """
        def derive():
            key = self.image_key()
            try:
                if key is None:
                    return image_obj.image_from_system_metadata(
                        self.system_metadata or {}, self.instance['image_ref'],
                        self.release)
                return _derive_image(*key, self.release)
            except image_fields.ImageMetaError as exc:
                raise DerivationError(
                    'instance-image-invalid',
                    'Nova cannot build the image from system metadata: %s'
                    % exc)
        return self._once('image', derive)

    def numa_key(self):
        """The NUMA derivation's cache key, or None if unhashable."""
        image_key = self.image_key()
        if image_key is None:
            return None
        key = self.flavors.key('cur')
        specs = self.flavors.primitives['cur'][primitive.DATA].get(
            'extra_specs') or {}
        try:
            items = tuple(sorted(specs.items()))
            hash(items)
        except TypeError:
            return None
        return (key['vcpus'], key['memory_mb'], items, image_key)

    def numa(self):
        """The request NUMA topology of the current flavor and image."""
        def derive():
            current = self.flavors.primitives['cur'][primitive.DATA]
            key = self.flavors.key('cur')
            image = self.image()  # an invalid image is reported first
            image_key = self.image_key()
            specs = current.get('extra_specs') or {}
            try:
                if image_key is None:
                    return numa_constraints.constraints(
                        key['vcpus'], key['memory_mb'], specs,
                        image['properties'], self.release)
                return _derive_numa(key['vcpus'], key['memory_mb'],
                                    tuple(sorted(specs.items())), image_key,
                                    self.release)
            except numa_obj.ConstraintError as exc:
                raise DerivationError(
                    'numa-constraints-invalid',
                    'Nova refuses the flavor and image NUMA request (%s): %s'
                    % (exc.nova_exception, exc))
        return self._once('numa', derive)

    def pci_requests(self):
        def derive():
            try:
                return pci_obj.from_instance_extra(self.extra_pci_requests)
            except primitive.PrimitiveError as exc:
                raise DerivationError('instance-pci-unparsable', str(exc))
        return self._once('pci', derive)

    def is_bfv(self):
        """compute_utils.is_volume_backed_instance, from the root BDM."""
        if self.root_bdm is not None:
            return self.root_bdm['destination_type'] == 'volume'
        return not self.instance['image_ref']


# Many instances share a flavor and an image, and the derivations are pure
# functions of them: each distinct input is derived once (see healreq.memo).
# The values are shared: read-only.
_IMAGES = memo.Memo()
_NUMA_REQUESTS = memo.Memo()
_INSTANCE_FLAVORS = memo.Memo()


def _derive_image(system_metadata_items, image_ref, release):
    return _IMAGES.get(
        (system_metadata_items, image_ref, release),
        lambda: image_obj.image_from_system_metadata(
            dict(system_metadata_items), image_ref, release))


def _derive_numa(vcpus, memory_mb, extra_specs_items, image_key, release):
    return _NUMA_REQUESTS.get(
        (vcpus, memory_mb, extra_specs_items, image_key, release),
        lambda: numa_constraints.constraints(
            vcpus, memory_mb, dict(extra_specs_items),
            _derive_image(*image_key, release)['properties'], release))


def instance_flavors(text):
    """Parse ``instance_extra.flavor`` text (remembered; read-only)."""
    if isinstance(text, bytearray):
        text = bytes(text)
    return _INSTANCE_FLAVORS.get(
        text, lambda: InstanceFlavors(
            memo.frozen(flavor_obj.parse_instance_flavors(text))))


def _spec_can_hold(spec, field, profile):
    """Return the RequestSpec version to write if ``field`` is added.

    A spec saved by an old Nova may lack the field; Nova's own re-save
    stamps the running version, so do we, using the highest RequestSpec
    version this deployment wrote, if that version has the field.
    """
    added = _SPEC_FIELD_ADDED.get(field, (1, 0))
    stored = spec.document[primitive.VERSION]
    if primitive.parse_version(stored, 'spec') >= added:
        return stored
    newest = profile.version('RequestSpec')
    if primitive.parse_version(newest, 'spec') >= added:
        return newest
    raise DerivationError(
        'spec-version-too-old',
        'the spec (RequestSpec %s) has no %s field and the newest specs of '
        'this deployment are RequestSpec %s' % (stored, field, newest))


def propagated_extra_specs(spec, inputs):
    """The extra specs an operator propagated into the spec, or None.

    The spec's flavor is propagated when it equals the instance's
    embedded flavor in everything but extra specs, and its extra specs
    equal the current definition of that flavor (the same flavorid and
    id: not deleted since). Returns the keys that differ from the
    embedded flavor, sorted.
    """
    stored = spec.flavor_key()
    embedded = inputs.flavors.key('cur')
    definition = inputs.flavor_definition
    if (definition is None or definition['id'] != embedded['id']
            or flavor_obj.differing_fields(stored, embedded)
            != ['extra_specs']
            or definition['extra_specs'] != stored['extra_specs']):
        return None
    return flavor_obj.differing_extra_specs(stored['extra_specs'],
                                            embedded['extra_specs'])


def outdated_extra_specs(flavors, definition):
    """The extra specs the embedded flavor lacks of its definition.

    ``definition`` is the current definition of the flavor's flavorid
    (None if there is none). Returns the sorted keys that differ, or
    None if the embedded flavor is as defined, or no longer defined.
    """
    embedded = flavors.key('cur')
    if definition is None or definition['id'] != embedded['id']:
        return None
    return flavor_obj.differing_extra_specs(
        definition['extra_specs'], embedded['extra_specs']) or None


def check_flavor(spec, inputs, profile):
    spec_primitive = spec.flavor()
    stored = spec.flavor_key()
    expected = inputs.flavors.key('cur')
    differing = flavor_obj.differing_fields(stored, expected)
    if not differing:
        return None
    before = flavor_obj.label(stored)
    after = flavor_obj.label(expected)
    propagated = propagated_extra_specs(spec, inputs)
    if propagated is not None:
        before += ' [extra specs %s as currently defined]' % ', '.join(
            propagated)
        if inputs.flavor_policy == policies.FLAVOR_REPORT:
            return (FieldChange('flavor', before,
                                '%s (not rewritten: --flavor-policy report)'
                                % after, rewritten=False), {})
    elif before == after:
        before += ' [%s differ]' % ', '.join(differing)
    healed = flavor_obj.for_request_spec(
        inputs.flavors.primitives['cur'], spec_primitive[primitive.VERSION])
    return FieldChange('flavor', before, after), {'flavor': healed}


# Results of the checks by their exact inputs (see healreq.memo): a stored
# sub-document by its text, the derivation by its inputs, the versions by
# the profile's fingerprint. Results are copied when taken out.
_RESULTS = memo.Memo(maxsize=16384)


def _remembered(key, check, spec, inputs, profile):
    """``check(spec, inputs, profile)``, remembered under ``key``."""
    if key is None:
        return check(spec, inputs, profile)
    result = _RESULTS.get(key, lambda: check(spec, inputs, profile))
    return None if result is None else copy.deepcopy(result)


def check_image(spec, inputs, profile):
    """The spec's image against the image of the instance record."""
    image_key = inputs.image_key()
    key = image_key and ('image', memo.document_key(spec.data, 'image'),
                         image_key, profile.fingerprint)
    return _remembered(key, _check_image, spec, inputs, profile)


def check_numa_topology(spec, inputs, profile):
    """The spec's NUMA request against the flavor's and image's."""
    key = inputs.numa_key()
    if key is not None:
        key = ('numa', memo.document_key(spec.data, 'numa_topology'), key,
               profile.fingerprint)
    return _remembered(key, _check_numa_topology, spec, inputs, profile)


def check_pci_requests(spec, inputs, profile):
    """The spec's PCI alias requests against the instance's."""
    extra = inputs.extra_pci_requests
    # A healed value names the instance: only agreement is remembered.
    if (isinstance(extra, str) or extra is None) and _PCI_CONSISTENT.get(
            (memo.document_key(spec.data, 'pci_requests'), extra),
            lambda: _check_pci_requests(spec, inputs, profile) is None):
        return None
    return _check_pci_requests(spec, inputs, profile)


# Whether a spec's PCI requests agree with an instance's, by their texts.
_PCI_CONSISTENT = memo.Memo(maxsize=4096)


def _check_image(spec, inputs, profile):
    derived = inputs.image()
    stored_primitive = spec.data.get('image')
    stored = (None if stored_primitive is None else
              image_primitive.image_from_primitive(stored_primitive,
                                                   'spec image'))
    if stored is not None and stored.get('id') == derived.get('id'):
        # Same image: keep what only Glance knew (name, checksum, size...),
        # replace what the instance records say.
        wanted = dict(stored)
        for key in ('min_ram', 'disk_format', 'container_format',
                    'properties'):
            if key in derived:
                wanted[key] = derived[key]
    else:
        # Another image (a rebuild Nova did not record): take the image as
        # Nova itself rebuilds it from the instance (image_property set).
        wanted = derived
    if stored is not None and not image_obj.differing_fields(stored, wanted):
        return None
    healed, written = image_to_store(wanted, stored_primitive, profile)
    # Compare with what would be stored, read back: a property the
    # writable version cannot hold must not drift forever.
    if stored is not None:
        differing = image_obj.differing_fields(stored, written)
        if not differing:
            return None
        if not profile.named:
            _refuse_lost_properties(stored, inputs.system_metadata or {},
                                    written)
        before, after = describe.describe_difference(stored, written,
                                                     differing)
    else:
        before, after = 'none', 'id %s' % derived.get('id', '(volume)')
    return FieldChange('image', before, after), {'image': healed}


def _refuse_lost_properties(stored, system_metadata, written):
    """Refuse to drop a property both the spec and the instance hold.

    The instance holds a property when its system metadata has it,
    whether or not the release's rules know it. Only a version cap or a
    release that does not know the property can drop it, and the
    deployment's own Nova wrote it: the release is then more likely
    misjudged than the property wrong. An operator who named the release
    is taken at their word.
    """
    recorded = {key[len(_IMAGE_PREFIX):] for key in system_metadata
                if key.startswith(_IMAGE_PREFIX)}
    held = set(stored.get('properties') or {}) & recorded
    lost = sorted(held - set(written.get('properties') or {}))
    if lost:
        raise DerivationError(
            'image-property-would-be-lost',
            'the spec and the instance record both hold %s, which the '
            'object versions of the detected release cannot; left alone '
            '(name the release with --target-release if it is right)'
            % ', '.join(lost))


def image_to_store(image, stored_primitive, profile):
    """``image`` at the first versions that hold all of it.

    Preference: the stored versions, then those this deployment writes;
    if neither holds every property, the stored versions (what they can
    hold). Versions the deployment's release cannot load are never used.
    Returns the primitive and its value read back.
    """
    candidates = [
        (versions.version_of(stored_primitive, None),
         versions.first_nested_version(stored_primitive, 'properties',
                                       None)),
        (profile.version('ImageMeta'), profile.version('ImageMetaProps')),
    ]
    best = None
    for image_version, props_version in candidates:
        if not (profile.can_write('ImageMeta', image_version)
                and profile.can_write('ImageMetaProps', props_version)):
            continue
        try:
            healed = image_primitive.image_to_primitive(image, image_version,
                                                        props_version)
        except image_fields.ImageMetaError:
            continue
        written = image_primitive.image_from_primitive(healed, 'healed image')
        if not image_obj.differing_fields(written, image):
            return healed, written
        best = best or (healed, written)
    if best is None:
        raise DerivationError(
            'image-version-incompatible',
            'the image cannot be expressed at the object versions this '
            'deployment uses')
    return best


# Stands for a stored topology Nova itself cannot load; equals nothing.
_UNLOADABLE = object()


def _check_numa_topology(spec, inputs, profile):
    derived = inputs.numa()
    stored_primitive = spec.data.get('numa_topology')
    try:
        stored = numa_primitive.from_primitive(
            stored_primitive, 'spec numa_topology', profile.release)
        before = numa_obj.describe(stored)
    except numa_obj.UnloadableTopology as exc:
        # Nova fails to load it (cells older than 1.4 in a spec): rebuild
        # it at versions Nova can load, whatever was stored.
        stored, stored_primitive = _UNLOADABLE, None
        before = 'unloadable (%s)' % exc
    if derived is None:
        if stored is None and 'numa_topology' in spec.data:
            return None
        return (FieldChange('numa_topology', before, 'none'),
                {'numa_topology': None})
    if stored == derived:
        return None
    healed = numa_to_store(derived, stored_primitive, profile)
    # Compare with what would be stored, read back: a legacy version may
    # not express the derived value exactly, and must not drift forever.
    if stored == numa_primitive.from_primitive(
            healed, 'healed numa_topology', profile.release):
        return None
    return (FieldChange('numa_topology', before,
                        numa_obj.describe(derived)), {'numa_topology': healed})


def numa_to_store(derived, stored, profile):
    """The derived topology at the first versions that can carry it.

    Preference: the versions of the stored topology, then those this
    deployment writes, then the newest its release loads; each must give
    a topology every point release of it loads alike.
    """
    release = profile.release
    candidates = [
        (versions.version_of(stored, None),
         versions.first_nested_version(stored, 'cells', None)),
        (profile.version('InstanceNUMATopology'),
         profile.version('InstanceNUMACell')),
        (release.newest_text('InstanceNUMATopology'),
         release.newest_text('InstanceNUMACell')),
    ]
    for topology_version, cell_version in candidates:
        if not (profile.can_write('InstanceNUMATopology', topology_version)
                and profile.can_write('InstanceNUMACell', cell_version)):
            continue
        try:
            healed = numa_primitive.to_primitive(derived, topology_version,
                                                 cell_version)
            numa_primitive.from_primitive(healed, 'healed numa_topology',
                                          release)
        except (numa_obj.ConstraintError, primitive.PrimitiveError):
            continue
        return healed
    raise DerivationError('numa-version-incompatible',
                          'the NUMA request cannot be expressed at any '
                          'object version this deployment loads')


def _check_pci_requests(spec, inputs, profile):
    derived = inputs.pci_requests()
    stored_primitive = spec.data.get('pci_requests')
    stored = pci_obj.from_primitive(stored_primitive, 'spec pci_requests')
    if (pci_obj.alias_requests(stored) == pci_obj.alias_requests(derived)
            and 'pci_requests' in spec.data):
        return None
    requests_version = versions.version_of(
        stored_primitive, profile.version('InstancePCIRequests'))
    request_version = versions.first_nested_version(
        stored_primitive, 'requests', profile.version('InstancePCIRequest'))
    keeps_uuid = isinstance(stored_primitive, dict) and 'instance_uuid' in (
        stored_primitive.get(primitive.DATA) or {})
    requests = ([r for r in derived if r['alias_name'] is not None]
                + pci_obj.port_requests(stored))
    healed = pci_obj.to_primitive(
        requests, inputs.instance['uuid'] if keeps_uuid else None,
        requests_version, request_version)
    return (FieldChange('pci_requests', pci_obj.describe(stored),
                        pci_obj.describe(derived)), {'pci_requests': healed})


def check_is_bfv(spec, inputs, profile):
    expected = inputs.is_bfv()
    if spec.data.get('is_bfv', None) is expected and 'is_bfv' in spec.data:
        return None
    before = ('missing' if 'is_bfv' not in spec.data
              else str(spec.data['is_bfv']))
    return FieldChange('is_bfv', before, str(expected)), {'is_bfv': expected}


def _check_owner(field):
    def check(spec, inputs, profile):
        stored = spec.data.get(field)
        expected = inputs.instance[field]
        if stored is not None:
            if stored != expected:
                raise DerivationError(
                    'spec-owner-mismatch',
                    'spec %s %s differs from the instance\'s %s; Nova never '
                    'changes it, so this needs a human' % (
                        field, stored, expected))
            return None
        if expected is None:
            return None
        before = 'missing' if field not in spec.data else 'None'
        return FieldChange(field, before, expected), {field: expected}
    return check


def check_availability_zone(spec, inputs, profile):
    """The pinned zone against the zone the instance is in.

    A pin (non-null) that differs from ``instances.availability_zone``
    is drift, unless the instance is shelved-offloaded (no zone) or its
    zone is unknown. It is rewritten only as --az-policy says: the pin
    is what the user asked for.
    """
    if 'availability_zone' not in spec.data:
        # Nova cannot read such a spec; it had no pin it could load.
        return (FieldChange('availability_zone', 'missing', 'None'),
                {'availability_zone': None})
    pinned = pinned_zone(spec)
    current = inputs.instance['availability_zone']
    if (pinned is None or current is None or pinned == current
            or inputs.instance['vm_state'] == 'shelved_offloaded'):
        return None
    if inputs.az_policy == policies.AZ_REPORT:
        return (FieldChange('availability_zone', pinned,
                            '%s (not rewritten: --az-policy report)'
                            % current, rewritten=False), {})
    target = current if inputs.az_policy == policies.AZ_REPIN else None
    return (FieldChange('availability_zone', pinned, str(target)),
            {'availability_zone': target})


def pinned_zone(spec):
    """The spec's availability_zone as Nova's StringField reads it.

    Numbers become their text; anything else but a string or null is a
    spec Nova cannot load (PrimitiveError).
    """
    value = spec.data.get('availability_zone')
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    raise primitive.PrimitiveError('spec availability_zone is %s'
                                   % primitive.short(value))


def zone_notes(spec, inputs):
    """Notes on zones: a pin no host can satisfy, a host's other zone."""
    notes = []
    try:
        pinned = pinned_zone(spec)
    except primitive.PrimitiveError:
        pinned = None
    if (pinned is not None and pinned not in inputs.zones
            and pinned != inputs.default_zone):
        notes.append(Note('az-pin-gone', _gone_zone(
            pinned, pinned in inputs.hostless_zones)))
    instance = inputs.instance
    if instance['host'] is not None and instance['availability_zone']:
        zone = (inputs.host_zones[0] if inputs.host_zones
                else inputs.default_zone)
        if zone != instance['availability_zone']:
            notes.append(Note('host-az-differs', (
                'host %s is in zone %s by its aggregates, but '
                'instances.availability_zone is %s'
                % (instance['host'], zone, instance['availability_zone']))))
    return notes


def _gone_zone(pinned, hostless):
    """The detail of ``az-pin-gone``: what Nova's scheduler does.

    Nova's map_az_to_placement_aggregate pre-filter (on by default since
    Xena, the only zone filter from 2023.1 on) requires the aggregates
    that carry the pinned zone, and requires nothing when none does.
    """
    if hostless:
        return ('the pinned zone %s is carried only by aggregates that hold '
                'no host: Nova\'s scheduler still requires those aggregates, '
                'so every move fails with NoValidHost' % pinned)
    return ('the pinned zone %s is carried by no aggregate: Nova\'s '
            'scheduler then requires none and may place the instance on '
            'any host, ignoring the pin (on Zed, an enabled '
            'AvailabilityZoneFilter finds no host instead)' % pinned)


def check_instance_group(spec, inputs, profile):
    """The group the spec names against the instance's membership.

    Nova reads the group again by the uuid the spec names (or its group
    hint), and the compute's policy checks read the hint: a member whose
    spec names no group, or lacks the hint, is drift; a spec naming a
    group the instance is not a member of is an error, never rewritten.
    """
    try:
        named = spec.named_group()
    except primitive.PrimitiveError as exc:
        raise DerivationError('spec-unparsable', str(exc))
    member = inputs.groups[0] if inputs.groups else None
    if member is None:
        return _not_a_member(spec, named, inputs)
    _check_other_memberships(named, inputs.groups)
    if named.uuid is not None and named.uuid != member['uuid']:
        gone = named.uuid not in inputs.known_groups
        raise DerivationError(
            'spec-group-gone' if gone else 'spec-group-not-member', (
                'the spec names group %s, %s, but the instance is %s; left '
                'alone' % (
                    named.uuid, 'which no longer exists' if gone
                    else 'of which it is not a member',
                    _membership(inputs.groups))))
    healed = {'scheduler_hints': group_obj.with_hint(
        spec.data.get('scheduler_hints'), member['uuid'])}
    if named.uuid is None:
        healed['instance_group'] = group_to_store(member, profile)
        before = ('none' if not named.has_group
                  else 'a group without uuid or hint')
    elif named.hint != member['uuid']:
        before = 'group %s without its scheduler hint' % named.uuid
    else:
        return None
    return (FieldChange('instance_group', before, _group_label(member)),
            healed)


def _check_other_memberships(named, groups):
    """Raise DerivationError if the spec names a group Nova does not read.

    Nova's API forbids an instance in several groups, but the database
    allows it, and Nova reads the first membership. A spec naming
    another of them (as its group or its hint) names a group of which
    the instance is a member: which one it should name is not known.
    """
    others = {group['uuid'] for group in groups[1:]}
    for uuid in (named.uuid, named.hint):
        if uuid in others:
            raise DerivationError('instance-in-several-groups', (
                'the spec names group %s, and the instance is %s; Nova '
                'reads the first as its group; left alone'
                % (uuid, _membership(groups))))


def _membership(groups):
    """The groups of an instance, for a detail: 'a member of ...'."""
    if len(groups) == 1:
        return 'a member of %s' % _group_label(groups[0])
    return 'a member of %d server groups: %s' % (
        len(groups), ', '.join(_group_label(group) for group in groups))


def _not_a_member(spec, named, inputs):
    """A spec of an instance in no group: only a nameless group drifts.

    A spec naming a group, existing or deleted, is an error: the
    instance's membership does not say which group it should name.
    """
    if named.has_group and named.uuid is None:
        # Nova cannot load it (bug 1830747); the instance has no group.
        return (FieldChange('instance_group', 'a group without uuid or '
                            'hint', 'none'), {'instance_group': None})
    group = named.uuid if named.has_group else named.hint
    if group is None:
        return None
    if group not in inputs.known_groups:
        raise DerivationError('spec-group-gone', (
            'the spec names group %s, which no longer exists, and the '
            'instance is a member of no group; left alone' % group))
    raise DerivationError('spec-group-not-member', (
        'the spec names group %s, but the instance is a member of no '
        'group; left alone' % group))


def named_groups(spec):
    """The group uuids a spec names (its group's, its hint's)."""
    try:
        named = spec.named_group()
    except primitive.PrimitiveError:
        return set()
    return {uuid for uuid in (named.uuid, named.hint) if uuid}


def hinted_instances(hints, name):
    """The instance uuids scheduler hint ``name`` names, in its order.

    Nova stores each hint as a list of strings; a lone string is read as
    a list of one. Anything else names nothing.
    """
    if not isinstance(hints, dict):
        return []
    value = hints.get(name)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [uuid for uuid in value if isinstance(uuid, str)]


def named_instances(spec):
    """Every instance uuid a spec's same_host and different_host name."""
    hints = spec.data.get('scheduler_hints')
    return set(hinted_instances(hints, SAME_HOST)
               + hinted_instances(hints, DIFFERENT_HOST))


def gone_same_host(spec, gone_instances):
    """The uuids of the spec's same_host hint that no longer exist."""
    return [uuid for uuid in hinted_instances(
        spec.data.get('scheduler_hints'), SAME_HOST)
        if uuid in gone_instances]


def not_uuids(hints):
    """The entries of the same_host hint that are not strings.

    Nova's scheduler takes each entry for an instance uuid: these name no
    instance, live or gone.
    """
    value = hints.get(SAME_HOST) if isinstance(hints, dict) else None
    if not isinstance(value, list):
        return []
    return [entry for entry in value if not isinstance(entry, str)]


def _not_uuids_label(hints):
    """The words naming the same_host entries that are not strings."""
    entries = not_uuids(hints)
    if not entries:
        return []
    return ['same_host %s %s %s' % (
        'entry' if len(entries) == 1 else 'entries',
        ', '.join(primitive.short(entry) for entry in entries),
        'is not an instance uuid' if len(entries) == 1
        else 'are not instance uuids')]


def without_gone(hints, gone):
    """``hints`` with the ``gone`` uuids out of same_host.

    The entries that are not strings go too (see ``not_uuids``); the key
    goes when no uuid is left; every other hint is kept as it is.
    """
    pruned = dict(hints)
    kept = [uuid for uuid in hinted_instances(hints, SAME_HOST)
            if uuid not in gone]
    if kept:
        pruned[SAME_HOST] = kept
    else:
        del pruned[SAME_HOST]
    return pruned


def hint_notes(spec, inputs):
    """Notes on hinted instances: unverifiable ones, gone different_host.

    A uuid that a cell which could not be read may hold is never taken
    for gone.
    """
    notes = []
    hints = spec.data.get('scheduler_hints')
    unverified = [uuid for uuid in hinted_instances(hints, SAME_HOST)
                  if uuid in inputs.unverified_instances]
    if unverified:
        cells = sorted({cell for uuid in unverified
                        for cell in inputs.unverified_instances[uuid]})
        notes.append(Note('same-host-unverified', (
            'the same_host hint names %s, which no cell that could be read '
            'holds live; cell %s could not be read, so %s not taken for '
            'gone' % (', '.join(unverified), ', '.join(cells),
                      'it is' if len(unverified) == 1 else 'they are'))))
    gone = [uuid for uuid in hinted_instances(hints, DIFFERENT_HOST)
            if uuid in inputs.gone_instances]
    if gone:
        notes.append(Note('different-host-gone', (
            'the different_host hint names %s, gone; DifferentHostFilter '
            'passes every host for a gone instance, so moves are not '
            'affected; left as it is' % ', '.join(gone))))
    return notes


def group_to_store(group, profile):
    try:
        return group_obj.to_primitive(group,
                                      profile.version('InstanceGroup'))
    except group_obj.GroupError as exc:
        raise DerivationError('group-unloadable', str(exc))


def _group_label(group):
    return '%s group %s (%s)' % (group['policy'] or 'policy-less',
                                 group['name'], group['uuid'])


def check_scheduler_hints(spec, inputs, profile):
    """Nova's internal hints, and a same_host hint naming gone instances.

    Internal ``_nova*`` hints are Nova's per request only (a rebuild's
    ``_nova_check_type``; before Nova 34 a user could send one at boot);
    persisted, they make every later move a rebuild to the scheduler,
    which then claims nothing in Placement: they are removed.
    SameHostFilter passes only hosts that run an instance the same_host
    hint names: once every one is gone, every move ends in NoValidHost.
    That hint is what the user asked for, so the uuids of gone instances
    are removed only as --hint-policy says (prune), with the entries that
    are not strings (they name no instance either, and the change names
    them); the key goes when none is left. Every other hint is kept as
    stored.
    """
    hints = spec.data.get('scheduler_hints')
    internal = internal_hints(hints)
    gone = gone_same_host(spec, inputs.gone_instances)
    if not internal and not gone:
        return None
    prune = bool(gone) and inputs.hint_policy == policies.HINT_PRUNE
    before, after = [], []
    if internal:
        before.append(_hints_label(hints, internal))
        after.append('removed')
    if gone:
        kept = [uuid for uuid in hinted_instances(hints, SAME_HOST)
                if uuid not in gone]
        before.append('same_host names %s, gone' % ', '.join(gone))
        before.extend(_not_uuids_label(hints))
        pruned = ('same_host %s' % ', '.join(kept) if kept
                  else 'no same_host hint')
        after.append(pruned if prune else
                     '%s (not rewritten: --hint-policy report)' % pruned)
    change = FieldChange('scheduler_hints', '; '.join(before),
                         '; '.join(after), rewritten=bool(internal) or prune,
                         partly_reported=bool(internal and gone) and not prune)
    if not change.rewritten:
        return change, {}
    written = {key: value for key, value in hints.items()
               if key not in internal}
    if prune:
        written = without_gone(written, gone)
    return change, {'scheduler_hints': written}


def internal_hints(hints):
    """The keys of ``hints`` that are Nova's own, sorted."""
    if not isinstance(hints, dict):
        return []
    return sorted(key for key in hints
                  if isinstance(key, str)
                  and key.startswith(INTERNAL_HINT_PREFIX))


def _hints_label(hints, keys):
    return ', '.join('%s=%s' % (key, primitive.short(hints[key]))
                     for key in keys)


def rebuild_hint_persisted(spec):
    """Whether the spec holds the hint of a rebuild with a new image."""
    hints = spec.data.get('scheduler_hints')
    return (isinstance(hints, dict)
            and hints.get(REBUILD_HINT) == REBUILD_HINT_VALUE)


def _check_forced(field):
    """The check of a forced destination persisted by a rebuild.

    The rebuild path forces the instance's host and node and Nova saved
    them with its hint; they are reset as Nova's
    reset_forced_destinations resets them (null). Forced destinations
    without that hint are a user's request at boot: left alone.
    """
    def check(spec, inputs, profile):
        value = spec.data.get(field)
        if not value or not rebuild_hint_persisted(spec):
            return None
        return (FieldChange(field, primitive.short(value), 'None'),
                {field: None})
    return check


def checked_with_companions(field_names):
    """``field_names`` and the fields checked along with them."""
    checked = set(field_names)
    for name in field_names:
        checked.update(COMPANION_FIELDS.get(name, ()))
    return checked


_CHECKS = {
    'flavor': check_flavor,
    'image': check_image,
    'numa_topology': check_numa_topology,
    'pci_requests': check_pci_requests,
    'is_bfv': check_is_bfv,
    'project_id': _check_owner('project_id'),
    'user_id': _check_owner('user_id'),
    'availability_zone': check_availability_zone,
    'instance_group': check_instance_group,
    'scheduler_hints': check_scheduler_hints,
    'force_hosts': _check_forced('force_hosts'),
    'force_nodes': _check_forced('force_nodes'),
}


def compare(field_names, spec, inputs, profile):
    """Run the checks for ``field_names``.

    Returns ``(changes, replacements, spec_version)``: the FieldChanges in
    report order, the new values keyed by RequestSpec field name, and the
    RequestSpec version the healed document must carry.
    """
    changes = []
    replacements = {}
    spec_version = spec.document[primitive.VERSION]
    checked = checked_with_companions(field_names)
    for name in FIELD_NAMES:
        if name not in checked:
            continue
        try:
            result = _CHECKS[name](spec, inputs, profile)
        except primitive.PrimitiveError as exc:
            raise DerivationError('spec-unparsable', str(exc))
        if result is None:
            continue
        change, healed = result
        changes.append(change)
        if not healed:
            continue  # reported, not rewritten
        needed = _spec_can_hold(spec, name, profile)
        if primitive.parse_version(needed, 'spec') > primitive.parse_version(
                spec_version, 'spec'):
            spec_version = needed
        _merge(replacements, healed, spec.data)
    return changes, replacements, spec_version


def _merge(replacements, healed, stored):
    """Add a check's values to those of the checks before it.

    Two checks may edit one dictionary (the scheduler hints): the later
    edit, taken relative to the stored value, applies on the earlier.
    """
    for name, value in healed.items():
        earlier = replacements.get(name)
        before = stored.get(name)
        if isinstance(earlier, dict) and isinstance(value, dict):
            value = _combined(before if isinstance(before, dict) else {},
                              earlier, value)
        replacements[name] = value


def _combined(stored, earlier, later):
    result = dict(earlier)
    for key in stored:
        if key not in later:
            result.pop(key, None)
    for key, value in later.items():
        if key not in stored or stored[key] != value:
            result[key] = value
    return result
