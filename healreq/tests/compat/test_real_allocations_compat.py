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


"""Placement allocations that Nova's own services leave behind.

The same services as ``test_real_services_compat`` (Nova 34.0.0's
functional framework: real API, conductor, scheduler, two fake-driver
computes and the placement fixture), with the placement database in a
SQLite file too, named by ``[placement_database]/connection`` in a
placement.conf, as an operator's placement.conf names it.

Each failure path makes its drift through Nova's real code: the virt
driver or compute manager method named fails (patched to raise, as
Nova's own functional regression tests make them fail), and Nova's
error handling leaves Placement as it leaves it in production. The
tests pin what each path leaves, consumer by consumer and provider by
provider, read through the placement API: these are the cases that
``nova-heal allocations`` must find, and the consistent paths and the
operations held in progress are those it must leave alone.

Service set-ups are slow (seconds each), so each test runs several
servers through their paths on one set-up.
"""

import contextlib
import threading
import unittest
from unittest import mock

import sqlalchemy as sa

from healreq.db import tables
from healreq.tests.compat import placement_services
from healreq.tests.compat import services

if services.available():
    from nova.cmd import manage
    from nova import test as nova_test


def _failure(name):
    """What a patched Nova method raises: a failure of ``name``."""
    return nova_test.TestingException('%s fails' % name)


