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

"""One real run over a deployment full of broken records.

Sixty instances hold a mutated spec, instance_extra column or image
system metadata drawn from the robustness generator, stored as the
column accepts it; a few healthy instances have drifted specs. A single
``nova-heal request-specs --format json`` run must exit 2 (never 255),
report every broken instance as an error with a reason code and write
nothing for it, and heal the healthy ones exactly as it would in a
deployment without broken records.
"""

import dataclasses
import json
import random
import uuid as uuidlib

import sqlalchemy as sa
from testtools import content

from healreq.db import tables
from healreq.heal import decisions
from healreq.heal import findings
from healreq.objects import primitive
from healreq.objects import request_spec
from healreq.objects import versions
from healreq.testing import deployment as dep
from healreq.tests.functional import deployment_case
from healreq.tests.mutated_documents import corpus
from healreq.tests.mutated_documents import guard
from healreq.tests.mutated_documents import mutations
from healreq.tests.mutated_documents import oracle

Status = findings.Status

# Mutated instances per category (60 in all).
QUOTAS = ((corpus.SPEC, 20), (corpus.FLAVOR, 10), (corpus.PCI, 10),
          (corpus.SYSMETA, 12), (corpus.NUMA, 8))
# Candidates kept per mutation kind before the oracle sorts them.
CANDIDATES_PER_KIND = 8
# Per category, at most: documents that crash the evaluation, malformed
# documents the unit oracle accepts, and valid mutated documents it finds
# drifted (so that the run writes some). They are taken first.
MAX_CRASHING = 2
MAX_MALFORMED_ACCEPTED = 2
MIN_DRIFTED = 2
# Column limits (MySQL's, used on both backends so that both hold the same
# documents): MEDIUMTEXT, TEXT and VARCHAR(255) in characters.
SPEC_BYTES = (1 << 24) - 1
TEXT_BYTES = (1 << 16) - 1
SYSMETA_CHARS = 255
RUN_SECONDS = 45
D = primitive.DATA


def _fits_utf8mb3(text):
    return all(ord(c) < 0x10000 for c in text)


def storable(value, mysql):
    """``value`` as a text column stores it (and the driver returns it).

    Strings with lone surrogates cannot be encoded: SQLite keeps their
    bytes (a BLOB, which the driver returns as bytes); MySQL's utf8 column
    gets them decoded with replacement characters, as it does any
    non-UTF-8 bytes and characters beyond the BMP.
    """
    if isinstance(value, bytearray):
        value = bytes(value)
    if isinstance(value, str):
        try:
            value.encode('utf-8')
        except UnicodeEncodeError:
            value = value.encode('utf-8', 'surrogatepass')
    if mysql and isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    if mysql and isinstance(value, str) and not _fits_utf8mb3(value):
        value = ''.join(c if ord(c) < 0x10000 else '\ufffd' for c in value)
    return value


def _size(value):
    return len(value if isinstance(value, bytes) else value.encode('utf-8'))


def storable_rows(rows, mysql):
    """System metadata rows as VARCHAR(255) values store them."""
    stored = []
    for row in rows:
        value = row['value']
        if isinstance(value, (list, dict)):
            value = json.dumps(value)
        elif value is not None and not isinstance(value,
                                                  (str, bytes, bytearray)):
            value = str(value)
        if value is not None:
            value = storable(value, mysql)
            if len(value) > SYSMETA_CHARS:
                return None
        stored.append(dict(row, value=value))
    return stored


def stored_document(document, mysql):
    """The document's value as stored, or None if it does not fit."""
    if document.category == corpus.SYSMETA:
        return storable_rows(document.value, mysql)
    value = storable(document.value, mysql)
    limit = SPEC_BYTES if document.category == corpus.SPEC else TEXT_BYTES
    return value if _size(value) <= limit else None


@dataclasses.dataclass
class Mutated:
    """A mutated instance and what the unit oracle says of it.

    ``document.value`` is the value as stored.
    """
    document: object
    uuid: str
    verdict: str            # 'error', 'crash', 'accepted'
    status: str = None      # the oracle's status
    reason: str = None      # the oracle's reason code (errors)
    detail: str = None

    @property
    def must_be_error(self):
        return (self.verdict in ('error', 'crash')
                or self.document.expect_error)


