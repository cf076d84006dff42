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

"""A node of the cluster fails in the middle of a heal.

The run talks to the third node (API database, audit store and the cell
whose URL is a template); the test kills that node with
``tools/galera-cluster.sh kill`` while the run sleeps between batches,
and joins it again afterwards. These tests stop nodes of the cluster:
they need HEALREQ_TEST_GALERA_DIR (the directory the cluster was started
in) and must run alone (``stestr run --serial``), never beside other
Galera tests.
"""

import os
import re
import subprocess
import time
import unittest

import sqlalchemy as sa

from healreq.audit import store as audit_store
from healreq.tests import cli
from healreq.tests.functional import backends
from healreq.tests.functional import galera_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
CLUSTER_TOOL = os.path.join(ROOT, 'tools', 'galera-cluster.sh')
DIR_ENV = 'HEALREQ_TEST_GALERA_DIR'
# The longest a command of these tests may take.
DEADLINE = 60
# The exit codes a run that lost its databases may end with.
FAILED_RUN_CODES = (2, 3)


class GaleraFailoverTest(galera_case.GaleraTestCase):

    NODE = 2  # counted from 0, as the fixture counts; the tool's node 3

    def setUp(self):
        self.cluster_dir = os.environ.get(DIR_ENV)
        if not self.cluster_dir:
            message = '%s names no cluster directory' % DIR_ENV
            if backends.REQUIRE_GALERA:
                self.fail(message + ' (HEALREQ_TEST_REQUIRE_GALERA is set)')
            raise unittest.SkipTest(message)
        super().setUp()
        self.down = set()
        self.drifted = [self.add_drifted(self.cell1) for _ in range(6)]

    def cluster(self, action, node):
        subprocess.run([CLUSTER_TOOL, action, self.cluster_dir,
                        str(node + 1)], check=True, timeout=DEADLINE,
                       stdout=subprocess.DEVNULL)

    def kill(self, node):
        self.cluster('kill', node)
        self.down.add(node)
        self.addCleanup(self.join, node)

    def join(self, node):
        if node in self.down:
            self.cluster('join', node)
            self.down.discard(node)

    def config_through(self, node):
        """Every database the run reaches by configuration, via ``node``."""
        return self.write_config_text(
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\naudit_connection = %s\n'
            'lock_wait_timeout = 2\n' % (
                self.db.on_node(self.cells.api_url(), node),
                self.db.on_node(self.db.reference_url(), node),
                self.db.on_node(self.store_url, node)))

    def start(self, config):
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', config, 'request-specs',
                             '--batch-size', '1', '--sleep', '1'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path))
        self.addCleanup(lambda: process.poll() is None and process.kill())
        return process

    def wait_for_changes(self, process, count):
        """Wait until ``count`` intents are recorded through node 1."""
        engine = self.node_engine(self.store_url, 0)
        t = audit_store.schema.changes
        deadline = time.monotonic() + DEADLINE
        while True:
            try:
                with engine.connect() as conn:
                    recorded = conn.execute(sa.select(
                        sa.func.count()).select_from(t)).scalar()
            except sa.exc.DBAPIError:
                # The run is creating the store.
                recorded = 0
            if recorded >= count:
                return
            if process.poll() is not None:
                self.fail('the run ended: %s' % (process.communicate(),))
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)

    def pending(self):
        t = audit_store.schema.changes
        with self.node_engine(self.store_url, 0).connect() as conn:
            return conn.execute(sa.select(t.c.id).where(
                t.c.state == audit_store.PENDING)).scalars().all()

    def assert_one_line_errors(self, err):
        lines = [line for line in err.splitlines() if line.strip()]
        self.assertNotIn('Traceback', err)
        self.assertEqual(len(lines), len(set(lines)), err)
        for line in lines:
            self.assertRegex(line, r'^(nova-heal: error: | *\S+ \S+ \d+ '
                             r'(ERROR|WARNING) )', err)
        # One line per component that failed: the API database, the
        # audit store, or both when the run meets the dead node in each.
        errors = [line for line in lines
                  if line.startswith('nova-heal: error: ')]
        self.assertTrue(errors, err)
        components = [re.match(r'nova-heal: error: ([^:]+):', line)
                      for line in errors]
        self.assertTrue(all(components), err)
        named = [match.group(1) for match in components]
        self.assertLessEqual(set(named), {'API database', 'audit store'},
                             err)
        self.assertEqual(len(named), len(set(named)), err)

    def test_the_node_in_use_dies_between_batches(self):
        process = self.start(self.config_through(self.NODE))
        self.wait_for_changes(process, 2)
        self.kill(self.NODE)
        out, err = process.communicate(timeout=DEADLINE)
        out, err = out.decode(), err.decode()
        self.assertIn(process.returncode, FAILED_RUN_CODES, out + err)
        self.assert_one_line_errors(err)
        self.assertIn('Exit code %d' % process.returncode, out)

        self.join(self.NODE)
        result = self.heal(config_file=self.config_through(self.NODE))
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([], self.pending())
        self.assertEqual(4, self.heal('--dry-run').code)