class _Allocations(placement_services.FileBackedPlacement):
    """Two computes, and what Placement holds per consumer."""

    def setUp(self):
        super().setUp()
        self.start_computes('host1', 'host2')
        self.providers = {self._get_provider_uuid_by_host(host): host
                          for host in ('host1', 'host2')}
        self.flavor1, self.flavor2 = self.api.get_flavors()[:2]

    # -- Placement and the rows ----------------------------------------

    def held(self, consumer_uuid):
        """``{host: resources}`` that ``consumer_uuid`` holds in Placement."""
        return {self.providers[rp]: allocation['resources']
                for rp, allocation in self._get_allocations_by_server_uuid(
                    consumer_uuid).items()}

    def resources(self, flavor):
        return dict(self._resources_from_flavor(flavor))

    def migrations(self, server):
        """``[(uuid, status, deleted)]`` of ``server``'s migration rows.

        Read from the cell database, soft-deleted rows included, which
        the API does not show.
        """
        t = tables.migrations
        with self.cell_engine.connect() as conn:
            return [tuple(row) for row in conn.execute(
                sa.select(t.c.uuid, t.c.status, t.c.deleted != 0).where(
                    t.c.instance_uuid == server['id']).order_by(t.c.id))]

    def migration(self, server):
        """The uuid and status of ``server``'s one migration."""
        (uuid, status, deleted), = self.migrations(server)
        self.assertFalse(deleted)
        return uuid, status

    def flavor_name(self, server):
        return self.admin_api.get_server(server['id'])['flavor'][
            'original_name']

    def soft_delete_migration(self, migration_uuid):
        """Soft-delete a migration row by hand, as Nova deletes rows."""
        t = tables.migrations
        with self.cell_engine.begin() as conn:
            self.assertEqual(1, conn.execute(t.update().where(
                t.c.uuid == migration_uuid).values(
                deleted=t.c.id, deleted_at=sa.func.now())).rowcount)

    def boot(self, name, flavor=None):
        server = self._create_server(
            name=name, flavor_id=(flavor or self.flavor1)['id'],
            networks='none')
        self.assertEqual('host1', server['OS-EXT-SRV-ATTR:host'])
        return server

    def resized(self, server, flavor=None):
        """``server`` resized to host2, held in VERIFY_RESIZE."""
        server = self._resize_server(server, (flavor or self.flavor2)['id'])
        self.assertEqual('host2', server['OS-EXT-SRV-ATTR:host'])
        return server

    def live_migrate_action(self, server):
        self.admin_api.post_server_action(server['id'], {
            'os-migrateLive': {'host': None, 'block_migration': 'auto'}})

    @contextlib.contextmanager
    def holding(self, target, action):
        """Run ``action``; hold Nova's method ``target`` during the block.

        The block starts once a service has entered the method, with what
        ``action`` returned; when it ends, the method goes on as Nova's.
        """
        entered, release = threading.Event(), threading.Event()
        original = mock.patch(target).get_original()[0]

        def waiting(*args, **kwargs):
            entered.set()
            release.wait(60)
            return original(*args, **kwargs)

        with mock.patch(target, waiting):
            try:
                returned = action()
                self.assertTrue(entered.wait(30), '%s never called' % target)
                yield returned
            finally:
                release.set()

    # -- nova-heal allocations -----------------------------------------

    def audit(self, *args):
        """Run ``nova-heal allocations``: its exit code and JSON report."""
        return self.run_audit('allocations', *args)

    def audited(self, code, *args):
        """Audit, which must exit ``code``; its results by instance.

        ``{uuid: (status, reason or problems, {(consumer, kind, host):
        (found, expected)})}``, every result of the report.
        """
        exit_code, document = self.audit(*args)
        self.assertEqual(code, exit_code, document)
        self.assertEqual([], document['cell_errors'])
        return {r['instance_uuid']: self.outcome(r)
                for r in document['results']}, document

    def outcome(self, result):
        """``(status, reason or problems, consumers)`` of a result."""
        consumers = {}
        for c in result['consumers']:
            host = self.providers[c['provider_uuid']]
            consumers[c['consumer_uuid'], c['kind'], host] = (
                c['found'], c['expected'])
        return (result['status'],
                result.get('reason') or tuple(sorted(result['problems'])),
                consumers)

    def run_remedies(self, document):
        """Run every printed remedy, in order, through Nova and Placement.

        Each command becomes its call in the framework:
        ``nova-manage placement heal_allocations`` is PlacementCommands,
        ``openstack resource provider allocation delete`` the placement
        API.
        """
        ran = []
        for result in document['results']:
            for command in result['remedy']:
                if not command.startswith('#'):
                    self.run_remedy(command.split())
                    ran.append(command)
        return ran

    def run_remedy(self, words):
        if words[:3] == ['nova-manage', 'placement', 'heal_allocations']:
            self.assertEqual(['--instance', '--force'], words[3::2])
            self.assertEqual(0, manage.PlacementCommands().heal_allocations(
                instance_uuid=words[4], force=True))
        elif words[:5] == ['openstack', 'resource', 'provider',
                           'allocation', 'delete']:
            self.assertEqual(204, self.placement.delete(
                '/allocations/%s' % words[5]).status)
        else:
            # The fake driver reports no PCPU, so no remedy here needs
            # ``allocation set``.
            self.fail('A remedy this test does not translate: %s'
                      % ' '.join(words))

    # -- Nova's failure paths ------------------------------------------

    def resize_finish_fails(self, name):
        """A resize whose ``finish_migration`` raises on host2."""
        server = self.boot(name)
        with mock.patch('nova.virt.fake.FakeDriver.finish_migration',
                        side_effect=_failure('finish_migration')):
            self.api.post_server_action(server['id'], {
                'resize': {'flavorRef': self.flavor2['id']}})
            self._wait_for_migration_status(server, ['error'])
            server = self._wait_for_state_change(server, 'ERROR')
        return server

    def revert_destroy_fails(self, name):
        """A resize revert whose ``driver.destroy`` raises on host2."""
        server = self.resized(self.boot(name))
        with mock.patch('nova.virt.fake.FakeDriver.destroy',
                        side_effect=_failure('destroy')):
            self.api.post_server_action(server['id'], {'revertResize': None})
            self._wait_for_migration_status(server, ['error'])
            server = self._wait_for_state_change(server, 'ERROR')
        return server

    def live_migration_fails(self, name):
        """A live migration whose source ``driver.live_migration`` raises."""
        server = self.boot(name)
        with mock.patch('nova.virt.fake.FakeDriver.live_migration',
                        side_effect=_failure('live_migration')):
            self.live_migrate_action(server)
            self._wait_for_migration_status(server, ['error'])
            server = self._wait_for_server_parameter(server, {
                'OS-EXT-STS:task_state': None})
        return server

    def post_live_migration_fails(self, name):
        """A live migration whose destination's post step raises."""
        server = self.boot(name)
        with mock.patch('nova.compute.manager.ComputeManager.'
                        'post_live_migration_at_destination',
                        side_effect=_failure('post_live_migration')):
            self.live_migrate_action(server)
            self._wait_for_migration_status(server, ['error'])
            server = self._wait_for_server_parameter(server, {
                'OS-EXT-STS:task_state': None})
        return server


