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


"""Nova's string notations in flavor extra specs and image properties.

One reader per notation, shared by the flavor and the image side: CPU
lists (``0-3,^2,6``, Nova's ``hardware.parse_cpu_spec``), per-node keys
(``hw:numa_cpus.0``, ``hw_numa_mem.1``), byte sizes (``2MB``,
``1GiB``), booleans (``yes``, ``0``) and integers as text. Errors are
NotationError; callers turn them into the error their own caller
expects.
"""

import math
import re

from healreq.objects import primitive

# A CPU list whose ranges add up to more ids than this is refused instead
# of expanded: no flavor has a million vCPUs, and expanding such ranges
# (Nova has no limit) could exhaust memory. Ranges of excluded CPUs and
# overlapping ranges count too.
MAX_CPU_IDS = 1 << 20

# Per-node keys are read for nodes 0.. up to this many (Nova's
# ImageMetaProps.NUMA_NODES_MAX, which bounds the flavor's keys too).
NUMA_NODES_MAX = 128

# What Nova reads as true (oslo.utils' bool_from_string), after stripping
# surrounding whitespace and lowering the case; anything else is false.
TRUE_WORDS = frozenset(['1', 't', 'true', 'on', 'y', 'yes'])

_UNIT_POWERS = {'K': 1, 'M': 2, 'G': 3, 'T': 4, 'P': 5, 'E': 6, 'Z': 7,
                'Y': 8, 'R': 9, 'Q': 10}
ALL_PREFIXES = ''.join(_UNIT_POWERS)
# A byte size as oslo's string_to_bytes reads it in IEC mode ("2MB",
# "1GiB", "512Kb"); "$" also accepts one trailing newline, as there.
# (Written without overlapping repeats, so that long input cannot make
# the match backtrack quadratically.)
_BYTE_SIZE_RE = re.compile(
    r'(^[-+]?(?:\d+(?:\.\d+)?|\.\d+))([%s]i?)?(b|bit|B)$' % ALL_PREFIXES)


class NotationError(ValueError):
    """A string that does not follow the notation it is read in."""


def _cpu_list_items(spec):
    """``(excluded, first, last, is_range)`` for each element of a list.

    Every element is checked, and the ranges counted against
    MAX_CPU_IDS, before anything is expanded.
    """
    items = []
    expanded = 0
    for item in spec.split(','):
        item = item.strip()
        if not item:
            continue
        low, dash, high = item.partition('-')
        if dash:
            excluded = low.startswith('^')
            try:
                first = int((low[1:] if excluded else low).strip())
                last = int(high.strip())
            except ValueError:
                raise NotationError('invalid CPU range %s'
                                    % primitive.short(item))
            if first > last:
                raise NotationError('invalid CPU range %s'
                                    % primitive.short(item))
            expanded += last - first + 1
            if expanded > MAX_CPU_IDS:
                raise NotationError('CPU ranges name more than %d CPUs'
                                    % MAX_CPU_IDS)
            items.append((excluded, first, last, True))
        else:
            excluded = item.startswith('^')
            try:
                cpu = int(item[1:].strip() if excluded else item)
            except ValueError:
                raise NotationError('invalid CPU %s%s' % (
                    'exclusion ' if excluded else '', primitive.short(item)))
            items.append((excluded, cpu, cpu, False))
    return items


def parse_cpu_list(spec):
    """The set of CPU ids of a CPU list such as ``0-3,^2,6``.

    Raises NotationError for an element that is not a CPU, a range or an
    exclusion of either, and for ranges naming more than MAX_CPU_IDS.
    """
    wanted = set()
    unwanted = set()
    # Built by in-place union and difference like Nova's parser: when a
    # manual node layout has two faults, the set's iteration order picks
    # the one reported.
    for excluded, first, last, is_range in _cpu_list_items(spec):
        target = unwanted if excluded else wanted
        if is_range:
            target |= set(range(first, last + 1))
        else:
            target.add(first)
    wanted -= unwanted
    return wanted


def format_cpu_list(cpus):
    """Compact form of a CPU set, e.g. ``0-3,6``."""
    ranges = []
    for cpu in sorted(cpus):
        if ranges and ranges[-1][1] == cpu - 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b)
                    for a, b in ranges)


def per_node(values, key):
    """``(name, value)`` of ``key.0``, ``key.1``... up to the first gap.

    At most NUMA_NODES_MAX nodes are read, as Nova reads them.
    """
    found = []
    for node in range(NUMA_NODES_MAX):
        name = '%s.%d' % (key, node)
        if name not in values:
            break
        found.append((name, values[name]))
    return found


def byte_size(text, prefixes=ALL_PREFIXES):
    """oslo's ``string_to_bytes(text, 'IEC', return_int=True)``.

    ``prefixes`` are the unit prefixes the oslo.utils in question knows:
    up to T before oslo.utils 6.2 (Zed, 2023.1), up to Q since. Raises
    ValueError for text that is not a byte size and OverflowError for an
    infinite one.
    """
    match = _BYTE_SIZE_RE.match(text)
    if not match or (match.group(2) and match.group(2)[0] not in prefixes):
        raise ValueError(text)
    number, prefix, unit = match.groups()
    size = float(number)
    if unit in ('b', 'bit'):
        size /= 8
    if prefix:
        size = size * pow(1024, _UNIT_POWERS[prefix[0]])
    # math.ceil of an infinite size raises OverflowError, as in Nova.
    return int(math.ceil(size))


def boolean(subject):
    """Whether Nova reads ``subject`` as true.

    A bool is itself; anything else is read as its text: true for one of
    TRUE_WORDS, whitespace and case aside, false for anything else
    (Nova's non-strict ``bool_from_string``).
    """
    if isinstance(subject, bool):
        return subject
    if not isinstance(subject, str):
        subject = str(subject)
    return subject.strip().lower() in TRUE_WORDS


def is_int_like(value):
    """Whether ``value`` is an integer written as Nova expects one.

    Its text is exactly that of the integer it converts to: ``'3'`` and
    ``3`` are, ``'03'``, ``' 3'``, ``'3.0'`` and ``True`` are not.
    """
    try:
        return str(int(value)) == str(value)
    except (TypeError, ValueError):
        return False
