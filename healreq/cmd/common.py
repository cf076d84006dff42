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


"""Exit codes and the rule that turns a run into one."""

import enum
import re

from healreq.heal.findings import Status


class ExitCode(enum.IntEnum):
    """Exit codes of ``nova-heal request-specs`` (a public contract)."""
    HEALED = 0
    MAX_COUNT_REACHED = 1
    NEEDS_ATTENTION = 2
    CONFLICT = 3
    NOTHING_TO_HEAL = 4
    INVALID_INPUT = 127
    UNEXPECTED_ERROR = 255


EXIT_CODES_HELP = """\
exit codes:
  0    drift found and healed (with --dry-run: found, would be healed)
  1    --max-count reached and more instances remain to be processed
  2    some instances or cells could not be evaluated and need manual
       attention (unparsable or missing rows, an unreachable cell)
  3    a write was refused because the row changed concurrently
  4    nothing to heal: every checked instance is consistent
  127  invalid input (bad UUID, unknown cell or instance, conflicting
       options)
  255  unexpected error
When several apply, the most severe wins: 255, 127, 2, 3, 1, 0, 4."""


def exit_code_for(report):
    """Map a RunReport to the exit code of the most severe outcome."""
    statuses = {finding.status for finding in report.findings}
    if Status.ERROR in statuses or any(c.error for c in report.cells):
        return ExitCode.NEEDS_ATTENTION
    if Status.CONFLICT in statuses:
        return ExitCode.CONFLICT
    if report.more_remain:
        return ExitCode.MAX_COUNT_REACHED
    if statuses & {Status.HEALED, Status.DRIFTED}:
        return ExitCode.HEALED
    return ExitCode.NOTHING_TO_HEAL


_UUID_RE = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                      r'[0-9a-f]{12}$')


def canonical_uuid(value, what):
    """Return ``value`` as a lower-case canonical UUID or raise ValueError.

    Nova stores UUIDs in the dashed, lower-case form; other spellings would
    silently match nothing.
    """
    lowered = value.strip().lower()
    if not _UUID_RE.match(lowered):
        raise ValueError('%s %r is not a UUID (expected the form '
                         'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)'
                         % (what, value))
    return lowered
