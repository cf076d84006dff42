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

"""``nova-heal demo``: its runs, its allocations and its closing commands.

The commands the demo closes with are run as printed, on the deployment
it kept.
"""

import json
import os
import re
import shlex
import subprocess

import fixtures
import testtools

from healreq.heal import allocation_checks
from healreq.tests import cli

_MISMATCH = re.compile(r'MISMATCH \S+ \(cell \S+\): (.+)$')
# The exit code of each command the demo suggests, by its first word.
_SUCCESS = {'audit': 0, 'revert': 0, 'allocations': 0, 'request-specs': 4}


def section(stdout, command_end):
    """The lines of the run whose command line ends with ``command_end``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith('$ ') and line.endswith(command_end))
    end = next((i for i, line in enumerate(lines)
                if i > start and not line), len(lines))
    return lines[start + 1:end]


def hints(stdout):
    """The closing commands, as words (``nova-heal`` first)."""
    return [shlex.split(line, comments=True) for line in stdout.splitlines()
            if line.startswith('  nova-heal ')]


def command_word(words):
    """The command of ``nova-heal`` words, after the global options."""
    return words[words.index('--config-file') + 2]


class DemoTest(testtools.TestCase):
    """``demo --workdir DIR``, run in-process."""

    def setUp(self):
        super().setUp()
        self.workdir = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'demo')
        self.result = cli.run_main(['demo', '--workdir', self.workdir])
        self.assertEqual(0, self.result.code,
                         self.result.stdout + self.result.stderr)

    def test_runs_end_complete(self):
        lines = self.result.stdout.splitlines()
        self.assertEqual('Demo complete: exit codes [0, 0, 4, 0].',
                         lines[-1])
        config = os.path.join(self.workdir, 'nova.conf')
        self.assertIn('$ nova-heal --config-file %s allocations' % config,
                      lines)
        self.assertTrue(os.path.isfile(os.path.join(self.workdir,
                                                    'placement.sqlite')))

    def test_allocations_show_each_mismatch_class(self):
        report = section(self.result.stdout, ' allocations')
        found = set()
        for line in report:
            match = _MISMATCH.match(line)
            if match:
                found.update(match.group(1).split(', '))
        self.assertEqual(
            set(allocation_checks.ALLOCATION_REASONS[
                allocation_checks.MISMATCH]), found, '\n'.join(report))
        self.assertIn('Checked 11 instance(s): 5 mismatched, 0 pending, '
                      '2 skipped, 0 error(s).', report)

    def test_closing_commands_run_as_printed(self):
        commands = hints(self.result.stdout)
        self.assertEqual(['audit', 'audit', 'revert', 'allocations'],
                         [command_word(words) for words in commands])
        for words in commands:
            self.assertEqual(['nova-heal', '--config-file',
                              os.path.join(self.workdir, 'nova.conf')],
                             words[:3])
            result = cli.run_main(words[1:])
            self.assertEqual(_SUCCESS[command_word(words)], result.code,
                             ' '.join(words) + '\n' + result.stderr)
        shown = cli.run_main(commands[1][1:])
        self.assertIn('(heal)', shown.stdout.splitlines()[0])


class LargerDemoTest(testtools.TestCase):
    """``demo --instances N``: N healthy instances more, over both cells."""

    def test_instances_are_added_and_walked(self):
        workdir = os.path.join(self.useFixture(fixtures.TempDir()).path,
                               'demo')
        result = cli.run_main(['demo', '--workdir', workdir,
                               '--instances', '51'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn('Checked 62 instance(s): 5 mismatched, 0 pending, '
                      '2 skipped, 0 error(s).',
                      section(result.stdout, ' allocations'))
        commands = hints(result.stdout)
        self.assertEqual('request-specs', command_word(commands[-1]))
        ran = cli.run_main(commands[-1][1:] + ['--format', 'json'])
        self.assertEqual(4, ran.code, ran.stderr)
        document = json.loads(ran.stdout)
        self.assertEqual([31, 31], [cell['instances_checked']
                                    for cell in document['cells']])

    def test_a_negative_number_is_refused(self):
        result = cli.run_main(['demo', '--instances', '-1'])
        self.assertEqual(127, result.code)
        self.assertEqual(['nova-heal: error: --instances takes a number of '
                          'instances, 0 or more; got -1'],
                         result.stderr.splitlines())


class DefaultFolderTest(testtools.TestCase):
    """``nova-heal demo`` keeps its temporary folder and names it."""

    def test_folder_is_kept_and_its_commands_run(self):
        temporary = self.useFixture(fixtures.TempDir()).path
        environment = dict(os.environ, TMPDIR=temporary)
        process = self.nova_heal(['demo'], environment)
        self.assertEqual(0, process.returncode, process.stderr)
        self.assertTrue(process.stdout.splitlines()[-1].startswith(
            'Demo complete: '))
        [kept] = os.listdir(temporary)
        config = os.path.join(temporary, kept, 'nova.conf')
        self.assertTrue(os.path.isfile(config))
        commands = hints(process.stdout)
        self.assertEqual(4, len(commands), process.stdout)
        for words in commands:
            self.assertEqual(config, words[2])
            ran = self.nova_heal(words[1:], environment)
            self.assertEqual(_SUCCESS[command_word(words)], ran.returncode,
                             ' '.join(words) + '\n' + ran.stderr)

    def nova_heal(self, arguments, environment):
        return subprocess.run(cli.NOVA_HEAL + arguments, env=environment,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=300)
