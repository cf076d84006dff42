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


"""Helpers shared by the benchmark scripts.

The floor and naive contenders reach the databases the way ``nova-heal``
does: the tool's engine factory (``healreq.db.engines``), its cell
selection and the cell URLs formatted as it formats them, so that
connecting costs them what it costs the tool. nova.conf is read with
``configparser``: parsing options is not part of reading the data.
"""

import configparser
import json
import os
import sys

import healreq
from healreq.db import api_queries
from healreq.db import engines
from healreq.db import urls
from healreq import nova_constants


def connections(config_file):
    """``[api_database]/connection`` and ``[database]/connection``."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.read(config_file)
    return (parser.get('api_database', 'connection'),
            parser.get('database', 'connection', fallback=None))


def api_engine(config_file):
    """The API database engine, created as the tool creates it."""
    return engines.create_engine(connections(config_file)[0])


def cells(api_engine):
    """The cell mappings the tool walks (all but cell0), ordered by id."""
    with api_engine.connect() as conn:
        return [cell for cell in api_queries.get_cells(conn)
                if cell['uuid'] != nova_constants.CELL0_UUID]


def cell_engine(cell, config_file):
    """A cell's engine, its URL formatted as the tool formats it."""
    reference = connections(config_file)[1]
    return engines.create_engine(urls.format_cell_url(
        cell['database_connection'] or '', reference))


def emit(document):
    """Print the contender's one-line JSON result on stdout."""
    sys.stdout.write(json.dumps(document) + '\n')
    sys.stdout.flush()


def compile_healreq():
    """Compile healreq's modules to bytecode, as installing it does.

    pip and distribution packages install the modules compiled. A
    checkout run with PYTHONDONTWRITEBYTECODE set would compile them
    again at every start, some 0.1 s of CPU no installed tool spends.
    Returns whether every module is compiled (False if the tree is
    read-only).
    """
    # Imported here: the floor and naive contenders import this module,
    # and compileall's imports (some 30 ms) would count in their time.
    import compileall
    return bool(compileall.compile_dir(os.path.dirname(healreq.__file__),
                                       quiet=2))
