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

"""One guard for every output file of every command.

Every option of every command that names a file the command writes
(found by its mark, common.add_output_option) is pointed at every
database and configuration file of a deployment: the API database,
cell0 and both cells, the Placement database, the audit store, the
configuration files, a journal file of a database and a named pipe.
Each is refused with exit code 127 in one line, on a run that would
work and on one that fails first (whose failure metrics are refused
too), and the file is left as it was. An option that names a file but
is not marked must be listed here with the reason it writes no file.
"""

import argparse
import os

import fixtures

from healreq.cmd import main
from healreq.db import locations
from healreq.tests.functional import audit_case

# What each command needs besides an output option to run at all.
RUNNABLE = {
    'request-specs': ['--dry-run'],
    'allocations': [],
    'hosts': [],
}
# What makes each command fail before it reads any database.
FAILING = {
    'request-specs': ['--dry-run', '--instance', 'not-a-uuid'],
    'allocations': ['--instance', 'not-a-uuid'],
    'hosts': ['--cell', 'not-a-uuid'],
}
# Arguments that name a path but are no output file, and why.
NOT_OUTPUTS = {
    ('apply', 'plan_file'): 'read, never written',
    ('demo', 'workdir'): 'a directory the demo builds only when it is '
                         'empty or absent',
}


def subcommands(parser, prefix=()):
    """``(command words, parser)`` of every command, nested ones too."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, subparser in action.choices.items():
                words = prefix + (name,)
                yield words, subparser
                yield from subcommands(subparser, words)


def _names_a_path(action):
    words = ' '.join(str(w) for w in (action.dest, action.metavar or ''))
    return any(hint in words.lower()
               for hint in ('file', 'path', 'dir', 'plan'))


def snapshot(path):
    """What can be told of ``path``: its kind and bytes, or None."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not os.path.isfile(path):
        return info.st_mode, None
    with open(path, 'rb') as handle:
        return info.st_mode, info.st_ino, handle.read()


class OptionsFoundTest(audit_case.AuditTestCase):
    """The walk finds the output options, and no path option escapes it."""

    scenarios = [s for s in audit_case.AuditTestCase.scenarios
                 if s[0] == 'SQLite']

    def test_every_path_option_is_an_output_or_says_why_not(self):
        outputs = []
        for words, subparser in subcommands(main.build_parser()):
            for action in subparser._actions:
                if getattr(action, 'writes_file', False):
                    outputs.append((words[-1], action.option_strings[0]))
                elif _names_a_path(action):
                    self.assertIn((words[-1], action.dest), NOT_OUTPUTS,
                                  'command %s, argument %s names a path: '
                                  'declare it with common.add_output_option'
                                  ' or list it here with why it writes none'
                                  % (' '.join(words), action.dest))
        self.assertEqual(
            sorted([('request-specs', '--plan'),
                    ('request-specs', '--metrics-file'),
                    ('allocations', '--metrics-file'),
                    ('hosts', '--metrics-file')]), sorted(outputs))
        for command, _ in outputs:
            self.assertIn(command, RUNNABLE)
            self.assertIn(command, FAILING)


class OutputGuardCase(audit_case.AuditTestCase):
    """A deployment with a Placement database and an audit store."""

    def setUp(self):
        super().setUp()
        self.add_drifted(self.cell1)
        self.placement = self.add_placement()
        # The store exists, as on any deployment that has run the tool.
        self.assertEqual(4, self.heal('--dry-run', '--fields',
                                      'project_id').code)
        self.elsewhere = self.useFixture(fixtures.TempDir()).path

    def protected_paths(self):
        """``(what, path)`` of every file of the deployment to keep."""
        paths = [('configuration file', self.config_file),
                 ('audit store', self.audit_path())]
        for what, engine in [('API database', self.deployment.api_engine),
                             ('Placement database', self.placement.engine)
                             ] + [('database of %s' % cell.name, cell.engine)
                                  for cell in self.deployment.cells]:
            path = locations.sqlite_file(
                engine.url.render_as_string(hide_password=False))
            if path is not None:
                paths.append((what, path))
                journal = path + '-journal'
                with open(journal, 'wb') as handle:
                    handle.write(b'journal')
                paths.append(('journal of the %s' % what, journal))
        pipe = os.path.join(self.elsewhere, 'pipe')
        os.mkfifo(pipe)
        paths.append(('named pipe', pipe))
        return paths

    def outputs(self):
        for words, subparser in subcommands(main.build_parser()):
            for action in subparser._actions:
                if getattr(action, 'writes_file', False):
                    yield words, action.option_strings[0]


class EveryOutputTest(OutputGuardCase):

    def test_every_output_option_refuses_every_protected_file(self):
        outputs = list(self.outputs())
        self.assertTrue(outputs)
        paths = self.protected_paths()
        if self.deployment.api_engine.dialect.name == 'sqlite':
            # cell0, cell1, cell2, API and Placement, with their journals.
            self.assertEqual(2 + 2 * 5 + 1, len(paths))
        for words, option in outputs:
            for what, path in paths:
                before = snapshot(path)
                for extra in (RUNNABLE[words[-1]], FAILING[words[-1]]):
                    argv = list(words) + extra + [option, path]
                    result = self.run_cli(*argv)
                    self.assertEqual(127, result.code, '%s (%s): %s' % (
                        argv, what, result.stdout + result.stderr))
                    lines = result.stderr.splitlines()
                    self.assertEqual(1, len(lines), result.stderr)
                    self.assertEqual(before, snapshot(path),
                                     '%s replaced the %s' % (argv, what))
                    if extra is RUNNABLE[words[-1]]:
                        self.assertIn('%s %s would replace' % (option, path),
                                      lines[0])

    def test_a_file_elsewhere_is_written(self):
        for words, option in self.outputs():
            path = os.path.join(self.elsewhere, '%s-%s.out' % (
                words[-1], option.strip('-')))
            result = self.run_cli(*(list(words) + RUNNABLE[words[-1]]
                                    + [option, path]))
            # Whatever the run finds, the file is written.
            self.assertNotEqual(127, result.code, result.stderr)
            self.assertTrue(os.path.getsize(path), path)


class CellFilesTest(OutputGuardCase):
    """On SQLite, where a cell's database is a file."""

    scenarios = [s for s in audit_case.AuditTestCase.scenarios
                 if s[0] == 'SQLite']

    def test_cell_files_are_named_once_the_mappings_are_read(self):
        cell1 = locations.sqlite_file(self.cell1.url)
        for words, option in self.outputs():
            result = self.run_cli(*(list(words) + RUNNABLE[words[-1]]
                                    + [option, cell1]))
            self.assertEqual(127, result.code, result.stderr)
            self.assertIn('the database of cell %s' % self.cell1.uuid,
                          result.stderr)
