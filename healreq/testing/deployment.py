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


"""Builders for realistic Nova deployments on real databases.

Used by the functional tests and by ``nova-heal demo``: they create the
table subset of ``healreq.db.tables`` and fill it with rows shaped the way
Nova 34 writes them (see the object formats in the README). For the pure
decision tests, instance_record builds what the walker reads about one
instance, without a database.
"""

import copy
import datetime
import json
import uuid as uuidlib

import sqlalchemy as sa

from healreq import clock
from healreq.db import placement_queries
from healreq.db import tables
from healreq.heal import decisions
from healreq import nova_constants

CELL0_UUID = nova_constants.CELL0_UUID
PROJECT_ID = '8f3c2b8a4e5d4f6a9b7c1d2e3f405162'
USER_ID = '5a6b7c8d9e0f41a2b3c4d5e6f7a8b9c0'
LONG_AGO = datetime.datetime(2024, 1, 10, 11, 26, 50)
IMAGE_ID = '3e1f7a52-9c0b-4d8e-a6f3-2b7c9d1e4f60'
IMAGE_PROPERTIES = {'hw_architecture': 'x86_64', 'os_distro': 'ubuntu'}
# The default of add_service's last_seen_up: the time of the call.
_NOW = object()
# The instance of instance_record, and the cell it is mapped to.
INSTANCE_UUID = '982c3ead-59b1-4acd-876b-d55166d8e7f0'
CELL_MAPPING = {'id': 1, 'uuid': '7cad283c-1d2e-4f5a-8b9c-0d1e2f3a4b5c',
                'name': 'cell1'}


def envelope(name, version, data, changes=None):
    document = {'nova_object.name': name, 'nova_object.namespace': 'nova',
                'nova_object.version': version, 'nova_object.data': data}
    if changes:
        document['nova_object.changes'] = list(changes)
    return document


def flavor(flavor_id, name, vcpus=4, memory_mb=8192, root_gb=80,
           ephemeral_gb=0, swap=0, flavorid=None, extra_specs=None,
           description=None, version='1.2'):
    """A Flavor primitive as Nova embeds it."""
    data = {
        'id': flavor_id, 'name': name, 'memory_mb': memory_mb,
        'vcpus': vcpus, 'root_gb': root_gb, 'ephemeral_gb': ephemeral_gb,
        'flavorid': flavorid or '%06d' % flavor_id, 'swap': swap,
        'rxtx_factor': 1.0, 'vcpu_weight': 0, 'disabled': False,
        'is_public': True, 'extra_specs': dict(extra_specs or {}),
        'description': description, 'created_at': '2023-03-29T15:06:03Z',
        'updated_at': None, 'deleted_at': None, 'deleted': False,
    }
    if version < '1.2':
        del data['description']
    return envelope('Flavor', version, data, ['extra_specs'])


def image(image_id=IMAGE_ID, properties=None, props_version='1.44',
          min_ram=0):
    """An ImageMeta primitive as the API builds it from Glance at boot."""
    return envelope('ImageMeta', '1.8', {
        'id': image_id, 'name': 'ubuntu-24.04-server', 'status': 'active',
        'checksum': 'a3f1c9e0b7d24e6f8c5b1a2d3e4f5a6b',
        'owner': 'b18c2da2dbfa45138fb6077eafb2aa51', 'size': 2361393152,
        'container_format': 'bare', 'disk_format': 'raw',
        'min_ram': min_ram, 'min_disk': 10,
        'created_at': '2025-09-01T10:00:00Z',
        'updated_at': '2025-09-01T10:05:28Z',
        'properties': envelope(
            'ImageMetaProps', props_version,
            dict(IMAGE_PROPERTIES if properties is None else properties))},
        ['id', 'properties'])


def image_system_metadata(properties=None, image_id=IMAGE_ID, min_ram=0,
                          min_disk=80):
    """``instance_system_metadata`` of an instance booted from an image.

    ``properties`` are Glance's raw (string) property values.
    """
    rows = {'image_%s' % key: str(value) for key, value in (
        IMAGE_PROPERTIES if properties is None else properties).items()}
    rows.update({'image_min_ram': str(min_ram),
                 'image_min_disk': str(min_disk),
                 'image_disk_format': 'raw',
                 'image_container_format': 'bare',
                 'image_base_image_ref': image_id,
                 'owner_user_name': 'demo', 'owner_project_name': 'demo',
                 'boot_roles': 'member,reader'})
    return rows