def _profile(*documents):
    profile = versions.VersionProfile()
    for document in documents:
        profile.observe(document)
    return profile


def learnt_versions(document):
    """Objects whose version to write the engine learns from the document.

    The engine learns, from every spec of a run that parses, the highest
    version of each object; those the base spec would not teach it are
    returned (sorted names).
    """
    if document.category != corpus.SPEC:
        return []
    try:
        parsed = request_spec.RequestSpecDocument(document.value)
        parsed.flavor()
        base = json.loads(corpus.base().texts[corpus.SPEC])
        clean, fed = _profile(base), _profile(base, parsed.document)
    except (ValueError, RecursionError):
        return []  # the oracle says what a run does with it
    return sorted(name for name in primitive.NEWEST
                  if clean.version(name) != fed.version(name))


def _oracle(document, uuid):
    """Evaluate the stored document as the unit tests do."""
    evaluation, exc = oracle.evaluate_document(document, uuid=uuid)
    if exc is not None:
        return 'crash', None, None, guard.describe_exception(exc)
    finding = evaluation.finding
    verdict = oracle.classify(evaluation)
    if verdict not in ('error', 'accepted'):
        return 'crash', None, None, verdict
    return verdict, finding.status.value, finding.reason, finding.detail


def _candidates(category, mysql, seed, rng):
    """Storable documents of ``category``, by mutation kind.

    A seeded reservoir sample of CANDIDATES_PER_KIND per kind; for specs,
    every version mutation (few, and the ones that can teach the engine
    versions).
    """
    pools = {}
    seen = {}
    for document in mutations.generate(category, seed):
        stored = stored_document(document, mysql)
        if stored is None:
            continue
        # The document as stored (MySQL may have repaired it).
        document = dataclasses.replace(document, value=stored)
        pool = pools.setdefault(document.kind, [])
        seen[document.kind] = seen.get(document.kind, 0) + 1
        if len(pool) < CANDIDATES_PER_KIND or (
                category == corpus.SPEC and document.kind == 'version'):
            pool.append(document)
        else:
            slot = rng.randrange(seen[document.kind])
            if slot < CANDIDATES_PER_KIND:
                pool[slot] = document
    return pools


def select(mysql, seed=corpus.SEED):
    """Draw the mutated instances from the generator.

    Each category's candidates are judged by the unit oracle and sorted
    into groups, from which the quota is taken in this order, round-robin
    over the group's keys (mutation kinds unless said otherwise):
    documents that crash the evaluation (at most MAX_CRASHING); specs
    that teach the engine versions (one per object name); malformed
    documents the oracle accepts (at most MAX_MALFORMED_ACCEPTED); valid
    documents it finds drifted (MIN_DRIFTED); then errors, then other
    drifted and consistent documents.
    """
    rng = random.Random(seed)
    chosen = []
    with guard.guarded_pass():
        for category, quota in QUOTAS:
            pools = _candidates(category, mysql, seed, rng)
            groups = {}
            for kind in sorted(pools):
                for document in pools[kind]:
                    uuid = str(uuidlib.UUID(int=rng.getrandbits(128),
                                            version=4))
                    item = Mutated(document, uuid, *_oracle(document, uuid))
                    learnt = learnt_versions(document)
                    if item.verdict == 'crash':
                        group, key = 'crash', kind
                    elif learnt:
                        group, key = 'teaching-versions', learnt[0]
                    elif item.verdict == 'accepted' and (
                            document.expect_error):
                        group, key = 'malformed-accepted', kind
                    elif item.verdict == 'accepted':
                        group, key = item.status, kind
                    else:
                        group, key = item.verdict, kind
                    groups.setdefault(group, {}).setdefault(
                        key, []).append(item)
            taken = []
            for group, limit in (
                    ('crash', MAX_CRASHING),
                    ('teaching-versions', len(primitive.NEWEST)),
                    ('malformed-accepted', MAX_MALFORMED_ACCEPTED),
                    (Status.DRIFTED.value, MIN_DRIFTED), ('error', quota),
                    (Status.DRIFTED.value, quota),
                    (Status.CONSISTENT.value, quota)):
                by_key = groups.get(group, {})
                if group == 'teaching-versions':
                    # One per object name.
                    by_key = {key: [items[rng.randrange(len(items))]]
                              for key, items in by_key.items()}
                limit = min(limit, quota - len(taken))
                picked = 0
                while picked < limit and any(by_key.values()):
                    for key in sorted(by_key):
                        if by_key[key] and picked < limit:
                            taken.append(by_key[key].pop(
                                rng.randrange(len(by_key[key]))))
                            picked += 1
            chosen.extend(taken)
    return chosen


