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


"""The floor: read what nova-heal reads, decode the JSON, nothing else.

Every read goes through the tool's own query functions
(``healreq.db.cell_queries`` and ``api_queries``), called as a dry run of
``nova-heal request-specs`` (default ``--fields``) calls them: the
newest specs that teach the run its object versions, then per cell
(cell0 excluded) keyset-paginated pages of live instances; per page, in
the cell, instance_extra, in-progress migrations, system metadata
(packed by the server, with the tool's fallback to rows), root block
device mappings and failed resizes, each by the page's range of ids as
the tool reads them, then, in the API database, instance mappings and
request specs, one ``IN (...)`` query per table. The specs,
the embedded flavors and the PCI requests are decoded with
``json.loads``. No decision is taken and nothing is written.

Prints one JSON line: instances, rows read, documents decoded.
"""

import argparse
import json
import sys

import common
from healreq.db import api_queries
from healreq.db import cell_queries


def read_cell_rows(conn, uuids):
    """A page's cell rows, read as the tool reads them.

    ``uuids`` is a list of uuids, or the page's range (cell_queries.Page).
    """
    in_progress, failed_resizes = cell_queries.get_migrations(conn, uuids)
    return dict(
        extras=cell_queries.get_instance_extras(conn, uuids),
        migrations=in_progress,
        system_metadata=cell_queries.get_system_metadata(conn, uuids),
        block_devices=cell_queries.get_root_block_devices(conn, uuids),
        failed_resizes=failed_resizes,
    )


def pages(cell_engine, api_engine, batch_size):
    """Yield ``(instances, cell rows, mappings, specs)`` page by page.

    Connections are taken as the tool's reader takes them: one from the
    cell's pool for the page and its cell rows, then one from the API
    database's pool.
    """
    after_id = 0
    while True:
        with cell_engine.connect() as conn:
            page = cell_queries.get_instance_page(conn, after_id,
                                                  batch_size)
            if not page:
                return
            uuids = [instance['uuid'] for instance in page]
            rows = read_cell_rows(conn, cell_queries.Page(
                after_id, page[-1]['id']))
        with api_engine.connect() as api:
            mappings = api_queries.get_instance_mappings(api, uuids)
            specs = api_queries.get_request_specs(api, uuids)
        yield page, rows, mappings, specs
        after_id = page[-1]['id']


def decode(rows, specs):
    """Decode the JSON the tool decodes; return how many documents."""
    documents = 0
    for extras in rows['extras'].values():
        for extra in extras:
            json.loads(extra['flavor'])
            documents += 1
            if extra['pci_requests'] is not None:
                json.loads(extra['pci_requests'])
                documents += 1
    for row in specs.values():
        json.loads(row['spec'])
        documents += 1
    return documents


def _count_rows(rows, mappings, specs):
    found = len(mappings) + len(specs)
    for name, by_uuid in rows.items():
        if name == 'failed_resizes':
            found += sum(len(ids) for ids in by_uuid.values())
        else:
            found += sum(len(items) for items in by_uuid.values())
    return found


def read_version_sample(api_engine, size):
    """The newest specs, read and decoded once per run as the tool does."""
    with api_engine.connect() as api:
        texts = api_queries.get_newest_specs(api, size)
    for text in texts:
        json.loads(text)
    return len(texts)


def walk(config_file, api_engine, batch_size, version_sample):
    # In the tool's order: the cells, then the version sample.
    cells = common.cells(api_engine)
    counts = dict(instances=0, rows=0, documents=0, system_metadata=0,
                  version_sample=read_version_sample(api_engine,
                                                     version_sample))
    for cell in cells:
        engine = common.cell_engine(cell, config_file)
        try:
            for page, rows, mappings, specs in pages(engine, api_engine,
                                                     batch_size):
                counts['instances'] += len(page)
                counts['rows'] += len(page) + _count_rows(rows, mappings,
                                                          specs)
                counts['documents'] += decode(rows, specs)
                counts['system_metadata'] += sum(
                    len(items) for items in rows['system_metadata'].values())
        finally:
            engine.dispose()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--batch-size', type=int, required=True,
                        help='Instances per page (the tool\'s batch size).')
    parser.add_argument('--version-sample', type=int, required=True,
                        help='How many of the newest specs the tool reads '
                             'to learn the object versions.')
    args = parser.parse_args(argv)
    api_engine = common.api_engine(args.config_file)
    try:
        common.emit(walk(args.config_file, api_engine, args.batch_size,
                         args.version_sample))
    finally:
        api_engine.dispose()
    return 0


if __name__ == '__main__':
    sys.exit(main())
