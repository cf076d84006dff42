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

Lists the live instances of each cell (cell0 excluded) in one query,
then for each instance reads what ``nova-heal request-specs`` reads, with
the tool's own query functions (``healreq.db.cell_queries`` and
``api_queries``) called for that one instance: instance_extra,
in-progress migrations, system metadata, root block device mappings and
failed resizes in the cell, the instance mapping and the request spec in
the API database, one query each. It decodes the spec and the embedded
flavors and compares the spec's flavor id with
``instance_extra.flavor['cur']``; nothing else.

With ``--sample K`` only the first K instances (by id, split evenly
between the cells) are processed, so that large deployments stay
bounded; its rate per instance is what the benchmark reports.

Prints one JSON line: instances processed and flavor mismatches found.
"""

import argparse
import json
import sys

import common
from healreq.db import api_queries
from healreq.db import cell_queries


def read_instance(conn, api, uuid):
    """One instance's extra and spec rows, every table read on its own."""
    one = [uuid]
    extras = cell_queries.get_instance_extras(conn, one).get(uuid)
    cell_queries.get_migrations(conn, one)
    cell_queries.get_system_metadata(conn, one)
    cell_queries.get_root_block_devices(conn, one)
    api_queries.get_instance_mappings(api, one)
    spec = api_queries.get_request_specs(api, one).get(uuid)
    return extras[0] if extras else None, spec


def flavor_differs(extra, spec):
    """Whether the spec's flavor id differs from the instance's."""
    flavors = json.loads(extra['flavor'])
    document = json.loads(spec['spec'])
    spec_flavor = document['nova_object.data']['flavor']
    return (spec_flavor['nova_object.data']['id']
            != flavors['cur']['nova_object.data']['id'])


def _share(sample, cells, position):
    # The first instances of each cell, the sample split evenly.
    return sample // cells + (1 if position < sample % cells else 0)


def walk(config_file, api_engine, sample):
    cells = common.cells(api_engine)
    counts = dict(instances=0, flavor_mismatches=0)
    for position, cell in enumerate(cells):
        engine = common.cell_engine(cell, config_file)
        try:
            with engine.connect() as conn, api_engine.connect() as api:
                limit = (_share(sample, len(cells), position) if sample
                         else cell_queries.count_live_instances(conn))
                for instance in cell_queries.get_instance_page(conn, 0,
                                                               limit):
                    extra, spec = read_instance(conn, api,
                                                instance['uuid'])
                    counts['instances'] += 1
                    if extra is None or spec is None:
                        continue
                    if flavor_differs(extra, spec):
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
    api_engine = common.api_engine(args.config_file)
    try:
        common.emit(walk(args.config_file, api_engine, args.sample))
    finally:
        api_engine.dispose()
    return 0


if __name__ == '__main__':
    sys.exit(main())
