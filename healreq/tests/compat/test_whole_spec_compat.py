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


"""Zone pins, server groups and recreated specs, against Nova's own code.

A deployment holds pins that differ from the instance's zone, members of
server groups whose spec lost the group (or its hint), and instances
without a spec. The real command heals it (``--create-missing``, under
each ``--az-policy``). Every row it wrote or inserted is then loaded by
the installed Nova (``RequestSpec.get_by_instance_uuid``, its API
database code pointed at the deployment's, so that the group is read
again from ``instance_groups``) and compared, field by field after
loading, with what that Nova's ``RequestSpec.from_components`` builds
from the same instance record, saved and loaded the same way: the image
from system metadata (``ImageMeta.from_instance``), the embedded flavor,
``numa_get_constraints``, the instance's PCI requests, the group read by
uuid with its hint, the zone the policy gives, the owner. A group
nova-heal wrote, and every field of an inserted row, are also compared as
stored with the primitives Nova would store.
"""

import datetime
import json

import sqlalchemy as sa

from healreq.db import tables
from healreq.testing import deployment as dep
from healreq.tests.compat import base
from healreq.tests.compat import deliberate
from healreq.tests.compat import flavors
from healreq.tests.functional import deployment_case

try:
    from nova import context as nova_context
    from nova.db.api import api as api_db_api
    from nova import objects
    from nova.objects import base as objects_base
    from nova.virt import hardware
    from oslo_db.sqlalchemy import enginefacade
    from oslo_db.sqlalchemy import test_fixtures as db_fixtures
except ImportError:  # pragma: no cover - depends on the environment
    objects = None

DATA = 'nova_object.data'
CHANGES = 'nova_object.changes'
SHOWN = 20

SHARED = dep.flavor(10, 'g1.shared', vcpus=2, memory_mb=4096, root_gb=40,
                    extra_specs={'hw:cpu_policy': 'shared'})
PINNED = dep.flavor(11, 'c1.pinned', vcpus=4, memory_mb=4096, root_gb=40,
                    extra_specs={'hw:cpu_policy': 'dedicated',
                                 'hw:numa_nodes': '2',
                                 'hw:mem_page_size': 'large'})
PROPS = {'hw_architecture': 'x86_64', 'hw_disk_bus': 'scsi',
         'hw_scsi_model': 'virtio-scsi', 'os_distro': 'ubuntu'}
NUMA_PROPS = dict(PROPS, hw_mem_page_size='2048',
                  hw_cpu_thread_policy='prefer')
OTHER_HINTS = {'different_host': ['0f7e5c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b']}


