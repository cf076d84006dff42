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


"""Every spec nova-heal writes loads through Nova's own RequestSpec code
and equals what Nova itself would build from the instance.

A deployment with drift of every kind is healed by the real command; each
healed row is then loaded with ``RequestSpec._from_db_object`` and its
fields compared with Nova's own derivations from the same instance
records (``Flavor`` from instance_extra, ``ImageMeta.from_instance``,
``numa_get_constraints``, ``is_volume_backed_instance`` rules).

The deployment runs the installed Nova's release: its services report
that release's service version and its specs were saved at that
release's object versions, so the heal detects the release and writes
what that release loads.
"""

import json

from healreq.db import tables
from healreq.testing import deployment as dep
from healreq.tests.compat import base
from healreq.tests.compat import flavors
from healreq.tests.functional import deployment_case

try:
    from nova import context as nova_context
    from nova import objects
    from nova.virt import hardware
except ImportError:  # pragma: no cover - depends on the environment
    objects = None

SHARED = dep.flavor(10, 'g1.shared', vcpus=4, memory_mb=4096, root_gb=40,
                    extra_specs={'hw:cpu_policy': 'shared'})
PINNED = dep.flavor(11, 'c1.pinned', vcpus=4, memory_mb=4096, root_gb=40,
                    extra_specs={'hw:cpu_policy': 'dedicated',
                                 'hw:numa_nodes': '2',
                                 'hw:mem_page_size': 'large',
                                 'hw:emulator_threads_policy': 'share'})
MIXED = dep.flavor(12, 'm1.mixed', vcpus=4, memory_mb=4096, root_gb=40,
                   extra_specs={'hw:cpu_policy': 'mixed',
                                'hw:cpu_dedicated_mask': '^0-1'})
PROPS = {'hw_architecture': 'x86_64', 'hw_disk_bus': 'scsi',
         'hw_scsi_model': 'virtio-scsi', 'hw_qemu_guest_agent': 'yes',
         'os_distro': 'ubuntu', 'trait:CUSTOM_SSD': 'required'}
# Properties that refine the NUMA request of a pinned flavor.
NUMA_PROPS = dict(PROPS, hw_mem_page_size='2048',
                  hw_cpu_thread_policy='prefer')


def _image(**kwargs):
    """A spec image as the installed Nova's API saved it."""
    return dep.image(props_version='%d.%d' % base.RELEASE.props_version,
                     **kwargs)


