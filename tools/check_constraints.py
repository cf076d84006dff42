#!/usr/bin/env python3
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

"""Prove that a built healreq resolves under every release's constraints.

``tools/check_constraints.py dist/healreq-*.whl`` runs, for every supported
release, on the newest Python that release's constraints cover among those
healreq supports (with ``--all-pythons`` also on the oldest), ``pip
--python PYTHON install
--dry-run --ignore-installed --report`` of the package with ``-c
tools/constraints/upper-constraints-<release>.txt`` and checks the report:
every package pip would install that the release pins must be at exactly
the pinned version. So the package installs into that release's Nova
environment without changing any pin. Packages a release does not pin
(setuptools, certifi) are listed, not refused: a Nova environment already
has them. Nothing is installed. Run it with a Python whose pip is 22.3 or
newer (for ``--python``); ``--release`` limits the check to some releases.
"""

import argparse
import ast
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

import find_python

CONSTRAINTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               'constraints')

RELEASES_MODULE = os.path.join(os.path.dirname(CONSTRAINTS_DIR), '..',
                               'healreq', 'releases.py')


def read_releases(path=RELEASES_MODULE):
    """``[(constraints name, (oldest Python, newest Python))]``, oldest first.

    Read from the ``Release`` records of healreq/releases.py, which state
    each release's constraints file and Pythons once. The module is parsed,
    not imported: this script runs where healreq's dependencies are not
    installed.
    """
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == 'Release'):
            values = {keyword.arg: ast.literal_eval(keyword.value)
                      for keyword in node.keywords
                      if keyword.arg in ('constraints', 'pythons')}
            found.append((node.lineno, values['constraints'],
                          tuple(values['pythons'])))
    return [(name, pythons) for _, name, pythons in sorted(found)]


# Release (its constraints file's name), and the oldest and newest Python
# its upper-constraints cover among those healreq supports.
RELEASES = read_releases()

# Shown in the report so that a reader sees which floors were exercised.
KEY_PACKAGES = ('sqlalchemy', 'oslo-db', 'oslo-config', 'oslo-log',
                'oslo-utils', 'alembic', 'pymysql', 'pbr')


def canonical(name):
    """PEP 503 normalised project name."""
    return re.sub(r'[-_.]+', '-', name).lower()


def constraints_file(release):
    return os.path.join(CONSTRAINTS_DIR,
                        'upper-constraints-%s.txt' % release)


def read_pins(path):
    """Map each constrained project to the set of versions pinned."""
    pins = {}
    with open(path) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if '===' not in line:
                continue
            name, version = line.split('===', 1)
            version = version.split(';', 1)[0].strip()
            pins.setdefault(canonical(name), set()).add(version)
    return pins


def resolve(python, release, package):
    """Run pip's dry run; return (installs {name: version}, error)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, 'report.json')
        cmd = [sys.executable, '-m', 'pip', '--python', python,
               'install', '--dry-run',
               '--ignore-installed', '--quiet', '--no-input',
               '--disable-pip-version-check', '--report', report,
               '-c', constraints_file(release), package]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            return None, ' | '.join(lines[-6:]) or 'pip failed'
        with open(report) as f:
            data = json.load(f)
    installs = {}
    for item in data.get('install', []):
        meta = item['metadata']
        installs[canonical(meta['name'])] = meta['version']
    return installs, None


def judge(installs, pins, own_name):
    """Return (changed pins, packages the release does not pin)."""
    changed, unpinned = [], []
    for name, version in sorted(installs.items()):
        if name == own_name:
            continue
        if name not in pins:
            unpinned.append('%s %s' % (name, version))
        elif version not in pins[name]:
            changed.append('%s %s differs from the pin %s'
                           % (name, version, '/'.join(sorted(pins[name]))))
    return changed, unpinned


def check(release, version, python, package):
    """One release on one Python; return (ok, report line)."""
    label = '%-7s Python %-5s' % (release, version)
    installs, error = resolve(python, release, package)
    if error:
        return False, '%s FAILED to resolve: %s' % (label, error)
    changed, unpinned = judge(installs, read_pins(constraints_file(release)),
                              'healreq')
    if changed:
        return False, '%s FAILED: %s' % (label, '; '.join(changed))
    keys = ', '.join('%s %s' % (name, installs[name])
                     for name in KEY_PACKAGES if name in installs)
    pinned = len(installs) - 1 - len(unpinned)
    return True, ('%s ok: %d packages at the release\'s pins (%s); '
                  'not pinned by the release: %s'
                  % (label, pinned, keys, ', '.join(unpinned) or 'none'))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('package', help='a built wheel or sdist of healreq')
    parser.add_argument('--release', action='append',
                        choices=[name for name, _ in RELEASES],
                        help='check only this release (repeatable)')
    parser.add_argument('--all-pythons', action='store_true',
                        help='also check each release on its oldest Python')
    parser.add_argument('--jobs', type=int, default=4,
                        help='dry runs in parallel (default 4)')
    return parser.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    package = os.path.abspath(args.package)
    wanted = [(name, sorted(set(pythons)) if args.all_pythons
               else pythons[-1:])
              for name, pythons in RELEASES
              if not args.release or name in args.release]
    needed = sorted({v for _, pythons in wanted for v in pythons})
    interpreters = {v: find_python.find(v) for v in needed}
    missing = [v for v, path in interpreters.items() if path is None]
    for version in missing:
        print('ERROR: ' + find_python.missing_message(version),
              file=sys.stderr)
    if missing:
        return 2
    jobs = [(name, v) for name, pythons in wanted for v in pythons]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(check, name, v, interpreters[v], package)
                   for name, v in jobs]
        results = [f.result() for f in futures]
    for _, line in results:
        print(line)
    passed = sum(1 for ok, _ in results if ok)
    failed = len(results) - passed
    print('constraints: %d passed, %d failed' % (passed, failed))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
