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

import contextlib
import inspect
import threading
import weakref

from oslo_db.sqlalchemy import engines
import sqlalchemy as sa

from healreq import conf as healreq_conf
from healreq import exception


# Connections per engine: a cell's page reader, its two page loaders and
# the thread that evaluates and writes each hold at most one at a time.
POOL_SIZE = 4

# Seconds a statement waits for a lock held by another session
# ([healreq]/lock_wait_timeout's default).
LOCK_WAIT_TIMEOUT = healreq_conf.option('healreq',
                                        'lock_wait_timeout').default


def create_engine(url, pool_size=POOL_SIZE,
                  lock_wait_timeout=LOCK_WAIT_TIMEOUT, answer_timeout=None):
    """Create an engine with oslo.db's settings for ``url``.

    Raises one of URL_ERRORS: ImportError if the URL's driver is not
    installed, ValueError if the URL is invalid, names an argument the
    driver does not take, or holds what the driver rejects before it
    connects.
    The connection is not tried here (``max_retries=0``): an unreachable
    cell surfaces as a DBConnectionError on first use, so that the caller
    can report it and carry on with the other cells instead of waiting
    through oslo.db's retry loop. On MySQL, a statement waits at most
    ``lock_wait_timeout`` seconds for a row or table lock another session
    holds (the servers' defaults are 50 s for rows, a year for tables),
    then fails with error 1205. ``pool_size`` None keeps oslo.db's pool,
    ``lock_wait_timeout`` None the server's lock waits. With
    ``answer_timeout`` (``[healreq]/database_timeout``), a PyMySQL
    connection waits at most that long to connect, and that long plus
    the lock wait for a statement to be sent or answered: a server that
    died behind a proxy fails the statement instead of hanging it.
    PyMySQL's connections share their default TLS context (see
    healreq.db.tls).
    """
    pool = {} if pool_size is None else dict(max_pool_size=pool_size,
                                             max_overflow=0)
    engine = engines.create_engine(url, max_retries=0,
                                   mysql_sql_mode='TRADITIONAL', **pool)
    check_connect_arguments(engine)
    if engine.dialect.driver == 'pymysql':
        _check_pymysql_accepts(engine)
        if answer_timeout:
            _bound_answers(engine, answer_timeout,
                           answer_timeout + (lock_wait_timeout or 0))
        from healreq.db import tls  # imports PyMySQL, as the dialect did
        sa.event.listen(engine, 'do_connect', tls.connect)
    if engine.dialect.name == 'mysql':
        _set_session(engine, lock_wait_timeout)
    return engine


def _bound_answers(engine, connect_seconds, statement_seconds):
    # Before the listener that connects: it only sets the arguments,
    # unless the URL's query string set them already.
    @sa.event.listens_for(engine, 'do_connect')
    def _set_timeouts(dialect, connection_record, cargs, cparams):
        cparams.setdefault('connect_timeout', connect_seconds)
        cparams.setdefault('read_timeout', statement_seconds)
        cparams.setdefault('write_timeout', statement_seconds)


# Room for an instance's system metadata packed by the server (see
# cell_queries); MySQL's default of 1024 bytes holds a few rows only.
GROUP_CONCAT_MAX_LEN = 16 * 1024 * 1024


def _set_session(engine, lock_wait_seconds):
    """Set each new connection's session variables, in one statement."""
    settings = ['group_concat_max_len = %d' % GROUP_CONCAT_MAX_LEN]
    if lock_wait_seconds:
        seconds = int(lock_wait_seconds)
        settings += ['innodb_lock_wait_timeout = %d' % seconds,
                     'lock_wait_timeout = %d' % seconds]
    statement = 'SET SESSION ' + ', '.join(settings)

    @sa.event.listens_for(engine, 'connect')
    def _set_variables(dbapi_connection, connection_record):
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()


# Whether an engine's server is a Galera node, learnt once per engine.
_GALERA_NODES = weakref.WeakKeyDictionary()
_GALERA_LOCK = threading.Lock()

# MySQL's "Unknown system variable".
_UNKNOWN_VARIABLE = 1193
# wsrep_sync_wait's bit for reads (SELECT, SHOW, BEGIN).
SYNC_WAIT_READS = 1


