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

"""``nova-heal allocations``: the read-only audit of Placement allocations."""

import hashlib
import json
import os
import signal
import subprocess
import uuid as uuidlib

import fixtures as fixtures_lib
import sqlalchemy as sa

from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import allocations_case

SMALL = allocations_case.SMALL
LARGE = allocations_case.LARGE


class ProblemsTest(allocations_case.AllocationsTestCase):

    def test_consistent_exits_4(self):
        self.small()
        self.small()
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual({'instances_checked': 2, 'mismatched': 0,
                          'pending': 0, 'skipped': 0, 'errors': 0},
                         doc['summary'])
        self.assertEqual([], doc['results'])

    def test_wrong_flavor(self):
        """A failed finish_migration: the consumer holds the new flavor."""
        uuid = self.small(allocate=False)
        self.placement.allocate(uuid, self.node1, LARGE)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual('mismatch', found['status'])
        self.assertEqual(['wrong-flavor'], found['problems'])
        self.assertEqual([{'consumer_uuid': uuid, 'kind': 'instance',
                           'provider_uuid': self.node1, 'found': LARGE,
                           'expected': SMALL}], found['consumers'])
        self.assertEqual(['nova-manage placement heal_allocations '
                          '--instance %s --force' % uuid], found['remedy'])

    def test_live_migration_failed_in_source_driver(self):
        """Right total on the wrong consumers: both are reported."""
        migration = str(uuidlib.uuid4())
        uuid = self.small(allocate=False, migrations=[dict(
            uuid=migration, migration_type='live-migration', status='error',
            source_compute='compute-1', dest_compute='compute-2')])
        self.placement.allocate(uuid, self.node2, SMALL)
        self.placement.allocate(migration, self.node1, SMALL)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['leftover-migration', 'wrong-provider'],
                         found['problems'])
        self.assertEqual(
            sorted([(migration, 'migration', self.node1, SMALL, {}),
                    (uuid, 'instance', self.node1, {}, SMALL),
                    (uuid, 'instance', self.node2, SMALL, {})],
                   key=repr),
            sorted([(c['consumer_uuid'], c['kind'], c['provider_uuid'],
                     c['found'], c['expected'])
                    for c in found['consumers']], key=repr))
        # The leftover is deleted first: the heal then fits on the source.
        self.assertEqual(
            ['openstack resource provider allocation delete %s' % migration,
             'nova-manage placement heal_allocations --instance %s --force'
             % uuid], found['remedy'])

    def test_missing(self):
        uuid = self.small(allocate=False)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['missing'], found['problems'])
        self.assertEqual(['nova-manage placement heal_allocations '
                          '--instance %s' % uuid], found['remedy'])

    def test_leftover_of_ended_migration(self):
        migration = str(uuidlib.uuid4())
        uuid = self.small(migrations=[dict(
            uuid=migration, migration_type='resize', status='reverted',
            source_compute='compute-1', dest_compute='compute-2')])
        self.placement.allocate(migration, self.node2, LARGE)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['leftover-migration'], found['problems'])
        self.assertEqual(['openstack resource provider allocation delete %s'
                          % migration], found['remedy'])

    def test_leftover_of_soft_deleted_migration(self):
        migration = str(uuidlib.uuid4())
        uuid = self.small(migrations=[dict(
            uuid=migration, migration_type='resize', status='finished',
            deleted=1)])
        self.placement.allocate(migration, self.node1, SMALL)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['leftover-migration'],
                         self.results(doc)[uuid]['problems'])

    def test_leftover_of_deleted_instance(self):
        """Found by the final pass: the walk never reaches the instance."""
        migration = str(uuidlib.uuid4())
        uuid = self.small(allocate=False, deleted=True, migrations=[dict(
            uuid=migration, migration_type='live-migration',
            status='error', deleted=1)])
        self.placement.allocate(migration, self.node1, SMALL)
        self.placement.allocate(str(uuidlib.uuid4()), self.node1, SMALL)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['leftover-migration'], found['problems'])
        self.assertEqual(self.cell1.uuid, found['cell_uuid'])
        self.assertEqual(0, doc['summary']['instances_checked'])
        self.assertEqual(1, doc['unattributed_consumers'])

    def test_unexpected_for_shelved_offloaded(self):
        uuid = self.small(vm_state='shelved_offloaded', host=None)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['unexpected'], found['problems'])
        self.assertEqual(['openstack resource provider allocation delete %s'
                          % uuid], found['remedy'])

    def test_image_pcpu_remedy_avoids_heal_allocations(self):
        """heal_allocations ignores the image: the remedy sets PCPU."""
        sysmeta = dep.image_system_metadata(
            properties=dict(dep.IMAGE_PROPERTIES, hw_cpu_policy='dedicated'),
            min_disk=20)
        uuid = self.small(allocate=False, system_metadata=sysmeta)
        self.placement.allocate(uuid, self.node1, SMALL)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(['wrong-flavor'], found['problems'])
        self.assertEqual({'PCPU': 1, 'MEMORY_MB': 2048, 'DISK_GB': 20},
                         found['consumers'][0]['expected'])
        self.assertIn('heal_allocations would allocate', found['remedy'][0])
        self.assertIn('allocation set %s --allocation rp=%s,DISK_GB=20,'
                      'MEMORY_MB=2048,PCPU=1' % (uuid, self.node1),
                      found['remedy'][1])

    def test_text_report(self):
        uuid = self.small(allocate=False)
        result = self.run_cli('allocations')
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('MISMATCH %s (cell %s): missing'
                      % (uuid, self.cell1.uuid), result.stdout)
        self.assertIn('nova-manage placement heal_allocations --instance %s'
                      % uuid, result.stdout)
        self.assertIn('Checked 1 instance(s): 1 mismatched', result.stdout)


