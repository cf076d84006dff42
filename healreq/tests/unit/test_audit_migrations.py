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

"""The shape of the audit store's migration history (no database server).
"""

import os
import subprocess
import sys

import fixtures
import testtools

from healreq.audit import migrations
from healreq.audit.migrations import legacy
from healreq.audit.migrations import lock


class HistoryTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.script = migrations.scripts()
        self.revisions = list(reversed(list(self.script.walk_revisions())))

    def test_one_line_of_revisions(self):
        self.assertEqual(1, len(self.script.get_heads()))
        self.assertIsNone(self.revisions[0].down_revision)
        for previous, revision in zip(self.revisions, self.revisions[1:]):
            self.assertEqual(previous.revision, revision.down_revision)

    def test_legacy_versions_are_the_first_revisions(self):
        """Version N from before alembic is what the Nth revision builds."""
        self.assertEqual(
            [r.revision for r in self.revisions[:len(legacy.REVISIONS)]],
            [legacy.REVISIONS[v] for v in sorted(legacy.REVISIONS)])
        self.assertEqual(list(range(1, len(legacy.REVISIONS) + 1)),
                         sorted(legacy.REVISIONS))

    def test_runtime_files_ship_as_python_modules(self):
        """Only .py files in packages: what the wheel always carries."""
        for directory, subdirectories, names in os.walk(migrations.LOCATION):
            subdirectories[:] = [d for d in subdirectories
                                 if d != '__pycache__']
            self.assertIn('__init__.py', names, directory)
            # The template of "alembic revision" is for development only.
            self.assertEqual([], [n for n in names if not n.endswith('.py')
                                  and n != 'script.py.mako'], directory)

    def test_head_constant_is_the_newest_revision(self):
        """HEAD spares alembic's import: it must name the real head."""
        self.assertEqual(self.script.get_current_head(), migrations.HEAD)

    def test_store_at_head_opens_without_alembic(self):
        """Only a migration imports alembic's scripts; opening does not.

        (Alembic itself may come with the libraries: Zed's oslo.db
        imports it.)
        """
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'audit.sqlite')
        program = ('import sys\n'
                   'from healreq.audit import store\n'
                   'store.AuditStore("sqlite:///%s")\n'
                   'print("alembic.script" in sys.modules)\n' % path)
        imported = [subprocess.run(
            [sys.executable, '-c', program], capture_output=True,
            text=True, check=True).stdout.strip() for _ in range(2)]
        # The first opening creates the store with alembic.
        self.assertEqual(['True', 'False'], imported)

    def test_revision_files_are_named_by_their_revision(self):
        for revision in self.revisions:
            self.assertTrue(os.path.basename(revision.path).startswith(
                revision.revision + '_'), revision.path)


class LockNameTest(testtools.TestCase):

    def test_mysql_lock_names_fit_and_differ(self):
        first = lock.mysql_lock_name('healreq_audit')
        second = lock.mysql_lock_name('x' * 64)
        self.assertNotEqual(first, second)
        self.assertLessEqual(max(len(first), len(second)), 64)
        self.assertEqual(first, lock.mysql_lock_name('healreq_audit'))