class FailurePathsTest(_Allocations):
    """The failure paths that leave allocations disagreeing with Nova."""

    def test_failure_paths_leave_placement_disagreeing(self):
        old, new = self.resources(self.flavor1), self.resources(self.flavor2)

        # The instance is back at its old flavor, in ERROR on host2; its
        # allocation there is the new flavor's (bug 1825537's outcome).
        finish = self.resize_finish_fails('finish')
        finish_migration, status = self.migration(finish)
        self.assertEqual(('error', 'host2', self.flavor1['name']), (
            status, finish['OS-EXT-SRV-ATTR:host'], self.flavor_name(finish)))
        self.assertEqual(({'host2': new}, {}), (
            self.held(finish['id']), self.held(finish_migration)))

        # The failed revert: the migration consumer keeps the old flavor
        # on host1.
        revert = self.revert_destroy_fails('revert')
        revert_migration, status = self.migration(revert)
        self.assertEqual('error', status)
        self.assertEqual(({'host2': new}, {'host1': old}), (
            self.held(revert['id']), self.held(revert_migration)))

        # The failed live migration: the instance runs on host1, but its
        # own consumer holds host2 and the migration's holds host1.
        live = self.live_migration_fails('live')
        live_migration, status = self.migration(live)
        self.assertEqual(('error', 'host1'), (
            status, live['OS-EXT-SRV-ATTR:host']))
        self.assertEqual(({'host2': old}, {'host1': old}), (
            self.held(live['id']), self.held(live_migration)))

        # post_live_migration_at_destination failed: the instance moved,
        # the migration consumer still holds host1.
        post = self.post_live_migration_fails('post')
        post_migration, status = self.migration(post)
        self.assertEqual(('error', 'host2'), (status, self.server_host(post)))
        self.assertEqual(({'host2': old}, {'host1': old}), (
            self.held(post['id']), self.held(post_migration)))

        # Either leftover, then the instance deleted: the migration
        # consumer keeps its allocation, its row soft-deleted with it.
        gone_revert = self.revert_destroy_fails('gone-revert')
        gone_post = self.post_live_migration_fails('gone-post')
        gone = {}
        for server in (gone_revert, gone_post):
            gone[server['id']], _status = self.migration(server)
            self._delete_server(server)
            (uuid, _status, deleted), = self.migrations(server)
            self.assertTrue(deleted)
            self.assertEqual({}, self.held(server['id']))
            self.assertEqual({'host1': old}, self.held(uuid))

        # An ended migration's row soft-deleted by hand while its
        # consumer still holds resources.
        by_hand = self.post_live_migration_fails('by-hand')
        by_hand_migration, _status = self.migration(by_hand)
        self.soft_delete_migration(by_hand_migration)
        self.assertEqual(({'host2': old}, {'host1': old}), (
            self.held(by_hand['id']), self.held(by_hand_migration)))

        # The audit finds each of them, with its consumers, and nothing
        # else; its remedies, run in order, make Placement agree.
        leftover = ('leftover-migration',)

        def left(migration):
            return {(migration, 'migration', 'host1'): (old, {})}

        found, document = self.audited(0)
        self.assertEqual({
            finish['id']: ('mismatch', ('wrong-flavor',), {
                (finish['id'], 'instance', 'host2'): (new, old)}),
            revert['id']: ('mismatch', leftover, left(revert_migration)),
            live['id']: ('mismatch', ('leftover-migration', 'wrong-provider'),
                         {**left(live_migration),
                          (live['id'], 'instance', 'host1'): ({}, old),
                          (live['id'], 'instance', 'host2'): (old, {})}),
            post['id']: ('mismatch', leftover, left(post_migration)),
            gone_revert['id']: ('mismatch', leftover,
                                left(gone[gone_revert['id']])),
            gone_post['id']: ('mismatch', leftover,
                              left(gone[gone_post['id']])),
            by_hand['id']: ('mismatch', leftover, left(by_hand_migration)),
        }, found)
        self.assertEqual({'instances_checked': 5, 'mismatched': 7,
                          'pending': 0, 'skipped': 0, 'errors': 0},
                         document['summary'])

        def heal(server):
            return ('nova-manage placement heal_allocations --instance %s '
                    '--force' % server['id'])

        def delete(migration):
            return 'openstack resource provider allocation delete %s' % (
                migration)

        self.assertEqual({
            finish['id']: [heal(finish)],
            revert['id']: [delete(revert_migration)],
            live['id']: [delete(live_migration), heal(live)],
            post['id']: [delete(post_migration)],
            gone_revert['id']: [delete(gone[gone_revert['id']])],
            gone_post['id']: [delete(gone[gone_post['id']])],
            by_hand['id']: [delete(by_hand_migration)],
        }, {r['instance_uuid']: r['remedy'] for r in document['results']})

        self.run_remedies(document)
        self.assertEqual({}, self.audited(4)[0])
        self.assertEqual(
            ({'host2': old}, {'host1': old}, {'host2': new}, {}),
            (self.held(finish['id']), self.held(live['id']),
             self.held(revert['id']), self.held(live_migration)))