def request_spec(instance_uuid, spec_flavor, spec_id=None,
                 project_id=PROJECT_ID, user_id=USER_ID,
                 availability_zone=None, version='1.15', spec_image=None,
                 numa_topology=None, pci_requests=None, is_bfv=False,
                 instance_group=None, scheduler_hints=None):
    """A RequestSpec primitive shaped like one Nova 34 saved."""
    data = {
        'image': image() if spec_image is None else spec_image,
        'numa_topology': numa_topology,
        'pci_requests': pci_requests or envelope(
            'InstancePCIRequests', '1.1', {'requests': []}, ['requests']),
        'project_id': project_id,
        'user_id': user_id,
        'availability_zone': availability_zone,
        'flavor': spec_flavor,
        'num_instances': 1,
        'ignore_hosts': None,
        'force_hosts': None,
        'force_nodes': None,
        'requested_destination': None,
        'retry': None,
        'limits': envelope('SchedulerLimits', '1.0', {
            'numa_topology': None, 'vcpu': None, 'disk_gb': None,
            'memory_mb': None}),
        'instance_group': instance_group,
        'scheduler_hints': {} if scheduler_hints is None else scheduler_hints,
        'instance_uuid': instance_uuid,
        'security_groups': envelope('SecurityGroupList', '1.1', {
            'objects': [envelope('SecurityGroup', '1.2',
                                 {'name': 'default'}, ['name'])]},
            ['objects']),
        'is_bfv': is_bfv,
        'requested_resources': [],
    }
    if spec_id is not None:
        data['id'] = spec_id
    return envelope('RequestSpec', version, data,
                    ['image', 'flavor', 'numa_topology', 'pci_requests',
                     'requested_resources', 'security_groups'])


def stored_group(uuid, name, policy='anti-affinity', rules=None,
                 group_id=1):
    """An InstanceGroup primitive as Nova 34 stores one in a spec."""
    return envelope('InstanceGroup', '1.11', {
        'id': group_id, 'user_id': USER_ID, 'project_id': PROJECT_ID,
        'uuid': uuid, 'name': name, 'policies': [policy], 'members': None,
        'hosts': None, 'policy': policy, '_rules': dict(rules or {}),
        'created_at': '2024-01-10T11:26:50Z', 'updated_at': None,
        'deleted_at': None, 'deleted': False}, ['members', 'hosts'])


def instance_flavors(cur, old=None, new=None):
    """``instance_extra.flavor`` text; ``description`` nulled as Nova does."""
    def nulled(primitive):
        if primitive is None:
            return None
        primitive = json.loads(json.dumps(primitive))
        if 'description' in primitive['nova_object.data']:
            primitive['nova_object.data']['description'] = None
        return primitive
    return json.dumps({'cur': nulled(cur), 'old': nulled(old),
                       'new': nulled(new)})


