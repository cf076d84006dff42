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

"""One schema migration at a time per audit store.

Two commands may open a store that needs migrating at the same moment;
the second waits here for the first, then finds the store migrated.

SQLite: the migration runs in one ``BEGIN IMMEDIATE`` transaction, which
takes the database's write lock up front (others wait for it) and makes
the whole migration atomic.
MySQL commits each DDL statement implicitly, so a named lock (GET_LOCK)
for the store's database serializes the migrations instead.
"""

import contextlib
import hashlib

import sqlalchemy as sa
from sqlalchemy import pool

# Seconds a migration waits for another one to finish.
LOCK_TIMEOUT = 60

# Called with the engine right before a migration takes the store's lock,
# where it may wait for another one to finish (tests use it to know that
# an opener got that far).
on_wait = None


@contextlib.contextmanager
def migration_lock(engine):
    """A connection in a transaction that holds the store's migration lock.

    The transaction commits when the block exits normally, and the lock
    is released after the commit. Raises TimeoutError if the MySQL lock
    stays taken for LOCK_TIMEOUT seconds; on SQLite, the driver's
    ``database is locked`` error after as long.
    """
    if on_wait is not None:
        on_wait(engine)
    if engine.dialect.name == 'sqlite' and not _in_memory(engine.url):
        with _sqlite_immediate(engine.url) as conn:
            yield conn
    elif engine.dialect.name == 'mysql':
        with engine.connect() as conn:
            with _mysql_named_lock(conn, engine.url.database or ''):
                yield conn
    else:
        with engine.begin() as conn:
            yield conn


def _in_memory(url):
    return url.database in (None, '', ':memory:')


@contextlib.contextmanager
def _sqlite_immediate(url):
    # A connection of its own, set up as SQLAlchemy documents for
    # transactional DDL on pysqlite, but with BEGIN IMMEDIATE.
    engine = sa.create_engine(url, poolclass=pool.NullPool,
                              connect_args={'timeout': LOCK_TIMEOUT})

    @sa.event.listens_for(engine, 'connect')
    def _driver_begins_nothing(dbapi_connection, connection_record):
        dbapi_connection.isolation_level = None

    @sa.event.listens_for(engine, 'begin')
    def _begin_immediate(conn):
        conn.exec_driver_sql('BEGIN IMMEDIATE')

    try:
        with engine.begin() as conn:
            yield conn
    finally:
        engine.dispose()


def mysql_lock_name(database):
    """The GET_LOCK name for a store (names are server-wide, <= 64 chars)."""
    return 'healreq-audit-schema-%s' % hashlib.sha256(
        database.encode('utf-8')).hexdigest()[:32]


@contextlib.contextmanager
def _mysql_named_lock(conn, database):
    name = mysql_lock_name(database)
    acquired = False
    try:
        with conn.begin():
            acquired = conn.execute(sa.select(sa.func.get_lock(
                name, LOCK_TIMEOUT))).scalar() == 1
            if not acquired:
                raise TimeoutError(
                    'another process has been migrating the audit store '
                    'for %d seconds' % LOCK_TIMEOUT)
            yield conn
    finally:
        # Only once committed: the next holder must see the new revision.
        if acquired:
            conn.execute(sa.select(sa.func.release_lock(name)))
