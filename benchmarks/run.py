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


"""Benchmark ``nova-heal request-specs --dry-run`` against two floors and
a naive per-instance script on a MySQL/MariaDB deployment.

Usage (from a virtualenv where healreq is installed)::

    python benchmarks/run.py --instances 20000

Builds (or reuses) the deployment, then runs the contenders alternately,
each in a fresh process, ``--rounds`` times; prints instances per second,
the ratios and the peak RSS of each, and writes them to ``--output``. See
benchmarks/README.rst.
"""

import argparse
import datetime
from importlib import metadata
import json
import os
import platform
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import sqlalchemy as sa

import build
import common
from healreq.conf import healreq as healreq_conf
from healreq.db import tables
from healreq.run import records
import server as server_work

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# In the order each round runs them; 'workers' (the tool with --workers
# N) runs when N is above 1, 'derived' (the tool with --fields leaving out
# availability_zone and instance_group, so that it neither reads the API
# database's groups and aggregates nor checks those fields) with
# --zones-and-groups.
# --before DIR: 'before' is the tool of another healreq tree, imported
# from DIR (one worker), so that a change is measured side by side.
CONTENDERS = ('tool', 'workers', 'derived', 'before', 'raw', 'floor',
              'naive')
# The fields the 'derived' contender checks: all but the zone and group.
DERIVED_FIELDS = ('flavor', 'image', 'numa_topology', 'pci_requests',
                  'is_bfv', 'project_id', 'user_id')
FLOORS = ('raw', 'floor')
DEFAULT_NAIVE_SAMPLE = 2000
DEFAULT_WORKERS = 2
TARGET_FLOOR_RATIO = 1.5
TARGET_NAIVE_RATIO = 20.0
TARGET_SERVER_RATIO = 2.0
# The server's work is observed around each run where set (main sets it).
OBSERVER = None


class Failure(Exception):
    """A contender failed or produced wrong results."""


def _default_batch_size():
    return next(opt.default for opt in healreq_conf.healreq_opts
                if opt.name == 'batch_size')


def measure(argv):
    """Run ``argv``; return its figures (see measure.py) and output.

    The command is started through ``measure.py``, a bare interpreter
    that times it and samples the resident size of its whole process
    tree (see there). Where ``OBSERVER`` is set, the server's work during
    the run is added as ``server`` (see server.py).
    """
    before = OBSERVER.snapshot() if OBSERVER else None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix='.json') as figures:
        subprocess.run([sys.executable, '-I', '-S',
                        os.path.join(HERE, 'measure.py'), figures.name]
                       + list(argv), stdout=out, stderr=err, cwd=REPO,
                       check=True)
        with open(figures.name) as handle:
            result = json.load(handle)
        if not result['subreaper'] or result['strays']:
            raise Failure('%s: %s' % (' '.join(argv), (
                '%d processes it started were still running long after it '
                'ended' % result['strays'])
                if result['subreaper'] else 'the CPU time of processes '
                'whose parent ended first cannot be counted: Linux did not '
                'let measure.py adopt them (PR_SET_CHILD_SUBREAPER)'))
        out.seek(0)
        err.seek(0)
        result.update(stdout=out.read().decode('utf-8', 'replace'),
                      stderr=err.read().decode('utf-8', 'replace'))
        if OBSERVER:
            result['server'] = server_work.difference(
                before, OBSERVER.snapshot())
        return result


def _document(result, name):
    try:
        return json.loads(result['stdout'])
    except ValueError:
        raise Failure('%s: exit code %d, stdout is not JSON:\n%s\n%s' % (
            name, result['code'], result['stdout'][-2000:],
            result['stderr'][-2000:]))


def check_tool(result, instances, drifted):
    document = _document(result, 'tool')
    summary = document.get('summary', {})
    expected = dict(instances_checked=instances, drifted=drifted,
                    consistent=instances - drifted, healed=0, skipped=0,
                    errors=0, conflicts=0, cells_failed=0)
    wrong = {key: summary.get(key) for key, value in expected.items()
             if summary.get(key) != value}
    if result['code'] != 0 or wrong or document.get('dry_run') is not True:
        raise Failure('tool: exit code %d (expected 0), summary %s differs '
                      'from %s\n%s' % (result['code'], wrong, expected,
                                       result['stderr'][-2000:]))


