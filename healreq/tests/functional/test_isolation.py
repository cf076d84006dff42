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

"""One bad cell or instance fails alone, and errors name what failed."""

import json
import os
import uuid as uuidlib

import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url

from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq.tests.functional import backends
from healreq.tests.functional import deployment_case


def _audit_changes(state_path):
    """Every change row of the audit store in ``state_path``."""
    path = os.path.join(state_path, 'audit.sqlite')
    engine = sa.create_engine('sqlite:///%s' % path)
    try:
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(
                sa.select(audit_schema.changes))]
    finally:
        engine.dispose()


def _account_url(test, url, grants):
    """The URL of ``url``'s database through a new MySQL account.

    ``grants`` are ``(privileges, object)`` pairs; the account is dropped
    when ``test`` ends.
    """
    user = 'hr_%s' % uuidlib.uuid4().hex[:10]
    password = 'Pw%s' % uuidlib.uuid4().hex[:8]
    admin = test.db.backend.engine
    hosts = ('localhost', '127.0.0.1', '%')
    with admin.begin() as conn:
        for host in hosts:
            account = "'%s'@'%s'" % (user, host)
            conn.execute(sa.text('CREATE USER %s IDENTIFIED BY :pw'
                                 % account), {'pw': password})
            for privileges, target in grants:
                conn.execute(sa.text('GRANT %s ON %s TO %s'
                                     % (privileges, target, account)))

    def drop():
        with admin.begin() as conn:
            for host in hosts:
                conn.execute(sa.text("DROP USER IF EXISTS '%s'@'%s'"
                                     % (user, host)))
    test.addCleanup(drop)
    return 'mysql+pymysql://%s:%s@%s:%s/%s' % (
        user, password, url.host, url.port or 3306, url.database)


class MissingDriverTest(deployment_case.DeploymentTestCase):
    """A cell whose database driver is not installed fails alone."""

    def assertDriverCellFails(self, url, driver):
        healthy = [self.add_drifted(self.cell1), self.add_drifted(self.cell2)]
        broken = self.deployment.add_cell('broken', url, create_schema=False)
        result, doc = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(2, doc['summary']['healed'])
        failed = [c for c in doc['cells'] if c['error']]
        self.assertEqual([broken.uuid], [c['cell_uuid'] for c in failed])
        self.assertIn(driver, failed[0]['error'])
        self.assertEqual(sorted(healthy),
                         sorted(r['instance_uuid'] for r in doc['results']
                                if r['status'] == 'healed'))
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)
        run = self.run_json('audit', 'show', doc['run_id'])[1]
        self.assertEqual(2, run['exit_code'])

    def test_postgresql_without_its_driver(self):
        self.assertDriverCellFails(
            'postgresql://u:SECRETPW@127.0.0.1/nova', 'psycopg')

    def test_mysql_without_mysqldb(self):
        self.assertDriverCellFails('mysql://u:SECRETPW@127.0.0.1/nova',
                                   'MySQLdb')


class InstanceFailureTest(deployment_case.DeploymentTestCase):
    """An unexpected failure on one instance stays with that instance."""

    # Where the recursion limit falls does not depend on the backend.
    scenarios = [s for s in backends.SCENARIOS if s[0] == 'SQLite']

    def nested(self, uuid, depth):
        """Give ``uuid``'s spec a hint nested ``depth`` lists deep."""
        spec = json.loads(self.originals[uuid])
        spec['nova_object.data']['scheduler_hints'] = {
            'h': json.loads('[' * 10 + ']' * 10)}
        text = json.dumps(spec).replace('[' * 10 + ']' * 10,
                                        '[' * depth + ']' * depth)
        self.deployment.set_spec(uuid, text)
        return text

    def deepest_readable(self, uuid):
        """The deepest nesting that a walk parses, by bisection."""
        readable, unreadable = 10, 5000
        while unreadable - readable > 1:
            depth = (readable + unreadable) // 2
            self.nested(uuid, depth)
            result, doc = self.heal_json('--dry-run')
            reason, = [r['reason'] for r in doc['results']
                       if r['instance_uuid'] == uuid]
            if reason == 'spec-unparsable':
                unreadable = depth
            else:
                readable = depth
        return readable

    def test_spec_too_deep_to_serialise(self):
        first = self.add_drifted(self.cell1)
        deep = self.add_drifted(self.cell1)
        last = self.add_drifted(self.cell1)
        self.originals = self.all_spec_texts()
        # Parsed, it is serialised again further down the stack, where
        # the same nesting exceeds the recursion limit.
        text = self.nested(deep, self.deepest_readable(deep))
        result, doc = self.heal_json()
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        statuses = {r['instance_uuid']: (r['status'], r['reason'])
                    for r in doc['results']}
        self.assertEqual('healed', statuses[first][0])
        self.assertEqual('healed', statuses[last][0])
        self.assertEqual(('error', 'internal-error'), statuses[deep])
        self.assertIn('RecursionError',
                      [r for r in doc['results']
                       if r['instance_uuid'] == deep][0]['detail'])
        self.assertEqual(text, self.deployment.spec_text(deep))
        self.assertEqual(2, doc['summary']['healed'])
        self.assertEqual(1, doc['summary']['errors'])


