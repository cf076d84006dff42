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


"""Build (or reuse) the benchmark deployment on MySQL/MariaDB.

An API database (with a cell0 mapping) and two cells, ``healreq_bench_<N>_
api``, ``_cell0``, ``_cell1`` and ``_cell2``, provisioned like the
functional tests' databases (oslo.db's ``provision.Backend``: the
``openstack_citest`` account on localhost, or
``OS_TEST_DBAPI_ADMIN_CONNECTION``). Rows are shaped by
``healreq.testing.deployment`` and written with bulk multi-row INSERTs.

What is built is a pure function of N and the position of each instance
(``plan``): the same N always gives the same rows, and the expected
results of every contender can be computed without reading them back.
A finished build is recorded in the ``healreq_bench_build`` table of the
API database (which no contender reads) and reused until ``--rebuild``.

Run alone: ``python benchmarks/build.py --instances 20000 [--rebuild]``.
"""

import argparse
import collections
import copy
import datetime
import json
import random
import sys
import time
import uuid as uuidlib

from oslo_db.sqlalchemy import provision
import sqlalchemy as sa

from healreq.db import tables
from healreq.objects import image as image_obj
from healreq.objects import image_primitive
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq.testing import deployment as dep

# Bump when the shape of the rows changes: older builds are rebuilt.
FORMAT = 5
SEED = 7919
# Instances generated, then inserted, per transaction.
CHUNK_INSTANCES = 1000
# Rows per multi-row INSERT statement group (executemany).
INSERT_ROWS = 2000

DATA = 'nova_object.data'
META_TABLE = 'healreq_bench_build'
CELL_NAMES = ('cell1', 'cell2')
DEFAULT_PROPS_VERSION = '1.44'

# Drift kinds (a few percent in all) and how often each is built.
FAILED_RESIZE = 'failed-resize'          # spec holds the failed target
FAILED_RESIZE_NUMA = 'failed-resize-numa'  # ... a pinned NUMA flavor
STALE_IMAGE = 'stale-image-property'     # image property set afterwards
DRIFT_SHARES = ((FAILED_RESIZE, 0.015), (FAILED_RESIZE_NUMA, 0.005),
                (STALE_IMAGE, 0.010))
FLAVOR_DRIFTS = (FAILED_RESIZE, FAILED_RESIZE_NUMA)

_COMMON_SPECS = {'quota:disk_read_iops_sec': '5000',
                 'quota:disk_write_iops_sec': '2500',
                 'quota:vif_inbound_average': '125000',
                 'quota:vif_outbound_average': '125000',
                 'hw_rng:allowed': 'True', 'hw:watchdog_action': 'reset',
                 'hw:cpu_max_sockets': '1'}


def _flavor(flavor_id, name, vcpus, memory_mb, root_gb, flavorid,
            **extra_specs):
    specs = dict(_COMMON_SPECS)
    specs.update({key.replace('__', ':'): value
                  for key, value in extra_specs.items()})
    return dep.flavor(flavor_id, name, vcpus=vcpus, memory_mb=memory_mb,
                      root_gb=root_gb, flavorid=flavorid, extra_specs=specs,
                      description='%s: %d vCPU, %d MiB RAM, %d GB disk'
                      % (name, vcpus, memory_mb, root_gb))


