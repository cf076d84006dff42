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

"""The generator: mutated documents of each kind healreq reads."""

import dataclasses
import json
import random

from healreq.objects import primitive
from healreq.tests.mutated_documents import corpus

MEGABYTE = 1 << 20
DEPTH = 5000
HUGE_INTEGERS = (10 ** 400, -10 ** 400)
HUGE_STRINGS = ('A' * MEGABYTE, '7' * MEGABYTE + 'Q')
OBJECT_NAMES = ('Bogus', '', None, 42, 'requestspec', 'NovaObject',
                'InstancePCIRequest', 'Flavor')
NAMESPACES = ('oslo', 'Nova', '', None, ['nova'], 'nova ')
VERSIONS = ('1', '99.99', '1.x', 1.5, '', None, '-1.0', '1.-1', '2.0',
            '0.0', '1.15.1', ' 1.4', '1.' + '9' * 5000, '9' * 30 + '.1',
            [1, 0], {'major': 1})
INVALID_UTF8 = (b'\xff', b'\xfe\xff', b'\xc3\x28', b'\xa0\xa1',
                b'\xe2\x28\xa1', b'\xf0\x28\x8c\xbc', b'\xed\xa0\x80',
                b'\xc0\xaf', b'\x80', b'\xf8\x88\x80\x80\x80')
SURROGATES = ('\ud800', '\udfff', '\udc80', '\ud83d')
MARKER = 'ROBUSTNESS-MARKER-%d'
# Short CPU lists naming huge sets: one range of 2**32 CPUs, and adjacent
# ranges of 2**20 CPUs filling a 255-character system metadata value.
WIDE_CPU_RANGE = '0-4294967295'


def _adjacent_cpu_ranges(width=1 << 20, limit=255):
    ranges = []
    start = 0
    while True:
        candidate = ranges + ['%d-%d' % (start, start + width - 1)]
        if len(','.join(candidate)) > limit:
            return ','.join(ranges)
        ranges = candidate
        start += width


MANY_CPU_RANGES = _adjacent_cpu_ranges()
SPECIAL_TEXTS = ('', ' ', 'null', '[]', '{}', '0', '"text"', 'true',
                 'NaN', '-Infinity', '1e400', '[' * DEPTH + ']' * DEPTH,
                 '{"a": ' * DEPTH + '1' + '}' * DEPTH, '\x00', '{"cur": ')


# Envelopes whose every part healreq reads (and Nova must load): a wrong
# name, namespace or version there makes the document unusable.
_READ_ENVELOPES = {
    corpus.SPEC: [
        (), (primitive.DATA, 'flavor'), (primitive.DATA, 'image'),
        (primitive.DATA, 'image', primitive.DATA, 'properties'),
        (primitive.DATA, 'numa_topology'),
        (primitive.DATA, 'numa_topology', primitive.DATA, 'cells', None),
        (primitive.DATA, 'pci_requests'),
        (primitive.DATA, 'pci_requests', primitive.DATA, 'requests',
         None)],
    corpus.FLAVOR: [('cur',), ('old',), ('new',)],
}


def _is_read_envelope(category, path):
    for pattern in _READ_ENVELOPES.get(category, ()):
        if len(pattern) == len(path) and all(
                want is None or want == got
                for want, got in zip(pattern, path)):
            return True
    return False


def _where(path):
    return '/'.join(str(p) for p in path) or '<root>'


def _walk(node, path=()):
    """Every (path, value) below ``node``, depth first, in order."""
    if isinstance(node, dict):
        items = list(node.items())
    elif isinstance(node, list):
        items = list(enumerate(node))
    else:
        return
    for key, value in items:
        yield path + (key,), value
        yield from _walk(value, path + (key,))


def _get(node, path):
    for key in path:
        node = node[key]
    return node


def _with(document, path, value):
    if not path:
        return value
    _get(document, path[:-1])[path[-1]] = value
    return document


def _without(document, path):
    del _get(document, path[:-1])[path[-1]]
    return document


def _deep(kind):
    """A Python value nested DEPTH levels deep (no recursion to build)."""
    value = 1 if kind == 'dict' else []
    for _level in range(DEPTH):
        value = {'a': value} if kind == 'dict' else [value]
    return value


def _deep_text(kind):
    if kind == 'dict':
        return '{"a": ' * DEPTH + '1' + '}' * DEPTH
    return '[' * DEPTH + '[]' + ']' * DEPTH


