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

"""A configuration the tool cannot use: exit 127, one line, nothing done."""

import importlib.util
import json
import os

import fixtures

from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends


class ConfigurationErrorTest(audit_case.AuditTestCase):
    """Whatever the backend of the deployment: it runs on SQLite."""

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'SQLite']

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        self.plan = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'heal.plan')
        self.run_id = self.heal_run('--dry-run', '--plan', self.plan)
        self.runs = self.audit_runs()
        self.specs = self.all_spec_texts()

    def commands(self):
        return [['request-specs', '--dry-run'], ['request-specs'],
                ['request-specs', '--format', 'json'],
                ['revert', self.run_id], ['apply', self.plan],
                ['apply', self.plan, '--format', 'json'],
                ['audit', 'list'], ['audit', 'show', self.run_id]]

    def assert_refused(self, config_args, *expected):
        """Every command exits 127 with one line; nothing is recorded."""
        for argv in self.commands():
            result = cli.run_main(list(config_args) + argv)
            self.assertEqual(127, result.code,
                             '%s: %s' % (argv, result.stderr))
            lines = result.stderr.splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith('nova-heal: error: '),
                            lines[0])
            for text in expected:
                self.assertIn(text, lines[0])
            if '--format' in argv:
                self.assertEqual(
                    {'error': {'exit_code': 127, 'message': lines[0]}},
                    json.loads(result.stdout))
        self.assertEqual(self.runs, self.audit_runs())
        self.assertEqual(self.specs, self.all_spec_texts())

    def config_text(self, **sections):
        """The test's nova.conf with a line more in the named sections.

        The line replaces any setting of the same option.
        """
        with open(self.config_file) as handle:
            text = ''.join(
                line for line in handle
                if line.split('=')[0].strip() not in {
                    added.split('=')[0].strip()
                    for added in sections.values()})
        for section, lines in sections.items():
            text = text.replace('[%s]\n' % section,
                                '[%s]\n%s\n' % (section, lines))
        return text

    def test_non_utf8_configuration_file(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'nova.conf')
        with open(path, 'wb') as handle:
            handle.write(self.config_text(
                DEFAULT='# Caf\xe9 du commerce').encode('latin-1'))
        self.assert_refused(['--config-file', path], path, 'not UTF-8')

    def test_non_utf8_file_in_a_config_dir(self):
        directory = self.useFixture(fixtures.TempDir()).path
        path = os.path.join(directory, 'zz-local.conf')
        with open(path, 'wb') as handle:
            handle.write(b'[healreq]\n# r\xe9glages\n')
        self.assert_refused(['--config-file', self.config_file,
                             '--config-dir', directory], path, 'not UTF-8')

    def test_configuration_file_that_is_a_directory(self):
        directory = self.useFixture(fixtures.TempDir()).path
        self.assert_refused(['--config-file', directory], directory)

    def test_store_driver_not_installed(self):
        if importlib.util.find_spec('psycopg2') is not None:
            self.skipTest('psycopg2 is installed')
        config = self.write_config_text(self.config_text(
            healreq='audit_connection = postgresql://healreq:TopSecret42@'
                    '127.0.0.1/healreq'))
        self.assert_refused(['--config-file', config], 'audit store',
                            'driver not installed', 'psycopg2',
                            'postgresql://healreq:****@')

    def test_api_database_driver_not_installed(self):
        if importlib.util.find_spec('psycopg2') is not None:
            self.skipTest('psycopg2 is installed')
        text = self.config_text()
        with open(self.config_file) as handle:
            api_line = [line for line in handle
                        if line.startswith('connection = ')][0]
        config = self.write_config_text(text.replace(
            api_line, 'connection = postgresql://nova:TopSecret42@db/nova_api'
            '\n', 1))
        self.commands = lambda: [['request-specs', '--dry-run'],
                                 ['revert', self.run_id],
                                 ['apply', self.plan, '--format', 'json']]
        self.assert_refused(['--config-file', config],
                            '[api_database]/connection',
                            'driver not installed', 'psycopg2')

    def test_argument_the_driver_does_not_take(self):
        config = self.write_config_text(self.config_text(
            healreq='audit_connection = mysql+pymysql://healreq@127.0.0.1:1/'
                    'healreq?PASSWD=TopSecret42'))
        self.assert_refused(['--config-file', config], 'audit store',
                            'PASSWD=****', "argument 'PASSWD'")

    def test_values_out_of_range(self):
        for section, line in (
                ('healreq', 'skip_updated_within = 100000000000000000000'),
                ('healreq', 'skip_updated_within = -1'),
                ('healreq', 'batch_size = 0'),
                ('healreq', 'batch_size = 10001'),
                ('healreq', 'lock_wait_timeout = 11'),
                ('healreq', 'lock_wait_timeout = soon'),
                ('DEFAULT', 'service_down_time = 0'),
                ('DEFAULT', 'service_down_time = 86401')):
            config = self.write_config_text(self.config_text(
                **{section: line}))
            self.assert_refused(['--config-file', config],
                                line.split()[0], 'is not valid')
