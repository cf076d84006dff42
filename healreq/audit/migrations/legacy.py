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

"""Stores created before the schema was versioned with alembic.

Those releases recorded the schema version in the one row of
``audit_schema``: 1, then 2 (runs.started_ns). Each version is what one
revision builds, so such a store is stamped at that revision and then
upgraded like any other; its data stays in place.
"""

import sqlalchemy as sa

from healreq.audit import schema

# The revision that leaves each version in audit_schema. 3 is the first
# revision under alembic; found without alembic's version table, it means
# that table alone was lost.
REVISIONS = {1: '035ad12a78f5', 2: '74d17df86dd6', 3: '3d5c2d8cd76a'}


def revision(conn):
    """The revision an unversioned store is at; None for an empty one.

    Raises schema.SchemaTooNew for a version this healreq does not know.
    """
    inspector = sa.inspect(conn)
    if not inspector.has_table('audit_schema'):
        return None
    version = conn.execute(sa.select(schema.audit_schema.c.version)).scalar()
    if version is None:
        # A first run stopped between creating the tables and recording
        # their version: the runs table tells which release created them.
        columns = {c['name'] for c in inspector.get_columns('runs')}
        version = 2 if 'started_ns' in columns else 1
    if version not in REVISIONS:
        raise schema.SchemaTooNew(
            'the audit store has schema version %d; this healreq knows '
            'up to %d' % (version, max(REVISIONS)))
    return REVISIONS[version]