def instance_record(cur, uuid=INSTANCE_UUID, old=None, new=None,
                    spec='build', spec_flavor=None, extras='build',
                    extra_flavor=None, extra_columns=None, mapping='build',
                    system_metadata=(), migrations=(),
                    failed_resize_flavor_ids=frozenset(), **instance_values):
    """The decisions.InstanceRecord the walker reads for one instance.

    By default a live instance of flavor ``cur`` (a Flavor primitive),
    active on compute-1 and mapped to CELL_MAPPING, whose request spec
    holds ``spec_flavor`` (default ``cur``). ``instance_values`` override
    columns of its instances row. ``spec`` is 'build', None (no
    request_specs row) or the stored text. ``extras`` is 'build' (one
    instance_extra row: ``extra_flavor``, by default the text of ``cur``,
    ``old`` and ``new``, then ``extra_columns``) or the list of rows;
    ``mapping`` is 'build', None or the instance_mappings row.
    ``system_metadata`` is a ``key -> value`` dict (no row deleted) or
    the ``(key, value, deleted)`` tuples in row id order.
    """
    data = cur['nova_object.data']
    instance = {
        'id': 17, 'uuid': uuid, 'deleted': 0, 'hidden': False,
        'vm_state': 'active', 'task_state': None, 'host': 'compute-1',
        'updated_at': LONG_AGO, 'instance_type_id': data['id'],
        'vcpus': data['vcpus'], 'memory_mb': data['memory_mb'],
        'root_gb': data['root_gb'], 'ephemeral_gb': data['ephemeral_gb'],
        'project_id': PROJECT_ID, 'user_id': USER_ID, 'image_ref': IMAGE_ID,
        'availability_zone': 'nova',
    }
    instance.update(instance_values)
    if mapping == 'build':
        mapping = {'instance_uuid': uuid, 'cell_id': CELL_MAPPING['id'],
                   'queued_for_delete': False}
    if extras == 'build':
        if extra_flavor is None:
            extra_flavor = instance_flavors(cur, old, new)
        extras = [dict({'id': 5, 'instance_uuid': uuid,
                        'flavor': extra_flavor}, **(extra_columns or {}))]
    if spec == 'build':
        spec = json.dumps(request_spec(
            uuid, copy.deepcopy(spec_flavor or cur), spec_id=7))
    if isinstance(system_metadata, dict):
        system_metadata = [(key, value, 0)
                           for key, value in system_metadata.items()]
    return decisions.InstanceRecord(
        instance=instance, mapping=mapping, extras=extras,
        migrations=list(migrations),
        spec_row=None if spec is None else {
            'id': 7, 'instance_uuid': uuid, 'spec': spec},
        failed_resize_flavor_ids=frozenset(failed_resize_flavor_ids),
        system_metadata=list(system_metadata))


class Cell(object):
    def __init__(self, uuid, name, url, engine, cell_id):
        self.uuid = uuid
        self.name = name
        self.url = url
        self.engine = engine
        self.id = cell_id


