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

Two rules of shape hold beside them. No module of healreq, tests
included, imports a test module of healreq (one whose file name starts
with ``test_``): what tests share lives in a helper module. And no class
of the package (tests aside) has more than ``MAX_METHODS`` methods,
unless it says why they belong together, in a docstring line or a
comment right above the class starting with ``BELONG_TOGETHER``.
"""

import ast
import os
import re

import fixtures
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


# A class of the package may have this many methods at most, unless
# its docstring, or a comment right above it, has a line starting with
# BELONG_TOGETHER that says why they belong together.
MAX_METHODS = 17
BELONG_TOGETHER = 'Its methods belong together:'


def _modules(tests=False):
    """``(module name, path)`` of each module of the package.

    The tests' modules too if ``tests``.
    """
    skipped = ('__pycache__',) if tests else ('tests', '__pycache__')
    for directory, subdirectories, names in os.walk(ROOT):
        relative = os.path.relpath(directory, os.path.dirname(ROOT))
        subdirectories[:] = [d for d in subdirectories if d not in skipped]
        for name in names:
            if not name.endswith('.py'):
                continue
            parts = relative.split(os.sep) + [name[:-3]]
            if parts[-1] == '__init__':
                parts.pop()
            yield '.'.join(parts), os.path.join(directory, name)


def _parse(path):
    with open(path) as handle:
        return ast.parse(handle.read(), path)


def _imports(path, module):
    """The names ``module`` (at ``path``) imports, absolute.

    ``from a import b`` yields ``a.b``, whether ``b`` is a module or a
    name in ``a``; ``importlib.import_module`` of a constant string
    yields that string.
    """
    tree = _parse(path)
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
        elif _is_import_module_call(node):
            yield node.args[0].value


def _is_import_module_call(node):
    """Whether ``node`` is ``importlib.import_module('constant')``."""
    return (isinstance(node, ast.Call) and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == 'import_module'
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == 'importlib')


def test_module_of(imported):
    """The test module of healreq that ``imported`` is or is in, or None.

    ``imported`` is a dotted name as ``_imports`` yields it: a module, or
    a name in a module. A test module is a file named ``test_*.py``.
    """
    parts = imported.split('.')
    if parts[0] != 'healreq':
        return None
    for end in range(2, len(parts) + 1):
        path = os.path.join(ROOT, *parts[1:end]) + '.py'
        if parts[end - 1].startswith('test_') and os.path.isfile(path):
            return '.'.join(parts[:end])
    return None


def crowded_classes(path, source=None):
    """The classes at ``path`` with too many methods, and their counts.

    Too many: more than MAX_METHODS, without BELONG_TOGETHER. ``source``
    is the module's text, if not read from ``path``.
    """
    if source is None:
        with open(path) as handle:
            source = handle.read()
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source, path)):
        if not isinstance(node, ast.ClassDef):
            continue
        methods = sum(isinstance(item, (ast.FunctionDef,
                                        ast.AsyncFunctionDef))
                      for item in node.body)
        if methods > MAX_METHODS and not _says_why(node, lines):
            found.append((node.name, methods))
    return found


def _says_why(node, lines):
    """Whether class ``node`` says why its methods belong together."""
    docstring = ast.get_docstring(node) or ''
    if any(line.strip().startswith(BELONG_TOGETHER)
           for line in docstring.splitlines()):
        return True
    # The comment lines right above the class (or its decorators).
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    index = first - 2
    while index >= 0 and lines[index].strip().startswith('#'):
        if lines[index].strip()[1:].strip().startswith(BELONG_TOGETHER):
            return True
        index -= 1
    return False


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

    def test_no_module_imports_a_test_module(self):
        found = []
        for module, path in _modules(tests=True):
            for imported in _imports(path, module):
                test_module = test_module_of(imported)
                if test_module is not None:
                    found.append('%s imports %s' % (module, test_module))
        self.assertEqual([], found)

    def test_finding_test_modules(self):
        self.assertEqual('healreq.tests.unit.test_layers',
                         test_module_of('healreq.tests.unit.test_layers'))
        self.assertEqual('healreq.tests.unit.test_layers', test_module_of(
            'healreq.tests.unit.test_layers.MAX_METHODS'))
        self.assertIsNone(test_module_of('healreq.tests.unit.setup_cfg'))
        self.assertIsNone(test_module_of('healreq.tests.unit.test_absent'))
        self.assertIsNone(test_module_of('oslo_db.sqlalchemy.test_fixtures'))
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'helper.py')
        with open(path, 'w') as handle:
            handle.write('import importlib\n'
                         'from healreq.tests.unit import test_layers\n'
                         'def later():\n'
                         '    from healreq.tests.unit.test_docs import x\n'
                         '    importlib.import_module(\n'
                         '        "healreq.tests.unit.test_quickstart")\n')
        found = {test_module_of(name)
                 for name in _imports(path, 'healreq.tests.unit.helper')}
        self.assertEqual({None, 'healreq.tests.unit.test_layers',
                          'healreq.tests.unit.test_docs',
                          'healreq.tests.unit.test_quickstart'}, found)

    def test_no_crowded_class(self):
        found = []
        for module, path in _modules():
            found.extend('%s.%s has %d methods' % (module, name, count)
                         for name, count in crowded_classes(path))
        self.assertEqual([], found)

    def test_finding_crowded_classes(self):
        methods = ''.join('    def m%d(self):\n        pass\n' % number
                          for number in range(MAX_METHODS + 1))
        plain = 'class Crowded(object):\n' + methods
        self.assertEqual([('Crowded', MAX_METHODS + 1)],
                         crowded_classes('crowded.py', plain))
        fewer = 'class Fewer(object):\n' + methods.split('    def m1(')[0]
        self.assertEqual([], crowded_classes('fewer.py', fewer))
        documented = ('class Crowded(object):\n'
                      '    """A class.\n\n    %s one reason.\n    """\n'
                      % BELONG_TOGETHER + methods)
        self.assertEqual([], crowded_classes('crowded.py', documented))
        commented = ('# Its class.\n# %s one reason.\n'
                     '@decorated\n' % BELONG_TOGETHER + plain)
        self.assertEqual([], crowded_classes('crowded.py', commented))
        apart = '# %s one reason.\n\n' % BELONG_TOGETHER + plain
        self.assertEqual([('Crowded', MAX_METHODS + 1)],
                         crowded_classes('crowded.py', apart))

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
