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

"""Real databases for functional tests: SQLite files and MySQL/MariaDB.

MySQL databases are provisioned through oslo.db's opportunistic backend
(the ``openstack_citest`` account, or OS_TEST_DBAPI_ADMIN_CONNECTION);
each test gets its own freshly created databases, dropped afterwards.
Without a server the MySQL tests skip, unless HEALREQ_TEST_REQUIRE_MYSQL
is set, in which case they fail: CI sets it.
"""

import contextlib
import copy
import datetime
import io
import json
import os
import uuid

import fixtures
from oslo_db import exception as db_exc
from oslo_db.sqlalchemy import provision
import sqlalchemy as sa
import testscenarios
import testtools

from healreq import api
from healreq.cmd import main
from healreq.db import tables
from healreq.heal import decisions
from healreq.heal import engine as heal_engine
from healreq.testing import demo
from healreq.testing import deployment as dep

REQUIRE_MYSQL = os.environ.get('HEALREQ_TEST_REQUIRE_MYSQL', '') not in (
    '', '0')


class _SQLite(object):
    name = 'SQLite'

    def __init__(self, test):
        self.directory = test.useFixture(fixtures.TempDir()).path

    def database_url(self, name):
        return 'sqlite:///%s' % os.path.join(self.directory,
                                             'nova_%s.sqlite' % name)

    def reference_url(self):
        """A [database]/connection whose template output is our cells."""
        return 'sqlite:////%s/nova' % self.directory.lstrip('/')

    def template(self, suffix):
        return '{scheme}:////{path}_%s.sqlite' % suffix


class _MySQL(object):
    name = 'MySQL'

    def __init__(self, test):
        try:
            self.backend = provision.Backend.backend_for_database_type(
                'mysql')
        except db_exc.BackendNotAvailable as exc:
            message = 'MySQL is not available: %s' % exc
            if REQUIRE_MYSQL:
                test.fail(message + ' (HEALREQ_TEST_REQUIRE_MYSQL is set)')
            test.skipTest(message)
        self.prefix = 'healreq_%s' % uuid.uuid4().hex[:10]
        test.addCleanup(self._drop_all)
        self.created = []

    def database_url(self, name):
        ident = '%s_%s' % (self.prefix, name)
        self.backend.create_named_database(ident)
        self.created.append(ident)
        return str(self.backend.provisioned_database_url(ident)
                   .render_as_string(hide_password=False))

    def reference_url(self):
        url = self.backend.provisioned_database_url(self.prefix)
        return url.render_as_string(hide_password=False)

    def template(self, suffix):
        return ('{scheme}://{username}:{password}@{hostname}/{path}_%s'
                % suffix)

    def _drop_all(self):
        for ident in self.created:
            self.backend.drop_named_database(ident, conditional=True)


def image_properties(**extra):
    """The default image's properties, plus ``extra``."""
    values = dict(dep.IMAGE_PROPERTIES)
    values.update(extra)
    return values


def without_keys(document, *keys):
    """A copy of a spec document without some of its data keys."""
    document = copy.deepcopy(document)
    for key in keys:
        document['nova_object.data'].pop(key, None)
    return document


BACKENDS = [('SQLite', dict(backend_class=_SQLite)),
            ('MySQL', dict(backend_class=_MySQL))]


class Result(object):
    def __init__(self, code, stdout, stderr):
        self.code = code
        self.stdout = stdout
        self.stderr = stderr


