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

Per cell (cell0 excluded), live instances are read in keyset-paginated
pages on ``instances.id``; for each page, one query per table fetches the
same columns and rows as ``nova-heal request-specs``: instance_extra
(flavor, pci_requests), in-progress migrations, system metadata and root
block device mappings in the cell, then instance_mappings and
request_specs in the API database, by ``IN (...)``. The spec, the
embedded flavors and the PCI requests are decoded with ``json.loads``.
No decision is taken and nothing is written.

Prints one JSON line: instances, rows read and documents decoded.
"""

import argparse
import json
import sys

import sqlalchemy as sa

import common
from healreq.db import tables

# As healreq.db.cell_queries.TERMINAL_MIGRATION_STATUSES.
TERMINAL = ('confirmed', 'reverted', 'error', 'failed', 'completed',
            'cancelled', 'done')


def _queries():
    i = tables.instances
    e = tables.instance_extra
    m = tables.migrations
    s = tables.instance_system_metadata
    b = tables.block_device_mapping
    im = tables.instance_mappings
    rs = tables.request_specs
    uuids = sa.bindparam('uuids', expanding=True)
    return {
        'page': sa.select(
            i.c.id, i.c.uuid, i.c.deleted, i.c.hidden, i.c.vm_state,
            i.c.task_state, i.c.host, i.c.updated_at, i.c.instance_type_id,
            i.c.vcpus, i.c.memory_mb, i.c.root_gb, i.c.ephemeral_gb,
            i.c.project_id, i.c.user_id, i.c.image_ref).where(
            i.c.deleted == 0, i.c.id > sa.bindparam('after')).order_by(
            i.c.id).limit(sa.bindparam('limit')),
        'extra': sa.select(e.c.id, e.c.instance_uuid, e.c.flavor,
                           e.c.pci_requests).where(
            e.c.deleted == 0, e.c.instance_uuid.in_(uuids)).order_by(e.c.id),
        'migrations': sa.select(m.c.id, m.c.uuid, m.c.instance_uuid,
                                m.c.status, m.c.migration_type).where(
            m.c.deleted == 0, m.c.instance_uuid.in_(uuids),
            sa.or_(m.c.status.is_(None), m.c.status.not_in(TERMINAL))
        ).order_by(m.c.id.desc()),
        'sysmeta': sa.select(s.c.id, s.c.instance_uuid, s.c.key, s.c.value,
                             s.c.deleted).where(s.c.instance_uuid.in_(uuids)),
        'bdm': sa.select(b.c.id, b.c.instance_uuid, b.c.boot_index,
                         b.c.destination_type).where(
            b.c.deleted == 0, b.c.boot_index == 0,
            b.c.instance_uuid.in_(uuids)).order_by(b.c.id),
        'mappings': sa.select(im.c.instance_uuid, im.c.cell_id,
                              im.c.queued_for_delete).where(
            im.c.instance_uuid.in_(uuids)),
        'specs': sa.select(rs.c.id, rs.c.instance_uuid, rs.c.spec).where(
            rs.c.instance_uuid.in_(uuids)),
    }


def walk(api_engine, batch_size):
    queries = _queries()
    counts = dict(instances=0, rows=0, documents=0)
    for cell in common.cells(api_engine):
        engine = sa.create_engine(cell['database_connection'])
        try:
            with engine.connect() as conn, api_engine.connect() as api:
                after = 0
                while True:
                    page = conn.execute(queries['page'], dict(
                        after=after, limit=batch_size)).all()
                    if not page:
                        break
                    after = page[-1].id
                    uuids = dict(uuids=[row.uuid for row in page])
                    extras = conn.execute(queries['extra'], uuids).all()
                    rows = (conn.execute(queries['migrations'], uuids).all()
                            + conn.execute(queries['sysmeta'], uuids).all()
                            + conn.execute(queries['bdm'], uuids).all()
                            + api.execute(queries['mappings'], uuids).all())
                    specs = api.execute(queries['specs'], uuids).all()
                    for row in extras:
                        json.loads(row.flavor)
                        json.loads(row.pci_requests)
                    for row in specs:
                        json.loads(row.spec)
                    counts['instances'] += len(page)
                    counts['rows'] += (len(page) + len(extras) + len(rows)
                                       + len(specs))
                    counts['documents'] += 2 * len(extras) + len(specs)
        finally:
            engine.dispose()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--batch-size', type=int, default=200)
    args = parser.parse_args(argv)
    api_engine = sa.create_engine(common.api_url(args.config_file))
    try:
        common.emit(walk(api_engine, args.batch_size))
    finally:
        api_engine.dispose()
    return 0


if __name__ == '__main__':
    sys.exit(main())