class InFlightTest(allocations_case.AllocationsTestCase):
    """Operations in flight are never flagged."""

    def test_task_state(self):
        uuid = self.small(allocate=False, task_state='resize_migrating')
        self.placement.allocate(uuid, self.node2, LARGE)
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(('skipped', 'task-in-progress', []),
                         (found['status'], found['reason'],
                          found['problems']))

    def test_building(self):
        self.small(allocate=False, vm_state='building')
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual(1, doc['summary']['skipped'])

    def test_verify_resize_hold(self):
        migration = str(uuidlib.uuid4())
        uuid = self.small(allocate=False, vm_state='active', migrations=[
            dict(uuid=migration, migration_type='resize',
                 status='finished')])
        self.placement.allocate(uuid, self.node2, LARGE)
        self.placement.allocate(migration, self.node1, SMALL)
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual('migration-in-progress',
                         self.results(doc)[uuid]['reason'])

    def test_evacuation_not_cleaned_is_pending(self):
        uuid = self.small(migrations=[dict(
            migration_type='evacuation', status='done',
            source_compute='compute-2', dest_compute='compute-1')])
        self.placement.allocate(uuid, self.node2, SMALL)
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        found = self.results(doc)[uuid]
        self.assertEqual(('pending', 'evacuation-not-cleaned'),
                         (found['status'], found['reason']))
        self.assertEqual(1, doc['summary']['pending'])


