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

"""Running documents through healreq and judging what it did."""

import collections
import dataclasses
import functools
import json

from healreq.heal import decisions
from healreq.heal import findings
from healreq.objects import flavor as flavor_obj
from healreq.objects import image as image_obj
from healreq.objects import image_fields
from healreq.objects import image_primitive
from healreq.objects import numa as numa_obj
from healreq.objects import numa_primitive
from healreq.objects import pci as pci_obj
from healreq.objects import primitive
from healreq.objects import request_spec
from healreq.objects import versions
from healreq.testing import deployment as dep
from healreq.tests.mutated_documents import corpus
from healreq.tests.mutated_documents import guard
from healreq.tests.mutated_documents import mutations

Status = findings.Status


@dataclasses.dataclass
class Failure:
    """Identical failures, with the first document that triggered one."""
    signature: str
    example: str
    exception: str
    count: int = 0


@dataclasses.dataclass
class Outcome:
    """What a category's documents did."""
    category: str
    documents: int = 0
    errors: int = 0
    accepted: int = 0
    crashed: int = 0
    parser_calls: int = 0
    reasons: collections.Counter = dataclasses.field(
        default_factory=collections.Counter)
    kinds: dict = dataclasses.field(default_factory=dict)
    failures: dict = dataclasses.field(default_factory=dict)
    accepted_malformed: dict = dataclasses.field(default_factory=dict)
    not_converging: dict = dataclasses.field(default_factory=dict)
    parser_failures: dict = dataclasses.field(default_factory=dict)

    def fail(self, table, signature, document, exception=''):
        failure = table.setdefault(signature, Failure(
            signature, document.describe(), exception))
        failure.count += 1

    def count(self, document, verdict):
        per_kind = self.kinds.setdefault(document.kind, collections.Counter())
        per_kind[verdict] += 1

    def summary(self):
        lines = ['%s: %d documents, %d errors, %d accepted, %d crashed; '
                 '%d parser calls' % (self.category, self.documents,
                                      self.errors, self.accepted,
                                      self.crashed, self.parser_calls)]
        for kind, counts in sorted(self.kinds.items()):
            lines.append('  %-20s %s' % (kind, ', '.join(
                '%s %d' % item for item in sorted(counts.items()))))
        lines.append('  reasons: %s' % ', '.join(
            '%s %d' % item for item in self.reasons.most_common()))
        return '\n'.join(lines)


def format_failures(table):
    lines = []
    for failure in sorted(table.values(), key=lambda f: -f.count):
        lines.append('%d x %s\n    %s\n    first input: %s' % (
            failure.count, failure.signature, failure.exception,
            failure.example))
    return '\n'.join(lines)


def classify(evaluation):
    """Return 'error' or 'accepted', or a description of what is wrong.

    An error must carry a public reason code and a detail and nothing to
    write; an accepted document must be consistent, or drifted with a
    healed spec that is valid JSON and parses back as a RequestSpec.
    """
    finding = evaluation.finding
    if finding.status is Status.ERROR:
        if finding.reason not in findings.REASONS[Status.ERROR]:
            return 'error without a listed reason code: %r' % (
                finding.reason,)
        if not finding.detail or not isinstance(finding.detail, str):
            return 'error %s without a detail' % finding.reason
        if evaluation.new_spec is not None or finding.changes:
            return 'error %s with something to write' % finding.reason
        return 'error'
    if finding.status is Status.CONSISTENT:
        if evaluation.new_spec is not None or finding.changes:
            return 'consistent with something to write'
        return 'accepted'
    if finding.status is Status.DRIFTED:
        if finding.reason not in findings.REASONS[Status.DRIFTED]:
            return 'drift without a listed reason code: %r' % (
                finding.reason,)
        if evaluation.new_spec is None and finding.changes and all(
                change.field == 'availability_zone'
                for change in finding.changes):
            # A pin --az-policy report does not rewrite: only reported.
            return 'accepted'
        if not isinstance(evaluation.new_spec, str):
            return 'drifted without a healed spec'
        try:
            json.loads(evaluation.new_spec)
            request_spec.RequestSpecDocument(evaluation.new_spec).flavor()
        except (ValueError, RecursionError) as exc:
            return 'healed spec does not parse back: %s' % (
                guard.describe_exception(exc))
        return 'accepted'
    return 'unexpected status %s (%s)' % (finding.status.value,
                                          finding.reason)


