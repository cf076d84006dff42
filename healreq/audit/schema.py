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


"""The audit store's tables, as the store reads and writes them.

These are the models: the migrations in ``healreq.audit.migrations`` build
exactly these tables (a test compares them on every backend), and bring
any older store up to them when it is opened.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from healreq import exception

# Spec texts are MEDIUMTEXT in Nova's API database; keep the same room.
_LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')

metadata = sa.MetaData()

# Any text, whatever the database's default character set (latin1 on
# MySQL 5.7 and upstream MariaDB).
_MYSQL_TABLE_ARGS = {'mysql_charset': 'utf8mb4',
                     'mysql_collate': 'utf8mb4_unicode_ci'}

# The version row of the stores from before alembic, kept so that those
# releases refuse a store they no longer understand (it records 3). Its
# primary key is there for servers that require one on every table.
audit_schema = sa.Table(
    'audit_schema', metadata,
    sa.Column('version', sa.Integer, primary_key=True, autoincrement=False),
    **_MYSQL_TABLE_ARGS)

runs = sa.Table(
    'runs', metadata,
    sa.Column('id', sa.String(36), primary_key=True),
    sa.Column('started_at', sa.DateTime, nullable=False),
    # Orders runs started within the same second.
    sa.Column('started_ns', sa.BigInteger, nullable=False),
    sa.Column('ended_at', sa.DateTime),
    sa.Column('mode', sa.String(16), nullable=False),
    sa.Column('command', sa.Text, nullable=False),
    sa.Column('operator', sa.String(255)),
    sa.Column('host', sa.String(255)),
    sa.Column('tool_version', sa.String(64)),
    sa.Column('filters', sa.Text),
    sa.Column('summary', sa.Text),
    sa.Column('exit_code', sa.Integer),
    # The kind of lease the run held while alive (healreq.audit.lease);
    # NULL for runs recorded before leases existed.
    sa.Column('lease', sa.String(16)),
    sa.Index('runs_started_ns_idx', 'started_ns'),
    **_MYSQL_TABLE_ARGS)

changes = sa.Table(
    'changes', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('run_id', sa.String(36), sa.ForeignKey('runs.id'),
              nullable=False),
    sa.Column('instance_uuid', sa.String(36), nullable=False),
    sa.Column('cell_uuid', sa.String(36)),
    # NULL for a change that inserts the row, until it is written.
    sa.Column('spec_id', sa.Integer),
    sa.Column('fields', sa.Text, nullable=False),
    # NULL where there is no row: before an insert, after a delete.
    sa.Column('before_text', _LongText),
    sa.Column('after_text', _LongText),
    sa.Column('before_digest', sa.String(64)),
    sa.Column('after_digest', sa.String(64)),
    # update, insert or delete (healreq.run.writer).
    sa.Column('action', sa.String(16), nullable=False,
              server_default='update'),
    # pending -> applied | refused; 'unknown' when recovery found the row
    # holding neither value.
    sa.Column('state', sa.String(16), nullable=False),
    sa.Column('detail', sa.Text),
    sa.Column('created_at', sa.DateTime, nullable=False),
    sa.Column('resolved_at', sa.DateTime),
    sa.Index('changes_run_id_idx', 'run_id'),
    sa.Index('changes_state_idx', 'state'),
    sa.Index('changes_instance_uuid_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

findings = sa.Table(
    'findings', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('run_id', sa.String(36), sa.ForeignKey('runs.id'),
              nullable=False),
    sa.Column('instance_uuid', sa.String(36), nullable=False),
    sa.Column('cell_uuid', sa.String(36)),
    sa.Column('status', sa.String(16), nullable=False),
    sa.Column('reason', sa.String(64)),
    sa.Column('drift', sa.Text),
    sa.Column('detail', sa.Text),
    sa.Index('findings_run_id_idx', 'run_id'),
    sa.Index('findings_instance_uuid_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

# The leases and locks that every client of a MySQL/MariaDB store must
# see, whichever server of a Galera cluster it talks to
# (healreq.audit.lease): one row per held lease, renewed by its holder.
leases = sa.Table(
    'leases', metadata,
    sa.Column('name', sa.String(64), primary_key=True),
    # The server whose named lock backs the lease (host:port).
    sa.Column('server', sa.String(255), nullable=False),
    # The database server's clock at the last renewal, in microseconds.
    sa.Column('renewed_us', sa.BigInteger, nullable=False),
    **_MYSQL_TABLE_ARGS)


class SchemaTooNew(exception.AuditStoreError):
    """The store was written by a newer healreq: it cannot be opened."""
    exit_code = exception.ExitCode.INVALID_INPUT
