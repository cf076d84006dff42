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


"""``nova-heal demo``: a small SQLite deployment and four runs on it.

The deployment is kept: the demo ends with commands to try on it, each
with the ``--config-file`` that reaches it.
"""

import os
import shlex
import tempfile
import uuid as uuidlib

import sqlalchemy as sa

from healreq.audit import history
from healreq import exception
from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
from healreq.testing import copies
from healreq.testing import deployment as dep

SEED_INSTANCE = '982c3ead-59b1-4acd-876b-d55166d8e7f0'

A2_MEDIUM = dep.flavor(982, 'a2.medium', vcpus=4, memory_mb=8192,
                       root_gb=80, flavorid='026050', extra_specs={
                           'hw:cpu_max_sockets': '1',
                           'hw:cpu_policy': 'shared',
                           'os:secure_boot': 'disabled',
                           'quota:cpu_shares': '400'})
E2_MEDIUM = dep.flavor(831, 'e2.medium', vcpus=4, memory_mb=8192,
                       root_gb=25, flavorid='022050', extra_specs={
                           'hw:cpu_max_sockets': '1',
                           'hw:cpu_policy': 'shared',
                           'quota:cpu_shares': '400'})
M1_SMALL = dep.flavor(2, 'm1.small', vcpus=1, memory_mb=2048, root_gb=20,
                      description='General purpose, 1 vCPU')
M1_LARGE = dep.flavor(4, 'm1.large', vcpus=4, memory_mb=8192, root_gb=80)
C1_PINNED = dep.flavor(21, 'c1.pinned', vcpus=4, memory_mb=8192, root_gb=80,
                       extra_specs={'hw:cpu_policy': 'dedicated',
                                    'hw:numa_nodes': '2'})

# The runs of the demo, and the exit code each one must end with: drift
# found, healed, nothing left to heal, allocation mismatches found.
_CODES = exception.ExitCode
RUNS = ((('request-specs', '--dry-run', '--verbose'), _CODES.HEALED),
        (('request-specs',), _CODES.HEALED),
        (('request-specs',), _CODES.NOTHING_TO_HEAL),
        (('allocations',), _CODES.HEALED))
# The audit store, in the deployment's folder.
AUDIT_STORE = 'audit.sqlite'


def numa_request(flavor):
    """The spec's numa_topology Nova computed for ``flavor`` at boot."""
    data = flavor['nova_object.data']
    return numa_primitive.to_primitive(
        numa_constraints.constraints(data['vcpus'], data['memory_mb'],
                                     data['extra_specs'], {}), '1.3', '1.6')


def resources(flavor):
    """What Nova allocates for ``flavor`` on its compute node's provider."""
    data = flavor['nova_object.data']
    return {'VCPU': data['vcpus'], 'MEMORY_MB': data['memory_mb'],
            'DISK_GB': data['root_gb'] + data['ephemeral_gb']}


def node_uuid(host):
    """The uuid of ``host``'s compute node and provider.

    Derived from its name, so that the reports list the consumers of an
    instance in the same order every time.
    """
    return str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, host + '.example.org'))


class _Site(object):
    """The databases being built: Nova's and Placement's."""

    def __init__(self, workdir):
        self.workdir = workdir
        self.nova = dep.Deployment(self.url('nova_api.sqlite'))
        self.placement = dep.Placement(self.url('placement.sqlite'))

    def url(self, name):
        return 'sqlite:///%s' % os.path.join(self.workdir, name)

    def dispose(self):
        self.nova.dispose()
        self.placement.dispose()

    def compute_node(self, cell, host):
        """A compute node of ``cell`` and its resource provider."""
        uuid = dep.add_compute_node(cell.engine, host, uuid=node_uuid(host))
        return self.placement.add_provider(uuid, host + '.example.org')

    def instance(self, cell, flavor, node=None, held=None, **kwargs):
        """An instance; its consumer holds ``held`` (a flavor) on ``node``.

        ``held`` defaults to ``flavor``; no ``node``, nothing is held.
        """
        uuid = self.nova.add_instance(cell, flavor, **kwargs)
        if node is not None:
            self.placement.allocate(uuid, node, resources(held or flavor))
        return uuid


