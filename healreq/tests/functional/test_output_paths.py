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

"""--plan and --metrics-file never replace a file the tool or Nova needs.

The audit store (and files named after it), the configuration files in
use and the deployment's SQLite databases, however the path names them
(a link, ``..``, a hard link), are refused with exit code 127 before
anything is written.
"""

import os
import uuid

import fixtures
from sqlalchemy.engine import url as sa_url

from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

OPTIONS = (['--plan'], ['--metrics-file'])


def snapshot(path):
    """What can be told of the file at ``path``: bytes, inode, mode."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return data, info.st_ino, info.st_mode


class OutputPathTestCase(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        self.heal_run('--dry-run')
        self.runs = self.audit_runs()
        self.specs = self.all_spec_texts()
        self.elsewhere = self.useFixture(fixtures.TempDir()).path

    def assert_refused(self, path, protected, *extra, expected=()):
        """Each output option naming ``path`` is refused.

        ``protected``, the file it would replace, is left as it was.
        """
        before = snapshot(protected)
        for option in OPTIONS:
            for more in ([], ['--format', 'json']):
                result = self.heal('--dry-run', option[0], path, *(
                    list(extra) + more))
                self.assertEqual(127, result.code,
                                 '%s %s: %s' % (option[0], path,
                                                result.stdout + result.stderr))
                lines = result.stderr.splitlines()
                self.assertEqual(1, len(lines), result.stderr)
                self.assertIn('%s %s would replace ' % (option[0], path),
                              lines[0])
                for text in expected:
                    self.assertIn(text, lines[0])
                self.assertEqual(before, snapshot(protected))
        self.assertEqual(self.runs, self.audit_runs())
        self.assertEqual(self.specs, self.all_spec_texts())


class StoreOutputTest(OutputPathTestCase):

    def test_the_store(self):
        store = self.audit_path()
        for path in (store, os.path.join(self.state_path, 'sub', '..',
                                         'audit.sqlite')):
            self.assert_refused(path, store, expected=['audit store'])

    def test_links_to_the_store(self):
        symbolic = os.path.join(self.elsewhere, 'symbolic.prom')
        os.symlink(self.audit_path(), symbolic)
        hard = os.path.join(self.elsewhere, 'hard.prom')
        os.link(self.audit_path(), hard)
        for path in (symbolic, hard):
            self.assert_refused(path, self.audit_path(),
                                expected=['audit store'])

    def test_files_named_after_the_store(self):
        for suffix in ('-journal', '-wal', '-shm',
                       '.run-%s.lock' % uuid.uuid4()):
            path = self.audit_path() + suffix
            self.assert_refused(path, path, expected=['audit store'])

    def test_configuration_files(self):
        self.assert_refused(self.config_file, self.config_file,
                            expected=['configuration file'])
        directory = self.useFixture(fixtures.TempDir()).path
        local = os.path.join(directory, 'local.conf')
        with open(local, 'w') as handle:
            handle.write('[healreq]\nbatch_size = 100\n')
        config_dir = ['--config-dir', directory]
        for path in (local, os.path.join(directory, 'new.conf')):
            before = snapshot(path)
            for option in OPTIONS:
                result = self.run_cli(*(config_dir + [
                    'request-specs', '--dry-run', option[0], path]))
                self.assertEqual(127, result.code, result.stderr)
                self.assertIn('would replace', result.stderr)
                self.assertEqual(before, snapshot(path))

    def test_metrics_of_a_failure_never_replace_the_store(self):
        before = snapshot(self.audit_path())
        for argv in (['--instance', 'not-a-uuid'], ['--fields', 'nonsense'],
                     ['--batch-size', '0']):
            result = self.heal('--metrics-file', self.audit_path(), *argv)
            self.assertEqual(127, result.code, result.stderr)
            self.assertEqual(before, snapshot(self.audit_path()))
        self.assertEqual(self.runs, self.audit_runs())

    def test_other_paths_are_written(self):
        for option in OPTIONS:
            path = os.path.join(self.state_path, 'audit.prom')
            result = self.heal('--dry-run', option[0], path)
            self.assertEqual(0, result.code, result.stderr)
            self.assertIsNotNone(snapshot(path))


class DatabaseOutputTest(OutputPathTestCase):
    """The SQLite databases of the deployment."""

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'SQLite']

    def test_api_database(self):
        path = sa_url.make_url(self.cells.api_url()).database
        self.assert_refused(path, path, expected=['API database'])

    def test_database_of_the_configuration(self):
        path = sa_url.make_url(self.db.reference_url()).database
        self.assert_refused(path, path, expected=['[database]/connection'])

    def test_cell_databases(self):
        for cell in (self.cell1, self.cell2):
            path = sa_url.make_url(cell.url).database
            link = os.path.join(self.elsewhere, 'cell-%s.prom' % cell.name)
            os.link(path, link)
            for named in (path, link):
                self.assert_refused(named, path, expected=[
                    'the database of cell %s' % cell.uuid])
