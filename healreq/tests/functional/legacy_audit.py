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

"""The audit store as the releases before alembic created and upgraded it.

A frozen copy of that code (schema versions 1 and 2, recorded in
``audit_schema``), so that tests can build the stores operators have and
check how this release adopts them, and how those releases treat a store
this release has migrated. Never change it to follow the models.
"""

import datetime

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

_LongText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')


class SchemaTooNew(Exception):
    """What those releases raised for a store newer than they knew."""


def tables(version):
    """The MetaData those releases created for schema ``version``."""
    metadata = sa.MetaData()
    sa.Table('audit_schema', metadata,
             sa.Column('version', sa.Integer, nullable=False))
    if version == 1:
        started = [sa.Index('runs_started_at_idx', 'started_at')]
    else:
        started = [sa.Column('started_ns', sa.BigInteger, nullable=False),
                   sa.Index('runs_started_ns_idx', 'started_ns')]
    sa.Table(
        'runs', metadata,
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
        sa.Column('exit_code', sa.Integer), *started)
    sa.Table(
        'changes', metadata,
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('run_id', sa.String(36), sa.ForeignKey('runs.id'),
                  nullable=False),
        sa.Column('instance_uuid', sa.String(36), nullable=False),
        sa.Column('cell_uuid', sa.String(36)),
        sa.Column('spec_id', sa.Integer, nullable=False),
        sa.Column('fields', sa.Text, nullable=False),
        sa.Column('before_text', _LongText, nullable=False),
        sa.Column('after_text', _LongText, nullable=False),
        sa.Column('before_digest', sa.String(64), nullable=False),
        sa.Column('after_digest', sa.String(64), nullable=False),
        sa.Column('state', sa.String(16), nullable=False),
        sa.Column('detail', sa.Text),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('resolved_at', sa.DateTime),
        sa.Index('changes_run_id_idx', 'run_id'),
        sa.Index('changes_state_idx', 'state'),
        sa.Index('changes_instance_uuid_idx', 'instance_uuid'))
    sa.Table(
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
        sa.Index('findings_instance_uuid_idx', 'instance_uuid'))
    return metadata


def open_store(engine, release):
    """What release ``release`` (1 or 2) did to a store it opened.

    It created its schema in an empty database, upgraded an older one by
    its hand-written steps, and refused a newer one.
    """
    metadata = tables(release)
    audit_schema = metadata.tables['audit_schema']
    with engine.begin() as conn:
        metadata.create_all(conn)
        version = conn.execute(sa.select(audit_schema.c.version)).scalar()
        if version is None:
            conn.execute(audit_schema.insert().values(version=release))
            return
        if version > release:
            raise SchemaTooNew(
                'the audit store has schema version %d; this healreq knows '
                'up to %d' % (version, release))
        if version < release:
            _add_started_ns(conn, metadata.tables['runs'])
            conn.execute(audit_schema.update().values(version=release))


def _add_started_ns(conn, runs):
    """The hand-written step from version 1 to 2."""
    conn.execute(sa.text('ALTER TABLE runs ADD COLUMN started_ns BIGINT'))
    for run_id, started_at in conn.execute(
            sa.select(runs.c.id, runs.c.started_at)).all():
        seconds = (started_at - datetime.datetime(1970, 1, 1)).total_seconds()
        conn.execute(runs.update().where(runs.c.id == run_id).values(
            started_ns=int(seconds) * 10 ** 9))
    conn.execute(sa.text('CREATE INDEX runs_started_ns_idx '
                         'ON runs (started_ns)'))
