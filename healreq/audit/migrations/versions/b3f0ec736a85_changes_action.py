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

"""changes.action: spec rows created (--create-missing) and deleted.

Revision ID: b3f0ec736a85
Revises: 05d1b6b0869b
Create Date: 2026-12-01

A change updates a spec row (every change recorded before), inserts one
for an instance that has none, or deletes one (the revert of an insert).
An insert has no row id until it is written and no before text; a
delete has no after text: those columns become nullable.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'b3f0ec736a85'
down_revision = '05d1b6b0869b'
branch_labels = None
depends_on = None

_LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')


def upgrade():
    # SQLite cannot alter a column: batch mode copies the table.
    with op.batch_alter_table('changes') as batch:
        batch.add_column(sa.Column('action', sa.String(16), nullable=False,
                                   server_default='update'))
        batch.alter_column('spec_id', existing_type=sa.Integer(),
                           nullable=True)
        for column in ('before_text', 'after_text'):
            batch.alter_column(column, existing_type=_LongText,
                               nullable=True)
        for column in ('before_digest', 'after_digest'):
            batch.alter_column(column, existing_type=sa.String(64),
                               nullable=True)
