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


"""Benchmark ``nova-heal allocations`` against a raw read of its tables.

Usage (from a virtualenv where healreq is installed)::

    python benchmarks/run_allocations.py --instances 20000

Builds (or reuses) the deployment of ``run.py`` and a Placement database
beside it (``placement_build.py``), then runs the tool and the raw floor
alternately, each in a fresh process, ``--rounds`` times, and writes the
medians and ratios to ``--output``. See benchmarks/README.rst.
"""

import argparse
import os
import shutil
import sys
import tempfile

import build
import common
import placement_build
import run

CONTENDERS = ('tool', 'before', 'raw')
LABELS = {'tool': 'nova-heal allocations',
          'before': 'allocations before',
          'raw': 'raw floor (PyMySQL)'}


def check_tool(result, instances, problems):
    document = run._document(result, 'allocations')
    summary = document.get('summary', {})
    mismatched = sum(n for kind, n in problems.items() if kind)
    expected = dict(instances_checked=instances, mismatched=mismatched,
                    errors=0, pending=0)
    wrong = {key: summary.get(key) for key, value in expected.items()
             if summary.get(key) != value}
    if result['code'] != 0 or wrong or document.get(
            'unattributed_consumers'):
        raise run.Failure('allocations: exit code %d (expected 0), summary '
                          '%s differs from %s\n%s' % (
                              result['code'], wrong, expected,
                              result['stderr'][-2000:]))


def check_raw(result, instances, hosted, problems):
    document = run._document(result, 'raw floor')
    holding = (hosted - problems.get('missing', 0)
               + problems.get('leftover-migration', 0))
    expected = dict(cells=len(build.CELL_NAMES), instances=instances,
                    extras=instances, flavors=instances, joined=hosted,
                    holding=holding, consumers=holding)
    wrong = {key: document.get(key) for key, value in expected.items()
             if document.get(key) != value}
    if result['code'] != 0 or wrong:
        raise run.Failure('raw floor: exit code %d, read %s; %s differ '
                          'from %s' % (result['code'], document, wrong,
                                       expected))


def commands(args, deployment, placement, workdir):
    config = os.path.join(workdir, 'nova.conf')
    build.write_config(config, deployment, workdir)
    placement_config = os.path.join(workdir, 'placement.conf')
    placement_build.write_config(placement_config, placement['url'])
    tool = [sys.executable, '-m', 'healreq',
            '--config-file', config,
            '--config-file', placement_config, 'allocations',
            '--format', 'json', '--batch-size', str(args.batch_size)]
    return {
        # python -m healreq imports the tree of the working directory
        # first; the earlier one comes first with -P and PYTHONPATH.
        'before': ['env', 'PYTHONPATH=%s' % os.path.abspath(
            args.before or '.'), sys.executable, '-P'] + tool[1:],
        'tool': [sys.executable, '-m', 'healreq',
                 '--config-file', config,
                 '--config-file', placement_config, 'allocations',
                 '--format', 'json', '--batch-size', str(args.batch_size)],
        'raw': [sys.executable,
                os.path.join(run.HERE, 'allocations_raw_floor.py'),
                '--config-file', config,
                '--placement-config-file', placement_config],
    }


def contenders(args):
    return [name for name in CONTENDERS if name != 'before' or args.before]


def run_rounds(args, command, check):
    runs = {name: [] for name in contenders(args)}
    loads = []
    for number in range(1, args.rounds + 1):
        for name in runs:
            result = run.measure(command[name])
            check[name](result)
            runs[name].append(result)
            loads.append(os.getloadavg()[0])
            print('round %d/%d  %-24s %8.2f s  CPU %7.2f s  peak RSS %6.1f '
                  'MiB  load %.2f%s' % (
                      number, args.rounds, LABELS[name], result['wall'],
                      result['cpu'], run._mib(result['rss_kib']),
                      loads[-1], run.server_progress(result)), flush=True)
    return runs, loads