FLAVORS = {
    'm1.small': _flavor(2, 'm1.small', 1, 2048, 20, '000002',
                        quota__cpu_shares='100'),
    'm1.medium': _flavor(3, 'm1.medium', 2, 4096, 40, '000003',
                         quota__cpu_shares='200'),
    'm1.large': _flavor(4, 'm1.large', 4, 8192, 80, '000004',
                        quota__cpu_shares='400'),
    'a2.medium': _flavor(982, 'a2.medium', 4, 8192, 80, '026050',
                         hw__cpu_policy='shared', quota__cpu_shares='400',
                         os__secure_boot='disabled',
                         trait__HW_CPU_X86_AMD_SVM='required'),
    'a2.large': _flavor(983, 'a2.large', 8, 16384, 160, '026060',
                        hw__cpu_policy='shared', quota__cpu_shares='800',
                        os__secure_boot='disabled',
                        trait__HW_CPU_X86_AMD_SVM='required'),
    'e2.medium': _flavor(831, 'e2.medium', 4, 8192, 25, '022050',
                         hw__cpu_policy='shared', quota__cpu_shares='400',
                         trait__HW_CPU_X86_VMX='required'),
    'c1.pinned': _flavor(21, 'c1.pinned', 4, 8192, 80, '030040',
                         hw__cpu_policy='dedicated', hw__numa_nodes='2',
                         aggregate_instance_extra_specs__pinned='true'),
    'p2.large': _flavor(22, 'p2.large', 8, 16384, 160, '030080',
                        hw__cpu_policy='dedicated',
                        hw__mem_page_size='large',
                        aggregate_instance_extra_specs__pinned='true'),
    'g2.medium': _flavor(921, 'g2.medium', 4, 8192, 80, '040040',
                         hw__cpu_policy='shared',
                         pci_passthrough__alias='t4:1'),
}
SHARED_FLAVORS = ('m1.small', 'm1.medium', 'm1.large', 'a2.medium',
                  'a2.large', 'e2.medium')
PINNED_FLAVORS = ('c1.pinned', 'p2.large')

_BASE_PROPS = {'hw_architecture': 'x86_64', 'hw_disk_bus': 'virtio',
               'hw_vif_model': 'virtio', 'hw_qemu_guest_agent': 'yes',
               'hw_video_model': 'virtio', 'hw_rng_model': 'virtio',
               'hw_scsi_model': 'virtio-scsi', 'os_require_quiesce': 'yes',
               'img_config_drive': 'optional', 'hw_pointer_model':
               'usbtablet'}


def _image(image_id, name, **props):
    raw = dict(_BASE_PROPS)
    raw.update(props)
    return {'id': image_id, 'name': name, 'raw': raw}


IMAGES = (
    _image('3e1f7a52-9c0b-4d8e-a6f3-2b7c9d1e4f60', 'ubuntu-24.04-server',
           os_distro='ubuntu', os_type='linux', hw_machine_type='pc',
           os_admin_user='ubuntu'),
    _image('5b2c8e11-47d0-4f3a-9e6b-1c2d3e4f5a6b', 'rhel-9.4',
           os_distro='rhel', os_type='linux', hw_machine_type='q35',
           hw_firmware_type='uefi', os_admin_user='cloud-user'),
    _image('8d4e2f90-1a3b-4c5d-8e7f-9a0b1c2d3e4f', 'windows-server-2022',
           os_distro='windows', os_type='windows', hw_machine_type='q35',
           hw_firmware_type='uefi', hw_disk_bus='scsi', hw_time_hpet='no',
           os_admin_user='Administrator'),
    _image('c7a1b2c3-d4e5-4f60-8a9b-0c1d2e3f4a5b', 'debian-12-genericcloud',
           os_distro='debian', os_type='linux', hw_machine_type='pc',
           os_admin_user='debian'),
)

T4 = {'vendor_id': '10de', 'product_id': '1eb8'}
SECURITY_GROUPS = ('default', 'web', 'ssh', 'monitoring')
PROJECTS = 64
LONG_AGO = datetime.datetime(2024, 1, 10, 11, 26, 50)


def _props(raw):
    """ImageMetaProps data as Nova serialises it for raw Glance values."""
    return image_primitive.props_to_primitive(
        image_obj.props_from_strings(raw), DEFAULT_PROPS_VERSION)[DATA]


def _spec_image(image, volume=False):
    document = dep.image(image['id'], properties=_props(image['raw']))
    document[DATA]['name'] = image['name']
    if volume:
        # Booted from a volume: the image comes from the volume's image
        # metadata and has no id.
        del document[DATA]['id']
    return document


def _numa_request(flavor, image):
    data = flavor[DATA]
    topology = numa_constraints.constraints(
        data['vcpus'], data['memory_mb'], data['extra_specs'],
        image_obj.props_from_strings(image['raw']))
    return None if topology is None else numa_primitive.to_primitive(
        topology, '1.3', '1.6')


