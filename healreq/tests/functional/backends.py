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

"""Real database backends for functional tests, as fixtures.

Each backend fixture hands out URLs of fresh, empty databases that live as
long as the fixture: SQLite files in a temporary directory, or MySQL /
MariaDB databases provisioned through oslo.db's opportunistic backend (the
``openstack_citest`` account, or OS_TEST_DBAPI_ADMIN_CONNECTION) and
dropped at cleanup. Without a MySQL server the MySQL fixture skips the test
using it, unless HEALREQ_TEST_REQUIRE_MYSQL is set, in which case it fails
it: CI sets it.
"""

import os
import unittest
import uuid

import fixtures
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import provision
import sqlalchemy as sa

REQUIRE_MYSQL = os.environ.get('HEALREQ_TEST_REQUIRE_MYSQL', '') not in (
    '', '0')


class SQLiteBackend(fixtures.Fixture):
    """SQLite files in a temporary directory."""

    name = 'SQLite'

    def _setUp(self):
        self.directory = self.useFixture(fixtures.TempDir()).path

    def database_url(self, name):
        """The URL of a new database called ``name``."""
        return 'sqlite:///%s' % os.path.join(self.directory,
                                             'nova_%s.sqlite' % name)

    def reference_url(self):
        """A [database]/connection whose template output is our cells."""
        return 'sqlite:////%s/nova' % self.directory.lstrip('/')

    def template(self, suffix):
        """A cell URL template that formats to database ``suffix``."""
        return '{scheme}:////{path}_%s.sqlite' % suffix


class MySQLBackend(fixtures.Fixture):
    """MySQL / MariaDB databases, created on demand and dropped after."""

    name = 'MySQL'

    def setUp(self):
        # Checked before the fixture sets up, so that the skip or failure
        # reaches the test as it is: Fixture.setUp would wrap it in
        # MultipleExceptions, which testtools reports as an error.
        try:
            self.backend = provision.Backend.backend_for_database_type(
                'mysql')
        except db_exc.BackendNotAvailable as exc:
            _unavailable('MySQL is not available: %s' % exc, REQUIRE_MYSQL,
                         'HEALREQ_TEST_REQUIRE_MYSQL')
        super().setUp()

    def _setUp(self):
        self.prefix = 'healreq_%s' % uuid.uuid4().hex[:10]
        self.created = []
        self.addCleanup(self._drop_all)

    def database_url(self, name):
        """The URL of a new database called ``name`` (with its password)."""
        ident = '%s_%s' % (self.prefix, name)
        self.backend.create_named_database(ident)
        self.created.append(ident)
        return str(self.backend.provisioned_database_url(ident)
                   .render_as_string(hide_password=False))

    def latin1_database_url(self, name):
        """``database_url``, of a database whose default charset is latin1.

        Upstream MariaDB's and MySQL 5.7's default, unlike Debian's.
        """
        url = self.database_url(name)
        engine = sa.create_engine(url)
        try:
            with engine.begin() as conn:
                conn.execute(sa.text(
                    'ALTER DATABASE %s CHARACTER SET latin1 COLLATE '
                    'latin1_swedish_ci' % engine.url.database))
        finally:
            engine.dispose()
        return url

    def reference_url(self):
        """A [database]/connection whose template output is our cells."""
        url = self.backend.provisioned_database_url(self.prefix)
        return url.render_as_string(hide_password=False)

    def template(self, suffix):
        """A cell URL template that formats to database ``suffix``."""
        return ('{scheme}://{username}:{password}@{hostname}/{path}_%s'
                % suffix)

    def _drop_all(self):
        # A connection a failed test left open in a transaction would make
        # DROP DATABASE wait for its metadata lock for the server's
        # lock_wait_timeout (a year): end such connections first.
        self._kill_connections_to(self.created)
        for ident in self.created:
            self.backend.drop_named_database(ident, conditional=True)

    def _kill_connections_to(self, databases):
        with self.backend.engine.connect() as conn:
            _kill_connections(conn, databases)