class CommandTest(allocations_case.AllocationsTestCase):

    def test_json_shape(self):
        self.small(allocate=False)
        result, doc = self.audit()
        self.assertEqual({'summary', 'results', 'cell_errors',
                          'unattributed_consumers', 'release', 'exit_code',
                          'problems'}, set(doc))
        self.assertEqual({'instance_uuid', 'cell_uuid', 'status',
                          'problems', 'consumers', 'remedy'},
                         set(doc['results'][0]))
        self.assertEqual({'consumer_uuid', 'kind', 'provider_uuid', 'found',
                          'expected'}, set(doc['results'][0]['consumers'][0]))

    def test_no_placement_connection_exits_127(self):
        config = self.write_config()
        result = self.run_cli('allocations', config_file=config)
        self.assertEqual(127, result.code)
        self.assertEqual(['nova-heal: error: [placement_database]/connection '
                          'is not set; pass --config-file '
                          '/etc/placement/placement.conf'],
                         result.stderr.splitlines())

    def test_unevaluable_instance_exits_2(self):
        self.small()
        broken = self.small(extra=None)
        result, doc = self.audit()
        self.assertEqual(2, result.code, result.stderr)
        found = self.results(doc)[broken]
        self.assertEqual(('error', 'instance-extra-missing'),
                         (found['status'], found['reason']))
        self.assertEqual(1, doc['summary']['errors'])

    def test_instance_option(self):
        target = self.small(allocate=False)
        self.small(allocate=False)
        result, doc = self.audit('--instance', target)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(1, doc['summary']['instances_checked'])
        self.assertEqual([target], list(self.results(doc)))

    def test_cell_option(self):
        dep.add_compute_node(self.cell2.engine, 'compute-1', uuid=str(
            uuidlib.uuid4()))
        self.small(allocate=False)
        in_cell2 = self.deployment.add_instance(self.cell2, demo.M1_SMALL)
        result, doc = self.audit('--cell', self.cell2.uuid)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([in_cell2], list(self.results(doc)))

    def test_metrics_by_problem_class(self):
        self.small(allocate=False)
        path = os.path.join(self.useFixture(fixtures_lib.TempDir()).path,
                            'allocations.prom')
        result, doc = self.audit('--metrics-file', path)
        self.assertEqual(0, result.code, result.stderr)
        with open(path) as handle:
            text = handle.read()
        self.assertIn('nova_heal_allocations_problems{reason="missing"} 1',
                      text)
        self.assertIn('nova_heal_allocations_problems{reason='
                      '"leftover-migration"} 0', text)
        self.assertIn('nova_heal_allocations_exit_code 0', text)
        self.assertIn('nova_heal_allocations_last_success_timestamp_seconds',
                      text)


class FailureMetricsTest(allocations_case.AllocationsTestCase):
    """A run that ends early writes the allocations metrics.

    Its exit code and times, no count, and the previous last success.
    """

    PREVIOUS = 1700000000

    def setUp(self):
        super().setUp()
        self.metrics = os.path.join(
            self.useFixture(fixtures_lib.TempDir()).path, 'allocations.prom')
        with open(self.metrics, 'w') as handle:
            handle.write('nova_heal_allocations_last_success_timestamp_'
                         'seconds %d\n' % self.PREVIOUS)

    def assert_failure_metrics(self, result, code):
        self.assertEqual(code, result.code, result.stderr)
        with open(self.metrics) as handle:
            text = handle.read()
        self.assertNotIn('nova_heal_request_specs', text)
        self.assertIn('nova_heal_allocations_exit_code %d\n' % code, text)
        self.assertIn('nova_heal_allocations_last_success_timestamp_seconds '
                      '%d\n' % self.PREVIOUS, text)
        self.assertIn('nova_heal_allocations_last_run_timestamp_seconds ',
                      text)
        # No count is known: none is written, so no alert on one is
        # silenced.
        self.assertNotIn('nova_heal_allocations_problems', text)
        self.assertNotIn('nova_heal_allocations_instances_checked', text)

    def test_unknown_cell(self):
        self.small()
        result = self.run_cli('allocations', '--metrics-file', self.metrics,
                              '--cell', str(uuidlib.uuid4()))
        self.assert_failure_metrics(result, 127)

    def test_placement_database_failure(self):
        self.small()
        config = self.write_config(
            '\n[placement_database]\nconnection = mysql+pymysql://'
            'placement:secret@127.0.0.1:1/placement\n')
        result = self.run_cli('allocations', '--metrics-file', self.metrics,
                              config_file=config)
        self.assert_failure_metrics(result, 2)
        self.assertIn('Placement database', result.stderr)


