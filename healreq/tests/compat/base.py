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

They run in the ``nova-compat`` tox environment, where nova is installed.
Elsewhere they skip, unless HEALREQ_TEST_REQUIRE_NOVA is set (as that
environment sets it), in which case they fail.
"""

import os
import sys
import warnings

import testtools

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


def record_summary(line):
    """Report a differential test's counts (``N cases, 0 disagreements``).

    Printed, and appended to the file HEALREQ_COMPAT_REPORT names, which
    CI prints after the run.
    """
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
