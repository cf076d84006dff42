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

"""Cells on worker threads, and where a report keeps a finding."""

import threading

import testtools

from healreq import exception
from healreq.heal import findings
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import Note
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq.run import parallel


def finding(status, notes=()):
    return Finding('uuid', 'cell', status, notes=list(notes))


class RunCellsTest(testtools.TestCase):

    def test_merged_in_cell_order_whatever_order_they_finish(self):
        # The first cell finishes last: it waits for the second to end.
        second_done = threading.Event()

        def process(cell, sink):
            if cell == 'first':
                self.assertTrue(second_done.wait(30))
            sink.cells.append(CellReport(uuid=cell, name=cell))
            sink.findings.append(finding(Status.HEALED))
            sink.planned.append(cell)
            sink.more_remain = cell == 'second'
            if cell == 'second':
                sink.audit_error = 'store failed'
                second_done.set()

        report = RunReport(dry_run=True)
        parallel.run_cells(['first', 'second'], 2, process, report)
        self.assertEqual(['first', 'second'],
                         [cell.uuid for cell in report.cells])
        self.assertEqual(['first', 'second'], report.planned)
        self.assertEqual(2, len(report.findings))
        self.assertTrue(report.more_remain)
        self.assertEqual('store failed', report.audit_error)

    def test_sinks_are_reports_of_their_own(self):
        sinks = []

        def process(cell, sink):
            sinks.append(sink)

        report = RunReport(dry_run=True)
        parallel.run_cells(['a', 'b', 'c'], 3, process, report)
        self.assertEqual(3, len({id(sink) for sink in sinks}))
        self.assertFalse(any(sink is report for sink in sinks))
        self.assertTrue(all(sink.dry_run for sink in sinks))

    def test_an_error_of_a_cell_is_raised_once_the_others_end(self):
        # The second cell is running when the first fails.
        running, failed = threading.Event(), threading.Event()
        done = []

        def process(cell, sink):
            sink.cells.append(CellReport(uuid=cell, name=cell))
            if cell == 'bad':
                self.assertTrue(running.wait(30))
                failed.set()
                raise exception.ApiDatabaseError('gone')
            running.set()
            self.assertTrue(failed.wait(30))
            done.append(cell)

        report = RunReport(dry_run=False)
        self.assertRaises(exception.ApiDatabaseError, parallel.run_cells,
                          ['bad', 'running'], 2, process, report)
        self.assertEqual(['running'], done)
        self.assertEqual([], report.cells)

    def test_first_audit_error_is_kept(self):
        report = RunReport(dry_run=False, audit_error='first')
        parallel.merge(report, RunReport(dry_run=False,
                                         audit_error='second'))
        self.assertEqual('first', report.audit_error)


class KeepTest(testtools.TestCase):

    def test_where_a_finding_goes(self):
        noted = finding(Status.CONSISTENT, [Note('code', 'detail')])
        cases = [(finding(Status.CONSISTENT), [], []),
                 (noted, [], [noted])]
        for status in set(Status) - {Status.CONSISTENT}:
            listed = finding(status)
            cases.append((listed, [listed], []))
        for kept, expected_findings, expected_notices in cases:
            listed, notices = [], []
            findings.keep(kept, listed, notices)
            self.assertEqual((expected_findings, expected_notices),
                             (listed, notices), kept.status)


class _Store(object):

    def __init__(self, error=None):
        self.error = error
        self.recorded = []

    def record_findings(self, run_id, recorded):
        if self.error is not None:
            raise self.error
        self.recorded.append((run_id, list(recorded)))


class RecordTest(testtools.TestCase):

    def test_recorded(self):
        store, report = _Store(), RunReport(dry_run=False)
        listed = [finding(Status.HEALED)]
        self.assertIsNone(findings.record(store, 'run', listed, report))
        self.assertEqual([('run', listed)], store.recorded)
        self.assertIsNone(report.audit_error)

    def test_a_refusal_is_the_reports_audit_error(self):
        error = exception.AuditStoreError('findings refused')
        store, report = _Store(error), RunReport(dry_run=False)
        self.assertIs(error, findings.record(
            store, 'run', [finding(Status.HEALED)], report))
        self.assertEqual(error.line(), report.audit_error)

    def test_other_errors_are_raised(self):
        store = _Store(exception.ApiDatabaseError('gone'))
        self.assertRaises(exception.ApiDatabaseError, findings.record,
                          store, 'run', [], RunReport(dry_run=False))
