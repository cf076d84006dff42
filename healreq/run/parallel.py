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


"""--workers: cells processed on worker threads, reported in cell order.

Each cell has its own connection pool, so the waits on the databases
overlap. Each cell reports into a RunReport of its own; those are merged
into the run's report in the order of the cells, whatever order the
workers finish in.
"""

from concurrent import futures

from healreq.heal.findings import RunReport


def run_cells(cells, workers, process, report):
    """Call ``process(cell, sink)`` for each of ``cells`` on ``workers``.

    ``sink`` is a RunReport of the cell's own; the sinks are merged into
    ``report`` in the order of ``cells`` once every cell is done. If a
    cell raises, the cells not started yet are left out, the exception
    is raised once the running ones are done, and nothing is merged.
    """
    def one(cell):
        sink = RunReport(dry_run=report.dry_run)
        process(cell, sink)
        return sink

    with futures.ThreadPoolExecutor(max_workers=workers) as pool:
        sinks = list(pool.map(one, cells))
    for sink in sinks:
        merge(report, sink)


def merge(report, part):
    """Add what RunReport ``part`` found to ``report``."""
    report.cells.extend(part.cells)
    report.findings.extend(part.findings)
    report.notices.extend(part.notices)
    report.outdated_flavors.extend(part.outdated_flavors)
    report.planned.extend(part.planned)
    report.more_remain |= part.more_remain
    report.audit_error = report.audit_error or part.audit_error
