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


"""What a run that writes specs shares: databases, release, permission.

The walker (request-specs) and the replayer (revert, apply) both run in
a RunContext: the API database engine, one engine per cell database
(opened when first needed), the Nova release the run follows with the
object versions to write, and the checks that writing is allowed.
"""

import functools
import threading

from healreq import clock as clock_module
from healreq.db import api_queries
from healreq.db import cell_queries
from healreq.db import engines
from healreq import exception
from healreq import nova_constants
from healreq.run import reader_process
from healreq.run import records


class RunContext(object):
    """The databases and the Nova release of one run.

    ``reference_url`` is ``[database]/connection`` (cell URL templates
    are formatted from it), ``lock_wait_timeout`` bounds every lock wait
    on the cells' databases (``[healreq]/lock_wait_timeout``) and
    ``answer_timeout`` every other wait for them
    (``[healreq]/database_timeout``, see engines.create_engine),
    ``target_release`` is the release the operator named (None: detect
    it), ``service_down_time`` judges services up or down.
    """

    def __init__(self, api_engine, reference_url,
                 lock_wait_timeout=engines.LOCK_WAIT_TIMEOUT,
                 answer_timeout=None,
                 clock=clock_module.utcnow, target_release=None,
                 service_down_time=records.SERVICE_DOWN_TIME):
        self.api_engine = api_engine
        self.reference_url = reference_url
        self.lock_wait_timeout = lock_wait_timeout
        self.answer_timeout = answer_timeout
        self.clock = clock
        self.target_release = target_release
        self.service_down_time = service_down_time
        self.detection = None
        self.profile = None
        self._connect = functools.partial(
            engines.create_engine, lock_wait_timeout=lock_wait_timeout,
            answer_timeout=answer_timeout)
        self._cells = None
        self._engines = {}
        self._lock = threading.Lock()
        self.hinted_instances = records.HintedInstances(
            api_engine, self.cells, self.cell_engine)

    def cells(self):
        """Every cell mapping, ordered by id (read once)."""
        if self._cells is None:
            with exception.reraised_as(exception.ApiDatabaseError):
                with self.api_engine.connect() as conn:
                    self._cells = api_queries.get_cells(conn)
        return self._cells

    def select_cells(self, instance_uuid=None, cell_uuid=None):
        """The cells a walk visits, by id.

        Every cell but cell0; or the cell ``instance_uuid`` is mapped to
        ([] while it is not scheduled); or cell ``cell_uuid``.
        InvalidInput for an unmapped instance, an unknown cell or cell0.
        """
        cells = self.cells()
        if instance_uuid:
            mapping = self.instance_mapping(instance_uuid)
            return [c for c in cells if c['id'] == mapping['cell_id']]
        if cell_uuid:
            selected = [c for c in cells if c['uuid'] == cell_uuid]
            if not selected:
                raise exception.InvalidInput(
                    'cell %s is not in cell_mappings' % cell_uuid)
            if cell_uuid == nova_constants.CELL0_UUID:
                raise exception.InvalidInput(
                    'cell0 only holds instances that were never '
                    'scheduled; nothing to heal there')
            return selected
        return [c for c in cells if c['uuid'] != nova_constants.CELL0_UUID]

    def instance_mapping(self, instance_uuid):
        """The instance_mappings row of ``instance_uuid``.

        InvalidInput if it has none.
        """
        with exception.reraised_as(exception.ApiDatabaseError):
            with self.api_engine.connect() as conn:
                mapping = api_queries.get_instance_mapping(conn, instance_uuid)
        if mapping is None:
            raise exception.InvalidInput(
                'instance %s has no instance mapping; check the UUID or run '
                'nova-manage cell_v2 verify_instance' % instance_uuid)
        return mapping

    def find_elsewhere(self, instance_uuid, mapped_cell, read):
        """The cell holding --instance when its mapped cell does not.

        A full walk finds an instance where its row is, whatever cell its
        mapping names; so does --instance. ``mapped_cell`` was read
        already (None: the mapping names no cell, or an unknown one);
        every other cell but cell0 is read in turn with ``read(cell,
        engine)``, which returns the instance's rows or nothing, and the
        cells that cannot be read are passed over. Returns ``(cell,
        engine, rows)``; the caller releases the cell. None if no cell
        holds it and its mapping names no cell yet (Nova is building it:
        it is not scheduled); InvalidInput if no cell holds it otherwise.
        """
        passed = {nova_constants.CELL0_UUID,
                  mapped_cell and mapped_cell['uuid']}
        for cell in self.cells():
            if cell['uuid'] in passed:
                continue
            try:
                engine = self.cell_engine(cell)
                found = read(cell, engine)
            except exception.DB_ERRORS + (exception.CellDatabaseError,):
                self.release(cell)
                continue
            if found:
                return cell, engine, found
            self.release(cell)
        if mapped_cell is None:
            if self.instance_mapping(instance_uuid)['cell_id'] is None:
                return None
            raise exception.InvalidInput(
                'instance %s is in no cell database and its instance '
                'mapping names no cell of cell_mappings' % instance_uuid)
        raise exception.InvalidInput(
            'instance %s is mapped to cell %s but is not in its database'
            % (instance_uuid, mapped_cell['uuid']))

    def announce_cells(self, cells, progress, read):
        """Tell ``progress`` how many live instances each cell holds.

        ``read(engine, query)`` runs the count; a cell whose count cannot
        be read is announced with an unknown total (its walk reports the
        error). Each cell's connections are closed again: its walk opens
        them when it comes to it.
        """
        for cell in cells:
            total = None
            try:
                total = read(self.cell_engine(cell),
                             cell_queries.count_live_instances)
            except (exception.CellDatabaseError,) + exception.DB_ERRORS:
                pass
            finally:
                self.release(cell)
            progress.planned(cell, total)

    def learn_release(self):
        """Establish the Nova release whose rules the run applies.

        Returns the releases.Detection; ``profile`` then holds the object
        versions to write.
        """
        self.detection, self.profile = records.learn_deployment(
            self.api_engine, self.cell_engine, self.target_release,
            service_down_time=self.service_down_time)
        return self.detection

    def check_writable(self, writer, actions=('update',), remedy=None):
        """Raise unless this run may write: release, then privileges.

        The detected release must be one healreq writes for (InvalidInput,
        whose line ends with ``remedy``, see Detection.check_writable)
        and the account must be allowed to write request_specs so
        (``actions``: update, insert, delete; ApiDatabaseError). Nothing
        has been recorded yet when it raises.
        """
        if writer.dry_run:
            return
        if self.detection is not None:
            self.detection.check_writable(remedy)
        writer.check_writable(actions)

    def cell_engine(self, cell):
        """The engine of ``cell``'s database; CellDatabaseError if unusable."""
        with self._lock:
            engine = self._engines.get(cell['uuid'])
            if engine is None:
                engine = records.connect_cell(cell, self.reference_url,
                                              self._connect)
                self._engines[cell['uuid']] = engine
            return engine

    def read_spec(self, cell, batch_size, fields):
        """The ReadSpec of ``cell``'s pages (its engine's URL)."""
        return reader_process.ReadSpec(
            cell=dict(cell), cell_url=_full_url(self.cell_engine(cell)),
            api_url=_full_url(self.api_engine), batch_size=batch_size,
            fields=tuple(fields), lock_wait_timeout=self.lock_wait_timeout,
            answer_timeout=self.answer_timeout)

    def release(self, cell):
        """Close ``cell``'s connections (a walk moves on to the next cell)."""
        with self._lock:
            engine = self._engines.pop(cell['uuid'], None)
        if engine is not None:
            engine.dispose()

    def close(self):
        """Close every cell's connections (the API engine is the caller's)."""
        with self._lock:
            engines_, self._engines = list(self._engines.values()), {}
        for engine in engines_:
            engine.dispose()


def _full_url(engine):
    """The URL ``engine`` connects to, its password included."""
    return engine.url.render_as_string(hide_password=False)
