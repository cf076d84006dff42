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

"""utf8mb4: the audit tables hold any text on MySQL.

Revision ID: 05d1b6b0869b
Revises: 5b1e7c9a2f40
Create Date: 2026-12-01

Tables created without a character set take the database's default,
which is latin1 on MySQL 5.7 and on upstream MariaDB; a finding that
quotes a flavor name in another script then fails to be recorded.
Existing tables are converted to utf8mb4, keeping their data; other
backends store any text already.
"""

from alembic import op
import sqlalchemy as sa

revision = '05d1b6b0869b'
down_revision = '5b1e7c9a2f40'
branch_labels = None
depends_on = None

TABLES = ('audit_schema', 'runs', 'changes', 'findings')


def upgrade():
    conn = op.get_bind()
    if conn.dialect.name != 'mysql':
        return
    latin = [table for table in TABLES if _charset(conn, table) != 'utf8mb4']
    if not latin:
        return
    # runs.id and the run_id columns referring to it change together, and
    # MySQL refuses to convert a column a foreign key joins: the keys go
    # while the tables are converted.
    foreign_keys = conn.execute(sa.text(
        'SELECT constraint_name, table_name FROM '
        'information_schema.referential_constraints WHERE '
        "constraint_schema = DATABASE() AND referenced_table_name = 'runs'"
    )).all()
    for name, table in foreign_keys:
        op.drop_constraint(name, table, type_='foreignkey')
    for table in latin:
        # Rewrites the table; MySQL widens TEXT columns as needed.
        op.execute('ALTER TABLE %s CONVERT TO CHARACTER SET utf8mb4 '
                   'COLLATE utf8mb4_unicode_ci' % table)
    for name, table in foreign_keys:
        op.create_foreign_key(name, table, 'runs', ['run_id'], ['id'])


def _charset(conn, table):
    return conn.execute(sa.text(
        'SELECT c.character_set_name FROM information_schema.tables t '
        'JOIN information_schema.collation_character_set_applicability c '
        'ON c.collation_name = t.table_collation '
        'WHERE t.table_schema = DATABASE() AND t.table_name = :table'),
        {'table': table}).scalar()
