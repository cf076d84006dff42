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

"""The command line, up to the point where a database would be needed."""

import dataclasses
import json
import logging
import os

import fixtures
import testtools

from healreq import conf as healreq_conf
from healreq.tests import cli

INSTANCE = '982c3ead-59b1-4acd-876b-d55166d8e7f0'
CELL = '7cad283c-1d2e-4f5a-8b9c-0d1e2f3a4b5c'
EXIT_CODES = (0, 1, 2, 3, 4, 127, 129, 130, 143, 255)


class CliTestCase(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        # Keep the machine's nova.conf(.d) and environment out of the run.
        self.config_dir = os.path.join(self.directory, 'nova.conf.d')
        os.mkdir(self.config_dir)
        self.empty_conf = self.write_conf('')
        for group in ('API_DATABASE', 'DATABASE', 'HEALREQ'):
            for option in ('CONNECTION', 'BATCH_SIZE',
                           'SKIP_UPDATED_WITHIN'):
                self.useFixture(fixtures.EnvironmentVariable(
                    'OS_%s__%s' % (group, option)))
        # main() sets up oslo.log, which replaces the root handlers.
        root = logging.getLogger()
        handlers = list(root.handlers)
        level = root.level
        healreq_level = logging.getLogger('healreq').level

        def restore():
            for handler in list(root.handlers):
                root.removeHandler(handler)
            for handler in handlers:
                root.addHandler(handler)
            root.setLevel(level)
            logging.getLogger('healreq').setLevel(healreq_level)
        self.addCleanup(restore)

    def write_conf(self, text, name='nova.conf'):
        path = os.path.join(self.directory, name)
        with open(path, 'w') as handle:
            handle.write(text)
        return path

    def run_main(self, *args, conf=None):
        return cli.run_main(['--config-file', conf or self.empty_conf,
                             '--config-dir', self.config_dir] + list(args))

    def assertInvalidInput(self, result, *fragments):
        """Exit 127 with exactly one line on stderr, nothing on stdout."""
        self.assertEqual(127, result.code, result.stderr)
        self.assertEqual('', result.stdout)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertNotEqual('', lines[0].strip())
        self.assertTrue(lines[0].startswith('nova-heal'), lines[0])
        for fragment in fragments:
            self.assertIn(fragment, lines[0])


class HelpTest(CliTestCase):

    def test_request_specs_help(self):
        result = self.run_main('request-specs', '--help')
        self.assertEqual(0, result.code)
        self.assertEqual('', result.stderr)
        self.assertIn('usage: nova-heal request-specs', result.stdout)
        self.assertIn('exit codes:', result.stdout)
        for code in EXIT_CODES:
            self.assertIn('\n  %-5d' % code, result.stdout)
        for option in ('--dry-run', '--instance', '--cell', '--max-count',
                       '--batch-size', '--force', '--format', '--verbose'):
            self.assertIn(option, result.stdout)

    def test_help_needs_no_configuration(self):
        result = self.run_main('request-specs', '-h', conf=self.write_conf(
            '[healreq]\nbatch_size = 0\n'))
        self.assertEqual(0, result.code)
        self.assertIn('exit codes:', result.stdout)

    def test_global_help(self):
        result = self.run_main('--help')
        self.assertEqual(0, result.code)
        self.assertIn('request-specs', result.stdout)
        self.assertEqual('', result.stderr)

    def test_global_help_starts_with_the_commands(self):
        lines = self.run_main('--help').stdout.splitlines()

        def first(fragment):
            return min(number for number, line in enumerate(lines)
                       if fragment in line)
        self.assertLess(first('request-specs'), first('--log-file'))
        self.assertLess(first('audit '), first('--log-file'))
        # The common options, then oslo.log's under their own title.
        self.assertLess(first('--config-file PATH'),
                        first('logging options (oslo.log):'))
        self.assertLess(first('--debug, -d'),
                        first('logging options (oslo.log):'))
        self.assertLess(first('logging options (oslo.log):'),
                        first('--log-file'))
        # None is dropped.
        for option in ('--config-dir', '--version', '--log-config-append',
                       '--log-dir', '--use-syslog', '--nodebug',
                       '--use-journal', '--use-json',
                       '--syslog-log-facility', '--log-date-format'):
            self.assertIn('\n  %s' % option, '\n'.join(lines))

    def test_grouped_options_still_parse(self):
        log_file = os.path.join(self.directory, 'heal.log')
        result = self.run_main('--log-file', log_file, '--nodebug',
                               '--help')
        self.assertEqual(0, result.code)
        self.assertIn('commands:', result.stdout)


class ArgumentHintTest(CliTestCase):
    """One line, exit 127, with what to type instead."""

    def test_global_option_after_the_command(self):
        result = self.run_main('request-specs', '--dry-run',
                               '--config-file', 'X')
        self.assertInvalidInput(
            result, 'unrecognized arguments: --config-file X',
            '(global options such as --config-file go before the command: '
            'nova-heal --config-file X request-specs ...)')

    def test_flag_and_equals_forms_after_the_command(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--debug'),
            'global options such as --debug go before the command: '
            'nova-heal --debug request-specs ...')
        self.assertInvalidInput(
            self.run_main('audit', 'list', '--log-file=x.log'),
            'global options such as --log-file go before the command: '
            'nova-heal --log-file=x.log audit ...')

    def test_unknown_option_gets_no_hint(self):
        result = self.run_main('request-specs', '--bogus')
        self.assertInvalidInput(result, 'unrecognized arguments: --bogus')
        self.assertNotIn('global options', result.stderr)

    def test_mistyped_command(self):
        self.assertInvalidInput(
            self.run_main('request-spec'),
            "nova-heal: error: argument command: invalid choice: "
            "'request-spec' (did you mean 'request-specs'?)")

    def test_mistyped_choice_of_an_option(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--format', 'jsn'),
            "invalid choice: 'jsn' (did you mean 'json'?)")

    def test_nothing_close_lists_the_choices(self):
        result = self.run_main('frobnicate')
        self.assertInvalidInput(result, "invalid choice: 'frobnicate'",
                                'choose from', 'request-specs')
        self.assertNotIn('did you mean', result.stderr)


class ArgumentErrorTest(CliTestCase):

    def test_max_count_not_an_integer(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--max-count', 'abc'),
            '--max-count', 'abc')

    def test_max_count_not_positive(self):
        for value in ('0', '-3'):
            self.assertInvalidInput(
                self.run_main('request-specs', '--max-count', value),
                '--max-count')

    def test_batch_size_not_positive(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--batch-size', '0'),
            '--batch-size')

    def test_batch_size_above_the_options_maximum(self):
        maximum = healreq_conf.option('healreq', 'batch_size').type.max
        self.assertInvalidInput(
            self.run_main('request-specs', '--batch-size',
                          str(maximum + 1)),
            '--batch-size', str(maximum))

    def test_unknown_option(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--no-such-option'),
            '--no-such-option')

    def test_unknown_global_option(self):
        self.assertInvalidInput(
            self.run_main('--no-such-option', 'request-specs'),
            '--no-such-option')

    def test_unknown_command(self):
        self.assertInvalidInput(self.run_main('heal-everything'),
                                'heal-everything')

    def test_no_command(self):
        self.assertInvalidInput(self.run_main(), 'command')

    def test_bad_format(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--format', 'yaml'), 'yaml')

    def test_instance_with_cell(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--instance', INSTANCE,
                          '--cell', CELL), '--instance', '--cell')

    def test_force_without_instance(self):
        self.assertInvalidInput(self.run_main('request-specs', '--force'),
                                '--force', '--instance')
        self.assertInvalidInput(
            self.run_main('request-specs', '--force', '--cell', CELL),
            '--force', '--instance')

    def test_bad_instance_uuid(self):
        for value in ('nope', INSTANCE.replace('-', ''), INSTANCE[:-1],
                      '{%s}' % INSTANCE):
            self.assertInvalidInput(
                self.run_main('request-specs', '--instance', value),
                'instance', 'not a UUID')

    def test_bad_cell_uuid(self):
        self.assertInvalidInput(
            self.run_main('request-specs', '--cell', 'cell1'),
            'cell', "'cell1'", 'not a UUID')

    def test_missing_config_file(self):
        self.assertInvalidInput(
            self.run_main('request-specs',
                          conf=os.path.join(self.directory, 'absent.conf')),
            'absent.conf')


class ConfigurationErrorTest(CliTestCase):

    def test_missing_api_database_connection(self):
        self.assertInvalidInput(self.run_main('request-specs'),
                                '[api_database]/connection')

    def test_empty_api_database_connection(self):
        conf = self.write_conf('[api_database]\nconnection =\n'
                               '[database]\nconnection = '
                               'mysql+pymysql://nova:s3cret@db/nova\n')
        result = self.run_main('request-specs', '--dry-run', conf=conf)
        self.assertInvalidInput(result, '[api_database]/connection')

    def test_valid_options_still_need_the_api_database(self):
        result = self.run_main('request-specs', '--dry-run', '--instance',
                               INSTANCE.upper(), '--force', '--format',
                               'json', '--max-count', '5')
        # With --format json, stdout holds the error document.
        error = json.loads(result.stdout)['error']
        self.assertInvalidInput(dataclasses.replace(result, stdout=''),
                                '[api_database]/connection')
        self.assertEqual(127, error['exit_code'])
        self.assertEqual(result.stderr.strip(), error['message'])

    def test_unparsable_api_database_connection(self):
        conf = self.write_conf('[api_database]\nconnection = not a url\n')
        self.assertInvalidInput(self.run_main('request-specs', conf=conf),
                                '[api_database]/connection')

    def test_api_database_port_not_a_number(self):
        # A malformed URL is invalid input like an unparsable one: exit
        # 127 with one line, not an "unexpected error" with a traceback.
        conf = self.write_conf(
            '[api_database]\nconnection = '
            'mysql+pymysql://nova:s3cret@db:33o6/nova_api\n')
        result = self.run_main('request-specs', conf=conf)
        self.assertNotIn('s3cret', result.stderr)
        self.assertInvalidInput(result, '[api_database]/connection')

    def test_invalid_healreq_option_value(self):
        # An out-of-range value in the config file is invalid input.
        conf = self.write_conf(
            '[api_database]\nconnection = '
            'mysql+pymysql://nova:s3cret@127.0.0.1:1/nova_api\n'
            '[healreq]\nbatch_size = 0\n')
        result = self.run_main('request-specs', conf=conf)
        self.assertNotIn('s3cret', result.stderr)
        self.assertInvalidInput(result, 'batch_size')
