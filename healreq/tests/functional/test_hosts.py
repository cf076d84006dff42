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

"""``nova-heal hosts``: the read-only audit of what the scheduler reads."""

import datetime
import os
import signal
import uuid as uuidlib

import fixtures
import sqlalchemy as sa

from healreq import api
from healreq import exception
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import deployment_case

TOPOLOGY = dep.host_topology({0: range(0, 8), 1: range(8, 16)},
                             siblings={0: [[0, 4], [1, 5], [2, 6], [3, 7]]})


def _uuid():
    return str(uuidlib.uuid4())


class HostsTestCase(deployment_case.DeploymentTestCase):
    """Two hosts of cell1 with their services, nodes and providers."""

    def setUp(self):
        super().setUp()
        self.placement = self.add_placement()
        self.node1 = self.host('compute-1')
        self.node2 = self.host('compute-2')

    def host(self, name, cell=None, provider=True, service=True, **kwargs):
        """A host with a live nova-compute and a compute node; its uuid."""
        cell = cell or self.cell1
        if service:
            dep.add_service(cell.engine, 'nova-compute', 74, host=name)
        node = dep.add_compute_node(cell.engine, name,
                                    numa_topology=TOPOLOGY, **kwargs)
        if provider:
            self.placement.add_provider(
                node, name=kwargs.get('node') or '%s.example.org' % name)
        return node

    def pinned(self, pins, host='compute-1', **kwargs):
        """A live instance on ``host`` pinned as ``pins`` says."""
        uuid = _uuid()
        return self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, uuid=uuid, host=host,
            extra_numa_topology=dep.pinned_topology(uuid, pins), **kwargs)

    def audit(self, *args):
        return self.run_json('hosts', *args)

    def by_host(self, document):
        return {r['host'] or r['provider_uuid']: r
                for r in document['results']}


class CleanTest(HostsTestCase):

    def test_clean_exits_4(self):
        zone = self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        self.placement.add_to_aggregate(self.node1, zone)
        self.pinned({0: {0: 0, 1: 1}})
        self.pinned({0: {0: 2, 1: 3}, 1: {2: 8}})
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual([], doc['results'])
        self.assertEqual({'hosts_checked': 2, 'providers_checked': 2,
                          'mismatched': 0, 'skipped': 0, 'errors': 0},
                         {k: v for k, v in doc['summary'].items()
                          if k != 'problems'})
        self.assertEqual(set(), {k for k, v in doc['summary'][
            'problems'].items() if v})
        self.assertEqual(4, doc['exit_code'])

    def test_sharing_provider_is_no_orphan(self):
        shared = self.placement.add_provider(_uuid(), name='nfs')
        self.placement.add_trait(shared, 'MISC_SHARES_VIA_AGGREGATE')
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)

    def test_every_table_unchanged(self):
        zone = self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        self.placement.add_to_aggregate(self.node2, zone)
        self.pinned({0: {0: 0}})
        self.pinned({0: {0: 0}})
        self.placement.add_provider(_uuid(), name='gone')
        before = self.everything()
        result, _ = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(before, self.everything())
        self.assertEqual([], os.listdir(self.state_path))

    def everything(self):
        found = {}
        engines = [self.deployment.api_engine, self.placement.engine] + [
            c.engine for c in self.deployment.cells]
        for index, engine in enumerate(engines):
            metadata = sa.MetaData()
            metadata.reflect(engine)
            with engine.connect() as conn:
                for table in metadata.sorted_tables:
                    found[(index, table.name)] = sorted(
                        (tuple(map(repr, row)) for row in conn.execute(
                            table.select())))
        return found


class AggregateTest(HostsTestCase):

    def test_missing(self):
        zone = self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual('mismatched', found['status'])
        self.assertEqual(['aggregate-missing'], found['problems'])
        self.assertEqual(self.node1, found['provider_uuid'])
        self.assertEqual(self.cell1.uuid, found['cell_uuid'])
        self.assertEqual([{'reason': 'aggregate-missing',
                           'aggregate_uuid': zone, 'aggregate_name': 'agg1',
                           'provider_uuid': self.node1}], found['details'])
        self.assertEqual(['nova-manage placement sync_aggregates --verbose'],
                         found['remedy'])
        self.assertEqual(1, doc['summary']['problems']['aggregate-missing'])

    def test_stale_keeps_the_other_aggregates(self):
        zone = self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        other = _uuid()
        self.placement.add_to_aggregate(self.node1, zone)
        self.placement.add_to_aggregate(self.node2, zone)
        self.placement.add_to_aggregate(self.node2, other)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        results = self.by_host(doc)
        self.assertEqual(['compute-2'], list(results))
        found = results['compute-2']
        self.assertEqual(['aggregate-stale'], found['problems'])
        self.assertEqual([{'reason': 'aggregate-stale',
                           'aggregate_uuid': zone, 'aggregate_name': 'agg1',
                           'provider_uuid': self.node2,
                           'provider_generation': 1}], found['details'])
        self.assertEqual(
            ['openstack --os-placement-api-version 1.19 resource provider '
             'aggregate set --aggregate %s --generation 1 %s'
             % (other, self.node2)], found['remedy'])

    def test_aggregate_placement_alone_knows_is_not_judged(self):
        self.placement.add_to_aggregate(self.node1, _uuid())
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)


