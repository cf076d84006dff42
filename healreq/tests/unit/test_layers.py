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

"""The layers of doc/source/contributor/architecture.rst hold.

The layers are read from the diagram of that page, which is their only
statement. Every module of the package (tests aside) imports only modules
of lower layers, or of its own package within its layer: never upwards,
never sideways into another package of the same layer.
"""

import ast
import os
import re

import testtools

import healreq

ROOT = os.path.dirname(healreq.__file__)
ARCHITECTURE = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                            'doc', 'source', 'contributor', 'architecture.rst')
_ENTRY = re.compile(r'^    ([\w.]+/|[\w.]+\.py)(\s|$)')
_SEPARATOR = re.compile(r'^    -+$')


def diagram_layers(text):
    """The layers of the page's diagram (its first literal block).

    Lowest first; each a tuple of module or package names, as
    ``healreq.heal`` for ``heal/`` and ``healreq.api`` for ``api.py``.
    """
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.endswith('::'))
    layers, layer = [], []
    for line in lines[start + 1:]:
        if line and not line.startswith(' '):
            break
        if _SEPARATOR.match(line):
            layers.append(tuple(layer))
            layer = []
            continue
        entry = _ENTRY.match(line)
        if entry:
            name = entry.group(1)
            name = name[:-1] if name.endswith('/') else name[:-len('.py')]
            layer.append('healreq.' + name)
    layers.append(tuple(layer))
    return tuple(reversed(layers))


def _read_layers():
    with open(ARCHITECTURE) as handle:
        return diagram_layers(handle.read())


# Lowest first; each entry is one layer of packages or modules.
LAYERS = _read_layers()


def _unit(module):
    """``(layer index, unit)`` of ``module``, the unit naming its layer."""
    for index, units in enumerate(LAYERS):
        for unit in units:
            if module == unit or module.startswith(unit + '.'):
                return index, unit
    raise AssertionError('%s is in no layer' % module)


def _modules():
    for directory, subdirectories, names in os.walk(ROOT):
        relative = os.path.relpath(directory, os.path.dirname(ROOT))
        subdirectories[:] = [d for d in subdirectories
                             if d not in ('tests', '__pycache__')]
        for name in names:
            if not name.endswith('.py'):
                continue
            parts = relative.split(os.sep) + [name[:-3]]
            if parts[-1] == '__init__':
                parts.pop()
            yield '.'.join(parts), os.path.join(directory, name)


def _imports(path, module):
    with open(path) as handle:
        tree = ast.parse(handle.read(), path)
    package = module if path.endswith('__init__.py') else (
        module.rpartition('.')[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                anchor = package.rsplit('.', node.level - 1)[0]
                base = anchor + ('.' + base if base else '')
            for alias in node.names:
                yield '%s.%s' % (base, alias.name)


def problem(module, imported):
    """Why ``module`` may not import ``imported``, or None."""
    layer, unit = _unit(module)
    other_layer, other_unit = _unit(imported)
    if other_layer > layer:
        return '%s imports %s (upwards)' % (module, imported)
    if other_layer == layer and other_unit != unit:
        return '%s imports %s (sideways)' % (module, imported)
    return None


class LayerTest(testtools.TestCase):

    def test_no_upward_or_sideways_import(self):
        found = []
        for module, path in _modules():
            if module == 'healreq':
                continue
            for imported in _imports(path, module):
                if imported.startswith('healreq.'):
                    found.append(problem(module, imported))
        self.assertEqual([], [p for p in found if p])

    def test_every_module_is_in_a_layer(self):
        for module, _path in _modules():
            if module != 'healreq':
                _unit(module)

    def test_the_diagram(self):
        self.assertEqual(('healreq.masking',), LAYERS[0])
        self.assertEqual(('healreq.__main__',), LAYERS[-1])
        self.assertIn(('healreq.api', 'healreq.testing'), LAYERS)
        self.assertIn(('healreq.db', 'healreq.objects'), LAYERS)
        named = [unit for layer in LAYERS for unit in layer]
        self.assertEqual(len(named), len(set(named)))
        for unit in named:
            path = os.path.join(ROOT, *unit.split('.')[1:])
            self.assertTrue(os.path.isdir(path) or os.path.isfile(
                path + '.py'), unit)

    def test_reading_a_diagram(self):
        text = (
            'Layers::\n\n'
            '    cmd/         parse arguments; api.py is below\n'
            '                 more about cmd/\n'
            '    ----------\n'
            '    api.py       one call per command\n'
            '    testing/     builders\n'
            '    ----------\n'
            '    masking.py   masks\n'
            '\n'
            '``tests/`` stands outside.\n'
            '    notes.py     not in the diagram\n')
        self.assertEqual(
            (('healreq.masking',), ('healreq.api', 'healreq.testing'),
             ('healreq.cmd',)), diagram_layers(text))

    def test_the_rule(self):
        self.assertIsNone(problem('healreq.run.walker', 'healreq.db.rows'))
        self.assertIsNone(problem('healreq.run.walker',
                                  'healreq.run.records'))
        self.assertIn('upwards', problem('healreq.db.rows', 'healreq.api'))
        self.assertIn('sideways', problem('healreq.objects.image',
                                          'healreq.db.tables'))
