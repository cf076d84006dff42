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

"""Nova's own services on SQLite files, and nova-heal run against them.

The base of the tests against Nova's functional test framework, which
only the nova-compat environment (Nova 34.0.0) can import: there
``available()`` is true; elsewhere ``Services`` is a plain object and
``IMPORT_ERROR`` tells why the framework did not import, if it should
have.

The databases: Nova's fixtures keep the API and cell databases in
in-memory SQLite, which only the test process can reach, through one
shared connection. Here they are SQLite files instead: the API database
through ``[api_database]/connection``, each cell through a cell mapping
whose ``database_connection`` is its file's URL (Nova's CellDatabases
fixture keys its engines by that string, so Nova routes to the same
file). nova-heal then runs as an operator runs it: the real command in a
process of its own, given a nova.conf, finding the cells through the cell
mappings, while Nova's services keep running. Handing the library API
engines bound to the in-memory databases would instead have shared the
services' one SQLite connection and bypassed the configuration and cell
mapping code.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import sqlalchemy as sa

from healreq.db import tables
from healreq.tests.compat import base

# The Nova whose functional framework the nova-compat environment holds.
SERIES = 34

_Base = object
# Why the framework did not import, where it should have.
IMPORT_ERROR = None
if base.NOVA_VERSION is not None and base.NOVA_VERSION[0] == SERIES:
    try:
        from nova import conf as nova_conf
        from nova import context as nova_context
        from nova import objects
        from nova.tests import fixtures as nova_fixtures
        from nova.tests.functional import integrated_helpers
        from oslo_utils.fixture import uuidsentinel
        _Base = integrated_helpers.ProviderUsageBaseTestCase
    except ImportError as exc:  # pragma: no cover - depends on the env
        IMPORT_ERROR = exc

DATA = 'nova_object.data'


def available():
    """Whether Nova's functional framework imported, so the tests run."""
    return _Base is not object


