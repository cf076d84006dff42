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

"""Print the commands of the README's Quick start, exactly as written.

``tools/quickstart.py README.rst`` prints the first literal block of the
"Quick start" section, one command per line, so that CI runs what a
newcomer reads (``.ci/run`` runs them from a fresh clone) and never a copy
of it. Exit status 1 and one line on stderr if the section or its block
is missing.
"""

import sys
import textwrap

TITLE = 'Quick start'
_UNDERLINES = set('=-~^"\'`#*+:.')


def _is_underline(line, title):
    text = line.strip()
    return (bool(text) and set(text) <= _UNDERLINES and len(set(text)) == 1
            and len(text) >= len(title.strip()))


def commands(text, title=TITLE):
    """The lines of the first literal block of section ``title``."""
    lines = text.splitlines()
    start = next((i + 2 for i, line in enumerate(lines[:-1])
                  if line.strip() == title
                  and _is_underline(lines[i + 1], line)), None)
    if start is None:
        raise ValueError('no "%s" section' % title)
    for index in range(start, len(lines)):
        if index + 1 < len(lines) and _is_underline(lines[index + 1],
                                                    lines[index]):
            break  # the next section begins
        if lines[index].rstrip().endswith('::'):
            block = []
            for line in lines[index + 1:]:
                if line.strip() and not line[0].isspace():
                    break
                block.append(line)
            found = [line.rstrip() for line in
                     textwrap.dedent('\n'.join(block)).splitlines()
                     if line.strip()]
            if found:
                return found
    raise ValueError('the "%s" section has no literal block' % title)


def main(argv):
    if len(argv) != 1:
        print('usage: quickstart.py README.rst', file=sys.stderr)
        return 2
    with open(argv[0]) as handle:
        text = handle.read()
    try:
        print('\n'.join(commands(text)))
    except ValueError as exc:
        print('quickstart.py: %s: %s' % (argv[0], exc), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