class OversizedWriteTest(deployment_case.DeploymentTestCase):
    """A write bigger than MySQL's max_allowed_packet fails one instance.

    Only MySQL limits the size of a statement, so this runs on MySQL.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def test_write_over_max_allowed_packet(self):
        with self.deployment.api_engine.connect() as conn:
            packet = conn.execute(sa.text(
                'SELECT @@max_allowed_packet')).scalar()
        first = self.add_drifted(self.cell1)
        big = self.add_drifted(self.cell1)
        last = self.add_drifted(self.cell1)
        spec = self.spec(big)
        spec['nova_object.data']['scheduler_hints'] = {
            'h': ['x' * int(packet * 0.6)]}
        text = json.dumps(spec)
        self.deployment.set_spec(big, text)
        for attempt in range(2):
            result, doc = self.heal_json()
            self.assertEqual(2, result.code, result.stdout + result.stderr)
            self.assertEqual([], [c for c in doc['cells'] if c['error']])
            statuses = {r['instance_uuid']: (r['status'], r['reason'])
                        for r in doc['results']}
            self.assertEqual(('error', 'write-failed'), statuses[big])
            if attempt == 0:
                self.assertEqual('healed', statuses[first][0])
                self.assertEqual('healed', statuses[last][0])
            self.assertEqual(text, self.deployment.spec_text(big))
        self.assertEqual('m1.large', self.spec_flavor(last)[
            'nova_object.data']['name'])
        states = [c['state'] for c in _audit_changes(self.state_path)
                  if c['instance_uuid'] == big]
        self.assertEqual(['refused', 'refused'], states)


class ReadOnlyApiDatabaseTest(deployment_case.DeploymentTestCase):
    """A heal without UPDATE on request_specs stops before any intent.

    On MySQL the API database is reached through a SELECT-only account;
    on SQLite it is opened read-only.
    """

    def setUp(self):
        super().setUp()
        url = sa_url.make_url(self.cells.api_url())
        if self.db.name == 'SQLite':
            api_url = 'sqlite:///file:%s?mode=ro&uri=true' % url.database
        else:
            api_url = _account_url(self, url,
                                   [('SELECT', '`%s`.*' % url.database)])
        self.read_only_config = self.write_config_text(
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\n'
            % (api_url, self.cells.backend.reference_url()))

    def test_heal_stops_before_any_intent(self):
        drifted = [self.add_drifted(self.cell1), self.add_drifted(self.cell2)]
        before = self.all_spec_texts()
        result = self.heal(config_file=self.read_only_config)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        message = result.stdout + result.stderr
        self.assertIn('API database', message)
        self.assertIn('UPDATE', message)
        self.assertIn('request_specs', message)
        self.assertNotIn('cell database', message)
        self.assertEqual(before, self.all_spec_texts())
        self.assertEqual([], _audit_changes(self.state_path))
        result, doc = self.heal_json('--dry-run',
                                     config_file=self.read_only_config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(sorted(drifted),
                         sorted(r['instance_uuid'] for r in doc['results']))


class InstanceInAnotherCellTest(deployment_case.DeploymentTestCase):
    """--instance agrees with a full run on an instance mapped elsewhere."""

    def test_instance_mapped_to_another_cell(self):
        uuid = self.add_drifted(self.cell1, mapping_cell_id=self.cell2.id)
        before = self.deployment.spec_text(uuid)
        results = []
        for args in ((), ('--instance', uuid)):
            result, doc = self.heal_json(*args)
            self.assertEqual(2, result.code, result.stdout + result.stderr)
            results.append([(r['instance_uuid'], r['cell_uuid'],
                             r['status'], r['reason'])
                            for r in doc['results']])
        self.assertEqual([(uuid, self.cell1.uuid, 'error',
                           'instance-mapped-elsewhere')], results[0])
        self.assertEqual(results[0], results[1])
        self.assertEqual(before, self.deployment.spec_text(uuid))


class AuditInsertDeniedTest(deployment_case.DeploymentTestCase):
    """An audit store refusing to record a change names the audit store.

    Only a MySQL store has privileges, so this runs on MySQL alone.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']

    def test_heal_names_the_audit_store(self):
        url = self.db.database_url('audit')
        audit_store.AuditStore(url).dispose()
        database = sa_url.make_url(url).database
        limited = _account_url(self, sa_url.make_url(url), [
            ('SELECT, UPDATE', '`%s`.*' % database),
            ('INSERT', '`%s`.`runs`' % database),
            ('INSERT', '`%s`.`findings`' % database)])
        config = self.write_config('audit_connection = %s\n' % limited)
        drifted = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(drifted)
        result = self.heal(config_file=config)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertIn('audit store', result.stderr)
        self.assertIn('INSERT', result.stderr)
        self.assertNotIn('cell database', result.stdout + result.stderr)
        self.assertEqual(before, self.deployment.spec_text(drifted))
