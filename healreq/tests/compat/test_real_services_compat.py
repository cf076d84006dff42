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


"""Nova's own services, before and after nova-heal heals their databases.

Nova's functional test framework, which the nova wheel ships, runs the
real API (through wsgi-intercept), conductor, scheduler and fake-driver
computes against an in-process placement. Nova's own paths produce the
drift (a forced cross-zone live migration at 2.67; a spec that lost its
group or its row, set in the database); nova-heal heals it; then the
same services move the servers again. A spec naming a group deleted
through the API is an error nova-heal leaves alone; the same services
show what its moves do.

Only in the nova-compat environment (Nova 34.0.0), which installs what
the framework needs besides nova (placement, oslotest, wsgi-intercept).
Elsewhere this module holds no test; there, with HEALREQ_TEST_REQUIRE_NOVA
set, a framework that cannot be imported is a failure.
"""

import json
import unittest

import sqlalchemy as sa
import testtools

from healreq.db import tables
from healreq.tests.compat import base
from healreq.tests.compat import services

if services.available():
    from nova import context as nova_context
    from nova import objects
    from nova.tests.functional.api import client as api_client

DATA = services.DATA
# The hosts' zones, and the weights that make the scheduler's choice
# among the hosts it may use predictable (the heaviest wins).
ZONES = {'az1': ['host1'], 'az2': ['host2', 'host3'], 'az3': ['host4']}


class AvailabilityZoneTest(services.Services):
    """A pin that a forced live migration left behind, healed by policy."""

    weights = {'host4': 100, 'host1': 50, 'host3': 20, 'host2': 10}

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3', 'host4')
        self.zones(ZONES)
        server = self._create_server(az='az1', networks='none')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        # Nova's own path to the drift: a forced live migration (2.67)
        # to a host of another zone moves the instance's zone, not the
        # spec's pin.
        self.at('2.67', 'post_server_action', server['id'], {
            'os-migrateLive': {'host': 'host2', 'block_migration': 'auto',
                               'force': True}})
        self._wait_for_migration_status(server, ['completed'])
        self.server = self._wait_for_server_parameter(server, {
            'OS-EXT-SRV-ATTR:host': 'host2', 'status': 'ACTIVE'})
        shown = self.at('2.96', 'get_server', server['id'])
        self.assertEqual(('az2', 'az2', 'az1', 'az1'), (
            self.instance_zone(server), shown['OS-EXT-AZ:availability_zone'],
            shown['pinned_availability_zone'],
            self.spec(server)['availability_zone']))

    def _heal_and_migrate(self, policy, pinned):
        found = self.heal_ok('--az-policy', policy)
        self.assertEqual({self.server['id']: ('healed', 'az-pin-differs')},
                         found)
        self.assertEqual(pinned, self.spec(self.server)['availability_zone'])
        self.assertEqual(pinned, self.at('2.96', 'get_server',
                                         self.server['id'])[
            'pinned_availability_zone'])
        server = self._migrate_server(self.server)
        return self._confirm_resize(server)

    def test_reported_pin_takes_moves_back_to_the_old_zone(self):
        # --az-policy report counts the drift and writes nothing: the next
        # cold migration is filtered back to az1, where host1 is.
        code, document = self.heal()
        self.assertEqual(0, code, document)
        self.assertEqual([(self.server['id'], 'drifted', 'az-pin-differs')],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in document['results']])
        self.assertEqual('az1', self.spec(self.server)['availability_zone'])
        server = self._confirm_resize(self._migrate_server(self.server))
        self.assertEqual(('host1', 'az1'), (server['OS-EXT-SRV-ATTR:host'],
                                            self.instance_zone(server)))

    def test_repinned_instance_stays_in_its_new_zone(self):
        # host4 (az3) and host1 (az1, the old pin) weigh more than host3.
        server = self._heal_and_migrate('repin', 'az2')
        self.assertEqual(('host3', 'az2'), (server['OS-EXT-SRV-ATTR:host'],
                                            self.instance_zone(server)))

    def test_unpinned_instance_goes_anywhere(self):
        # The heaviest host, in a zone neither pinned nor current.
        server = self._heal_and_migrate('unpin', None)
        self.assertEqual(('host4', 'az3'), (server['OS-EXT-SRV-ATTR:host'],
                                            self.instance_zone(server)))


