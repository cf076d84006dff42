#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See
#    the License for the specific language governing permissions and
#    limitations under the License.


"""Where the server's work of a walk goes, read by read.

Usage: ``python benchmarks/server_profile.py --config-file nova.conf
--batch-size N`` against a server that serves nothing else (see
README.rst, *A private server*).

Walks the cells' pages as the tool's reader reads them, through the
tool's query functions, and runs each read of every page on its own,
one kind after the other, so that the server's CPU time and read
counters (benchmarks/server.py) around each kind are that kind's alone.
Each whole-table read of the raw floor is measured the same way, as the
yardstick; so is a read of system metadata in primary-key order (not
the tool's), to show what such a read would save. Prints one line per
read: its statements, the server's CPU seconds, the rows the engine
handed over (``Handler_read_*``) and the buffer pool's page reads.
"""

import argparse
import sys

import sqlalchemy as sa

import common
from healreq.db import api_queries
from healreq.db import cell_queries
import raw_floor
import server


def _pages(engine, batch_size):
    """``(Page, uuids, hosts)`` of every page of a cell."""
    found = []
    after_id = 0
    with engine.connect() as conn:
        while True:
            page = cell_queries.get_instance_page(conn, after_id,
                                                  batch_size)
            if not page:
                return found
            found.append((cell_queries.Page(after_id, page[-1]['id']),
                          [i['uuid'] for i in page],
                          [i['host'] for i in page if i['host']]))
            after_id = page[-1]['id']


def _cell_reads():
    return {
        'instances page': lambda conn, page, uuids, hosts:
            cell_queries.get_instance_page(conn, page.after_id,
                                           len(uuids)),
        'instance_extra': lambda conn, page, uuids, hosts:
            cell_queries.get_instance_extras(conn, page),
        'migrations': lambda conn, page, uuids, hosts:
            cell_queries.get_migrations(conn, page),
        'system metadata': lambda conn, page, uuids, hosts:
            cell_queries.get_system_metadata(conn, page),
        'root block devices': lambda conn, page, uuids, hosts:
            cell_queries.get_root_block_devices(conn, page),
    }


# The cheapest read of a page's system metadata that memory bounded by the
# batch allows, measured beside the tool's: each instance's first and
# last row id and row count from the instance_uuid index alone (no row
# fetched), then the rows of those id ranges (merged where they nearly
# touch) in primary-key order, packed into one string; an instance whose
# rows are spread wide would be read by the index instead. Not the
# tool's: it costs a round trip more per page, and unpacking the rows
# of other instances costs the client; see README.rst.
_SPANS = sa.text(
    'SELECT MIN(s.id), MAX(s.id), COUNT(*) FROM instance_system_metadata s '
    'JOIN instances i ON i.uuid = s.instance_uuid WHERE i.deleted = 0 '
    'AND i.id > :after_id AND i.id <= :last_id GROUP BY i.id')
_PACKED_RANGE = (
    "SELECT COUNT(*), GROUP_CONCAT(s.id, '\x1f', s.instance_uuid, '\x1f', "
    "s.`key`, '\x1f', COALESCE(s.value, ''), '\x1f', s.value IS NULL, "
    "'\x1f', s.deleted SEPARATOR '\x1e') FROM instance_system_metadata s "
    "WHERE %s")
_NEAR = 64


def _sysmeta_in_key_order(conn, page, uuids, hosts):
    ranges = []
    for first, last, count in sorted(conn.execute(
            _SPANS, page._asdict()).fetchall()):
        if last - first + 1 - count > _NEAR:
            continue  # spread wide: read by the index
        if ranges and first <= ranges[-1][1] + _NEAR:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    if not ranges:
        return 1
    conn.exec_driver_sql(_PACKED_RANGE % ' OR '.join(
        's.id BETWEEN %d AND %d' % (first, last)
        for first, last in ranges)).fetchall()
    return 2  # statements


def _api_reads():
    return {
        'instance_mappings': lambda conn, page, uuids, hosts:
            api_queries.get_instance_mappings(conn, uuids),
        'request_specs': lambda conn, page, uuids, hosts:
            api_queries.get_request_specs(conn, uuids),
        'group memberships': lambda conn, page, uuids, hosts:
            api_queries.get_group_memberships(conn, uuids),
        'zones': lambda conn, page, uuids, hosts: (
            api_queries.get_host_zones(conn, hosts),
            api_queries.get_zones(conn)),
    }


def _measure(observer, label, run):
    before = observer.snapshot()
    statements = run()
    work = server.difference(before, observer.snapshot())
    print('%-28s %6d %8.3f %10d %10d' % (
        label, statements, work['cpu'] or 0.0, server.rows_handled(work),
        work['counters'].get('Innodb_buffer_pool_read_requests', 0)),
        flush=True)
    return work['cpu'] or 0.0


def _run_all(engine, read, cell_pages):
    statements = 0
    with engine.connect() as conn:
        for page, uuids, hosts in cell_pages:
            found = read(conn, page, uuids, hosts)
            # One statement per page, unless the read counts its own.
            statements += found if type(found) is int else 1
    return statements


def _raw(engine, statements):
    with engine.connect() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement).fetchall()
    return len(statements)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--batch-size', type=int, required=True)
    args = parser.parse_args(argv)
    api_engine = common.api_engine(args.config_file)
    observer = server.Observer(
        api_engine.url.render_as_string(hide_password=False))
    if observer.pid is None:
        sys.exit('the server does not run on this host: its CPU time '
                 'cannot be read')
    cells = [(cell, common.cell_engine(cell, args.config_file))
             for cell in common.cells(api_engine)]
    walked = [(engine, _pages(engine, args.batch_size))
              for _cell, engine in cells]
    print('%-28s %6s %8s %10s %10s' % ('read', 'stmts', 'CPU s',
                                       'rows', 'page reads'))
    total = 0.0
    for label, read in _cell_reads().items():
        total += _measure(observer, label, lambda: sum(
            _run_all(engine, read, found) for engine, found in walked))
    for label, read in _api_reads().items():
        total += _measure(observer, label, lambda: sum(
            _run_all(api_engine, read, found) for _engine, found in walked))
    print('%-28s %6s %8.3f' % ('tool\'s page reads, total', '', total))
    _measure(observer, 'system metadata, key order', lambda: sum(
        _run_all(engine, _sysmeta_in_key_order, found)
        for engine, found in walked))
    floor = 0.0
    for name, statement in raw_floor.API_QUERIES.items():
        floor += _measure(observer, 'raw floor: %s' % name,
                          lambda: _raw(api_engine, [statement]))
    for name, statement in raw_floor.CELL_QUERIES.items():
        floor += _measure(observer, 'raw floor: %s' % name, lambda: sum(
            _raw(engine, [statement]) for _cell, engine in cells))
    print('%-28s %6s %8.3f' % ('raw floor, total', '', floor))
    for _cell, engine in cells:
        engine.dispose()
    observer.close()
    api_engine.dispose()


if __name__ == '__main__':
    main()