def report(args, placement, runs, server, loads, compiled, network):
    counted = {name: args.instances for name in runs}
    summary = run.summarize(runs, counted)
    lines = [
        'nova-heal allocations benchmark',
        '',
        'instances     %d, %d with a host; problems built: %s' % (
            args.instances, placement['hosted'], ', '.join(
                '%s %d' % (kind, count) for kind, count in sorted(
                    placement['problems'].items(), key=str) if kind)),
        'rounds        %d, alternating %s; medians below' % (
            args.rounds, ', '.join(LABELS[name] for name in runs)),
        'batch size    %d' % args.batch_size,
        'MariaDB       %s' % server,
        'network       %s' % network,
    ] + run.machine_lines(compiled, loads) + [
        '',
    ]
    lines += run._table(runs, summary, counted, LABELS)
    lines += [''] + run.tool_raw_lines(runs, summary)
    if 'before' in runs:
        lines.append('before / raw floor, wall %.2fx; tool before: healreq '
                     'at revision %s' % (
                         summary['before']['wall'] / summary['raw']['wall'],
                         run.before_revision(args.before)))
    lines += run.server_lines(runs, LABELS, [
        (name, 'raw') for name in ('tool', 'before') if name in runs])
    return '\n'.join(lines) + '\n'


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--instances', type=int, default=20000)
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument('--batch-size', type=int,
                        help='Instances per batch (default: the tool\'s).')
    parser.add_argument('--output',
                        help='Results file (default: benchmarks/'
                             'results-<N>-allocations.txt).')
    parser.add_argument('--rebuild', action='store_true',
                        help='Rebuild the Placement database.')
    parser.add_argument('--rtt-ms', type=float, default=0.0,
                        help='Relay every connection through benchmarks/'
                             'latency.py, adding this many milliseconds to '
                             'each round trip (default 0: connect '
                             'directly).')
    parser.add_argument('--before', metavar='DIR',
                        help='Also run the tool of the healreq tree in DIR '
                             '(an earlier revision), as the contender '
                             '"allocations before".')
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    args.batch_size = args.batch_size or run._default_batch_size()
    args.output = args.output or os.path.join(
        run.HERE, 'results-%d-allocations%s.txt' % (
            args.instances, '-rtt%gms' % args.rtt_ms if args.rtt_ms else ''))
    deployment = build.ensure(args.instances)
    placement = placement_build.ensure(deployment, args.instances,
                                       args.rebuild)
    server = run._versions(deployment['urls']['api'], list(
        deployment['names'].values())
        + [placement_build.database_name(args.instances)])
    workdir = tempfile.mkdtemp(prefix='healreq-bench-')
    direct = deployment['urls']
    relay = None
    run.start_observer(direct['api'])
    try:
        if args.rtt_ms:
            relay, address = run.start_relay(direct['api'], args.rtt_ms)
            deployment = dict(deployment, urls=run.routed(direct, address))
            placement = dict(placement, url=run.routed(
                {'placement': placement['url']}, address)['placement'])
        network = run._network(direct, deployment['urls'], args.rtt_ms)
        run.map_cells(direct['api'], deployment['urls'])
        text = measured(args, deployment, placement, workdir, server,
                        network)
    except run.Failure as exc:
        print('FAILED: %s' % exc, file=sys.stderr)
        return 1
    finally:
        run.stop_observer()
        if relay is not None:
            run.map_cells(direct['api'], direct)
            relay.kill()
            relay.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    print('\n' + text, end='')
    with open(args.output, 'w') as handle:
        handle.write(text)
    print('Written to %s' % os.path.relpath(args.output))
    return 0


def measured(args, deployment, placement, workdir, server, network):
    """Warm the server, run the rounds; the results' text."""
    command = commands(args, deployment, placement, workdir)
    check = {
        'tool': lambda result: check_tool(result, args.instances,
                                          placement['problems']),
        'before': lambda result: check_tool(result, args.instances,
                                            placement['problems']),
        'raw': lambda result: check_raw(result, args.instances,
                                        placement['hosted'],
                                        placement['problems']),
    }
    compiled = common.compile_healreq()
    check['raw'](run.measure(command['raw']))  # warm the server
    before = os.getloadavg()[0]
    runs, loads = run_rounds(args, command, check)
    return report(args, placement, runs, server,
                  (before, loads, os.getloadavg()[0]), compiled, network)


if __name__ == '__main__':
    sys.exit(main())