class ProviderTest(HostsTestCase):

    def test_orphan_with_a_migration_consumer(self):
        """A deleted compute service whose failed migration holds it."""
        gone = dep.add_compute_node(self.cell1.engine, 'compute-3',
                                    deleted=True)
        self.placement.add_provider(gone, name='compute-3.example.org')
        child = self.placement.add_provider(_uuid(), name='gone-child',
                                            parent=gone)
        migration = _uuid()
        instance = self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, host='compute-2', migrations=[dict(
                uuid=migration, migration_type='live-migration',
                status='error', source_compute='compute-3',
                dest_compute='compute-2')])
        self.placement.allocate(instance, self.node2, {'VCPU': 1})
        self.placement.allocate(migration, gone, {'VCPU': 1,
                                                  'MEMORY_MB': 2048})
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)[gone]
        self.assertIsNone(found['host'])
        self.assertEqual(['provider-orphaned'], found['problems'])
        self.assertEqual([{'reason': 'provider-orphaned',
                           'provider_uuid': gone,
                           'provider_name': 'compute-3.example.org',
                           'allocations': [{
                               'consumer_uuid': migration,
                               'kind': 'migration',
                               'resources': {'MEMORY_MB': 2048,
                                             'VCPU': 1}}]}],
                         found['details'])
        self.assertEqual([
            'nova-manage placement audit --resource_provider %s --verbose '
            '--delete' % gone,
            '# once it and the providers below it hold nothing:',
            'openstack resource provider delete %s' % child,
            'openstack resource provider delete %s' % gone],
            found['remedy'])
        self.assertEqual(3, doc['summary']['providers_checked'])

    def test_empty_orphan(self):
        gone = self.placement.add_provider(_uuid(), name='gone')
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)[gone]
        self.assertEqual([], found['details'][0]['allocations'])
        self.assertEqual(['openstack resource provider delete %s' % gone],
                         found['remedy'])

    def test_orphans_are_not_judged_for_one_cell(self):
        self.placement.add_provider(_uuid(), name='gone')
        result, doc = self.audit('--cell', self.cell1.uuid)
        self.assertEqual(4, result.code, result.stderr)
        self.assertIn('provider-orphaned', doc['not_checked'][0])

    def test_missing(self):
        node = self.host('compute-3', provider=False)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-3']
        self.assertEqual(['provider-missing'], found['problems'])
        self.assertEqual([{'reason': 'provider-missing',
                           'compute_node_uuid': node,
                           'hypervisor_hostname': 'compute-3.example.org'}],
                         found['details'])

    def test_renamed_host(self):
        """The old name's compute node outlives its service."""
        old = self.host('old-name', service=False, node='hv-9')
        new = self.host('new-name', provider=False, node='hv-9')
        self.placement.add_provider(_uuid(), name='other')
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        results = self.by_host(doc)
        self.assertEqual(['provider-duplicate'],
                         results['old-name']['problems'])
        details = results['old-name']['details']
        self.assertIn({'reason': 'provider-duplicate',
                       'hypervisor_hostname': 'hv-9',
                       'compute_node_uuids': [old], 'provider_uuids': [old],
                       'service_host': 'old-name'}, details)
        self.assertIn({'reason': 'provider-duplicate',
                       'hypervisor_hostname': 'hv-9',
                       'compute_node_uuids': sorted([old, new]),
                       'service_host': 'old-name'}, details)
        self.assertEqual(['provider-duplicate', 'provider-missing'],
                         results['new-name']['problems'])
        self.assertIn({'reason': 'provider-duplicate',
                       'hypervisor_hostname': 'hv-9',
                       'provider_uuids': sorted([old, new]),
                       'compute_node_uuids': [new],
                       'service_host': 'new-name'},
                      results['new-name']['details'])

    def test_one_hypervisor_in_two_cells(self):
        self.host('compute-9', cell=self.cell2, provider=False,
                  node='compute-1.example.org')
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        hosts = {(r['cell_uuid'], r['host']) for r in doc['results']
                 if 'provider-duplicate' in r['problems']}
        self.assertEqual({(self.cell1.uuid, 'compute-1'),
                          (self.cell2.uuid, 'compute-9')}, hosts)