class WholeSpecCompatTest(base.CommandInItsOwnProcess, base.NovaTestCase,
                          deployment_case.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        self._nova_reads_the_api_database()
        self._build()

    def _nova_reads_the_api_database(self):
        """Point Nova's API database code at the deployment's database."""
        facade = enginefacade.transaction_context()
        facade.configure(connection=self.cells.api_url())
        self.useFixture(db_fixtures.ReplaceEngineFacadeFixture(
            api_db_api.context_manager, facade))
        self.addCleanup(lambda: facade.writer.get_engine().dispose())

    def _add(self, cell, cur, case, group=None, **kwargs):
        """Add an instance; ``case`` names what its spec holds.

        It runs in az1 (compute-1's zone) unless ``availability_zone``
        says otherwise.
        """
        kwargs.setdefault('availability_zone', 'az1')
        kwargs.setdefault('system_metadata', dep.image_system_metadata(
            PROPS, min_disk=cur[DATA]['root_gb']))
        spec_fields = {'version': '%d.%d' % base.RELEASE.spec_version,
                       'spec_image': dep.image(
                           properties=PROPS, props_version='%d.%d'
                           % base.RELEASE.props_version)}
        spec_fields.update(kwargs.pop('spec_fields', {}))
        if kwargs.get('spec', 'build') == 'build':
            kwargs['spec_fields'] = spec_fields
        uuid = self.deployment.add_instance(cell, cur, **kwargs)
        self.instances[uuid] = dict(kwargs, cur=cur, case=case, group=group)
        return uuid

    def _group(self, name, policy, rules, members):
        """A group of ``members`` (instance uuids).

        Its policy row's ``rules`` text is ``rules`` (None: NULL, as
        groups created before rules existed hold).
        """
        uuid = self.deployment.add_group(name, policy=policy,
                                         members=members)
        t = tables.instance_group_policy
        with self.deployment.api_engine.begin() as conn:
            group_id = conn.execute(sa.select(tables.instance_groups.c.id)
                                    .where(tables.instance_groups.c.uuid
                                           == uuid)).scalar()
            conn.execute(t.update().where(t.c.group_id == group_id)
                         .values(rules=rules))
        for member in members:
            self.instances[member]['group'] = uuid
        return uuid

    def _lose_group(self, uuid, group, hints):
        """Store ``group`` and ``hints`` in the spec of ``uuid``."""
        spec = json.loads(self.deployment.spec_text(uuid))
        spec[DATA]['instance_group'] = group
        spec[DATA]['scheduler_hints'] = hints
        self.deployment.set_spec(uuid, json.dumps(spec))

    def _build(self):
        self.instances = {}
        for cell in self.deployment.cells:
            if cell.engine is not None:
                with cell.engine.begin() as conn:
                    conn.execute(tables.services.update().values(
                        version=base.RELEASE.service_version))
        self.deployment.add_aggregate('agg-1', 'az1', ['compute-1'])
        self.deployment.add_aggregate('agg-2', 'az2', ['compute-2'])
        moved = dict(host='compute-2', availability_zone='az2')
        pin = {'availability_zone': 'az1'}
        # Pins a forced move left behind, alone or with other drift.
        self._add(self.cell1, SHARED, 'pin', spec_fields=pin, **moved)
        self._add(self.cell2, PINNED, 'pin+numa', spec_fields=pin,
                  system_metadata=dep.image_system_metadata(
                      NUMA_PROPS, min_disk=40), **moved)
        self._add(self.cell1, flavors.GPU, 'pin+pci', spec_fields=pin,
                  extra_pci_requests=json.dumps(flavors.T4_REQUEST), **moved)
        self._add(self.cell1, SHARED, 'pinned alike', spec_fields=pin)
        # Members whose spec lost the group or its hint.
        null = self._add(self.cell1, SHARED, 'null group, no hint')
        nameless = self._add(self.cell2, SHARED, 'group without uuid')
        no_hint = self._add(self.cell1, flavors.PCPU, 'group without its hint')
        peer = self._add(self.cell2, SHARED, 'intact member')
        aff_null = self._add(self.cell1, PINNED, 'null group+numa',
                             system_metadata=dep.image_system_metadata(
                                 NUMA_PROPS, min_disk=40))
        aff_no_hint = self._add(self.cell2, SHARED, 'no hint, no hints')
        soft_null = self._add(self.cell1, SHARED, 'null group, hint kept',
                              **moved)
        old_null = self._add(self.cell2, SHARED, 'null group (old group)')
        null_hints = self._add(self.cell1, SHARED, 'null group, null hints')
        no_policy = self._add(self.cell2, SHARED, 'null group (no policy)')
        # Instances without a spec.
        plain = self._add(self.cell1, SHARED, 'missing', spec=None)
        numa = self._add(self.cell2, PINNED, 'missing, numa', spec=None,
                         system_metadata=dep.image_system_metadata(
                             NUMA_PROPS, min_disk=40), **moved)
        gpu = self._add(self.cell1, flavors.GPU, 'missing, pci', spec=None,
                        extra_pci_requests=json.dumps(flavors.T4_REQUEST))
        self._add(self.cell2, flavors.PCPU, 'missing, volume', spec=None,
                  image_ref='', block_devices=[{}], **moved)
        web = self._group('web', 'anti-affinity',
                          '{"max_server_per_host": "1"}',
                          [null, nameless, no_hint, peer, numa])
        db = self._group('db', 'affinity', '{}', [aff_null, aff_no_hint, gpu])
        # Updated once, with sub-second times as SQLite keeps them.
        t = tables.instance_groups
        with self.deployment.api_engine.begin() as conn:
            conn.execute(t.update().where(t.c.uuid == db).values(
                created_at=datetime.datetime(2025, 3, 4, 5, 6, 7, 890123),
                updated_at=datetime.datetime(2025, 6, 7, 8, 9, 10, 11)))
        batch = self._group('batch', 'soft-anti-affinity',
                            '{"max_server_per_host": 2}', [soft_null])
        self._group('old', 'soft-affinity', None, [old_null, plain])
        self.instances[no_policy]['group'] = self.deployment.add_group(
            'bare', policy=None, members=[no_policy])
        self._group('api', 'anti-affinity', '{}', [null_hints])
        nameless_group = dep.stored_group(web, 'web')
        del nameless_group[DATA]['uuid']
        self._lose_group(null, None, {})
        self._lose_group(nameless, nameless_group, {})
        self._lose_group(no_hint, dep.stored_group(web, 'web'),
                         dict(OTHER_HINTS))
        self._lose_group(peer, dep.stored_group(web, 'web'), {'group': [web]})
        self._lose_group(aff_null, None, {})
        self._lose_group(aff_no_hint,
                         dep.stored_group(db, 'db', policy='affinity'), {})
        self._lose_group(soft_null, None, {'group': [batch]})
        self._lose_group(old_null, None, {})
        self._lose_group(null_hints, None, None)
        self._lose_group(no_policy, None, {})
        self.originals = self.all_spec_texts()

    # -- the heal and the comparison -----------------------------------

    def _heal(self, policy):
        """Heal with ``policy``; return the uuids of the written rows."""
        result, document = self.heal_json('--create-missing', '--az-policy',
                                          policy)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(base.RELEASE.series, document['release']['series'])
        healed = {r['instance_uuid'] for r in document['results']
                  if r['status'] == 'healed'}
        after = self.all_spec_texts()
        written = {uuid for uuid, text in after.items()
                   if self.originals.get(uuid) != text}
        self.assertEqual(healed, written)
        expected = {uuid for uuid, i in self.instances.items()
                    if i['case'] not in ('pinned alike', 'intact member')
                    and not (i['case'] == 'pin' and policy == 'report')}
        self.assertEqual(sorted(expected), sorted(written))
        return written

    def _expected_zone(self, uuid, policy):
        """The zone Nova should find pinned, per --az-policy."""
        instance = self.instances[uuid]
        current = instance.get('availability_zone', 'az1')
        if uuid not in self.originals:
            return None if policy == 'unpin' else current
        pinned = json.loads(self.originals[uuid])[DATA]['availability_zone']
        if pinned is None or pinned == current or policy == 'report':
            return pinned
        return current if policy == 'repin' else None

    def _nova_instance(self, uuid):
        instance = self.instances[uuid]
        record = objects.Instance(
            uuid=uuid, image_ref=instance.get('image_ref', dep.IMAGE_ID),
            system_metadata=dict(instance['system_metadata']),
            project_id=dep.PROJECT_ID, user_id=dep.USER_ID,
            availability_zone=instance.get('availability_zone', 'az1'))
        record.flavor = objects.Flavor.obj_from_primitive(
            json.loads(dep.instance_flavors(instance['cur']))['cur'])
        return record

    def _from_components(self, uuid, policy):
        """What Nova builds from the instance record, as create() stores it.

        Returns the stored text. Request inputs the instance record does
        not hold (other scheduler hints, security groups) are those of the
        spec before the heal; a recreated spec has none.
        """
        instance = self.instances[uuid]
        record = self._nova_instance(uuid)
        image = objects.ImageMeta.from_instance(record)
        hints, security_groups = {}, None
        if uuid in self.originals:
            original = json.loads(self.originals[uuid])[DATA]
            hints = {k: v for k, v in
                     (original['scheduler_hints'] or {}).items()
                     if k != 'group'}
            security_groups = objects.SecurityGroupList.obj_from_primitive(
                original['security_groups'])
        group = None
        if instance['group']:
            group = objects.InstanceGroup.get_by_uuid(self.context,
                                                      instance['group'])
            hints['group'] = instance['group']
        spec = objects.RequestSpec.from_components(
            self.context, uuid, image, record.flavor,
            hardware.numa_get_constraints(record.flavor, image),
            objects.InstancePCIRequests.obj_from_db(
                self.context, uuid, instance.get('extra_pci_requests', '[]')),
            {'scheduler_hints': hints} if hints else {}, group,
            self._expected_zone(uuid, policy),
            security_groups=security_groups, project_id=record.project_id,
            user_id=record.user_id)
        # The API sets it after from_components (compute_utils rule).
        spec.is_bfv = bool(instance.get('block_devices'))
        return spec._get_update_primitives()['spec']

    def _compare(self, policy):
        written = self._heal(policy)
        cases, disagreements, excluded = 0, [], {}

        def case(uuid, field, ours, theirs, name=None):
            nonlocal cases
            cases += 1
            if ours == theirs:
                return
            if name is not None and deliberate.applies(name, base.RELEASE):
                excluded[name] = excluded.get(name, 0) + 1
                return
            disagreements.append('%s (%s) %s: nova-heal %r, Nova %r' % (
                uuid, self.instances[uuid]['case'], field, ours, theirs))

        for uuid in sorted(written):
            text = self.deployment.spec_text(uuid)
            ours = objects.RequestSpec.get_by_instance_uuid(self.context,
                                                            uuid)
            nova_text = self._from_components(uuid, policy)
            theirs = objects.RequestSpec._from_db_object(
                self.context, objects.RequestSpec(),
                {'id': ours.id, 'instance_uuid': uuid, 'spec': nova_text})
            in_place = uuid in self.originals
            for field in sorted(objects.RequestSpec.fields):
                if field == 'image':
                    for part, values in _image_parts(ours, theirs).items():
                        case(uuid, part, *values,
                             name=deliberate.IMAGE_KEPT_IN_PLACE
                             if in_place and part != 'image' else None)
                elif field == 'pci_requests' and in_place:
                    # Compared without the instance uuid, then with it.
                    mine, nova = (_field(ours, field), _field(theirs, field))
                    case(uuid, field, _without_uuid(mine),
                         _without_uuid(nova))
                    case(uuid, field + '.instance_uuid',
                         mine.get('instance_uuid'), nova.get('instance_uuid'),
                         name=deliberate.PCI_UUID_KEPT_IN_PLACE)
                else:
                    case(uuid, field, _field(ours, field),
                         _field(theirs, field))
            # As stored: a recreated row whole, a healed one where written.
            stored, nova_stored = (json.loads(text)[DATA],
                                   json.loads(nova_text)[DATA])
            fields = sorted(set(stored) | set(nova_stored))
            if in_place:
                before = json.loads(self.originals[uuid])[DATA]
                fields = [f for f in ('availability_zone', 'instance_group',
                                      'scheduler_hints')
                          if stored[f] != before[f]]
            for field in fields:
                case(uuid, field + ' as stored',
                     _stored(stored.get(field, '<absent>')),
                     _stored(nova_stored.get(field, '<absent>')))
        summary = '%s (%s): %d rows, %d cases%s, %d disagreements' % (
            '--create-missing --az-policy %s' % policy, self.db.name,
            len(written), cases, deliberate.describe(excluded),
            len(disagreements))
        base.record_summary('zones, groups, recreated specs, ' + summary)
        if disagreements:
            self.fail('%s; first %d:\n%s' % (
                summary, min(SHOWN, len(disagreements)),
                '\n'.join(disagreements[:SHOWN])))
        self.assertGreater(cases, 25 * len(written))

    def test_report(self):
        self._compare('report')

    def test_repin(self):
        self._compare('repin')

    def test_unpin(self):
        self._compare('unpin')

    def test_deliberate_differences(self):
        """A spec healed in place keeps its boot-time image and PCI form.

        Nova's from_components, given the instance record, would give the
        system metadata's min_disk (the flavor's root disk when larger)
        and none of Glance's own image fields, and PCI requests carrying
        the instance uuid; nova-heal keeps what the API stored at boot,
        and neither reports nor rewrites it.
        """
        for name in (deliberate.IMAGE_KEPT_IN_PLACE,
                     deliberate.PCI_UUID_KEPT_IN_PLACE):
            self.assertTrue(deliberate.applies(name, base.RELEASE), name)
        written = self._heal('report')
        uuid = next(u for u in sorted(written)
                    if self.instances[u]['case'] == 'pin+pci')
        ours = objects.RequestSpec.get_by_instance_uuid(self.context, uuid)
        theirs = objects.RequestSpec._from_db_object(
            self.context, objects.RequestSpec(),
            {'id': ours.id, 'instance_uuid': uuid,
             'spec': self._from_components(uuid, 'report')})
        parts = _image_parts(ours, theirs)
        self.assertEqual(*parts['image'])
        self.assertEqual((10, flavors.GPU[DATA]['root_gb']),
                         parts['image.min_disk'])
        self.assertIn('name', parts['image (Glance only)'][0])
        self.assertEqual({}, parts['image (Glance only)'][1])
        mine, nova = (_field(ours, 'pci_requests'),
                      _field(theirs, 'pci_requests'))
        self.assertEqual(_without_uuid(mine), _without_uuid(nova))
        self.assertEqual((None, uuid), (mine.get('instance_uuid'),
                                        nova.get('instance_uuid')))
        # Only the pin the report policy leaves is left to report.
        result, document = self.heal_json('--dry-run', '--instance', uuid)
        self.assertEqual(['availability_zone'],
                         [c['field'] for c in document['results'][0][
                             'changes']])


def _normal(value):
    """A loaded value as plain data: objects by their set fields."""
    if isinstance(value, objects_base.ObjectListBase):
        return [_normal(item) for item in value.objects]
    if isinstance(value, objects_base.NovaObject):
        return {name: _normal(getattr(value, name))
                for name in sorted(value.fields)
                if value.obj_attr_is_set(name)}
    if isinstance(value, dict):
        return {key: _normal(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_normal(item) for item in value)
    if hasattr(value, 'isoformat'):
        return value.isoformat()
    return value


def _field(spec, name):
    if not spec.obj_attr_is_set(name):
        return '<unset>'
    return _normal(getattr(spec, name))


def _image_parts(ours, theirs):
    """The image of both specs in three parts.

    What from_instance derives but min_disk; min_disk; what only one side
    holds (Glance's fields).
    """
    mine, nova = _field(ours, 'image'), _field(theirs, 'image')
    derived = [key for key in nova if key != 'min_disk']
    return {
        'image': ({k: mine.get(k) for k in derived},
                  {k: nova[k] for k in derived}),
        'image.min_disk': (mine.get('min_disk'), nova.get('min_disk')),
        'image (Glance only)': (
            {k: v for k, v in mine.items() if k not in nova},
            {k: v for k, v in nova.items() if k not in mine}),
    }


def _without_uuid(requests):
    return {k: v for k, v in requests.items() if k != 'instance_uuid'}


def _stored(value):
    """A stored primitive without its change lists.

    They record only which fields the writer had set: Nova loads the same
    values with or without them.
    """
    if isinstance(value, dict):
        return {key: _stored(item) for key, item in value.items()
                if key != CHANGES}
    if isinstance(value, list):
        return [_stored(item) for item in value]
    return value
