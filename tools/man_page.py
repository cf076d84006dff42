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

"""Keep the committed nova-heal(1) man page in step with the documentation.

``doc/man/nova-heal.1`` is the man page that ``tox -e docs`` builds from
``doc/source/cli/nova-heal.rst`` (into ``doc/build/man/nova-heal.1``),
committed so that building the wheel, which installs it (setup.cfg's
``data_files``), needs neither Sphinx nor the documentation build.

After ``tox -e docs``, ``python3 tools/man_page.py update`` copies the
built page there, and ``python3 tools/man_page.py check`` prints the
difference and exits 1 if the committed page is not the built one (CI
runs it). Both ignore the date and the version that the build writes into
the page's title line (``.TH``): the committed page has no version (a
development build's changes with every commit) and its date is the day
its text last changed, so ``update`` leaves it alone when only those
differ.
"""

import argparse
import difflib
import os
import re
import sys

_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILT = os.path.join('doc', 'build', 'man', 'nova-heal.1')
PAGE = os.path.join('doc', 'man', 'nova-heal.1')
NOTE = ('.\\" Built by "tox -e docs" from doc/source/cli/nova-heal.rst and '
        'copied here by "python3 tools/man_page.py update"; do not edit.')
REGENERATE = ("run 'tox -e docs', then 'python3 tools/man_page.py update', "
              "and commit %s" % PAGE)

# .TH "NAME" "SECTION" "DATE" "VERSION" "MANUAL", as Sphinx writes it.
_TITLE = re.compile(r'^\.TH "([^"]*)" "([^"]*)" "([^"]*)" "([^"]*)" '
                    r'"([^"]*)"$', re.M)


def _with_title(text, date=None, version=None):
    match = _TITLE.search(text)
    fields = list(match.groups())
    if date is not None:
        fields[2] = date
    if version is not None:
        fields[3] = version
    line = '.TH ' + ' '.join('"%s"' % field for field in fields)
    return text[:match.start()] + line + text[match.end():]


def committed_form(built):
    """The page to commit for the page ``tox -e docs`` built."""
    first, _, rest = _with_title(built, version='').partition('\n')
    return '%s\n%s\n%s' % (first, NOTE, rest)


def comparable(page):
    """``page`` without its date, which the comparisons ignore."""
    return _with_title(page, date='')


def _read(path):
    with open(path, encoding='utf-8') as handle:
        text = handle.read()
    if _TITLE.search(text) is None:
        raise ValueError('%s has no .TH "NAME" "SECTION" "DATE" "VERSION" '
                         '"MANUAL" title line' % path)
    return text


def update(built_path, page_path):
    """Write ``page_path`` from ``built_path``; True if it changed."""
    page = committed_form(_read(built_path))
    if os.path.exists(page_path) and \
            comparable(_read(page_path)) == comparable(page):
        return False
    os.makedirs(os.path.dirname(page_path) or '.', exist_ok=True)
    with open(page_path, 'w', encoding='utf-8') as handle:
        handle.write(page)
    return True


def check(built_path, page_path):
    """The lines of a diff from ``page_path`` to the page to commit."""
    wanted = comparable(committed_form(_read(built_path)))
    if not os.path.exists(page_path):
        return ['%s does not exist' % page_path]
    return list(difflib.unified_diff(
        comparable(_read(page_path)).splitlines(), wanted.splitlines(),
        page_path, 'the page tox -e docs built', lineterm=''))


def main(argv):
    parser = argparse.ArgumentParser(
        prog='man_page.py',
        description='Update or check %s against %s.' % (PAGE, BUILT))
    parser.add_argument('action', choices=('update', 'check'))
    parser.add_argument('--built', default=BUILT,
                        help='the page tox -e docs built (default: %s)'
                        % BUILT)
    parser.add_argument('--page', default=PAGE,
                        help='the committed page (default: %s)' % PAGE)
    args = parser.parse_args(argv)
    # The defaults are in this checkout, wherever it is run from.
    built = os.path.join(_TOP, args.built)
    page = os.path.join(_TOP, args.page)
    if not os.path.exists(built):
        print('man_page.py: %s does not exist: run tox -e docs first'
              % args.built, file=sys.stderr)
        return 1
    try:
        if args.action == 'update':
            changed = update(built, page)
            print('%s %s' % (args.page,
                             'updated' if changed else 'is up to date'))
            return 0
        diff = check(built, page)
    except ValueError as exc:
        print('man_page.py: %s' % exc, file=sys.stderr)
        return 1
    if diff:
        print('\n'.join(diff))
        print('man_page.py: %s is out of date; %s' % (args.page, REGENERATE),
              file=sys.stderr)
        return 1
    print('%s is up to date' % args.page)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
