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

"""The files of an SQLite audit store: the store and its lock files.

They live in a directory an operator may not fully control; whatever is
found there, the command ends with one line and never writes elsewhere.
The deployment's backend does not matter here: these run on SQLite.
"""

import json
import os
import stat
import uuid

import fixtures
import sqlalchemy as sa

from healreq.audit import lease
from healreq.audit import store as audit_store
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends
from healreq.tests.functional import other_user

SQLITE = [s for s in backends.SCENARIOS if s[0] == 'SQLite']


class StoreFilesTestCase(audit_case.AuditTestCase):

    scenarios = SQLITE

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)

    def assert_one_line(self, result, code, *expected):
        self.assertEqual(code, result.code, result.stdout + result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith('nova-heal: error: audit '
                                            'store: '), lines[0])
        for text in expected:
            self.assertIn(text, lines[0])
        return lines[0]


class LeaseFileNotCreatedTest(StoreFilesTestCase):
    """A store file the user can write, in a directory it cannot."""

    def setUp(self):
        super().setUp()
        other_user.require_root(self)
        self.heal_run('--dry-run')
        self.runs = self.audit_runs()
        os.chown(self.audit_path(), other_user.NOBODY, other_user.NOBODY)
        other_user.open_to_all(os.path.dirname(self.config_file),
                               self.db.directory)
        os.chmod(self.state_path, 0o755)

    def test_run_is_refused_in_one_line(self):
        before = self.deployment.spec_text(self.drifted)
        # A dry run is run, unrecorded, and says so in one line.
        result = other_user.run_as(
            other_user.NOBODY,
            ['--config-file', self.config_file, 'request-specs', '--dry-run'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        line, = result.stderr.splitlines()
        for text in ('nova-heal: warning: this dry run is not recorded: '
                     'audit store: cannot take the lease of a new run',
                     'cannot create the lock file %s.run-' % self.audit_path(),
                     'Permission denied', '[healreq]/state_path'):
            self.assertIn(text, line)
        self.assertNotIn('Run id', result.stdout)
        for argv, json_format in ((['request-specs'], False),
                                  (['request-specs', '--format', 'json'],
                                   True)):
            result = other_user.run_as(
                other_user.NOBODY,
                ['--config-file', self.config_file] + argv)
            line = self.assert_one_line(
                result, 127, 'cannot take the lease of a new run',
                'cannot create the lock file %s.run-' % self.audit_path(),
                'Permission denied', '[healreq]/state_path or '
                '[healreq]/audit_connection')
            if json_format:
                self.assertEqual({'error': {'exit_code': 127,
                                            'message': line}},
                                 json.loads(result.stdout))
        self.assertEqual(before, self.deployment.spec_text(self.drifted))
        self.assertEqual(self.runs, self.audit_runs())
        self.assertEqual(['audit.sqlite'], os.listdir(self.state_path))


class SymlinkTestCase(StoreFilesTestCase):
    """Symbolic links planted where the store's files go."""

    def setUp(self):
        super().setUp()
        self.elsewhere = self.useFixture(fixtures.TempDir()).path
        self.target = os.path.join(self.elsewhere, 'target')

    def make_target(self):
        with open(self.target, 'w') as handle:
            handle.write('precious\n')
        os.chmod(self.target, 0o644)

    def assert_target_untouched(self):
        self.assertEqual(0o644, stat.S_IMODE(os.stat(self.target).st_mode))
        with open(self.target) as handle:
            self.assertEqual('precious\n', handle.read())


class StoreSymlinkTest(SymlinkTestCase):

    def commands(self):
        return [['request-specs', '--dry-run'], ['request-specs'],
                ['request-specs', '--format', 'json'], ['audit', 'list'],
                ['audit', 'show', str(uuid.uuid4())],
                ['revert', str(uuid.uuid4())]]

    def assert_refused(self):
        before = self.deployment.spec_text(self.drifted)
        for argv in self.commands():
            result = self.run_cli(*argv)
            self.assert_one_line(result, 127, self.audit_path(),
                                 'is a symbolic link')
        self.assertEqual(before, self.deployment.spec_text(self.drifted))
        self.assertEqual(['audit.sqlite'], os.listdir(self.state_path))
        self.assertTrue(os.path.islink(self.audit_path()))

    def test_link_to_an_existing_file(self):
        self.make_target()
        os.symlink(self.target, self.audit_path())
        self.assert_refused()
        self.assert_target_untouched()

    def test_dangling_link(self):
        os.symlink(self.target, self.audit_path())
        self.assert_refused()
        self.assertFalse(os.path.lexists(self.target))
        self.assertEqual([], os.listdir(self.elsewhere))

    def test_link_to_a_store(self):
        """Even a link to a real store is refused.

        Its lock files would not be beside the file the link names.
        """
        store = os.path.join(self.elsewhere, 'audit.sqlite')
        self.heal_run('--dry-run')
        os.rename(self.audit_path(), store)
        os.symlink(store, self.audit_path())
        self.assert_refused()


class LockFileSymlinkTest(SymlinkTestCase):
    """Lock files are created exclusively and never through a link."""

    RUN_ID = '6f1c2a34-5b7d-4e8f-9a0b-1c2d3e4f5a6b'

    def setUp(self):
        super().setUp()
        self.heal_run('--dry-run')
        self.engine = sa.create_engine(self.audit_url())
        self.addCleanup(self.engine.dispose)
        self.lock = '%s.run-%s.lock' % (self.audit_path(), self.RUN_ID)

    def assert_lease_refused(self):
        error = self.assertRaises(lease.LeaseError, lease.acquire,
                                  self.engine, self.RUN_ID)
        self.assertIn(self.lock, str(error))
        self.assertIn('symbolic link', str(error))
        error = self.assertRaises(lease.LeaseError, lease.is_free,
                                  self.engine, lease.FILE_LOCK, self.RUN_ID)
        self.assertIn('symbolic link', str(error))
        self.assertTrue(os.path.islink(self.lock))

    def test_link_to_an_existing_file(self):
        self.make_target()
        os.symlink(self.target, self.lock)
        self.assert_lease_refused()
        self.assert_target_untouched()

    def test_dangling_link(self):
        os.symlink(self.target, self.lock)
        self.assert_lease_refused()
        self.assertFalse(os.path.lexists(self.target))

    def test_recovery_meets_a_link_at_a_dead_run_lock(self):
        """A run that died with an intent pending; a link at its lock."""
        self.make_target()
        store = audit_store.AuditStore(self.audit_url())
        run_id = store.start_run('heal', 'test', {})
        change_id = store.intent(run_id, self.drifted, None, 1, ['flavor'],
                                 'before', 'after')
        store.dispose()
        os.symlink(self.target,
                   '%s.run-%s.lock' % (self.audit_path(), run_id))
        # Every command that writes settles dead runs first.
        for argv in (['request-specs'], ['revert', run_id]):
            result = self.run_cli(*argv)
            self.assert_one_line(
                result, 127, 'cannot tell whether run %s is over' % run_id,
                'is a symbolic link')
        self.assert_target_untouched()
        check = audit_store.AuditStore(self.audit_url())
        self.addCleanup(check.dispose)
        self.assertEqual(audit_store.PENDING,
                         check.change_state(change_id)[0])
