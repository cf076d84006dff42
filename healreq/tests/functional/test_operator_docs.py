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


"""What operators read agrees with what the command really does.

These run ``python -m healreq`` on the demo deployment (SQLite files, as
``nova-heal demo`` builds them): the operator guide's sample outputs, the
order of ``--verbose`` progress and report on one stream, and the metrics
that the Grafana dashboard queries.
"""

import json
import os
import re
import subprocess
import sys

import fixtures
import testtools

from healreq.testing import demo

_ROOT = os.path.join(os.path.dirname(__file__), '..', '..', '..')
_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}')
_CONFIG_FILE = re.compile(r'--config-file \S*nova\.conf')
_GUIDE = os.path.join('doc', 'source', 'admin', 'index.rst')
_SAMPLE_INTRO = 'Its output looks like this::\n\n'
_ALLOCATIONS_INTRO = 'The demo\'s audit prints::\n\n'


def nova_heal(*arguments, **kwargs):
    """Run ``python -m healreq`` with ``arguments``; return the process.

    stdout is buffered as an operator's shell leaves it: a pipe's output
    is written in blocks unless the command flushes it.
    """
    environment = dict(os.environ)
    environment.pop('PYTHONUNBUFFERED', None)
    return subprocess.run([sys.executable, '-m', 'healreq'] + list(arguments),
                          stdout=subprocess.PIPE, universal_newlines=True,
                          env=environment, timeout=300, **kwargs)


def normalise(lines):
    """Lines with UUIDs and the demo's scratch paths made comparable."""
    return [_CONFIG_FILE.sub('--config-file .../nova.conf',
                             _UUID.sub('<uuid>', line)).rstrip()
            for line in lines]


def run_of_demo(stdout, command_end, last_line_start):
    """The demo's run whose command line ends with ``command_end``."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines)
                 if line.startswith('$ ') and line.endswith(command_end))
    end = next(i for i, line in enumerate(lines)
               if i > start and line.startswith(last_line_start))
    return lines[start:end + 1]


def first_run_of_demo(stdout):
    """The demo's dry run: from its command line to its exit code."""
    return run_of_demo(stdout, '--dry-run --verbose', 'Exit code ')


def run_demo(test, stderr):
    """Run ``nova-heal demo`` in a folder that the test removes."""
    workdir = test.useFixture(fixtures.TempDir()).path
    return nova_heal('demo', '--workdir', workdir, stderr=stderr)


def documented_sample(intro=_SAMPLE_INTRO):
    """The literal block the operator guide shows after ``intro``."""
    with open(os.path.join(_ROOT, _GUIDE)) as handle:
        text = handle.read()
    block = text[text.index(intro) + len(intro):]
    lines = []
    for line in block.splitlines():
        if line and not line.startswith('    '):
            break
        lines.append(line[4:])
    return [line for line in lines if line] if lines else []


class DocumentedSampleTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.process = run_demo(self, subprocess.DEVNULL)
        self.assertEqual(0, self.process.returncode, self.process.stdout)

    def assertShown(self, intro, run, what):
        self.assertEqual(
            normalise(documented_sample(intro)), normalise(run),
            '%s must show the demo\'s %s; today it is:\n\n%s'
            % (_GUIDE, what, '\n'.join('    ' + line for line in run)))

    def test_operator_guide_shows_the_demo_output(self):
        self.assertShown(_SAMPLE_INTRO, first_run_of_demo(
            self.process.stdout), 'dry run')

    def test_operator_guide_shows_the_demo_allocations(self):
        self.assertShown(_ALLOCATIONS_INTRO, run_of_demo(
            self.process.stdout, ' allocations', 'Checked '), 'allocations')


class OutputOrderTest(testtools.TestCase):
    def test_verbose_progress_is_in_order_with_the_report(self):
        # stdout and stderr share one pipe, as in "tox -e demo | less".
        process = run_demo(self, subprocess.STDOUT)
        self.assertEqual(0, process.returncode, process.stdout)
        lines = process.stdout.splitlines()

        def index(prefix, start=0):
            return next(i for i, line in enumerate(lines)
                        if i >= start and line.startswith(prefix))
        logs = [i for i, line in enumerate(lines)
                if 'Looking for instances in cell' in line]
        built = index('Built a demo deployment')
        dry_run = index('$ nova-heal', built)
        report = index('DRIFTED', dry_run)
        self.assertEqual(2, len(logs), process.stdout)
        self.assertLess(built, dry_run, process.stdout)
        self.assertLess(dry_run, logs[0], process.stdout)
        self.assertLess(logs[-1], report, process.stdout)
        self.assertLess(report, index('$ nova-heal', report), process.stdout)


class DashboardTest(testtools.TestCase):
    """Every metric the Grafana dashboard queries is one the tool writes."""

    def written_metrics(self):
        """``{name: labels}`` of the metrics file of a real demo run."""
        workdir = self.useFixture(fixtures.TempDir()).path
        config = demo.build(workdir)
        path = os.path.join(workdir, 'nova_heal.prom')
        process = nova_heal('--config-file', config, 'request-specs',
                            '--dry-run', '--metrics-file', path,
                            stderr=subprocess.DEVNULL)
        self.assertEqual(0, process.returncode, process.stdout)
        metrics = {}
        with open(path) as handle:
            for line in handle:
                if line.startswith('#') or not line.strip():
                    continue
                name, _, labels = line.split()[0].partition('{')
                metrics.setdefault(name, set()).update(
                    re.findall(r'(\w+)="', labels))
        return metrics

    def dashboard_queries(self):
        with open(os.path.join(_ROOT, 'etc', 'grafana',
                               'nova-heal-dashboard.json')) as handle:
            dashboard = json.load(handle)
        queries = []

        def walk(node):
            if isinstance(node, dict):
                for key, value in node.items():
                    if key in ('expr', 'definition') and isinstance(value,
                                                                    str):
                        queries.append(value)
                    else:
                        walk(value)
            elif isinstance(node, list):
                for item in node:
                    walk(item)
        walk(dashboard)
        return queries

    def test_dashboard_queries_only_written_metrics(self):
        written = self.written_metrics()
        queried = set()
        for query in self.dashboard_queries():
            names = set(re.findall(r'\bnova_heal_\w+', query))
            self.assertTrue(names, query)
            unknown = names - set(written)
            self.assertEqual(set(), unknown, query)
            queried |= names
            # Every label a query groups or filters by exists on its metrics.
            labels = set(re.findall(r'(\w+)\s*=~?\s*"', query))
            for group in re.findall(r'by \(([^)]*)\)', query):
                labels.update(label.strip() for label in group.split(','))
            labels.update(re.findall(r'label_values\(\w+, (\w+)\)', query))
            for name in names:
                self.assertEqual(set(), labels - written[name],
                                 '%s in %s' % (name, query))
        prefix = 'nova_heal_request_specs_'
        for needed in ('drifted', 'drift_by_field', 'errors', 'conflicts',
                       'duration_seconds', 'last_success_timestamp_seconds'):
            self.assertIn(prefix + needed, queried)
