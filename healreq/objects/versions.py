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


"""Which object versions to write.

A heal must produce rows the deployment's own Nova can load: never a
version newer than its release loads, never a field the version lacks.
Objects already in the spec keep their stored version. Objects the spec
did not have are stamped with the highest version of that object seen in
the newest specs of the deployment (its running Nova wrote them), capped
at the newest version the deployment's release loads; when no spec holds
that object, with that newest version.
"""

from healreq.objects import primitive
from healreq import releases


class VersionProfile(object):
    """The deployment's release and the object versions its specs hold."""

    def __init__(self, release=releases.LATEST, named=False):
        self.release = release
        # Whether the operator named the release: their word then
        # overrides what the stored specs show (see heal.field_checks).
        self.named = named
        self._seen = {}
        self._fingerprint = None

    def for_release(self, release, named=False):
        """The same observations, for ``release``."""
        profile = VersionProfile(release, named)
        profile._seen = self._seen
        return profile

    @property
    def fingerprint(self):
        """What the versions written depend on, hashable.

        The release, whether it was named, and the versions seen.
        """
        if self._fingerprint is None:
            self._fingerprint = (self.release, self.named,
                                 tuple(sorted(self._seen.items())))
        return self._fingerprint

    def observe(self, document):
        """Record the versions of every envelope nested in ``document``."""
        stack = [document]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                name = item.get(primitive.NAME)
                version = item.get(primitive.VERSION)
                if isinstance(name, str) and isinstance(version, str):
                    self._note(name, version)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)

    def _note(self, name, version):
        try:
            parsed = primitive.parse_version(version, name)
        except primitive.PrimitiveError:
            return
        if not primitive.loadable(name, parsed):
            return
        known = self._seen.get(name)
        if known is None or parsed > known[0]:
            self._seen[name] = (parsed, version)
            self._fingerprint = None

    def highest_seen(self, name):
        """``(major, minor)`` of the newest ``name`` seen, or None."""
        known = self._seen.get(name)
        return None if known is None else known[0]

    def can_write(self, name, version):
        """Whether the deployment's release loads ``name`` at ``version``."""
        try:
            parsed = primitive.parse_version(version, name)
        except primitive.PrimitiveError:
            return False
        return self.release.can_load(name, parsed)

    def version(self, name):
        """The version to stamp on a newly built ``name`` object."""
        known = self._seen.get(name)
        if known is not None and self.release.can_load(name, known[0]):
            return known[1]
        return self.release.newest_text(name)


def version_of(document, default):
    """The stored version of an envelope, or ``default``."""
    if isinstance(document, dict) and isinstance(
            document.get(primitive.VERSION), str):
        return document[primitive.VERSION]
    return default


def first_nested_version(document, key, default):
    """Version of the first nested envelope under ``data[key]``.

    ``key`` names a list (``cells``, ``requests``) or an object
    (``properties``).
    """
    data = document.get(primitive.DATA) if isinstance(document, dict) else None
    value = data.get(key) if isinstance(data, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return version_of(value, default)


def newest_by_name(document):
    """``{name: (parsed, text)}``: the highest version of each object."""
    profile = VersionProfile()
    profile.observe(document)
    return dict(profile._seen)


def lowered(before, after):
    """``[(name, old, new)]`` of objects whose highest version drops.

    Compares the highest version of each object name in two documents;
    names only one of them holds are not compared.
    """
    old, new = newest_by_name(before), newest_by_name(after)
    return [(name, old[name][1], new[name][1]) for name in sorted(old)
            if name in new and new[name][0] < old[name][0]]
