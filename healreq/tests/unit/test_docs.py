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


"""The documentation renders the public facts the code states.

Exit codes and their meanings (healreq.exception), the supported releases
(healreq.releases), reason codes (healreq.heal.findings) and the options
(the parser and healreq.conf) are written in the code; the documentation
renders them with its Sphinx directives. These tests fail when the pages
that must render them stop doing so, and when a page is not one link
away from the README.
"""

import glob
import os
import re

import testtools

from healreq.cmd import cli_reference

_TOP = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..',
                                     '..'))
_DOC = os.path.join(_TOP, 'doc', 'source')


def read(path):
    with open(os.path.join(_TOP, path)) as handle:
        return handle.read()


class GeneratedPagesTest(testtools.TestCase):
    """The pages that show the generated facts still render them."""

    def test_directives_in_place(self):
        wanted = {
            'doc/source/admin/index.rst': (
                '.. nova-heal-reason-codes::',
                '.. nova-heal-exit-codes:: request-specs\n   :actions:',
                '.. nova-heal-exit-codes:: revert-apply'),
            'doc/source/cli/nova-heal.rst': (
                '.. nova-heal-cli:: synopsis', '.. nova-heal-cli:: commands',
                '.. nova-heal-exit-codes:: request-specs',
                '.. nova-heal-exit-codes:: revert-apply'),
            'doc/source/install/index.rst': (
                '.. nova-heal-releases:: supported',),
            'doc/source/reference/releases.rst': (
                '.. nova-heal-releases:: rules',),
            'doc/source/admin/differences.rst': (
                '.. nova-heal-deliberate-differences::',),
            'doc/source/admin/metrics.rst': ('.. nova-heal-metrics::',),
            'doc/source/configuration/index.rst': ('.. show-options::',),
        }
        for path, directives in wanted.items():
            text = read(path)
            for directive in directives:
                self.assertIn(directive, text, path)

    def test_every_page_is_one_link_from_the_readme(self):
        readme = read('README.rst')
        linked = set(re.findall(r'<([^<>\s]+)>`__?', readme))
        for target in linked:
            self.assertTrue(os.path.exists(os.path.join(_TOP, target)),
                            target)
        pages = {os.path.relpath(path, _TOP) for path in glob.glob(
            os.path.join(_DOC, '**', '*.rst'), recursive=True)}
        unlinked = pages - linked - {'doc/source/index.rst',
                                     'doc/source/releasenotes.rst'}
        self.assertEqual(set(), unlinked)
        self.assertIn('releasenotes/notes/', linked)

    def test_generated_help_epilogs(self):
        parser = cli_reference.build_parser()
        epilogs = {' '.join(path): command.epilog
                   for path, command in cli_reference.walk(parser)
                   if command.epilog}
        self.assertIn('exit codes:', epilogs.pop('request-specs'))
        self.assertEqual({'revert', 'apply'}, set(epilogs))
