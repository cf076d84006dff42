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

"""The output contract on every exit path.

``--format json`` prints one document whatever the exit code, metrics are
written whatever the exit code, and SIGHUP / SIGINT / SIGTERM / a closed
stdout end the command cleanly (the signal tests run the real command in a
subprocess).
"""

import json
import os
import pty
import signal
import subprocess
import uuid

import fixtures
import sqlalchemy as sa

from healreq.db import tables
from healreq.tests import cli
from healreq.tests.functional import audit_case


SECRET = 'Xq7SecretPw'


class JsonOnEveryExitTest(audit_case.AuditTestCase):
    """An error object on stdout for 127, API-database failures and 255."""

    def assert_error_document(self, result, code=None):
        _, document = self.parse_json(result)
        self.assertEqual({'error'}, set(document), result.stdout)
        error = document['error']
        self.assertEqual(result.code, error['exit_code'])
        if code is not None:
            self.assertEqual(code, result.code, result.stderr)
        self.assertEqual(1, len(result.stderr.strip().splitlines()),
                         result.stderr)
        self.assertIn(error['message'], result.stderr)
        self.assertNotIn('\n', error['message'])
        return error

    def test_argument_error(self):
        result = self.heal('--format', 'json', '--max-count', 'many')
        error = self.assert_error_document(result, 127)
        self.assertIn('--max-count', error['message'])

    def test_argument_error_with_equals_spelling(self):
        result = self.run_cli('audit', 'list', '--format=json',
                              '--limit', '0')
        self.assert_error_document(result, 127)

    def test_empty_filter(self):
        self.assert_error_document(
            self.heal('--format', 'json', '--instance', ''), 127)

    def test_unknown_cell(self):
        self.assert_error_document(
            self.heal('--format', 'json', '--cell', str(uuid.uuid4())), 127)

    def test_unknown_run(self):
        unknown = str(uuid.uuid4())
        for argv in (('audit', 'show', unknown), ('revert', unknown)):
            result = self.run_cli(*(argv + ('--format', 'json')))
            error = self.assert_error_document(result, 127)
            self.assertIn(unknown, error['message'])

    def test_unreadable_plan(self):
        self.assert_error_document(self.run_cli(
            'apply', os.path.join(self.state_path, 'no-such-plan'),
            '--format', 'json'), 127)

    def test_invalid_configuration_value(self):
        config = self.write_config('batch_size = lots\n')
        self.assert_error_document(
            self.heal('--format', 'json', config_file=config), 127)

    def test_api_database_failure_masks_the_password(self):
        config = self.write_config_text(
            '[api_database]\nconnection = mysql+pymysql://nova:%s@'
            '127.0.0.1:1/nova_api\n' % SECRET)
        result = self.heal('--format', 'json', config_file=config)
        error = self.assert_error_document(result)
        self.assertNotIn(result.code, (0, 1, 3, 4))
        self.assertNotIn(SECRET, result.stdout + result.stderr)
        self.assertIn('127.0.0.1', error['message'])

    def test_unexpected_error(self):
        # No driver for this scheme: not an input error the tool knows.
        config = self.write_config_text(
            '[api_database]\nconnection = nosuchdriver+nosuch://nova:%s@'
            'localhost/nova_api\n' % SECRET)
        result = self.heal('--format', 'json', config_file=config)
        self.assert_error_document(result)
        self.assertNotEqual(0, result.code)
        self.assertNotIn(SECRET, result.stdout + result.stderr)

    def test_text_format_keeps_stdout_empty(self):
        result = self.heal('--cell', str(uuid.uuid4()))
        self.assertEqual(127, result.code)
        self.assertEqual('', result.stdout)


