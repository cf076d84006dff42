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

"""Write the README's table of supported releases from healreq/releases.py.

GitHub renders README.rst as it is, so its table cannot come from a Sphinx
directive: ``tools/readme_releases.py`` rewrites the lines between the
README's BEGIN and END comments, and ``--check`` exits 1 if they are not
what it would write (a unit test runs the same comparison).
"""

import os
import sys

_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __name__ == '__main__':
    # Run from a checkout: import the healreq beside this script.
    sys.path.insert(0, _TOP)

from healreq import releases  # noqa: E402

README = os.path.join(_TOP, 'README.rst')
BEGIN = ('.. BEGIN releases table: generated from healreq/releases.py by '
         'tools/readme_releases.py')
END = '.. END releases table'


def table():
    """The releases table, as lines of a reStructuredText simple table."""
    rows = [('release', 'Nova', 'Python', 'constraints file')]
    for release in releases.RELEASES:
        oldest, newest = release.pythons
        rows.append(('%s %s' % (release.series,
                                release.codename.capitalize()),
                     release.nova_point,
                     oldest if oldest == newest else '%s-%s' % (oldest,
                                                                newest),
                     'upper-constraints-%s.txt' % release.constraints))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    border = '  '.join('=' * width for width in widths)
    lines = [border]
    for number, row in enumerate(rows):
        lines.append('  '.join(cell.ljust(width) for cell, width
                               in zip(row, widths)).rstrip())
        if number == 0:
            lines.append(border)
    return lines + [border]


def rewritten(text):
    """``text`` with the lines between BEGIN and END made anew."""
    lines = text.splitlines()
    start, end = lines.index(BEGIN), lines.index(END)
    return '\n'.join(lines[:start + 1] + [''] + table() + ['']
                     + lines[end:]) + '\n'


def main(argv):
    with open(README) as handle:
        text = handle.read()
    wanted = rewritten(text)
    if argv[1:] == ['--check']:
        if wanted != text:
            print('README.rst: the releases table is out of date; run '
                  'tools/readme_releases.py', file=sys.stderr)
            return 1
        return 0
    with open(README, 'w') as handle:
        handle.write(wanted)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