class PinnedCpusTest(HostsTestCase):

    def test_pinned_twice(self):
        first = self.pinned({0: {0: 1, 1: 2}})
        second = self.pinned({0: {0: 2, 1: 3}, 1: {2: 9}})
        third = self.pinned({0: {0: 3}})
        self.pinned({1: {0: 10}})
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual(['cpus-pinned-twice'], found['problems'])
        self.assertEqual(
            sorted([{'reason': 'cpus-pinned-twice',
                     'node': 'compute-1.example.org', 'cpus': [2],
                     'instances': sorted([first, second])},
                    {'reason': 'cpus-pinned-twice',
                     'node': 'compute-1.example.org', 'cpus': [3],
                     'instances': sorted([second, third])}], key=repr),
            sorted(found['details'], key=repr))

    def test_emulator_threads_and_isolate_siblings_count(self):
        uuid = _uuid()
        self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, uuid=uuid,
            extra_numa_topology=dep.pinned_topology(
                uuid, {0: {0: 0}}, thread_policy='isolate',
                reserved={0: [1]}))
        other = self.pinned({0: {0: 4}})
        third = self.pinned({0: {0: 5}})
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        details = self.by_host(doc)['compute-1']['details']
        self.assertEqual(
            sorted([([4], sorted([uuid, other])),
                    ([5], sorted([uuid, third]))]),
            sorted((d['cpus'], d['instances']) for d in details))

    def test_outside_dedicated_set(self):
        uuid = self.pinned({0: {0: 1, 1: 9}, 1: {2: 20}})
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual(['cpus-outside-dedicated-set'], found['problems'])
        self.assertEqual([{'reason': 'cpus-outside-dedicated-set',
                           'node': 'compute-1.example.org',
                           'instance_uuid': uuid, 'cpus': [9, 20],
                           'dedicated': list(range(16))}],
                         found['details'])

    def test_shared_instances_pin_nothing(self):
        self.pinned({0: {0: 1}}, )
        uuid = _uuid()
        self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, uuid=uuid,
            extra_numa_topology=dep.pinned_topology(uuid, {0: {0: 1}},
                                                    policy='shared'))
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)

    def test_deleted_instance_pins_nothing(self):
        self.pinned({0: {0: 1}})
        self.pinned({0: {0: 1}}, deleted=True)
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)

    def test_unparsable_topology_is_an_error(self):
        self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                     extra_numa_topology='{not json')
        result, doc = self.audit()
        self.assertEqual(2, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual('error', found['status'])
        self.assertEqual('numa-topology-unparsable', found['reason'])
        self.assertEqual(1, doc['summary']['errors'])


class SkipTest(HostsTestCase):

    def test_task_in_progress(self):
        self.pinned({0: {0: 1}})
        self.pinned({0: {0: 1}}, task_state='migrating')
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual(('skipped', 'task-in-progress', []),
                         (found['status'], found['reason'],
                          found['problems']))
        self.assertEqual(1, doc['summary']['skipped'])
        result = self.run_cli('hosts')
        self.assertNotIn('SKIPPED', result.stdout)
        result = self.run_cli('hosts', '--verbose')
        self.assertIn('SKIPPED host compute-1 (cell %s): task-in-progress'
                      % self.cell1.uuid, result.stdout)

    def test_migration_in_progress_skips_both_hosts(self):
        uuid = _uuid()
        self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, uuid=uuid, host='compute-1',
            migrations=[dict(uuid=_uuid(), migration_type='migration',
                             status='post-migrating',
                             source_compute='compute-1',
                             dest_compute='compute-2')])
        self.pinned({0: {0: 1}}, host='compute-2')
        self.pinned({0: {0: 1}}, host='compute-2')
        result, doc = self.audit()
        self.assertEqual(4, result.code, result.stderr)
        reasons = {r['host']: r['reason'] for r in doc['results']}
        self.assertEqual({'compute-1': 'migration-in-progress',
                          'compute-2': 'migration-in-progress'}, reasons)

    def test_skip_leaves_aggregates_judged(self):
        self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        self.pinned({0: {0: 1}}, task_state='spawning')
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual(('mismatched', ['aggregate-missing'],
                          'task-in-progress', ['cpus', 'pci']),
                         (found['status'], found['problems'],
                          found['reason'], found['not_checked']))


