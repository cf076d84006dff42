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

"""Nova's services with the Placement database in a SQLite file too.

The services of ``services.Services``, whose placement fixture keeps its
database in a file that a placement.conf names by
``[placement_database]/connection``, as an operator's placement.conf
names it; and the read-only audits (``allocations``, ``hosts``) run
against them as operators run them, given nova.conf and placement.conf,
in a process of their own.
"""

import contextlib
import json
import os
import sqlite3
import subprocess
import sys

import fixtures

from healreq.tests.compat import services

if services.available():
    from nova.tests.functional import fixtures as func_fixtures


class FileBackedPlacement(services.Services):
    """The services, with placement's database in a SQLite file."""

    compute_driver = 'fake.FakeDriver'

    def setUp(self):
        configure = func_fixtures.PlacementFixture._configure_placement

        def file_backed(fixture, conf_fixture):
            # Called once the directory of the databases exists.
            configure(fixture, conf_fixture)
            conf_fixture.config(connection=self._url('placement'),
                                group='placement_database')

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.functional.fixtures.PlacementFixture.'
            '_configure_placement', file_backed))
        super().setUp()
        self.placement_config_file = os.path.join(self.directory,
                                                  'placement.conf')
        with open(self.placement_config_file, 'w') as handle:
            handle.write('[placement_database]\nconnection = %s\n'
                         % self._url('placement'))

    def _url(self, name):
        """The SQLite file of database ``name``, in WAL mode.

        Nova's services run in green threads of one process: in the
        default journal mode, a read transaction left open by one of
        them makes another's commit fail with "database is locked".
        Nova's own threading-mode fixtures use WAL for that reason.
        """
        url = super()._url(name)
        path = url[len('sqlite:///'):]
        if not os.path.exists(path):
            with contextlib.closing(sqlite3.connect(path)) as conn:
                conn.execute('PRAGMA journal_mode=WAL')
        return url

    def run_audit(self, command, *args):
        """Run ``nova-heal COMMAND --format json ARGS`` in its own process.

        Given nova.conf and placement.conf, as an operator runs it.
        Returns its exit code and its JSON report, whose ``exit_code``
        must be the process's.
        """
        process = subprocess.run(
            [sys.executable, '-m', 'healreq', '--config-file',
             self.config_file, '--config-file', self.placement_config_file,
             command, '--format', 'json'] + list(args),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            universal_newlines=True, timeout=300)
        try:
            document = json.loads(process.stdout)
        except ValueError:
            self.fail('nova-heal wrote no JSON report (exit %d): %s%s' % (
                process.returncode, process.stdout, process.stderr))
        self.assertEqual(process.returncode, document['exit_code'])
        return process.returncode, document