@functools.lru_cache(maxsize=None)
def _base_spec_document():
    return json.loads(corpus.base().texts[corpus.SPEC])


def record_steps(record):
    """What a run does with one record of a batch.

    It parses the spec and learns its object versions (with those of the
    batch's other, healthy specs), then evaluates the record.
    """
    profile = versions.VersionProfile()
    profile.observe(_base_spec_document())
    spec = decisions.parse_spec(record)
    if spec is not None:
        profile.observe(spec.document)
    return decisions.evaluate(record, corpus.CELL, corpus.NOW,
                              corpus.SETTINGS, profile)


def evaluate_document(document, uuid=corpus.INSTANCE_UUID):
    """Evaluate the base instance holding ``document``, as a run does.

    Returns ``(evaluation, exception)``; only usable inside
    ``guard.guarded_pass``.
    """
    record = corpus.build_record(document.category, document.value,
                                 null_mirrors=document.null_mirrors,
                                 uuid=uuid)
    return guard.call(record_steps, record)


PrimitiveError = primitive.PrimitiveError
_IMAGE_ERRORS = (PrimitiveError, image_fields.ImageMetaError)
_NUMA_ERRORS = (PrimitiveError, numa_obj.ConstraintError)


def _dig(value, *keys):
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _text_parsers(category):
    """``(name, function, allowed errors)`` taking the stored value."""
    parsers = [('primitive.load_json',
                lambda value: primitive.load_json(value, category),
                (PrimitiveError,))]
    if category == corpus.SPEC:
        parsers.append((
            'request_spec.RequestSpecDocument',
            lambda value: request_spec.RequestSpecDocument(value).flavor(),
            (PrimitiveError,)))
    elif category == corpus.FLAVOR:
        parsers.append(('flavor.parse_instance_flavors',
                        flavor_obj.parse_instance_flavors,
                        (PrimitiveError,)))
    elif category == corpus.NUMA:
        parsers.append(('numa.from_primitive',
                        lambda value: numa_primitive.from_primitive(
                            value, corpus.NUMA),
                        _NUMA_ERRORS))
    elif category == corpus.PCI:
        parsers.append(('pci.from_instance_extra',
                        pci_obj.from_instance_extra, (PrimitiveError,)))
    return parsers


def _as_pci_primitive(requests):
    """The spec form (InstancePCIRequests) of instance_extra requests."""
    if not isinstance(requests, list):
        return requests
    return primitive.wrap(pci_obj.REQUESTS_NAME, '1.1', {'requests': [
        primitive.wrap(pci_obj.REQUEST_NAME, '1.4', item)
        for item in requests]})


def _object_parsers(category, obj):
    """``(name, thunk, allowed errors)`` on a decoded document."""
    if category == corpus.SPEC:
        data = _dig(obj, primitive.DATA)
        image = _dig(data, 'image')
        return [
            ('flavor.parse', lambda: flavor_obj.parse(
                _dig(data, 'flavor'), 'spec flavor'), (PrimitiveError,)),
            ('image_primitive.image_from_primitive', lambda: (
                image_primitive.image_from_primitive(image, 'spec image')),
             _IMAGE_ERRORS),
            ('image_primitive.props_from_primitive', lambda: (
                image_primitive.props_from_primitive(
                    _dig(image, primitive.DATA, 'properties'),
                    'spec image properties')), _IMAGE_ERRORS),
            ('numa.from_primitive', lambda: numa_primitive.from_primitive(
                _dig(data, 'numa_topology'), 'spec numa_topology'),
             _NUMA_ERRORS),
            ('pci.from_primitive', lambda: pci_obj.from_primitive(
                _dig(data, 'pci_requests'), 'spec pci_requests'),
             (PrimitiveError,)),
        ]
    if category == corpus.FLAVOR:
        return [('flavor.parse', functools.partial(
            flavor_obj.parse, _dig(obj, slot), slot), (PrimitiveError,))
            for slot in ('cur', 'old', 'new')]
    if category == corpus.NUMA:
        return [('numa.from_primitive', lambda: numa_primitive.from_primitive(
            obj, corpus.NUMA), _NUMA_ERRORS)]
    if category == corpus.PCI:
        return [('pci.from_primitive', lambda: pci_obj.from_primitive(
            _as_pci_primitive(obj), 'pci requests'), (PrimitiveError,))]
    return [('image.image_from_system_metadata',
             lambda: image_obj.image_from_system_metadata(
                 obj, dep.IMAGE_ID), _IMAGE_ERRORS)]


