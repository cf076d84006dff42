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

"""Every database reached through HAProxy in front of the cluster.

The proxy (HEALREQ_TEST_GALERA_PROXY; ``tools/galera-cluster.sh
proxy-start``) is the topology kolla-ansible deploys: TCP mode, the
first node active, the others backups, each checked through a
clustercheck responder. A command run with every URL (API database,
cells, audit store) pointed at the proxy must do exactly what the same
command does run straight against the first node: each test builds two
identical deployments on the cluster (the same cells, instances and
specs, on databases of their own), runs the command through the proxy
on one and straight to the first node on the other, and compares their
JSON reports (but for the run id) and their rows. Without a proxy the
tests are skipped; HEALREQ_TEST_REQUIRE_GALERA=1 fails them instead.
"""

import configparser
import json
import uuid

import fixtures
import sqlalchemy as sa

from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.tests.functional import backends
from healreq.tests.functional import deployments
from healreq.tests.functional import galera_case

# The columns of the audit store's rows that differ between two runs of
# the same command: ids, run ids and times.
_RUN_COLUMNS = ('id', 'run_id', 'created_at', 'resolved_at')


class GaleraProxyTest(galera_case.GaleraTestCase):
    """The same command through the proxy and straight to the first node.

    ``self.cells`` is reached through the proxy (``proxy_config``),
    ``self.twin`` (an identical deployment) straight through the first
    node (``direct_config``).
    """

    def setUp(self):
        super().setUp()
        self.db.require_proxy()
        self.proxy_config = self.config_through_proxy()
        self.twin_db = self.useFixture(backends.GaleraBackend())
        self.twin = self.useFixture(deployments.CellsDeployment(self.twin_db))
        self.twin_store = self.twin_db.database_url('audit')
        self.direct_config = self.write_config_text(
            '[DEFAULT]\ntransport_url = rabbit://nova:pw@mq//\n'
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\naudit_connection = %s\n'
            % (self.twin.api_url(), self.twin_db.reference_url(),
               self.twin_store))
        # Each deployment's runs keep their state apart.
        self.twin_state = self.useFixture(fixtures.TempDir()).path
        self.first = self.add_both('add_drifted', 'cell1')
        self.second = self.add_both('add_drifted', 'cell2')
        self.consistent = self.add_both('add_consistent', 'cell1')

    def add_both(self, add, cell, **kwargs):
        """The same instance, by ``add`` in ``cell``, in both deployments."""
        instance = str(uuid.uuid4())
        getattr(self, add)(getattr(self, cell), uuid=instance, **kwargs)
        getattr(self.twin, add)(getattr(self.twin, cell), uuid=instance,
                                **kwargs)
        return instance

    def through_proxy(self, *argv):
        """``nova-heal ARGV --format json`` through the proxy."""
        return self.run_json(*argv, config_file=self.proxy_config)

    def direct(self, *argv):
        """``nova-heal ARGV --format json`` straight to the first node."""
        with fixtures.EnvironmentVariable('OS_HEALREQ__STATE_PATH',
                                          self.twin_state):
            return self.run_json(*argv, config_file=self.direct_config)

    def renamed(self, value):
        """``value`` (JSON-able), the twin's cell UUIDs made ours.

        The twin's cells have UUIDs of their own; everything else of two
        identical deployments is the same.
        """
        text = json.dumps(value, sort_keys=True, default=str)
        for ours, theirs in ((self.cell1, self.twin.cell1),
                             (self.cell2, self.twin.cell2),
                             (self.cell0, self.twin.cell0)):
            text = text.replace(theirs.uuid, ours.uuid)
        return json.loads(text)

    def normalized(self, document, twin):
        """``document`` without its run id, the twin's cells renamed."""
        document = dict(document, run_id=None)
        return self.renamed(document) if twin else document

    def assert_same_run(self, *argv):
        """Run ``argv`` both ways; assert the same codes and reports.

        Returns both documents, through the proxy first.
        """
        proxied, through = self.through_proxy(*argv)
        direct, straight = self.direct(*argv)
        self.assertEqual(direct.code, proxied.code,
                         'through the proxy: %s%s\nstraight: %s%s' % (
                             proxied.stdout, proxied.stderr, direct.stdout,
                             direct.stderr))
        self.assertEqual(direct.stderr, proxied.stderr)
        self.assertEqual(self.normalized(straight, twin=True),
                         self.normalized(through, twin=False))
        return through, straight

    @staticmethod
    def spec_rows(deployment):
        """Every request_specs row but its times, by instance UUID."""
        t = tables.request_specs
        with deployment.api_engine.connect() as conn:
            return {row.instance_uuid: (row.id, row.spec)
                    for row in conn.execute(sa.select(t))}

    def assert_same_rows(self):
        self.assertEqual(self.spec_rows(self.twin.deployment),
                         self.spec_rows(self.deployment))

    def store_rows(self, url):
        """The audit store's changes and findings, less ids and times."""
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        rows = {}
        with engine.connect() as conn:
            for t in (audit_store.schema.changes,
                      audit_store.schema.findings):
                columns = [c for c in t.c if c.name not in _RUN_COLUMNS]
                rows[t.name] = [
                    dict(row) for row in conn.execute(
                        sa.select(*columns)).mappings()]
        return rows

    def assert_same_changes(self):
        """Both audit stores recorded the same changes and findings."""
        def ordered(rows):
            return {name: sorted(rows[name], key=lambda row: json.dumps(
                row, sort_keys=True, default=str)) for name in rows}

        direct = ordered(self.renamed(self.store_rows(self.twin_store)))
        through = ordered(self.renamed(self.store_rows(self.store_url)))
        self.assertTrue(through['changes'])
        self.assertEqual(direct, through)

    def test_every_database_is_reached_through_the_proxy(self):
        parser = configparser.ConfigParser(interpolation=None)
        parser.read(self.proxy_config)
        urls = [parser.get(section, option) for section, option in (
            ('api_database', 'connection'), ('database', 'connection'),
            ('healreq', 'audit_connection'))]
        t = tables.cell_mappings
        with self.deployment.api_engine.connect() as conn:
            stored = conn.execute(sa.select(
                t.c.database_connection)).scalars().all()
        self.assertEqual(3, len(stored))
        # cell1's template formats to [database]/connection's host and
        # port; cell0's and cell2's URLs are plain.
        urls.extend(url for url in stored if '{' not in url)
        self.assertEqual(5, len(urls))
        for url in urls:
            url = sa.engine.make_url(url)
            self.assertEqual(self.db.proxy, (url.host, url.port))

    def test_the_proxy_sends_clients_to_the_first_node(self):
        names = []
        for engine in (self.proxy_engine(self.store_url),
                       self.node_engine(self.store_url, 0)):
            with engine.connect() as conn:
                names.append(conn.execute(sa.text(
                    'SELECT @@wsrep_node_name')).scalar())
        self.assertEqual(names[1], names[0])

    def test_dry_run(self):
        originals = self.spec_rows(self.deployment)
        through, _ = self.assert_same_run('request-specs', '--dry-run')
        self.assertEqual(
            {self.first, self.second},
            {r['instance_uuid'] for r in through['results']})
        self.assertEqual(originals, self.spec_rows(self.deployment))
        self.assert_same_rows()

    def test_heal(self):
        originals = self.spec_rows(self.deployment)
        through, _ = self.assert_same_run('request-specs')
        self.assertEqual(0, through['exit_code'])
        self.assertIsNotNone(through['run_id'])
        healed = self.spec_rows(self.deployment)
        self.assertEqual({self.first, self.second},
                         {u for u in healed if healed[u] != originals[u]})
        self.assert_same_rows()
        self.assert_same_changes()
        # Nothing is left to heal, either way.
        after, _ = self.assert_same_run('request-specs', '--dry-run')
        self.assertEqual([], after['results'])

    def test_create_missing(self):
        missing = self.add_both('add_consistent', 'cell2', spec=None)
        through, _ = self.assert_same_run('request-specs',
                                          '--create-missing')
        self.assertEqual(0, through['exit_code'])
        self.assertIsNotNone(self.deployment.spec_text(missing))
        self.assert_same_rows()
        self.assert_same_changes()

    def test_revert_restores_the_rows(self):
        originals = self.all_spec_texts()
        missing = self.add_both('add_consistent', 'cell2', spec=None)
        through, _ = self.through_proxy('request-specs', '--create-missing')
        self.assertEqual(0, through.code, through.stdout + through.stderr)
        run_id = json.loads(through.stdout)['run_id']
        self.assertNotEqual(originals, self.all_spec_texts())
        result = self.run_cli('revert', run_id,
                              config_file=self.proxy_config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(originals, self.all_spec_texts())
        self.assertIsNone(self.deployment.spec_text(missing))
