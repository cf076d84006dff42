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


"""Database engines for the API database and each cell database."""

from oslo_db.sqlalchemy import engines


# Connections per engine: a cell's batch reader and the thread that
# evaluates and writes each hold at most one at a time.
POOL_SIZE = 2


def create_engine(url, pool_size=POOL_SIZE):
    """Create an engine with oslo.db's settings for ``url``.

    The connection is not tried here (``max_retries=0``): an unreachable
    cell surfaces as a DBConnectionError on first use, so that the caller
    can report it and carry on with the other cells instead of waiting
    through oslo.db's retry loop.
    """
    return engines.create_engine(url, max_retries=0,
                                 max_pool_size=pool_size, max_overflow=0,
                                 mysql_sql_mode='TRADITIONAL')