class PciTest(HostsTestCase):

    def test_held_by_deleted_instance_while_compute_up(self):
        gone = self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                            deleted=True)
        dep.add_pci_device(self.cell1.engine, self.node1, '0000:81:00.1',
                           'allocated', gone)
        live = self.deployment.add_instance(self.cell1, demo.M1_SMALL)
        dep.add_pci_device(self.cell1.engine, self.node1, '0000:81:00.2',
                           'allocated', live)
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-1']
        self.assertEqual([{'reason': 'pci-device-held',
                           'address': '0000:81:00.1',
                           'compute_node_uuid': self.node1,
                           'status': 'allocated', 'instance_uuid': gone,
                           'instance_state': 'deleted',
                           'compute_up': True}], found['details'])
        self.assertIn('transient', found['remedy'][0])

    def test_compute_down_elsewhere_and_missing(self):
        dep.add_service(self.cell1.engine, 'nova-compute', 74,
                        host='compute-5', last_seen_up=datetime.datetime(
                            2020, 1, 1))
        node = dep.add_compute_node(self.cell1.engine, 'compute-5')
        self.placement.add_provider(node, name='compute-5.example.org')
        elsewhere = self.deployment.add_instance(self.cell1, demo.M1_SMALL,
                                                 host='compute-2')
        missing = _uuid()
        dep.add_pci_device(self.cell1.engine, node, '0000:81:00.1',
                           'claimed', elsewhere)
        dep.add_pci_device(self.cell1.engine, node, '0000:81:00.2',
                           'allocated', missing)
        dep.add_pci_device(self.cell1.engine, node, '0000:81:00.3',
                           'available')
        result, doc = self.audit()
        self.assertEqual(0, result.code, result.stderr)
        found = self.by_host(doc)['compute-5']
        self.assertEqual(
            [('0000:81:00.1', 'claimed', 'elsewhere', False),
             ('0000:81:00.2', 'allocated', 'missing', False)],
            [(d['address'], d['status'], d['instance_state'],
              d['compute_up']) for d in found['details']])
        self.assertIn('start nova-compute on compute-5', found['remedy'][0])


class SelectionTest(HostsTestCase):

    def test_host(self):
        self.deployment.add_aggregate('agg1', 'az1',
                                      ['compute-1', 'compute-2'])
        result, doc = self.audit('--host', 'compute-2')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(['compute-2'], [r['host'] for r in doc['results']])
        self.assertEqual(1, doc['summary']['hosts_checked'])

    def test_unknown_host_is_invalid_input(self):
        result, doc = self.audit('--host', 'nowhere')
        self.assertEqual(127, result.code, result.stderr)
        self.assertIn('nowhere', doc['error']['message'])

    def test_cell(self):
        self.deployment.add_aggregate('agg1', 'az1', ['compute-1', 'c2-1'])
        self.host('c2-1', cell=self.cell2)
        result, doc = self.audit('--cell', self.cell2.uuid)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([(self.cell2.uuid, 'c2-1')],
                         [(r['cell_uuid'], r['host'])
                          for r in doc['results']])

    def test_cell0_and_bad_uuid_are_refused(self):
        for args in (['--cell', self.cell0.uuid], ['--cell', 'nope'],
                     ['--host', 'a', '--cell', self.cell1.uuid]):
            result = self.run_cli('hosts', *args)
            self.assertEqual(127, result.code, (args, result.stderr))
            self.assertEqual(1, len(result.stderr.strip().splitlines()),
                             result.stderr)

    def test_unreadable_cell_exits_2(self):
        self.deployment.add_cell('broken', 'mysql+pymysql://u:p@127.0.0.1:1/x',
                                 create_schema=False)
        self.placement.add_provider(_uuid(), name='gone')
        result, doc = self.audit()
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(1, len(doc['cell_errors']))
        self.assertEqual([], doc['results'])
        self.assertIn('a cell could not be read', doc['not_checked'][0])


