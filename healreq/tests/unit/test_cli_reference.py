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


"""The CLI reference and the nova-heal(1) man page cover the whole parser."""

import ast
import os

import fixtures
import testtools

from healreq.cmd import cli_reference

_DOC = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'doc',
                    'source')


def _leaf_commands(parser):
    return {' '.join(path): command
            for path, command in cli_reference.walk(parser)
            if path and not list(cli_reference.subcommands(command))}


class CliReferenceTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.parser = cli_reference.build_parser()

    def test_every_command_is_a_section(self):
        lines = cli_reference.commands_lines(self.parser)
        commands = _leaf_commands(self.parser)
        self.assertEqual(
            {'request-specs', 'allocations', 'hosts', 'audit list',
             'audit show',
             'revert', 'apply', 'demo'}, set(commands))
        for name in commands:
            title = 'nova-heal %s' % name
            index = lines.index(title)
            self.assertEqual('~' * len(title), lines[index + 1])

    def test_every_option_of_every_command_is_described(self):
        lines = cli_reference.commands_lines(self.parser)
        for name, command in _leaf_commands(self.parser).items():
            section = lines[lines.index('nova-heal %s' % name):]
            program = section.index('.. program:: nova-heal %s' % name)
            for action in cli_reference.documented_actions(command):
                term = action.option_strings[0] if action.option_strings \
                    else action.metavar
                described = [line for line in section[program:]
                             if line.startswith('.. option:: %s' % term)]
                self.assertTrue(described, '%s %s' % (name, term))

    def test_every_argument_has_help_text(self):
        undocumented = [
            '%s %s' % (command.prog, action.option_strings or action.dest)
            for path, command in cli_reference.walk(self.parser)
            for action in command._actions if not action.help]
        self.assertEqual([], undocumented)

    def test_descriptions_wrap_to_the_terminal(self):
        self.useFixture(fixtures.EnvironmentVariable('COLUMNS', '60'))
        for name, command in _leaf_commands(self.parser).items():
            if not command.description:
                continue
            text = command.format_help()
            # usage, description, arguments..., epilog: blank-line separated
            description = text.split('\n\n')[1]
            self.assertIn(command.description.split()[0], description)
            for line in description.splitlines():
                self.assertLessEqual(len(line), 60, '%s: %s' % (name, line))
            epilog = text.partition('exit codes:')[2]
            # The exit-code table keeps its layout.
            table = [line for line in (command.epilog or '').splitlines()
                     if line.startswith(' ')]
            for line in table:
                self.assertIn(line, epilog.splitlines())

    def test_global_options_are_described(self):
        lines = cli_reference.global_options_lines(self.parser)
        for option in ('--config-file PATH', '--config-dir DIR', '--debug',
                       '--version'):
            self.assertTrue(any(line.startswith('.. option:: ' + option)
                                for line in lines), option)

    def test_logging_options_follow_the_common_ones(self):
        lines = cli_reference.global_options_lines(self.parser)
        rubric = lines.index('.. rubric:: Logging options (oslo.log)')
        options = [line for line in lines if line.startswith('.. option::')]
        self.assertLess(lines.index('.. option:: --config-file PATH'),
                        rubric)
        self.assertLess(lines.index('.. option:: --debug, -d'), rubric)
        self.assertLess(rubric, lines.index(
            '.. option:: --log-file, --logfile PATH'))
        # Every global option once.
        self.assertEqual(len(cli_reference.documented_actions(self.parser)),
                         len(options))

    def test_synopsis_has_one_usage_per_command(self):
        text = '\n'.join(cli_reference.synopsis_lines(self.parser))
        for name in _leaf_commands(self.parser):
            self.assertIn('   nova-heal %s [-h]' % name, text)

    def test_usage_lines_fit_a_terminal(self):
        for path, command in cli_reference.walk(self.parser):
            for line in cli_reference.usage(command).splitlines():
                self.assertLessEqual(len(line), 79, line)

    def test_help_text_is_expanded_as_help_prints_it(self):
        commands = _leaf_commands(self.parser)
        demo = commands['demo']
        [workdir] = [action for action in demo._actions
                     if '--workdir' in action.option_strings]
        self.assertIn('temporary directory',
                      cli_reference.help_text(demo, workdir))
        self.assertNotIn('%(', '\n'.join(
            cli_reference.commands_lines(self.parser)))


class ManPageTest(testtools.TestCase):
    """doc/source/conf.py builds nova-heal(1) from the generated page."""

    def test_man_page_is_the_generated_reference(self):
        with open(os.path.join(_DOC, 'conf.py')) as handle:
            tree = ast.parse(handle.read())
        [man_pages] = [ast.literal_eval(node.value) for node in tree.body
                       if isinstance(node, ast.Assign)
                       and node.targets[0].id == 'man_pages']
        [(source, name, _, _, section)] = man_pages
        self.assertEqual(('nova-heal', 1), (name, section))
        with open(os.path.join(_DOC, source + '.rst')) as handle:
            page = handle.read()
        for part in ('synopsis', 'global-options', 'commands'):
            self.assertIn('.. nova-heal-cli:: %s\n' % part, page)