class Services(_Base):
    """Nova's services on SQLite files, and nova-heal run against them."""

    compute_driver = 'fake.MediumFakeDriver'
    weights = None  # HostNameWeigherFixture's default

    def setUp(self):
        self.directory = tempfile.mkdtemp(prefix='healreq-services-')
        self.addCleanup(shutil.rmtree, self.directory, True)
        # The wheel installs api-paste.ini under <prefix>/etc/nova, not
        # where the test configuration looks for it by default.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.flags(connection=self._url('api'), group='api_database')
        # Before the scheduler starts: it loads its weighers then.
        self.useFixture(nova_fixtures.HostNameWeigherFixture(self.weights))
        super().setUp()
        self.api_engine = sa.create_engine(self._url('api'))
        self.addCleanup(self.api_engine.dispose)
        self.cell_engine = sa.create_engine(self._url('cell1'))
        self.addCleanup(self.cell_engine.dispose)
        self.config_file = os.path.join(self.directory, 'nova.conf')
        with open(self.config_file, 'w') as handle:
            handle.write('[api_database]\nconnection = %s\n'
                         '[database]\nconnection = %s\n'
                         '[healreq]\nskip_updated_within = 0\n'
                         'state_path = %s\n'
                         % (self._url('api'), self._url('cell1'),
                            self.directory))

    def _url(self, name):
        return 'sqlite:///%s' % os.path.join(self.directory,
                                             'nova_%s.sqlite' % name)

    def _setup_cells(self):
        """cell0 and cell1 as Nova's test base has them, in SQLite files.

        Each mapping's database_connection is its file's URL; Nova's
        CellDatabases creates a cell's engine from [database]/connection
        when it is added.
        """
        cells = nova_fixtures.CellDatabases()
        context = nova_context.get_context()
        conf = nova_conf.CONF
        for name, uuid in (('cell0', objects.CellMapping.CELL0_UUID),
                           ('cell1', uuidsentinel.cell1)):
            url = self._url(name)
            mapping = objects.CellMapping(
                context=context, uuid=uuid, name=name,
                transport_url='fake://nowhere/', database_connection=url)
            mapping.create()
            self.cell_mappings[name] = mapping
            conf.set_override('connection', url, group='database')
            try:
                cells.add_cell_database(url, default=name == 'cell1')
            finally:
                conf.clear_override('connection', group='database')
        self.useFixture(cells)

    # -- nova-heal and the rows ----------------------------------------

    def heal(self, *args):
        """Run ``nova-heal request-specs`` in a process of its own.

        Returns its exit code and its JSON report.
        """
        process = subprocess.run(
            [sys.executable, '-m', 'healreq', '--config-file',
             self.config_file, 'request-specs', '--format', 'json']
            + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=300)
        try:
            return process.returncode, json.loads(process.stdout)
        except ValueError:
            self.fail('nova-heal wrote no JSON report (exit %d): %s%s' % (
                process.returncode, process.stdout, process.stderr))

    def heal_ok(self, *args):
        """Heal; return ``{uuid: (status, reason)}`` of what it found."""
        code, document = self.heal(*args)
        self.assertEqual(0, code, document)
        self.assertEqual(base.RELEASE.series, document['release']['series'])
        return {r['instance_uuid']: (r['status'], r['reason'])
                for r in document['results']}

    def spec(self, server):
        """The stored spec of ``server``'s instance (its data), or None."""
        t = tables.request_specs
        with self.api_engine.connect() as conn:
            text = conn.execute(sa.select(t.c.spec).where(
                t.c.instance_uuid == server['id'])).scalar()
        return None if text is None else json.loads(text)[DATA]

    def instance_zone(self, server):
        """``instances.availability_zone`` of ``server``."""
        t = tables.instances
        with self.cell_engine.connect() as conn:
            return conn.execute(sa.select(t.c.availability_zone).where(
                t.c.uuid == server['id'])).scalar()

    def edit_spec(self, server, **values):
        """Set fields of the stored spec, as drift leaves them."""
        t = tables.request_specs
        with self.api_engine.begin() as conn:
            spec = json.loads(conn.execute(sa.select(t.c.spec).where(
                t.c.instance_uuid == server['id'])).scalar())
            spec[DATA].update(values)
            conn.execute(t.update().where(
                t.c.instance_uuid == server['id']).values(
                spec=json.dumps(spec)))

    def delete_spec(self, server):
        t = tables.request_specs
        with self.api_engine.begin() as conn:
            self.assertEqual(1, conn.execute(t.delete().where(
                t.c.instance_uuid == server['id'])).rowcount)

    # -- Nova's API ----------------------------------------------------

    def anti_affinity_members(self, *names):
        """A new anti-affinity group and its members, booted in turn."""
        group = self.at('2.64', 'post_server_groups', {
            'name': 'web', 'policy': 'anti-affinity'})
        members = [self._wait_for_state_change(self.admin_api.post_server({
            'server': self._build_server(name=name, networks='none'),
            'os:scheduler_hints': {'group': group['id']}}), 'ACTIVE')
            for name in names]
        return group, members

    def at(self, microversion, method, *args, **kwargs):
        """Call the admin API at ``microversion``."""
        saved = self.admin_api.microversion
        self.admin_api.microversion = microversion
        try:
            return getattr(self.admin_api, method)(*args, **kwargs)
        finally:
            self.admin_api.microversion = saved

    def zones(self, aggregates):
        """Put the hosts into availability zones: ``{zone: [host]}``."""
        for zone, hosts in sorted(aggregates.items()):
            aggregate = self._create_aggregate('agg-' + zone, zone)
            for host in hosts:
                self.admin_api.add_host_to_aggregate(aggregate, host)

    def start_computes(self, *hosts):
        for host in hosts:
            self._start_compute(host)

    def host_down(self, host):
        """Stop ``host``'s compute and force its service down."""
        self.computes[host].stop()
        service, = self.admin_api.get_services(host=host,
                                               binary='nova-compute')
        self.admin_api.put_service_force_down(service['id'], True)

    def action_error(self, server, action):
        """The traceback's last line of ``action``'s failed event."""
        actions = self.at('2.51', 'get_instance_actions', server['id'])
        request_id = next(a['request_id'] for a in actions
                          if a['action'] == action)
        self._wait_for_instance_action_event(server, action, 'conductor_' + (
            'migrate_server' if action == 'migrate' else action), 'Error')
        events = self.at('2.51', 'api_get', '/servers/%s/os-instance-actions'
                         '/%s' % (server['id'], request_id)).body[
            'instanceAction']['events']
        lines = [line.strip() for event in events
                 for line in (event.get('traceback') or '').splitlines()
                 if line.strip() and set(line.strip()) - set('^~')]
        return lines[-1] if lines else None

    def server_host(self, server):
        return self.admin_api.get_server(server['id'])[
            'OS-EXT-SRV-ATTR:host']