def _fitted(request, position):
    """instance_extra.numa_topology: the request pinned on a host."""
    fitted = copy.deepcopy(request)
    base = (position % 4) * 8
    for index, cell in enumerate(fitted[DATA]['cells']):
        cell[DATA]['id'] = index
        cell[DATA]['cpu_pinning_raw'] = {
            str(cpu): base + cpu for cpu in cell[DATA]['pcpuset']}
    return json.dumps(fitted)


def _pci_request(request_id, host=False):
    spec = dict(T4)
    if host:
        spec['rp_uuids'] = '2d4c6b8a-0e1f-4a3b-9c5d-7e6f8a9b0c1d'
    return {'count': 1, 'spec': [spec], 'alias_name': 't4', 'is_new': False,
            'request_id': request_id, 'numa_policy': 'legacy',
            'requester_id': None}


def _uuid(rng):
    return str(uuidlib.UUID(int=rng.getrandbits(128), version=4))


def _project(index):
    rng = random.Random(SEED * 31 + index)
    return ('%032x' % rng.getrandbits(128),
            ['%032x' % rng.getrandbits(128) for _ in range(3)])


_PROJECTS = [_project(index) for index in range(PROJECTS)]
# The roles a user boots with, by the user's number in the project.
BOOT_ROLES = ('member,reader', 'member,reader,load-balancer_member',
              'admin,member,reader')


def _owners():
    """(project id, user id) -> the owner's system metadata.

    Nova writes the names of the booting user and project, and the user's
    roles, into every instance's system metadata: they vary as the
    instances' owners do.
    """
    owners = {}
    for index, (project, users) in enumerate(_PROJECTS):
        for number, user in enumerate(users):
            owners[project, user] = {
                'owner_project_name': 'project-%02d' % index,
                'owner_user_name': 'user-%02d-%d' % (index, number),
                'boot_roles': BOOT_ROLES[number % len(BOOT_ROLES)]}
    return owners


_OWNERS = _owners()


Plan = collections.namedtuple('Plan', 'uuid drift flavor new_flavor image '
                                      'volume vm_state migrations project '
                                      'user groups rng')


def plan(position):
    """What instance ``position`` (0..N-1, in build order) looks like."""
    rng = random.Random(SEED * 1000003 + position)
    uuid = _uuid(rng)
    draw = rng.random()
    drift = None
    for kind, share in DRIFT_SHARES:
        if draw < share:
            drift = kind
            break
        draw -= share
    shape = rng.random()
    new_flavor = None
    volume = False
    if drift == FAILED_RESIZE:
        flavor = rng.choice(SHARED_FLAVORS)
        new_flavor = rng.choice([f for f in SHARED_FLAVORS if f != flavor])
    elif drift == FAILED_RESIZE_NUMA:
        flavor, new_flavor = 'm1.large', 'c1.pinned'
    elif shape < 0.08:
        flavor = PINNED_FLAVORS[int(shape * 100) % 2]
    elif shape < 0.10:
        flavor = 'g2.medium'
    else:
        flavor = rng.choice(SHARED_FLAVORS)
        volume = drift is None and rng.random() < 0.11
    image = IMAGES[rng.randrange(len(IMAGES))]
    state = rng.random()
    vm_state = 'active'
    if drift is None and state < 0.05:
        vm_state = 'stopped'
    elif drift is None and state < 0.06:
        vm_state = 'shelved_offloaded'
    history = rng.random()
    migrations = []
    if history < 0.10:
        migrations.append(('resize', 'confirmed'))
    if history < 0.35:
        migrations.append(('live-migration', 'completed'))
    if drift in FLAVOR_DRIFTS:
        migrations.append(('resize', 'error'))
    project, users = _PROJECTS[rng.randrange(PROJECTS)]
    user = users[rng.randrange(len(users))]
    groups = SECURITY_GROUPS[:1 + rng.randrange(len(SECURITY_GROUPS))]
    return Plan(uuid, drift, flavor, new_flavor, image, volume, vm_state,
                migrations, project, user, groups, rng)