def _wrong_types(value):
    """Values of other JSON types than ``value``'s."""
    if isinstance(value, bool):
        return [1, 0, 'true', 'yes', [], {}, None]
    if isinstance(value, int):
        return [str(value), 'abc', True, False, 1.5, [], {}, [value]]
    if isinstance(value, float):
        return ['x', True, [], {}, int(value)]
    if isinstance(value, str):
        return [12, 0, True, 1.5, [], {}, [value], {value: value}]
    if isinstance(value, list):
        return [{}, 'list', 1, True, {str(i): v for i, v in enumerate(value)},
                [value]]
    if isinstance(value, dict):
        return [[], list(value.values()), 'dict', 1, False, [value]]
    return [{}, [], 'none', 0, False]


class _JsonMutations(object):
    """Mutations of one JSON document (an object primitive or a list)."""

    def __init__(self, category, text, rng, min_documents):
        self.category = category
        self.text = text
        self.base = json.loads(text)
        self.rng = rng
        self.min_documents = min_documents
        self.paths = [path for path, _value in _walk(self.base)]
        self.count = 0

    def copy(self):
        return json.loads(self.text)

    def emit(self, kind, where, obj=corpus.NO_OBJECT, text=None,
             unusable_envelope=False):
        if text is None:
            text = json.dumps(obj)
        return self.emit_raw(kind, where, text, obj, unusable_envelope)

    def emit_raw(self, kind, where, value, obj=corpus.NO_OBJECT,
                 unusable_envelope=False):
        self.count += 1
        return corpus.Document(self.category, kind, where, value, obj,
                               unusable_envelope=unusable_envelope)

    def envelopes(self):
        return [path for path in [()] + self.paths
                if isinstance(_get(self.base, path), dict)
                and primitive.NAME in _get(self.base, path)]

    def dicts(self):
        return [path for path in [()] + self.paths
                if isinstance(_get(self.base, path), dict)]

    def strings(self):
        return [path for path in self.paths
                if isinstance(_get(self.base, path), str)]

    def numbers(self):
        return [path for path in self.paths
                if isinstance(_get(self.base, path), (int, float))
                and not isinstance(_get(self.base, path), bool)]

    # -- families on the decoded document --------------------------------

    def missing_keys(self):
        for path in self.paths:
            yield self.emit('missing-key', _where(path),
                            _without(self.copy(), path))

    def nulls(self):
        for path in self.paths:
            if _get(self.base, path) is not None:
                yield self.emit('null', _where(path),
                                _with(self.copy(), path, None))

    def wrong_types(self):
        for path in [()] + self.paths:
            options = _wrong_types(_get(self.base, path))
            for value in self.rng.sample(options, min(3, len(options))):
                yield self.emit('wrong-type', _where(path),
                                _with(self.copy(), path, value))

    def envelope_fields(self):
        for path in self.envelopes():
            read = _is_read_envelope(self.category, path)
            for field, values, kind in (
                    (primitive.NAME, OBJECT_NAMES, 'object-name'),
                    (primitive.NAMESPACE, NAMESPACES, 'namespace'),
                    (primitive.VERSION, VERSIONS, 'version')):
                original = _get(self.base, path)[field]
                for value in values:
                    if value == original:
                        continue
                    where = _where(path + (field,))
                    yield self.emit(kind, '%s=%s' % (
                        where, corpus.preview(value, 20)),
                                    _with(self.copy(), path + (field,),
                                          value), unusable_envelope=read)

    def huge_values(self):
        for path in self.strings():
            for value in HUGE_STRINGS:
                yield self.emit('huge-string', _where(path),
                                _with(self.copy(), path, value))
        for path in self.numbers():
            for value in HUGE_INTEGERS:
                yield self.emit('huge-integer', _where(path),
                                _with(self.copy(), path, value))
            # An integer literal Python refuses to read (> 4300 digits).
            marker = MARKER % self.count
            text = json.dumps(_with(self.copy(), path, marker)).replace(
                json.dumps(marker), '1' * 5000)
            yield self.emit('huge-integer', _where(path), text=text)
        candidates = [()] + self.paths
        for path in self.rng.sample(candidates, min(12, len(candidates))):
            kind = self.rng.choice(['list', 'dict'])
            marker = MARKER % self.count
            text = json.dumps(_with(self.copy(), path, marker)).replace(
                json.dumps(marker), _deep_text(kind))
            yield self.emit('deep-nesting', _where(path),
                            _with(self.copy(), path, _deep(kind)), text)

    def not_numbers(self):
        paths = self.numbers() + self.rng.sample(self.paths,
                                                 min(10, len(self.paths)))
        for path in paths:
            for value in (float('nan'), float('inf'), float('-inf')):
                yield self.emit('nan-infinity', _where(path),
                                _with(self.copy(), path, value))

    def duplicate_keys(self):
        """A key twice in one object; JSON readers keep the last one."""
        for path in self.dicts():
            node = _get(self.base, path)
            if not node:
                continue
            key = self.rng.choice(sorted(node))
            value = self.rng.choice(_wrong_types(node[key]))
            for last in (True, False):
                marker = MARKER % self.count
                copied = dict(_get(self.copy(), path))
                if last:
                    copied[marker] = value
                else:
                    copied = dict([(marker, value)] + list(copied.items()))
                text = json.dumps(_with(self.copy(), path, copied)).replace(
                    json.dumps(marker), json.dumps(key), 1)
                obj = _with(self.copy(), path + (key,),
                            value if last else node[key])
                yield self.emit('duplicate-key', '%s (%s wins)' % (
                    _where(path + (key,)), 'mutated' if last else 'original'),
                    obj, text)

    def unknown_keys(self):
        for path in self.dicts():
            node = _get(self.base, path)
            key = ('nova_object.unknown' if primitive.NAME in node
                   else 'x_unknown_key')
            value = self.rng.choice(['x', 1, None, [], {'y': 1}])
            yield self.emit('unknown-key', _where(path + (key,)),
                            _with(self.copy(), path,
                                  dict(node, **{key: value})))

    def huge_cpu_sets(self):
        """Short CPU lists that name billions of CPUs."""
        if self.category == corpus.FLAVOR:
            path = ('cur', primitive.DATA, 'extra_specs')
            for extra in ({'hw:numa_cpus.0': WIDE_CPU_RANGE,
                           'hw:numa_cpus.1': '2-3', 'hw:numa_mem.0': '4096',
                           'hw:numa_mem.1': '4096'},
                          {'hw:cpu_policy': 'mixed',
                           'hw:cpu_dedicated_mask': WIDE_CPU_RANGE},
                          {'hw:cpu_realtime': 'yes',
                           'hw:cpu_realtime_mask': '^' + WIDE_CPU_RANGE}):
                specs = dict(_get(self.base, path), **extra)
                yield self.emit('huge-cpu-set', _where(path) + ' ' + ', '.join(
                    '%s=%s' % item for item in sorted(extra.items())),
                    _with(self.copy(), path, specs))
        elif self.category == corpus.SPEC:
            # A pre-Liberty (unversioned) topology, which Nova converts.
            legacy = {'cells': [{'id': 0, 'cpus': WIDE_CPU_RANGE,
                                 'mem': {'total': 4096}}]}
            path = (primitive.DATA, 'numa_topology')
            yield self.emit('huge-cpu-set', _where(path) + ' (legacy)',
                            _with(self.copy(), path, legacy))

    def escaped_surrogates(self):
        for path in self.strings():
            value = _get(self.base, path)
            surrogate = self.rng.choice(SURROGATES)
            mutated = (value + surrogate if self.rng.random() < 0.5
                       else surrogate + value)
            yield self.emit('escaped-surrogate', _where(path),
                            _with(self.copy(), path, mutated))

    def harmless(self):
        shuffled = self.copy()
        for path in [()] + self.paths:
            node = _get(shuffled, path)
            if isinstance(node, dict):
                items = list(node.items())
                self.rng.shuffle(items)
                node.clear()
                node.update(items)
        yield self.emit('reordered-keys', '<root>', shuffled)
        yield self.emit('pretty-printed', '<root>', self.copy(),
                        json.dumps(self.base, indent=4))

    def specials(self):
        for text in SPECIAL_TEXTS:
            yield self.emit_raw('not-a-document', '<root>', text)
        for value in (b'', self.text.encode('utf-16'),
                      self.text.encode('utf-8-sig'),
                      bytearray(self.text.encode('utf-8')),
                      self.text + ' trailing', self.text + self.text,
                      '\ufeff' + self.text):
            yield self.emit_raw('not-a-document', 'whole text', value)

    # -- families on the stored text -------------------------------------

    def truncated(self):
        offset = self.rng.randrange(len(self.text))
        return self.emit_raw('truncated', 'offset %d' % offset,
                             self.text[:offset])

    def bit_flipped(self):
        data = bytearray(self.text.encode('utf-8'))
        offsets = sorted(self.rng.randrange(len(data))
                         for _flip in range(self.rng.randint(1, 3)))
        for offset in offsets:
            data[offset] ^= 1 << self.rng.randrange(8)
        where = 'bytes %s' % ','.join(str(o) for o in offsets)
        if self.rng.random() < 0.5:
            return self.emit_raw('bit-flip', where, bytes(data))
        return self.emit_raw('bit-flip-as-str', where,
                             bytes(data).decode('utf-8', 'surrogateescape'))

    def non_utf8(self):
        data = self.text.encode('utf-8')
        offset = self.rng.randrange(len(data) + 1)
        sequence = self.rng.choice(INVALID_UTF8)
        mutated = data[:offset] + sequence + data[offset:]
        where = '%r at byte %d' % (sequence, offset)
        choice = self.rng.random()
        if choice < 0.5:
            return self.emit_raw('non-utf8-bytes', where, mutated)
        if choice < 0.8:
            return self.emit_raw(
                'lone-surrogate-str', where,
                mutated.decode('utf-8', 'surrogateescape'))
        surrogate = self.rng.choice(SURROGATES)
        return self.emit_raw(
            'lone-surrogate-str', '%r at %d' % (surrogate, offset),
            self.text[:offset] + surrogate + self.text[offset:])

    def random_edits(self):
        """Two to four random edits of the decoded document."""
        document = self.copy()
        wheres = []
        for _edit in range(self.rng.randint(2, 4)):
            paths = [path for path, _value in _walk(document)]
            if not paths:
                break
            path = self.rng.choice(paths)
            action = self.rng.choice(['remove', 'null', 'retype', 'add'])
            node = _get(document, path)
            if action == 'remove':
                _without(document, path)
            elif action == 'null':
                _with(document, path, None)
            elif action == 'retype':
                _with(document, path, self.rng.choice(_wrong_types(node)))
            elif isinstance(node, dict):
                node['x_unknown_%d' % len(wheres)] = 1
            elif isinstance(node, list):
                node.append(self.rng.choice([None, 'x', 7, {}]))
            else:
                continue
            wheres.append('%s %s' % (action, _where(path)))
        return self.emit('random-edits', '; '.join(wheres) or '<none>',
                         document)

    def generate(self):
        families = (self.specials, self.harmless, self.missing_keys,
                    self.nulls, self.wrong_types, self.envelope_fields,
                    self.duplicate_keys, self.unknown_keys,
                    self.escaped_surrogates, self.not_numbers,
                    self.huge_values, self.huge_cpu_sets)
        for family in families:
            yield from family()
        random_families = (self.truncated, self.bit_flipped, self.non_utf8,
                           self.random_edits)
        # At least this many of the stored-text mutations, then fill up.
        for _round in range(60):
            for family in random_families:
                yield family()
        while self.count < self.min_documents:
            yield self.rng.choice(random_families)()


