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

"""Reading and writing oslo.versionedobjects primitives as Nova stores them.

Nova serialises objects with ``jsonutils.dumps(obj.obj_to_primitive())``:
an envelope of ``nova_object.name``, ``.namespace``, ``.version``, ``.data``
and optionally ``.changes``. These helpers validate that shape and write
JSON the way Nova does (default separators, ASCII with escapes), so that a
document we did not change round-trips byte for byte.
"""

import json
import re
import reprlib

from healreq import releases

NAME = 'nova_object.name'
NAMESPACE = 'nova_object.namespace'
VERSION = 'nova_object.version'
DATA = 'nova_object.data'
CHANGES = 'nova_object.changes'

_VERSION_RE = re.compile(r'^(\d{1,9})\.(\d{1,9})$')


# The newest version of each object the newest supported Nova knows; a
# newer (or another major) version cannot be loaded by it, so nor do we.
NEWEST = releases.LATEST.newest_versions()


def loadable(name, version):
    """Whether Nova can load ``name`` at ``version`` (a parsed tuple)."""
    newest = NEWEST.get(name)
    return newest is None or (version[0] == newest[0]
                              and version <= newest)


def target_version(name, version):
    """``(major, minor)`` of a version to write ``name`` at.

    Raises PrimitiveError for a version string that is not one, or one
    Nova cannot load.
    """
    parsed = parse_version(version, '%s target' % name)
    if not loadable(name, parsed):
        newest = NEWEST[name]
        raise PrimitiveError('cannot write %s version %s (newest %d.%d)'
                             % (name, version, newest[0], newest[1]))
    return parsed


class PrimitiveError(ValueError):
    """A stored document is not a usable Nova object primitive."""


def load_json(text, what):
    """Parse stored JSON text; raise PrimitiveError naming ``what``."""
    if text is None:
        raise PrimitiveError('%s is NULL' % what)
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode('utf-8')
        except UnicodeDecodeError as exc:
            raise PrimitiveError('%s is not valid UTF-8: %s' % (what, exc))
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PrimitiveError('%s is not valid JSON: %s' % (what, exc))


def dump_json(document):
    """Serialise a document exactly as Nova's jsonutils.dumps would."""
    return json.dumps(document)


def parse_version(version, what):
    """Return ``(major, minor)`` of an object version string."""
    match = _VERSION_RE.match(version) if isinstance(version, str) else None
    if not match:
        raise PrimitiveError('%s has an invalid object version %s'
                             % (what, short(version)))
    return int(match.group(1)), int(match.group(2))


class _ShortRepr(reprlib.Repr):

    def repr_int(self, x, level):
        try:
            return super().repr_int(x, level)
        except ValueError:
            # More digits than Python converts to text (> 4300 by default).
            return '<%d-bit integer>' % x.bit_length()


_SHORT_REPR = _ShortRepr()


def short(value):
    """A bounded rendering of any value for messages (depth and length).

    Never raises, whatever the value: long integers, deep nesting and
    failing ``__repr__`` methods are rendered too.
    """
    return _SHORT_REPR.repr(value)


def integer(value, what):
    """An integer field as Nova's IntegerField coerces it.

    Integers and integer strings pass; booleans, floats and anything else
    raise PrimitiveError.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise PrimitiveError('%s is not an integer: %s' % (what, short(value)))


def unwrap(document, expected_name, what):
    """Check a primitive's envelope and return its data dict."""
    if not isinstance(document, dict):
        raise PrimitiveError('%s is not an object primitive' % what)
    name = document.get(NAME)
    if name != expected_name:
        raise PrimitiveError('%s is a %s primitive, expected %r'
                             % (what, short(name), expected_name))
    if document.get(NAMESPACE) != 'nova':
        raise PrimitiveError('%s has namespace %s, expected \'nova\''
                             % (what, short(document.get(NAMESPACE))))
    parsed = parse_version(document.get(VERSION), what)
    if not loadable(expected_name, parsed):
        raise PrimitiveError('%s is %s %s, which Nova cannot load'
                             % (what, expected_name,
                                short(document.get(VERSION))))
    data = document.get(DATA)
    if not isinstance(data, dict):
        raise PrimitiveError('%s has no data' % what)
    return data


def wrap(name, version, data):
    """Build a clean primitive (no change list) for ``data``."""
    return {NAME: name, NAMESPACE: 'nova', VERSION: version, DATA: data}