class Deployment(object):
    """An API database plus cells, built on real engines.

    ``api_url`` and each cell URL must point to empty databases; the
    schema subset is created on them.
    """

    def __init__(self, api_url):
        self.api_engine = sa.create_engine(api_url)
        tables.api_metadata.create_all(self.api_engine)
        self.cells = []

    def dispose(self):
        self.api_engine.dispose()
        for cell in self.cells:
            if cell.engine is not None:
                cell.engine.dispose()

    def add_cell(self, name, url, stored_url=None, uuid=None,
                 create_schema=True, service_version=74):
        """Map a cell; ``stored_url`` is what cell_mappings holds.

        The cell registers a nova-conductor and a nova-compute of
        ``service_version`` (74: Nova 34), unless that is None.
        """
        uuid = uuid or str(uuidlib.uuid4())
        engine = None
        if create_schema:
            engine = sa.create_engine(url)
            tables.cell_metadata.create_all(engine)
            if service_version is not None:
                for binary in ('nova-conductor', 'nova-compute'):
                    add_service(engine, binary, service_version,
                                host='%s-%s' % (name, binary))
        with self.api_engine.begin() as conn:
            result = conn.execute(tables.cell_mappings.insert().values(
                uuid=uuid, name=name, created_at=LONG_AGO,
                transport_url='rabbit://nova:secret@mq:5672/',
                database_connection=stored_url or url, disabled=False))
            cell_id = result.inserted_primary_key[0]
        cell = Cell(uuid, name, url, engine, cell_id)
        self.cells.append(cell)
        return cell

    def add_instance(self, cell, cur, spec_flavor=None, old=None, new=None,
                     uuid=None, vm_state='active', task_state=None,
                     host='compute-1', hidden=False, deleted=False,
                     updated_at=LONG_AGO, instance_type_id=None,
                     spec='build', extra='build', mapping=True,
                     mapping_cell_id=None, queued_for_delete=False,
                     migrations=(), image_ref=IMAGE_ID,
                     system_metadata=None, block_devices=(),
                     extra_numa_topology=None, extra_pci_requests='[]',
                     spec_fields=None, availability_zone='nova'):
        """Insert one instance with its extra row, mapping and spec.

        ``spec``/``extra`` may be 'build' (realistic rows), None (no row)
        or a literal text to store. ``migrations`` and ``block_devices``
        are dicts of their tables' columns; ``system_metadata`` a dict
        (default: that of the default image). ``spec_fields`` are keyword
        arguments of ``request_spec`` for a built spec.
        """
        uuid = uuid or str(uuidlib.uuid4())
        cur_data = cur['nova_object.data']
        if system_metadata is None:
            system_metadata = image_system_metadata(
                min_disk=cur_data['root_gb'])
        with cell.engine.begin() as conn:
            instance_id = _insert_instance(
                conn, uuid, cur_data, updated_at=updated_at,
                image_ref=image_ref, host=host, vm_state=vm_state,
                task_state=task_state, hidden=hidden,
                instance_type_id=instance_type_id,
                availability_zone=availability_zone)
            if deleted:
                conn.execute(tables.instances.update().where(
                    tables.instances.c.id == instance_id).values(
                    deleted=instance_id, deleted_at=LONG_AGO))
            if extra is not None:
                conn.execute(tables.instance_extra.insert().values(
                    instance_uuid=uuid, created_at=LONG_AGO, deleted=0,
                    flavor=(instance_flavors(cur, old, new)
                            if extra == 'build' else extra),
                    numa_topology=extra_numa_topology,
                    pci_requests=extra_pci_requests))
            _insert_instance_children(conn, uuid, system_metadata,
                                      block_devices, migrations)
        with self.api_engine.begin() as conn:
            if mapping:
                conn.execute(tables.instance_mappings.insert().values(
                    instance_uuid=uuid, created_at=LONG_AGO,
                    cell_id=mapping_cell_id or cell.id,
                    project_id=PROJECT_ID, user_id=USER_ID,
                    queued_for_delete=queued_for_delete))
            if spec is not None:
                if spec == 'build':
                    spec = json.dumps(request_spec(
                        uuid, spec_flavor or cur, **(spec_fields or {})))
                conn.execute(tables.request_specs.insert().values(
                    instance_uuid=uuid, spec=spec, created_at=LONG_AGO))
        return uuid

    def add_group(self, name, policy='anti-affinity', rules=None,
                  members=(), uuid=None):
        """A server group as Nova's API creates one; return its uuid.

        ``members`` are instance uuids.
        """
        uuid = uuid or str(uuidlib.uuid4())
        with self.api_engine.begin() as conn:
            group_id = conn.execute(tables.instance_groups.insert().values(
                uuid=uuid, name=name, user_id=USER_ID, project_id=PROJECT_ID,
                created_at=LONG_AGO)).inserted_primary_key[0]
            if policy is not None:
                conn.execute(tables.instance_group_policy.insert().values(
                    group_id=group_id, policy=policy, created_at=LONG_AGO,
                    rules=json.dumps(rules or {})))
            for member in members:
                conn.execute(tables.instance_group_member.insert().values(
                    group_id=group_id, instance_uuid=member,
                    created_at=LONG_AGO))
        return uuid

    def add_aggregate(self, name, zone=None, hosts=(), uuid=None):
        """A host aggregate, in availability zone ``zone`` if given.

        Returns its uuid.
        """
        uuid = uuid or str(uuidlib.uuid4())
        with self.api_engine.begin() as conn:
            aggregate_id = conn.execute(tables.aggregates.insert().values(
                uuid=uuid, name=name,
                created_at=LONG_AGO)).inserted_primary_key[0]
            if zone is not None:
                conn.execute(tables.aggregate_metadata.insert().values(
                    aggregate_id=aggregate_id, key='availability_zone',
                    value=zone, created_at=LONG_AGO))
            for host in hosts:
                conn.execute(tables.aggregate_hosts.insert().values(
                    aggregate_id=aggregate_id, host=host,
                    created_at=LONG_AGO))
        return uuid

    def define_flavor(self, flavor, extra_specs=None):
        """The definition of Flavor primitive ``flavor`` in the API database.

        Its extra specs are ``extra_specs`` if given (an operator changed
        them since instances embedded the flavor), else the primitive's.
        """
        data = flavor['nova_object.data']
        specs = data['extra_specs'] if extra_specs is None else extra_specs
        with self.api_engine.begin() as conn:
            conn.execute(tables.flavors.insert().values(
                id=data['id'], name=data['name'],
                memory_mb=data['memory_mb'], vcpus=data['vcpus'],
                root_gb=data['root_gb'], ephemeral_gb=data['ephemeral_gb'],
                flavorid=data['flavorid'], swap=data['swap'],
                created_at=LONG_AGO))
            for key, value in sorted(specs.items()):
                conn.execute(tables.flavor_extra_specs.insert().values(
                    flavor_id=data['id'], key=key, value=value,
                    created_at=LONG_AGO))

    def spec_text(self, instance_uuid):
        """The stored spec text (None if there is no row)."""
        t = tables.request_specs
        with self.api_engine.connect() as conn:
            return conn.execute(sa.select(t.c.spec).where(
                t.c.instance_uuid == instance_uuid)).scalar()

    def set_spec(self, instance_uuid, text):
        t = tables.request_specs
        with self.api_engine.begin() as conn:
            conn.execute(t.update().where(
                t.c.instance_uuid == instance_uuid).values(spec=text))