def run_main(argv):
    """Run ``nova-heal`` in-process; return its code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main.main(argv)
    return Result(code, out.getvalue(), err.getvalue())


class DeploymentTestCase(testscenarios.WithScenarios, testtools.TestCase):
    """A deployment with cell0 and two cells on each backend.

    cell1's mapping holds a URL template formatted from [database]
    (reference_url); cell2's mapping holds a plain URL.
    """

    scenarios = BACKENDS

    def setUp(self):
        super().setUp()
        # The audit store of every run of this test, whatever the config.
        self.state_path = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_HEALREQ__STATE_PATH', self.state_path))
        self.db = self.backend_class(self)
        self.deployment = dep.Deployment(self.db.database_url('api'))
        self.addCleanup(self.deployment.dispose)
        self.cell0 = self.deployment.add_cell(
            'cell0', self.db.database_url('cell0'), uuid=dep.CELL0_UUID)
        self.cell1 = self.deployment.add_cell(
            'cell1', self.db.database_url('cell1'),
            stored_url=self.db.template('cell1'))
        self.cell2 = self.deployment.add_cell(
            'cell2', self.db.database_url('cell2'))
        self.config_file = self.write_config()

    def write_config(self, extra=''):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as handle:
            handle.write('[DEFAULT]\ntransport_url = rabbit://nova:pw@mq//\n'
                         '[api_database]\nconnection = %s\n'
                         '[database]\nconnection = %s\n'
                         '[healreq]\nskip_updated_within = 60\n%s'
                         % (self.deployment.api_engine.url.render_as_string(
                             hide_password=False),
                            self.db.reference_url(), extra))
        return path

    def heal(self, *args, config_file=None):
        return run_main(['--config-file', config_file or self.config_file,
                         'request-specs'] + list(args))

    # -- helpers shared by the functional tests ----------------------------

    def heal_json(self, *args, config_file=None):
        """Run with ``--format json``; return the result and the document.

        Fails the test unless stdout is exactly one JSON document.
        """
        result = self.heal('--format', 'json', *args,
                           config_file=config_file)
        try:
            document = json.loads(result.stdout)
        except ValueError as exc:
            self.fail('stdout is not one JSON document (%s): %r\n%s'
                      % (exc, result.stdout, result.stderr))
        return result, document

    def write_config_text(self, text):
        """Write a configuration file holding exactly ``text``."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def add_drifted(self, cell, **kwargs):
        """An instance running m1.large whose spec holds m1.small."""
        return self.deployment.add_instance(
            cell, demo.M1_LARGE, spec_flavor=demo.M1_SMALL, **kwargs)

    def add_consistent(self, cell, **kwargs):
        return self.deployment.add_instance(cell, demo.M1_SMALL, **kwargs)

    def spec(self, instance_uuid):
        """The stored spec, parsed."""
        return json.loads(self.deployment.spec_text(instance_uuid))

    def spec_flavor(self, instance_uuid):
        return self.spec(instance_uuid)['nova_object.data']['flavor']

    def spec_updated_at(self, instance_uuid):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return conn.execute(sa.select(t.c.updated_at).where(
                t.c.instance_uuid == instance_uuid)).scalar()

    def update_instance(self, cell, instance_uuid, **values):
        t = tables.instances
        with cell.engine.begin() as conn:
            conn.execute(t.update().where(
                t.c.uuid == instance_uuid).values(**values))

    def update_extra(self, cell, instance_uuid, **values):
        t = tables.instance_extra
        with cell.engine.begin() as conn:
            conn.execute(t.update().where(
                t.c.instance_uuid == instance_uuid).values(**values))

    def instance_flavors(self, cell, instance_uuid):
        """``instance_extra.flavor`` of an instance, parsed."""
        t = tables.instance_extra
        with cell.engine.connect() as conn:
            return json.loads(conn.execute(sa.select(t.c.flavor).where(
                t.c.instance_uuid == instance_uuid)).scalar())

    def assert_heals(self, cell, instance_uuid, reason, changes, *args):
        """Dry run, heal and run again; return the healed spec, parsed.

        ``changes`` are the expected ``(field, before, after)`` of the
        instance's finding; any other instance must be consistent. The
        dry run (text) shows them on the finding line and writes nothing;
        the heal (JSON) names exactly those fields in ``drift``; a second
        run finds nothing left to heal and writes nothing.
        """
        before = self.deployment.spec_text(instance_uuid)
        result = self.heal('--dry-run', *args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn('DRIFTED   %s %s %s: %s' % (
            instance_uuid, cell.name, reason,
            '; '.join('%s: %s -> %s' % change for change in changes)),
            result.stdout.splitlines())
        self.assertEqual(before, self.deployment.spec_text(instance_uuid))
        result, doc = self.heal_json(*args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(instance_uuid, 'healed', [c[0] for c in changes], reason)],
            [(r['instance_uuid'], r['status'], r['drift'], r['reason'])
             for r in doc['results']])
        self.assertEqual(
            [dict(field=f, before=b, after=a) for f, b, a in changes],
            doc['results'][0]['changes'])
        healed = self.deployment.spec_text(instance_uuid)
        self.assertNotEqual(before, healed)
        again = self.heal(*args)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual(healed, self.deployment.spec_text(instance_uuid))
        return json.loads(healed)

    def assert_refused(self, cell, instance_uuid, reason, detail, *args):
        """The instance is an error (exit 2) and its spec is not written.

        ``detail`` must appear in the text report's finding line.
        """
        before = self.deployment.spec_text(instance_uuid)
        result = self.heal(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        prefix = 'ERROR     %s %s %s: ' % (instance_uuid, cell.name, reason)
        lines = [line for line in result.stdout.splitlines()
                 if line.startswith(prefix)]
        self.assertEqual(1, len(lines), result.stdout)
        self.assertIn(detail, lines[0])
        result, doc = self.heal_json(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(instance_uuid, 'error', reason, [])],
                         [(r['instance_uuid'], r['status'], r['reason'],
                           r['drift']) for r in doc['results']])
        self.assertEqual(before, self.deployment.spec_text(instance_uuid))
        return doc['results'][0]

    def assert_consistent(self, *args):
        """Nothing to heal (exit 4) and no spec is written."""
        specs = self.all_spec_texts()
        result, doc = self.heal_json(*args)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([], doc['results'])
        self.assertEqual(len(specs), doc['summary']['consistent'])
        self.assertEqual(specs, self.all_spec_texts())

    def all_spec_texts(self):
        """Every stored spec text, by instance UUID."""
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return dict(conn.execute(sa.select(t.c.instance_uuid,
                                               t.c.spec)).all())

    def run_engine(self, clock=None, **options):
        """Run request-specs in-process through the API, as the CLI does.

        Returns the RunReport. ``clock`` replaces the run's clock.
        """
        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        options.setdefault('settings',
                           decisions.Settings(skip_updated_within=60))
        kwargs = {'clock': clock} if clock is not None else {}
        return api.run_request_specs(conf, heal_engine.Options(**options),
                                     **kwargs).report


def utcnow():
    """Naive UTC now, as Nova stores timestamps."""
    return datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None, microsecond=0)


class ActingClock(object):
    """An Engine clock that runs ``action`` once, on call ``on_call``.

    The engine reads its clock once per batch right after reading the
    batch (call 1), then for each drifted instance after re-reading it
    (call 2, right before the write) and for the write's updated_at.
    """

    def __init__(self, action, on_call):
        self.action = action
        self.on_call = on_call
        self.calls = 0
        self.fired = False

    def __call__(self):
        self.calls += 1
        if self.calls == self.on_call:
            self.action()
            self.fired = True
        return utcnow()
