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


"""The scheduler's view of hosts, as Nova's own services leave it.

The services of ``test_real_allocations_compat`` (Nova 34.0.0's
functional framework, fake-driver computes, the placement database in
a SQLite file). Nova's own paths make each disagreement between Nova's
aggregates and compute nodes and Placement's aggregates and providers:
an aggregate change whose Placement call got a 503 (Nova swallows it
and accepts the change) or whose connection failed (the request fails
after Nova wrote its side), a compute service deleted while a failed live
migration's consumer holds its provider. The tests pin what Nova then
does (where a boot lands, what ``nova-manage placement sync_aggregates``
and ``audit --delete`` repair) and what ``nova-heal hosts`` reports. A
renamed host's compute node is emulated: Nova 34 refuses to start a
compute whose host was renamed, so its rows are edited as older
releases leave them, and the test says so.
"""

import contextlib
import unittest
from unittest import mock

import requests
import sqlalchemy as sa

from healreq.db import tables
from healreq.tests.compat import placement_services
from healreq.tests.compat import services

if services.available():
    from keystoneauth1 import exceptions as ks_exceptions
    from nova.cmd import manage
    from nova import context as nova_context
    from nova.scheduler.client import report
    from nova.tests.functional.api import client as api_client

# The heaviest host wins among those the scheduler may use.
WEIGHTS = {'host2': 100, 'host1': 50, 'host3': 10}
# A Placement aggregate that no Nova aggregate mirrors.
SHARED = '5d0f9a52-6c1e-4a8b-9e37-2b4c8d1f0a6e'


class _Hosts(placement_services.FileBackedPlacement):
    """Three fake-driver computes, and ``nova-heal hosts`` on them."""

    weights = WEIGHTS

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3')
        self.rp = {host: self._get_provider_uuid_by_host(host)
                   for host in ('host1', 'host2', 'host3')}

    # -- nova-heal hosts -----------------------------------------------

    def hosts(self, code, *args):
        """Run ``nova-heal hosts``, which must exit ``code``."""
        exit_code, document = self.run_audit('hosts', *args)
        self.assertEqual(code, exit_code, document)
        self.assertEqual([], document['cell_errors'])
        return document

    def reported(self, code, *args):
        """``{(host, provider): (status, problems)}`` of every result."""
        return {(r['host'], r['provider_uuid']): (
            r['status'], tuple(r['problems']))
            for r in self.hosts(code, *args)['results']}

    @staticmethod
    def problem_counts(document):
        """The summary's counts of the problems found."""
        return {code: count for code, count in
                document['summary']['problems'].items() if count}

    # -- Placement -------------------------------------------------------

    def aggregate_set(self, command):
        """Run ``openstack resource provider aggregate set`` as printed.

        Its words become the placement API call the client makes: PUT
        the provider's aggregates with the generation given.
        """
        words = command.split()
        self.assertEqual(
            ['openstack', '--os-placement-api-version', '1.19', 'resource',
             'provider', 'aggregate', 'set'], words[:7])
        options, provider = words[7:-1], words[-1]
        pairs = list(zip(options[::2], options[1::2]))
        self.assertLessEqual({name for name, _value in pairs},
                             {'--aggregate', '--generation'})
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/aggregates' % provider, {
                'aggregates': [v for n, v in pairs if n == '--aggregate'],
                'resource_provider_generation': int(dict(pairs)[
                    '--generation'])}, version='1.19').status)

    @contextlib.contextmanager
    def placement_unavailable(self, host, connect=False):
        """Placement fails the next lookup of ``host`` by name.

        The call that the API's aggregate changes make first: it answers
        503, or with ``connect`` the connection fails. Every other call
        of the report client reaches placement.
        """
        original = report.SchedulerReportClient.get
        failed = []

        def get(client, url, *args, **kwargs):
            if url == '/resource_providers?name=%s' % host and not failed:
                failed.append(url)
                if connect:
                    raise ks_exceptions.ConnectFailure('placement unreachable')
                response = requests.Response()
                response.status_code = 503
                response._content = b'{"errors": [{"status": 503}]}'
                return response
            return original(client, url, *args, **kwargs)

        with mock.patch.object(report.SchedulerReportClient, 'get', get):
            yield
        self.assertEqual(['/resource_providers?name=%s' % host], failed)

    def placement_aggregates(self, host):
        """The Placement aggregates of ``host``'s provider, and generation."""
        body = self.placement.get('/resource_providers/%s/aggregates'
                                  % self.rp[host], version='1.19').body
        return set(body['aggregates']), body['resource_provider_generation']

    def nova_hosts(self, aggregate):
        return self.admin_api.api_get('/os-aggregates/%s' % aggregate[
            'id']).body['aggregate']['hosts']

    def aggregate(self, zone, *hosts):
        """A zone's aggregate with ``hosts``, added through the API."""
        aggregate = self.admin_api.post_aggregate({'aggregate': {
            'name': 'agg-' + zone, 'availability_zone': zone}})
        for host in hosts:
            self.admin_api.add_host_to_aggregate(aggregate['id'], host)
        return aggregate

    def sync_aggregates(self):
        """``nova-manage placement sync_aggregates --verbose``: its code."""
        return manage.PlacementCommands().sync_aggregates(verbose=True)


