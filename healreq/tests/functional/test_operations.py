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


"""Running from cron: throttling, quiet output and the metrics file."""

import os
import time

from healreq.testing import demo
from healreq.tests.functional import deployment_case


class ThrottleTest(deployment_case.DeploymentTestCase):
    def test_max_rate_is_honoured(self):
        for _ in range(12):
            self.add_consistent(self.cell1)
        # The first walk of a process also starts its readers' fork server.
        self.assertEqual(4, self.heal('--dry-run', '--batch-size', '3').code)
        started = time.monotonic()
        self.assertEqual(4, self.heal('--dry-run', '--batch-size', '3').code)
        unthrottled = time.monotonic() - started
        started = time.monotonic()
        result = self.heal('--dry-run', '--max-rate', '10',
                           '--batch-size', '3')
        elapsed = time.monotonic() - started
        self.assertEqual(4, result.code, result.stderr)
        # 12 instances at 10/s take at least 1.2 s, whatever the speed of
        # the run itself, and not much more than that plus the run (how
        # fast the run itself is depends on the machine's load: not
        # asserted).
        self.assertGreaterEqual(elapsed, 1.2 * 0.95)
        self.assertLess(elapsed, 1.2 + unthrottled + 1.0)

    def test_sleep_between_batches(self):
        for _ in range(4):
            self.add_consistent(self.cell2)
        started = time.monotonic()
        result = self.heal('--dry-run', '--sleep', '0.2', '--batch-size',
                           '2', '--cell', self.cell2.uuid)
        self.assertEqual(4, result.code, result.stderr)
        self.assertGreaterEqual(time.monotonic() - started, 0.4)

    def test_invalid_throttles(self):
        for args in (('--sleep', '-1'), ('--max-rate', '0'),
                     ('--max-rate', 'fast')):
            result = self.heal(*args)
            self.assertEqual(127, result.code, args)
            self.assertEqual(1, len(result.stderr.strip().splitlines()))


class QuietTest(deployment_case.DeploymentTestCase):
    def test_quiet_prints_nothing_and_keeps_the_exit_code(self):
        self.add_drifted(self.cell1)
        result = self.heal('--dry-run', '--quiet')
        self.assertEqual(0, result.code)
        self.assertEqual('', result.stdout)
        self.assertEqual('', result.stderr)

    def test_no_progress_when_stderr_is_not_a_terminal(self):
        for _ in range(3):
            self.add_consistent(self.cell1)
        result = self.heal('--dry-run', '--batch-size', '1')
        self.assertEqual(4, result.code)
        self.assertNotIn('instances,', result.stderr)
        self.assertNotIn('\r', result.stderr)


class MetricsTest(deployment_case.DeploymentTestCase):
    def _metrics(self, path):
        values = {}
        with open(path) as handle:
            for line in handle:
                if line.startswith('#') or not line.strip():
                    continue
                name, value = line.rsplit(' ', 1)
                values[name] = float(value)
        return values

    def test_counts_per_cell_and_field(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell1)
        self.add_consistent(self.cell2)
        path = os.path.join(self.state_path, 'heal.prom')
        result = self.heal('--dry-run', '--metrics-file', path)
        self.assertEqual(0, result.code, result.stderr)
        values = self._metrics(path)
        cell1 = '{cell_uuid="%s",cell_name="cell1"}' % self.cell1.uuid
        cell2 = '{cell_uuid="%s",cell_name="cell2"}' % self.cell2.uuid
        prefix = 'nova_heal_request_specs_'
        self.assertEqual(2, values[prefix + 'checked' + cell1])
        self.assertEqual(1, values[prefix + 'checked' + cell2])
        self.assertEqual(2, values[prefix + 'drifted' + cell1])
        self.assertEqual(2, values[
            prefix + 'drift_by_field{cell_uuid="%s",field="flavor"}'
            % self.cell1.uuid])
        self.assertEqual(0, values[prefix + 'exit_code'])
        self.assertEqual(1, values[prefix + 'dry_run'])
        self.assertGreater(values[prefix + 'duration_seconds'], 0)
        self.assertAlmostEqual(time.time(), values[
            prefix + 'last_success_timestamp_seconds'], delta=60)
        # Nothing but the file itself is left in the directory.
        self.assertEqual(['heal.prom'], sorted(
            name for name in os.listdir(self.state_path)
            if name.endswith('.prom') or name.startswith('.heal.prom')))

    def test_failed_run_keeps_the_last_success_time(self):
        path = os.path.join(self.state_path, 'heal.prom')
        self.add_consistent(self.cell1)
        self.assertEqual(4, self.heal('--metrics-file', path).code)
        first = self._metrics(path)[
            'nova_heal_request_specs_last_success_timestamp_seconds']
        self.deployment.add_instance(self.cell1, demo.M1_SMALL, spec=None)
        self.assertEqual(2, self.heal('--metrics-file', path).code)
        values = self._metrics(path)
        self.assertEqual(2, values['nova_heal_request_specs_exit_code'])
        self.assertEqual(first, values[
            'nova_heal_request_specs_last_success_timestamp_seconds'])

    def test_replaced_atomically(self):
        """A reader never sees a half-written file: it is renamed in."""
        path = os.path.join(self.state_path, 'heal.prom')
        with open(path, 'w') as handle:
            handle.write('# the previous file\n')
        before = os.stat(path).st_ino
        self.add_consistent(self.cell1)
        self.assertEqual(4, self.heal('--metrics-file', path).code)
        self.assertNotEqual(before, os.stat(path).st_ino)
        self.assertNotIn('the previous file', open(path).read())


class WorkersTest(deployment_case.DeploymentTestCase):
    def _add_mix(self):
        for cell in (self.cell1, self.cell2):
            for _ in range(3):
                self.add_drifted(cell)
                self.add_consistent(cell)
            self.deployment.add_instance(cell, demo.M1_SMALL, spec=None)

    def _results(self, *args):
        result, document = self.heal_json(*args)
        return result.code, document['summary'], [
            (r['instance_uuid'], r['cell_uuid'], r['status'], r['reason'])
            for r in document['results']], [
            (c['cell_uuid'], c['instances_checked']) for c in
            document['cells']]

    def test_same_results_as_serial(self):
        self._add_mix()
        serial = self._results('--dry-run', '--batch-size', '2')
        parallel = self._results('--dry-run', '--batch-size', '2',
                                 '--workers', '2')
        self.assertEqual(serial, parallel)
        self.assertEqual(2, serial[0])
        self.assertEqual(6, serial[1]['drifted'])

    def test_parallel_heal(self):
        self._add_mix()
        code, summary, _, _ = self._results('--workers', '3')
        self.assertEqual(2, code)
        self.assertEqual(6, summary['healed'])
        code, summary, _, _ = self._results('--workers', '3')
        self.assertEqual(0, summary['drifted'] + summary['healed'])

    def test_shared_max_count(self):
        self._add_mix()
        code, summary, _, _ = self._results('--workers', '2',
                                            '--max-count', '4',
                                            '--batch-size', '1')
        self.assertEqual(4, summary['healed'])
        code, summary, _, _ = self._results('--workers', '2')
        self.assertEqual(2, summary['healed'])

    def test_invalid_workers(self):
        result = self.heal('--workers', '0')
        self.assertEqual(127, result.code)
