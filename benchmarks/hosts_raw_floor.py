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


"""The raw floor of ``hosts``: a plain read of the tables it needs.

Written as an operator's script would be, with PyMySQL alone: the cell
mappings and the aggregates (with their hosts and metadata) from the API
database; in each cell but cell0, one SELECT per table (the live compute
nodes, the nova-compute services, the live instances with their
instance_extra NUMA topology, the migrations that have not ended and the
held PCI devices), each topology decoded with ``json.loads``; in the
Placement database, one SELECT each of the providers, their aggregates
and their traits. Instances are grouped by host and nodes joined with
their providers. Nothing is checked or decided.

Prints one JSON line: the rows read per table and how many compute nodes
were joined with a provider.
"""

import argparse
import collections
import configparser
import json
import sys

import raw_floor

API_QUERIES = dict(
    cells='SELECT id, uuid, name, database_connection FROM cell_mappings '
          'ORDER BY id',
    aggregates='SELECT id, uuid, name FROM aggregates',
    aggregate_hosts='SELECT aggregate_id, host FROM aggregate_hosts',
    aggregate_metadata='SELECT aggregate_id, value FROM aggregate_metadata '
                       "WHERE `key` = 'availability_zone'",
)
CELL_QUERIES = dict(
    compute_nodes='SELECT id, uuid, host, hypervisor_hostname, '
                  'hypervisor_type, numa_topology FROM compute_nodes '
                  'WHERE deleted = 0',
    services="SELECT host, forced_down, last_seen_up, created_at "
             "FROM services WHERE deleted = 0 AND `binary` = 'nova-compute'",
    instances='SELECT i.uuid, i.host, i.node, i.vm_state, i.task_state, '
              'e.numa_topology FROM instances i LEFT OUTER JOIN '
              'instance_extra e ON e.instance_uuid = i.uuid AND '
              'e.deleted = 0 WHERE i.deleted = 0',
    migrations="SELECT uuid, instance_uuid, status, migration_type, "
               "source_compute, dest_compute FROM migrations WHERE "
               "deleted = 0 AND status NOT IN ('confirmed', 'reverted', "
               "'error', 'failed', 'completed', 'cancelled', 'done')",
    pci_devices="SELECT compute_node_id, address, status, instance_uuid "
                "FROM pci_devices WHERE deleted = 0 AND status IN "
                "('allocated', 'claimed')",
)
PLACEMENT_QUERIES = dict(
    resource_providers='SELECT id, uuid, name, generation, '
                       'root_provider_id, parent_provider_id '
                       'FROM resource_providers',
    provider_aggregates='SELECT ra.resource_provider_id, pa.uuid FROM '
                        'resource_provider_aggregates ra JOIN '
                        'placement_aggregates pa ON pa.id = ra.aggregate_id',
    traits='SELECT rt.resource_provider_id, t.name FROM '
           'resource_provider_traits rt JOIN traits t ON t.id = rt.trait_id',
)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--placement-config-file', required=True)
    args = parser.parse_args(argv)
    config = configparser.ConfigParser(interpolation=None)
    config.read([args.config_file, args.placement_config_file])
    counts = collections.Counter()
    api = raw_floor.connect(config.get('api_database', 'connection'))
    try:
        api_rows = {name: raw_floor.select(api, query)
                    for name, query in API_QUERIES.items()}
    finally:
        api.close()
    for name, found in api_rows.items():
        counts[name] += len(found)
    nodes = {}
    for cell in api_rows['cells']:
        if cell[1] == raw_floor.CELL0_UUID:
            continue
        conn = raw_floor.connect(cell[3])
        try:
            rows = {name: raw_floor.select(conn, query)
                    for name, query in CELL_QUERIES.items()}
        finally:
            conn.close()
        for name, found in rows.items():
            counts[name] += len(found)
        by_host = collections.defaultdict(list)
        for instance in rows['instances']:
            by_host[instance[1]].append(
                json.loads(instance[5]) if instance[5] else None)
        for node in rows['compute_nodes']:
            if node[5]:
                json.loads(node[5])
            nodes[node[1]] = len(by_host.get(node[2], ()))
    placement = raw_floor.connect(config.get('placement_database',
                                             'connection'))
    try:
        provider_rows = {name: raw_floor.select(placement, query)
                         for name, query in PLACEMENT_QUERIES.items()}
    finally:
        placement.close()
    for name, found in provider_rows.items():
        counts[name] += len(found)
    joined = sum(1 for provider in provider_rows['resource_providers']
                 if provider[1] in nodes)
    document = dict(counts)
    document['joined'] = joined
    json.dump(document, sys.stdout)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