def add_service(engine, binary, version, host='controller-1',
                last_seen_up=_NOW, forced_down=False, deleted=False):
    """Register a Nova service of ``version`` in a cell database.

    By default it is up: its last heartbeat is now. ``last_seen_up``
    None is a service that never reported; a datetime, its last report.
    """
    if last_seen_up is _NOW:
        last_seen_up = clock.utcnow()
    with engine.begin() as conn:
        result = conn.execute(tables.services.insert().values(
            host=host, binary=binary, topic=binary.replace('nova-', ''),
            report_count=1, version=version, deleted=0,
            forced_down=forced_down, last_seen_up=last_seen_up,
            created_at=LONG_AGO, updated_at=last_seen_up))
        if deleted:
            service_id = result.inserted_primary_key[0]
            conn.execute(tables.services.update().where(
                tables.services.c.id == service_id).values(
                deleted=service_id, deleted_at=LONG_AGO))


def add_wsgi_service(engine, version, host='api-1',
                     binary='nova-osapi_compute', created_at=_NOW,
                     updated_at=None, forced_down=False):
    """Register a service the way Nova 34's WSGI applications do.

    An application writes its row when it starts and never again: no
    heartbeat (``last_seen_up`` NULL, ``report_count`` 0). By default the
    row was created now; ``updated_at`` is its last restart, if any.
    """
    if created_at is _NOW:
        created_at = clock.utcnow()
    with engine.begin() as conn:
        conn.execute(tables.services.insert().values(
            host=host, binary=binary, topic=None, report_count=0,
            version=version, deleted=0, forced_down=forced_down,
            last_seen_up=None, created_at=created_at,
            updated_at=updated_at))


def _insert_instance(conn, uuid, cur_data, updated_at, image_ref, host,
                     vm_state, task_state, hidden, instance_type_id,
                     availability_zone):
    """Insert the instances row of a live instance; return its id."""
    if instance_type_id is None:
        instance_type_id = cur_data['id']
    result = conn.execute(tables.instances.insert().values(
        uuid=uuid, created_at=LONG_AGO, updated_at=updated_at,
        deleted=0, user_id=USER_ID, project_id=PROJECT_ID,
        image_ref=image_ref, host=host,
        node=host and host + '.example.org',
        instance_type_id=instance_type_id,
        memory_mb=cur_data['memory_mb'], vcpus=cur_data['vcpus'],
        root_gb=cur_data['root_gb'], ephemeral_gb=cur_data['ephemeral_gb'],
        vm_state=vm_state, task_state=task_state,
        availability_zone=availability_zone, hidden=hidden))
    return result.inserted_primary_key[0]


def _insert_instance_children(conn, uuid, system_metadata, block_devices,
                              migrations):
    """Insert an instance's system metadata, BDMs and migrations."""
    if system_metadata:
        conn.execute(tables.instance_system_metadata.insert(), [
            dict(instance_uuid=uuid, key=key, value=value, deleted=0,
                 created_at=LONG_AGO)
            for key, value in system_metadata.items()])
    for device in block_devices:
        values = dict(uuid=str(uuidlib.uuid4()), instance_uuid=uuid,
                      deleted=0, created_at=LONG_AGO, boot_index=0,
                      source_type='volume', destination_type='volume')
        values.update(device)
        conn.execute(tables.block_device_mapping.insert().values(**values))
    for migration in migrations:
        values = dict(uuid=str(uuidlib.uuid4()), instance_uuid=uuid,
                      deleted=0, created_at=LONG_AGO,
                      migration_type='resize', status='error')
        values.update(migration)
        conn.execute(tables.migrations.insert().values(**values))