class WrittenSpecsTest(base.CommandInItsOwnProcess, base.NovaTestCase,
                       deployment_case.DeploymentTestCase):

    def _run_release(self):
        """Make every cell's services those of the installed Nova."""
        for cell in self.deployment.cells:
            if cell.engine is None:
                continue
            with cell.engine.begin() as conn:
                conn.execute(tables.services.update().values(
                    version=base.RELEASE.service_version))

    def _add(self, cur, **kwargs):
        kwargs.setdefault('system_metadata', dep.image_system_metadata(
            PROPS, min_disk=cur['nova_object.data']['root_gb']))
        spec_fields = {'version': '%d.%d' % base.RELEASE.spec_version,
                       'spec_image': _image()}
        spec_fields.update(kwargs.get('spec_fields') or {})
        kwargs['spec_fields'] = spec_fields
        uuid = self.deployment.add_instance(self.cell1, cur, **kwargs)
        self.records[uuid] = kwargs
        self.flavors[uuid] = cur
        return uuid

    def _build(self):
        self.records, self.flavors = {}, {}
        self._run_release()
        # A failed resize shared -> pinned: flavor and NUMA left behind.
        self._add(SHARED, spec_flavor=PINNED, new=PINNED)
        # The reverse: runs pinned, the spec still says shared.
        self._add(PINNED, spec_flavor=SHARED,
                  system_metadata=dep.image_system_metadata(NUMA_PROPS))
        self._add(MIXED, spec_flavor=SHARED)
        self._add(flavors.PCPU, spec_flavor=SHARED)
        # Stale image properties after a rebuild.
        self._add(SHARED, spec_fields=dict(spec_image=_image(
            properties={'hw_disk_bus': 'virtio'})))
        # Another image id altogether.
        self._add(SHARED, spec_fields=dict(spec_image=_image(
            image_id='9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d')))
        # Volume-backed, recorded as image-backed.
        self._add(SHARED, image_ref='', block_devices=[{}])
        # PCI alias of the current flavor missing from the spec.
        self._add(flavors.GPU, spec_flavor=SHARED,
                  extra_pci_requests=json.dumps(flavors.T4_REQUEST))
        # A spec saved without user_id.
        self._add(SHARED, spec_fields=dict(user_id=None))

    def _nova_instance(self, uuid):
        kwargs = self.records[uuid]
        instance = objects.Instance(
            uuid=uuid, image_ref=kwargs.get('image_ref', dep.IMAGE_ID),
            system_metadata=dict(kwargs['system_metadata']),
            project_id=dep.PROJECT_ID, user_id=dep.USER_ID)
        instance.flavor = objects.Flavor.obj_from_primitive(
            json.loads(dep.instance_flavors(self.flavors[uuid]))['cur'])
        return instance

    def test_healed_specs_load_and_match_nova(self):
        self._build()
        result = self.heal('--format', 'json')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        document = json.loads(result.stdout)
        self.assertEqual(base.RELEASE.series,
                         document['release']['series'])
        healed = {r['instance_uuid'] for r in document['results']
                  if r['status'] == 'healed'}
        self.assertEqual(set(self.records), healed)
        context = nova_context.get_admin_context()
        for uuid in self.records:
            row = {'id': 1, 'instance_uuid': uuid,
                   'spec': self.deployment.spec_text(uuid)}
            self._assert_release_versions(json.loads(row['spec']))
            spec = objects.RequestSpec._from_db_object(
                context, objects.RequestSpec(), row)
            self._assert_matches_nova(uuid, spec)

    def test_propagated_flavors_load_under_each_policy(self):
        """Specs written around propagated flavors load in Nova.

        An operator changed g1.shared's extra specs and rewrote specs from
        its definition. Under --flavor-policy report only the other drift
        is written and the propagated flavor stays as Nova loads it; under
        instance the flavor is healed to the embedded one.
        """
        self.records, self.flavors = {}, {}
        self._run_release()
        defined = dict(SHARED['nova_object.data']['extra_specs'], **{
            'aggregate_instance_extra_specs:ssd': 'true',
            'trait:CUSTOM_SSD': 'required'})
        self.deployment.define_flavor(SHARED, defined)
        propagated = _with_extra_specs(SHARED, defined)
        # The spec's image agrees with the instance's, but for ``mixed``.
        same_image = dep.image_system_metadata(min_disk=40)
        alone = self._add(SHARED, spec_flavor=propagated,
                          system_metadata=same_image)
        mixed = self._add(SHARED, spec_flavor=propagated)
        neither = self._add(SHARED, spec_flavor=_with_extra_specs(
            SHARED, {'hw:cpu_policy': 'dedicated'}),
            system_metadata=same_image)
        cases, disagreements = 0, []
        for policy, written, kept in (
                ('report', {mixed, neither}, {alone, mixed}),
                ('instance', {alone, mixed}, set())):
            before = self.all_spec_texts()
            result = self.heal('--format', 'json', '--flavor-policy',
                               policy)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            after = self.all_spec_texts()
            self.assertEqual(sorted(written), sorted(
                uuid for uuid in after if after[uuid] != before[uuid]),
                result.stdout)
            for uuid in sorted(written):
                spec = objects.RequestSpec._from_db_object(
                    nova_context.get_admin_context(), objects.RequestSpec(),
                    {'id': 1, 'instance_uuid': uuid, 'spec': after[uuid]})
                wanted = (defined if uuid in kept else
                          self.flavors[uuid]['nova_object.data'][
                              'extra_specs'])
                found = self._flavor_disagreements(uuid, spec, wanted)
                cases += 10
                disagreements.extend('%s %s' % (policy, d) for d in found)
                self._assert_matches_nova_but_flavor(uuid, spec)
        base.record_summary(
            'propagated flavors, --flavor-policy report and instance: '
            '%d cases, %d disagreements' % (cases, len(disagreements)))
        self.assertEqual([], disagreements)

    def _flavor_disagreements(self, uuid, spec, extra_specs):
        """How the loaded spec's flavor differs from the one wanted."""
        flavor = self._nova_instance(uuid).flavor
        found = ['%s %s: %r, wanted %r' % (uuid, field,
                                           getattr(spec.flavor, field),
                                           getattr(flavor, field))
                 for field in ('id', 'name', 'flavorid', 'vcpus',
                               'memory_mb', 'root_gb', 'ephemeral_gb',
                               'swap', 'disabled')
                 if getattr(flavor, field) != getattr(spec.flavor, field)]
        if spec.flavor.extra_specs != extra_specs:
            found.append('%s extra_specs: %r, wanted %r' % (
                uuid, spec.flavor.extra_specs, extra_specs))
        return found

    def _assert_matches_nova_but_flavor(self, uuid, spec):
        """The image and the rest as Nova derives them from the instance."""
        instance = self._nova_instance(uuid)
        image = objects.ImageMeta.from_instance(instance)
        self.assertEqual(_props(image.properties),
                         _props(spec.image.properties), uuid)
        self.assertEqual(dep.PROJECT_ID, spec.project_id)
        self.assertEqual(dep.USER_ID, spec.user_id)

    def _assert_release_versions(self, document):
        """Every object in a healed spec is one the release loads."""
        stack = [document]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                name = item.get('nova_object.name')
                if name in ('RequestSpec', 'ImageMetaProps'):
                    self.assertEqual('%d.%d' % base.RELEASE.newest(name),
                                     item['nova_object.version'], name)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)

    def _assert_matches_nova(self, uuid, spec):
        instance = self._nova_instance(uuid)
        flavor = instance.flavor
        for field in ('id', 'name', 'flavorid', 'vcpus', 'memory_mb',
                      'root_gb', 'ephemeral_gb', 'swap', 'extra_specs'):
            self.assertEqual(getattr(flavor, field),
                             getattr(spec.flavor, field), (uuid, field))
        image = objects.ImageMeta.from_instance(instance)
        if image.obj_attr_is_set('id'):
            self.assertEqual(image.id, spec.image.id, uuid)
        for field in ('min_ram', 'disk_format', 'container_format'):
            self.assertEqual(getattr(image, field),
                             getattr(spec.image, field), (uuid, field))
        self.assertEqual(_props(image.properties),
                         _props(spec.image.properties), uuid)
        expected = hardware.numa_get_constraints(flavor, image)
        self.assertEqual(_cells(expected), _cells(spec.numa_topology), uuid)
        aliases = sorted((r.alias_name, r.count) for r in
                         spec.pci_requests.requests if r.alias_name)
        wanted = sorted((r['alias_name'], r['count'])
                        for r in self._extra_pci(uuid))
        self.assertEqual(wanted, aliases, uuid)
        volume_backed = bool(self.records[uuid].get('block_devices'))
        self.assertEqual(volume_backed, spec.is_bfv, uuid)
        self.assertEqual(dep.PROJECT_ID, spec.project_id)
        self.assertEqual(dep.USER_ID, spec.user_id)

    def _extra_pci(self, uuid):
        text = self.records[uuid].get('extra_pci_requests')
        return json.loads(text) if text else []


