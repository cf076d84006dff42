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


"""The databases a command opens: the API and Placement databases and the
audit store, each refused where it would be a Nova database it must not
be (healreq.protected).
"""

import contextlib
import errno

from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq.db import api_queries
from healreq.db import engines
from healreq.db import locations
from healreq.db import urls
from healreq import exception
from healreq.exception import ExitCode
from healreq import masking
from healreq.protected import Protected
from healreq.protected import refuse_unsafe_outputs
from healreq.run import allocation_walk


def waits(conf):
    """The bounds of every wait for a database under ``conf``.

    engines.create_engine's keyword arguments: ``lock_wait_timeout``
    and ``answer_timeout`` (``[healreq]/database_timeout``).
    """
    return dict(lock_wait_timeout=conf.healreq.lock_wait_timeout,
                answer_timeout=conf.healreq.database_timeout)


def create_engine(option, url, **kwargs):
    """The engine of ``url``, the value of configuration ``option``.

    The one way every database URL of the configuration becomes an
    engine: a URL that is invalid, names a driver that is not installed,
    or holds what the driver rejects before it connects (a password it
    cannot send, an unknown charset) raises InvalidInput (exit 127) in
    one line that names the option; ``kwargs`` go to
    engines.create_engine.
    """
    try:
        return engines.create_engine(url, **kwargs)
    except engines.URL_ERRORS as exc:
        raise exception.InvalidInput('invalid %s: %s' % (
            option, masking.mask_password(engines.describe_error(exc))))


@contextlib.contextmanager
def api_database(conf, pool_size=engines.POOL_SIZE):
    """The API database engine of ``[api_database]/connection``."""
    if not conf.api_database.connection:
        raise exception.InvalidInput('[api_database]/connection is not set; '
                                     'pass --config-file /etc/nova/nova.conf')
    engine = create_engine(
        '[api_database]/connection', conf.api_database.connection,
        pool_size=pool_size, **waits(conf))
    try:
        yield engine
    finally:
        engine.dispose()


@contextlib.contextmanager
def checked_api_database(conf, outputs=(), uses_store=True,
                         pool_size=engines.POOL_SIZE):
    """The API database engine, once the cells' databases are protected.

    The cell mappings are read first: no output file (``outputs``,
    (option, path) pairs) may replace a cell's database
    (protected.refuse_unsafe_outputs), and, where the command
    ``uses_store``, the configured audit store must not be one of them.
    """
    store_url = locations.audit_store_url(conf)
    protected = refuse_unsafe_outputs(conf, outputs, cells_next=True)
    with api_database(conf, pool_size) as api_engine:
        if uses_store or any(path for _, path in outputs):
            with exception.reraised_as(exception.ApiDatabaseError):
                with api_engine.connect() as conn:
                    cells = api_queries.get_cells(conn)
            with_cells = protected.with_cells(cells,
                                              conf.database.connection)
            if uses_store:
                with_cells.check_store(store_url)
            with_cells.check_outputs(outputs)
        yield api_engine


_AUDIT_OPEN_ERRORS = (OSError, ValueError, ImportError,
                      audit_schema.SchemaTooNew) + exception.DB_ERRORS

# The options that move the audit store, as messages name them.
STORE_OPTIONS = '[healreq]/state_path or [healreq]/audit_connection'

# What says a store cannot be created or written by this user, or on this
# storage: errno values, and the words of database errors (SQLite's
# read-only or unopenable file, a MySQL user without the privilege).
_ACCESS_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)
_ACCESS_WORDS = ('readonly', 'read-only', 'unable to open database file')
# MySQL's "access denied" to a database and "command denied" (a missing
# privilege); not 1045, a login refused for its credentials, which is a
# configuration to correct.
_ACCESS_CODES = (1044, 1142)