def add_compute_node(engine, host, node=None, uuid=None,
                     hypervisor_type='QEMU', deleted=False,
                     numa_topology=None):
    """A compute node of a cell; return its uuid (its provider's uuid).

    ``node`` defaults to ``host.example.org``, as add_instance names it;
    ``numa_topology`` is stored as is (see host_topology).
    """
    uuid = uuid or str(uuidlib.uuid4())
    node = node or host + '.example.org'
    with engine.begin() as conn:
        result = conn.execute(tables.compute_nodes.insert().values(
            uuid=uuid, host=host, hypervisor_hostname=node,
            hypervisor_type=hypervisor_type, deleted=0,
            numa_topology=numa_topology, created_at=LONG_AGO))
        if deleted:
            row_id = result.inserted_primary_key[0]
            conn.execute(tables.compute_nodes.update().where(
                tables.compute_nodes.c.id == row_id).values(
                deleted=row_id, deleted_at=LONG_AGO))
    return uuid


def node_id(engine, uuid):
    """The id of the compute node of ``uuid``."""
    c = tables.compute_nodes
    with engine.connect() as conn:
        return conn.execute(sa.select(c.c.id).where(c.c.uuid == uuid)).scalar()


def add_pci_device(engine, node_uuid, address, status='available',
                   instance_uuid=None, deleted=False):
    """A PCI device (a VF) of the compute node ``node_uuid``."""
    with engine.begin() as conn:
        result = conn.execute(tables.pci_devices.insert().values(
            uuid=str(uuidlib.uuid4()), compute_node_id=node_id(
                engine, node_uuid), address=address, vendor_id='8086',
            product_id='154c', dev_type='type-VF', dev_id='pci_%s' % (
                address.replace(':', '_').replace('.', '_')),
            label='label_8086_154c', status=status,
            instance_uuid=instance_uuid, deleted=0, created_at=LONG_AGO))
        if deleted:
            row_id = result.inserted_primary_key[0]
            conn.execute(tables.pci_devices.update().where(
                tables.pci_devices.c.id == row_id).values(
                deleted=row_id, deleted_at=LONG_AGO))


def host_topology(cells, siblings=None):
    """A compute node's NUMATopology JSON: ``cells`` are pcpusets by id.

    Each cell also has its shared ``cpuset`` (none) and, from
    ``siblings`` ({cell id: [[cpu, cpu], ...]}), its thread siblings.
    """
    return json.dumps(envelope('NUMATopology', '1.2', {'cells': [
        envelope('NUMACell', '1.5', {
            'id': cell_id, 'cpuset': [], 'pcpuset': sorted(pcpus),
            'memory': 16384, 'cpu_usage': 0, 'memory_usage': 0,
            'pinned_cpus': [], 'siblings': [
                sorted(group) for group in (siblings or {}).get(cell_id,
                                                                [])],
            'mempages': [], 'network_metadata': None, 'socket': None})
        for cell_id, pcpus in sorted(cells.items())]}))


def pinned_topology(instance_uuid, pins, thread_policy=None, reserved=None,
                    policy='dedicated'):
    """An instance's InstanceNUMATopology JSON, pinned as a host fits it.

    ``pins`` maps a host NUMA cell id to ``{vcpu: pcpu}``; ``reserved``
    a cell id to its emulator threads' pCPUs.
    """
    cells = []
    for cell_id, pinning in sorted(pins.items()):
        cells.append(envelope('InstanceNUMACell', '1.6', {
            'id': cell_id, 'cpuset': [], 'pcpuset': sorted(pinning),
            'cpuset_reserved': sorted((reserved or {}).get(cell_id, []))
            or None,
            'memory': 1024, 'pagesize': None,
            'cpu_pinning_raw': {str(v): p for v, p in pinning.items()},
            'cpu_policy': policy, 'cpu_thread_policy': thread_policy}))
    return json.dumps(envelope('InstanceNUMATopology', '1.3', {
        'cells': cells, 'instance_uuid': instance_uuid,
        'emulator_threads_policy': None}))