class ServerGroupTest(services.Services):
    """An anti-affinity member whose spec lost its group."""

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3')
        self.group, (self.lost, self.peer) = self.anti_affinity_members(
            'lost', 'peer')
        self.assertEqual(['host1', 'host2'], [
            s['OS-EXT-SRV-ATTR:host'] for s in (self.lost, self.peer)])
        booted = self.spec(self.lost)
        self.assertEqual(({'group': [self.group['id']]}, self.group['id']), (
            booted['scheduler_hints'],
            booted['instance_group'][DATA]['uuid']))
        self.edit_spec(self.lost, instance_group=None, scheduler_hints={})

    def test_moves_respect_anti_affinity_after_heal(self):
        # Before: the conductor crashes setting up the group of a member
        # whose spec has none; the server stays where it is.
        self.admin_api.post_server_action(self.lost['id'], {'migrate': None})
        self.assertEqual(
            'request_spec.instance_group.hosts = list(group_info.hosts)',
            self.action_error(self.lost, 'migrate'))
        self.assertEqual('host1', self.server_host(self.lost))

        self.assertEqual({self.lost['id']: ('healed', 'group-lost')},
                         self.heal_ok())
        healed = self.spec(self.lost)
        self.assertEqual(({'group': [self.group['id']]}, self.group['id']), (
            healed['scheduler_hints'],
            healed['instance_group'][DATA]['uuid']))

        # A cold migration goes to the one host without the peer, and a
        # live migration back to the other one.
        server = self._confirm_resize(self._migrate_server(self.lost))
        self.assertEqual('host3', server['OS-EXT-SRV-ATTR:host'])
        server = self._live_migrate(server)
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])

        # A forced evacuation onto the peer's host: the destination
        # compute checks the group policy of the healed hint and refuses;
        # the server is left in ERROR on its (down) host, the peer alone.
        self.host_down('host1')
        self.at('2.67', 'post_server_action', server['id'], {
            'evacuate': {'host': 'host2', 'force': True}})
        migration = self._wait_for_migration_status(server, ['failed'])
        self.assertEqual(('host1', 'host2'), (migration['source_compute'],
                                              migration['dest_compute']))
        server = self._wait_for_server_parameter(server, {
            'status': 'ERROR', 'OS-EXT-SRV-ATTR:host': 'host1'})
        self.assertEqual('Anti-affinity instance group policy was violated',
                         server['fault']['message'])
        self.assertEqual('host2', self.server_host(self.peer))


class RecreatedSpecTest(services.Services):
    """A member of an anti-affinity group whose spec row was deleted."""

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3')
        self.zones({'az1': ['host1', 'host2', 'host3']})
        self.group, (self.server, self.peer) = self.anti_affinity_members(
            'server', 'peer')
        self.delete_spec(self.server)

    def detail(self):
        return self.at('2.100', 'api_get', '/servers/detail',
                       check_response_status=[200, 400])

    def test_detail_and_every_move_work_again(self):
        peer_host = self.peer['OS-EXT-SRV-ATTR:host']
        # Before: the list fails its response validation, a move fails.
        self.assertEqual(400, self.detail().status)
        error = self.assertRaises(api_client.OpenStackApiException,
                                  self.admin_api.post_server_action,
                                  self.server['id'], {'migrate': None})
        self.assertEqual(500, error.response.status_code)

        self.assertEqual({self.server['id']: ('healed', 'spec-missing')},
                         self.heal_ok('--create-missing'))
        detail = self.detail()
        self.assertEqual(200, detail.status)
        shown, = [s for s in detail.body['servers']
                  if s['id'] == self.server['id']]
        self.assertEqual(('az1', {'group': [self.group['id']]}), (
            shown['pinned_availability_zone'], shown['scheduler_hints']))

        hosts = []
        server = self._confirm_resize(self._migrate_server(self.server))
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        server = self._live_migrate(server)
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        flavor = self.api.get_flavors()[1]['id']
        server = self._confirm_resize(self._resize_server(server, flavor))
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        server = self._rebuild_server(
            server, '155d900f-4e14-4e4c-a73d-069cbf4541e6')
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        self._shelve_server(server)
        server = self._unshelve_server(server)
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        self.host_down(server['OS-EXT-SRV-ATTR:host'])
        # Evacuated servers are stopped from 2.95 on.
        server = self._evacuate_server(server)
        hosts.append(server['OS-EXT-SRV-ATTR:host'])
        self.assertNotIn(peer_host, hosts)
        self.assertEqual(['host3', 'host1', 'host3', 'host3', 'host1',
                          'host3'], hosts)


