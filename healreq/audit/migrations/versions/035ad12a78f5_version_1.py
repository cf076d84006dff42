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

"""Version 1: runs, their findings and changes, and the version row.

Revision ID: 035ad12a78f5
Revises:
Create Date: 2026-11-30

Builds the schema the first release created by hand, including its
``audit_schema`` version row (1), so that a store from that release is
exactly this revision, but for the primary key of ``audit_schema``: a
server that requires every table to have one (Galera's
``wsrep_mode=REQUIRED_PRIMARY_KEY``) refuses the table without it, and
revision b954a130a319 adds it to the stores created before.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '035ad12a78f5'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    version = op.create_table(
        'audit_schema',
        sa.Column('version', sa.Integer, primary_key=True,
                  autoincrement=False))
    op.bulk_insert(version, [{'version': 1}])
    _create_runs()
    _create_changes()
    _create_findings()


def _create_runs():
    op.create_table(
        'runs',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('started_at', sa.DateTime, nullable=False),
        sa.Column('ended_at', sa.DateTime),
        sa.Column('mode', sa.String(16), nullable=False),
        sa.Column('command', sa.Text, nullable=False),
        sa.Column('operator', sa.String(255)),
        sa.Column('host', sa.String(255)),
        sa.Column('tool_version', sa.String(64)),
        sa.Column('filters', sa.Text),
        sa.Column('summary', sa.Text),
        sa.Column('exit_code', sa.Integer))
    op.create_index('runs_started_at_idx', 'runs', ['started_at'])


def _create_changes():
    long_text = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')
    op.create_table(
        'changes',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('run_id', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('cell_uuid', sa.String(36)),
        sa.Column('spec_id', sa.Integer, nullable=False),
        sa.Column('fields', sa.Text, nullable=False),
        sa.Column('before_text', long_text, nullable=False),
        sa.Column('after_text', long_text, nullable=False),
        sa.Column('before_digest', sa.String(64), nullable=False),
        sa.Column('after_digest', sa.String(64), nullable=False),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('detail', sa.Text),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('resolved_at', sa.DateTime),
        sa.ForeignKeyConstraint(['run_id'], ['runs.id']))
    op.create_index('changes_run_id_idx', 'changes', ['run_id'])
    op.create_index('changes_state_idx', 'changes', ['state'])
    op.create_index('changes_instance_uuid_idx', 'changes',
                    ['instance_uuid'])


def _create_findings():
    op.create_table(
        'findings',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('run_id', sa.String(36), nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('cell_uuid', sa.String(36)),
        sa.Column('status', sa.String(16), nullable=False),
        sa.Column('reason', sa.String(64)),
        sa.Column('drift', sa.Text),
        sa.Column('detail', sa.Text),
        sa.ForeignKeyConstraint(['run_id'], ['runs.id']))
    op.create_index('findings_run_id_idx', 'findings', ['run_id'])
    op.create_index('findings_instance_uuid_idx', 'findings',
                    ['instance_uuid'])
