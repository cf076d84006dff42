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

"""The base of the audit tests: reading the default audit store.

Every command of such a test runs in-process with the deployment's
nova.conf, so its audit store is the default SQLite file under the
test's state path.
"""

import os

import sqlalchemy as sa

from healreq.tests.functional import deployment_case

# The id of a run no store holds.
UNKNOWN_RUN = '00000000-0000-4000-8000-000000000000'


class AuditTestCase(deployment_case.DeploymentTestCase):
    """Helpers to read the audit store, through the CLI and directly."""

    def another_invocation(self):
        """A command that settles dead runs' intents, and writes nothing.

        A revert of a run the store does not hold: it recovers first (as
        every command that may write does; a dry run does not), then is
        refused.
        """
        result = self.run_cli('revert', UNKNOWN_RUN)
        self.assertEqual(127, result.code, result.stdout + result.stderr)

    @staticmethod
    def record_intent_of_a_new_run(store, uuid, spec_id, before, after,
                                   command='test'):
        """Start a run on ``store`` and record one intent; their ids."""
        run_id = store.start_run('heal', command, {})
        change_id = store.intent(run_id, uuid, None, spec_id, ['flavor'],
                                 before, after)
        return run_id, change_id

    def audit_path(self):
        return os.path.join(self.state_path, 'audit.sqlite')

    def audit_url(self):
        return 'sqlite:///%s' % self.audit_path()

    def audit_runs(self):
        """``audit list --format json``, by run id (every run)."""
        result, runs = self.run_json('audit', 'list', '--limit', '1000')
        self.assertEqual(0, result.code, result.stderr)
        return {run['id']: run for run in runs}

    def audit_show(self, run_id):
        result, document = self.run_json('audit', 'show', run_id)
        self.assertEqual(0, result.code, result.stderr)
        return document

    def changes_by_instance(self, run_id):
        changes = self.audit_show(run_id)['changes']
        by_instance = {c['instance_uuid']: c for c in changes}
        self.assertEqual(len(changes), len(by_instance),
                         'more than one change per instance: %s' % changes)
        return by_instance

    def audit_dump(self):
        """Every value of every row of every table of the audit store."""
        engine = sa.create_engine(self.audit_url())
        self.addCleanup(engine.dispose)
        metadata = sa.MetaData()
        metadata.reflect(engine)
        self.assertIn('changes', metadata.tables)
        values = []
        with engine.connect() as conn:
            for table in metadata.sorted_tables:
                for row in conn.execute(sa.select(table)):
                    values.extend(str(value) for value in row)
        return values

    def state_bytes(self):
        """The raw bytes of every file under the state path."""
        data = b''
        for directory, _, names in os.walk(self.state_path):
            for name in names:
                with open(os.path.join(directory, name), 'rb') as handle:
                    data += handle.read()
        return data

    def heal_run(self, *args):
        """A real heal; return its run id (checked against the report)."""
        result, document = self.heal_json(*args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIsNotNone(document['run_id'])
        return document['run_id']