class DeletedGroupTest(services.Services):
    """Anti-affinity members whose group was deleted through the API.

    Nova loads such a spec without the group and without its hint, so
    nothing enforces the group's policy any more: each move of one member
    may land on the other's host (host2, which the weights prefer).
    """

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3')
        self.group, (self.server, self.peer) = self.anti_affinity_members(
            'server', 'peer')
        self.assertEqual(['host1', 'host2'], [
            s['OS-EXT-SRV-ATTR:host'] for s in (self.server, self.peer)])
        self.booted = self.spec(self.server)
        self.assertEqual(({'group': [self.group['id']]}, self.group['id']), (
            self.booted['scheduler_hints'],
            self.booted['instance_group'][DATA]['uuid']))
        # Any microversion deletes a group, members or not; Nova removes
        # the memberships and leaves the members' specs as they are.
        self.at('2.1', 'delete_server_group', self.group['id'])
        self.assertEqual([], self.at('2.64', 'get_server_groups',
                                     all_projects=True))
        self.assertEqual(self.booted, self.spec(self.server))
        self.gone = ('error', 'spec-group-gone')

    def heal_errors(self, *args):
        """Heal, which must exit 2; ``{uuid: (status, reason)}``."""
        code, document = self.heal(*args)
        self.assertEqual(2, code, document)
        return {r['instance_uuid']: (r['status'], r['reason'])
                for r in document['results']}

    def heal_leaves_both(self):
        self.assertEqual({self.server['id']: self.gone,
                          self.peer['id']: self.gone}, self.heal_errors())

    def test_reported_and_never_written(self):
        expected = {self.server['id']: self.gone, self.peer['id']: self.gone}
        self.assertEqual(expected, self.heal_errors('--dry-run'))
        self.assertEqual(expected, self.heal_errors())
        self.assertEqual(self.booted, self.spec(self.server))

    def test_cold_migration_goes_to_the_peer_and_drops_the_group(self):
        self.heal_leaves_both()
        server = self._confirm_resize(self._migrate_server(self.server))
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('host2', self.server_host(self.peer))
        # The conductor saves the spec as Nova loaded it: no group, no
        # hint. It is consistent from then on.
        moved = self.spec(self.server)
        self.assertEqual((None, {}), (moved['instance_group'],
                                      moved['scheduler_hints']))
        self.assertEqual({self.peer['id']: self.gone}, self.heal_errors())

    def test_live_migration_goes_to_the_peer(self):
        self.heal_leaves_both()
        server = self._live_migrate(self.server)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(self.booted, self.spec(self.server))
        self.heal_leaves_both()

    def test_evacuation_goes_to_the_peer(self):
        self.heal_leaves_both()
        self.host_down('host1')
        # Evacuated servers are stopped from 2.95 on.
        server = self._evacuate_server(self.server, expected_host='host2')
        self.assertNotIn('fault', server)
        self.assertEqual(self.booted, self.spec(self.server))
        self.heal_leaves_both()

    def test_evacuation_with_the_hint_alone_goes_to_the_peer(self):
        # A spec naming the deleted group by its hint alone: Nova keeps
        # the hint, and the destination's group policy check, which
        # looks the group up by it, finds none and lets the server in.
        self.edit_spec(self.server, instance_group=None)
        self.heal_leaves_both()
        self.host_down('host1')
        server = self._evacuate_server(self.server, expected_host='host2')
        self.assertNotIn('fault', server)
        self.assertEqual(({'group': [self.group['id']]}, None), (
            self.spec(self.server)['scheduler_hints'],
            self.spec(self.server)['instance_group']))
        self.heal_leaves_both()


