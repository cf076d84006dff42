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

"""A database error is one line on stderr; --debug adds the traceback.

oslo.db logs every error it wraps with a traceback; the command reports
the error itself, in one line.
"""

import os
import re
import subprocess

import sqlalchemy as sa

from healreq.db import tables
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends

LOG_LINE = r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ %s [a-z_.]+ \[-\] %s'
SQLITE = [s for s in backends.SCENARIOS if s[0] == 'SQLite']
MYSQL = [s for s in backends.SCENARIOS if s[0] == 'MySQL']


def missing_table(table):
    """MySQL's error for a table of a database that is gone."""
    return (re.escape('(1146, "Table \'') + r'[a-z0-9_]+\.'
            + re.escape('%s\' doesn\'t exist")' % table))


def not_a_database(path):
    with open(path, 'wb') as handle:
        handle.write(b'not a database, whatever its name says\n' * 100)


class SQLiteFileTest(audit_case.AuditTestCase):
    """An audit store or a cell whose SQLite file is not a database."""

    scenarios = SQLITE

    def test_audit_store_is_not_a_database(self):
        self.add_drifted(self.cell1)
        not_a_database(self.audit_path())
        line = ('nova-heal: error: audit store: cannot open %s: '
                '(sqlite3.DatabaseError) file is not a database'
                % self.audit_url())
        for argv in (('request-specs',), ('request-specs', '--dry-run'),
                     ('audit', 'list'), ('audit', 'show', 'x'),
                     ('revert', 'x')):
            result = self.run_cli(*argv)
            self.assertEqual(127, result.code, result.stderr)
            self.assertEqual([line], result.stderr.splitlines())
            debug = self.run_cli('--debug', *argv)
            self.assertEqual(127, debug.code, debug.stderr)
            self.assertIn('Traceback', debug.stderr)
            self.assertEqual(line, debug.stderr.splitlines()[-1])

    def test_cell_is_not_a_database(self):
        drifted = self.add_drifted(self.cell1)
        not_a_database(self.cell2.engine.url.database)
        result, document = self.heal_json()
        self.assertEqual(2, result.code, result.stderr)
        self.assertEqual(1, document['summary']['healed'])
        self.assertNotEqual(drifted, self.deployment.spec_text(drifted))
        self.assertNotIn('Traceback', result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(2, len(lines), result.stderr)
        self.assertRegex(lines[0], LOG_LINE % (
            'WARNING', re.escape('Release detection skips cell %s: cell '
                                 'database error: file is not a database'
                                 % self.cell2.uuid)))
        self.assertRegex(lines[1], LOG_LINE % ('ERROR', re.escape(
            'Cell %s(cell2): cell database error: file is not a database'
            % self.cell2.uuid)))
        debug = self.run_cli('--debug', 'request-specs', '--dry-run')
        self.assertEqual(2, debug.code, debug.stderr)
        self.assertIn('Traceback', debug.stderr)


class DroppedStoreTest(audit_case.AuditTestCase):
    """A MySQL audit store whose database is dropped during a heal."""

    scenarios = MYSQL
    INSTANCES = 12

    def setUp(self):
        super().setUp()
        self.uuids = [self.add_drifted(self.cell1)
                      for _ in range(self.INSTANCES)]
        self.store_url = self.db.database_url('audit')
        self.config_file = self.write_config(
            'audit_connection = %s\n' % self.store_url)

    def healed_count(self):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).where(
                t.c.updated_at.isnot(None))).scalar()

    def test_store_dropped_mid_run(self):
        gate = self.useFixture(cli.Gate())
        process = cli.spawn(
            gate.argv() + ['--config-file', self.config_file,
                           'request-specs', '--batch-size', '1'],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(os.environ))
        self.addCleanup(process.wait)
        self.addCleanup(lambda: process.poll() is None and process.kill())
        # Dropped after the first batch, while the command holds there.
        gate.reach(1, process)
        self.db.backend.drop_named_database('%s_audit' % self.db.prefix)
        gate.open()
        out, err = process.communicate(timeout=120)
        err = err.decode()
        self.assertEqual(2, process.returncode, err)
        self.assertNotIn('Traceback', err)
        self.assertLess(self.healed_count(), self.INSTANCES)
        self.assertIn('Exit code 2', out.decode())
        # Each failed statement once, as the run's problems: the change it
        # was about to record, the findings, and the end of the run.
        expected = ['^' + re.escape('nova-heal: error: audit store: ')
                    + missing_table(table) + '$'
                    for table in ('changes', 'findings', 'runs')]
        lines = err.splitlines()
        self.assertEqual(len(expected), len(lines), err)
        for pattern, line in zip(expected, lines):
            self.assertRegex(line, pattern, err)
