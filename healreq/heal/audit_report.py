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

"""The report of a read-only audit (``allocations``, ``hosts``)."""

import dataclasses
import typing


@dataclasses.dataclass
class AuditReport:
    """Results in walk order, each with a ``status`` and ``problems``.

    ``PROBLEMS`` are the audit's problem classes (reason codes), each
    counted even when no result has it; ``cell_errors`` the cells that
    could not be read.
    """
    PROBLEMS: typing.ClassVar[tuple] = ()
    results: list = dataclasses.field(default_factory=list)
    cell_errors: list = dataclasses.field(default_factory=list)

    def add(self, result):
        """Keep ``result``, unless it is None (nothing to report)."""
        if result is not None:
            self.results.append(result)

    def count(self, status):
        """How many results have ``status``."""
        return sum(1 for r in self.results if r.status == status)

    def problem_counts(self):
        """``{reason code: results with that problem}``, every code."""
        counts = dict.fromkeys(self.PROBLEMS, 0)
        for result in self.results:
            for code in result.problems:
                counts[code] += 1
        return counts


def with_optional(document, result):
    """``document`` plus what ``result`` has of its optional keys.

    They are ``reason``, ``message`` and ``not_checked``.
    """
    if result.reason:
        document['reason'] = result.reason
    if result.message:
        document['message'] = result.message
    if result.not_checked:
        document['not_checked'] = list(result.not_checked)
    return document