class MetricsOnEveryExitTest(audit_case.AuditTestCase):
    """--metrics-file is written whatever the exit code."""

    PREVIOUS = 1700000000

    def setUp(self):
        super().setUp()
        self.metrics = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'heal.prom')
        with open(self.metrics, 'w') as handle:
            handle.write('nova_heal_request_specs_last_success_timestamp_'
                         'seconds %d\n' % self.PREVIOUS)

    def metric_values(self):
        values = {}
        with open(self.metrics) as handle:
            for line in handle:
                if line.startswith('nova_heal') and '{' not in line:
                    name, value = line.split()
                    values[name] = float(value)
        return values

    def assert_failure_metrics(self, result, code):
        self.assertEqual(code, result.code, result.stderr)
        values = self.metric_values()
        self.assertEqual(code,
                         values['nova_heal_request_specs_exit_code'])
        self.assertEqual(
            self.PREVIOUS,
            values['nova_heal_request_specs_last_success_timestamp_seconds'])
        self.assertIn('nova_heal_request_specs_last_run_timestamp_seconds',
                      values)

    def test_unusable_state_path(self):
        blocker = os.path.join(self.state_path, 'a-file')
        open(blocker, 'w').close()
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_HEALREQ__STATE_PATH', os.path.join(blocker, 'state')))
        result = self.heal('--metrics-file', self.metrics)
        self.assert_failure_metrics(result, 127)

    def test_unknown_cell(self):
        result = self.heal('--metrics-file', self.metrics,
                           '--cell', str(uuid.uuid4()))
        self.assert_failure_metrics(result, 127)

    def test_bad_configuration_value(self):
        config = self.write_config('batch_size = lots\n')
        result = self.heal('--metrics-file', self.metrics,
                           config_file=config)
        self.assert_failure_metrics(result, 127)

    def test_api_database_failure(self):
        config = self.write_config_text(
            '[api_database]\nconnection = mysql+pymysql://nova:%s@'
            '127.0.0.1:1/nova_api\n' % SECRET)
        result = self.heal('--metrics-file', self.metrics,
                           config_file=config)
        self.assertNotIn(result.code, (0, 4))
        self.assert_failure_metrics(result, result.code)
        with open(self.metrics) as handle:
            self.assertNotIn(SECRET, handle.read())

    def test_success_sets_last_success(self):
        self.add_drifted(self.cell1)
        result = self.heal('--metrics-file', self.metrics)
        self.assertEqual(0, result.code, result.stderr)
        self.assertGreater(
            self.metric_values()[
                'nova_heal_request_specs_last_success_timestamp_seconds'],
            self.PREVIOUS)


class InterruptionTest(audit_case.AuditTestCase):
    """SIGHUP, SIGINT and SIGTERM stop a heal after the current batch."""

    INSTANCES = 24

    def setUp(self):
        super().setUp()
        self.uuids = [self.add_drifted(self.cell1 if n % 2 else self.cell2)
                      for n in range(self.INSTANCES)]
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.metrics = os.path.join(self.directory, 'heal.prom')
        self.gate = self.useFixture(cli.Gate())
        self.env = dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path)

    def healed_count(self):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).where(
                t.c.updated_at.isnot(None))).scalar()

    def start_heal(self, *extra, stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, preexec_fn=None):
        """Start a heal; return the process held after its first batch.

        ``signal_and_go`` sends it a signal, then lets it on.
        """
        process = cli.spawn(
            self.gate.argv() + ['--config-file', self.config_file,
                                'request-specs', '--batch-size', '1',
                                '--metrics-file', self.metrics]
            + list(extra),
            stdout=stdout, stderr=stderr, env=self.env,
            preexec_fn=preexec_fn)
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        self.gate.reach(1, process)
        self.assertEqual(1, self.healed_count())
        return process

    def signal_and_go(self, process, signal_number):
        """Signal the held ``process``, then let it on.

        A signal sent to a process goes to its main thread, which holds
        in a sleep; the sleep is interrupted and the handler runs before
        the command looks whether it may go on.
        """
        process.send_signal(signal_number)
        self.gate.open()

    def interrupted_run(self, signal_number, *extra):
        """Heal, signal after the first batch; (code, out, err)."""
        process = self.start_heal(*extra)
        self.signal_and_go(process, signal_number)
        out, err = process.communicate(timeout=120)
        return process.returncode, out.decode(), err.decode()

    def assert_stopped_cleanly(self, signal_number, code):
        returncode, out, err = self.interrupted_run(
            signal_number, '--format', 'json')
        self.assertEqual(code, returncode, err)
        self.assertNotIn('Traceback', err)
        self.assertNotIn('CRITICAL', err)
        document = json.loads(out)
        self.assertEqual(code, document['exit_code'])
        self.assertEqual(self.healed_count(), document['summary']['healed'])
        self.assert_recorded(document['run_id'], code)

    def assert_recorded(self, run_id, code):
        """The run is closed with ``code``, its metrics say so too."""
        healed = self.healed_count()
        self.assertGreater(healed, 0)
        self.assertLess(healed, self.INSTANCES)
        run = self.audit_runs()[run_id]
        self.assertEqual(code, run['exit_code'])
        self.assertIsNotNone(run['ended_at'])
        self.assertEqual(healed, run['summary']['healed'])
        changes = self.audit_show(run_id)['changes']
        self.assertEqual({'applied'}, {c['state'] for c in changes})
        self.assertEqual(healed, len(changes))
        with open(self.metrics) as handle:
            metrics = handle.read()
        self.assertIn('nova_heal_request_specs_exit_code %d' % code, metrics)
        self.assertIn('nova_heal_request_specs_healed{cell_uuid=', metrics)

    def test_sigint(self):
        self.assert_stopped_cleanly(signal.SIGINT, 130)

    def test_sighup(self):
        self.assert_stopped_cleanly(signal.SIGHUP, 129)

    def test_sighup_from_a_terminal_that_hung_up(self):
        """The session is gone: every write to the terminal fails (EIO)."""
        terminal, device = pty.openpty()
        process = self.start_heal(stdout=device, stderr=device)
        os.close(device)
        os.close(terminal)  # hang up: the device now refuses writes
        self.signal_and_go(process, signal.SIGHUP)
        self.assertEqual(129, process.wait(timeout=120))
        self.assert_recorded(self.only_run_id(), 129)

    def test_sighup_with_readers_gone(self):
        """The session is gone: every write to its pipes fails (EPIPE)."""
        process = self.start_heal('--format', 'json')
        process.stdout.close()
        process.stderr.close()
        self.signal_and_go(process, signal.SIGHUP)
        self.assertEqual(129, process.wait(timeout=120))
        self.assert_recorded(self.only_run_id(), 129)

    def test_sighup_ignored_as_under_nohup(self):
        process = self.start_heal(preexec_fn=lambda: signal.signal(
            signal.SIGHUP, signal.SIG_IGN))
        self.signal_and_go(process, signal.SIGHUP)
        out, err = process.communicate(timeout=120)
        self.assertEqual(0, process.returncode, err)
        self.assertEqual(self.INSTANCES, self.healed_count())

    def only_run_id(self):
        run_id, = self.audit_runs()
        return run_id

    def test_sigterm(self):
        self.assert_stopped_cleanly(signal.SIGTERM, 143)

    def test_text_report_says_what_was_done(self):
        returncode, out, err = self.interrupted_run(signal.SIGTERM)
        self.assertEqual(143, returncode, err)
        self.assertIn('Total: checked', out)
        self.assertIn('Exit code 143 (terminated by SIGTERM', out)
        self.assertNotIn('Traceback', err)