# Compute hosts, each in one of three zones by its aggregate.
HOSTS = 400
ZONES = ('az1', 'az2', 'az3')
# Server groups: instances whose position ends in 0 or 1 are the two
# members of group position // 10.
GROUP_SIZE = 2
GROUP_EVERY = 10


def host_zone(host_number):
    """The zone of compute host ``host_number`` (by its aggregate)."""
    return ZONES[host_number % len(ZONES)]


def group_of(position):
    """``(group number, uuid, policy)`` of an instance's group, or None."""
    if position % GROUP_EVERY >= GROUP_SIZE:
        return None
    number = position // GROUP_EVERY
    rng = random.Random(SEED * 7 + number)
    return (number, _uuid(rng),
            'anti-affinity' if number % 3 else 'affinity')


def aggregate_rows():
    """The rows of one aggregate per zone, holding every host in it."""
    rows = collections.defaultdict(list)
    for number, zone in enumerate(ZONES, start=1):
        rows['aggregates'].append(dict(
            id=number, uuid=str(uuidlib.UUID(int=SEED + number, version=4)),
            name='agg-%s' % zone, created_at=LONG_AGO))
        rows['aggregate_metadata'].append(dict(
            aggregate_id=number, key='availability_zone', value=zone,
            created_at=LONG_AGO))
    for host in range(HOSTS):
        rows['aggregate_hosts'].append(dict(
            aggregate_id=1 + host % len(ZONES), host='compute-%03d' % host,
            created_at=LONG_AGO))
    return rows


def cell_split(instances):
    """Positions of each cell: cell1 gets the first half (rounded up)."""
    first = (instances + 1) // 2
    return [range(0, first), range(first, instances)]


def expected_flavor_drift(positions):
    """How many of ``positions`` have a spec flavor other than cur."""
    return sum(1 for p in positions if plan(p).drift in FLAVOR_DRIFTS)


def expected_numa_topologies(positions):
    """How many of ``positions`` have an instance_extra.numa_topology.

    Those running a pinned flavor (a failed resize to one leaves the
    current flavor shared, and no topology).
    """
    return sum(1 for p in positions if plan(p).flavor in PINNED_FLAVORS)


class _FlavorTexts(object):
    """instance_extra.flavor texts, built once per flavor combination."""

    def __init__(self):
        self._texts = {}

    def get(self, cur, old=None, new=None):
        key = (cur, old, new)
        if key not in self._texts:
            self._texts[key] = dep.instance_flavors(
                FLAVORS[cur], old and FLAVORS[old], new and FLAVORS[new])
        return self._texts[key]


class _SpecImages(object):
    def __init__(self):
        self._images = {}

    def get(self, image, volume):
        key = (image['id'], volume)
        if key not in self._images:
            self._images[key] = _spec_image(image, volume)
        return self._images[key]