def _sysmeta_wrong_values(value):
    return [7, True, 1.5, [], {}, value.encode('utf-8'), 10 ** 400, -1]


class _SystemMetadataMutations(object):
    """Mutations of the values of an instance's ``image_*`` metadata."""

    def __init__(self, values, rng, min_documents):
        self.values = values
        self.rng = rng
        self.min_documents = min_documents
        self.keys = [key for key in values if key.startswith('image_')]
        self.count = 0

    def emit(self, kind, where, values, extra_rows=()):
        """A document: rows of ``values`` plus ``extra_rows``.

        ``extra_rows`` are ``(key, value, deleted, first)``: a row placed
        before (``first``) or after the others.
        """
        rows = []

        def add(key, value, deleted):
            rows.append({'id': len(rows) + 1, 'key': key, 'value': value,
                         'deleted': deleted})
        for key, value, deleted, first in extra_rows:
            if first:
                add(key, value, deleted)
        for key, value in values.items():
            add(key, value, 0)
        for key, value, deleted, first in extra_rows:
            if not first:
                add(key, value, deleted)
        # What Nova reads: live rows win over soft-deleted ones, then the
        # highest id.
        seen = {}
        for row in sorted(rows, key=lambda r: (r['deleted'] == 0, r['id'])):
            seen[row['key']] = row['value']
        self.count += 1
        return corpus.Document(corpus.SYSMETA, kind, where, rows, seen)

    def replaced(self, key, value):
        values = dict(self.values)
        values[key] = value
        return values

    def per_key(self, key):
        value = self.values[key]
        values = dict(self.values)
        del values[key]
        yield self.emit('missing-key', key, values)
        yield self.emit('null', key, self.replaced(key, None))
        for wrong in _sysmeta_wrong_values(value):
            yield self.emit('wrong-type', '%s=%s' % (
                key, corpus.preview(wrong, 20)), self.replaced(key, wrong))
        for invalid in ('bogus', '', ' ', value.upper(), value + ' ',
                        '\x00', 'None', 'null', '-1', '0x10', '1,2',
                        '{"a": 1}'):
            yield self.emit('invalid-value', '%s=%r' % (key, invalid),
                            self.replaced(key, invalid))
        for _cut in range(2):
            offset = self.rng.randrange(len(value) + 1)
            yield self.emit('truncated', '%s[:%d]' % (key, offset),
                            self.replaced(key, value[:offset]))
        data = bytearray(value.encode('utf-8'))
        if data:
            data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        yield self.emit('bit-flip', key, self.replaced(key, bytes(data)))
        sequence = self.rng.choice(INVALID_UTF8)
        yield self.emit('non-utf8-bytes', key,
                        self.replaced(key, value.encode('utf-8') + sequence))
        yield self.emit('lone-surrogate-str', key, self.replaced(
            key, (value.encode('utf-8') + sequence).decode(
                'utf-8', 'surrogateescape')))
        yield self.emit('lone-surrogate-str', key, self.replaced(
            key, self.rng.choice(SURROGATES) + value))
        for huge in HUGE_STRINGS + ('1' + '0' * 400, '9' * 5000,
                                    '-' + '9' * 400):
            yield self.emit('huge-value', '%s=%s' % (
                key, corpus.preview(huge, 12)), self.replaced(key, huge))
        for number in ('nan', 'inf', '-Infinity', '1e400'):
            yield self.emit('nan-infinity', '%s=%s' % (key, number),
                            self.replaced(key, number))
        wrong = self.rng.choice(['bogus', '', '-1', 'nan'])
        for deleted, first in ((17, True), (17, False), (0, True),
                               (0, False)):
            yield self.emit(
                'duplicate-key', '%s (%s %s row %r)' % (
                    key, 'deleted' if deleted else 'live',
                    'first' if first else 'last', wrong),
                self.values, [(key, wrong, deleted, first)])

    def unknown_keys(self):
        for key, value in (('image_x_unknown', '1'),
                           ('image_hw_numa_cpus.2', '4'),
                           ('image_hw_numa_mem.7', '1'),
                           ('image_hw_bogus_property', 'x'),
                           ('image_trait:CUSTOM_X', 'required'),
                           ('image_mappings', 'garbage'),
                           ('image_block_device_mapping', '[{"a": 1}]')):
            yield self.emit('unknown-key', key, self.replaced(key, value))

    def huge_cpu_sets(self):
        for value in (WIDE_CPU_RANGE, MANY_CPU_RANGES):
            yield self.emit('huge-cpu-set', 'image_hw_numa_cpus.0=%s'
                            % corpus.preview(value, 30), self.replaced(
                                'image_hw_numa_cpus.0', value))

    def random_edits(self):
        values = dict(self.values)
        wheres = []
        for key in self.rng.sample(self.keys, self.rng.randint(2, 4)):
            action = self.rng.choice(['remove', 'null', 'retype', 'cut',
                                      'bytes'])
            value = values[key]
            if action == 'remove':
                del values[key]
            elif action == 'null':
                values[key] = None
            elif action == 'retype':
                values[key] = self.rng.choice(_sysmeta_wrong_values(value))
            elif action == 'cut':
                values[key] = value[:self.rng.randrange(len(value) + 1)]
            else:
                values[key] = value.encode('utf-8') + self.rng.choice(
                    INVALID_UTF8)
            wheres.append('%s %s' % (action, key))
        return self.emit('random-edits', '; '.join(wheres), values)

    def generate(self):
        yield self.emit('unchanged', '<all>', self.values)
        for key in self.keys:
            yield from self.per_key(key)
        yield from self.unknown_keys()
        yield from self.huge_cpu_sets()
        while self.count < self.min_documents:
            yield self.random_edits()


def generate(category, seed=corpus.SEED, min_documents=corpus.FILL_TO):
    """Yield the Documents of ``category``, deterministically for a seed.

    At least ``min_documents`` are generated. Flavor documents are
    alternately evaluated with and without the instance's flavor mirrors
    (huge integers with both), so that mutated sizes also reach the
    derivations.
    """
    rng = random.Random('%s/%s' % (seed, category))
    documents = corpus.base()
    if category == corpus.SYSMETA:
        yield from _SystemMetadataMutations(
            documents.system_metadata, rng, min_documents).generate()
        return
    mutations = _JsonMutations(category, documents.texts[category], rng,
                               min_documents)
    for index, document in enumerate(mutations.generate()):
        if category == corpus.FLAVOR:
            if document.kind == 'huge-integer':
                yield document
                document = dataclasses.replace(document, null_mirrors=True)
            else:
                document.null_mirrors = bool(index % 2)
        yield document