def check_floor(result, instances):
    document = _document(result, 'floor')
    # A spec, a flavor and PCI requests per instance; some 24 system
    # metadata rows each; the tool's sample of the newest specs.
    if (result['code'] != 0 or document.get('instances') != instances
            or document.get('documents') != 3 * instances
            or document.get('system_metadata', 0) < instances
            or document.get('version_sample') != min(
                instances, records.VERSION_SAMPLE)):
        raise Failure('floor: exit code %d, read %s (expected %d instances)'
                      % (result['code'], document, instances))


def check_raw_floor(result, instances, numa_topologies):
    """Check the raw floor's counts against the build."""
    document = _document(result, 'raw floor')
    # Every live instance with its spec, mapping, extra and root device
    # mapping; a spec, a flavor, PCI requests (never NULL in the build)
    # and, on pinned flavors, a NUMA topology each; some 24 system
    # metadata rows each; no migration in progress.
    expected = dict(cells=len(build.CELL_NAMES), instances=instances,
                    specs=instances, mappings=instances, extras=instances,
                    block_devices=instances, joined=instances,
                    migrations=0,
                    documents=3 * instances + numa_topologies)
    wrong = {key: document.get(key) for key, value in expected.items()
             if document.get(key) != value}
    if (result['code'] != 0 or wrong
            or document.get('system_metadata', 0) < 20 * instances):
        raise Failure('raw floor: exit code %d, read %s; %s differ from %s'
                      % (result['code'], document, wrong, expected))


def check_naive(result, sample, mismatches):
    document = _document(result, 'naive')
    if (result['code'] != 0 or document.get('instances') != sample
            or document.get('flavor_mismatches') != mismatches):
        raise Failure('naive: exit code %d, got %s (expected %d instances, '
                      '%d flavor mismatches)' % (result['code'], document,
                                                 sample, mismatches))


def naive_sample(instances, requested):
    """Positions the naive contender processes: the first of each cell."""
    split = build.cell_split(instances)
    if not requested or requested >= instances:
        return [p for positions in split for p in positions]
    chosen = []
    for index, positions in enumerate(split):
        share = (requested // len(split)
                 + (1 if index < requested % len(split) else 0))
        chosen.extend(positions[:share])
    return chosen


def _versions(api_url, databases):
    """The server's version, its buffer pool and the deployment's size.

    A buffer pool smaller than the deployment's data and indexes makes
    every round read pages again: the figures then measure that.
    """
    engine = sa.create_engine(api_url)
    try:
        with engine.connect() as conn:
            server = conn.exec_driver_sql('SELECT VERSION()').scalar()
            pool = conn.exec_driver_sql(
                'SELECT @@innodb_buffer_pool_size').scalar()
            size = conn.execute(sa.text(
                'SELECT SUM(data_length + index_length) FROM '
                'information_schema.tables WHERE table_schema IN :names'
            ).bindparams(sa.bindparam('names', expanding=True)),
                {'names': sorted(databases)}).scalar()
    finally:
        engine.dispose()
    mib = 1024.0 * 1024.0
    return '%s; InnoDB buffer pool %d MiB, deployment %d MiB%s' % (
        server, int(pool) / mib, int(size or 0) / mib,
        '' if int(pool) > int(size or 0) else
        ' (larger than the pool: rounds read pages again)')


