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

"""The nova-heal(1) man page the wheel installs is the documented one.

``doc/man/nova-heal.1`` is committed (the wheel's data files install it in
``share/man/man1``) and ``tools/man_page.py`` keeps it the page ``tox -e
docs`` builds; CI fails when it is not (``.ci/run``, after ``tox -e
docs``). Without Sphinx, these tests check the tool, and that the
committed page still names every command and option of the parser, so
that a changed option fails ``tox -e py3`` already.
"""

import importlib
import io
import os
import sys

import fixtures
import testtools

from healreq.cmd import cli_reference
from healreq.cmd import main
from healreq.tests.unit import setup_cfg

_TOP = os.path.join(os.path.dirname(__file__), '..', '..', '..')

_BUILT = ''''\\" t
.\\" Man page generated from reStructuredText.
.
.TH "NOVA-HEAL" "1" "%s" "%s" "healreq"
.SH NAME
nova\\-heal \\- find and heal
.SH OPTIONS
%s
'''


def _built(date='Jan 02, 2026', version='1.2.3.dev4', body='.B \\-\\-x'):
    return _BUILT % (date, version, body)


def _roff(text):
    return text.replace('-', '\\-')


class _ToolTestCase(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'sys.path', [os.path.join(_TOP, 'tools')] + sys.path))
        self.tool = importlib.import_module('man_page')


class CommittedPageTest(_ToolTestCase):
    def setUp(self):
        super().setUp()
        with open(os.path.join(_TOP, self.tool.PAGE),
                  encoding='utf-8') as handle:
            self.page = handle.read()

    def test_the_wheel_installs_it(self):
        data_files = setup_cfg.read()['files']['data_files']
        self.assertIn('share/man/man1 = %s' % self.tool.PAGE,
                      [line.strip() for line in data_files.splitlines()])

    def test_is_in_its_committed_form(self):
        lines = self.page.splitlines()
        self.assertEqual(["'\\\" t", self.tool.NOTE], lines[:2])
        [title] = [line for line in lines if line.startswith('.TH ')]
        self.assertRegex(title, r'^\.TH "NOVA-HEAL" "1" "[^"]+" "" '
                                r'"healreq"$')

    def test_names_every_command_and_option(self):
        parser = cli_reference.build_parser()
        # oslo.log's options differ between releases (Zed's still has
        # --watch-log-file); the page is built under master's, and the
        # docs build checks it whole.
        logging_options = {
            action for group in parser._action_groups
            if group.title == main.LOGGING_OPTIONS_TITLE
            for action in group._group_actions}
        missing = []
        for path, command in cli_reference.walk(parser):
            if path and list(cli_reference.subcommands(command)):
                continue
            name = ' '.join(('nova-heal',) + path)
            if path and '.SS %s\n' % _roff(name) not in self.page:
                missing.append(name)
            for action in cli_reference.documented_actions(command):
                if not action.option_strings or action in logging_options:
                    continue
                term = '.B %s\n' % _roff(cli_reference._term(command, action))
                if term not in self.page:
                    missing.append('%s %s' % (name, action.option_strings[0]))
        self.assertEqual([], missing, '%s is stale: %s' % (
            self.tool.PAGE, self.tool.REGENERATE))

    def test_aliases_do_not_depend_on_the_python(self):
        parser = cli_reference.build_parser()
        [log_dir] = [action for action in parser._actions
                     if '--log-dir' in action.option_strings]
        self.assertEqual('--log-dir, --logdir LOG_DIR',
                         cli_reference._term(parser, log_dir))


class ManPageToolTest(_ToolTestCase):
    def setUp(self):
        super().setUp()
        self.dir = self.useFixture(fixtures.TempDir()).path
        self.built = os.path.join(self.dir, 'built.1')
        self.page = os.path.join(self.dir, 'man', 'nova-heal.1')

    def write_built(self, text):
        with open(self.built, 'w') as handle:
            handle.write(text)

    def read_page(self):
        with open(self.page) as handle:
            return handle.read()

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', out))
        self.useFixture(fixtures.MonkeyPatch('sys.stderr', err))
        code = self.tool.main(list(argv) + ['--built', self.built,
                                            '--page', self.page])
        return code, out.getvalue(), err.getvalue()

    def test_update_writes_the_page_without_version(self):
        self.write_built(_built())
        self.assertEqual(0, self.main('update')[0])
        page = self.read_page()
        self.assertIn('.TH "NOVA-HEAL" "1" "Jan 02, 2026" "" "healreq"\n',
                      page)
        self.assertEqual(["'\\\" t", self.tool.NOTE,
                          '.\\" Man page generated from reStructuredText.'],
                         page.splitlines()[:3])
        self.assertEqual((0, '%s is up to date\n' % self.page),
                         self.main('check')[:2])

    def test_date_and_version_alone_change_nothing(self):
        self.write_built(_built())
        self.main('update')
        self.write_built(_built(date='Mar 04, 2027', version='1.3.0'))
        code, out, _ = self.main('update')
        self.assertEqual((0, '%s is up to date\n' % self.page), (code, out))
        self.assertIn('"Jan 02, 2026"', self.read_page())
        self.assertEqual(0, self.main('check')[0])

    def test_a_changed_text_is_stale_until_updated(self):
        self.write_built(_built())
        self.main('update')
        self.write_built(_built(date='Mar 04, 2027', body='.B \\-\\-y'))
        code, out, err = self.main('check')
        self.assertEqual(1, code)
        self.assertIn('-.B \\-\\-x\n+.B \\-\\-y', out)
        self.assertIn(self.tool.REGENERATE, err)
        self.assertEqual(0, self.main('update')[0])
        self.assertIn('"Mar 04, 2027"', self.read_page())
        self.assertEqual(0, self.main('check')[0])

    def test_missing_pages(self):
        code, _, err = self.main('check')
        self.assertEqual(1, code)
        self.assertIn('run tox -e docs first', err)
        self.write_built(_built())
        code, out, _ = self.main('check')
        self.assertEqual((1, '%s does not exist\n' % self.page), (code, out))

    def test_a_page_without_title_line_is_refused(self):
        self.write_built(_built().replace('.TH', '.XX'))
        code, _, err = self.main('update')
        self.assertEqual(1, code)
        self.assertIn('has no .TH', err)
        self.assertFalse(os.path.exists(self.page))
