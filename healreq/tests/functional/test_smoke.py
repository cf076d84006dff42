import json

from healreq.testing import demo
from healreq.tests.functional import fixtures as func


class SmokeTest(func.DeploymentTestCase):
    def test_seed_case(self):
        uuid = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM,
            new=demo.E2_MEDIUM)
        self.deployment.add_instance(self.cell2, demo.M1_SMALL)
        before = self.deployment.spec_text(uuid)
        result = self.heal('--dry-run', '--format', 'json')
        self.assertEqual(0, result.code, result.stderr)
        doc = json.loads(result.stdout)
        self.assertEqual(1, doc['summary']['drifted'])
        self.assertEqual(before, self.deployment.spec_text(uuid))
        result = self.heal()
        self.assertEqual(0, result.code, result.stderr + result.stdout)
        self.assertEqual(4, self.heal().code)
