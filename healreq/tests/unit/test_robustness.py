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

"""Robustness: malformed and mutated stored documents never crash a run.

A deterministic generator (seeded ``random.Random``) mutates realistic
documents of each kind healreq reads: ``request_specs.spec``,
``instance_extra.flavor``, ``instance_extra.numa_topology``,
``instance_extra.pci_requests`` and the ``image_*`` system metadata; at
least 1,000 per kind. Each mutated document, in the record of an otherwise
consistent instance, goes through what a run does with a record
(parse the spec, learn its object versions, ``decisions.evaluate`` with every
field checked), and through the public parsers. Asserted:

* no exception escapes the evaluation (a call running past DEADLINE or
  allocating past MEMORY_HEADROOM counts as a crash);
* a document is refused (an error finding with a reason code listed in
  ``findings.REASONS``, a detail and nothing to write) or accepted
  (consistent, or drifted with a healed spec that parses back);
* documents that cannot be used at all (see ``Document.expect_error``)
  are refused, and a healed spec is consistent when evaluated again;
* the parsers raise only PrimitiveError or their module's documented
  errors (ImageMetaError, ConstraintError);
* at least 1,000 documents in all are refused.

Counts per category and mutation kind are attached to the tests as the
``robustness-counts`` detail. The generator, the evaluation and the
oracle live in ``healreq.tests.mutated_documents``, which the functional
robustness test shares.
"""

import testscenarios
import testtools
from testtools import content

from healreq.heal import decisions
from healreq.heal import findings
from healreq.tests.mutated_documents import corpus
from healreq.tests.mutated_documents import mutations
from healreq.tests.mutated_documents import oracle

Status = findings.Status
SPEC = corpus.SPEC
FLAVOR = corpus.FLAVOR
NUMA = corpus.NUMA
PCI = corpus.PCI
SYSMETA = corpus.SYSMETA
CATEGORIES = corpus.CATEGORIES
MIN_DOCUMENTS = corpus.MIN_DOCUMENTS
CELL = corpus.CELL
NOW = corpus.NOW
SETTINGS = corpus.SETTINGS
build_record = corpus.build_record
generate = mutations.generate
outcome_of = oracle.outcome_of
format_failures = oracle.format_failures


def _counts_detail(test, categories):
    test.addDetail('robustness-counts', content.text_content('\n'.join(
        outcome_of(category).summary() for category in categories)))


class GeneratorTest(testtools.TestCase):

    def test_base_instance_is_consistent(self):
        evaluation = decisions.evaluate(build_record(), CELL, NOW, SETTINGS)
        self.assertEqual(Status.CONSISTENT, evaluation.finding.status,
                         evaluation.finding.detail)
        # The NUMA category's spec lacks the topology, so that the
        # instance's own topology is read.
        evaluation = decisions.evaluate(
            build_record(NUMA, corpus.base().texts[NUMA]), CELL, NOW,
            SETTINGS)
        self.assertEqual(['numa_topology'], evaluation.finding.drift)

    def test_deterministic(self):
        first = [(d.kind, d.where, d.value) for d in generate(PCI)]
        second = [(d.kind, d.where, d.value) for d in generate(PCI)]
        self.assertEqual(first, second)
        other = [(d.kind, d.where, d.value) for d in generate(PCI, seed=1)]
        self.assertNotEqual(first, other)

    def test_every_family_is_generated(self):
        json_families = {
            'truncated', 'bit-flip', 'bit-flip-as-str', 'non-utf8-bytes',
            'lone-surrogate-str', 'escaped-surrogate', 'wrong-type', 'null',
            'missing-key', 'huge-string', 'huge-integer', 'deep-nesting',
            'duplicate-key', 'nan-infinity', 'unknown-key',
            'not-a-document', 'random-edits'}
        envelope_families = {'object-name', 'namespace', 'version'}
        for category in CATEGORIES:
            result = outcome_of(category)
            self.assertGreaterEqual(result.documents, MIN_DOCUMENTS)
            if category == SYSMETA:
                expected = {'truncated', 'bit-flip', 'non-utf8-bytes',
                            'lone-surrogate-str', 'wrong-type', 'null',
                            'missing-key', 'huge-value', 'duplicate-key',
                            'nan-infinity', 'unknown-key', 'invalid-value'}
            elif category == PCI:
                expected = json_families
            else:
                expected = json_families | envelope_families
            self.assertEqual(set(), expected - set(result.kinds), category)


class CategoryTest(testscenarios.WithScenarios, testtools.TestCase):
    """Each category's documents, through the evaluation and the parsers."""

    scenarios = [('request_spec', dict(category=SPEC)),
                 ('instance_flavor', dict(category=FLAVOR)),
                 ('instance_numa_topology', dict(category=NUMA)),
                 ('instance_pci_requests', dict(category=PCI)),
                 ('system_metadata', dict(category=SYSMETA))]

    def test_evaluate(self):
        """Each document is evaluated to an error or a sound acceptance."""
        category = self.category
        _counts_detail(self, [category])
        result = outcome_of(category)
        self.assertGreaterEqual(result.documents, MIN_DOCUMENTS)
        if result.failures:
            self.fail('%d of %d %s documents crashed or gave a wrong '
                      'outcome:\n%s' % (
                          sum(f.count for f in result.failures.values()),
                          result.documents, category,
                          format_failures(result.failures)))
        self.assertEqual(result.documents, result.errors + result.accepted)

    def test_parsers(self):
        """The public parsers raise only their modules' documented errors."""
        category = self.category
        result = outcome_of(category)
        self.assertGreaterEqual(result.parser_calls, result.documents)
        if result.parser_failures:
            self.fail('parsers raised undocumented exceptions for %s:\n%s'
                      % (category, format_failures(result.parser_failures)))


class EvaluateTest(testtools.TestCase):
    """decisions.evaluate on the documents of every category."""

    def test_at_least_1000_documents_are_errors(self):
        _counts_detail(self, CATEGORIES)
        self.assertGreaterEqual(
            sum(outcome_of(category).errors for category in CATEGORIES),
            1000)

    def test_unusable_documents_are_never_accepted(self):
        """Text that is not JSON, and unloadable object envelopes."""
        failures = {}
        for category in CATEGORIES:
            failures.update(outcome_of(category).accepted_malformed)
        if failures:
            self.fail('malformed documents accepted:\n%s'
                      % format_failures(failures))

    def test_healed_specs_are_consistent_when_evaluated_again(self):
        failures = {}
        for category in CATEGORIES:
            failures.update(outcome_of(category).not_converging)
        if failures:
            self.fail('heals that do not converge:\n%s'
                      % format_failures(failures))
