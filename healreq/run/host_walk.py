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

"""The walk of ``nova-heal hosts``: read, judge, report. Read only.

The API database's aggregates are read once. Each cell is read by pages
of hosts (keyset pagination over the hosts of its live compute nodes),
one query per table per page: the nodes, their nova-compute services,
the instances on them with their NUMA topology, the migrations from or
to them that have not ended, their held PCI devices and the instances
those name; then the Placement providers of the page's nodes (by uuid,
and by the hypervisors' names) with their aggregates. The next page is
read in a loader thread while the walk judges the current one, as
``allocations`` reads (read_threads.loaded).

After the cells, two passes judge what no single host shows: compute
nodes of one hypervisor in several hosts or cells, and root providers
that no live compute node backs (paged by id). The second needs every
cell: it is left out, and said so, under ``--host`` or ``--cell`` or
when a cell could not be read.

``stop_check()`` is called after each page and while a read waits: an
Interrupted it raises ends the walk and carries the report so far.
"""

import functools

from oslo_log import log as logging

from healreq.db import cell_queries
from healreq.db import host_queries as queries
from healreq import exception
from healreq.heal import evidence
from healreq.heal import host_checks as checks
from healreq.run import audit_walk
from healreq.run import read_threads

LOG = logging.getLogger(__name__)

# Pages read at once, each by a loader thread on its own connections.
LOADERS = 2


