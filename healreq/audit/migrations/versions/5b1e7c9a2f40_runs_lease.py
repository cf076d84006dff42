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

"""runs.lease: the kind of lease a run holds while it is alive.

Revision ID: 5b1e7c9a2f40
Revises: 3d5c2d8cd76a
Create Date: 2026-11-30

Runs recorded before have no lease (NULL): recovery counts them as dead
once they ended or started long enough ago (see AuditStore.recover).
"""

from alembic import op
import sqlalchemy as sa

revision = '5b1e7c9a2f40'
down_revision = '3d5c2d8cd76a'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('runs', sa.Column('lease', sa.String(16)))
