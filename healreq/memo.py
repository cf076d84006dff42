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
scale), and is thread-safe. Callers store only immutable values, or copy
what they take out. ``disabled()`` switches every memo off, to prove
that the results do not depend on them.
"""

import contextlib
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
            return compute()
        try:
            return self._values[key]
        except KeyError:
            pass
        value = compute()
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
