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

"""Certification failures: a write that loses to another node's write.

The run writes through the first node. At the moment it is about to
commit its compare-and-swap, a session on the second node updates the
same request_specs row and commits: the run's transaction fails
certification (error 1213) and is rolled back. A row whose content
changed is a conflict; a row only touched otherwise is healed after
logged retries, bounded by [healreq]/lock_wait_timeout.
"""

import time

import sqlalchemy as sa

from healreq.db import engines
from healreq.tests.functional import galera_case


class CommitCollision(object):
    """Commits ``statement`` through ``other`` when a spec write commits.

    Listens to every engine of the process: when a connection that is
    not ``other``'s is about to commit a transaction that updated
    request_specs, ``statement`` runs and commits on ``other`` first, at
    most ``times`` times (None: every time). ``collisions`` counts them,
    and ``span`` is the time from the first to the last.
    """

    def __init__(self, other, statement, times=1):
        self.other = other
        self.statement = statement
        self.times = times
        self.collisions = 0
        self._first = self._last = None

    @property
    def span(self):
        return self._last - self._first

    def install(self, test):
        for name, handler in (('before_cursor_execute', self._seen),
                              ('commit', self._commit)):
            sa.event.listen(sa.engine.Engine, name, handler)
            test.addCleanup(sa.event.remove, sa.engine.Engine, name,
                            handler)

    def _seen(self, conn, cursor, statement, *args):
        if (conn.engine is not self.other
                and statement.lstrip().upper().startswith(
                    'UPDATE REQUEST_SPECS')):
            conn.info['spec_write'] = True

    def _commit(self, conn):
        if not conn.info.pop('spec_write', False):
            return
        if self.times is not None and self.collisions >= self.times:
            return
        self.collisions += 1
        self._last = time.monotonic()
        if self._first is None:
            self._first = self._last
        with self.other.begin() as other:
            other.execute(sa.text(self.statement))


class GaleraCertificationTest(galera_case.GaleraTestCase):

    def setUp(self):
        super().setUp()
        self.drifted = self.add_drifted(self.cell1)
        self.before = self.deployment.spec_text(self.drifted)
        self.second_node = self.node_engine(self.cells.api_url(), 1)

    def collide(self, assignment, times=1):
        """Have node 2 run ``assignment`` on the row as the run commits."""
        hook = CommitCollision(
            self.second_node,
            "UPDATE request_specs SET %s WHERE instance_uuid = '%s'"
            % (assignment, self.drifted), times=times)
        hook.install(self)
        return hook

    def timed_heal(self, config):
        started = time.monotonic()
        result, document = self.heal_json(config_file=config)
        return result, document, time.monotonic() - started

    def outcome(self, document):
        [finding] = document['results']
        return finding['status'], finding['reason']

    def intent(self, document):
        return self.changes_by_instance(document['run_id'])[self.drifted]

    def test_row_changed_on_another_node_is_a_conflict(self):
        hook = self.collide("spec = CONCAT(spec, ' ')")
        result, document, took = self.timed_heal(self.config_on_node(0))
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(('conflict', 'spec-changed'),
                         self.outcome(document))
        self.assertEqual(1, hook.collisions)
        self.assertEqual('refused', self.intent(document)['state'])
        self.assertEqual(self.before + ' ',
                         self.deployment.spec_text(self.drifted))
        self.assertIn('Instance %s: the write of its request spec collided'
                      % self.drifted, result.stderr)
        self.assertNotIn('Traceback', result.stderr)
        # Settled at once: the retries it replaces took about 25 s.
        self.assertLess(took, 15)

    def test_other_column_collision_is_retried_then_healed(self):
        hook = self.collide("updated_at = '2001-02-03 04:05:06'")
        result, document, _ = self.timed_heal(self.config_on_node(0))
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(('healed', 'spec-drift'), self.outcome(document))
        self.assertEqual(1, hook.collisions)
        self.assertEqual('applied', self.intent(document)['state'])
        self.assertNotEqual(self.before,
                            self.deployment.spec_text(self.drifted))
        warnings = [line for line in result.stderr.splitlines()
                    if self.drifted in line and 'retrying' in line]
        self.assertEqual(1, len(warnings), result.stderr)
        self.assertIn('WARNING', warnings[0])

    def test_retries_end_as_a_conflict_within_lock_wait_timeout(self):
        hook = self.collide(
            'updated_at = COALESCE(updated_at, NOW()) + INTERVAL 1 SECOND',
            times=None)
        config = self.config_on_node(0, 'lock_wait_timeout = 2\n')
        result, document, took = self.timed_heal(config)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(('conflict', 'spec-contended'),
                         self.outcome(document))
        self.assertGreater(hook.collisions, 2)
        intent = self.intent(document)
        self.assertEqual('refused', intent['state'])
        self.assertIn('lock_wait_timeout', intent['detail'])
        self.assertEqual(self.before, self.deployment.spec_text(self.drifted))
        self.assertGreaterEqual(took, 2)
        # The retries of the row stop within the bound (one pause of at
        # most a second may pass it); the run's start-up is not theirs.
        self.assertLess(hook.span, 2 + 1)


class GaleraSyncWaitTest(galera_case.GaleraTestCase):
    """Re-reads before a write wait for the cluster; plain reads do not."""

    def test_synced_reads_set_and_restore_wsrep_sync_wait(self):
        engine = engines.create_engine(self.db.on_node(self.cells.api_url(),
                                                       0), pool_size=1)
        self.addCleanup(engine.dispose)
        with engines.synced_reads(engine) as conn:
            inside = conn.execute(sa.text(
                'SELECT @@SESSION.wsrep_sync_wait')).scalar()
        with engine.connect() as conn:
            after = conn.execute(sa.text(
                'SELECT @@SESSION.wsrep_sync_wait')).scalar()
        self.assertEqual((1, 0), (inside, after))