def build(workdir, instances=0):
    """Create the demo deployment in ``workdir``; return the config path.

    ``instances`` more, healthy, are split between cell1 and cell2.
    """
    site = _Site(workdir)
    try:
        site.nova.add_cell('cell0', site.url('nova_cell0.sqlite'),
                           uuid=dep.CELL0_UUID)
        # cell1 is stored as a template, formatted from [database].
        cell1 = site.nova.add_cell(
            'cell1', site.url('nova_cell1.sqlite'),
            stored_url='{scheme}:////{path}_cell1.sqlite')
        _fill_cell1(site, cell1)
        cell2 = site.nova.add_cell('cell2', site.url('nova_cell2.sqlite'))
        _fill_cell2(site, cell2)
        _add_healthy(site, instances, ((cell1, 'compute-1'),
                                       (cell2, 'compute-3')))
    finally:
        site.dispose()
    return _write_config(site)


def _add_healthy(site, count, cells_and_hosts):
    """``count`` consistent m1.small instances, spread over the cells."""
    share, rest = divmod(count, len(cells_and_hosts))
    for position, (cell, host) in enumerate(cells_and_hosts):
        number = share + (1 if position < rest else 0)
        if not number:
            continue
        template = site.instance(cell, M1_SMALL, node_uuid(host), host=host)
        copies.copy_instance(template, number - 1, cell.engine,
                             site.nova.api_engine, site.placement.engine)


def _fill_cell1(site, cell):
    node1 = site.compute_node(cell, 'compute-1')
    node2 = site.compute_node(cell, 'compute-2')
    # The reported case: a failed resize to e2.medium left the spec
    # and instance_extra.flavor['new'] behind, and Placement holds
    # e2.medium for it (wrong-flavor).
    site.instance(cell, A2_MEDIUM, node1, held=E2_MEDIUM,
                  spec_flavor=E2_MEDIUM, new=E2_MEDIUM, uuid=SEED_INSTANCE,
                  migrations=[dict(old_instance_type_id=982,
                                   new_instance_type_id=831)])
    for _ in range(2):
        site.instance(cell, M1_SMALL, node1)
    # Its allocation was deleted by hand (missing).
    site.instance(cell, M1_SMALL)
    site.instance(cell, M1_LARGE, node1, spec_flavor=M1_LARGE,
                  vm_state='active', task_state='resize_migrating')
    # Deleted while compute-2 was down: its allocation stayed
    # (unexpected, found by the final pass).
    site.instance(cell, M1_SMALL, node2, host='compute-2', deleted=True,
                  spec=None, queued_for_delete=True)


def _fill_cell2(site, cell):
    node3 = site.compute_node(cell, 'compute-3')
    node4 = site.compute_node(cell, 'compute-4')
    site.instance(cell, M1_LARGE, node3, host='compute-3',
                  spec_flavor=M1_SMALL, old=M1_SMALL)
    site.instance(cell, M1_SMALL, node3, host='compute-3',
                  vm_state='resized', spec_flavor=M1_LARGE)
    # A failed resize from a shared flavor to a pinned NUMA one: the
    # spec kept the pinned flavor and its NUMA topology.
    site.instance(cell, M1_LARGE, node3, host='compute-3',
                  spec_flavor=C1_PINNED, new=C1_PINNED,
                  spec_fields=dict(numa_topology=numa_request(C1_PINNED)))
    # Rebuilt with a new image before Nova recorded it in the spec.
    site.instance(cell, M1_LARGE, node3, host='compute-3',
                  system_metadata=dep.image_system_metadata(
                      dict(dep.IMAGE_PROPERTIES, hw_disk_bus='scsi',
                           hw_scsi_model='virtio-scsi')))
    _add_failed_moves(site, cell, node3, node4)