class OutputTest(HostsTestCase):

    def test_without_placement_is_invalid_input(self):
        config = self.write_config()
        result = self.run_cli('hosts', config_file=config)
        self.assertEqual(127, result.code, result.stderr)
        self.assertIn('[placement_database]/connection', result.stderr)

    def test_text_report(self):
        self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        result = self.run_cli('hosts')
        self.assertEqual(0, result.code, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual('MISMATCHED host compute-1 (cell %s): '
                         'aggregate-missing' % self.cell1.uuid, lines[0])
        self.assertIn('remedy, in this order:', result.stdout)
        self.assertEqual('Checked 2 host(s) and 2 provider(s): 1 '
                         'mismatched, 0 skipped, 0 error(s).', lines[-1])

    def test_metrics(self):
        self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'hosts.prom')
        result = self.run_cli('hosts', '--metrics-file', path)
        self.assertEqual(0, result.code, result.stderr)
        with open(path) as handle:
            text = handle.read()
        self.assertIn('nova_heal_hosts_problems{reason="aggregate-missing"} '
                      '1\n', text)
        self.assertIn('nova_heal_hosts_problems{reason="cpus-pinned-twice"} '
                      '0\n', text)
        self.assertIn('nova_heal_hosts_results{status="mismatched"} 1\n',
                      text)
        self.assertIn('nova_heal_hosts_hosts_checked 2\n', text)
        self.assertIn('nova_heal_hosts_exit_code 0\n', text)
        self.assertIn('nova_heal_hosts_last_success_timestamp_seconds', text)


class WalkTest(HostsTestCase):
    """Through the library: pages, queries and interruption."""

    def setUp(self):
        super().setUp()
        self.conf = api.load_config([self.config_file])
        self.addCleanup(self.conf.reset)
        self.deployment.add_aggregate('agg1', 'az1', ['compute-1'])
        for host in ('compute-3', 'compute-4'):
            self.host(host)
        for host in ('compute-1', 'compute-2', 'compute-3'):
            for _ in range(4):
                self.pinned({}, host=host)

    def count_statements(self):
        """Statements run, by the table named first after FROM."""
        counts = {}

        def count(conn, cursor, statement, *args):
            words = statement.split()
            if words and words[0].upper() == 'SELECT' and 'FROM' in words:
                table = words[words.index('FROM') + 1].strip('`"')
                counts[table] = counts.get(table, 0) + 1
        sa.event.listen(sa.engine.Engine, 'before_cursor_execute', count)
        self.addCleanup(sa.event.remove, sa.engine.Engine,
                        'before_cursor_execute', count)
        return counts

    def test_one_query_per_table_per_page(self):
        counts = self.count_statements()
        result = api.run_hosts(self.conf, batch_size=2)
        self.assertEqual(0, result.exit_code)
        self.assertEqual(4, result.report.hosts_checked)
        # Two pages of two hosts in cell1, and cell2's empty first page.
        self.assertEqual(2, counts['instances'])
        self.assertEqual(2, counts['pci_devices'])
        self.assertEqual(2, counts['services'])
        # One per page of hosts, then three pages of root providers.
        self.assertEqual(2 + 3, counts['resource_providers'])
        self.assertEqual(2, counts['migrations'])

    def test_interrupted_after_a_page(self):
        calls = []

        def stop():
            calls.append(1)
            if len(calls) > 2:
                raise exception.Interrupted(signal.SIGINT, 'SIGINT')
        result = api.run_hosts(self.conf, batch_size=1, stop_check=stop)
        self.assertEqual(130, result.exit_code)
        self.assertLess(result.report.hosts_checked, 4)


class PciInFlightTest(HostsTestCase):

    def test_claimed_for_an_instance_in_flight_elsewhere(self):
        moving = self.deployment.add_instance(
            self.cell1, demo.M1_SMALL, host='compute-2',
            task_state='resize_migrating')
        dep.add_pci_device(self.cell1.engine, self.node1, '0000:81:00.1',
                           'claimed', moving)
        result, doc = self.audit('--host', 'compute-1')
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual([], doc['results'])


class NamesakeTest(HostsTestCase):

    def test_host_option_finds_its_hypervisor_in_another_cell(self):
        other = self.host('compute-9', cell=self.cell2, provider=False,
                          node='compute-1.example.org')
        result, doc = self.audit('--host', 'compute-1')
        self.assertEqual(0, result.code, result.stderr)
        found, = doc['results']
        self.assertEqual('compute-1', found['host'])
        self.assertEqual([{'reason': 'provider-duplicate',
                           'hypervisor_hostname': 'compute-1.example.org',
                           'compute_node_uuids': sorted([self.node1, other]),
                           'service_host': 'compute-1'}], found['details'])
