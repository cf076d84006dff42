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

"""The base of the per-field functional tests, and its assertions.

A field test builds one instance, then asserts that a run heals it
exactly as expected (``assert_heals``), refuses it (``assert_refused``)
or finds everything consistent (``assert_consistent``).
"""

import copy
import json

from healreq.testing import deployment as dep
from healreq.tests.functional import deployment_case


def image_properties(**extra):
    """The default image's properties, plus ``extra``."""
    values = dict(dep.IMAGE_PROPERTIES)
    values.update(extra)
    return values


def without_keys(document, *keys):
    """A copy of a spec document without some of its data keys."""
    document = copy.deepcopy(document)
    for key in keys:
        document['nova_object.data'].pop(key, None)
    return document


class FieldTestCase(deployment_case.DeploymentTestCase):
    """Runs that heal, refuse or leave alone one instance's fields."""

    def assert_heals(self, cell, instance_uuid, reason, changes, *args):
        """Dry run, heal and run again; return the healed spec, parsed.

        ``changes`` are the expected ``(field, before, after)`` of the
        instance's finding; any other instance must be consistent. The
        dry run (text) shows them on the finding line and writes nothing;
        the heal (JSON) names exactly those fields in ``drift``; a second
        run finds nothing left to heal and writes nothing.
        """
        before = self.deployment.spec_text(instance_uuid)
        result = self.heal('--dry-run', *args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertIn('DRIFTED   %s %s %s: %s' % (
            instance_uuid, cell.name, reason,
            '; '.join('%s: %s -> %s' % change for change in changes)),
            result.stdout.splitlines())
        self.assertEqual(before, self.deployment.spec_text(instance_uuid))
        result, doc = self.heal_json(*args)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(instance_uuid, 'healed', [c[0] for c in changes], reason)],
            [(r['instance_uuid'], r['status'], r['drift'], r['reason'])
             for r in doc['results']])
        self.assertEqual(
            [dict(field=f, before=b, after=a) for f, b, a in changes],
            doc['results'][0]['changes'])
        healed = self.deployment.spec_text(instance_uuid)
        self.assertNotEqual(before, healed)
        again = self.heal(*args)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual(healed, self.deployment.spec_text(instance_uuid))
        return json.loads(healed)

    def assert_refused(self, cell, instance_uuid, reason, detail, *args):
        """The instance is an error (exit 2) and its spec is not written.

        ``detail`` must appear in the text report's finding line.
        """
        before = self.deployment.spec_text(instance_uuid)
        result = self.heal(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        prefix = 'ERROR     %s %s %s: ' % (instance_uuid, cell.name, reason)
        lines = [line for line in result.stdout.splitlines()
                 if line.startswith(prefix)]
        self.assertEqual(1, len(lines), result.stdout)
        self.assertIn(detail, lines[0])
        result, doc = self.heal_json(*args)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(instance_uuid, 'error', reason, [])],
                         [(r['instance_uuid'], r['status'], r['reason'],
                           r['drift']) for r in doc['results']])
        self.assertEqual(before, self.deployment.spec_text(instance_uuid))
        return doc['results'][0]

    def assert_consistent(self, *args):
        """Nothing to heal (exit 4) and no spec is written."""
        specs = self.all_spec_texts()
        result, doc = self.heal_json(*args)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([], doc['results'])
        self.assertEqual(len(specs), doc['summary']['consistent'])
        self.assertEqual(specs, self.all_spec_texts())
