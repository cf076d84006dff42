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


"""Our table subset agrees with the schema Nova's own migrations create."""

import sqlalchemy as sa
import testscenarios

from healreq.db import tables
from healreq.tests.compat import base
from healreq.tests.functional import backends

try:
    from nova.db import migration
except ImportError:  # pragma: no cover - depends on the environment
    migration = None


# MySQL's BOOL is its TINYINT(1); reflection reports the latter.
_SAME_TYPE = {'BOOL': 'TINYINT', 'BOOLEAN': 'TINYINT'}

# Indexes that Nova created only from a given major version on: the table
# subset declares them as the newest Nova has them, and the older Nova
# under test rightly lacks them. Nova 34 (2026.2) added the migrations'
# indexes by source and by destination (its migration ab450ba04102).
_INDEXES_SINCE = {'migrations_by_src_host_nodes_and_status_idx': 34,
                  'migrations_by_dest_host_nodes_and_status_idx': 34}


def _expected(index):
    """Whether the Nova under test must have ``index``."""
    since = _INDEXES_SINCE.get(index.name)
    return since is None or base.NOVA_VERSION[0] >= since


def _type_name(column_type, dialect):
    name = column_type.compile(dialect=dialect).split('(')[0].upper()
    return _SAME_TYPE.get(name, name) if dialect.name == 'mysql' else name


class SchemaTest(testscenarios.WithScenarios, base.NovaTestCase):
    """Create Nova's schema with its migrations, then compare ours."""

    scenarios = backends.SCENARIOS

    def setUp(self):
        super().setUp()
        self.db = self.useFixture(self.backend_fixture())

    def _migrated(self, database, metadata):
        engine = sa.create_engine(self.db.database_url('nova_' + database))
        self.addCleanup(engine.dispose)
        config = migration._find_alembic_conf(database)
        migration._upgrade_alembic(engine, config, None)
        return engine

    def _compare(self, database, metadata):
        engine = self._migrated(database, metadata)
        inspector = sa.inspect(engine)
        dialect = engine.dialect
        problems = []
        for table in metadata.sorted_tables:
            columns = {c['name']: c for c in inspector.get_columns(
                table.name)}
            for column in table.columns:
                real = columns.get(column.name)
                if real is None:
                    problems.append('%s.%s missing' % (table.name,
                                                       column.name))
                    continue
                ours = _type_name(column.type, dialect)
                theirs = _type_name(real['type'], dialect)
                if ours != theirs:
                    problems.append('%s.%s type %s, Nova %s' % (
                        table.name, column.name, ours, theirs))
                if column.nullable != real['nullable']:
                    problems.append('%s.%s nullable %s, Nova %s' % (
                        table.name, column.name, column.nullable,
                        real['nullable']))
                length = getattr(column.type, 'length', None)
                if length and length != getattr(real['type'], 'length',
                                                None):
                    problems.append('%s.%s length %s, Nova %s' % (
                        table.name, column.name, length,
                        real['type'].length))
            real_uniques = {tuple(u['column_names']) for u in
                            inspector.get_unique_constraints(table.name)}
            real_uniques |= {tuple(i['column_names']) for i in
                             inspector.get_indexes(table.name)
                             if i['unique']}
            for constraint in table.constraints:
                if isinstance(constraint, sa.UniqueConstraint):
                    names = tuple(c.name for c in constraint.columns)
                    if names not in real_uniques:
                        problems.append('%s unique %s missing' % (
                            table.name, names))
            real_indexes = {tuple(i['column_names']) for i in
                            inspector.get_indexes(table.name)}
            real_indexes |= real_uniques
            for index in table.indexes:
                names = tuple(c.name for c in index.columns)
                if names not in real_indexes and _expected(index):
                    problems.append(
                        '%s index %s missing' % (table.name, names))
            real_pk = inspector.get_pk_constraint(table.name)
            if list(real_pk['constrained_columns']) != [
                    c.name for c in table.primary_key.columns]:
                problems.append('%s primary key differs' % table.name)
        self.assertEqual([], problems)

    def test_api_tables(self):
        self._compare('api', tables.api_metadata)

    def test_cell_tables(self):
        self._compare('main', tables.cell_metadata)
