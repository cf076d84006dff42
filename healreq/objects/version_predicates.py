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


"""The two grammars of a VersionPredicate field (img_hv_requested_version).

Nova validates the field with oslo.versionedobjects, which used
distutils' VersionPredicate up to 2024.2 and oslo.utils' packaging one
since (``releases.Release.version_predicates`` says which). Each check
returns for a value its grammar accepts and raises ValueError, with the
library's reason, for one it refuses.
"""

import re

from oslo_utils import versionutils
from packaging import version as packaging_version

# The packaging grammar of oslo.utils' VersionPredicate, for oslo.utils
# releases before 7.4 (Zed's 6.0.2 included), which lack it.
_PREDICATE_PART = re.compile(r'^\s*(<=|>=|<|>|!=|==)\s*([^\s]+)\s*$')


def check_packaging(value):
    """Check ``value`` with oslo.utils' packaging VersionPredicate."""
    predicate = getattr(versionutils, 'VersionPredicate', None)
    if predicate is not None:
        predicate(value)
        return
    for part in value.split(','):
        match = _PREDICATE_PART.match(part)
        if not match:
            raise ValueError('bad package restriction syntax: %s' % part)
        try:
            packaging_version.Version(match.group(2))
        except packaging_version.InvalidVersion as exc:
            raise ValueError(str(exc))


# distutils' VersionPredicate, which oslo.versionedobjects before 3.6
# applied to 'check (VALUE)': a package name, then a parenthesised list
# of comparisons with StrictVersion numbers (1.2, 1.2.3, 1.2a1...).
_DISTUTILS_NAME = re.compile(r'(?i)^\s*([a-z_]\w*(?:\.[a-z_]\w*)*)(.*)',
                             re.ASCII)
_DISTUTILS_PARENS = re.compile(r'^\s*\((.*)\)\s*$')
_DISTUTILS_PART = re.compile(r'^\s*(<=|>=|<|>|!=|==)\s*([^\s,]+)\s*$')
_STRICT_VERSION = re.compile(r'^(\d+) \. (\d+) (\. (\d+))? ([ab](\d+))?$',
                             re.VERBOSE | re.ASCII)


def check_distutils(value):
    """Check ``value`` as distutils' VersionPredicate saw ``check (value)``."""
    text = ('check (%s)' % value).strip()
    rest = _DISTUTILS_NAME.match(text).group(2).strip()
    if not rest:
        return
    parens = _DISTUTILS_PARENS.match(rest)
    if not parens:
        raise ValueError('expected parenthesized list: %r' % rest)
    for part in parens.group(1).split(','):
        comparison = _DISTUTILS_PART.match(part)
        if not comparison:
            raise ValueError('bad package restriction syntax: %r' % part)
        if not _STRICT_VERSION.match(comparison.group(2)):
            raise ValueError('invalid version number %r'
                             % comparison.group(2))
