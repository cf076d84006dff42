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

"""Database values can neither forge report lines nor drive a terminal.

A flavor name, a Glance property and a cell name hold line breaks, an
escape sequence, NUL, bidi controls and Unicode separators. Every line of
the text output keeps its own prefix, no control character reaches stdout
or stderr, and JSON and the audit store keep the values exact.
"""

import json
import os
import re
import unicodedata

import fixtures
import sqlalchemy as sa

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case

# A forged finding line, a colour, NUL, right-to-left override, carriage
# return, tab, DEL, NEL (C1), line separator, LRM, first strong isolate.
HOSTILE = ('\nHEALED    00000000-0000-4000-8000-000000000000 forged\n'
           'Cell forged\x1b[31mred\x00\u202eevil\r\t\x7f\x85\u2028\u200e'
           '\u2066!')

UUID = r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'
FINDING = re.compile(r'^(DRIFTED|HEALED|APPLIED|REVERTED|SKIPPED|ERROR|'
                     r'CONFLICT|NOTICE) +%s '
                     % UUID)
REPORT_LINE = re.compile(
    r'^(%s|          (why|note)|Cell %s|Total: |Nova release: |  note: |'
    r'  nothing may be written|Dry run: |Run id: |Exit code |Plan of |'
    r'\d+ skipped )' % (FINDING.pattern[1:], UUID))
LIST_LINE = re.compile(r'^(RUN ID  +STARTED  |%s  \d{4}-)' % UUID)
SHOW_LINE = re.compile(
    r'^(Run %s |  command: |  started |  summary: |  [A-Z]+ +%s |$|'
    r'Change \d+: instance %s, |    )' % (UUID, UUID, UUID))
LOG_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ [A-Z]+ ')


def control_characters(text):
    """The characters of ``text`` that must never be written raw."""
    return sorted({char for char in text if char != '\n' and (
        unicodedata.category(char) in ('Cc', 'Cf', 'Cs', 'Zl', 'Zp'))})


class ControlCharacterTest(audit_case.AuditTestCase):

    def setUp(self):
        super().setUp()
        # Both backends store NUL in these text columns (the flavor name
        # is inside a JSON document, where it is escaped anyway).
        self.flavor_name = 'm1.large' + HOSTILE
        self.os_distro = 'ubuntu' + HOSTILE
        self.cell_name = 'cell1' + HOSTILE
        flavor = dep.flavor(4, self.flavor_name, vcpus=4, memory_mb=8192)
        self.uuid = self.deployment.add_instance(
            self.cell1, flavor, spec_flavor=demo.M1_SMALL,
            system_metadata=dep.image_system_metadata(dict(
                dep.IMAGE_PROPERTIES, os_distro=self.os_distro)))
        t = tables.cell_mappings
        with self.deployment.api_engine.begin() as conn:
            conn.execute(t.update().where(t.c.uuid == self.cell1.uuid)
                         .values(name=self.cell_name))
        self.plan = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'heal.plan')

    def assert_clean(self, result, line_pattern, codes=(0,)):
        """One prefixed line per line on stdout; nothing raw anywhere."""
        self.assertIn(result.code, codes, result.stdout + result.stderr)
        self.assertEqual([], control_characters(result.stdout))
        self.assertEqual([], control_characters(result.stderr))
        for line in result.stdout.splitlines():
            self.assertRegex(line, line_pattern)
        for line in result.stderr.splitlines():
            self.assertRegex(line, LOG_LINE)
        self.assertNotIn('forged\n', result.stdout + result.stderr)

    def assert_report(self, result, status, cells=2, changes=True):
        self.assert_clean(result, REPORT_LINE)
        findings = [line for line in result.stdout.splitlines()
                    if FINDING.match(line)]
        self.assertEqual(1, len(findings), result.stdout)
        self.assertTrue(findings[0].startswith('%-9s %s ' % (status,
                                                             self.uuid)))
        summaries = [line for line in result.stdout.splitlines()
                     if line.startswith('Cell ')]
        self.assertEqual(cells, len(summaries), result.stdout)
        # Visible, escaped, on the finding's own line.
        self.assertIn('\\nHEALED    00000000', findings[0])
        self.assertIn('\\x1b[31m', findings[0])
        self.assertIn('\\u202e', findings[0])
        if changes:  # the values, not only the cell name
            self.assertIn('os_distro=ubuntu\\nHEALED', findings[0])
            self.assertIn('\\x00', findings[0])

    def test_text_outputs_and_logs(self):
        result = self.heal('--dry-run', '--verbose', '--plan', self.plan)
        self.assert_report(result, 'DRIFTED')
        applied = self.run_cli('apply', self.plan)
        self.assert_report(applied, 'APPLIED', cells=1, changes=False)
        run_id = [line.split()[2] for line in applied.stdout.splitlines()
                  if line.startswith('Run id: ')][0]

        listing = self.run_cli('audit', 'list')
        self.assert_clean(listing, LIST_LINE)
        shown = self.run_cli('audit', 'show', run_id)
        self.assert_clean(shown, SHOW_LINE)
        self.assertIn('\\u202e', shown.stdout)

        reverted = self.run_cli('revert', run_id)
        self.assert_report(reverted, 'REVERTED', cells=1, changes=False)
        healed = self.heal('--verbose')
        self.assert_report(healed, 'HEALED')
        self.assertIn('Healed request spec of instance %s' % self.uuid,
                      healed.stderr)

    def test_json_and_audit_keep_the_values(self):
        result, document = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertTrue(result.stdout.isascii())
        finding, = document['results']
        changes = {c['field']: c for c in finding['changes']}
        self.assertEqual('%s(4)' % self.flavor_name,
                         changes['flavor']['after'])
        # The text of a change shortens long values.
        self.assertIn('os_distro=ubuntu\nHEALED    0000',
                      changes['image']['after'])
        names = {c['cell_uuid']: c['name'] for c in document['cells']}
        self.assertEqual(self.cell_name, names[self.cell1.uuid])

        change, = self.audit_show(document['run_id'])['changes']
        written = json.loads(change['after'])['nova_object.data']
        self.assertEqual(self.flavor_name,
                         written['flavor']['nova_object.data']['name'])
        props = written['image']['nova_object.data']['properties']
        self.assertEqual(self.os_distro,
                         props['nova_object.data']['os_distro'])
        self.assertEqual(change['after'],
                         self.deployment.spec_text(self.uuid))
        with self.deployment.api_engine.connect() as conn:
            stored = conn.execute(sa.select(tables.cell_mappings.c.name).where(
                tables.cell_mappings.c.uuid == self.cell1.uuid)).scalar()
        self.assertEqual(self.cell_name, stored)