# testscenarios scenarios: a test case using them gets ``backend_fixture``
# and runs once per backend, its id ending in "(SQLite)" or "(MySQL)".
SCENARIOS = [(backend.name, dict(backend_fixture=backend))
             for backend in (SQLiteBackend, MySQLBackend)]


GALERA_ENV = 'HEALREQ_TEST_GALERA'
# The HAProxy in front of the cluster (``host:port``;
# ``tools/galera-cluster.sh proxy-start`` prints it).
GALERA_PROXY_ENV = 'HEALREQ_TEST_GALERA_PROXY'
# Its second listener, with kolla-ansible's hour-long timeouts and the
# sessions of a server marked down left open (``proxy-start`` prints it).
GALERA_PROXY_LONG_ENV = 'HEALREQ_TEST_GALERA_PROXY_LONG'
REQUIRE_GALERA = os.environ.get('HEALREQ_TEST_REQUIRE_GALERA', '') not in (
    '', '0')
GALERA_USER = 'openstack_citest'


def galera_nodes():
    """The ``(host, port)`` of each node HEALREQ_TEST_GALERA names."""
    nodes = []
    for entry in os.environ.get(GALERA_ENV, '').split(','):
        entry = entry.strip()
        if entry:
            host, _, port = entry.rpartition(':')
            nodes.append((host, int(port)))
    return nodes


def galera_proxy(variable=GALERA_PROXY_ENV):
    """The ``(host, port)`` HEALREQ_TEST_GALERA_PROXY names, or None.

    Or the one ``variable`` names (GALERA_PROXY_LONG_ENV).
    """
    entry = os.environ.get(variable, '').strip()
    if not entry:
        return None
    host, _, port = entry.rpartition(':')
    return host, int(port)