class RebuildHintTest(services.Services):
    """A rebuild with a new image saves its internal hint and forced host.

    The spec of ``server`` and of ``moved`` lacks is_bfv (as specs from
    before Rocky do): the conductor's is_bfv heal then saves the spec the
    rebuild sent, with ``_nova_check_type`` and the forced host and
    node. The twin's spec keeps is_bfv, and its rebuild saves nothing.
    """

    weights = {'host1': 100, 'host2': 10}
    IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'
    NEW_IMAGE = 'a2459075-d96c-40d5-893e-577ff92e721c'
    HINTS = {'rack': ['r1']}

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2')
        self.server, self.moved, self.twin = [
            self._rebuilt(name, legacy=name != 'twin')
            for name in ('server', 'moved', 'twin')]

    def _rebuilt(self, name, legacy):
        server = self._wait_for_state_change(self.api.post_server({
            'server': self._build_server(name=name, image_uuid=self.IMAGE,
                                         networks='none'),
            'os:scheduler_hints': self.HINTS}), 'ACTIVE')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        if legacy:
            self.drop_is_bfv(server)
        return self._rebuild_server(server, self.NEW_IMAGE)

    def drop_is_bfv(self, server):
        t = tables.request_specs
        with self.api_engine.begin() as conn:
            spec = json.loads(conn.execute(sa.select(t.c.spec).where(
                t.c.instance_uuid == server['id'])).scalar())
            del spec[DATA]['is_bfv']
            conn.execute(t.update().where(
                t.c.instance_uuid == server['id']).values(
                spec=json.dumps(spec)))

    def allocated_hosts(self, server):
        """The hosts whose providers hold ``server``'s allocations."""
        providers = self._get_allocations_by_server_uuid(server['id'])
        return sorted(host for host in ('host1', 'host2')
                      if self._get_provider_uuid_by_host(host) in providers)

    def test_moves_claim_the_destination_after_heal(self):
        for server in (self.server, self.moved):
            stored = self.spec(server)
            self.assertEqual(
                (dict(self.HINTS, _nova_check_type=['rebuild']), ['host1'],
                 ['host1']),
                (stored['scheduler_hints'], stored['force_hosts'],
                 stored['force_nodes']))
        twin = self.spec(self.twin)
        self.assertEqual((self.HINTS, None, None), (
            twin['scheduler_hints'], twin['force_hosts'],
            twin['force_nodes']))
        # Before: consistent to the old code; a cold migration succeeds
        # and claims nothing: the instance has no allocations at all.
        server = self._confirm_resize(self._migrate_server(self.moved))
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual([], self.allocated_hosts(server))

        reason = ('healed', 'internal-hint-persisted')
        self.assertEqual({self.server['id']: reason,
                          self.moved['id']: reason}, self.heal_ok())
        healed = self.spec(self.server)
        self.assertEqual((self.HINTS, None, None), (
            healed['scheduler_hints'], healed['force_hosts'],
            healed['force_nodes']))
        self.assertEqual(4, self.heal()[0])

        # After: each move claims its destination, as the twin's does.
        for server in (self.server, self.twin):
            server = self._confirm_resize(self._migrate_server(server))
            self.assertEqual(('host2', ['host2']), (
                server['OS-EXT-SRV-ATTR:host'],
                self.allocated_hosts(server)))
            self.assertFlavorMatchesAllocation(
                server['flavor'] if 'vcpus' in server['flavor'] else
                self.api.get_flavor(server['flavor']['id']), server['id'],
                self._get_provider_uuid_by_host('host2'))
            server = self._live_migrate(server)
            self.assertEqual(('host1', ['host1']), (
                server['OS-EXT-SRV-ATTR:host'],
                self.allocated_hosts(server)))


class GoneSameHostTest(services.Services):
    """A server booted next to another (same_host) that was deleted.

    SameHostFilter passes only the hosts that run an instance the hint
    names: with it deleted, every move of the server ends in NoValidHost
    until the hint is pruned.
    """

    def setUp(self):
        self.flags(enabled_filters=[
            'ComputeFilter', 'ComputeCapabilitiesFilter',
            'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
            'ServerGroupAffinityFilter', 'SameHostFilter',
            'DifferentHostFilter'], group='filter_scheduler')
        super().setUp()
        self.start_computes('host1', 'host2')
        self.neighbour = self._create_server(name='neighbour',
                                             networks='none')
        self.server = self._wait_for_state_change(
            self.admin_api.post_server({
                'server': self._build_server(name='server',
                                             networks='none'),
                'os:scheduler_hints': {
                    'same_host': [self.neighbour['id']]}}), 'ACTIVE')
        self.host = self.server_host(self.server)
        self.assertEqual(self.server_host(self.neighbour), self.host)
        self._delete_server(self.neighbour)
        self.booted = self.spec(self.server)

    def test_cold_migration_fails_until_the_hint_is_pruned(self):
        self.admin_api.post_server_action(self.server['id'],
                                          {'migrate': None})
        self.assertIn('NoValidHost', self.action_error(self.server,
                                                       'migrate') or '')
        self.assertEqual(self.host, self.server_host(self.server))
        gone = ('drifted', 'same-host-gone')
        code, document = self.heal('--dry-run')
        self.assertEqual(0, code, document)
        found = {r['instance_uuid']: (r['status'], r['reason'])
                 for r in document['results']}
        self.assertEqual({self.server['id']: gone}, found)
        # By default, reported and never written.
        self.assertEqual({self.server['id']: gone}, self.heal_ok())
        self.assertEqual(self.booted, self.spec(self.server))
        self.assertEqual({self.server['id']: ('healed', 'same-host-gone')},
                         self.heal_ok('--hint-policy', 'prune'))
        self.assertEqual({}, self.spec(self.server)['scheduler_hints'])
        server = self._confirm_resize(self._migrate_server(self.server))
        self.assertNotEqual(self.host, server['OS-EXT-SRV-ATTR:host'])


