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


"""``python -m healreq`` is ``nova-heal``; so is its quick ``--version``."""

import subprocess
import sys

import testtools

import healreq.__main__
from healreq.cmd import entry_point
from healreq.tests.unit import setup_cfg
from healreq import version


def python_m_healreq(*arguments):
    return subprocess.run([sys.executable, '-m', 'healreq'] + list(arguments),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120)


class EntryPointTest(testtools.TestCase):
    def test_python_m_healreq_runs_nova_heal(self):
        process = python_m_healreq('request-specs', '--help')
        self.assertEqual(0, process.returncode, process.stderr)
        self.assertTrue(process.stdout.startswith(
            'usage: nova-heal request-specs'), process.stdout)

    def test_python_m_healreq_exit_codes_are_nova_heals(self):
        process = python_m_healreq('request-specs', '--instance', 'x')
        self.assertEqual(127, process.returncode)
        self.assertIn('is not a UUID', process.stderr)

    def test_the_console_script_of_setup_cfg_is_python_m_healreqs(self):
        self.assertEqual(entry_point.__name__ + ':main',
                         setup_cfg.console_scripts()['nova-heal'])
        self.assertIs(entry_point, healreq.__main__.entry_point)

    def test_quick_version_is_the_commands_and_imports_no_library(self):
        # The command's own --version (oslo.config's) and the quick one
        # print the same line; the quick one leaves the library unloaded.
        probe = (
            'import sys\n'
            'from healreq.cmd import entry_point\n'
            'code = entry_point.main(%r)\n'
            'loaded = [name for name in ("healreq.api", "sqlalchemy", '
            '"oslo_config") if name in sys.modules]\n'
            'print(code, loaded)\n')
        quick = subprocess.run(
            [sys.executable, '-c', probe % (['--version'],)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=120)
        full = subprocess.run(
            [sys.executable, '-c', probe.replace(
                'import entry_point\ncode = entry_point.main(',
                'import main\ncode = main.main(') % (['--version'],)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=120)
        release = version.version_info.release_string()
        self.assertEqual((release + '\n0 []\n', ''),
                         (quick.stdout, quick.stderr))
        self.assertEqual(release + '\n', full.stdout.split('0 [')[0])
        self.assertIn("'healreq.api'", full.stdout)

    def test_version_among_other_arguments_is_the_commands(self):
        process = python_m_healreq('--version', '--debug')
        self.assertEqual(0, process.returncode, process.stderr)
        self.assertEqual(version.version_info.release_string(),
                         process.stdout.strip())

    def test_version_is_the_full_build(self):
        # pbr's release string keeps the dev part (0.0.1.dev34), which the
        # version string drops (0.0.1); the audit store records the same.
        process = python_m_healreq('--version')
        self.assertEqual(0, process.returncode, process.stderr)
        self.assertEqual(version.version_info.release_string(),
                         process.stdout.strip())
        self.assertTrue(process.stdout.startswith(
            version.version_info.version_string()))