def is_galera_node(conn):
    """Whether ``conn``'s server is a node of a Galera cluster.

    Asked once per engine (``@@wsrep_on``: ON on a Galera node, OFF or
    unknown on a plain server); never True on SQLite.
    """
    engine = conn.engine
    with _GALERA_LOCK:
        known = _GALERA_NODES.get(engine)
    if known is not None:
        return known
    known = False
    if engine.dialect.name == 'mysql':
        try:
            known = str(conn.execute(sa.text(
                'SELECT @@wsrep_on')).scalar()).upper() in ('1', 'ON')
        except exception.DB_ERRORS as exc:
            if exception.mysql_error_code(exc) != _UNKNOWN_VARIABLE:
                raise
            # A server without Galera's variables (MySQL): not a node.
    with _GALERA_LOCK:
        _GALERA_NODES[engine] = known
    return known


@contextlib.contextmanager
def synced_reads(engine):
    """A connection of ``engine`` whose reads see the cluster's commits.

    On a Galera node the session's ``wsrep_sync_wait`` gains its read
    bit for the connection's use: a read first waits until the node has
    applied every write set the cluster committed before it, so that a
    re-read before a write sees what other nodes wrote. Elsewhere it is
    a plain connection. The setting is put back before the connection
    returns to the pool.
    """
    with engine.connect() as conn:
        previous = _raise_sync_wait(conn) if is_galera_node(conn) else None
        try:
            yield conn
        finally:
            if previous is not None:
                _restore_sync_wait(conn, previous)


def _raise_sync_wait(conn):
    """Set the read bit of wsrep_sync_wait; the value to restore or None."""
    previous = int(conn.execute(sa.text(
        'SELECT @@SESSION.wsrep_sync_wait')).scalar())
    if previous & SYNC_WAIT_READS:
        return None
    conn.execute(sa.text('SET SESSION wsrep_sync_wait = %d'
                         % (previous | SYNC_WAIT_READS)))
    return previous


def _restore_sync_wait(conn, previous):
    try:
        conn.execute(sa.text('SET SESSION wsrep_sync_wait = %d'
                             % previous))
    except exception.DB_ERRORS:
        # Whatever failed is reported by the caller; a connection whose
        # setting is unknown is not given back to the pool.
        conn.invalidate()


def check_connect_arguments(engine):
    """Raise ValueError if the driver does not take the URL's arguments.

    The query string of a URL becomes keyword arguments of the driver's
    ``connect``; a misspelt one would otherwise fail every connection
    with a TypeError.
    """
    dialect = engine.dialect
    dbapi = getattr(dialect, 'loaded_dbapi', None) or dialect.dbapi
    try:
        signature = inspect.signature(dbapi.connect)
    except (TypeError, ValueError):
        return  # a builtin without a signature: nothing to check
    args, kwargs = dialect.create_connect_args(engine.url)
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise ValueError('the %s driver does not take these arguments: '
                         '%s' % (dialect.driver, exc)) from None


def _check_pymysql_accepts(engine):
    """Raise ValueError if PyMySQL would refuse the URL before connecting.

    PyMySQL checks its arguments only when it connects, and then fails
    with errors that do not name the URL (an AttributeError for an
    unknown charset): a connection that is built but never opened shows
    them at once. The password is never quoted.
    """
    from healreq.db import tls  # imports PyMySQL, as the dialect did
    from pymysql import charset as charsets
    args, kwargs = engine.dialect.create_connect_args(engine.url)
    charset = kwargs.get('charset')
    if charset and charsets.charset_by_name(charset) is None:
        raise ValueError('the pymysql driver does not know charset %r'
                         % charset)
    try:
        tls.Connection(*args, defer_connect=True, **kwargs)
    except UnicodeError:
        raise ValueError('the pymysql driver cannot send its user or '
                         'password (a password must be Latin-1 text)'
                         ) from None
    except Exception as exc:
        raise ValueError('the pymysql driver rejects it: %s'
                         % exception.first_line(exc)) from None


# What creating an engine raises for a URL that cannot be used.
URL_ERRORS = (sa.exc.ArgumentError, ValueError, ImportError)


# The advice for a URL whose MySQL driver is MySQLdb (``mysql://``, the
# dialect's default, or ``mysql+mysqldb://``): this tool uses PyMySQL.
MYSQLDB_ADVICE = ('nova-heal uses PyMySQL: the URL should read '
                  'mysql+pymysql://, as in Nova\'s documentation')


def describe_error(exc):
    """One line for an error creating or opening an engine.

    A URL that needs MySQLdb says that this tool uses PyMySQL; the URL is
    never rewritten.
    """
    if isinstance(exc, ImportError):
        text = 'database driver not installed (%s)' % exception.first_line(
            exc)
        if getattr(exc, 'name', None) == 'MySQLdb':
            text += '; ' + MYSQLDB_ADVICE
        return text
    return exception.first_line(exc)