class InterruptionTest(allocations_case.AllocationsTestCase):
    """SIGHUP, SIGINT and SIGTERM stop the audit after the current batch."""

    INSTANCES = 6
    PREVIOUS = 1700000000

    def setUp(self):
        super().setUp()
        self.uuids = [self.small(allocate=n % 2 == 0)
                      for n in range(self.INSTANCES)]
        self.metrics = os.path.join(
            self.useFixture(fixtures_lib.TempDir()).path, 'allocations.prom')
        with open(self.metrics, 'w') as handle:
            handle.write('nova_heal_allocations_last_success_timestamp_'
                         'seconds %d\n' % self.PREVIOUS)
        self.gate = self.useFixture(cli.Gate())

    def interrupted_run(self, signal_number, *extra):
        """Audit, signal after the first batch; (code, out, err)."""
        process = cli.spawn(
            self.gate.argv() + ['--config-file', self.config_file,
                                'allocations', '--batch-size', '1',
                                '--metrics-file', self.metrics]
            + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        self.gate.reach(1, process)
        process.send_signal(signal_number)
        self.gate.open()
        out, err = process.communicate(timeout=120)
        return process.returncode, out.decode(), err.decode()

    def assert_stopped_cleanly(self, signal_number, code):
        returncode, out, err = self.interrupted_run(
            signal_number, '--format', 'json')
        self.assertEqual(code, returncode, err)
        self.assertNotIn('Traceback', err)
        document = json.loads(out)
        self.assertEqual(code, document['exit_code'])
        checked = document['summary']['instances_checked']
        # The batch in hand when the signal came is finished, no more.
        self.assertEqual(2, checked)
        reported = {r['instance_uuid'] for r in document['results']}
        self.assertIn(self.uuids[1], reported)  # its allocation is missing
        self.assertLessEqual(reported, set(self.uuids[:2]))
        with open(self.metrics) as handle:
            text = handle.read()
        self.assertIn('nova_heal_allocations_exit_code %d\n' % code, text)
        self.assertIn('nova_heal_allocations_instances_checked 2\n', text)
        self.assertIn('nova_heal_allocations_last_success_timestamp_seconds '
                      '%d\n' % self.PREVIOUS, text)

    def test_sigint(self):
        self.assert_stopped_cleanly(signal.SIGINT, 130)

    def test_sighup(self):
        self.assert_stopped_cleanly(signal.SIGHUP, 129)

    def test_sigterm(self):
        self.assert_stopped_cleanly(signal.SIGTERM, 143)

    def test_text_report_says_what_was_checked(self):
        returncode, out, err = self.interrupted_run(signal.SIGTERM)
        self.assertEqual(143, returncode, err)
        self.assertIn('Checked 2 instance(s):', out)
        self.assertIn('Exit code 143: terminated by SIGTERM', out)


class ReadOnlyTest(allocations_case.AllocationsTestCase):
    """No byte of any database changes."""

    def checksums(self):
        sums = {}
        engines = [('api', self.deployment.api_engine),
                   ('placement', self.placement.engine)] + [
            (cell.name, cell.engine) for cell in self.deployment.cells]
        for name, engine in engines:
            with engine.connect() as conn:
                for table in sorted(sa.inspect(conn).get_table_names()):
                    rows = conn.execute(sa.text(
                        'SELECT * FROM %s' % table)).fetchall()
                    sums[(name, table)] = hashlib.sha256(repr(sorted(
                        map(repr, rows))).encode()).hexdigest()
            if engine.dialect.name == 'sqlite':
                with open(engine.url.database, 'rb') as handle:
                    sums[(name, 'file')] = hashlib.sha256(
                        handle.read()).hexdigest()
        return sums

    def test_nothing_changes(self):
        migration = str(uuidlib.uuid4())
        self.small(allocate=False)
        self.small(allocate=False, deleted=True, migrations=[dict(
            uuid=migration, status='error', deleted=1)])
        self.placement.allocate(migration, self.node1, SMALL)
        self.small()
        self.dispose_all()
        before = self.checksums()
        self.dispose_all()
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(2, doc['summary']['mismatched'])
        self.dispose_all()
        self.assertEqual(before, self.checksums())

    def dispose_all(self):
        self.deployment.api_engine.dispose()
        self.placement.engine.dispose()
        for cell in self.deployment.cells:
            cell.engine.dispose()
