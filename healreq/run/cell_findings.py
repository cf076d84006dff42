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

"""Where the findings of a cell go: its report, the run's, the audit."""

from healreq.heal import findings

# Findings are written to the audit store in chunks of this many: one
# commit (and its fsyncs) per chunk rather than per batch.
FINDINGS_CHUNK = 1000


class FindingsLog(object):
    """A cell's findings on their way to the audit store, in chunks.

    A store that refuses findings stops their recording, not the run
    (see findings.record): the error goes to ``sink`` (a RunReport).
    """

    def __init__(self, audit, run_id, sink):
        self._audit = audit
        self._run_id = run_id
        self._sink = sink
        self._pending = []

    def add(self, listed):
        """Record ``listed`` findings, once a chunk of them is pending."""
        if self._audit is None or self._sink.audit_error is not None:
            return
        self._pending.extend(listed)
        if len(self._pending) >= FINDINGS_CHUNK:
            self.flush()

    def flush(self):
        """Record the findings still pending."""
        pending, self._pending = self._pending, []
        if not pending or self._sink.audit_error is not None:
            return
        # A refusal becomes the sink's audit_error: the run prints it once.
        findings.record(self._audit, self._run_id, pending, self._sink)


class CellFindings(object):
    """The findings of one cell, batch by batch, and where they go.

    Each is counted in ``report`` (the CellReport) as soon as it is
    final; at the end of its batch, the findings to list go to ``sink``
    (a RunReport) and to ``log`` (a FindingsLog).
    """

    def __init__(self, report, sink, log):
        self.report = report
        self.sink = sink
        self._log = log
        self._listed = []

    def elsewhere(self, report):
        """Findings of another cell's ``report``, sent where these go."""
        return CellFindings(report, self.sink, self._log)

    def add(self, finding):
        """Count ``finding`` and keep it where the report shows it."""
        self.report.count(finding)
        findings.keep(finding, self._listed, self.sink.notices,
                      self.sink.outdated_flavors)

    def plan(self, finding, spec_row, new_spec):
        """Keep a would-be heal for --plan."""
        self.sink.planned.append((finding, spec_row, new_spec))

    def end_batch(self):
        """List the batch's findings in the run's report and the audit."""
        listed, self._listed = self._listed, []
        self.sink.findings.extend(listed)
        self._log.add(listed)