def instance_rows(position, instance_id, cell_id, flavor_texts,
                  spec_images):
    """The rows of one instance by table name, and its drift kind."""
    p = plan(position)
    rng = p.rng
    cur = FLAVORS[p.flavor]
    cur_data = cur[DATA]
    created = LONG_AGO + datetime.timedelta(minutes=position)
    updated = created + datetime.timedelta(hours=1)
    host = zone = None
    if p.vm_state != 'shelved_offloaded':
        host_number = rng.randrange(HOSTS)
        host = 'compute-%03d' % host_number
        zone = host_zone(host_number)
    # A third of the users pinned the zone they booted in.
    pin = zone if rng.random() < 0.3 else None
    image_ref = '' if p.volume else p.image['id']
    rows = collections.defaultdict(list)
    rows['instances'].append(dict(
        id=instance_id, uuid=p.uuid, created_at=created, updated_at=updated,
        deleted=0, user_id=p.user, project_id=p.project,
        image_ref=image_ref, host=host,
        node=host and host + '.example.org',
        instance_type_id=cur_data['id'], memory_mb=cur_data['memory_mb'],
        vcpus=cur_data['vcpus'], root_gb=cur_data['root_gb'],
        ephemeral_gb=cur_data['ephemeral_gb'], vm_state=p.vm_state,
        task_state=None, availability_zone=zone, hidden=False))

    # The spec as the API saved it at boot (or at the failed resize).
    spec_flavor = cur
    spec_image = spec_images.get(p.image, p.volume)
    numa_request = _numa_request(cur, p.image)
    extra_numa = None
    if numa_request is not None:
        extra_numa = _fitted(numa_request, position)
    pci_spec = None
    extra_pci = '[]'
    if p.flavor == 'g2.medium':
        request_id = _uuid(rng)
        pci_spec = dep.envelope('InstancePCIRequests', '1.1', {
            'requests': [dep.envelope('InstancePCIRequest', '1.4',
                                      _pci_request(request_id))]},
            ['requests'])
        extra_pci = json.dumps([_pci_request(request_id, host=True)])
    spec_numa = numa_request
    if p.drift in FLAVOR_DRIFTS:
        spec_flavor = FLAVORS[p.new_flavor]
        spec_numa = _numa_request(spec_flavor, p.image)
    sysmeta_raw = p.image['raw']
    if p.drift == STALE_IMAGE:
        # nova-manage image_property set changed system metadata only.
        sysmeta_raw = dict(sysmeta_raw, hw_machine_type=(
            'q35' if sysmeta_raw['hw_machine_type'] == 'pc' else 'pc'))

    group = group_of(position)
    spec = dep.request_spec(
        p.uuid, spec_flavor, project_id=p.project, user_id=p.user,
        availability_zone=pin, spec_image=spec_image,
        numa_topology=spec_numa, pci_requests=pci_spec, is_bfv=p.volume,
        instance_group=group and dep.stored_group(
            group[1], 'group-%d' % group[0], group[2],
            group_id=group[0] + 1),
        scheduler_hints=group and {'group': [group[1]]})
    spec[DATA]['security_groups'][DATA]['objects'] = [
        dep.envelope('SecurityGroup', '1.2', {'name': name}, ['name'])
        for name in p.groups]
    if group is not None:
        if position % GROUP_EVERY == 0:
            rows['instance_groups'].append(dict(
                id=group[0] + 1, uuid=group[1], name='group-%d' % group[0],
                user_id=p.user, project_id=p.project, created_at=LONG_AGO))
            rows['instance_group_policy'].append(dict(
                group_id=group[0] + 1, policy=group[2], rules='{}',
                created_at=LONG_AGO))
        rows['instance_group_member'].append(dict(
            group_id=group[0] + 1, instance_uuid=p.uuid,
            created_at=created))
    rows['request_specs'].append(dict(
        instance_uuid=p.uuid, spec=json.dumps(spec), created_at=created))
    rows['instance_mappings'].append(dict(
        instance_uuid=p.uuid, cell_id=cell_id, project_id=p.project,
        user_id=p.user, queued_for_delete=False, created_at=created))

    rows['instance_extra'].append(dict(
        instance_uuid=p.uuid, created_at=created, deleted=0,
        flavor=flavor_texts.get(p.flavor, new=(
            p.new_flavor if p.drift in FLAVOR_DRIFTS else None)),
        numa_topology=extra_numa, pci_requests=extra_pci,
        migration_context=None))
    sysmeta = dep.image_system_metadata(
        sysmeta_raw, image_id=image_ref, min_disk=cur_data['root_gb'])
    sysmeta.update(_OWNERS[p.project, p.user])
    sysmeta['clean_attempts'] = '1'
    rows['instance_system_metadata'].extend(
        dict(instance_uuid=p.uuid, key=key, value=value, deleted=0,
             created_at=created) for key, value in sysmeta.items())
    if p.volume:
        rows['block_device_mapping'].append(dict(
            uuid=_uuid(rng), instance_uuid=p.uuid, created_at=created,
            deleted=0, source_type='volume', destination_type='volume',
            boot_index=0, volume_id=_uuid(rng), image_id=None))
    else:
        rows['block_device_mapping'].append(dict(
            uuid=_uuid(rng), instance_uuid=p.uuid, created_at=created,
            deleted=0, source_type='image', destination_type='local',
            boot_index=0, volume_id=None, image_id=image_ref))
    others = [f for f in SHARED_FLAVORS if f != p.flavor]
    for number, (kind, status) in enumerate(p.migrations):
        old_id = new_id = cur_data['id']
        if kind == 'resize' and status == 'confirmed':
            old_id = FLAVORS[rng.choice(others)][DATA]['id']
        elif kind == 'resize':
            new_id = FLAVORS[p.new_flavor][DATA]['id']
        rows['migrations'].append(dict(
            uuid=_uuid(rng), instance_uuid=p.uuid, deleted=0,
            created_at=created + datetime.timedelta(days=number + 1),
            source_compute='compute-%03d' % rng.randrange(400),
            dest_compute=host, status=status, migration_type=kind,
            old_instance_type_id=old_id, new_instance_type_id=new_id,
            hidden=False))
    return rows, p.drift


