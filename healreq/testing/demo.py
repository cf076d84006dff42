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


"""``nova-heal demo``: a small SQLite deployment and three runs on it."""

import os
import shutil
import tempfile

from healreq.objects import numa_constraints
from healreq.objects import numa_primitive
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


def numa_request(flavor):
    """The spec's numa_topology Nova computed for ``flavor`` at boot."""
    data = flavor['nova_object.data']
    return numa_primitive.to_primitive(
        numa_constraints.constraints(data['vcpus'], data['memory_mb'],
                                     data['extra_specs'], {}), '1.3', '1.6')


def build(workdir):
    """Create the demo deployment in ``workdir``; return the config path."""
    def url(name):
        return 'sqlite:///%s' % os.path.join(workdir, name)

    reference = url('nova')
    deployment = dep.Deployment(url('nova_api.sqlite'))
    try:
        deployment.add_cell('cell0', url('nova_cell0.sqlite'),
                            uuid=dep.CELL0_UUID)
        # cell1 is stored as a template, formatted from [database].
        cell1 = deployment.add_cell(
            'cell1', url('nova_cell1.sqlite'),
            stored_url='{scheme}:////{path}_cell1.sqlite')
        cell2 = deployment.add_cell('cell2', url('nova_cell2.sqlite'))
        # The reported case: a failed resize to e2.medium left the spec
        # and instance_extra.flavor['new'] behind.
        deployment.add_instance(
            cell1, A2_MEDIUM, spec_flavor=E2_MEDIUM, new=E2_MEDIUM,
            uuid=SEED_INSTANCE, migrations=[dict(
                old_instance_type_id=982, new_instance_type_id=831)])
        for _ in range(3):
            deployment.add_instance(cell1, M1_SMALL)
        deployment.add_instance(cell1, M1_LARGE, spec_flavor=M1_LARGE,
                                vm_state='active',
                                task_state='resize_migrating')
        deployment.add_instance(cell2, M1_LARGE, spec_flavor=M1_SMALL,
                                old=M1_SMALL)
        deployment.add_instance(cell2, M1_SMALL, vm_state='resized',
                                spec_flavor=M1_LARGE)
        # A failed resize from a shared flavor to a pinned NUMA one: the
        # spec kept the pinned flavor and its NUMA topology.
        deployment.add_instance(
            cell2, M1_LARGE, spec_flavor=C1_PINNED, new=C1_PINNED,
            spec_fields=dict(numa_topology=numa_request(C1_PINNED)))
        # Rebuilt with a new image before Nova recorded it in the spec.
        deployment.add_instance(
            cell2, M1_LARGE, system_metadata=dep.image_system_metadata(
                dict(dep.IMAGE_PROPERTIES, hw_disk_bus='scsi',
                     hw_scsi_model='virtio-scsi')))
        for _ in range(2):
            deployment.add_instance(cell2, M1_LARGE)
    finally:
        deployment.dispose()
    config = os.path.join(workdir, 'nova.conf')
    with open(config, 'w') as handle:
        handle.write('[api_database]\nconnection = %s\n\n'
                     '[database]\nconnection = %s\n\n'
                     '[healreq]\nskip_updated_within = 60\n'
                     'state_path = %s\n'
                     % (url('nova_api.sqlite'), reference, workdir))
    return config


def run(workdir, main):
    """Build the deployment, run dry-run, heal and verify; print it all."""
    scratch = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix='nova-heal-demo-')
    os.makedirs(workdir, exist_ok=True)
    try:
        config = build(workdir)
        print('Built a demo deployment (API DB, cell0, cell1, cell2) in %s'
              % workdir)
        expected = [(['request-specs', '--dry-run', '--verbose'], 0),
                    (['request-specs'], 0),
                    (['request-specs'], 4)]
        codes = []
        for arguments, _ in expected:
            print('\n$ nova-heal --config-file %s %s'
                  % (config, ' '.join(arguments)))
            codes.append(main(['--config-file', config] + arguments))
        ok = codes == [code for _, code in expected]
        print('\nDemo %s: exit codes %s.' % ('complete' if ok else 'FAILED',
                                             codes))
        return 0 if ok else 1
    finally:
        if scratch:
            shutil.rmtree(workdir, ignore_errors=True)
