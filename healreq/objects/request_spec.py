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


"""The stored RequestSpec document (``request_specs.spec``).

A heal edits the parsed document in place of the drifted fields only and
re-serialises it the way Nova does; every other key, the top-level change
list and all object versions stay as the deployment's Nova wrote them.
"""

from healreq import memo
from healreq.objects import flavor as flavor_obj
from healreq.objects import instance_group as group_obj
from healreq.objects import primitive

OBJECT_NAME = 'RequestSpec'


# The compare keys of the flavors specs hold, by their primitives.
_FLAVOR_KEYS = memo.Memo()


class RequestSpecDocument(object):
    """A parsed ``request_specs.spec`` value."""

    def __init__(self, text):
        what = 'request_specs.spec'
        self.document = primitive.load_json(text, what)
        self.data = primitive.unwrap(self.document, OBJECT_NAME, what)
        self._flavor_key = None
        self._named_group = None

    def flavor(self):
        """The spec's Flavor primitive (validated)."""
        self.flavor_key()
        return self.data.get('flavor')

    def flavor_key(self):
        """The spec flavor's compare key (see flavor.parse), parsed once.

        Shared by the specs that hold the same flavor: read-only.
        """
        if self._flavor_key is None:
            self._flavor_key = _FLAVOR_KEYS.get(
                memo.document_key(self.data, 'flavor'),
                lambda: flavor_obj.parse(self.data.get('flavor'),
                                         'request_specs.spec flavor'))
        return self._flavor_key

    def named_group(self):
        """The server group the spec names (instance_group.named), once."""
        if self._named_group is None:
            self._named_group = group_obj.named(self.data)
        return self._named_group

    def with_fields(self, replacements, version=None, unrecorded=()):
        """Serialise a copy of the document with some data fields replaced.

        ``replacements`` maps RequestSpec field names to new values;
        ``version``, if given, is the RequestSpec version to stamp (when a
        field that the stored version lacks is added); ``unrecorded``
        names replaced fields to take out of the change list, as Nova
        does when it resets a field without recording the change.
        """
        data = dict(self.data)
        data.update(replacements)
        document = dict(self.document)
        document[primitive.DATA] = data
        _unrecord(document, [name for name in unrecorded
                             if name in replacements])
        if version is not None:
            document[primitive.VERSION] = version
        return primitive.dump_json(document)


def _unrecord(document, names):
    """Take ``names`` out of the document's change list.

    Nova writes no change list when nothing is left in it.
    """
    changes = document.get(primitive.CHANGES)
    if not names or not isinstance(changes, list):
        return
    left = [name for name in changes if name not in names]
    if len(left) == len(changes):
        return
    if left:
        document[primitive.CHANGES] = left
    else:
        del document[primitive.CHANGES]
