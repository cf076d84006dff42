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

"""leases: run leases and locks that hold across a Galera cluster.

Revision ID: 2ba422cd4161
Revises: b954a130a319
Create Date: 2026-12-06

A named lock (GET_LOCK) is seen only by the server that holds it; on a
Galera cluster another node finds it free. A lease is also a row of
this table, renewed by its holder (see healreq.audit.lease). On MySQL the
migration lock creates the table before any migration runs, so it may
exist already.
"""

from alembic import op
import sqlalchemy as sa

revision = '2ba422cd4161'
down_revision = 'b954a130a319'
branch_labels = None
depends_on = None


LEASES = sa.Table(
    'leases', sa.MetaData(),
    sa.Column('name', sa.String(64), primary_key=True),
    sa.Column('server', sa.String(255), nullable=False),
    sa.Column('renewed_us', sa.BigInteger, nullable=False),
    mysql_charset='utf8mb4', mysql_collate='utf8mb4_unicode_ci')


def upgrade():
    op.execute(sa.schema.CreateTable(LEASES, if_not_exists=True))
