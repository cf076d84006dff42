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

"""The base of the Galera tests: a deployment and its store on a cluster.

The deployment's databases and the audit store (``audit_connection``)
live on the MariaDB Galera cluster HEALREQ_TEST_GALERA names
(``tools/galera-cluster.sh start`` starts one); commands reach it
through its first node unless a test says otherwise. Without a cluster
the tests are skipped; HEALREQ_TEST_REQUIRE_GALERA=1 fails them instead.
Every test id contains "Galera".
"""

import sqlalchemy as sa

from healreq.tests.functional import audit_case
from healreq.tests.functional import backends


class GaleraTestCase(audit_case.AuditTestCase):
    """A deployment whose databases and audit store are on the cluster."""

    scenarios = backends.GALERA_SCENARIOS

    def setUp(self):
        super().setUp()
        self.store_url = self.db.database_url('audit')
        self.config_file = self.config_on_node(0)

    def config_on_node(self, node, extra=''):
        """A nova.conf whose audit store is reached through ``node``."""
        return self.write_config('audit_connection = %s\n%s' % (
            self.db.on_node(self.store_url, node), extra))

    def audit_url(self):
        return self.store_url

    def node_engine(self, url, node):
        """An engine on ``url``'s database, through node ``node``."""
        engine = sa.create_engine(self.db.on_node(url, node))
        self.addCleanup(engine.dispose)
        return engine