class PropagatedFlavorTest(services.Services):
    """A flavor's extra specs changed, and a spec rewritten from them.

    The operator adds a required trait to the flavor through the API and
    propagates the flavor's current definition into the server's spec as
    such scripts do, through Nova's objects. Only host3 has the trait; the
    weights prefer host1, then host2.
    """

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2', 'host3')
        flavor_id = self._create_flavor(
            name='s1.ssd', extra_spec={'hw:cpu_policy': 'shared'})
        self.server = self._create_server(flavor_id=flavor_id,
                                          networks='none')
        self.assertEqual('host1', self.server['OS-EXT-SRV-ATTR:host'])
        self.booted = self.spec(self.server)
        self.admin_api.post_extra_spec(flavor_id, {
            'extra_specs': {'trait:CUSTOM_SSD': 'required'}})
        self._create_trait('CUSTOM_SSD')
        self._set_provider_traits(self._get_provider_uuid_by_host('host3'),
                                  ['CUSTOM_SSD'])
        context = nova_context.get_admin_context()
        spec = objects.RequestSpec.get_by_instance_uuid(context,
                                                        self.server['id'])
        spec.flavor = objects.Flavor.get_by_flavor_id(context, flavor_id)
        spec.save()
        self.propagated = self.spec(self.server)
        self.assertEqual(
            ({'hw:cpu_policy': 'shared'},
             {'hw:cpu_policy': 'shared', 'trait:CUSTOM_SSD': 'required'}),
            (self.booted['flavor'][DATA]['extra_specs'],
             self.propagated['flavor'][DATA]['extra_specs']))

    def test_left_alone_and_followed_by_default(self):
        for args in (('--dry-run',), ()):
            code, document = self.heal(*args)
            self.assertEqual(0, code, document)
            self.assertEqual(
                [(self.server['id'], 'drifted', 'flavor-propagated',
                  ['flavor'])],
                [(r['instance_uuid'], r['status'], r['reason'],
                  r['reported_only']) for r in document['results']])
            self.assertIn('trait:CUSTOM_SSD',
                          document['results'][0]['detail'])
            self.assertEqual(1, document['summary']['flavor_outdated'])
            self.assertEqual(self.propagated, self.spec(self.server))
        # The next live migration follows the operator's new rule.
        server = self._live_migrate(self.server)
        self.assertEqual('host3', server['OS-EXT-SRV-ATTR:host'])

    def test_healed_with_the_instance_policy(self):
        self.assertEqual(
            {self.server['id']: ('healed', 'flavor-propagated')},
            self.heal_ok('--flavor-policy', 'instance'))
        self.assertEqual(self.booted['flavor'][DATA]['extra_specs'],
                         self.spec(self.server)['flavor'][DATA][
                             'extra_specs'])
        code, document = self.heal('--flavor-policy', 'instance')
        self.assertEqual(4, code, document)
        # The embedded flavor again: host2 weighs most after host1.
        server = self._live_migrate(self.server)
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])


class FrameworkTest(testtools.TestCase):

    def test_framework_imports(self):
        self.fail("Nova's functional test framework cannot be imported: %s"
                  % services.IMPORT_ERROR)


def load_tests(loader, tests, pattern):
    """The tests of this module where they can run.

    With Nova 34.0.0 installed, the framework must import when
    HEALREQ_TEST_REQUIRE_NOVA is set; with another Nova there are none.
    """
    suite = unittest.TestSuite()
    if services.available():
        for case in (AvailabilityZoneTest, ServerGroupTest,
                     RecreatedSpecTest, DeletedGroupTest,
                     RebuildHintTest, GoneSameHostTest,
                     PropagatedFlavorTest):
            suite.addTests(loader.loadTestsFromTestCase(case))
    elif services.IMPORT_ERROR is not None and base.REQUIRE_NOVA:
        suite.addTests(loader.loadTestsFromTestCase(FrameworkTest))
    return suite