def _with_extra_specs(flavor, extra_specs):
    """A copy of Flavor primitive ``flavor`` with other extra specs."""
    flavor = json.loads(json.dumps(flavor))
    flavor['nova_object.data']['extra_specs'] = dict(extra_specs)
    return flavor


def _props(properties):
    return {name: getattr(properties, name) for name in properties.fields
            if properties.obj_attr_is_set(name)}


def _cells(topology):
    if topology is None:
        return None
    return ([(cell.cpuset, cell.pcpuset, cell.memory, cell.pagesize,
              cell.cpu_policy, cell.cpu_thread_policy)
             for cell in topology.cells], topology.emulator_threads_policy)


class PrunedHintsTest(base.CommandInItsOwnProcess, base.NovaTestCase,
                      deployment_case.DeploymentTestCase):
    """Pruned specs load in Nova, other hints and fields unchanged."""

    def _hinted(self, hints):
        return self.deployment.add_instance(
            self.cell1, SHARED, system_metadata=dep.image_system_metadata(
                PROPS, min_disk=40),
            spec_fields={'version': '%d.%d' % base.RELEASE.spec_version,
                         'spec_image': _image(), 'scheduler_hints': hints})

    def test_pruned_specs_load_with_the_other_hints_unchanged(self):
        WrittenSpecsTest._run_release(self)
        alive = self._hinted({})
        gone = self.deployment.add_instance(self.cell1, SHARED, deleted=True,
                                            queued_for_delete=True, spec=None)
        archived = '0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e'
        others = {'different_host': [alive], 'query': ['[">=", "$vcpus", 1]'],
                  'build_near_host_ip': ['192.0.2.1'], 'cidr': ['/24']}
        expected = {
            self._hinted(dict(others, same_host=[gone])): dict(others),
            self._hinted(dict(others, same_host=[alive, archived])):
                dict(others, same_host=[alive]),
            self._hinted({'same_host': [gone, archived]}): {},
        }
        originals = {uuid: self.deployment.spec_text(uuid)
                     for uuid in expected}
        result = self.heal('--format', 'json', '--hint-policy', 'prune',
                           '--fields', 'scheduler_hints')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        context = nova_context.get_admin_context()
        disagreements, cases = [], 0
        for uuid, hints in sorted(expected.items()):
            ours, before = (objects.RequestSpec._from_db_object(
                context, objects.RequestSpec(),
                {'id': 1, 'instance_uuid': uuid, 'spec': text})
                for text in (self.deployment.spec_text(uuid),
                             originals[uuid]))
            for field in sorted(objects.RequestSpec.fields):
                cases += 1
                mine = _loaded(ours, field)
                wanted = (hints if field == 'scheduler_hints'
                          else _loaded(before, field))
                if mine != wanted:
                    disagreements.append('%s %s: nova-heal %r, expected %r'
                                         % (uuid, field, mine, wanted))
        summary = ('same_host pruned (%s): %d rows, %d cases, '
                   '%d disagreements' % (self.db.name, len(expected), cases,
                                         len(disagreements)))
        base.record_summary(summary)
        self.assertEqual([], disagreements, summary)


def _loaded(spec, field):
    """A loaded RequestSpec field, comparable (None when unset)."""
    if not spec.obj_attr_is_set(field):
        return None
    value = getattr(spec, field)
    if hasattr(value, 'obj_to_primitive'):
        return value.obj_to_primitive()
    return value
