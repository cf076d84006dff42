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


"""The raw floor of ``allocations``: a plain read of the tables it needs.

Written as an operator's script would be, with PyMySQL alone: the cell
mappings from the API database; in each cell but cell0, one SELECT per
table (the live instances, their live instance_extra flavors, all system
metadata, the live root block device mappings, every migration and the
live compute nodes), each instance's flavor decoded with ``json.loads``;
then, in the Placement database, one SELECT each of the allocations with
their provider's uuid, the consumers and the resource classes. Every
live instance is joined with its rows and its consumers' allocations.
Nothing is checked or decided.

Prints one JSON line: the rows read per table, the live instances, how
many were joined with an extra and a compute node, and how many held
allocations.
"""

import argparse
import collections
import configparser
import json
import sys

import raw_floor

API_QUERY = ('SELECT id, uuid, name, database_connection FROM cell_mappings '
             'ORDER BY id')

# The first column of every query but ``instances`` and ``compute_nodes``
# is the instance uuid its rows are grouped by.
CELL_QUERIES = dict(
    instances='SELECT id, uuid, deleted, hidden, vm_state, task_state, '
              'host, node, updated_at, vcpus, memory_mb, root_gb, '
              'ephemeral_gb, image_ref FROM instances WHERE deleted = 0',
    extras='SELECT instance_uuid, flavor FROM instance_extra '
           'WHERE deleted = 0',
    system_metadata='SELECT instance_uuid, `key`, value '
                    'FROM instance_system_metadata',
    block_devices='SELECT instance_uuid, destination_type '
                  'FROM block_device_mapping '
                  'WHERE deleted = 0 AND boot_index = 0',
    migrations='SELECT instance_uuid, uuid, migration_type, status, '
               'source_compute, dest_compute, source_node, dest_node, '
               'deleted FROM migrations',
    compute_nodes='SELECT host, hypervisor_hostname, uuid, hypervisor_type '
                  'FROM compute_nodes WHERE deleted = 0',
)

PLACEMENT_QUERIES = dict(
    allocations='SELECT a.consumer_id, p.uuid, a.resource_class_id, a.used '
                'FROM allocations a JOIN resource_providers p '
                'ON p.id = a.resource_provider_id',
    consumers='SELECT uuid FROM consumers',
    classes='SELECT id, name FROM resource_classes',
)


def placement_url(config_file):
    """``[placement_database]/connection`` of placement.conf."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(config_file)
    return parser.get('placement_database', 'connection')


def read_placement(conn):
    """Allocations by consumer, and the counts of each table."""
    rows = {name: raw_floor.select(conn, sql)
            for name, sql in PLACEMENT_QUERIES.items()}
    classes = dict(rows['classes'])
    allocations = collections.defaultdict(list)
    for consumer, provider, class_id, used in rows['allocations']:
        allocations[consumer].append((provider, classes.get(class_id), used))
    return allocations, {name: len(found) for name, found in rows.items()}


def read_cell(conn):
    """A cell's instances, compute nodes and other rows by instance."""
    rows = {name: raw_floor.select(conn, sql)
            for name, sql in CELL_QUERIES.items()}
    counts = {name: len(found) for name, found in rows.items()}
    nodes = {(row[0], row[1]): row for row in rows['compute_nodes']}
    grouped = {name: raw_floor.grouped(found) for name, found in rows.items()
               if name not in ('instances', 'compute_nodes')}
    return rows['instances'], nodes, grouped, counts


def join_cell(instances, nodes, grouped, allocations, counts):
    """Join each live instance with its rows and allocations.

    A checker would compare here the allocations of the instance and of
    its migrations with what its flavor asks for on its node.
    """
    for instance in instances:
        uuid = instance[1]
        rows = {name: found.get(uuid, ()) for name, found in grouped.items()}
        node = nodes.get((instance[6], instance[7]))
        for _uuid, flavor in rows['extras']:
            json.loads(flavor)
            counts['flavors'] += 1
        if rows['extras'] and node is not None:
            counts['joined'] += 1
        consumers = [uuid] + [m[1] for m in rows['migrations']]
        held = [allocations.get(c) for c in consumers]
        counts['holding'] += sum(1 for found in held if found)


def walk(config_file, placement_file):
    conn = raw_floor.connect(raw_floor.api_url(config_file))
    try:
        cells = raw_floor.select(conn, API_QUERY)
    finally:
        conn.close()
    conn = raw_floor.connect(placement_url(placement_file))
    try:
        allocations, counts = read_placement(conn)
    finally:
        conn.close()
    counts = collections.Counter(counts, cells=0, joined=0, flavors=0,
                                 holding=0)
    for cell in cells:
        if cell[1] == raw_floor.CELL0_UUID:
            continue
        conn = raw_floor.connect(cell[3])
        try:
            instances, nodes, grouped, read = read_cell(conn)
        finally:
            conn.close()
        counts.update(read, cells=1)
        join_cell(instances, nodes, grouped, allocations, counts)
    return dict(counts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True,
                        help='nova.conf; [api_database]/connection is read.')
    parser.add_argument('--placement-config-file', required=True,
                        help='placement.conf; [placement_database]/'
                             'connection is read.')
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(walk(args.config_file,
                                     args.placement_config_file)) + '\n')
    sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
