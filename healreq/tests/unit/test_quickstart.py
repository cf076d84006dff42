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

"""The README's Quick start, as CI runs it, works on every Python.

CI (``.ci/run``) runs the lines ``tools/quickstart.py`` reads from the
README on the oldest and the newest supported Python; these tests check
the reader itself, that the constraints file the Quick start names is
one whose pins install on every Python healreq supports, and that its
first line refuses, by name, any other Python (as pip refuses to install
the package on one older than setup.cfg's ``python_requires``).
"""

import importlib
import os
import re
import shlex
import subprocess
import sys

import fixtures
import testtools

from healreq import releases
from healreq.tests.unit import setup_cfg

_TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')


def _load_tool(test, name):
    test.useFixture(fixtures.MonkeyPatch(
        'sys.path', [os.path.join(_TOP, 'tools')] + sys.path))
    return importlib.import_module(name)


def _readme_commands(quickstart):
    with open(os.path.join(_TOP, 'README.rst')) as handle:
        return quickstart.commands(handle.read())


def _version(text):
    return tuple(int(part) for part in text.split('.'))


class QuickStartTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.quickstart = _load_tool(self, 'quickstart')
        self.commands = _readme_commands(self.quickstart)

    def test_check_the_python_install_and_run_the_demo(self):
        check, install, demo = self.commands
        self.assertEqual(['python3', '-c'], shlex.split(check)[:2])
        words = shlex.split(install)
        self.assertEqual(['python3', '-m', 'venv', '.venv', '&&',
                          '.venv/bin/pip', 'install', '-c'], words[:8])
        self.assertEqual('.', words[-1])
        self.assertEqual(['.venv/bin/nova-heal', 'demo'],
                         shlex.split(demo, comments=True))

    def test_constraints_install_on_every_supported_python(self):
        [name] = re.findall(r'-c tools/constraints/upper-constraints-'
                            r'(\S+)\.txt', self.commands[1])
        [release] = [r for r in releases.RELEASES if r.constraints == name]
        pythons = setup_cfg.supported_pythons()
        self.assertEqual((pythons[0], pythons[-1]), release.pythons)

    def test_reads_only_the_quick_start_section(self):
        text = ('Intro::\n\n    not this\n\nQuick start\n-----------\n\n'
                'Run::\n\n    one && two\n      continued\n\n'
                'Then::\n\n    not this either\n')
        self.assertEqual(['one && two', '  continued'],
                         self.quickstart.commands(text))

    def test_missing_section_or_block(self):
        self.assertRaises(ValueError, self.quickstart.commands,
                          'Usage\n-----\n\nRun::\n\n    x\n')
        self.assertRaises(ValueError, self.quickstart.commands,
                          'Quick start\n-----------\n\nNo block.\n\n'
                          'Next\n----\n\nRun::\n\n    x\n')


class PythonCheckTest(testtools.TestCase):
    """The Quick start's first line refuses an unsupported ``python3``.

    It runs as CI runs it, with bash -euo pipefail, with ``python3`` on
    PATH: this interpreter, each supported or older one that
    tools/find_python.py finds, and this interpreter pretending to be
    another version (sys.version_info replaced before the line's code
    runs), which covers versions that are not installed.
    """

    def setUp(self):
        super().setUp()
        self.check = _readme_commands(_load_tool(self, 'quickstart'))[0]
        self.find_python = _load_tool(self, 'find_python')
        pythons = setup_cfg.supported_pythons()
        self.oldest, self.newest = _version(pythons[0]), _version(
            pythons[-1])
        self.message = 'nova-heal needs Python %s to %s' % (
            pythons[0], pythons[-1])

    def _supported(self, version):
        return self.oldest <= version[:2] <= self.newest

    def _run(self, python3):
        """Run the line with ``python3`` first on PATH."""
        bin_dir = self.useFixture(fixtures.TempDir()).path
        os.symlink(python3, os.path.join(bin_dir, 'python3'))
        env = dict(os.environ,
                   PATH=bin_dir + os.pathsep + os.environ.get('PATH', ''))
        return subprocess.run(['bash', '-euo', 'pipefail', '-c', self.check],
                              env=env, capture_output=True, text=True,
                              timeout=60)

    def _pretending(self, version):
        """A ``python3`` that is this one with sys.version_info faked."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'py')
        with open(path, 'w') as handle:
            handle.write(
                '#!/bin/sh\n'
                '[ "$1" = -c ] || exit 99\n'
                'exec %s -c "import sys; sys.version_info = %r; '
                'exec(sys.argv.pop(1))" "$2"\n'
                % (shlex.quote(sys.executable), version + ('final', 0)))
        os.chmod(path, 0o755)
        return path

    def assertRefused(self, result, version):
        self.assertEqual(1, result.returncode, result.stderr)
        self.assertEqual('%s, not %d.%d\n' % ((self.message,) + version[:2]),
                         result.stderr)

    def test_is_a_python3_command_of_its_own(self):
        self.assertEqual(['python3', '-c'], shlex.split(self.check)[:2])
        self.assertEqual(3, len(shlex.split(self.check)))

    def test_states_the_supported_range(self):
        self.assertIn(self.message, self.check)
        self.assertIn('%r <= v <= %r' % (self.oldest, self.newest),
                      self.check)

    def test_this_python(self):
        result = self._run(sys.executable)
        if self._supported(sys.version_info):
            self.assertEqual((0, ''), (result.returncode, result.stderr))
        else:
            self.assertRefused(result, sys.version_info)

    def test_other_versions(self):
        major, oldest = self.oldest
        newest = self.newest[1]
        versions = [(major, minor, 0) for minor in
                    (oldest - 3, oldest - 1, oldest, newest, newest + 1)]
        versions += [(2, 7, 18), (4, 0, 0)]
        for version in versions:
            result = self._run(self._pretending(version))
            if self._supported(version):
                self.assertEqual((0, ''), (result.returncode, result.stderr),
                                 version)
            else:
                self.assertRefused(result, version)

    def test_installed_interpreters(self):
        major, oldest = self.oldest
        names = ['%d.%d' % (major, minor)
                 for minor in range(oldest - 1, self.newest[1] + 2)]
        found = {name: self.find_python.find(name) for name in names}
        found = {name: path for name, path in found.items() if path}
        if not found:
            self.skipTest('none of Python %s is installed' % ', '.join(names))
        for name, path in sorted(found.items()):
            result = self._run(path)
            if self._supported(_version(name)):
                self.assertEqual((0, ''), (result.returncode, result.stderr),
                                 path)
            else:
                self.assertRefused(result, _version(name))


class PythonRequiresTest(testtools.TestCase):
    """pip refuses, by name, a Python older than the oldest supported."""

    def test_python_requires_is_the_oldest_supported_python(self):
        metadata = setup_cfg.read()['metadata']
        self.assertEqual('>=' + setup_cfg.supported_pythons()[0],
                         metadata['python_requires'].strip())