class HostWalk(audit_walk.ReadOnlyWalk):
    """Walk the selected cells' hosts and Placement's providers.

    See audit_walk.ReadOnlyWalk for ``run_context`` and
    ``placement_engine``; ``host`` selects one host.
    """

    def __init__(self, run_context, placement_engine, batch_size,
                 host=None, cell_uuid=None):
        super().__init__(run_context, placement_engine, batch_size,
                         checks.HostReport(), cell_uuid=cell_uuid)
        self.host = host
        self._aggregates = {}
        self._live_nodes = set()
        self._seen_providers = set()
        # hypervisor_hostname -> [(cell uuid, host, node uuid)]
        self._hypervisors = {}
        self._results = {}
        self._now = None

    def _run(self):
        cells = self.context.select_cells(cell_uuid=self.cell_uuid)
        self._now = self.context.clock()
        with exception.reraised_as(exception.ApiDatabaseError):
            self._aggregates = self._query(self.context.api_engine,
                                           queries.get_aggregates)
        for cell in cells:
            self._walked(cell, self._walk_cell)
            self.stop_check()
        if self.host and not (self.report.hosts_checked
                              or self.report.cell_errors):
            raise exception.InvalidInput(
                'host %s has no live compute node in any cell' % self.host)
        if self.host:
            self._namesakes(cells)
        self._duplicates()
        whole = not self.host and not self.cell_uuid
        if whole and not self.report.cell_errors:
            self._orphans()
        else:
            self.report.not_checked.append(
                'provider-orphaned: %s' % (
                    'a cell could not be read' if whole
                    else 'judged only when every cell is walked'))
        self.report.providers_checked = len(self._seen_providers)
        self.report.results.sort(key=_order)
        return self.report

    def _walk_cell(self, cell, engine):
        query = functools.partial(self._query, engine)
        batches = read_threads.loaded(
            self._pages(query), lambda page: (page, self._read_page(
                engine, page)), LOADERS, self.stop_check)
        try:
            for page, read in batches:
                self._judge_page(cell, page, read)
                self._between_batches()
        finally:
            batches.close()

    def _pages(self, query):
        if self.host:
            if query(queries.has_host, self.host):
                yield [self.host]
            return
        after = ''
        while True:
            page = query(queries.get_host_page, after, self.batch_size)
            if not page:
                return
            yield page
            after = page[-1]

    def _read_page(self, engine, hosts):
        """Every row a page of hosts needs. Runs in a loader thread."""
        with engine.connect() as conn:
            nodes = queries.get_nodes(conn, hosts)
            read = dict(
                nodes=nodes,
                services=queries.get_compute_services(conn, hosts),
                instances=queries.get_host_instances(conn, hosts),
                migrations=queries.get_running_migrations(conn, hosts),
                devices=queries.get_held_devices(
                    conn, [n['id'] for n in nodes]))
            read['holders'] = self._holders(conn, read)
        with exception.reraised_as(exception.PlacementDatabaseError):
            with self.placement_engine.connect() as conn:
                read['providers'] = queries.get_providers(
                    conn, {n['uuid'] for n in nodes},
                    {n['hypervisor_hostname'] for n in nodes
                     if n['hypervisor_hostname']})
        return read

    @staticmethod
    def _holders(conn, read):
        """The instances the page's held devices name, by uuid.

        Those live on the page's hosts were just read with the page; only
        the others (deleted, elsewhere, missing) are looked up.
        """
        named = {d['instance_uuid'] for d in read['devices']
                 if d['instance_uuid']}
        holders = {}
        for instance in read['instances']:
            if instance['uuid'] in named:
                holders[instance['uuid']] = dict(
                    uuid=instance['uuid'], host=instance['host'], deleted=0,
                    vm_state=instance['vm_state'],
                    task_state=instance['task_state'])
        others = named.difference(holders)
        if others:
            holders.update(queries.get_holders(conn, others))
        return holders

    def _judge_page(self, cell, hosts, read):
        nodes = _grouped(read['nodes'], 'host')
        instances = _grouped(read['instances'], 'host')
        by_uuid = {p['uuid']: p for p in read['providers']}
        by_name = {p['name']: p for p in read['providers']}
        node_host = {n['id']: n['host'] for n in read['nodes']}
        devices = {}
        for device in read['devices']:
            devices.setdefault(node_host[device['compute_node_id']],
                               []).append(device)
        for node in read['nodes']:
            self._note_node(cell, node)
        self._seen_providers.update(by_uuid)
        for host in hosts:
            mine = nodes.get(host, [])
            service = read['services'].get(host)
            record = checks.HostRecord(
                host=host, cell_uuid=cell['uuid'], nodes=mine,
                service=service, compute_up=self._is_up(cell, service),
                aggregates=[a for a in self._aggregates.values()
                            if host in a['hosts']],
                providers={n['uuid']: by_uuid[n['uuid']] for n in mine
                           if n['uuid'] in by_uuid},
                instances=instances.get(host, []),
                migrations=[m for m in read['migrations']
                            if host in (m['source_compute'],
                                        m['dest_compute'])],
                devices=devices.get(host, []), holders=read['holders'])
            self.report.hosts_checked += 1
            result = checks.evaluate(record, self._aggregates)
            for node in mine:
                other = by_name.get(node['hypervisor_hostname'])
                if other is not None and other['uuid'] != node['uuid']:
                    result = result or checks.HostResult(host, cell['uuid'])
                    checks.duplicate_provider(result, node, other)
            if result is not None:
                self._results[(cell['uuid'], host)] = result
                self.report.add(result)

    def _note_node(self, cell, node):
        self._live_nodes.add(node['uuid'])
        seen = self._hypervisors.setdefault(node['hypervisor_hostname'], [])
        entry = (cell['uuid'], node['host'], node['uuid'])
        if entry not in seen:
            seen.append(entry)

    def _is_up(self, cell, service):
        if service is None:
            return False
        found = evidence.services_from_rows(cell['uuid'], [
            dict(service, binary='nova-compute', version=0,
                 updated_at=None)])
        return bool(found) and evidence.is_up(
            found[0], self._now, self.context.service_down_time)

    def _namesakes(self, cells):
        """Note the nodes of --host's hypervisors in every cell."""
        names = sorted(name for name, nodes in self._hypervisors.items()
                       if any(n[1] == self.host for n in nodes))
        if not names:
            return
        for cell in cells:
            try:
                nodes = self._query(self.context.cell_engine(cell),
                                    queries.get_nodes_named, names)
            except (exception.CellDatabaseError,) + exception.DB_ERRORS:
                continue  # reported by the walk of the cell
            finally:
                self.context.release(cell)
            for node in nodes:
                self._note_node(cell, node)

    def _duplicates(self):
        """Report compute nodes of one hypervisor in several hosts."""
        for name, nodes in sorted(self._hypervisors.items(),
                                  key=lambda item: str(item[0])):
            if len(nodes) < 2:
                continue
            for cell_uuid, host in sorted({n[:2] for n in nodes}):
                if self.host and host != self.host:
                    continue
                result = self._results.get((cell_uuid, host))
                if result is None:
                    result = checks.HostResult(host, cell_uuid)
                    self._results[(cell_uuid, host)] = result
                    self.report.add(result)
                checks.duplicate_nodes(result, name, nodes)
                if result.status == checks.SKIPPED:
                    result.status = checks.MISMATCHED
                    result.reason = None

    def _orphans(self):
        """Judge every root provider that no live compute node backs."""
        classes = None
        after = 0
        while True:
            roots = self._placement(queries.get_root_page, after,
                                    self.batch_size)
            if not roots:
                return
            after = roots[-1]['id']
            self._seen_providers.update(r['uuid'] for r in roots)
            candidates = [r for r in roots
                          if r['uuid'] not in self._live_nodes]
            if candidates:
                if classes is None:
                    classes = self._placement(queries.get_resource_classes)
                self._judge_roots(candidates, classes)
            self.report.providers_checked = len(self._seen_providers)
            self._between_batches()

    def _judge_roots(self, roots, classes):
        ids = [r['id'] for r in roots]
        below = self._placement(queries.get_below, ids)
        every = ids + [b['id'] for b in below]
        traits = self._placement(queries.get_traits, every)
        held = self._placement(queries.get_provider_allocations, every,
                               classes)
        kinds = self._consumer_kinds({c for by in held.values() for c in by})
        for root in roots:
            if checks.is_sharing_provider(root['id'], {}, traits):
                continue
            mine = [b for b in below if b['root_provider_id'] == root['id']]
            allocations = {}
            for provider_id in [root['id']] + [b['id'] for b in mine]:
                for consumer, by_class in held.get(provider_id, {}).items():
                    total = allocations.setdefault(consumer, {})
                    for name, amount in by_class.items():
                        total[name] = total.get(name, 0) + amount
            self.report.add(checks.orphan_result(
                root, _deepest_first(root['id'], mine), allocations, kinds))

    def _consumer_kinds(self, consumers):
        """``{consumer: 'instance' | 'migration'}`` of those cells know."""
        kinds = {}
        remaining = set(consumers)
        for cell in self.context.select_cells():
            if not remaining:
                break
            engine = self.context.cell_engine(cell)
            try:
                migrations, instances = self._query(engine, _known,
                                                    sorted(remaining))
            finally:
                self.context.release(cell)
            kinds.update((uuid, 'migration') for uuid in migrations)
            kinds.update((uuid, 'instance') for uuid in instances)
            remaining -= set(kinds)
        return kinds


def _known(conn, consumers):
    migrations = cell_queries.get_migrations_by_uuid(conn, consumers)
    instances = cell_queries.get_allocation_instances(
        conn, [c for c in consumers if c not in migrations])
    return migrations, instances


def _grouped(found, key):
    groups = {}
    for row in found:
        groups.setdefault(row[key], []).append(row)
    return groups


def _deepest_first(root_id, below):
    """The uuids of ``below`` (providers under root_id), deepest first."""
    parents = {b['id']: b['parent_provider_id'] for b in below}

    def depth(provider_id):
        count = 0
        while provider_id != root_id and provider_id in parents:
            provider_id = parents[provider_id]
            count += 1
        return count
    return [b['uuid'] for b in sorted(
        below, key=lambda b: (-depth(b['id']), b['id']))]


def _order(result):
    return (result.host is None, str(result.cell_uuid), str(result.host),
            str(result.provider_uuid))
