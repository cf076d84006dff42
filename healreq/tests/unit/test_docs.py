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


"""The documentation states each public fact once.

Exit codes and their meanings (healreq.exception), the supported releases
(healreq.releases), reason codes (healreq.heal.findings) and the options
(the parser and healreq.conf) are written in the code; the documentation
renders them with its Sphinx directives. These tests fail when the
README or a documentation source writes one of them out by hand again,
when a string of the code writes an exit code's number instead of taking
it from ExitCode, and when the pages that must render them stop doing
so; they render the generated tables without Sphinx and check that each
holds every fact it is generated from.
"""

import ast
import glob
import importlib.util
import os
import re

import testtools

from healreq.cmd import cli_reference
from healreq.conf import opts as conf_opts
from healreq import exception
from healreq.heal import findings
from healreq import metrics
from healreq import releases
from healreq.tests.unit import setup_cfg

_TOP = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..',
                                     '..'))
_DOC = os.path.join(_TOP, 'doc', 'source')


def _load(directory, name):
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(_TOP, directory, name + '.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


readme_releases = _load('tools', 'readme_releases')
# The tables the documentation's Sphinx directives render, without Sphinx.
doc_tables = _load(os.path.join('doc', 'source', '_exts'),
                   'nova_heal_tables')


def read(path):
    with open(os.path.join(_TOP, path)) as handle:
        return handle.read()


def doc_sources():
    """The README, every documentation source, and the files they include.

    Paths relative to the top of the tree, in a stable order.
    """
    paths = ['README.rst'] + sorted(
        os.path.relpath(path, _TOP) for path in glob.glob(
            os.path.join(_DOC, '**', '*.rst'), recursive=True))
    for path in list(paths):
        for included in re.findall(r'^\.\. include:: (\S+)$', read(path),
                                   re.M):
            paths.append(os.path.relpath(os.path.normpath(os.path.join(
                os.path.dirname(os.path.join(_TOP, path)), included)), _TOP))
    return paths


# --------------------------------------------------------------------------
# The scanner: what a hand-written copy of a generated fact looks like
# --------------------------------------------------------------------------

# Directives whose output is generated; their content (the how-tested
# notes, the deliberate differences) is checked by the directive itself.
_GENERATING = re.compile(r'^(\s*)\.\. (nova-heal-[\w-]+|show-options)::')
_EXIT_CODES = {int(code) for code in exception.ExitCode}
_SEVERITY = ', '.join(str(int(code)) for code in exception.SEVERITY[:4])
_SIMPLE_BORDER = re.compile(r'^\s*=+(\s+=+)+\s*$')
_OPTION_TERM = re.compile(
    r'^\s*``--[a-z][\w-]*[^`]*``(,\s*``--?[\w-]+[^`]*``)*\s*$')
_CONFIG_TERM = re.compile(r'^\s*``(\w+)``(\s+\(default.*\))?\s*$')


def without_generated(text):
    """``[(line number, line)]`` of ``text`` outside generated parts.

    Those are the content of generating directives and the README's
    releases table, which tools/readme_releases.py writes.
    """
    kept, inside, in_table = [], None, False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(readme_releases.BEGIN):
            in_table = True
        elif line.startswith(readme_releases.END):
            in_table = False
            continue
        if in_table:
            continue
        if inside is not None:
            if not line.strip() or (len(line) - len(line.lstrip())
                                    > inside):
                continue
            inside = None
        match = _GENERATING.match(line)
        if match:
            inside = len(match.group(1))
            continue
        kept.append((number, line))
    return kept


def _paragraphs(lines):
    """Blank-line separated runs of ``(number, line)``."""
    paragraph = []
    for number, line in lines + [(0, '')]:
        if line.strip():
            paragraph.append((number, line))
        elif paragraph:
            yield paragraph
            paragraph = []


def _release_patterns():
    patterns = {}
    for release in releases.RELEASES:
        names = [re.escape(release.series), release.codename,
                 r'upper-constraints-%s\.txt' % re.escape(
                     release.constraints)]
        patterns[release.series] = re.compile(
            r'(?<![\w.-])(%s)(?![\w-]|\.\d)' % '|'.join(names), re.I)
    return patterns


_RELEASES = _release_patterns()


def releases_named(text):
    """The series of the supported releases ``text`` names."""
    return {series for series, pattern in _RELEASES.items()
            if pattern.search(text)}


def _table_rows(lines):
    """``(number, first cell)`` of every row of every table in ``lines``."""
    margin = None  # the left margin of the simple table being read
    for index, (number, line) in enumerate(lines):
        stripped = line.strip()
        if _SIMPLE_BORDER.match(line):
            following = lines[index + 1][1] if index + 1 < len(lines) else ''
            if margin is None:
                margin = len(line) - len(line.lstrip())
            elif not following.strip():
                margin = None  # the bottom border
            continue
        if stripped.startswith('* - '):
            yield number, stripped[4:].strip()
        elif stripped.startswith('|') and stripped.endswith('|'):
            yield number, stripped.strip('|').split('|')[0].strip()
        elif (margin is not None and stripped
              and len(line) - len(line.lstrip()) == margin):
            yield number, re.split(r'\s{2,}', stripped)[0]


def _definition_terms(lines):
    """``(number, term)`` of lines followed by a more indented line."""
    for (number, line), (_, following) in zip(lines, lines[1:]):
        if not line.strip() or not following.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if len(following) - len(following.lstrip()) > indent:
            yield number, line.strip()


def _meaning_phrases():
    """The first words of every exit-code meaning and action."""
    phrases = set()
    for table in (exception.MEANINGS, exception.REPLAY_MEANINGS,
                  exception.REVERT_MEANINGS, exception.APPLY_MEANINGS,
                  exception.ALLOCATIONS_MEANINGS):
        for meaning in table.values():
            for text in (meaning.text, meaning.action):
                words = text.split()
                if len(words) >= 5 and len(' '.join(words[:5])) >= 20:
                    phrases.add(' '.join(words[:5]).lower())
    return phrases


def _config_option_names():
    return {opt.name for _, group in conf_opts.list_opts() for opt in group}


def _plain(text):
    """Prose as read: no literal markup, one space between words."""
    return ' '.join(text.replace('``', '').split()).lower()


def _in_tables(lines):
    for number, cell in _table_rows(lines):
        value = cell.strip('`')
        if value.isdigit() and int(value) in _EXIT_CODES:
            yield number, 'exit-code table row %s' % value
        elif releases_named(cell):
            yield number, 'release table row %r' % cell
        elif value.startswith('-'):
            yield number, 'option table row %r' % cell


def _in_definition_lists(lines):
    config_names = _config_option_names()
    for number, term in _definition_terms(lines):
        value = term.strip('`:')
        config = _CONFIG_TERM.match(term)
        if value.isdigit() and int(value) in _EXIT_CODES:
            yield number, 'exit code %s described by hand' % value
        elif _OPTION_TERM.match(term):
            yield number, 'option %s described by hand' % term
        elif config and config.group(1) in config_names:
            yield number, ('configuration option %s described by hand'
                           % term)


def _in_lines(lines):
    for number, line in lines:
        if re.match(r'^\s*\.\. option::', line):
            yield number, 'hand-written option directive'
        if len(re.findall(r'\[--[a-z]', line)) >= 2:
            yield number, 'hand-written usage synopsis'
        row = re.match(r'^\s*(\d{1,3})\s{2,}[a-z-]', line)
        if row and int(row.group(1)) in _EXIT_CODES:
            yield number, 'exit-code table line %r' % line.strip()


def _in_paragraphs(lines):
    phrases = sorted(_meaning_phrases())
    for paragraph in _paragraphs(lines):
        first = paragraph[0][0]
        joined = ' '.join(line for _, line in paragraph)
        prose = _plain(joined)
        if _SEVERITY in prose:
            yield first, 'the order of severity written by hand'
        for phrase in phrases:
            if phrase in prose:
                yield first, ('an exit-code meaning written by hand: %r'
                              % phrase)
        listed = {int(code) for code in re.findall(r'``(\d{1,3})``', joined)
                  if int(code) in _EXIT_CODES}
        if len(listed) >= 3:
            yield first, 'exit codes %s listed by hand' % sorted(listed)
        named = releases_named(joined)
        if len(named) >= 4:
            yield first, ('releases %s listed by hand'
                          % ', '.join(sorted(named)))


# An exit code written as a number in prose: "exit 127", "exits 0",
# "exit codes 1, 4 and 255", "exit code 0 or 4", "the exit code is the
# store's (2)". Prose names an exit code with the :exit-code: role, which
# renders its number from ExitCode, or in words.
_NUMBERS = r'(\d{1,3}(?:(?:\s*,\s*|\s+(?:and|or|to)\s+)\d{1,3})*)'
_EXIT_WORD = r'\bexit(?:s|ed|ing)?(?:\s+(?:code|status)(?:es|s)?)?'
_NUMBERED_EXIT = (
    re.compile(_EXIT_WORD + r'\s*(?:\(|:\s*)?' + _NUMBERS + r'\b', re.I),
    re.compile(r'\bexit\s+(?:code|status)(?:es|s)?\b[^.;()]{0,60}\('
               + _NUMBERS + r'\)', re.I),
)


def numbered_exit_codes(text):
    """The exit codes ``text`` writes as numbers after an exit-code word."""
    found = set()
    for pattern in _NUMBERED_EXIT:
        for match in pattern.finditer(' '.join(text.split())):
            found.update(int(number) for number in re.findall(
                r'\d+', match.group(1)) if int(number) in _EXIT_CODES)
    return found


def without_literal_blocks(lines):
    """``lines`` without the content of literal blocks.

    Those quote commands and their output, which the tests compare with
    the real output; what they hold is not prose.
    """
    kept, inside = [], None
    previous = ''
    for number, line in lines:
        indent = len(line) - len(line.lstrip())
        if inside is not None:
            if not line.strip() or indent > inside:
                continue
            inside = None
        if line.strip() and (line.rstrip().endswith('::') or re.match(
                r'\s*\.\. (code-block|code|parsed-literal)::', line)):
            inside = indent
            if line.strip() == '::' and previous.strip():
                inside = len(previous) - len(previous.lstrip())
        kept.append((number, line))
        previous = line
    return kept


def _numbered_in_prose(lines):
    for paragraph in _paragraphs(without_literal_blocks(lines)):
        joined = ' '.join(line for _, line in paragraph)
        codes = numbered_exit_codes(_plain(joined).replace('**', ''))
        if codes:
            yield paragraph[0][0], ('exit codes %s written as numbers'
                                    % sorted(codes))


def hand_written(text):
    """``[(line, problem)]``: generated facts written by hand in ``text``.

    Looks outside the generating directives for tables, definition lists
    and lines keyed by exit codes, releases or options, usage synopses,
    option directives, exit-code meanings, the order of severity,
    paragraphs that list several exit codes or releases, and exit codes
    written as numbers in prose (literal blocks aside).
    """
    lines = without_generated(text)
    found = set()
    for scan in (_in_tables, _in_definition_lists, _in_lines,
                 _in_paragraphs, _numbered_in_prose):
        found.update(scan(lines))
    return sorted(found)


def _docstrings(tree):
    """The docstring nodes of ``tree``'s module, classes and functions."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(
                    first.value, ast.Constant):
                yield first.value


def hand_written_in_code(source):
    """``[(line, problem)]``: exit codes written as numbers in strings.

    The strings of ``source`` (Python) that users read (help texts,
    messages; docstrings and comments aside) derive an exit code's number
    from ExitCode, as in ``'exit %d' % ExitCode.CONFLICT``.
    """
    tree = ast.parse(source)
    docstrings = {id(node) for node in _docstrings(tree)}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docstrings):
            codes = numbered_exit_codes(node.value)
            if codes:
                found.append((node.lineno, 'exit codes %s written as '
                              'numbers in a string' % sorted(codes)))
    return sorted(found)


def code_sources():
    """The package's modules (tests aside) and the Sphinx extensions.

    Paths relative to the top of the tree.
    """
    paths = glob.glob(os.path.join(_TOP, 'healreq', '**', '*.py'),
                      recursive=True)
    paths += glob.glob(os.path.join(_DOC, '_exts', '*.py'))
    tests = os.path.join(_TOP, 'healreq', 'tests', '')
    return sorted(os.path.relpath(path, _TOP) for path in paths
                  if not path.startswith(tests))


class WrittenOnceTest(testtools.TestCase):
    """No exit code, release or option is written out twice by hand."""

    def test_no_source_writes_a_generated_fact_by_hand(self):
        found = ['%s:%d: %s' % (path, number, problem)
                 for path in doc_sources()
                 for number, problem in hand_written(read(path))]
        self.assertEqual([], found)

    def test_no_string_in_the_code_writes_an_exit_code_number(self):
        found = ['%s:%d: %s' % (path, number, problem)
                 for path in code_sources()
                 for number, problem in hand_written_in_code(read(path))]
        self.assertEqual([], found)

    def test_the_scanned_code(self):
        sources = code_sources()
        for module in ('healreq/cmd/request_specs.py',
                       'healreq/conf/healreq.py', 'healreq/exception.py',
                       'doc/source/_exts/nova_heal_tables.py'):
            self.assertIn(module, sources)
        self.assertFalse([path for path in sources
                          if path.startswith('healreq/tests/')])

    def test_the_scanned_sources(self):
        sources = doc_sources()
        for page in ('README.rst', 'doc/source/admin/index.rst',
                     'doc/source/install/index.rst',
                     'doc/source/cli/nova-heal.rst',
                     'benchmarks/README.rst'):
            self.assertIn(page, sources)

    def test_readme_is_read_in_two_minutes(self):
        self.assertLessEqual(len(read('README.rst').splitlines()), 150)

    def test_readme_releases_table_is_generated(self):
        readme = read('README.rst')
        self.assertEqual(readme_releases.rewritten(readme), readme,
                         'run tools/readme_releases.py')
        rows = [line for line in readme_releases.table()
                if not line.startswith('=')][1:]
        self.assertEqual([r.series for r in releases.RELEASES],
                         [row.split()[0] for row in rows])

    def test_readme_states_the_range_of_releases_once(self):
        readme = '\n'.join(line for _, line in without_generated(
            read('README.rst')))
        found = re.findall(r'Nova (\w+) \((\d{4}\.\d)\) to (\d{4}\.\d)',
                           readme)
        self.assertEqual([(releases.OLDEST.codename.capitalize(),
                           releases.OLDEST.series, releases.LATEST.series)],
                         found)
        # Besides the range, the README names only the release whose
        # constraints the Quick start installs under.
        [quick_start] = [r.series for r in releases.RELEASES
                         if 'upper-constraints-%s.txt' % r.constraints
                         in readme]
        self.assertEqual(
            {releases.OLDEST.series, releases.LATEST.series, quick_start},
            releases_named(readme))

    def test_readme_states_the_supported_pythons(self):
        pythons = setup_cfg.supported_pythons()
        self.assertIn('Python %s to %s' % (pythons[0], pythons[-1]),
                      ' '.join(read('README.rst').split()))


class ScannerTest(testtools.TestCase):
    """The scanner finds the hand-written copies it is meant to find."""

    def assertFound(self, text, kind):
        found = hand_written(text)
        self.assertTrue([problem for _, problem in found if kind in problem],
                        '%r not found in %r: %s' % (kind, text, found))

    def test_exit_code_tables(self):
        self.assertFound('=====  ====\ncode   meaning\n=====  ====\n'
                         '0      drift\n4      none\n=====  ====\n',
                         'exit-code table row 0')
        self.assertFound('.. list-table::\n\n   * - code\n     - meaning\n'
                         '   * - 127\n     - invalid input\n',
                         'exit-code table row 127')
        self.assertFound('``3``\n    a write was refused\n',
                         'exit code 3 described by hand')
        self.assertFound('::\n\n  2    some instances need attention\n',
                         'exit-code table line')
        self.assertFound('``0`` healed; ``1`` more remain; ``2`` attention.',
                         'listed by hand')
        self.assertFound('Most severe first: 255, 127, 2, 3, 1, 0, 4.',
                         'order of severity')
        self.assertFound('Exit 4 means nothing to heal: every checked '
                         'instance is consistent.', 'exit-code meaning')

    def test_exit_codes_written_as_numbers(self):
        for text in (
                'A cloud in mid-upgrade is not written to (exit 127).',
                'SIGHUP (a dropped ssh session, exit 129) ends a run.',
                'A dry run now exits 4, or reports new drift.',
                'A dry run now\n``exits``\n``4``.',
                '* SIGINT (Ctrl-C): exit code 130;\n',
                '**A dry run that finds drift exits 0, not 4.**',
                'The exit codes 1, 4, 127 and 255 mean the same.',
                'Runs that end with exit\n  code 0 or 4 count.',
                'Exit codes 0 (drift found) and 4 are successful jobs.',
                "The exit code is the store's (2).",
                'The exit status: 2 when a cell fails.',
                '6. **Verify**: a dry run now exits 4.\n'):
            self.assertFound(text, 'written as numbers')

    def test_exit_codes_in_literal_blocks_are_output(self):
        self.assertEqual([], hand_written(
            'Its output looks like this::\n\n'
            '    Exit code 0 (drift found).\n\n'
            '.. code-block:: console\n\n'
            '   $ nova-heal request-specs; echo exit $?\n'
            '   exit 4\n\n'
            'Then it exits :exit-code:`NOTHING_TO_HEAL`.\n'))
        self.assertFound('Its output looks like this::\n\n'
                         '    Exit code 0 (drift found).\n\n'
                         'So it exits 0.\n', 'written as numbers')

    def test_exit_codes_written_as_numbers_in_code(self):
        source = (
            '"""Exits 127 on a bad option (a docstring)."""\n'
            'from healreq import exception\n'
            '# exit 1 (a comment)\n'
            'HELP = ("Refused (exit %d) if it replaces the store."\n'
            '        % exception.ExitCode.INVALID_INPUT)\n'
            'def add(parser):\n'
            '    """Exit 2 (a docstring)."""\n'
            '    parser.add_argument("--max-count",\n'
            '                        help="Stop at N; exit 1 if more "\n'
            '                             "remain.")\n'
            'OPT = cfg.IntOpt("lock_wait_timeout", help="A conflict "\n'
            '                 "(exit 3).")\n')
        self.assertEqual(
            [(9, 'exit codes [1] written as numbers in a string'),
             (11, 'exit codes [3] written as numbers in a string')],
            hand_written_in_code(source))

    def test_release_tables(self):
        self.assertFound('=====  ====\nrelease  Nova\n=====  ====\n'
                         'zed (2022.2)  26.3.0\n=====  ====\n',
                         'release table row')
        self.assertFound('.. list-table::\n\n   * - 2024.1 Caracal\n'
                         '     - 29\n', 'release table row')
        self.assertFound('Supported: Zed, 2023.1, bobcat and 2024.1.',
                         'listed by hand')
        self.assertFound('Files: upper-constraints-zed.txt, '
                         'upper-constraints-2025.1.txt, '
                         'upper-constraints-2026.1.txt and '
                         'upper-constraints-master.txt.', 'listed by hand')

    def test_option_lists(self):
        self.assertFound('``--dry-run``\n    Write nothing.\n',
                         'option ``--dry-run`` described by hand')
        self.assertFound('``--sleep SECONDS``, ``--max-rate N``\n'
                         '    Pause.\n', 'described by hand')
        self.assertFound('.. option:: --dry-run\n\n   Write nothing.\n',
                         'hand-written option directive')
        self.assertFound('::\n\n    nova-heal revert RUN_ID [--instance '
                         'UUID] [--dry-run]\n', 'usage synopsis')
        self.assertFound('``batch_size`` (default 500)\n    Instances.\n',
                         'configuration option')
        self.assertFound('.. list-table::\n\n   * - ``--workers N``\n'
                         '     - cells in parallel\n', 'option table row')

    def test_generated_and_ordinary_text_passes(self):
        self.assertEqual([], hand_written(
            '.. nova-heal-releases:: supported\n\n   2022.2\n'
            '      unit tests on 3.10\n   2024.1\n      nova 29.4.0\n\n'
            '.. nova-heal-exit-codes:: request-specs\n\n'
            'A dry run that finds drift exits :exit-code:`HEALED`, one\n'
            'that finds none :exit-code:`NOTHING_TO_HEAL`; see the exit\n'
            'codes. Zed (2022.2) to 2026.2 are supported. It exits as a\n'
            'heal does; for heal_allocations, 2 means no compute node.\n\n'
            '1. **Dry run.** Run it with ``--dry-run``.\n'
            '2. **Heal.**\n\n'
            '::\n\n    17 3 * * *  nova nova-heal request-specs --quiet\n'
            '    nova-heal revert RUN_ID [--instance UUID]\n'
            '    Exit code 0 (drift found).\n'))


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
                '.. nova-heal-reason-codes::',
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
        self.assertIn('exit codes:', epilogs.pop('allocations'))
        self.assertIn('exit codes:', epilogs.pop('hosts'))
        self.assertEqual({'revert', 'apply'}, set(epilogs))


class RenderedTablesTest(testtools.TestCase):
    """The generated tables hold every fact they are generated from.

    The Sphinx directives parse these lines in place; here they are
    rendered without a documentation build.
    """

    @staticmethod
    def first_cells(lines):
        return [line[len('   * - '):] for line in lines
                if line.startswith('   * - ')][1:]

    def test_every_exit_code(self):
        shown = set()
        for which, meanings in doc_tables.EXIT_CODE_TABLES.items():
            for actions in (False, True):
                lines = doc_tables.exit_codes_lines(which, actions)
                rows = self.first_cells(lines)
                self.assertEqual(['%d' % code for code in meanings], rows)
                shown.update(int(row) for row in rows)
                self.assertIn('the most severe wins: %s.' % ', '.join(
                    '%d' % code for code in exception.severity_order(
                        meanings)), '\n'.join(lines))
                for meaning in meanings.values():
                    self.assertIn(doc_tables.markup(meaning.text),
                                  '\n'.join(lines))
        self.assertEqual({int(code) for code in exception.ExitCode}, shown)

    def test_the_exit_code_role(self):
        for code in exception.ExitCode:
            self.assertEqual(int(code), doc_tables.exit_code(code.name))
        self.assertRaises(KeyError, doc_tables.exit_code, 'HEALTHY')

    def test_every_reason_code(self):
        lines = doc_tables.reason_codes_lines()
        rows = [line[len('   * - '):] for line in lines
                if line.startswith('   * - ``')]
        codes = [code for status in findings.Status
                 for code in findings.REASONS.get(status, {})]
        codes += list(findings.NOTES)
        self.assertEqual(sorted('``%s``' % code for code in codes),
                         sorted(rows))
        for status in findings.REASONS:
            for text in findings.REASONS[status].values():
                self.assertIn('     - %s' % text, lines)
        for title, code in (('Errors', exception.ExitCode.NEEDS_ATTENTION),
                            ('Conflicts', exception.ExitCode.CONFLICT)):
            self.assertIn('.. rubric:: %s (exit code %d, nothing written)'
                          % (title, code), lines)

    def test_every_release(self):
        tested = {releases.LATEST.series: ['  the compat tests']}
        supported = doc_tables.supported_releases_lines(tested)
        rules = doc_tables.release_rules_lines()
        for lines in (supported, rules):
            self.assertEqual(
                [release.series for release in releases.RELEASES],
                [cell.split()[0] for cell in self.first_cells(lines)])
        text = '\n'.join(supported)
        for release in releases.RELEASES:
            self.assertIn('``upper-constraints-%s.txt``'
                          % release.constraints, text)
            self.assertIn('%d (%s)' % (release.nova, release.nova_point),
                          text)
        self.assertIn('the compat tests', text)

    def test_every_metric(self):
        lines = doc_tables.metrics_lines()
        rows = self.first_cells(lines)
        names = [name for name, _, _ in doc_tables.describe_metrics(
            doc_tables.sample_metrics())]
        self.assertEqual(['``%s``' % name for name in names], rows)
        for counter in metrics._COUNTERS:
            self.assertIn('``nova_heal_request_specs_%s``' % counter[0],
                          rows)

    def test_every_option(self):
        parser = cli_reference.build_parser()
        parts = {part: '\n'.join(doc_tables.cli_lines(part))
                 for part in doc_tables.CLI_PARTS}
        for path, command in cli_reference.walk(parser):
            text = parts['commands'] if path else parts['global-options']
            for action in cli_reference.documented_actions(command):
                for option in action.option_strings:
                    self.assertIn(option, text)
            if path and not list(cli_reference.subcommands(command)):
                self.assertIn('nova-heal %s' % ' '.join(path), text)
                self.assertIn(' '.join(path), parts['synopsis'])