class GaleraBackend(fixtures.Fixture):
    """Databases on a MariaDB Galera cluster, dropped after.

    HEALREQ_TEST_GALERA names its nodes (``host:port,host:port,...``;
    ``tools/galera-cluster.sh start`` prints it). Without it the test is
    skipped, unless HEALREQ_TEST_REQUIRE_GALERA is set: then it fails.
    Databases are created through the first node and reached through any
    (``database_url(name, node)``, ``on_node(url, node)``), or through
    the proxy in front of the cluster that HEALREQ_TEST_GALERA_PROXY
    names (``proxy_url(url)``), which a test needing it asks for with
    ``require_proxy()``; or through the proxy's listener with kolla's
    hour-long timeouts that HEALREQ_TEST_GALERA_PROXY_LONG names
    (``proxy_url(url, long=True)``, ``require_proxy(long=True)``).
    """

    name = 'Galera'

    def setUp(self):
        self.nodes = galera_nodes()
        self.proxy = galera_proxy()
        self.proxy_long = galera_proxy(GALERA_PROXY_LONG_ENV)
        problem = None
        if len(self.nodes) < 2:
            problem = '%s names no Galera cluster' % GALERA_ENV
        else:
            problem = self._unreachable()
        if problem:
            _unavailable('Galera is not available: %s' % problem,
                         REQUIRE_GALERA, 'HEALREQ_TEST_REQUIRE_GALERA')
        super().setUp()

    def require_proxy(self, reachable=True, long=False):
        """Skip the test unless the proxy answers; fail it if required.

        Fails rather than skips when HEALREQ_TEST_REQUIRE_GALERA is set.
        Unless ``reachable``, the proxy need only be named (a test that
        stops nodes or the proxy itself may find none answering). With
        ``long``, its listener with kolla's timeouts is required.
        """
        problem = None
        variable = GALERA_PROXY_LONG_ENV if long else GALERA_PROXY_ENV
        address = self.proxy_long if long else self.proxy
        if address is None:
            problem = '%s names no proxy' % variable
        elif reachable:
            problem = self._proxy_unreachable(long)
        if problem:
            _unavailable('the Galera proxy is not available: %s' % problem,
                         REQUIRE_GALERA, 'HEALREQ_TEST_REQUIRE_GALERA')

    def _proxy_unreachable(self, long=False):
        address = self.proxy_long if long else self.proxy
        engine = sa.create_engine(self.proxy_url(self.server_url(0), long))
        try:
            with engine.connect() as conn:
                conn.execute(sa.text('SELECT 1'))
        except sa.exc.DBAPIError as exc:
            return 'cannot connect to %s:%d: %s' % (address + (exc.orig,))
        finally:
            engine.dispose()
        return None

    def _unreachable(self):
        engine = sa.create_engine(self.server_url(0))
        try:
            with engine.connect() as conn:
                size = conn.execute(sa.text(
                    "SHOW STATUS LIKE 'wsrep_cluster_size'")).first()
        except sa.exc.DBAPIError as exc:
            return 'cannot connect to %s:%d: %s' % (
                self.nodes[0] + (exc.orig,))
        finally:
            engine.dispose()
        if size is None or int(size[1]) < len(self.nodes):
            return 'the cluster has %s nodes, not %d' % (
                size and size[1], len(self.nodes))
        return None

    def _setUp(self):
        self.prefix = 'healreq_%s' % uuid.uuid4().hex[:10]
        self.created = []
        self.addCleanup(self._drop_all)

    def server_url(self, node, database=''):
        """The URL of ``database`` on node ``node`` (counted from 0)."""
        host, port = self.nodes[node]
        return 'mysql+pymysql://%s:%s@%s:%d/%s' % (
            GALERA_USER, GALERA_USER, host, port, database)

    def on_node(self, url, node):
        """``url`` pointed at node ``node`` instead."""
        host, port = self.nodes[node]
        return sa.engine.make_url(url).set(host=host, port=port) \
            .render_as_string(hide_password=False)

    def proxy_url(self, url, long=False):
        """``url`` pointed at the proxy instead (see ``require_proxy``).

        With ``long``, at its listener with kolla's timeouts.
        """
        address = self.proxy_long if long else self.proxy
        if address is None:
            raise AssertionError('%s names no proxy' % (
                GALERA_PROXY_LONG_ENV if long else GALERA_PROXY_ENV))
        host, port = address
        return sa.engine.make_url(url).set(host=host, port=port) \
            .render_as_string(hide_password=False)

    def database_url(self, name, node=0):
        """The URL of a new database called ``name``, on node ``node``."""
        ident = '%s_%s' % (self.prefix, name)
        self._execute('CREATE DATABASE %s CHARACTER SET utf8mb4' % ident)
        self.created.append(ident)
        return self.server_url(node, ident)

    def reference_url(self):
        """A [database]/connection whose template output is our cells."""
        return self.server_url(0, self.prefix)

    def template(self, suffix):
        """A cell URL template that formats to database ``suffix``."""
        return ('{scheme}://{username}:{password}@{hostname}:{port}/'
                '{path}_%s' % suffix)

    def _execute(self, *statements):
        engine = sa.create_engine(self.server_url(0))
        try:
            with engine.connect() as conn:
                for statement in statements:
                    conn.execute(sa.text(statement))
        finally:
            engine.dispose()

    def _drop_all(self):
        engine = sa.create_engine(self.server_url(0))
        try:
            with engine.connect() as conn:
                _kill_connections(conn, self.created)
                for ident in self.created:
                    conn.execute(sa.text('DROP DATABASE IF EXISTS %s'
                                         % ident))
        finally:
            engine.dispose()


def _kill_connections(conn, databases):
    """End the connections to ``databases`` on ``conn``'s server."""
    if not databases:
        return
    ids = conn.execute(sa.text(
        'SELECT id FROM information_schema.processlist WHERE '
        'db IN :databases AND id <> CONNECTION_ID()').bindparams(
        sa.bindparam('databases', expanding=True)),
        {'databases': list(databases)}).scalars().all()
    for connection_id in ids:
        try:
            conn.execute(sa.text('KILL CONNECTION %d' % connection_id))
        except sa.exc.DBAPIError:
            pass  # it ended meanwhile


# The scenario of the tests that need a Galera cluster: their ids contain
# "(Galera)".
GALERA_SCENARIOS = [('Galera', dict(backend_fixture=GaleraBackend))]


def _unavailable(message, required, variable):
    """Skip the test for want of a backend, or fail it if ``required``."""
    if required:
        raise AssertionError('%s (%s is set)' % (message, variable))
    raise unittest.SkipTest(message)