class AggregatesTest(_Hosts):
    """Aggregate changes whose Placement call failed, and ones that did not."""

    def test_removal_that_missed_placement_keeps_the_host_in_the_zone(self):
        az1 = self.aggregate('az1', 'host1', 'host2')
        # host2 is also in an aggregate of Placement's own (as a sharing
        # provider's aggregate is), which no Nova aggregate mirrors.
        aggregates, generation = self.placement_aggregates('host2')
        self.assertEqual(200, self.placement.put(
            '/resource_providers/%s/aggregates' % self.rp['host2'], {
                'aggregates': sorted(aggregates | {SHARED}),
                'resource_provider_generation': generation},
            version='1.19').status)
        with self.placement_unavailable('host2'):
            self.admin_api.remove_host_from_aggregate(az1['id'], 'host2')
        # Nova accepted the removal; Placement still has host2 in az1.
        self.assertEqual(['host1'], self.nova_hosts(az1))
        self.assertEqual({az1['uuid'], SHARED},
                         self.placement_aggregates('host2')[0])

        # A boot into az1 lands on host2, no longer in the zone.
        server = self._create_server(az='az1', networks='none')
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        shown = self.at('2.96', 'get_server', server['id'])
        self.assertEqual(('nova', 'az1'), (
            shown['OS-EXT-AZ:availability_zone'],
            shown['pinned_availability_zone']))

        # sync_aggregates only adds: host2 stays in az1 in Placement.
        self.assertEqual(0, self.sync_aggregates())
        self.assertEqual({az1['uuid'], SHARED},
                         self.placement_aggregates('host2')[0])

        document = self.hosts(0)
        result, = document['results']
        self.assertEqual(('host2', self.rp['host2'], 'mismatched',
                          ['aggregate-stale']), (
            result['host'], result['provider_uuid'], result['status'],
            result['problems']))
        generation = self.placement_aggregates('host2')[1]
        self.assertEqual([{
            'reason': 'aggregate-stale', 'aggregate_uuid': az1['uuid'],
            'aggregate_name': 'agg-az1', 'provider_uuid': self.rp['host2'],
            'provider_generation': generation}], result['details'])
        self.assertEqual(
            ['openstack --os-placement-api-version 1.19 resource provider '
             'aggregate set --aggregate %s --generation %d %s' % (
                 SHARED, generation, self.rp['host2'])], result['remedy'])
        self.assertEqual({'aggregate-stale': 1},
                         self.problem_counts(document))
        self.assertEqual(document['results'],
                         self.hosts(0, '--host', 'host2')['results'])
        self.assertEqual([], self.hosts(4, '--host', 'host1')['results'])

        # The printed remedy, through the placement API; then Placement
        # too has host1 alone in az1, and host2 keeps the other aggregate.
        self.aggregate_set(result['remedy'][0])
        self.assertEqual({SHARED}, self.placement_aggregates('host2')[0])
        self.assertEqual(4, self.hosts(4)['exit_code'])
        server = self._create_server(az='az1', networks='none')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

    def test_addition_that_missed_placement_hides_the_zone(self):
        az1 = self.aggregate('az1', 'host1', 'host2')
        az2 = self.admin_api.post_aggregate({'aggregate': {
            'name': 'agg-az2', 'availability_zone': 'az2'}})
        with self.placement_unavailable('host3'):
            self.admin_api.add_host_to_aggregate(az2['id'], 'host3')
        self.assertEqual(['host3'], self.nova_hosts(az2))
        self.assertEqual(set(), self.placement_aggregates('host3')[0])
        # A connection failure fails the request, after Nova wrote its
        # side: host1 is a member of a plain aggregate in Nova alone.
        plain = self.admin_api.post_aggregate({'aggregate': {
            'name': 'agg-plain'}})
        with self.placement_unavailable('host1', connect=True):
            error = self.assertRaises(
                api_client.OpenStackApiException,
                self.admin_api.add_host_to_aggregate, plain['id'], 'host1')
        self.assertEqual(500, error.response.status_code)
        self.assertEqual(['host1'], self.nova_hosts(plain))
        self.assertEqual({az1['uuid']}, self.placement_aggregates('host1')[0])

        # The zone has an enabled host; a boot into it finds none.
        server = self._create_server(az='az2', networks='none',
                                     expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])

        document = self.hosts(0)
        self.assertEqual({'aggregate-missing': 2},
                         self.problem_counts(document))
        results = {r['host']: r for r in document['results']}
        self.assertEqual(['host1', 'host3'], sorted(results))
        for host, aggregate in (('host1', plain), ('host3', az2)):
            result = results[host]
            self.assertEqual((self.rp[host], 'mismatched',
                              ['aggregate-missing']), (
                result['provider_uuid'], result['status'],
                result['problems']))
            self.assertEqual([{
                'reason': 'aggregate-missing',
                'aggregate_uuid': aggregate['uuid'],
                'aggregate_name': aggregate['name'],
                'provider_uuid': self.rp[host]}], result['details'])
            self.assertEqual(
                ['nova-manage placement sync_aggregates --verbose'],
                result['remedy'])

        # sync_aggregates repairs both: the audit finds nothing, the boot
        # lands in the zone.
        self.assertEqual(0, self.sync_aggregates())
        self.assertEqual({az2['uuid']}, self.placement_aggregates('host3')[0])
        self.assertEqual({az1['uuid'], plain['uuid']},
                         self.placement_aggregates('host1')[0])
        self.assertEqual([], self.hosts(4)['results'])
        server = self._create_server(az='az2', networks='none')
        self.assertEqual('host3', server['OS-EXT-SRV-ATTR:host'])


