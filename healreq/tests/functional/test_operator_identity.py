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

"""The operator recorded is the process's user, not what its environment
says.

On SQLite the store is the default file; on MySQL it is a MySQL database
named by ``audit_connection``, whose column refuses a value too long.
"""

import json
import os
import pwd

import fixtures
import sqlalchemy as sa

from healreq.tests.functional import audit_case
from healreq.tests.functional import other_user

ROOT = pwd.getpwuid(0).pw_name


class OperatorTestCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.store_url = self.audit_url()
        if self.db.name == 'MySQL':
            self.store_url = self.db.database_url('audit')
            self.config_file = self.write_config(
                'audit_connection = %s\n' % self.store_url)
        self.login = pwd.getpwuid(os.getuid()).pw_name
        self.add_drifted(self.cell1)
        for variable in ('SUDO_USER', 'LOGNAME', 'USER', 'LNAME',
                         'USERNAME'):
            self.useFixture(fixtures.EnvironmentVariable(variable))

    def expected(self, *annotations):
        """The real user as recorded: passwd name, uid, annotations."""
        return '%s (%s)' % (self.login, ', '.join(
            ('uid %d' % os.getuid(),) + annotations))

    def set_environment(self, **values):
        for variable, value in values.items():
            self.useFixture(fixtures.EnvironmentVariable(variable, value))

    def recorded_operator(self):
        """Run a dry run; the operator its run records."""
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        return self.audit_runs()[document['run_id']]['operator']


class EnvironmentTest(OperatorTestCase):

    def test_login_name_of_the_environment_is_an_annotation(self):
        self.set_environment(LOGNAME='alice', USER='alice')
        self.assertEqual(self.expected('LOGNAME=alice'),
                         self.recorded_operator())

    def test_sudo_user(self):
        self.set_environment(SUDO_USER='alice', LOGNAME=self.login,
                             USER=self.login)
        self.assertEqual(self.expected('SUDO_USER=alice'),
                         self.recorded_operator())

    def test_the_user_alone_when_the_environment_agrees(self):
        self.set_environment(LOGNAME=self.login, USER=self.login)
        self.assertEqual(self.expected(), self.recorded_operator())

    def test_newlines_cannot_forge_rows_of_audit_list(self):
        forged = ('alice\n00000000-0000-4000-8000-000000000000  '
                  '2026-01-01 00:00:00  heal     exit 0  eve@host\r\x1b[2K')
        self.set_environment(LOGNAME=forged, SUDO_USER='mal\nlory')
        operator = self.recorded_operator()
        self.assertTrue(operator.isprintable(), operator)
        self.assertTrue(operator.startswith(
            self.expected('SUDO_USER=mallory', 'LOGNAME=alice00000000')[
                :-1]), operator)
        result = self.run_cli('audit', 'list')
        self.assertEqual(0, result.code, result.stderr)
        # The header line, then one line for the one run.
        self.assertEqual(2, len(result.stdout.splitlines()), result.stdout)

    def test_rows_recorded_before_are_listed_on_one_line(self):
        self.recorded_operator()
        store = sa.create_engine(self.store_url)
        self.addCleanup(store.dispose)
        with store.begin() as conn:
            conn.execute(sa.text("UPDATE runs SET operator = 'alice\n"
                                 "forged  row\r', host = 'h\nx'"))
        result = self.run_cli('audit', 'list')
        self.assertEqual(0, result.code, result.stderr)
        # The header line, then one line for the one run.
        self.assertEqual(2, len(result.stdout.splitlines()), result.stdout)
        self.assertIn(' aliceforged  row@hx ', result.stdout)
        run_line = result.stdout.splitlines()[1]
        shown = self.run_cli('audit', 'show', run_line.split()[0])
        self.assertIn(' by aliceforged  row@hx, ', shown.stdout)

    def test_a_long_name_is_recorded_shortened(self):
        self.set_environment(LOGNAME='x' * 5000)
        self.assertEqual(self.expected('LOGNAME=%s' % ('x' * 64)),
                         self.recorded_operator())


class UidWithoutPasswdEntryTest(OperatorTestCase):
    """A container started under a UID its /etc/passwd does not know."""

    def setUp(self):
        super().setUp()
        other_user.require_root(self)
        self.uid = other_user.uid_without_passwd_entry()
        self.state = self.useFixture(fixtures.TempDir()).path
        os.chown(self.state, self.uid, self.uid)
        os.chmod(self.state, 0o700)
        directories = [os.path.dirname(self.config_file)]
        if self.db.name == 'SQLite':
            directories.append(self.db.directory)
        other_user.open_to_all(*directories)
        # As such a container has it: no login name, no home directory.
        self.environ = {k: v for k, v in os.environ.items()
                        if k not in ('SUDO_USER', 'LOGNAME', 'USER',
                                     'LNAME', 'USERNAME', 'HOME')}
        self.environ['OS_HEALREQ__STATE_PATH'] = self.state

    def run_as_uid(self, *argv):
        return other_user.run_as(
            self.uid, ['--config-file', self.config_file] + list(argv),
            self.environ)

    def test_runs_and_records_the_uid(self):
        result = self.run_as_uid('request-specs', '--dry-run', '--format',
                                 'json')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        run_id = json.loads(result.stdout)['run_id']
        listed = self.run_as_uid('audit', 'list', '--format', 'json')
        self.assertEqual(0, listed.code, listed.stderr)
        run, = json.loads(listed.stdout)
        self.assertEqual((run_id, 'uid=%d' % self.uid),
                         (run['id'], run['operator']))

    def test_environment_name_is_an_annotation(self):
        self.environ['USER'] = 'alice'
        result = self.run_as_uid('request-specs', '--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        listed = self.run_as_uid('audit', 'list', '--format', 'json')
        self.assertEqual('uid=%d (USER=alice)' % self.uid,
                         json.loads(listed.stdout)[0]['operator'])