class ClosedStdoutTest(audit_case.AuditTestCase):
    """A reader that went away ends the command quietly."""

    def run_into_closed_pipe(self, *argv):
        env = dict(os.environ, OS_HEALREQ__STATE_PATH=self.state_path)
        process = cli.spawn(
            cli.NOVA_HEAL + ['--config-file', self.config_file] + list(argv),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        process.stdout.close()
        err = process.stderr.read().decode()
        process.wait(timeout=120)
        self.assertNotIn('Traceback', err)
        self.assertNotIn('BrokenPipe', err)
        return process.returncode, err

    def test_audit_list(self):
        for _ in range(3):
            self.assertEqual(4, self.heal('--dry-run').code)
        code, err = self.run_into_closed_pipe('audit', 'list')
        self.assertEqual(0, code, err)

    def test_request_specs_text_report(self):
        self.add_drifted(self.cell1)
        code, err = self.run_into_closed_pipe('request-specs')
        self.assertEqual(0, code, err)
        self.assertEqual(1, self.audit_runs().popitem()[1]['summary'][
            'healed'])


class ReadOnlyStoreTest(audit_case.AuditTestCase):
    """audit list and show read a store they may not write."""

    def setUp(self):
        super().setUp()
        self.add_drifted(self.cell1)
        self.run_id = self.heal_run()
        os.chmod(self.audit_path(), 0o400)
        os.chmod(self.state_path, 0o500)
        self.addCleanup(os.chmod, self.audit_path(), 0o600)
        self.addCleanup(os.chmod, self.state_path, 0o700)
        self.before = self.snapshot()

    def snapshot(self):
        return (sorted(os.listdir(self.state_path)),
                os.stat(self.audit_path()).st_mode & 0o777,
                self.state_bytes())

    def test_list_and_show(self):
        self.assertIn(self.run_id, self.audit_runs())
        self.assertEqual(1, len(self.audit_show(self.run_id)['changes']))
        result = self.run_cli('audit', 'list')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn(self.run_id, result.stdout)
        self.assertEqual(self.before, self.snapshot())
