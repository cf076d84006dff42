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


"""Guest NUMA request topologies: the model and its vocabulary.

A request topology is what a RequestSpec holds: cells in guest node
order, with the CPUs, memory and policies Nova asked for, and nothing
fitted to a host. ``numa_constraints`` derives one from a flavor and an
image as Nova does; ``numa_primitive`` reads and writes the stored
``InstanceNUMATopology`` primitives.
"""

import dataclasses

from healreq.objects import notation
from healreq.objects import primitive

PrimitiveError = primitive.PrimitiveError

# Symbolic page sizes (negative so they cannot clash with KiB sizes).
MEMPAGES_SMALL = -1
MEMPAGES_LARGE = -2
MEMPAGES_ANY = -3
SYMBOLIC_PAGESIZES = {'small': MEMPAGES_SMALL, 'large': MEMPAGES_LARGE,
                      'any': MEMPAGES_ANY}

DEDICATED = 'dedicated'
SHARED = 'shared'
MIXED = 'mixed'
CPU_POLICIES = (DEDICATED, SHARED, MIXED)
THREAD_POLICIES = ('prefer', 'isolate', 'require')
EMULATOR_THREADS_POLICIES = ('share', 'isolate')


class UnloadableTopology(PrimitiveError):
    """A well-formed stored topology that Nova 34 nevertheless fails to load.

    Regenerating the topology (at InstanceNUMACell 1.4 or later) repairs it.
    """


class AmbiguousTopology(UnloadableTopology):
    """A stored legacy topology whose load depends on the point release.

    Regenerating it (at InstanceNUMACell 1.6, or a consistent 1.4 or 1.5
    cell) makes every point release load the same topology.
    """


class ConstraintError(ValueError):
    """Nova would refuse this flavor/image combination."""

    def __init__(self, nova_exception, message):
        super().__init__(message)
        self.nova_exception = nova_exception


@dataclasses.dataclass(frozen=True)
class Cell:
    """One guest NUMA node of a request topology.

    ``pcpuset`` is None only for a stored cell that still lacks the field
    after Nova's load and migration (Nova fails when it later reads it);
    such a cell never equals a derived one.
    """
    id: int
    cpuset: frozenset
    pcpuset: frozenset
    memory: int
    pagesize: int | None = None
    cpu_policy: str | None = None
    cpu_thread_policy: str | None = None


@dataclasses.dataclass(frozen=True)
class Topology:
    """A guest NUMA request topology (cells in guest node order)."""
    cells: tuple
    emulator_threads_policy: str | None = None


def _pagesize_label(pagesize):
    for name, value in SYMBOLIC_PAGESIZES.items():
        if pagesize == value:
            return name
    return '%dK' % pagesize


def describe(topology):
    """Short human form, e.g. ``2 nodes, dedicated, pagesize large, ...``.

    Pinned vCPUs are shown in brackets: ``cpus 0-1|[2-3]``.
    """
    if topology is None:
        return 'none'
    cells = topology.cells
    parts = ['%d node%s' % (len(cells), '' if len(cells) == 1 else 's')]
    for attribute, label in (('cpu_policy', ''),
                             ('cpu_thread_policy', 'threads '),
                             ('pagesize', 'pagesize ')):
        values = {getattr(cell, attribute) for cell in cells}
        values.discard(None)
        for value in sorted(values, key=str):
            if attribute == 'pagesize':
                value = _pagesize_label(value)
            parts.append(label + value)
    if topology.emulator_threads_policy:
        parts.append('emulator threads %s' % topology.emulator_threads_policy)
    layout = []
    for cell in cells:
        cpus = [notation.format_cpu_list(cell.cpuset)] if cell.cpuset else []
        if cell.pcpuset is None:
            cpus.append('?')
        elif cell.pcpuset:
            cpus.append('[%s]' % notation.format_cpu_list(cell.pcpuset))
        layout.append(','.join(cpus) or '-')
    if cells:
        parts.append('cpus %s' % '|'.join(layout))
        parts.append('MiB %s' % '|'.join(str(cell.memory) for cell in cells))
    return ', '.join(parts)
