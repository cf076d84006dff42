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


"""Derive once per distinct input: bounded memos of pure derivations.

A cloud has a few dozen flavors and images, and tens of thousands of
instances share them: the same stored sub-documents are compared with
the same derived values over and over. A Memo remembers results by their
exact inputs (a stored sub-document by its serialised form), holds at most
``maxsize`` of them (then starts again, so memory stays flat at any
scale), and is thread-safe. A value is shared by every caller that asks
for it, so it is frozen when computed: its dicts and lists refuse every
change (TypeError), and a caller that needs to change one takes a copy
(``copy.copy`` and ``copy.deepcopy`` give plain, changeable ones).
``disabled()`` switches every memo off, to prove that the results do not
depend on them; values are frozen then too, so that both ways run the
same code.
"""

import contextlib
import copy
import marshal
import threading

# Whether memos remember (switched off by ``disabled``).
_state = {'enabled': True}
_memos = []

# The key of a sub-document a spec does not hold at all (not null).
ABSENT = '\x00absent'


class Memo(object):
    """Remembered values by key, at most ``maxsize`` of them."""

    def __init__(self, maxsize=4096):
        self.maxsize = maxsize
        self._values = {}
        self._lock = threading.Lock()
        _memos.append(self)

    def get(self, key, compute):
        """The value for ``key``: remembered, else ``compute()``'s.

        An exception of ``compute`` is raised, and nothing remembered.
        """
        if not _state['enabled']:
            return frozen(compute())
        try:
            return self._values[key]
        except KeyError:
            pass
        value = frozen(compute())
        with self._lock:
            if len(self._values) >= self.maxsize:
                self._values.clear()
            self._values[key] = value
        return value

    def clear(self):
        with self._lock:
            self._values.clear()

    def __len__(self):
        return len(self._values)


def _refuse(self, *args, **kwargs):
    raise TypeError('a remembered value is shared by its callers: change a '
                    'copy of it')


class FrozenDict(dict):
    """A dict that refuses changes; its copies are plain dicts."""

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self):
        return dict(self)

    def __deepcopy__(self, memo_):
        return {copy.deepcopy(key, memo_): copy.deepcopy(value, memo_)
                for key, value in self.items()}

    def __reduce__(self):
        return dict, (dict(self),)


class FrozenList(list):
    """A list that refuses changes; its copies are plain lists."""

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = _refuse
    sort = _refuse

    def __copy__(self):
        return list(self)

    def __deepcopy__(self, memo_):
        return [copy.deepcopy(value, memo_) for value in self]

    def __reduce__(self):
        return list, (list(self),)


# Values that are immutable, left as they are (a type check, not a call).
_ATOMS = frozenset([str, int, float, bool, bytes, type(None)])


def frozen(value):
    """``value``, its dicts and lists frozen, however deeply nested.

    Nested in dicts, lists and tuples, that is; other values are left as
    they are, and so is a tuple that holds nothing to freeze.
    """
    kind = type(value)
    if kind in _ATOMS or kind is FrozenDict or kind is FrozenList:
        return value
    if isinstance(value, dict):
        return FrozenDict([
            (key, item if type(item) in _ATOMS else frozen(item))
            for key, item in value.items()])
    if isinstance(value, list):
        return FrozenList([item if type(item) in _ATOMS else frozen(item)
                           for item in value])
    if kind is tuple:
        if all(type(item) in _ATOMS or (type(item) is tuple and all(
                type(part) in _ATOMS for part in item)) for item in value):
            return value  # such as sorted dict items: nothing to freeze
        return tuple(frozen(item) for item in value)
    return value


def enabled():
    """Whether memos remember now."""
    return _state['enabled']


@contextlib.contextmanager
def disabled():
    """Within the block, every value is computed anew (memos emptied)."""
    previous = _state['enabled']
    _state['enabled'] = False
    for memo in _memos:
        memo.clear()
    try:
        yield
    finally:
        _state['enabled'] = previous


def document_key(container, name):
    """The key of ``container[name]`` (a parsed JSON value), or ABSENT.

    Its marshal serialisation: six times cheaper than JSON text, and as
    exact, since it loads back as an equal value of the same types (true
    is not 1, 1.0 is not 1) in the same key order. Equal keys are thus
    the same input; equal inputs may get different keys (marshal shares
    repeated objects), which only costs a second derivation.
    """
    if name not in container:
        return ABSENT
    try:
        return marshal.dumps(container[name])
    except ValueError:  # nested beyond marshal's depth: never remembered
        return object()
