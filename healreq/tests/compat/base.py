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


"""Shared set-up of the tests that run against the real nova package.

They run in the ``nova-compat*`` tox environments, one per Nova release
tested, where nova is installed. Elsewhere they skip, unless
HEALREQ_TEST_REQUIRE_NOVA is set (as those environments set it), in which
case they fail.

The installed nova tells the release whose rules our derivations are
called with (``RELEASE``), and the point release tells how it loads
legacy NUMA cells (``POINT_RELEASE``: the same record, with the one rule
of that point release).
"""

import dataclasses
import importlib.metadata
import os
import re
import subprocess
import sys
import warnings

import testtools

from healreq import releases
from healreq.tests import cli

try:
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        import nova.conf
        from nova import objects
except ImportError:  # pragma: no cover - depends on the environment
    nova = None
    objects = None

REQUIRE_NOVA = os.environ.get('HEALREQ_TEST_REQUIRE_NOVA', '') not in (
    '', '0')
_registered = False

# The first point release of each series that loads legacy NUMA cells by
# the fix for bug 2097360 (releases.CURRENT). Earlier point releases of
# these series, and every release of an older series, load them by
# releases.VICTORIA; every release of a newer series by CURRENT.
FIRST_FIXED = {28: (28, 3, 1), 29: (29, 4, 0), 30: (30, 3, 0)}
_OLDEST_FIXED_SERIES = min(FIRST_FIXED)
_NEWEST_FIXED_SERIES = max(FIRST_FIXED)


def nova_version():
    """The installed nova's version as a tuple of integers, or None."""
    try:
        text = importlib.metadata.version('nova')
    except importlib.metadata.PackageNotFoundError:
        return None
    return tuple(int(part) for part in re.findall(r'\d+', text)[:3])


def legacy_cell_rule(version):
    """The rule by which Nova ``version`` loads legacy NUMA cells."""
    if version[0] < _OLDEST_FIXED_SERIES:
        return releases.VICTORIA
    if version[0] > _NEWEST_FIXED_SERIES:
        return releases.CURRENT
    if version >= FIRST_FIXED[version[0]]:
        return releases.CURRENT
    return releases.VICTORIA


NOVA_VERSION = nova_version() if objects is not None else None
if NOVA_VERSION is None:
    RELEASE = POINT_RELEASE = None
else:
    # by_name raises for a nova no supported release matches: the tests
    # must not run against one.
    RELEASE = releases.by_name(str(NOVA_VERSION[0]))
    POINT_RELEASE = dataclasses.replace(
        RELEASE, legacy_cell_rules=(legacy_cell_rule(NOVA_VERSION),))


def nova_label():
    """E.g. ``Nova 26.3.0 (2022.2)``, for the reports."""
    return 'Nova %s (%s)' % ('.'.join(str(p) for p in NOVA_VERSION),
                             RELEASE.series)


def record_summary(line):
    """Report a differential test's counts (``N cases, 0 disagreements``).

    Printed, and appended to the file HEALREQ_COMPAT_REPORT names, which
    CI prints after the run. Each line names the Nova it ran against.
    """
    line = '%s: %s' % (nova_label(), line)
    sys.stdout.write(line + '\n')
    path = os.environ.get('HEALREQ_COMPAT_REPORT')
    if path:
        with open(path, 'a') as handle:
            handle.write(line + '\n')


class NovaTestCase(testtools.TestCase):
    """A test that needs the real nova package."""

    def setUp(self):
        super().setUp()
        global _registered
        if objects is None:
            message = 'the nova package is not installed'
            if REQUIRE_NOVA:
                self.fail(message + ' (HEALREQ_TEST_REQUIRE_NOVA is set)')
            self.skipTest(message)
        if not _registered:
            objects.register_all()
            _registered = True


class CommandInItsOwnProcess(object):
    """Run ``nova-heal`` as operators run it: in a process of its own.

    Nova's functional test framework, which the real-services tests
    import, monkey-patches every test process with eventlet, and a cell
    reader forked from such a process inherits eventlet's hub, not a
    working socket layer. nova-heal never runs under eventlet.
    """

    def run_cli(self, *argv, config_file=None):
        process = subprocess.run(
            cli.NOVA_HEAL + ['--config-file', config_file or self.config_file]
            + list(argv), capture_output=True, text=True, timeout=600)
        return cli.Result(process.returncode, process.stdout, process.stderr)