def _add_failed_moves(site, cell, here, there):
    """Two instances on compute-3 whose moves left allocations behind.

    ``here`` and ``there`` are the providers of compute-3 and compute-4.
    """
    # A live migration to compute-4 that failed in the source's driver:
    # the instance holds compute-4 (wrong-provider), its migration
    # compute-3 (leftover-migration).
    migration = str(uuidlib.uuid4())
    site.instance(cell, M1_LARGE, there, host='compute-3',
                  migrations=[dict(uuid=migration, status='error',
                                   migration_type='live-migration',
                                   source_compute='compute-3',
                                   dest_compute='compute-4')])
    site.placement.allocate(migration, here, resources(M1_LARGE))
    # A confirmed resize from m1.small on compute-4 whose migration still
    # holds the old flavor there (leftover-migration).
    migration = str(uuidlib.uuid4())
    site.instance(cell, M1_LARGE, here, host='compute-3',
                  migrations=[dict(uuid=migration, status='confirmed',
                                   old_instance_type_id=2,
                                   new_instance_type_id=4,
                                   source_compute='compute-4',
                                   dest_compute='compute-3')])
    site.placement.allocate(migration, there, resources(M1_SMALL))


def _write_config(site):
    config = os.path.join(site.workdir, 'nova.conf')
    with open(config, 'w') as handle:
        handle.write('[api_database]\nconnection = %s\n\n'
                     '[database]\nconnection = %s\n\n'
                     '[placement_database]\nconnection = %s\n\n'
                     '[healreq]\nskip_updated_within = 60\n'
                     'state_path = %s\naudit_connection = %s\n'
                     % (site.url('nova_api.sqlite'), site.url('nova'),
                        site.url('placement.sqlite'), site.workdir,
                        site.url(AUDIT_STORE)))
    return config


def run(workdir, main, instances=0):
    """Build the deployment, run the demo's runs and print it all.

    The deployment is kept (in a new temporary directory if ``workdir``
    is None); the commands to try on it close the output. ``instances``
    healthy ones are added, to watch the progress of a longer run.
    """
    if workdir is None:
        workdir = tempfile.mkdtemp(prefix='nova-heal-demo-')
    workdir = os.path.abspath(workdir)
    os.makedirs(workdir, exist_ok=True)
    config = build(workdir, instances)
    print('Built a demo deployment (API DB, cell0, cell1, cell2, Placement) '
          'in %s%s' % (workdir, ', with %d more healthy instances'
                       % instances if instances else ''))
    codes = []
    for arguments, _ in RUNS:
        print('\n$ %s' % command(config, *arguments))
        codes.append(main(['--config-file', config] + list(arguments)))
    ok = codes == [code for _, code in RUNS]
    print()
    for line in hints(workdir, config, instances):
        print(line)
    print('\nDemo %s: exit codes %s.' % ('complete' if ok else 'FAILED',
                                         codes))
    return 0 if ok else 1


def command(config, *arguments):
    """The command line of ``nova-heal`` on ``config``, quoted to paste."""
    return ' '.join(['nova-heal', '--config-file', shlex.quote(config)]
                    + [shlex.quote(argument) for argument in arguments])


def hints(workdir, config, instances=0):
    """The closing lines: where the deployment is, what to try on it."""
    yield ('The deployment stays in %s (remove it when done); try on it:'
           % workdir)
    tries = [(('audit', 'list'), 'the recorded runs')]
    heal = _heal_run(os.path.join(workdir, AUDIT_STORE))
    if heal is not None:
        tries += [(('audit', 'show', heal), 'what the heal changed'),
                  (('revert', '--dry-run', heal),
                   'what undoing it would write')]
    tries.append((('allocations', '--verbose'), 'skipped instances too'))
    if instances:
        tries.append((('request-specs', '--dry-run', '--sleep', '0.2'),
                      'slowed down, to watch its progress'))
    for arguments, what in tries:
        yield '  %s  # %s' % (command(config, *arguments), what)


def _heal_run(path):
    """The id of the first heal the store at ``path`` records, or None."""
    if not os.path.isfile(path):
        return None
    engine = sa.create_engine('sqlite:///%s' % path)
    try:
        runs = history.RunHistory(engine).list_runs(len(RUNS))
    except exception.AuditStoreError:
        return None
    finally:
        engine.dispose()
    heals = [run['id'] for run in runs if run['mode'] == 'heal']
    return heals[-1] if heals else None