# -- databases ---------------------------------------------------------------

def database_names(instances):
    prefix = 'healreq_bench_%d' % instances
    return {'api': prefix + '_api', 'cell0': prefix + '_cell0',
            'cell1': prefix + '_cell1', 'cell2': prefix + '_cell2'}


def _backend():
    return provision.Backend.backend_for_database_type('mysql')


def _url(backend, name):
    return backend.provisioned_database_url(name).render_as_string(
        hide_password=False)


def _read_meta(engine, name=META_TABLE):
    t = _meta_table(sa.MetaData(), name)
    try:
        with engine.connect() as conn:
            return {row.name: row.value for row in conn.execute(sa.select(
                t.c.name, t.c.value))}
    except sa.exc.DBAPIError:
        return {}


def _meta_table(metadata, name=META_TABLE):
    return sa.Table(name, metadata,
                    sa.Column('name', sa.String(64), primary_key=True),
                    sa.Column('value', sa.Text),
                    mysql_engine='InnoDB')


def _insert(conn, table, rows):
    for start in range(0, len(rows), INSERT_ROWS):
        conn.execute(table.insert(), rows[start:start + INSERT_ROWS])


def _fast_session(conn):
    conn.exec_driver_sql('SET SESSION foreign_key_checks = 0, '
                         'unique_checks = 0')


def _build_cell(engine, api_engine, cell_id, positions, first_id, log):
    flavor_texts = _FlavorTexts()
    spec_images = _SpecImages()
    counts = collections.Counter()
    with engine.connect() as conn, api_engine.connect() as api_conn:
        _fast_session(conn)
        _fast_session(api_conn)
        for start in range(0, len(positions), CHUNK_INSTANCES):
            chunk = positions[start:start + CHUNK_INSTANCES]
            rows = collections.defaultdict(list)
            for offset, position in enumerate(chunk):
                found, drift = instance_rows(
                    position, first_id + start + offset, cell_id,
                    flavor_texts, spec_images)
                for name, values in found.items():
                    rows[name].extend(values)
                counts[drift] += 1
            for name in ('instances', 'instance_extra',
                         'instance_system_metadata', 'block_device_mapping',
                         'migrations'):
                _insert(conn, tables.cell_metadata.tables[name], rows[name])
            for name in ('instance_mappings', 'request_specs',
                         'instance_groups', 'instance_group_policy',
                         'instance_group_member'):
                _insert(api_conn, tables.api_metadata.tables[name],
                        rows[name])
            conn.commit()
            api_conn.commit()
            log('  %d/%d instances' % (start + len(chunk), len(positions)))
    return counts


def _analyze(engine, metadata):
    with engine.connect() as conn:
        for name in metadata.tables:
            conn.exec_driver_sql('ANALYZE TABLE `%s`' % name).all()


