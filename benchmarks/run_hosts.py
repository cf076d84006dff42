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


"""Benchmark ``nova-heal hosts`` against a raw read of its tables.

Usage (from a virtualenv where healreq is installed)::

    python benchmarks/run_hosts.py --instances 20000 --hosts 1000

Builds (or reuses) the deployment of ``hosts_build.py``, then runs the
tool and the raw floor alternately, each in a fresh process,
``--rounds`` times, and writes the medians and ratios to ``--output``.
"""

import argparse
import os
import statistics
import sys
import tempfile

import common
import hosts_build
import run

CONTENDERS = ('tool', 'raw', 'startup', 'libraries')
LABELS = {'tool': 'nova-heal hosts', 'raw': 'raw floor (PyMySQL)',
          'startup': 'nova-heal hosts --help',
          'libraries': 'import of the libraries'}
# What every run of the tool imports before it can read a row: the
# libraries it is built on by design (SQLAlchemy comes with oslo.db).
LIBRARIES = ('import oslo_config.cfg, oslo_log.log, '
             'oslo_db.sqlalchemy.engines, pymysql')


def check_tool(result, hosts):
    document = run._document(result, 'hosts')
    summary = document.get('summary', {})
    problems = {k: v for k, v in summary.get('problems', {}).items() if v}
    expected = hosts_build.expected(hosts)
    if (result['code'] != 0 or problems != expected
            or summary.get('hosts_checked') != hosts
            or summary.get('errors')):
        raise run.Failure('hosts: exit code %d (expected 0), summary %s, '
                          'expected problems %s\n%s' % (
                              result['code'], summary, expected,
                              result['stderr'][-2000:]))


def check_raw(result, instances, hosts):
    document = run._document(result, 'raw floor')
    expected = dict(compute_nodes=hosts, instances=instances,
                    joined=hosts, services=hosts)
    wrong = {key: document.get(key) for key in expected
             if document.get(key) != expected[key]}
    if result['code'] != 0 or wrong:
        raise run.Failure('raw floor: exit code %d, read %s; %s differ from '
                          '%s' % (result['code'], document, wrong, expected))


def report(args, runs, server, loads, compiled):
    counted = {name: args.instances for name in runs}
    summary = run.summarize(runs, counted)
    lines = [
        'nova-heal hosts benchmark',
        '',
        'instances     %d on %d hosts; problems built: %s' % (
            args.instances, args.hosts, ', '.join(
                '%s %d' % item for item in sorted(
                    hosts_build.expected(args.hosts).items()))),
        'rounds        %d, alternating %s; medians below' % (
            args.rounds, ', '.join(LABELS[name] for name in CONTENDERS)),
        'batch size    %d hosts' % args.batch_size,
        'MariaDB       %s' % server,
    ] + run.machine_lines(compiled, loads) + [
        '',
    ]
    lines += run._table(runs, summary, counted, LABELS)
    lines += [''] + run.tool_raw_lines(runs, summary) + [
        'start-up (--help: imports and parsing, no database) %.2f s wall, '
        '%.2f s CPU;' % (summary['startup']['wall'],
                         summary['startup']['cpu']),
        'tool less its start-up / raw floor, wall %.2fx, CPU %.2fx' % (
            (summary['tool']['wall'] - summary['startup']['wall'])
            / summary['raw']['wall'],
            (summary['tool']['cpu'] - summary['startup']['cpu'])
            / summary['raw']['cpu']),
        'import of oslo.config, oslo.log, oslo.db, SQLAlchemy and PyMySQL '
        'alone %.2f s wall;' % summary['libraries']['wall'],
        'a tool on these libraries that read no more than the raw floor '
        'would take (import + raw floor) / raw floor >= %.2fx' % (
            (summary['libraries']['wall'] + summary['raw']['wall'])
            / summary['raw']['wall']),
    ]
    return '\n'.join(lines) + '\n'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--instances', type=int, default=20000)
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--batch-size', type=int,
                        help='Hosts per batch (default: the tool\'s).')
    parser.add_argument('--output')
    parser.add_argument('--rebuild', action='store_true')
    args = parser.parse_args(argv)
    args.batch_size = args.batch_size or run._default_batch_size()
    args.output = args.output or os.path.join(
        run.HERE, 'results-%d-hosts.txt' % args.instances)
    deployment = hosts_build.ensure(args.instances, args.hosts, args.rebuild)
    server = run._versions(deployment['urls']['api'],
                           list(deployment['names'].values()))
    workdir = tempfile.mkdtemp(prefix='healreq-bench-')
    nova, placement = hosts_build.write_configs(workdir, deployment)
    command = {
        'tool': [sys.executable, '-m', 'healreq', '--config-file', nova,
                 '--config-file', placement, 'hosts', '--format', 'json',
                 '--batch-size', str(args.batch_size)],
        'raw': [sys.executable, os.path.join(run.HERE, 'hosts_raw_floor.py'),
                '--config-file', nova, '--placement-config-file', placement],
        'startup': [sys.executable, '-m', 'healreq', 'hosts', '--help'],
        'libraries': [sys.executable, '-c', LIBRARIES],
    }
    check = {'tool': lambda result: check_tool(result, args.hosts),
             'raw': lambda result: check_raw(result, args.instances,
                                             args.hosts),
             'startup': lambda result: None,
             'libraries': lambda result: None}
    compiled = common.compile_healreq()
    runs = {name: [] for name in CONTENDERS}
    loads = []
    try:
        check['raw'](run.measure(command['raw']))  # warm the server
        before = os.getloadavg()[0]
        for number in range(1, args.rounds + 1):
            for name in CONTENDERS:
                result = run.measure(command[name])
                check[name](result)
                runs[name].append(result)
                loads.append(os.getloadavg()[0])
                print('round %d/%d  %-20s %8.2f s  CPU %7.2f s  peak RSS '
                      '%6.1f MiB' % (number, args.rounds, LABELS[name],
                                     result['wall'], result['cpu'],
                                     run._mib(result['rss_kib'])),
                      flush=True)
    except run.Failure as exc:
        print('FAILED: %s' % exc, file=sys.stderr)
        return 1
    text = report(args, runs, server, (before, loads, os.getloadavg()[0]),
                  compiled)
    print('\n' + text, end='')
    with open(args.output, 'w') as handle:
        handle.write(text)
    print('Written to %s; median load %.2f'
          % (os.path.relpath(args.output), statistics.median(loads)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
