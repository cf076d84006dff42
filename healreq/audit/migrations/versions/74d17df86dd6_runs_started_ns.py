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

"""Version 2: runs.started_ns orders the runs started in the same second.

Revision ID: 74d17df86dd6
Revises: 035ad12a78f5
Create Date: 2026-11-30

Existing runs get the nanoseconds of their whole-second start time. The
index on runs.started_at gives way to one on started_ns, by which runs
are listed.
"""

import datetime

from alembic import op
import sqlalchemy as sa

revision = '74d17df86dd6'
down_revision = '035ad12a78f5'
branch_labels = None
depends_on = None

_EPOCH = datetime.datetime(1970, 1, 1)


def upgrade():
    op.add_column('runs', sa.Column('started_ns', sa.BigInteger))
    _fill_started_ns()
    op.drop_index('runs_started_at_idx', table_name='runs')
    # SQLite cannot alter a column: batch mode copies the table.
    with op.batch_alter_table('runs') as batch:
        batch.alter_column('started_ns', existing_type=sa.BigInteger(),
                           nullable=False)
    op.create_index('runs_started_ns_idx', 'runs', ['started_ns'])
    op.execute(sa.text('UPDATE audit_schema SET version = 2'))


def _fill_started_ns():
    runs = sa.table('runs', sa.column('id', sa.String),
                    sa.column('started_at', sa.DateTime),
                    sa.column('started_ns', sa.BigInteger))
    conn = op.get_bind()
    values = [
        {'run_id': run_id,
         'ns': int((started_at - _EPOCH).total_seconds()) * 10 ** 9}
        for run_id, started_at in conn.execute(
            sa.select(runs.c.id, runs.c.started_at)).all()]
    if values:
        conn.execute(runs.update().where(
            runs.c.id == sa.bindparam('run_id')).values(
            started_ns=sa.bindparam('ns')), values)
