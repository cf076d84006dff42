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

"""audit_schema gets a primary key: every audit table has one.

Revision ID: b954a130a319
Revises: b3f0ec736a85
Create Date: 2026-12-06

A MariaDB Galera cluster replicates rows by their primary key; with
``wsrep_mode=REQUIRED_PRIMARY_KEY`` it refuses a table without one. The
version row's column becomes the key (the table holds one row, 3). The
stores created since revision 035ad12a78f5 was amended have it already.
"""

from alembic import op
import sqlalchemy as sa

revision = 'b954a130a319'
down_revision = 'b3f0ec736a85'
branch_labels = None
depends_on = None


def upgrade():
    conn = op.get_bind()
    if sa.inspect(conn).get_pk_constraint('audit_schema')[
            'constrained_columns']:
        return
    # SQLite cannot add a primary key: batch mode copies the table.
    with op.batch_alter_table('audit_schema') as batch:
        batch.create_primary_key('audit_schema_pkey', ['version'])