class ConsistentPathsTest(_Allocations):
    """Moves that end well, and operations held in progress."""

    def test_moves_that_end_well_leave_placement_agreeing(self):
        old, new = self.resources(self.flavor1), self.resources(self.flavor2)
        confirmed = self._confirm_resize(self.resized(self.boot('confirmed')))
        reverted = self._revert_resize(self.resized(self.boot('reverted')))
        migrated = self._confirm_resize(self._migrate_server(
            self.boot('migrated')))
        live = self._live_migrate(self.boot('live'))
        evacuated = self.boot('evacuated')
        self.host_down('host1')
        evacuated = self._evacuate_server(evacuated, expected_host='host2')
        self.restart_compute_service(self.computes['host1'])
        service, = self.admin_api.get_services(host='host1',
                                               binary='nova-compute')
        self.admin_api.put_service_force_down(service['id'], False)
        self._wait_for_migration_status(evacuated, ['completed'])

        for server, flavor, host in (
                (confirmed, new, 'host2'), (reverted, old, 'host1'),
                (migrated, old, 'host2'), (live, old, 'host2'),
                (evacuated, old, 'host2')):
            migration, _status = self.migration(server)
            self.assertEqual(({host: flavor}, {}), (
                self.held(server['id']), self.held(migration)))
        self.assertEqual({}, self.audited(4)[0])

    def test_operations_in_progress_hold_what_they_hold(self):
        old, new = self.resources(self.flavor1), self.resources(self.flavor2)
        # A resize held in VERIFY_RESIZE: the migration consumer holds
        # the source, the instance the destination.
        verify = self.resized(self.boot('verify'))
        verify_migration, status = self.migration(verify)
        self.assertEqual('finished', status)
        self.assertEqual(({'host2': new}, {'host1': old}), (
            self.held(verify['id']), self.held(verify_migration)))
        held = {verify['id']: ('skipped', 'resize-awaiting-confirm', {})}
        self.assertEqual(held, self.audited(4)[0])

        # A resize held during its disk copy on the source.
        resizing = self.boot('resizing')
        with self.holding(
                'nova.virt.fake.FakeDriver.migrate_disk_and_power_off',
                lambda: self.api.post_server_action(resizing['id'], {
                    'resize': {'flavorRef': self.flavor2['id']}})):
            resize_migration, status = self.migration(resizing)
            self.assertEqual('migrating', status)
            self.assertEqual(({'host2': new}, {'host1': old}), (
                self.held(resizing['id']), self.held(resize_migration)))
            self.assertEqual({**held, resizing['id']: (
                'skipped', 'task-in-progress', {})}, self.audited(4)[0])
        self._confirm_resize(self._wait_for_state_change(resizing,
                                                         'VERIFY_RESIZE'))

        # A live migration held during its memory copy.
        live = self.boot('live')
        with self.holding('nova.virt.fake.FakeDriver.live_migration',
                          lambda: self.live_migrate_action(live)):
            live_migration, status = self.migration(live)
            self.assertEqual('running', status)
            self.assertEqual(({'host2': old}, {'host1': old}), (
                self.held(live['id']), self.held(live_migration)))
            self.assertEqual({**held, live['id']: (
                'skipped', 'task-in-progress', {})}, self.audited(4)[0])
        self._wait_for_migration_status(live, ['completed'])

        # A boot held before the compute's claim: the scheduler's
        # allocation, on a host the instance does not name yet.
        with self.holding(
                'nova.compute.manager.ComputeManager._build_and_run_instance',
                lambda: self.api.post_server({'server': self._build_server(
                    name='building', flavor_id=self.flavor1['id'],
                    networks='none')})) as building:
            shown = self.admin_api.get_server(building['id'])
            self.assertEqual(('BUILD', None), (
                shown['status'], shown['OS-EXT-SRV-ATTR:host']))
            self.assertEqual({'host1': old}, self.held(building['id']))
            self.assertEqual({**held, building['id']: (
                'skipped', 'building', {})}, self.audited(4)[0])
        self._wait_for_state_change(building, 'ACTIVE')

        # An evacuation whose source is still down: the instance holds
        # both hosts until the source cleans up.
        evacuated = self.boot('evacuated')
        self.host_down('host1')
        evacuated = self._evacuate_server(evacuated, expected_host='host2')
        evacuation, status = self.migration(evacuated)
        self.assertEqual('done', status)
        self.assertEqual(({'host1': old, 'host2': old}, {}), (
            self.held(evacuated['id']), self.held(evacuation)))
        self.assertEqual({**held, evacuated['id']: (
            'pending', 'evacuation-not-cleaned', {})}, self.audited(4)[0])


def load_tests(loader, tests, pattern):
    """The tests of this module where Nova's services can run.

    Where the framework cannot be imported, ``test_real_services_compat``
    reports it.
    """
    suite = unittest.TestSuite()
    if services.available():
        for case in (FailurePathsTest, ConsistentPathsTest):
            suite.addTests(loader.loadTestsFromTestCase(case))
    return suite
