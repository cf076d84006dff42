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

"""What the audit store a command may read or write asks of the operator.

A dry run by a user who cannot write the store still runs, unrecorded;
``audit list`` and ``audit show`` read a local store without the API
database, and do not read the default store without a configuration.
"""

import json
import os

import fixtures
from oslo_config import cfg

from healreq.conf import healreq as healreq_conf
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import other_user

STORE_OPTIONS = '[healreq]/state_path or [healreq]/audit_connection'


class UnwritableStoreTest(audit_case.AuditTestCase):
    """A user who cannot create or write the SQLite store."""

    def setUp(self):
        super().setUp()
        other_user.require_root(self)
        self.uid = other_user.uid_without_passwd_entry()
        self.drifted = self.add_drifted(self.cell1)
        self.spec_before = self.deployment.spec_text(self.drifted)
        directories = [os.path.dirname(self.config_file)]
        if self.db.name == 'SQLite':
            directories.append(self.db.directory)
        other_user.open_to_all(*directories)
        # Only root may write here.
        self.parent = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.parent, 0o755)
        self.environ = dict(os.environ)

    def run_as_uid(self, state_path, *argv):
        self.environ['OS_HEALREQ__STATE_PATH'] = state_path
        return other_user.run_as(
            self.uid, ['--config-file', self.config_file] + list(argv),
            self.environ)

    def assert_unrecorded_dry_run(self, state_path):
        before = self.listing(state_path)
        result = self.run_as_uid(state_path, 'request-specs', '--dry-run',
                                 '--format', 'json')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        document = json.loads(result.stdout)
        self.assertIsNone(document['run_id'])
        self.assertEqual(1, document['summary']['drifted'], document)
        line, = result.stderr.splitlines()
        self.assertIn('warning: this dry run is not recorded', line)
        self.assertIn(STORE_OPTIONS, line)
        text = self.run_as_uid(state_path, 'request-specs', '--dry-run')
        self.assertEqual(0, text.code, text.stdout + text.stderr)
        self.assertNotIn('Run id', text.stdout)
        self.assertEqual(1, len(text.stderr.splitlines()), text.stderr)
        self.assertEqual(before, self.listing(state_path))

    def listing(self, state_path):
        if not os.path.isdir(state_path):
            return None
        return sorted(os.listdir(state_path))

    def assert_refused(self, state_path, *argv):
        result = self.run_as_uid(state_path, *argv)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        line, = result.stderr.splitlines()
        self.assertIn('audit store', line)
        self.assertIn(STORE_OPTIONS, line)

    def test_store_that_cannot_be_created(self):
        state_path = os.path.join(self.parent, 'nova-heal')
        self.assert_unrecorded_dry_run(state_path)
        self.assertFalse(os.path.exists(state_path))
        self.assert_refused(state_path, 'request-specs')
        plan = os.path.join(self.useFixture(fixtures.TempDir()).path, 'p')
        self.assert_refused(state_path, 'request-specs', '--dry-run',
                            '--plan', plan)
        self.assertFalse(os.path.exists(plan))
        self.assertEqual(self.spec_before,
                         self.deployment.spec_text(self.drifted))

    def test_store_only_readable(self):
        # A store root wrote, readable by all, in a directory only root
        # may write to.
        run_id = self.heal_run('--dry-run')
        os.chmod(self.state_path, 0o755)
        os.chmod(self.audit_path(), 0o644)
        self.addCleanup(os.chmod, self.state_path, 0o700)
        self.assert_unrecorded_dry_run(self.state_path)
        self.assert_refused(self.state_path, 'request-specs')
        self.assert_refused(self.state_path, 'revert', run_id)
        # Root's runs are all the store holds.
        self.assertEqual({run_id}, set(self.audit_runs()))


class UnreachableApiDatabaseTest(audit_case.AuditTestCase):
    """audit list and show read a local store without the API database."""

    scenarios = [s for s in audit_case.deployment_case.backends.SCENARIOS
                 if s[0] == 'SQLite']

    def test_list_and_show_warn_and_read(self):
        self.add_drifted(self.cell1)
        run_id = self.heal_run()
        config = self.write_config_text(
            '[api_database]\nconnection = mysql+pymysql://u:Secret-Pw@'
            '127.0.0.1:1/x\n[healreq]\nstate_path = %s\n' % self.state_path)
        for argv in (['audit', 'list'], ['audit', 'show', run_id],
                     ['audit', 'list', '--format', 'json']):
            result = self.run_cli(*argv, config_file=config)
            self.assertEqual(0, result.code, result.stdout + result.stderr)
            self.assertIn(run_id, result.stdout)
            line, = result.stderr.splitlines()
            self.assertIn('warning: the audit store was not checked against '
                          'the cells\' databases', line)
            self.assertNotIn('Secret-Pw', result.stderr)


class NoConfigurationTest(audit_case.AuditTestCase):
    """Without a configuration, the default store is not read."""

    scenarios = [s for s in audit_case.deployment_case.backends.SCENARIOS
                 if s[0] == 'SQLite']

    def setUp(self):
        super().setUp()
        # No configuration file of the user's or of the host is found.
        self.useFixture(fixtures.EnvironmentVariable(
            'HOME', self.useFixture(fixtures.TempDir()).path))
        if cfg.find_config_files(project='nova', prog='nova-heal') or (
                cfg.find_config_dirs(project='nova', prog='nova-heal')):
            self.skipTest('this host has a configuration of its own')
        # The default store, where a test may write it.
        option, = [o for o in healreq_conf.healreq_opts
                   if o.name == 'state_path']
        self.addCleanup(setattr, option, 'default', option.default)
        option.default = self.useFixture(fixtures.TempDir()).path
        self.default_store = os.path.join(option.default, 'audit.sqlite')

    def test_audit_list_and_show_refuse(self):
        self.add_drifted(self.cell1)
        self.heal_run()
        with fixtures.EnvironmentVariable('OS_HEALREQ__STATE_PATH'):
            for argv in (['audit', 'list'], ['audit', 'show',
                                             audit_case.UNKNOWN_RUN]):
                result = cli.run_main(argv)
                self.assertEqual(127, result.code,
                                 result.stdout + result.stderr)
                line, = result.stderr.splitlines()
                self.assertIn('no configuration file was read', line)
                self.assertIn('--config-file', line)
        self.assertFalse(os.path.exists(self.default_store))

    def test_config_dir_and_environment_are_configuration(self):
        self.add_drifted(self.cell1)
        run_id = self.heal_run()
        directory = self.useFixture(fixtures.TempDir()).path
        with open(os.path.join(directory, 'healreq.conf'), 'w') as handle:
            handle.write('[healreq]\nstate_path = %s\n' % self.state_path)
        result = cli.run_main(['--config-dir', directory, 'audit', 'list'])
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn(run_id, result.stdout)
        result = cli.run_main(['audit', 'list'])
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn(run_id, result.stdout)