def cannot_write(exc):
    """Whether ``exc`` or its cause says the store cannot be written.

    That is: created, opened or written for lack of permission, or on
    read-only storage. A store refused for what it is (a symbolic link,
    not a database, a newer schema) is not such a store.
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (audit_store.UnsafeStorePath,
                            audit_schema.SchemaTooNew)):
            return False
        if isinstance(exc, OSError) and exc.errno in _ACCESS_ERRNOS:
            return True
        if isinstance(exc, exception.DB_ERRORS) and (
                exception.mysql_error_code(exc) in _ACCESS_CODES
                or any(word in str(exc).lower() for word in _ACCESS_WORDS)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def with_store_options(error):
    """``error``, naming the options that move the store if need be.

    An AuditStoreError of a store that cannot be written (cannot_write)
    is given again with a message naming them; any other is ``error``.
    """
    if not cannot_write(error) or STORE_OPTIONS in str(error):
        return error
    named = exception.AuditStoreError(
        '%s (set %s to move the store)' % (error, STORE_OPTIONS),
        exit_code=error.exit_code)
    named.__cause__ = error
    return named


def open_audit(conf, read_only=False, check_cells=False, unchecked=None):
    """Open (creating or upgrading) the audit store; the caller disposes.

    With ``read_only``, an SQLite store that is already at this release's
    schema is opened read-only and nothing is written to it or its file
    (a store on read-only storage can be reviewed); one that needs an
    upgrade and cannot be written is reported in one line. Raises
    AuditStoreError (exit 127) if it cannot be opened, or if it would be
    a Nova database the configuration names (healreq.protected). With
    ``check_cells``, and an API database configured, the cell mappings
    are read first and a store in a cell's database is refused too (the
    commands that run work through checked_api_engine instead). If they
    cannot be read, ApiDatabaseError is raised, unless ``unchecked`` is
    given: it is then called with a one-line warning, and the store is
    opened all the same (reading a local store needs no cloud database).
    """
    url = locations.audit_store_url(conf)
    protected = Protected.configured(conf)
    protected.check_store(url)
    if check_cells and conf.api_database.connection:
        try:
            with api_database(conf, pool_size=1) as api_engine:
                with exception.reraised_as(exception.ApiDatabaseError):
                    with api_engine.connect() as conn:
                        cells = api_queries.get_cells(conn)
        except exception.ApiDatabaseError as exc:
            if unchecked is None:
                raise
            unchecked(masking.mask_password(
                'nova-heal: warning: the audit store was not checked '
                'against the cells\' databases: cannot read the cell '
                'mappings: %s' % exc))
        else:
            protected.with_cells(
                cells, conf.database.connection).check_store(url)
    try:
        if read_only:
            store = audit_store.open_read_only(url)
            if store is not None:
                return store
        return audit_store.AuditStore(
            url, answer_timeout=conf.healreq.database_timeout)
    except _AUDIT_OPEN_ERRORS as exc:
        reason = engines.describe_error(exc)
        if read_only and (isinstance(exc, OSError)
                          or 'readonly' in reason.lower()):
            reason = ('the store needs creating or upgrading to this '
                      'release\'s schema but cannot be written (%s)' % reason)
        error = exception.AuditStoreError(
            'cannot open %s: %s' % (urls.mask_url(url),
                                    masking.mask_password(reason)),
            exit_code=ExitCode.INVALID_INPUT)
        error.__cause__ = exc
        raise with_store_options(error)


@contextlib.contextmanager
def opened_audit(conf, store=None):
    """``store`` if given, else the configured store, disposed after."""
    if store is not None:
        yield store
        return
    store = open_audit(conf)
    try:
        yield store
    finally:
        store.dispose()


@contextlib.contextmanager
def placement_database(conf):
    """The engine of ``[placement_database]/connection``."""
    # A connection for each of the walk's loaders.
    engine = create_engine(
        '[placement_database]/connection',
        conf.placement_database.connection,
        pool_size=allocation_walk.LOADERS, **waits(conf))
    try:
        yield engine
    finally:
        engine.dispose()
