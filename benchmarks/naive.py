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


"""The naive contender: an operator's quick per-instance script.

Lists the live instances of each cell (cell0 excluded), then for each
instance runs one query per table, ``... WHERE instance_uuid = :uuid``:
instance_extra, system metadata, block device mappings and migrations in
the cell, instance_mappings and request_specs in the API database. It
decodes the spec and the embedded flavors and compares the spec's flavor
id with ``instance_extra.flavor['cur']``; nothing else.

With ``--sample K`` only the first K instances (by id, split evenly
between the cells) are processed, so that large deployments stay
bounded; its rate per instance is what the benchmark reports.

Prints one JSON line: instances processed and flavor mismatches found.
"""

import argparse
import json
import sys

import sqlalchemy as sa

import common
from healreq.db import tables


def _queries():
    i = tables.instances
    e = tables.instance_extra
    s = tables.instance_system_metadata
    b = tables.block_device_mapping
    m = tables.migrations
    im = tables.instance_mappings
    rs = tables.request_specs
    uuid = sa.bindparam('uuid')
    query = {
        'extra': sa.select(e.c.id, e.c.flavor, e.c.pci_requests).where(
            e.c.instance_uuid == uuid, e.c.deleted == 0),
        'sysmeta': sa.select(s.c.key, s.c.value).where(
            s.c.instance_uuid == uuid),
        'bdm': sa.select(b.c.boot_index, b.c.destination_type).where(
            b.c.instance_uuid == uuid, b.c.deleted == 0),
        'migrations': sa.select(m.c.id, m.c.status, m.c.migration_type).where(
            m.c.instance_uuid == uuid, m.c.deleted == 0),
        'mapping': sa.select(im.c.cell_id, im.c.queued_for_delete).where(
            im.c.instance_uuid == uuid),
        'spec': sa.select(rs.c.id, rs.c.spec).where(
            rs.c.instance_uuid == uuid),
    }
    listing = sa.select(i.c.id, i.c.uuid, i.c.vm_state, i.c.task_state,
                        i.c.instance_type_id, i.c.image_ref).where(
        i.c.deleted == 0).order_by(i.c.id)
    return listing, query


def walk(api_engine, sample):
    listing, query = _queries()
    cells = common.cells(api_engine)
    counts = dict(instances=0, flavor_mismatches=0)
    for position, cell in enumerate(cells):
        if sample:
            # The first instances of each cell, the sample split evenly.
            share = (sample // len(cells)
                     + (1 if position < sample % len(cells) else 0))
            cell_listing = listing.limit(share)
        else:
            cell_listing = listing
        engine = sa.create_engine(cell['database_connection'])
        try:
            with engine.connect() as conn, api_engine.connect() as api:
                for instance in conn.execute(cell_listing).all():
                    u = dict(uuid=instance.uuid)
                    extra = conn.execute(query['extra'], u).first()
                    conn.execute(query['sysmeta'], u).all()
                    conn.execute(query['bdm'], u).all()
                    conn.execute(query['migrations'], u).all()
                    api.execute(query['mapping'], u).first()
                    spec = api.execute(query['spec'], u).first()
                    counts['instances'] += 1
                    if extra is None or spec is None:
                        continue
                    flavors = json.loads(extra.flavor)
                    document = json.loads(spec.spec)
                    spec_flavor = document['nova_object.data']['flavor']
                    if (spec_flavor['nova_object.data']['id']
                            != flavors['cur']['nova_object.data']['id']):
                        counts['flavor_mismatches'] += 1
        finally:
            engine.dispose()
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--sample', type=int, default=0,
                        help='Process only the first K instances (0: all).')
    args = parser.parse_args(argv)
    api_engine = sa.create_engine(common.api_url(args.config_file))
    try:
        common.emit(walk(api_engine, args.sample))
    finally:
        api_engine.dispose()
    return 0


if __name__ == '__main__':
    sys.exit(main())