def _healreq_revision():
    try:
        head = subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'], cwd=REPO,
            capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(
            ['git', 'status', '--porcelain', '--', 'healreq'], cwd=REPO,
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'
    return head + (' with uncommitted changes under healreq/' if dirty
                   else '')


def before_revision(tree):
    """The revision of the --before tree: git's, or its REVISION file."""
    try:
        return subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'], cwd=tree,
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        try:
            with open(os.path.join(tree, 'REVISION')) as handle:
                return handle.read().strip()
        except OSError:
            return 'unknown'


def _round_trip_ms(url, queries=300):
    """The median time of ``SELECT 1`` through ``url``, in milliseconds."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            times = []
            for _ in range(queries):
                started = time.perf_counter()
                conn.exec_driver_sql('SELECT 1').scalar()
                times.append(time.perf_counter() - started)
    finally:
        engine.dispose()
    return 1000.0 * statistics.median(times)


def start_relay(url, rtt_ms):
    """Start benchmarks/latency.py in front of ``url``'s server.

    Returns the process and the (host, port) it listens on.
    """
    target = sa.engine.make_url(url)
    host = target.host if target.host not in (None, 'localhost') else (
        '127.0.0.1')
    relay = subprocess.Popen(
        [sys.executable, os.path.join(HERE, 'latency.py'),
         '--target', '%s:%d' % (host, target.port or 3306),
         '--rtt-ms', str(rtt_ms)], stdout=subprocess.PIPE, text=True)
    line = relay.stdout.readline().split()
    if len(line) != 2 or line[0] != 'listening':
        relay.kill()
        raise Failure('latency.py did not start: %r' % line)
    listen_host, _, port = line[1].rpartition(':')
    return relay, (listen_host, int(port))


def routed(urls, address):
    """``urls`` (role -> URL) reaching their server at ``address``."""
    host, port = address
    return {role: sa.engine.make_url(url).set(
        host=host, port=port).render_as_string(hide_password=False)
        for role, url in urls.items()}


def map_cells(api_url, urls):
    """Point the deployment's cell mappings at ``urls`` (role -> URL)."""
    engine = sa.create_engine(api_url)
    t = tables.cell_mappings
    try:
        with engine.begin() as conn:
            for role, url in urls.items():
                if role.startswith('cell') and role != 'cell0':
                    conn.execute(t.update().where(t.c.name == role).values(
                        database_connection=url))
    finally:
        engine.dispose()


def _mib(kib):
    return kib / 1024.0


def labels(workers, short=False):
    """Contender name -> how the results call it (briefly in ratios)."""
    found = dict(tool='tool', workers='tool --workers %d' % workers,
                 derived='tool without zones and groups',
                 before='tool before',
                 raw='raw floor', floor='floor', naive='naive')
    if not short:
        found.update(raw='raw floor (PyMySQL)',
                     floor='floor (healreq queries)')
    return found


def summarize(runs, counted):
    """Per contender: median wall and CPU time, instances/s, peak RSS."""
    summary = {}
    for name, results in runs.items():
        median = statistics.median(r['wall'] for r in results)
        summary[name] = dict(wall=median, rate=counted[name] / median,
                             cpu=statistics.median(r['cpu'] for r in results),
                             peak=max(r['rss_kib'] for r in results),
                             pss=max(r['pss_kib'] for r in results))
    return summary


def _median_server(results, key):
    values = [r['server'][key] for r in results if 'server' in r
              and r['server'][key] is not None]
    return statistics.median(values) if values else None


def server_lines(runs, label, pairs):
    """The server's work per contender, then the tools' over the floors'.

    Empty where the server was not observed.
    """
    if not all('server' in r for results in runs.values() for r in results):
        return []
    counters = server_work.present(next(iter(runs.values()))[0]['server'])
    lines = ['', 'database server\'s work per run (medians; CPU: the server '
             'process\'s user+system time; the others are global status '
             'counters, see benchmarks/server.py)',
             '%-30s %8s %s %s' % ('contender', 'CPU s', ' '.join(
                 '%11s' % short for _name, short in counters),
                 'other sessions')]
    summary = {}
    for name, results in runs.items():
        cpu = _median_server(results, 'cpu')
        reads = {counter: statistics.median(
            r['server']['counters'][counter] for r in results)
            for counter, _short in counters}
        others = max(r['server']['others'] for r in results)
        summary[name] = dict(cpu=cpu, handled=statistics.median(
            server_work.rows_handled(r['server']) for r in results),
            rows=statistics.median(
                server_work.rows_read(r['server']) for r in results))
        lines.append('%-30s %8s %s %d' % (
            label[name], '%.2f' % cpu if cpu is not None else 'n/a',
            ' '.join('%11d' % reads[counter] for counter, _short in counters),
            others))
        lines.append('%-30s %8s CPU s per round: %s' % ('', '', ' '.join(
            '%.2f' % r['server']['cpu'] if r['server']['cpu'] is not None
            else 'n/a' for r in results)))
    if any(r['server']['others'] for results in runs.values()
           for r in results):
        lines.append('OTHER CLIENT SESSIONS were connected to the server '
                     'around some runs: its CPU time and counters include '
                     'their work')
    lines += ['', 'server ratios (of the medians)']
    for tool, floor in pairs:
        mine, theirs = summary[tool], summary[floor]
        cpu = ('%5.2fx (target <= %.1fx)' % (
            mine['cpu'] / theirs['cpu'], TARGET_SERVER_RATIO)
            if mine['cpu'] is not None and theirs['cpu'] else 'n/a')
        lines.append('%-30s CPU %s; Handler_read_* %.2fx; rows read %.2fx'
                     % ('%s / %s' % (label[tool], label[floor]), cpu,
                        mine['handled'] / max(theirs['handled'], 1),
                        mine['rows'] / max(theirs['rows'], 1)))
    return lines


def machine_lines(compiled, loads):
    """The header lines that say what ran and how loaded the machine was."""
    return [
        'healreq       %s; bytecode %s' % (
            _healreq_revision(), 'compiled' if compiled else 'NOT compiled'),
        'CPUs          %d' % (os.cpu_count() or 0),
        _loads_line(loads),
    ]


def tool_raw_lines(runs, summary):
    """The wall and CPU ratios of contender 'tool' to 'raw', by round."""
    tool, raw = runs['tool'], runs['raw']

    def per_round(figure):
        return ' '.join('%.2f' % (mine[figure] / theirs[figure])
                        for mine, theirs in zip(tool, raw))
    return [
        'tool / raw floor, wall   %.2fx (target <= %.1fx); per round %s' % (
            summary['tool']['wall'] / summary['raw']['wall'],
            TARGET_FLOOR_RATIO, per_round('wall')),
        'tool / raw floor, CPU    %.2fx; per round %s' % (
            summary['tool']['cpu'] / summary['raw']['cpu'],
            per_round('cpu')),
    ]


def _loads_line(loads):
    before, during, after = loads
    return ('load average  %.2f before the rounds, %.2f after; during them '
            '%.2f to %.2f, median %.2f (1 minute, after each run)'
            % (before, after, min(during), max(during),
               statistics.median(during)))


def _header(args, deployment, names, sample_size, server, loads, network,
            compiled):
    meta = deployment['meta']
    instances = args.instances
    split = build.cell_split(instances)
    drifted = deployment['drifted']
    return [
        'nova-heal request-specs --dry-run benchmark',
        '',
        'date          %s' % datetime.datetime.now(
            datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
        'instances     %d (cell1 %d, cell2 %d), %d drifted (%.1f%%): %s'
        % (instances, len(split[0]), len(split[1]), drifted,
           100.0 * drifted / instances,
           ', '.join('%s %d' % item for item in sorted(
               json.loads(meta['drift_kinds']).items()))),
        'spec size     %s bytes on average' % meta['spec_bytes_avg'],
        'rounds        %d, alternating %s; medians below'
        % (args.rounds, ', '.join(labels(args.workers)[name]
                                  for name in names)),
        'batch size    %d' % args.batch_size,
        'naive sample  %d instances%s' % (
            sample_size, '' if sample_size == instances else
            ' (the first of each cell; its per-instance rate is compared)'),
        'MariaDB       %s' % server,
        'network       %s' % network,
        'Python        %s; SQLAlchemy %s; PyMySQL %s; %d CPUs'
        % (platform.python_version(), metadata.version('SQLAlchemy'),
           metadata.version('PyMySQL'), os.cpu_count() or 0),
        'healreq       %s; bytecode %s' % (
            _healreq_revision(), 'compiled, as installed' if compiled
            else 'NOT compiled: each start compiles the modules'),
        _loads_line(loads),
    ] + ([
        'before        tool before: healreq at revision %s, one worker'
        % before_revision(args.before)] if args.before else []) + [
        'deployment    %s (built in %s s)' % (
            'reused' if deployment['reused'] else 'built by this run',
            meta['build_seconds']),
    ]


def _table(runs, summary, counted, label):
    lines = ['%-30s %10s %9s %12s %8s %13s  %s' % (
        'contender', 'instances', 'wall s', 'instances/s', 'CPU s',
        'peak RSS MiB', 'wall s per round')]
    for name, results in runs.items():
        figures = summary[name]
        lines.append('%-30s %10d %9.2f %12.0f %8.2f %13.1f  %s' % (
            label[name], counted[name], figures['wall'], figures['rate'],
            figures['cpu'], _mib(figures['peak']),
            ' '.join('%.2f' % r['wall'] for r in results)))
    first = next(iter(runs.values()))[0]
    lines.append('CPU s and peak RSS are those of the contender\'s whole '
                 'process tree; peak RSS is the largest sum of its '
                 'processes\' resident sizes, sampled every %g ms'
                 % (1000 * first['sample_seconds']))
    return lines


def _pairs(runs):
    """``(tool contender, floor)`` for each ratio reported."""
    return [(tool, floor) for tool in ('tool', 'workers', 'before')
            if tool in runs for floor in FLOORS if floor in runs]


def _ratio_line(runs, summary, label, tool, floor):
    return '%-30s %5.2fx (target <= %.1fx); per round %s' % (
        '%s / %s' % (label[tool], label[floor]),
        summary[tool]['wall'] / summary[floor]['wall'], TARGET_FLOOR_RATIO,
        ' '.join('%.2f' % (mine['wall'] / theirs['wall'])
                 for mine, theirs in zip(runs[tool], runs[floor])))


def _ratios(runs, summary, label):
    """Each tool contender's time over each floor's, then naive's."""
    lines = ['wall time ratios (of the medians; then round by round)']
    lines.extend(_ratio_line(runs, summary, label, tool, floor)
                 for tool, floor in _pairs(runs))
    if 'derived' in runs:
        lines.append('%-30s %5.2fx (what checking the zone and group '
                     'fields adds: their reads and checks)' % (
                         'tool / %s' % label['derived'],
                         summary['tool']['wall']
                         / summary['derived']['wall']))
    lines.append('%-30s %5.1fx (target >= %.0fx; from instances/s)' % (
        'naive / tool', summary['tool']['rate'] / summary['naive']['rate'],
        TARGET_NAIVE_RATIO))
    lines += ['', 'CPU time ratios (of the medians; the contender\'s '
                  'whole process tree, not the server)']
    lines.extend('%-30s %5.2fx' % (
        '%s / %s' % (label[tool], label[floor]),
        summary[tool]['cpu'] / summary[floor]['cpu'])
        for tool, floor in _pairs(runs))
    first = next(iter(runs.values()))[0]
    lines += ['', 'peak RSS MiB (whole process tree): %s' % ', '.join(
        '%s %.1f' % (label[name], _mib(summary[name]['peak']))
        for name in runs)]
    lines += ['peak PSS MiB (whole process tree, every %g ms; shared pages '
              'counted once): %s' % (
                  1000 * first['sample_seconds'] * first['pss_every'],
                  ', '.join('%s %.1f' % (label[name],
                                         _mib(summary[name]['pss']))
                            for name in runs))]
    return lines


def report(args, deployment, runs, sample_size, server, loads, network,
           compiled):
    """The results: the run's settings, each contender, the ratios."""
    counted = {name: args.instances for name in runs}
    counted['naive'] = sample_size
    summary = summarize(runs, counted)
    lines = _header(args, deployment, list(runs), sample_size, server,
                    loads, network, compiled)
    lines += [''] + _table(runs, summary, counted, labels(args.workers))
    lines += [''] + _ratios(runs, summary, labels(args.workers, True))
    lines += server_lines(runs, labels(args.workers, True), _pairs(runs))
    return '\n'.join(lines) + '\n'


def profile_tool(tool_argv, path):
    """Run the tool once under cProfile; print its top functions."""
    if tool_argv[0] == sys.executable:
        tool_argv = tool_argv[1:]  # benchmarks/tool.py ...
    result = measure([sys.executable, '-m', 'cProfile', '-o', path]
                     + tool_argv)
    if result['code'] != 0:
        raise Failure('tool under cProfile: exit code %d\n%s'
                      % (result['code'], result['stderr'][-2000:]))
    print('\nProfile of one tool run (%.1f s under cProfile), %s:'
          % (result['wall'], path))
    stats = pstats.Stats(path)
    for order in ('tottime', 'cumulative'):
        print('\nTop functions by %s:' % order)
        stats.sort_stats(order).print_stats(25)


def _parser():
    parser = argparse.ArgumentParser(
        description='Benchmark nova-heal request-specs --dry-run against '
                    'two floors and a naive script (see benchmarks/'
                    'README.rst).')
    parser.add_argument('--instances', type=int, default=20000,
                        help='Instances in the deployment (default 20000).')
    parser.add_argument('--rounds', type=int, default=3,
                        help='Alternating rounds of the contenders '
                             '(default 3); medians are reported.')
    parser.add_argument('--batch-size', type=int,
                        help='Instances per batch, for the tool and the '
                             'floor (default: the tool\'s default).')
    parser.add_argument('--workers', type=int, default=DEFAULT_WORKERS,
                        help='Also run the tool with --workers N, as a '
                             'contender of its own (default %d; 1 leaves '
                             'it out).' % DEFAULT_WORKERS)
    parser.add_argument('--zones-and-groups', action='store_true',
                        help='Also run the tool without the '
                             'availability_zone and instance_group fields '
                             '(--fields), as a contender of its own: what '
                             'checking those two fields costs, their reads '
                             'of server groups and aggregates included.')
    parser.add_argument('--naive-sample', type=int,
                        default=DEFAULT_NAIVE_SAMPLE,
                        help='Instances the naive script processes (the '
                             'first of each cell; 0: all; default %d).'
                             % DEFAULT_NAIVE_SAMPLE)
    parser.add_argument('--output',
                        help='Results file (default: benchmarks/'
                             'results-<N>.txt).')
    parser.add_argument('--rtt-ms', type=float, default=0.0,
                        help='Relay every connection through benchmarks/'
                             'latency.py, adding this many milliseconds to '
                             'each round trip (default 0: connect '
                             'directly).')
    parser.add_argument('--rebuild', action='store_true',
                        help='Rebuild the deployment even if it exists.')
    parser.add_argument('--before', metavar='DIR',
                        help='Also run, as the contender "tool before", '
                             'the tool of the healreq tree in DIR (a '
                             'checkout or export of an earlier revision; '
                             'one worker), to compare a change side by '
                             'side.')
    parser.add_argument('--profile', metavar='FILE',
                        help='Afterwards, run the tool once under cProfile, '
                             'save the stats to FILE and print its top '
                             'functions.')
    return parser


def parse_args(argv):
    """The options, with the batch size and the output file filled in."""
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.instances < 2 or args.rounds < 1 or args.rtt_ms < 0
            or args.workers < 1):
        parser.error('--instances must be at least 2, --rounds and '
                     '--workers at least 1, --rtt-ms not negative')
    args.batch_size = args.batch_size or _default_batch_size()
    args.output = args.output or os.path.join(HERE, 'results-%d%s.txt' % (
        args.instances, '-rtt%gms' % args.rtt_ms if args.rtt_ms else ''))
    return args


def contenders(args):
    """The names of the contenders this run times, in round order."""
    return [name for name in CONTENDERS
            if (name != 'workers' or args.workers > 1)
            and (name != 'derived' or args.zones_and_groups)
            and (name != 'before' or args.before)]


def commands(args, deployment, workdir, sample_size):
    """Contender name -> function(run number) -> the command to measure."""
    config = os.path.join(workdir, 'nova.conf')
    build.write_config(config, deployment, workdir)

    def script(name, *options):
        return [sys.executable, os.path.join(HERE, name),
                '--config-file', config] + [str(o) for o in options]

    def tool(workers, fields=None):
        def command(number):
            # Each run of the tool gets a fresh state_path (its audit
            # store), so that the rounds are alike.
            state = os.path.join(workdir, 'state-%d-%d%s' % (
                workers, number, '-derived' if fields else ''))
            os.mkdir(state)
            tool_config = os.path.join(state, 'nova.conf')
            build.write_config(tool_config, deployment, state)
            return [sys.executable, os.path.join(HERE, 'tool.py'),
                    '--config-file', tool_config,
                    '--batch-size', str(args.batch_size),
                    '--workers', str(workers)] + (
                        ['--fields', ','.join(fields)] if fields else [])
        return command

    def before(number):
        # The same tool.py, importing healreq from the other tree.
        return ['env', 'PYTHONPATH=%s' % os.path.abspath(args.before)] + (
            tool(1)(-number))

    return {
        'tool': tool(1),
        'workers': tool(args.workers),
        'before': before,
        'derived': tool(1, DERIVED_FIELDS),
        'raw': lambda number: script('raw_floor.py'),
        'floor': lambda number: script(
            'floor.py', '--batch-size', args.batch_size,
            '--version-sample', records.VERSION_SAMPLE),
        'naive': lambda number: script('naive.py', '--sample', sample_size),
    }


def checks(args, deployment, sample):
    """Contender name -> function(result) raising Failure if it is wrong."""
    instances = args.instances
    numa = build.expected_numa_topologies(range(instances))
    mismatches = build.expected_flavor_drift(sample)

    def tool(result):
        check_tool(result, instances, deployment['drifted'])

    return {
        'tool': tool,
        'workers': tool,
        'derived': tool,
        'before': tool,
        'raw': lambda result: check_raw_floor(result, instances, numa),
        'floor': lambda result: check_floor(result, instances),
        'naive': lambda result: check_naive(result, len(sample),
                                            mismatches),
    }


def run_rounds(args, names, command, check):
    """Run the contenders alternately, ``args.rounds`` times.

    Returns the results of each contender's runs and the 1-minute load
    average after each run.
    """
    label = labels(args.workers)
    runs = {name: [] for name in names}
    loads = []
    for number in range(1, args.rounds + 1):
        for name in names:
            result = measure(command[name](number))
            check[name](result)
            runs[name].append(result)
            loads.append(os.getloadavg()[0])
            print('round %d/%d  %-30s %8.2f s  CPU %7.2f s  peak RSS %6.1f '
                  'MiB  PSS %6.1f MiB  load %.2f%s' % (
                      number, args.rounds, label[name], result['wall'],
                      result['cpu'], _mib(result['rss_kib']),
                      _mib(result['pss_kib']), loads[-1],
                      server_progress(result)), flush=True)
    return runs, loads


def server_progress(result):
    """The server's CPU and rows read during a run, for progress lines."""
    work = result.get('server')
    if not work:
        return ''
    return '  server CPU %s s, %d rows read' % (
        '%.2f' % work['cpu'] if work['cpu'] is not None else 'n/a',
        server_work.rows_read(work))


def start_observer(url):
    """Observe the server behind ``url`` around every measured run."""
    global OBSERVER
    OBSERVER = server_work.Observer(url)
    return OBSERVER


def stop_observer():
    global OBSERVER
    if OBSERVER is not None:
        OBSERVER.close()
        OBSERVER = None


def _network(direct, urls, rtt_ms):
    """How the contenders reach the server, with the round trips seen."""
    network = 'direct, SELECT 1 round trip %.3f ms' % _round_trip_ms(
        direct['api'])
    if not rtt_ms:
        return network
    return ('through benchmarks/latency.py adding %g ms, SELECT 1 round '
            'trip %.3f ms (%s)' % (rtt_ms, _round_trip_ms(urls['api']),
                                   network))


def benchmark(args, deployment, workdir, server, network):
    """Warm the server, run the rounds, write and print the results."""
    sample = naive_sample(args.instances, args.naive_sample)
    names = contenders(args)
    command = commands(args, deployment, workdir, len(sample))
    check = checks(args, deployment, sample)
    compiled = common.compile_healreq()
    # Untimed: warm the server's caches so that round 1 is not special.
    for name in FLOORS:
        check[name](measure(command[name](0)))
    load_before = os.getloadavg()[0]
    runs, loads = run_rounds(args, names, command, check)
    text = report(args, deployment, runs, len(sample), server,
                  (load_before, loads, os.getloadavg()[0]), network,
                  compiled)
    print('\n' + text, end='')
    with open(args.output, 'w') as handle:
        handle.write(text)
    print('\nWritten to %s' % os.path.relpath(args.output))
    if args.profile:
        profile_tool(command['tool'](args.rounds + 1),
                     os.path.abspath(args.profile))


def main(argv=None):
    args = parse_args(argv)
    deployment = build.ensure(args.instances, args.rebuild)
    direct = deployment['urls']
    server = _versions(direct['api'], deployment['names'].values())
    relay = None
    workdir = tempfile.mkdtemp(prefix='healreq-bench-')
    start_observer(direct['api'])
    try:
        urls = direct
        if args.rtt_ms:
            relay, address = start_relay(direct['api'], args.rtt_ms)
            urls = routed(direct, address)
        network = _network(direct, urls, args.rtt_ms)
        deployment = dict(deployment, urls=urls)
        # Every contender finds the cells through cell_mappings.
        map_cells(direct['api'], urls)
        benchmark(args, deployment, workdir, server, network)
    except Failure as exc:
        print('FAILED: %s' % exc, file=sys.stderr)
        return 1
    finally:
        stop_observer()
        if relay is not None:
            map_cells(direct['api'], direct)
            relay.kill()
            relay.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
