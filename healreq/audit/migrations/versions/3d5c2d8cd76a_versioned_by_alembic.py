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

"""Versioned by alembic: align hand-upgraded stores, turn older releases away.

Revision ID: 3d5c2d8cd76a
Revises: 74d17df86dd6
Create Date: 2026-11-30

Stores that the hand-written upgrade brought to version 2 kept the index
on runs.started_at and a nullable runs.started_ns; from here they match
what the previous revision builds. ``audit_schema`` holds one row,
version 3, which every release from before alembic refuses as too new,
rather than write to a schema it no longer knows.
"""

from alembic import op
import sqlalchemy as sa

revision = '3d5c2d8cd76a'
down_revision = '74d17df86dd6'
branch_labels = None
depends_on = None


def upgrade():
    inspector = sa.inspect(op.get_bind())
    indexes = {index['name'] for index in inspector.get_indexes('runs')}
    nullable = {column['name']: column['nullable']
                for column in inspector.get_columns('runs')}
    if 'runs_started_at_idx' in indexes:
        op.drop_index('runs_started_at_idx', table_name='runs')
    if nullable['started_ns']:
        # The hand-written upgrade filled every row before recording 2.
        with op.batch_alter_table('runs') as batch:
            batch.alter_column('started_ns', existing_type=sa.BigInteger(),
                               nullable=False)
    # Exactly one row, also where a first run stopped before writing it
    # or two first runs both wrote one.
    op.execute(sa.text('DELETE FROM audit_schema'))
    op.execute(sa.text('INSERT INTO audit_schema (version) VALUES (3)'))
