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


"""Many instances at once: copies of one instance's rows, new uuids.

Building each instance through ``deployment`` costs a few statements and
a commit; a deployment large enough to watch a long run (``nova-heal
demo --instances N``) is built instead by copying the rows of one built
instance, a thousand copies per statement and transaction.
"""

import uuid as uuidlib

import sqlalchemy as sa

from healreq.db import tables

# The rows of one instance, by database: (table, column naming it).
CELL_ROWS = ((tables.instances, 'uuid'),
             (tables.instance_extra, 'instance_uuid'),
             (tables.instance_system_metadata, 'instance_uuid'),
             (tables.block_device_mapping, 'instance_uuid'))
API_ROWS = ((tables.instance_mappings, 'instance_uuid'),
            (tables.request_specs, 'instance_uuid'))
PLACEMENT_ROWS = ((tables.consumers, 'uuid'),
                  (tables.allocations, 'consumer_id'))

CHUNK = 1000


def copy_instance(template, count, cell_engine, api_engine,
                  placement_engine=None):
    """Add ``count`` instances whose rows copy ``template``'s.

    Every text that names the template's uuid (its rows' keys, the spec)
    names the copy's instead; generated ids are left to the database.
    Returns the new uuids.
    """
    uuids = [str(uuidlib.uuid4()) for _ in range(count)]
    databases = [(cell_engine, CELL_ROWS), (api_engine, API_ROWS)]
    if placement_engine is not None:
        databases.append((placement_engine, PLACEMENT_ROWS))
    for engine, table_rows in databases:
        for table, column in table_rows:
            _copy_rows(engine, table, column, template, uuids)
    return uuids


def _copy_rows(engine, table, column, template, uuids):
    with engine.connect() as conn:
        rows = [dict(row._mapping) for row in conn.execute(
            sa.select(table).where(table.c[column] == template))]
    generated = [c.name for c in table.primary_key.columns
                 if c.autoincrement is True or (
                     c.autoincrement == 'auto' and isinstance(
                         c.type, sa.Integer))]
    for row in rows:
        for name in generated:
            row.pop(name, None)
    if not rows:
        return
    for start in range(0, len(uuids), CHUNK):
        with engine.begin() as conn:
            conn.execute(table.insert(), [
                _renamed(row, template, uuid)
                for uuid in uuids[start:start + CHUNK] for row in rows])


def _renamed(row, template, uuid):
    return {name: value.replace(template, uuid)
            if isinstance(value, str) else value
            for name, value in row.items()}
