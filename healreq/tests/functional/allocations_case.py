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

"""The base of the ``allocations`` tests: a deployment with Placement."""

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import deployment_case

SMALL = {'VCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20}
LARGE = {'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 80}


class AllocationsTestCase(deployment_case.DeploymentTestCase):
    """A deployment with a Placement database and two compute nodes."""

    def setUp(self):
        super().setUp()
        self.placement = self.add_placement()
        self.placement_url = self.placement.engine.url.render_as_string(
            hide_password=False)
        self.node1 = dep.add_compute_node(self.cell1.engine, 'compute-1')
        self.node2 = dep.add_compute_node(self.cell1.engine, 'compute-2')

    def small(self, cell=None, allocate=True, **kwargs):
        """An m1.small instance on compute-1, allocated as Nova does."""
        uuid = self.deployment.add_instance(cell or self.cell1,
                                            demo.M1_SMALL, **kwargs)
        if allocate:
            self.placement.allocate(uuid, self.node1, SMALL)
        return uuid

    def audit(self, *args):
        return self.run_json('allocations', *args)

    def results(self, document):
        return {r['instance_uuid']: r for r in document['results']}