def _check_parsers(document, outcome):
    obj = document.obj
    if document.category != corpus.SYSMETA:
        for name, parser, allowed in _text_parsers(document.category):
            outcome.parser_calls += 1
            result, exc = guard.call(parser, document.value)
            if name == 'primitive.load_json' and exc is None and (
                    obj is corpus.NO_OBJECT):
                obj = result
            if exc is not None and not isinstance(exc, allowed):
                outcome.fail(outcome.parser_failures, '%s raised %s at %s' % (
                    name, type(exc).__name__, guard.location(exc)), document,
                    guard.describe_exception(exc))
    if obj is corpus.NO_OBJECT:
        return
    for name, thunk, allowed in _object_parsers(document.category, obj):
        outcome.parser_calls += 1
        _result, exc = guard.call(thunk)
        if exc is not None and not isinstance(exc, allowed):
            outcome.fail(outcome.parser_failures, '%s raised %s at %s' % (
                name, type(exc).__name__, guard.location(exc)), document,
                guard.describe_exception(exc))


def _check_evaluation(document, outcome):
    evaluation, exc = evaluate_document(document)
    if exc is not None:
        outcome.crashed += 1
        outcome.count(document, 'crashed')
        outcome.fail(outcome.failures, 'evaluation raised %s at %s' % (
            type(exc).__name__, guard.location(exc)), document,
            guard.describe_exception(exc))
        return
    verdict = classify(evaluation)
    outcome.count(document, verdict if verdict in ('error', 'accepted')
                  else 'wrong')
    finding = evaluation.finding
    if verdict == 'error':
        outcome.errors += 1
        outcome.reasons[finding.reason] += 1
    elif verdict == 'accepted':
        outcome.accepted += 1
        if document.expect_error:
            outcome.fail(outcome.accepted_malformed, '%s %s %s accepted as %s'
                         % (document.category, document.kind,
                            document.where.split('=')[0],
                            finding.status.value),
                         document, '; '.join(str(c) for c in finding.changes))
        if evaluation.new_spec is not None:
            _check_convergence(document, evaluation, outcome)
    else:
        outcome.fail(outcome.failures, verdict, document,
                     finding.detail or '')


def _check_convergence(document, evaluation, outcome):
    """The healed spec must be consistent when evaluated again."""
    record = corpus.build_record(document.category, document.value,
                                 null_mirrors=document.null_mirrors)
    record.spec_row['spec'] = evaluation.new_spec
    again, exc = guard.call(record_steps, record)
    if exc is not None:
        outcome.fail(outcome.not_converging, 'evaluating the healed spec '
                     'raised %s at %s' % (type(exc).__name__,
                                          guard.location(exc)),
                     document, guard.describe_exception(exc))
    elif again.finding.status is not Status.CONSISTENT:
        outcome.fail(outcome.not_converging, 'healed spec is %s again (%s)'
                     % (again.finding.status.value, ', '.join(
                         again.finding.drift) or again.finding.reason),
                     document, '; '.join(
                         str(c) for c in again.finding.changes)
                     or again.finding.detail)


def run_category(category, seed=corpus.SEED):
    """Feed every document of ``category`` through healreq."""
    outcome = Outcome(category)
    with guard.guarded_pass():
        for document in mutations.generate(category, seed):
            outcome.documents += 1
            _check_evaluation(document, outcome)
            _check_parsers(document, outcome)
    return outcome


_OUTCOMES = {}


def outcome_of(category):
    """The category's Outcome, computed once per process."""
    if category not in _OUTCOMES:
        _OUTCOMES[category] = run_category(category)
    return _OUTCOMES[category]