def ensure(instances, rebuild=False, log=print):
    """Build the deployment for ``instances`` unless it exists; describe it.

    Returns a dict with the database URLs (``api``, ``cell1``...), the
    number of drifted instances (``drifted``), the build metadata and
    whether it was reused.
    """
    backend = _backend()
    names = database_names(instances)
    urls = {role: _url(backend, name) for role, name in names.items()}
    meta = {}
    if not rebuild:
        engine = sa.create_engine(urls['api'])
        try:
            meta = _read_meta(engine)
        finally:
            engine.dispose()
    if meta.get('format') == str(FORMAT) and meta.get('complete') == 'yes':
        return dict(urls=urls, names=names, meta=meta, reused=True,
                    drifted=int(meta['drifted']))
    started = time.monotonic()
    log('Building %d instances in %s (cell1, cell2) ...'
        % (instances, ', '.join(sorted(names.values()))))
    for name in names.values():
        backend.drop_named_database(name, conditional=True)
        backend.create_named_database(name)
    engines = {role: sa.create_engine(url) for role, url in urls.items()}
    try:
        tables.api_metadata.create_all(engines['api'])
        meta_table = _meta_table(sa.MetaData())
        meta_table.create(engines['api'])
        cell_ids = {}
        with engines['api'].begin() as conn:
            for role in ('cell0',) + CELL_NAMES:
                tables.cell_metadata.create_all(engines[role])
                result = conn.execute(tables.cell_mappings.insert().values(
                    uuid=(dep.CELL0_UUID if role == 'cell0' else
                          str(uuidlib.UUID(int=SEED + len(cell_ids),
                                           version=4))),
                    name=role, created_at=LONG_AGO,
                    transport_url='rabbit://nova:secret@mq:5672/',
                    database_connection=urls[role], disabled=False))
                cell_ids[role] = result.inserted_primary_key[0]
        with engines['api'].begin() as conn:
            for name, values in aggregate_rows().items():
                _insert(conn, tables.api_metadata.tables[name], values)
        counts = collections.Counter()
        for role, positions in zip(CELL_NAMES, cell_split(instances)):
            log(' %s: %d instances' % (role, len(positions)))
            counts.update(_build_cell(engines[role], engines['api'],
                                      cell_ids[role], positions, 1, log))
        _analyze(engines['api'], tables.api_metadata)
        for role in CELL_NAMES:
            _analyze(engines[role], tables.cell_metadata)
        drifted = sum(n for kind, n in counts.items() if kind is not None)
        with engines['api'].connect() as conn:
            spec_bytes = conn.execute(sa.select(sa.func.avg(sa.func.length(
                tables.request_specs.c.spec)))).scalar()
        meta = {
            'format': str(FORMAT), 'instances': str(instances),
            'drifted': str(drifted),
            'drift_kinds': json.dumps({k: n for k, n in counts.items()
                                       if k is not None}, sort_keys=True),
            'spec_bytes_avg': '%d' % spec_bytes,
            'built_at': datetime.datetime.now(
                datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
            'build_seconds': '%.0f' % (time.monotonic() - started),
        }
        with engines['api'].begin() as conn:
            conn.execute(meta_table.insert(), [
                dict(name=name, value=value) for name, value in meta.items()])
            conn.execute(meta_table.insert().values(name='complete',
                                                    value='yes'))
        meta['complete'] = 'yes'
    finally:
        for engine in engines.values():
            engine.dispose()
    log('Built in %s s: %d drifted instances %s, specs %s bytes on average.'
        % (meta['build_seconds'], drifted, meta['drift_kinds'],
           meta['spec_bytes_avg']))
    return dict(urls=urls, names=names, meta=meta, reused=False,
                drifted=drifted)


def write_config(path, deployment, state_path):
    """A nova.conf for nova-heal and the other contenders."""
    with open(path, 'w') as handle:
        handle.write('[DEFAULT]\ntransport_url = rabbit://nova:secret@mq//\n'
                     '\n[api_database]\nconnection = %s\n'
                     '\n[database]\nconnection = %s\n'
                     '\n[healreq]\nskip_updated_within = 60\n'
                     'state_path = %s\n'
                     % (deployment['urls']['api'],
                        deployment['urls']['cell1'], state_path))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--instances', type=int, default=20000)
    parser.add_argument('--rebuild', action='store_true',
                        help='Drop and rebuild the databases even if a '
                             'complete build exists.')
    args = parser.parse_args(argv)
    deployment = ensure(args.instances, args.rebuild)
    print('%s deployment of %d instances, %d drifted: %s'
          % ('Reused' if deployment['reused'] else 'Built', args.instances,
             deployment['drifted'],
             ', '.join(sorted(deployment['names'].values()))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
