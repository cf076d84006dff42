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
MySQL commits each DDL statement implicitly, so a lock serializes the
migrations instead: the row ``schema-migration`` of the ``leases`` table
(created first if need be), which every node of a Galera cluster sees,
renewed while the migration runs (see ``healreq.audit.lease``), and
free once its holder deleted it or stopped renewing it (``lease.EXPIRY``).
"""

import contextlib
import hashlib
import time

from oslo_db import exception as db_exc
import sqlalchemy as sa
from sqlalchemy import pool

from healreq.audit import lease
from healreq.audit import schema

# Seconds a migration waits for another one to finish.
LOCK_TIMEOUT = 60

# The lease row of the migration lock.
MIGRATION_ROW = 'schema-migration'

# Seconds between two attempts to take a taken lock.
_POLL = 0.2

# MySQL's deadlock error, which a Galera node also raises for a
# certification failure.
_DEADLOCK = 1213

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
    """The GET_LOCK name for a store (names are server-wide, <= 64 chars).

    Kept for the releases that lock with it; the lock is now a row.
    """
    return 'healreq-audit-schema-%s' % hashlib.sha256(
        database.encode('utf-8')).hexdigest()[:32]


@contextlib.contextmanager
def _mysql_named_lock(conn, database):
    with conn.begin():
        conn.execute(sa.schema.CreateTable(schema.leases,
                                           if_not_exists=True))
    _take_row(conn)
    renewer = lease.Renewer(conn.engine, MIGRATION_ROW)
    try:
        with conn.begin():
            yield conn
    finally:
        # Only once committed: the next holder must see the new revision.
        renewer.stop()
        with conn.begin():
            lease.delete_row(conn, MIGRATION_ROW)


def _lost_race(exc):
    """Whether inserting the lock's row failed because it is taken.

    Through oslo.db's engine (the store's) or plain SQLAlchemy's.
    """
    if isinstance(exc, (db_exc.DBDuplicateEntry, db_exc.DBDeadlock,
                        sa.exc.IntegrityError)):
        return True
    orig = getattr(exc, 'orig', None)
    return bool(isinstance(exc, sa.exc.OperationalError) and orig.args
                and orig.args[0] == _DEADLOCK)


def _take_row(conn):
    """Insert the migration lock's row, waiting up to LOCK_TIMEOUT."""
    deadline = time.monotonic() + LOCK_TIMEOUT
    while True:
        try:
            with conn.begin():
                lease.insert_row(conn, MIGRATION_ROW)
            return
        except Exception as exc:
            # Taken, or taken at the same moment on another Galera node.
            if not _lost_race(exc):
                raise
        with conn.begin():
            row = lease.lease_row(conn, MIGRATION_ROW)
            if row is not None and row.age_us > lease.EXPIRY * 10 ** 6:
                # Its holder died: take it over, unless someone else did.
                lease.delete_row(conn, MIGRATION_ROW, row.renewed_us)
                continue
        if time.monotonic() > deadline:
            raise TimeoutError(
                'another process has been migrating the audit store '
                'for %d seconds' % LOCK_TIMEOUT)
        time.sleep(_POLL)