class ProvidersTest(_Hosts):
    """Providers that no compute node backs, or two that back one."""

    def compute_nodes(self, host):
        """``[(uuid, deleted)]`` of ``host``'s compute node rows."""
        t = tables.compute_nodes
        with self.cell_engine.connect() as conn:
            return [tuple(row) for row in conn.execute(sa.select(
                t.c.uuid, t.c.deleted != 0).where(t.c.host == host))]

    def post_live_migration_fails(self):
        """A live migration from host2 whose destination's post step raises.

        The instance moves to host1; the migration's consumer keeps the
        source, host2.
        """
        server = self._create_server(networks='none')
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        with mock.patch('nova.compute.manager.ComputeManager.'
                        'post_live_migration_at_destination',
                        side_effect=RuntimeError('post fails')):
            self.admin_api.post_server_action(server['id'], {
                'os-migrateLive': {'host': 'host1',
                                   'block_migration': 'auto'}})
            migration = self._wait_for_migration_status(server, ['error'])
            self._wait_for_server_parameter(server, {
                'OS-EXT-STS:task_state': None})
        self.assertEqual('host1', self.server_host(server))
        return server, migration['uuid']

    def test_deleted_service_leaves_its_provider(self):
        flavor = self.api.get_flavors()[0]
        resources = dict(self._resources_from_flavor(flavor))
        server, migration = self.post_live_migration_fails()
        self.assertEqual({self.rp['host2']: resources}, {
            rp: a['resources'] for rp, a in
            self._get_allocations_by_server_uuid(migration).items()})

        # host2's service deleted: accepted, its compute node soft-deleted,
        # its provider left with the migration's allocation.
        self.computes['host2'].stop()
        service, = self.admin_api.get_services(host='host2',
                                               binary='nova-compute')
        self.admin_api.api_delete('/os-services/%s' % service['id'])
        self.assertEqual([], self.admin_api.get_services(host='host2'))
        self.assertEqual([(self.rp['host2'], True)],
                         self.compute_nodes('host2'))
        self.assertEqual(200, self.placement.get(
            '/resource_providers/%s' % self.rp['host2']).status)
        candidates = self.placement.get(
            '/allocation_candidates?resources=VCPU:1',
            version='1.29').body['provider_summaries']
        self.assertIn(self.rp['host2'], candidates)

        def orphan(allocations):
            document = self.hosts(0)
            result, = document['results']
            self.assertEqual((None, self.rp['host2'], 'mismatched',
                              ['provider-orphaned']), (
                result['host'], result['provider_uuid'], result['status'],
                result['problems']))
            detail, = result['details']
            self.assertEqual({
                'reason': 'provider-orphaned',
                'provider_uuid': self.rp['host2'], 'provider_name': 'host2',
                'allocations': allocations}, detail)
            self.assertTrue(result['remedy'])
            return result

        result = orphan([{'consumer_uuid': migration, 'kind': 'migration',
                          'resources': resources}])

        # The printed remedies, in order: placement audit --delete
        # removes the migration's allocation and leaves the empty
        # provider, which the audit still reports; deleting it, as the
        # next remedy says, leaves nothing to report.
        self.assertEqual([
            'nova-manage placement audit --resource_provider %s --verbose '
            '--delete' % self.rp['host2'],
            '# once it and the providers below it hold nothing:',
            'openstack resource provider delete %s' % self.rp['host2']],
            result['remedy'])
        self.assertEqual(4, manage.PlacementCommands().audit(
            verbose=True, provider_uuid=self.rp['host2'], delete=True))
        self.assertEqual({}, self._get_allocations_by_server_uuid(migration))
        result = orphan([])
        self.assertEqual(['openstack resource provider delete %s'
                          % self.rp['host2']], result['remedy'])
        self.assertEqual(204, self.placement.delete(
            '/resource_providers/%s' % self.rp['host2']).status)
        self.assertEqual([], self.hosts(4)['results'])

    def provider(self, name, parent=None):
        """A new provider in Placement; its uuid."""
        body = {'name': name}
        if parent:
            body['parent_provider_uuid'] = parent
        return self.placement.post('/resource_providers', body,
                                   version='1.20').body['uuid']

    def test_sharing_providers_are_not_orphans(self):
        """Providers that no compute node backs, as Nova tells them apart.

        A sharing provider (a root with MISC_SHARES_VIA_AGGREGATE, in an
        aggregate with host1, and a provider below it), and a stray root
        with a child. Nova's report client asks Placement which
        providers of host1's aggregates share: the sharing root alone.
        The audit reports every other root no compute node backs, the
        stray one, and nothing below a root by itself.
        """
        sharing = self.provider('shared-storage')
        below_sharing = self.provider('shared-storage-pool', sharing)
        stray = self.provider('stray')
        stray_child = self.provider('stray-child', stray)
        self._set_provider_traits(sharing, ['MISC_SHARES_VIA_AGGREGATE'])
        self._set_inventory(sharing, {'inventories': {
            'DISK_GB': {'total': 1000}}})
        self._set_aggregate(sharing, SHARED)
        self._set_aggregate(self.rp['host1'], SHARED)
        client = report.SchedulerReportClient()
        self.assertEqual([sharing], [
            p['uuid'] for p in client._get_sharing_providers(
                nova_context.get_admin_context(), [SHARED])])
        self.assertNotIn(below_sharing, [
            p['uuid'] for p in self.placement.get(
                '/resource_providers?required=MISC_SHARES_VIA_AGGREGATE',
                version='1.18').body['resource_providers']])

        document = self.hosts(0)
        result, = document['results']
        self.assertEqual((None, stray, ['provider-orphaned']), (
            result['host'], result['provider_uuid'], result['problems']))
        # It holds nothing: delete the child, then it.
        self.assertEqual(['openstack resource provider delete %s' % uuid
                          for uuid in (stray_child, stray)], result['remedy'])
        self.assertEqual({'provider-orphaned': 1},
                         self.problem_counts(document))

    def test_renamed_host_keeps_its_compute_node(self):
        """A compute node whose host was renamed: the rows are emulated.

        Nova 34 refuses to start a compute whose host name changed (since
        2023.1); older releases started it under the new name, with a new
        service row, and left the compute node, whose provider holds the
        servers' allocations, under the old one. The test renames the
        service row of a stopped compute the same way.
        """
        server = self._create_server(networks='none')
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.computes['host2'].stop()
        renamed = 'host2.example.org'
        t = tables.services
        with self.cell_engine.begin() as conn:
            self.assertEqual(1, conn.execute(t.update().where(
                t.c.host == 'host2').where(t.c.binary == 'nova-compute')
                .values(host=renamed)).rowcount)
        # The old name's provider keeps the server's allocation.
        self.assertEqual([self.rp['host2']], list(
            self._get_allocations_by_server_uuid(server['id'])))
        document = self.hosts(0)
        result, = document['results']
        self.assertEqual(('host2', self.rp['host2'], 'mismatched',
                          ['provider-duplicate']), (
            result['host'], result['provider_uuid'], result['status'],
            result['problems']))
        self.assertEqual([{
            'reason': 'provider-duplicate', 'hypervisor_hostname': 'host2',
            'compute_node_uuids': [self.rp['host2']],
            'provider_uuids': [self.rp['host2']], 'service_host': 'host2'}],
            result['details'])
        self.assertEqual({'provider-duplicate': 1},
                         self.problem_counts(document))


