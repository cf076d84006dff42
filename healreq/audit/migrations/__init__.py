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


"""The audit store's schema migrations (alembic), run by healreq itself.

A store is brought to the head revision whenever it is opened: an empty
database gets every revision, a store from before alembic is adopted at
the version it recorded (see ``legacy``), and a store at a revision this
healreq does not know is refused. ``env.py`` runs the revisions in
``versions/`` on the connection handed over in the alembic configuration,
so neither alembic.ini nor the command-line tool is needed.

alembic (with mako and pygments) takes a third of a command's start-up,
and a store is nearly always at the head already: that is checked with
one query against ``HEAD``, and alembic is imported only to migrate.

To add a revision, run ``alembic revision -m "what it does"`` at the top
of the checkout (alembic.ini is there for that command only), write its
``upgrade()``, set ``HEAD`` to it, update the tables in
``healreq.audit.schema`` to match, and add a check for it to the
migration walk test.
"""

import contextlib
import logging
import os

import sqlalchemy as sa

from healreq.audit.migrations import legacy
from healreq.audit.migrations import lock
from healreq.audit import schema
from healreq import exception

# Not alembic_version: the store may share a database with another
# application's alembic history (Nova's databases have one).
VERSION_TABLE = 'audit_alembic_version'

# The newest revision in versions/ (a unit test keeps them equal).
HEAD = '2ba422cd4161'

_VERSIONS = sa.table(VERSION_TABLE, sa.column('version_num'))

LOCATION = os.path.dirname(os.path.abspath(__file__))


def upgrade(engine):
    """Bring the store behind ``engine`` to the head revision.

    Raises schema.SchemaTooNew for a store written by a newer healreq.
    A command that finds another one migrating the store waits for it
    (see ``lock``), then finds the store migrated.
    """
    with engine.connect() as conn:
        if stored_revisions(conn) == [HEAD]:
            return
    with _alembic_quiet():
        script = scripts()
        with engine.connect() as conn:
            if _at_head(script, current_revision(conn)):
                return
        with lock.migration_lock(engine) as conn:
            # Another process may have migrated it while we waited.
            current = current_revision(conn)
            if not _at_head(script, current):
                _migrate(conn, current)


def stored_revisions(conn):
    """The revisions the version table holds; None if it has none."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    try:
        return conn.execute(sa.select(_VERSIONS.c.version_num)).scalars(
            ).all()
    except exception.DB_ERRORS:
        return None


def scripts():
    """The revisions shipped with this healreq."""
    from alembic import script as alembic_script
    return alembic_script.ScriptDirectory.from_config(config())


def config(connection=None):
    """An alembic configuration that runs on ``connection``."""
    from alembic import config as alembic_config
    result = alembic_config.Config()
    # The value goes through ConfigParser interpolation.
    result.set_main_option('script_location', LOCATION.replace('%', '%%'))
    result.attributes['connection'] = connection
    return result


def current_revision(conn):
    """The store's revision; None for a store alembic never touched."""
    from alembic.runtime import migration
    context = migration.MigrationContext.configure(
        conn, opts={'version_table': VERSION_TABLE})
    return context.get_current_revision()


def _at_head(script, current):
    """Whether ``current`` is the head; SchemaTooNew if it is unknown."""
    head = script.get_current_head()
    if current == head:
        return True
    if current is not None and current not in {
            s.revision for s in script.walk_revisions()}:
        raise schema.SchemaTooNew(
            'the audit store has schema revision %s; this healreq knows '
            'up to %s' % (current, head))
    return False


def _migrate(conn, current):
    from alembic import command
    cfg = config(conn)
    if current is None:
        adopted = legacy.revision(conn)
        if adopted:
            command.stamp(cfg, adopted)
    command.upgrade(cfg, 'head')


@contextlib.contextmanager
def _alembic_quiet():
    """Keep alembic's INFO lines off the tool's stderr while it migrates.

    Every command opens the store, and stderr carries only warnings unless
    asked for more. Left alone when the operator set alembic's level.
    """
    logger = logging.getLogger('alembic')
    if logger.level != logging.NOTSET:
        yield
        return
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(logging.NOTSET)
