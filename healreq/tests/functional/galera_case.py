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
through its first node unless a test says otherwise, or through the
HAProxy in front of it that HEALREQ_TEST_GALERA_PROXY names
(``tools/galera-cluster.sh proxy-start`` starts it;
``config_through_proxy``), or its listener with kolla's hour-long
timeouts that HEALREQ_TEST_GALERA_PROXY_LONG names
(``config_through_proxy(long=True)``). Without a cluster the tests are skipped;
HEALREQ_TEST_REQUIRE_GALERA=1 fails them instead, and fails a test
needing the proxy when there is none. The helpers that act on the
cluster's processes (``restart_proxy``, ``active_node``) run
``tools/galera-cluster.sh`` on the directory HEALREQ_TEST_GALERA_DIR
names. Every test id contains "Galera".
"""

import os
import re
import subprocess
import unittest

import sqlalchemy as sa

from healreq.db import tables
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
CLUSTER_TOOL = os.path.join(ROOT, 'tools', 'galera-cluster.sh')
DIR_ENV = 'HEALREQ_TEST_GALERA_DIR'
# The longest tools/galera-cluster.sh may take for one action.
TOOL_DEADLINE = 120


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

    def proxy_engine(self, url, long=False):
        """An engine on ``url``'s database, through the proxy.

        With ``long``, through its listener with kolla's timeouts.
        """
        self.db.require_proxy(reachable=False, long=long)
        engine = sa.create_engine(self.db.proxy_url(url, long))
        self.addCleanup(engine.dispose)
        return engine

    def config_through_proxy(self, extra='', cells=None, store_url=None,
                             long=False):
        """A nova.conf reaching every database through the proxy.

        Its [api_database] and [database] connections (the latter formats
        the cell URL templates) and its ``audit_connection`` name the
        proxy, plus ``extra`` [healreq] lines. Each cell mapping of
        ``cells`` (a CellsDeployment, the test's by default) that holds
        a plain URL is pointed at the proxy too, in its API database:
        from then on every configuration reaches those cells through it.
        ``store_url`` is the audit store's URL (the test's by default).
        With ``long``, every URL names the proxy's listener with kolla's
        timeouts instead. Skips or fails the test, as ``require_proxy``
        does, without a proxy.
        """
        self.db.require_proxy(long=long)
        cells = cells or self.cells
        self.route_cells_through_proxy(cells, long)
        return self.write_config_text(
            '[DEFAULT]\ntransport_url = rabbit://nova:pw@mq//\n'
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\naudit_connection = %s\n'
            '%s' % (self.db.proxy_url(cells.api_url(), long),
                    self.db.proxy_url(cells.backend.reference_url(), long),
                    self.db.proxy_url(store_url or self.store_url, long),
                    extra))

    def route_cells_through_proxy(self, cells=None, long=False):
        """Point each plain cell URL of ``cells``' mappings at the proxy.

        With ``long``, at its listener with kolla's timeouts.
        """
        cells = cells or self.cells
        t = tables.cell_mappings
        with cells.deployment.api_engine.begin() as conn:
            for cell_id, url in conn.execute(
                    sa.select(t.c.id, t.c.database_connection)).all():
                if '{' in url:
                    continue  # a template: [database]/connection decides
                conn.execute(t.update().where(t.c.id == cell_id).values(
                    database_connection=self.db.proxy_url(url, long)))

    def cluster_dir(self):
        """HEALREQ_TEST_GALERA_DIR; skips or fails the test without it."""
        directory = os.environ.get(DIR_ENV)
        if not directory:
            message = '%s names no cluster directory' % DIR_ENV
            if backends.REQUIRE_GALERA:
                self.fail(message + ' (HEALREQ_TEST_REQUIRE_GALERA is set)')
            raise unittest.SkipTest(message)
        return directory

    def cluster_tool(self, action, *args, check=True):
        """Run ``tools/galera-cluster.sh ACTION DIR ARGS``; its stdout."""
        done = subprocess.run(
            [CLUSTER_TOOL, action, self.cluster_dir()] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            timeout=TOOL_DEADLINE)
        if check and done.returncode != 0:
            self.fail('galera-cluster.sh %s failed (exit %d): %s%s' % (
                action, done.returncode, done.stdout, done.stderr))
        return done.stdout

    def restart_proxy(self):
        """Stop and start HAProxy: every connection through it is cut.

        Returns once a node answers through the proxy again.
        """
        self.db.require_proxy(reachable=False)
        self.cluster_tool('proxy-restart')

    def active_node(self):
        """The node (counted from 0) HAProxy sends new clients to, or None.

        HAProxy's own view (``galera-cluster.sh proxy-status``): the
        first node while it is up, else the first backup that is.
        """
        self.db.require_proxy(reachable=False)
        status = self.cluster_tool('proxy-status', check=False)
        match = re.search(r'^proxy \S+ pid=\d+ active=(\S+)$', status,
                          re.MULTILINE)
        if match is None:
            self.fail('galera-cluster.sh proxy-status: %r' % status)
        name = match.group(1)
        if name == 'none':
            return None
        return int(name[len('node'):]) - 1
