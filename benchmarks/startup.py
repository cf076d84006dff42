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


"""Start-up: what a command costs before and besides its work.

Times ``nova-heal --version`` and ``nova-heal request-specs --instance
UUID --dry-run`` (one instance of the demo deployment, SQLite, in a
scratch directory), each in a new process, as medians of ``--rounds``;
then lists the modules whose imports cost most (``python -X
importtime``, cumulative). From a virtualenv where healreq is installed::

    python benchmarks/startup.py --rounds 5
"""

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

import common
from healreq.testing import demo

COMMAND = [sys.executable, '-m', 'healreq']


def _seconds(argv):
    started = time.monotonic()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.monotonic() - started


def _an_instance(workdir):
    with sqlite3.connect(os.path.join(workdir, 'nova_api.sqlite')) as db:
        return db.execute('SELECT instance_uuid FROM instance_mappings '
                          'ORDER BY id LIMIT 1').fetchone()[0]


def _costliest_imports(module, count):
    """The ``count`` imports of ``module`` that cost most, in ms."""
    trace = subprocess.run(
        [sys.executable, '-X', 'importtime', '-c', 'import %s' % module],
        capture_output=True, text=True, check=True).stderr
    costs = []
    for line in trace.splitlines()[1:]:
        _, cumulative, name = line.split('|')
        costs.append((int(cumulative) / 1000.0, name.strip()))
    return sorted(costs, reverse=True)[:count]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args()
    compiled = common.compile_healreq()
    with tempfile.TemporaryDirectory(prefix='healreq-startup-') as workdir:
        config = demo.build(workdir)
        commands = {
            'nova-heal --version': COMMAND + ['--version'],
            'request-specs --instance UUID --dry-run': COMMAND + [
                '--config-file', config, 'request-specs', '--dry-run',
                '--instance', _an_instance(workdir)],
        }
        print('start-up, medians of %d rounds (Python %s; bytecode %s)'
              % (args.rounds, sys.version.split()[0],
                 'compiled' if compiled else 'NOT compiled'))
        for label, argv in commands.items():
            times = [_seconds(argv) for _ in range(args.rounds)]
            print('  %-42s %.2f s (%s)' % (
                label, statistics.median(times),
                ' '.join('%.2f' % t for t in times)))
    print('costliest imports of healreq.cmd.main (cumulative ms):')
    for cost, name in _costliest_imports('healreq.cmd.main', 12):
        print('  %8.1f  %s' % (cost, name))


if __name__ == '__main__':
    main()
