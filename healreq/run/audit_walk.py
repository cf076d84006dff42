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

"""What the read-only audits' walks share (``allocations``, ``hosts``).

Each reads the selected cells and the Placement database and writes
nothing. A cell whose database fails is reported as the cell's error
and the walk goes on; every read runs in a thread of its own so that
``stop_check()`` is called while it waits (for a lock another session
holds); an Interrupted that ``stop_check()`` raises ends the walk and
carries the report of what was checked so far.
"""

from healreq import exception
from healreq.run import budget
from healreq.run import read_threads
from healreq.run import records


class ReadOnlyWalk(object):
    """The base of a read-only audit's walk; subclasses write ``_run``.

    ``run_context`` is a run.context.RunContext (cells, engines,
    release); ``placement_engine`` the Placement database's engine;
    ``report`` the subclass's report, which has ``cell_errors``.
    """

    def __init__(self, run_context, placement_engine, batch_size, report,
                 cell_uuid=None):
        self.context = run_context
        self.placement_engine = placement_engine
        self.batch_size = batch_size
        self.cell_uuid = cell_uuid
        self.report = report
        self.stop_check = _no_stop
        # No limits: only the hook between batches (see budget).
        self._pause = budget.Budget().pause

    def run(self):
        """Walk; return the report (an Interrupted carries it)."""
        try:
            return self._run()
        except exception.Interrupted as exc:
            exc.report = self.report
            raise

    def _run(self):
        raise NotImplementedError

    def _walked(self, cell, walk):
        """``walk(cell, engine)``'s result; None if the cell failed.

        The failure is reported as the cell's error.
        """
        try:
            return walk(cell, self.context.cell_engine(cell))
        except exception.CellDatabaseError as exc:
            error = exc
        except exception.DB_ERRORS as exc:
            error = records.cell_error(cell, exc)
        finally:
            self.context.release(cell)
        self.report.cell_errors.append({'cell_uuid': cell['uuid'],
                                        'error': str(error)})
        return None

    def _query(self, engine, query, *args):
        """``query(conn, *args)`` on a connection of ``engine``.

        Run in a thread of its own, ``stop_check()`` called meanwhile: a
        read waiting for a lock another session holds does not keep a
        signal waiting (see read_threads.interruptible).
        """
        def read():
            with engine.connect() as conn:
                return query(conn, *args)
        return read_threads.interruptible(read, self.stop_check)

    def _placement(self, query, *args):
        """``query(conn, *args)`` on the Placement database, so run."""
        with exception.reraised_as(exception.PlacementDatabaseError):
            return self._query(self.placement_engine, query, *args)

    def _between_batches(self):
        self.stop_check()
        self._pause()


def _no_stop():
    pass