class Placement(object):
    """A Placement database with the tables healreq reads, built empty.

    Standard resource classes are in ``resource_classes`` with their
    os-resource-classes ids, as Placement syncs them at start-up.
    """

    def __init__(self, url):
        self.engine = sa.create_engine(url)
        tables.placement_metadata.create_all(self.engine)
        self._providers = {}
        with self.engine.begin() as conn:
            if conn.dialect.name == 'mysql':
                conn.execute(sa.text(
                    "SET SESSION sql_mode='NO_AUTO_VALUE_ON_ZERO'"))
            conn.execute(tables.resource_classes.insert(), [
                dict(id=number, name=name, created_at=LONG_AGO)
                for number, name in enumerate(
                    placement_queries.STANDARD_RESOURCE_CLASSES)])
        self._classes = dict((name, number) for number, name in enumerate(
            placement_queries.STANDARD_RESOURCE_CLASSES))

    def dispose(self):
        self.engine.dispose()

    def add_custom_class(self, name):
        """A custom resource class, numbered from 10000 as Placement does."""
        number = 10000 + sum(1 for n in self._classes.values()
                             if n >= 10000)
        with self.engine.begin() as conn:
            conn.execute(tables.resource_classes.insert().values(
                id=number, name=name, created_at=LONG_AGO))
        self._classes[name] = number
        return number

    def add_provider(self, uuid, name=None, parent=None, generation=1):
        """A resource provider (a root, or below ``parent``); its uuid."""
        root = parent_id = None
        if parent is not None:
            parent_id = self._providers[parent]
            p = tables.resource_providers
            with self.engine.connect() as conn:
                root = conn.execute(sa.select(p.c.root_provider_id).where(
                    p.c.id == parent_id)).scalar()
        with self.engine.begin() as conn:
            provider_id = conn.execute(
                tables.resource_providers.insert().values(
                    uuid=uuid, name=name or uuid, generation=generation,
                    parent_provider_id=parent_id,
                    created_at=LONG_AGO)).inserted_primary_key[0]
            conn.execute(tables.resource_providers.update().where(
                tables.resource_providers.c.id == provider_id).values(
                root_provider_id=root or provider_id))
        self._providers[uuid] = provider_id
        return uuid

    def add_to_aggregate(self, provider, aggregate_uuid):
        """Put ``provider`` in the Placement aggregate of that uuid."""
        pa = tables.placement_aggregates
        with self.engine.begin() as conn:
            aggregate_id = conn.execute(sa.select(pa.c.id).where(
                pa.c.uuid == aggregate_uuid)).scalar()
            if aggregate_id is None:
                aggregate_id = conn.execute(pa.insert().values(
                    uuid=aggregate_uuid,
                    created_at=LONG_AGO)).inserted_primary_key[0]
            conn.execute(tables.resource_provider_aggregates.insert().values(
                resource_provider_id=self._providers[provider],
                aggregate_id=aggregate_id, created_at=LONG_AGO))

    def add_trait(self, provider, name):
        """Give ``provider`` the trait ``name``."""
        t = tables.traits
        with self.engine.begin() as conn:
            trait_id = conn.execute(sa.select(t.c.id).where(
                t.c.name == name)).scalar()
            if trait_id is None:
                trait_id = conn.execute(t.insert().values(
                    name=name, created_at=LONG_AGO)).inserted_primary_key[0]
            conn.execute(tables.resource_provider_traits.insert().values(
                resource_provider_id=self._providers[provider],
                trait_id=trait_id, created_at=LONG_AGO))

    def allocate(self, consumer, provider, resources):
        """Add ``resources`` ({class: amount}) of ``consumer`` on a provider.

        The provider is created if it does not exist yet.
        """
        if provider not in self._providers:
            self.add_provider(provider)
        with self.engine.begin() as conn:
            if conn.execute(sa.select(tables.consumers.c.id).where(
                    tables.consumers.c.uuid == consumer)).first() is None:
                conn.execute(tables.consumers.insert().values(
                    uuid=consumer, project_id=1, user_id=1, generation=1,
                    created_at=LONG_AGO))
            conn.execute(tables.allocations.insert(), [
                dict(resource_provider_id=self._providers[provider],
                     consumer_id=consumer,
                     resource_class_id=self._classes[name], used=amount,
                     created_at=LONG_AGO)
                for name, amount in sorted(resources.items())])