class CleanPathsTest(_Hosts):
    """Boots, moves and aggregate changes that end well."""

    def test_paths_that_end_well_report_nothing(self):
        az1 = self.aggregate('az1', 'host1', 'host2')
        self.aggregate('az2', 'host3')
        self.admin_api.remove_host_from_aggregate(az1['id'], 'host2')
        self.admin_api.add_host_to_aggregate(az1['id'], 'host2')
        flavor1, flavor2 = self.api.get_flavors()[:2]
        booted = self._create_server(az='az1', networks='none')
        confirmed = self._confirm_resize(self._resize_server(
            self._create_server(networks='none'), flavor2['id']))
        reverted = self._revert_resize(self._resize_server(
            self._create_server(networks='none'), flavor2['id']))
        migrated = self._confirm_resize(self._migrate_server(
            self._create_server(networks='none')))
        live = self._live_migrate(self._create_server(networks='none'))
        evacuated = self._create_server(networks='none')
        source = evacuated['OS-EXT-SRV-ATTR:host']
        self.host_down(source)
        evacuated = self._evacuate_server(evacuated)
        self.restart_compute_service(self.computes[source])
        service, = self.admin_api.get_services(host=source,
                                               binary='nova-compute')
        self.admin_api.put_service_force_down(service['id'], False)
        self._wait_for_migration_status(evacuated, ['completed'])
        self.assertEqual(6, len({s['id'] for s in (
            booted, confirmed, reverted, migrated, live, evacuated)}))
        document = self.hosts(4)
        self.assertEqual([], document['results'])
        self.assertEqual((3, 3, 0), (
            document['summary']['hosts_checked'],
            document['summary']['providers_checked'],
            document['summary']['mismatched']))


def load_tests(loader, tests, pattern):
    """The tests of this module where Nova's services can run.

    Where the framework cannot be imported, ``test_real_services_compat``
    reports it.
    """
    suite = unittest.TestSuite()
    if services.available():
        for case in (AggregatesTest, ProvidersTest, CleanPathsTest):
            suite.addTests(loader.loadTestsFromTestCase(case))
    return suite
