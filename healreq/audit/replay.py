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


"""Writing recorded spec values back: ``apply`` of a plan, ``revert``.

Each swap replaces a spec only if the row still holds exactly the text
the plan or the audit recorded, only if the instance has no operation in
flight, and only after the intent is in the audit store.
"""

import dataclasses
import datetime

from oslo_db import api as oslo_db_api
from oslo_db import exception as db_exc
import sqlalchemy.exc

from healreq.audit import store as audit_store
from healreq.db import api_queries
from healreq.db import cell_queries
from healreq.db import engines
from healreq.db import urls
from healreq.heal import checks
from healreq.heal.findings import CellReport
from healreq.heal.findings import Finding
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status

_DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError, ValueError)


@dataclasses.dataclass
class Swap:
    """Replace ``expected`` by ``new`` in request spec row ``spec_id``."""
    instance_uuid: str
    spec_id: int
    expected: str
    new: str
    fields: list
    expected_digest: str = None


def _utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(
        tzinfo=None, microsecond=0)


class Replayer(object):
    """Applies a list of swaps; returns a RunReport like request-specs."""

    def __init__(self, api_engine, reference_url, settings, store, run_id,
                 dry_run=False, connect=engines.create_engine,
                 clock=_utcnow):
        self.api_engine = api_engine
        self.reference_url = reference_url
        self.settings = settings
        self.store = store
        self.run_id = run_id
        self.dry_run = dry_run
        self._connect = connect
        self._clock = clock
        self._engines = {}
        self.report = RunReport(dry_run=dry_run)
        self._cells = {}

    def run(self, swaps):
        try:
            with self.api_engine.connect() as conn:
                cells = {c['id']: c for c in api_queries.get_cells(conn)}
                mappings = api_queries.get_instance_mappings(
                    conn, [s.instance_uuid for s in swaps])
            for swap in swaps:
                mapping = mappings.get(swap.instance_uuid)
                cell = cells.get(mapping['cell_id']) if mapping else None
                finding = self._replay(swap, cell)
                self._cell_report(cell).count(finding)
                if finding.status is not Status.CONSISTENT:
                    self.report.findings.append(finding)
            self.store.record_findings(self.run_id, self.report.findings)
        finally:
            for engine in self._engines.values():
                engine.dispose()
        return self.report

    def _cell_report(self, cell):
        key = cell['uuid'] if cell else None
        if key not in self._cells:
            self._cells[key] = CellReport(uuid=key,
                                          name=cell['name'] if cell else None)
            self.report.cells.append(self._cells[key])
        return self._cells[key]

    def _replay(self, swap, cell):
        finding = Finding(swap.instance_uuid, cell['uuid'] if cell else None,
                          Status.ERROR)
        finding.changes = []
        if cell is None:
            finding.reason = 'instance-not-mapped'
            finding.detail = 'no instance mapping with a cell'
            return finding
        try:
            busy = self._busy(swap, cell)
        except _DB_ERRORS as exc:
            finding.reason = 'cell-unreachable'
            finding.detail = urls.mask_password(str(exc).splitlines()[0])
            return finding
        if busy:
            finding.status = Status.CONFLICT
            finding.reason, finding.detail = busy
            return finding
        with self.api_engine.connect() as conn:
            current = api_queries.get_request_specs(
                conn, [swap.instance_uuid]).get(swap.instance_uuid)
        if (current is None or current['id'] != swap.spec_id
                or current['spec'] != swap.expected
                or (swap.expected_digest and audit_store.digest(
                    current['spec']) != swap.expected_digest)):
            finding.status = Status.CONFLICT
            finding.reason = 'spec-changed'
            finding.detail = ('the spec no longer holds the recorded value; '
                              'left alone')
            return finding
        finding.status = Status.DRIFTED
        finding.reason = 'recorded-change'
        finding.detail = 'fields: %s' % ', '.join(swap.fields)
        if self.dry_run:
            return finding
        change_id = self.store.intent(
            self.run_id, swap.instance_uuid, cell['uuid'], swap.spec_id,
            swap.fields, swap.expected, swap.new)
        swapped = self._swap(swap)
        self.store.resolve(change_id, audit_store.APPLIED if swapped
                           else audit_store.REFUSED)
        if swapped:
            finding.status = Status.HEALED
        else:
            finding.status = Status.CONFLICT
            finding.reason = 'spec-changed'
            finding.detail = 'the spec changed during the write; left alone'
        return finding

    def _busy(self, swap, cell):
        """The skip rule that forbids writing now, as (code, detail)."""
        engine = self._engines.get(cell['uuid'])
        if engine is None:
            engine = self._connect(urls.format_cell_url(
                cell['database_connection'] or '', self.reference_url))
            self._engines[cell['uuid']] = engine
        uuid = swap.instance_uuid
        with engine.connect() as conn:
            instance = cell_queries.get_instances(conn, [uuid]).get(uuid)
            migrations = cell_queries.get_migrations_in_progress(
                conn, [uuid]).get(uuid, [])
        if instance is None:
            return 'instance-deleted', 'the instance is gone'
        record = checks.InstanceRecord(instance=instance,
                                       migrations=migrations)
        return checks.skip_reason(record, cell, self._clock(),
                                  self.settings)

    @oslo_db_api.wrap_db_retry(max_retries=5, retry_on_deadlock=True)
    def _swap(self, swap):
        with self.api_engine.begin() as conn:
            return api_queries.swap_request_spec(
                conn, swap.spec_id, swap.instance_uuid, swap.expected,
                swap.new, self._clock())
