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

"""One whole walk over a deployment that mixes the hostile inputs.

Pathological specs, a cell whose URL has a password with braces, a cell
whose driver is missing, one whose template cannot be formatted, and
throttling values at their bounds, all in one run: it never ends with
255, every healable instance in the good cells is healed, and the audit
agrees with every row.
"""

import json

from healreq.audit import store as audit_store
from healreq.tests.functional import audit_case


class HostileWalkTest(audit_case.AuditTestCase):

    def add_traps(self):
        """Instances that cannot be healed, one per kind of trap."""
        traps = {}
        deep = self.add_drifted(self.cell1)
        spec = self.spec(deep)
        spec['nova_object.data']['scheduler_hints'] = {'h': 'DEEP'}
        # Deep enough that serialising it in the evaluating thread exceeds
        # the recursion limit, shallow enough that the loading thread,
        # fewer frames down, parses it (a window of a few levels).
        self.deployment.set_spec(deep, json.dumps(spec).replace(
            '"DEEP"', '[' * 978 + ']' * 978))
        traps[deep] = 'internal-error'
        traps[self.add_drifted(self.cell2, spec='{"nova_object.name": ')] = (
            'spec-unparsable')
        traps[self.add_drifted(self.cell1, spec='[]')] = 'spec-unparsable'
        traps[self.add_drifted(self.cell2, spec=None)] = 'spec-missing'
        return traps

    def test_walk_over_every_trap(self):
        healable = [self.add_drifted(cell) for cell in
                    (self.cell1, self.cell2) for _ in range(4)]
        consistent = [self.add_consistent(self.cell1),
                      self.add_consistent(self.cell2)]
        traps = self.add_traps()
        broken_cells = [
            self.deployment.add_cell('no-driver',
                                     'postgresql://u:SECRETPW@127.0.0.1/x',
                                     create_schema=False),
            self.deployment.add_cell('bad-template', '{scheme}://{nonsense}',
                                     create_schema=False),
        ]
        before = self.all_spec_texts()

        result, doc = self.heal_json('--batch-size', '1', '--sleep', '0',
                                     '--max-rate', '1000000000',
                                     '--workers', '2')
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertNotIn('SECRETPW', result.stdout + result.stderr)
        outcome = {r['instance_uuid']: (r['status'], r['reason'])
                   for r in doc['results']}
        for uuid in healable:
            self.assertEqual('healed', outcome[uuid][0], outcome)
        for uuid, reason in traps.items():
            self.assertEqual(('error', reason), outcome[uuid])
            self.assertEqual(before.get(uuid),
                             self.all_spec_texts().get(uuid))
        for uuid in consistent:
            self.assertNotIn(uuid, outcome)
        failed = sorted(c['cell_uuid'] for c in doc['cells'] if c['error'])
        self.assertEqual(sorted(c.uuid for c in broken_cells), failed)

        # The audit agrees with every row: each applied change is what the
        # row holds now, nothing is pending, and only healed rows changed.
        store = audit_store.AuditStore(self.audit_url())
        self.addCleanup(store.dispose)
        changes = store.changes(doc['run_id'])
        self.assertEqual(sorted(healable),
                         sorted(c['instance_uuid'] for c in changes))
        after = self.all_spec_texts()
        for change in changes:
            self.assertEqual('applied', change['state'], change)
            self.assertEqual(change['after_text'],
                             after[change['instance_uuid']])
            self.assertEqual(change['before_text'],
                             before[change['instance_uuid']])
        self.assertEqual(
            sorted(healable),
            sorted(u for u in after if after[u] != before.get(u)))
        run = self.run_json('audit', 'show', doc['run_id'])[1]
        self.assertEqual(2, run['exit_code'])

        again, doc = self.heal_json()
        self.assertEqual(2, again.code, again.stdout + again.stderr)
        self.assertEqual(0, doc['summary']['healed'])
        self.assertEqual(after, self.all_spec_texts())
