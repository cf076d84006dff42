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


"""Helpers shared by the benchmark contenders (kept import-light).

The floor and naive contenders import only this module, SQLAlchemy and
``healreq.db.tables``, so that their start-up cost is that of any small
SQLAlchemy script.
"""

import configparser
import json
import sys

import sqlalchemy as sa

from healreq.db import tables


def api_url(config_file):
    """``[api_database]/connection`` of a nova.conf."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(config_file)
    return parser.get('api_database', 'connection')


def cells(api_engine):
    """The cell mappings to walk (all but cell0), ordered by id."""
    t = tables.cell_mappings
    query = sa.select(t.c.id, t.c.uuid, t.c.name,
                      t.c.database_connection).where(
        t.c.uuid != tables.CELL0_UUID).order_by(t.c.id)
    with api_engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(query)]


def emit(document):
    """Print the contender's one-line JSON result on stdout."""
    sys.stdout.write(json.dumps(document) + '\n')
    sys.stdout.flush()