def _first_difference(expected, written):
    """Both texts around the first character where they differ."""
    index = next((i for i, (a, b) in enumerate(zip(expected, written))
                  if a != b), min(len(expected), len(written)))
    start = max(0, index - 150)
    return ('  expected ...%s...\n  written  ...%s...'
            % (expected[start:index + 150], written[start:index + 150]))


def _status(found):
    return found['status'] if found else 'consistent, not listed'


def _healthy_specs():
    """Healthy drifted specs, by name: each heal is predictable."""
    base = json.loads(corpus.base().texts[corpus.SPEC])

    def variant(change):
        spec = json.loads(json.dumps(base))
        change(spec)
        return json.dumps(spec)

    def legacy(spec):
        spec[primitive.VERSION] = '1.8'
        del spec[D]['is_bfv']
        del spec[D]['user_id']
    return {
        'old-flavor': variant(lambda s: s[D].update(
            flavor=json.loads(json.dumps(corpus.OLD_FLAVOR)))),
        'legacy-spec': variant(legacy),
        'no-image': variant(lambda s: s[D].update(image=None)),
        'no-pci-requests': variant(lambda s: s[D].update(pci_requests=None)),
    }


class RobustnessRunTest(deployment_case.DeploymentTestCase):

    def add(self, cell, uuid, category=None, stored=None,
            null_mirrors=False):
        """An instance of the unit base record with one column replaced."""
        base = corpus.base()
        texts = dict(base.texts)
        if category == corpus.NUMA:
            texts[corpus.SPEC] = base.spec_without_numa
        rows = corpus.system_metadata_rows(base.system_metadata)
        column = {corpus.SPEC: 'spec', corpus.FLAVOR: 'flavor',
                  corpus.NUMA: 'numa', corpus.PCI: 'pci',
                  corpus.SYSMETA: 'rows'}.get(category)
        values = {'spec': texts[corpus.SPEC], 'flavor': texts[corpus.FLAVOR],
                  'numa': texts[corpus.NUMA], 'pci': texts[corpus.PCI],
                  'rows': rows}
        if column is not None:
            values[column] = stored
        values['spec'] = corpus.for_instance(values['spec'], uuid)
        self.deployment.add_instance(
            cell, corpus.CUR_FLAVOR, uuid=uuid, spec=values['spec'],
            extra=values['flavor'], extra_numa_topology=values['numa'],
            extra_pci_requests=values['pci'], system_metadata={})
        if values['rows']:
            with cell.engine.begin() as conn:
                conn.execute(tables.instance_system_metadata.insert(), [
                    dict(instance_uuid=uuid, key=row['key'],
                         value=row['value'], deleted=row['deleted'],
                         created_at=dep.LONG_AGO)
                    for row in values['rows']])
        if null_mirrors:
            self.update_instance(cell, uuid, instance_type_id=None,
                                 vcpus=None, memory_mb=None, root_gb=None,
                                 ephemeral_gb=None)

    def spec_texts(self):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return {row.instance_uuid: row.spec for row in conn.execute(
                sa.select(t.c.instance_uuid, t.c.spec))}

    def expected_heals(self, healthy):
        """What each healthy instance's spec becomes in a clean run."""
        profile = versions.VersionProfile()
        profile.observe(json.loads(corpus.base().texts[corpus.SPEC]))
        for _uuid, text in healthy.values():
            profile.observe(json.loads(text))
        expected = {}
        for name, (uuid, text) in healthy.items():
            record = corpus.build_record(corpus.SPEC, text, uuid=uuid)
            evaluation = decisions.evaluate(record, corpus.CELL, corpus.NOW,
                                            corpus.SETTINGS, profile)
            self.assertEqual(Status.DRIFTED, evaluation.finding.status,
                             '%s: %s' % (name, evaluation.finding.detail))
            expected[uuid] = evaluation.new_spec
        return expected

    def test_one_run_over_broken_records(self):
        mysql = self.db.name == 'MySQL'
        mutated = select(mysql)
        self.assertEqual(sum(quota for _category, quota in QUOTAS),
                         len(mutated))
        cells = (self.cell1, self.cell2)
        for index, item in enumerate(mutated):
            self.add(cells[index % 2], item.uuid, item.document.category,
                     item.document.value, item.document.null_mirrors)
        healthy = {}
        for index, (name, text) in enumerate(
                sorted(_healthy_specs().items())):
            uuid = str(uuidlib.UUID(int=index + 1, version=4))
            self.add(cells[index % 2], uuid, corpus.SPEC, text)
            healthy[name] = (uuid, text)
        expected_heals = self.expected_heals(healthy)
        before = self.spec_texts()

        with guard.guarded_pass():
            result, exc = guard.call(self.heal, '--format', 'json',
                                     seconds=RUN_SECONDS, wall_clock=True)
        after = self.spec_texts()
        problems = []
        if exc is not None:
            problems.append('the run raised %s'
                            % guard.describe_exception(exc))
        elif result.code != 2:
            problems.append('exit code %s, expected 2; stderr:\n%s' % (
                result.code, result.stderr.strip()[-2000:]))
            problems.extend('the unit oracle saw this one crash (%s): %s'
                            % (item.detail, item.document.describe(120))
                            for item in mutated if item.verdict == 'crash')
        # instance uuid -> result entry; None without a report.
        report = None
        if result is not None and result.code != 255:
            try:
                output = json.loads(result.stdout)
                report = {r['instance_uuid']: r for r in output['results']}
            except ValueError:
                problems.append('stdout is not one JSON document: %r'
                                % result.stdout[:500])

        for item in mutated:
            what = item.document.describe(120)
            found = (report or {}).get(item.uuid)
            written = after[item.uuid] != before[item.uuid]
            if item.must_be_error:
                if written:
                    problems.append('spec written for %s' % what)
                if report is not None and (
                        found is None or found['status'] != 'error'):
                    problems.append('not reported as an error (%s): %s' % (
                        _status(found), what))
                elif found and found['reason'] not in findings.REASONS[
                        Status.ERROR]:
                    problems.append('error without a listed reason (%r): %s'
                                    % (found['reason'], what))
                elif found and item.reason and found['reason'] != (
                        item.reason):
                    problems.append('reason %s, the unit oracle says %s: %s'
                                    % (found['reason'], item.reason, what))
            elif item.status == Status.CONSISTENT.value:
                if written or (found and found['status'] != 'consistent'):
                    problems.append('consistent instance changed or '
                                    'reported (%s): %s' % (
                                        _status(found), what))
            elif report is not None and (
                    found is None or found['status'] != 'healed'):
                problems.append('drifted instance not healed (%s): %s' % (
                    _status(found), what))
            elif written:
                try:
                    request_spec.RequestSpecDocument(
                        after[item.uuid]).flavor()
                except primitive.PrimitiveError as error:
                    problems.append('healed spec does not parse back (%s): '
                                    '%s' % (error, what))

        for name, (uuid, _text) in sorted(healthy.items()):
            found = (report or {}).get(uuid)
            if report is not None and (
                    found is None or found['status'] != 'healed'):
                problems.append('healthy %s not healed: %s' % (
                    name, found and (found['status'], found['reason'],
                                     found['detail'])))
            elif report is not None and after[uuid] != expected_heals[uuid]:
                problems.append(
                    'healthy %s healed differently than in a deployment '
                    'without broken records:\n%s' % (name, _first_difference(
                        expected_heals[uuid], after[uuid])))

        verdicts = {}
        for item in mutated:
            key = (item.document.category, item.verdict)
            verdicts[key] = verdicts.get(key, 0) + 1
        self.addDetail('robustness-run', content.text_content('\n'.join(
            '%s %s: %d' % (category, verdict, count)
            for (category, verdict), count in sorted(verdicts.items()))))
        if problems:
            self.fail('%d problem(s) in one run over %d mutated and %d '
                      'healthy instances:\n%s' % (
                          len(problems), len(mutated), len(healthy),
                          '\n'.join(problems)))
        expected_errors = sum(1 for item in mutated if item.must_be_error)
        self.assertEqual(expected_errors, output['summary']['errors'])
