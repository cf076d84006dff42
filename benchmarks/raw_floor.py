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


"""The raw floor: the least any correct checker must read and decode.

Written as an operator's script would be, with PyMySQL alone (neither
SQLAlchemy nor healreq): one full-table SELECT each of request_specs,
instance_mappings and cell_mappings in the API database; then, in each
cell but cell0, one SELECT per table: the live instances, their live
instance_extra rows, all system metadata rows, the live root block
device mappings and the migrations not in a terminal status. Rows stay
the tuples PyMySQL returns, grouped by instance uuid; each live instance
is joined with its rows and its spec, flavors, NUMA topology and PCI
requests are decoded with ``json.loads``. Nothing is decided or written.

Prints one JSON line: the rows read per table, the live instances, how
many of them had a spec, a mapping and an extra, and the documents
decoded.
"""

import argparse
import collections
import configparser
import json
import sys
from urllib import parse

import pymysql

CELL0_UUID = '00000000-0000-0000-0000-000000000000'

# As in Nova: migrations in these statuses are no longer in progress.
TERMINAL_MIGRATION_STATUSES = ('confirmed', 'reverted', 'error', 'failed',
                               'completed', 'cancelled', 'done')

API_QUERIES = dict(
    specs='SELECT instance_uuid, spec FROM request_specs',
    mappings='SELECT instance_uuid, cell_id, queued_for_delete '
             'FROM instance_mappings',
    cells='SELECT id, uuid, name, database_connection FROM cell_mappings '
          'ORDER BY id',
)

# The first column of every cell query but ``instances`` is the
# instance uuid its rows are grouped by.
CELL_QUERIES = dict(
    instances='SELECT id, uuid, deleted, hidden, vm_state, task_state, '
              'host, updated_at, instance_type_id, vcpus, memory_mb, '
              'root_gb, ephemeral_gb, project_id, user_id, image_ref '
              'FROM instances WHERE deleted = 0',
    extras='SELECT instance_uuid, flavor, numa_topology, pci_requests '
           'FROM instance_extra WHERE deleted = 0',
    system_metadata='SELECT instance_uuid, `key`, value, deleted '
                    'FROM instance_system_metadata',
    block_devices='SELECT instance_uuid, destination_type '
                  'FROM block_device_mapping '
                  'WHERE deleted = 0 AND boot_index = 0',
    migrations='SELECT instance_uuid, uuid, migration_type, status '
               'FROM migrations WHERE deleted = 0 AND (status IS NULL OR '
               'status NOT IN (%s))' % ', '.join(
                   "'%s'" % status
                   for status in TERMINAL_MIGRATION_STATUSES),
)


def api_url(config_file):
    """``[api_database]/connection`` of nova.conf."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(config_file)
    return parser.get('api_database', 'connection')


def connect(url):
    """A PyMySQL connection for a ``mysql+pymysql://`` URL.

    Plain URLs only: a cell URL templated on ``[database]/connection``
    is not formatted.
    """
    parts = parse.urlsplit(url)
    query = dict(parse.parse_qsl(parts.query))
    return pymysql.connect(
        host=parts.hostname or 'localhost', port=parts.port or 3306,
        user=parse.unquote(parts.username or ''),
        password=parse.unquote(parts.password or ''),
        database=parse.unquote(parts.path.lstrip('/')),
        charset=query.get('charset', 'utf8mb4'))


def select(conn, sql):
    """All the rows of ``sql``, as tuples."""
    with conn.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def grouped(rows):
    """``rows`` in lists by their first column (the instance uuid)."""
    found = collections.defaultdict(list)
    for row in rows:
        found[row[0]].append(row)
    return found


def read_api(conn):
    """``(specs, mappings, cells)``: texts and rows by uuid, cell rows."""
    specs = dict(select(conn, API_QUERIES['specs']))
    mappings = {row[0]: row for row in select(conn, API_QUERIES['mappings'])}
    return specs, mappings, select(conn, API_QUERIES['cells'])


def read_cell(conn):
    """A cell's live instances, and its other rows grouped by uuid."""
    rows = {name: select(conn, sql) for name, sql in CELL_QUERIES.items()}
    counts = {name: len(found) for name, found in rows.items()}
    tables = {name: grouped(found) for name, found in rows.items()
              if name != 'instances'}
    return rows['instances'], tables, counts


def decode(spec, extras):
    """Decode an instance's spec and extra documents; return how many."""
    documents = 0
    if spec is not None:
        json.loads(spec)
        documents += 1
    for _uuid, *texts in extras:
        for text in texts:
            if text is not None:
                json.loads(text)
                documents += 1
    return documents


def join_cell(instances, tables, specs, mappings, counts):
    """Join each live instance with its rows and decode its documents.

    A checker would decide here, from the instance row, its mapping,
    its spec and its rows of each of ``tables``.
    """
    for instance in instances:
        uuid = instance[1]
        spec = specs.get(uuid)
        mapping = mappings.get(uuid)
        rows = {name: found.get(uuid, ()) for name, found in tables.items()}
        if spec is not None and mapping is not None and rows['extras']:
            counts['joined'] += 1
        counts['documents'] += decode(spec, rows['extras'])


def walk(config_file):
    """Read the API database, then each cell but cell0; count it all."""
    conn = connect(api_url(config_file))
    try:
        specs, mappings, cells = read_api(conn)
    finally:
        conn.close()
    counts = collections.Counter(specs=len(specs), mappings=len(mappings),
                                 cells=0, joined=0, documents=0)
    for cell in cells:
        if cell[1] == CELL0_UUID:
            continue
        conn = connect(cell[3])
        try:
            instances, tables, read = read_cell(conn)
        finally:
            conn.close()
        counts.update(read, cells=1)
        join_cell(instances, tables, specs, mappings, counts)
    return dict(counts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True,
                        help='nova.conf; [api_database]/connection is read.')
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(walk(args.config_file)) + '\n')
    sys.stdout.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
