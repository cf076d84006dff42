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
the reader itself and that the constraints file the Quick start names is
one whose pins install on every Python healreq supports.
"""

import importlib
import os
import re
import shlex
import sys

import fixtures
import testtools

from healreq import releases
from healreq.tests.unit import setup_cfg

_TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')


class QuickStartTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'sys.path', [os.path.join(_TOP, 'tools')] + sys.path))
        self.quickstart = importlib.import_module('quickstart')
        with open(os.path.join(_TOP, 'README.rst')) as handle:
            self.commands = self.quickstart.commands(handle.read())

    def test_two_commands_install_and_run_the_demo(self):
        install, demo = self.commands
        words = shlex.split(install)
        self.assertEqual(['python3', '-m', 'venv', '.venv', '&&',
                          '.venv/bin/pip', 'install', '-c'], words[:8])
        self.assertEqual('.', words[-1])
        self.assertEqual(['.venv/bin/nova-heal', 'demo'],
                         shlex.split(demo, comments=True))

    def test_constraints_install_on_every_supported_python(self):
        [name] = re.findall(r'-c tools/constraints/upper-constraints-'
                            r'(\S+)\.txt', self.commands[0])
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
