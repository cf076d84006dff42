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

"""The Nova releases healreq supports, and what differs between them.

Each Release records what a deployment's own Nova does differently from
the others: the newest object versions it can load, the page-size units
its oslo.utils parses, the version-predicate grammar of its
oslo.versionedobjects, whether numa_get_constraints checks memory
encryption, and how it loads legacy stored NUMA cells. Derivations take
the Release of the deployment; heal.evidence tells it from the
deployment's own records, as a Detection.
"""

import dataclasses

from healreq import exception

# How a release loads a stored InstanceNUMACell older than 1.6
# (InstanceNUMATopology._migrate_legacy_dedicated_instance_cpuset):
# VICTORIA moves the cpuset of any dedicated cell into pcpuset; CURRENT
# is the rule of the fix for bug 2097360, which looks at each cell's
# version. Releases where the fix came in a point release load by either.
VICTORIA = 'victoria'
CURRENT = 'current'

# oslo.versionedobjects' check of a version predicate such as '>=1.0':
# distutils' StrictVersion grammar, or the packaging grammar (ovo 3.6 on).
DISTUTILS = 'distutils'
PACKAGING = 'packaging'

# Objects whose newest version is the same in every supported release.
_SAME_EVERYWHERE = {
    'Flavor': (1, 2),
    'ImageMeta': (1, 8),
    'InstanceNUMATopology': (1, 3),
    'InstanceNUMACell': (1, 6),
    'InstancePCIRequests': (1, 1),
    'InstancePCIRequest': (1, 4),
    'InstanceGroup': (1, 11),
    'SchedulerLimits': (1, 0),
}
# Every object healreq writes, and so versions.
OBJECT_NAMES = ('RequestSpec', 'ImageMetaProps') + tuple(_SAME_EVERYWHERE)


@dataclasses.dataclass(frozen=True)
class Release:
    """What one Nova release does, where releases differ."""

    series: str
    codename: str
    nova: int
    # SERVICE_VERSION of nova/objects/service.py.
    service_version: int
    # Newest RequestSpec and ImageMetaProps versions it loads.
    spec_version: tuple
    props_version: tuple
    # Head revision of its API database migrations.
    api_schema_head: str
    # Unit prefixes oslo.utils' string_to_bytes knows (oslo.utils < 6.2:
    # up to T).
    page_size_prefixes: str
    version_predicates: str
    numa_checks_memory_encryption: bool
    # Every rule by which one of its point releases loads legacy cells.
    legacy_cell_rules: tuple
    # Where healreq installs into it (the documentation's table of
    # supported releases and tools/check_constraints.py read these; keep
    # them literals): the name of its upper-constraints file,
    # tools/constraints/upper-constraints-<constraints>.txt, and the oldest
    # and newest Python its pins install on among those healreq supports.
    constraints: str
    pythons: tuple
    # Its newest point release when the table was last reviewed.
    nova_point: str
    # OLDEST_SUPPORTED_SERVICE_VERSION of its nova/objects/service.py,
    # resolved through SERVICE_VERSION_ALIASES: the service version of the
    # oldest release it supports upgrading from. No service older than
    # this runs beside it.
    oldest_supported_service: int

    @property
    def label(self):
        """E.g. ``2024.1 Caracal (Nova 29)``."""
        return '%s %s (Nova %d)' % (self.series, self.codename.capitalize(),
                                    self.nova)

    def newest(self, name):
        """``(major, minor)`` of the newest ``name`` version it loads."""
        if name == 'RequestSpec':
            return self.spec_version
        if name == 'ImageMetaProps':
            return self.props_version
        return _SAME_EVERYWHERE[name]

    def newest_versions(self):
        """``{name: (major, minor)}`` of every object healreq writes."""
        return {name: self.newest(name) for name in OBJECT_NAMES}

    def newest_text(self, name):
        """The newest ``name`` version it loads, as written (``1.34``)."""
        return '%d.%d' % self.newest(name)

    def runs_beside(self, service_version):
        """Whether a service of that version can run beside this release."""
        return service_version >= self.oldest_supported_service

    def can_load(self, name, version):
        """Whether it loads ``name`` at ``version`` (a parsed tuple)."""
        newest = self.newest(name)
        return version[0] == newest[0] and version <= newest


# API database heads: Zed and 2023.1 end at b30f573d3377 (which drops
# unused build_requests columns), 2023.2 on at cdeec0c85668.
_OLD_API_HEAD = 'b30f573d3377'
_API_HEAD = 'cdeec0c85668'
_UP_TO_T = 'KMGT'
_UP_TO_Q = 'KMGTPEZYRQ'
_EITHER = (VICTORIA, CURRENT)

# Oldest first. oldest_supported_service resolves the aliases Yoga 61,
# Antelope 66, Caracal 66, Epoxy 68 and Gazpacho 72. The bug 2097360 fix
# reached 28.3.1, 29.4.0 and 30.3.0 but not their .0 releases, and never
# 26 or 27.
RELEASES = (
    Release('2022.2', 'zed', 26, 64, (1, 14), (1, 34), _OLD_API_HEAD,
            _UP_TO_T, DISTUTILS, False, (VICTORIA,),
            constraints='zed', pythons=('3.10', '3.10'), nova_point='26.3.0',
            oldest_supported_service=61),
    Release('2023.1', 'antelope', 27, 66, (1, 14), (1, 34), _OLD_API_HEAD,
            _UP_TO_T, DISTUTILS, False, (VICTORIA,),
            constraints='2023.1', pythons=('3.10', '3.10'),
            nova_point='27.5.1',
            oldest_supported_service=61),
    Release('2023.2', 'bobcat', 28, 66, (1, 14), (1, 34), _API_HEAD,
            _UP_TO_Q, DISTUTILS, False, _EITHER,
            constraints='2023.2', pythons=('3.10', '3.11'),
            nova_point='28.3.1',
            oldest_supported_service=66),
    Release('2024.1', 'caracal', 29, 67, (1, 15), (1, 37), _API_HEAD,
            _UP_TO_Q, DISTUTILS, False, _EITHER,
            constraints='2024.1', pythons=('3.10', '3.11'),
            nova_point='29.4.0',
            oldest_supported_service=66),
    Release('2024.2', 'dalmatian', 30, 67, (1, 15), (1, 38), _API_HEAD,
            _UP_TO_Q, DISTUTILS, False, _EITHER,
            constraints='2024.2', pythons=('3.10', '3.12'),
            nova_point='30.3.0',
            oldest_supported_service=66),
    Release('2025.1', 'epoxy', 31, 68, (1, 15), (1, 39), _API_HEAD,
            _UP_TO_Q, PACKAGING, False, (CURRENT,),
            constraints='2025.1', pythons=('3.10', '3.12'),
            nova_point='31.3.1',
            oldest_supported_service=66),
    Release('2025.2', 'flamingo', 32, 70, (1, 15), (1, 42), _API_HEAD,
            _UP_TO_Q, PACKAGING, False, (CURRENT,),
            constraints='2025.2', pythons=('3.10', '3.12'),
            nova_point='32.2.1',
            oldest_supported_service=68),
    Release('2026.1', 'gazpacho', 33, 72, (1, 15), (1, 42), _API_HEAD,
            _UP_TO_Q, PACKAGING, False, (CURRENT,),
            constraints='2026.1', pythons=('3.10', '3.13'),
            nova_point='33.0.2',
            oldest_supported_service=68),
    # The current development series: its constraints are master's, whose
    # oslo.log 8.3.0 requires Python 3.11.
    Release('2026.2', 'hibiscus', 34, 74, (1, 15), (1, 44), _API_HEAD,
            _UP_TO_Q, PACKAGING, True, (CURRENT,),
            constraints='master', pythons=('3.11', '3.13'),
            nova_point='34.0.0',
            oldest_supported_service=72),
)

OLDEST = RELEASES[0]
LATEST = RELEASES[-1]


def names():
    """Every accepted spelling, series first: ``2022.2``, ``zed``..."""
    return ([r.series for r in RELEASES] + [r.codename for r in RELEASES]
            + [str(r.nova) for r in RELEASES])


def by_name(text):
    """The Release named by its series, codename or Nova major version.

    Raises ValueError naming the accepted names.
    """
    wanted = text.strip().lower()
    for release in RELEASES:
        if wanted in (release.series, release.codename, str(release.nova)):
            return release
    raise ValueError('unknown Nova release %r; supported: %s'
                     % (text, ', '.join(r.series for r in RELEASES)))


# What request-specs tells an operator when nothing may be written, and
# what apply tells (it takes the release its plan was written under).
WRITE_REMEDY = ('--dry-run still reports, and --target-release names the '
                'release if it is known')
PLAN_REMEDY = ('--dry-run still reports, and a plan written under a named '
               'release is applied under it')


@dataclasses.dataclass(frozen=True)
class Detection:
    """The release a deployment runs, and why healreq believes it.

    ``release`` is None when nothing tells; ``supported`` is False for a
    deployment older or newer than every supported release (its rules are
    then only approximated by the nearest one, and nothing is written).
    ``refusal`` says why nothing may be written although the release is
    supported (the evidence disagrees, or an upgrade is in progress);
    ``notes`` are what else the report should say about the evidence,
    ``down_services`` the services judged down, and ``stale_services``
    those too old to run beside the release (see heal.evidence).
    """
    release: Release
    source: str
    evidence: str
    supported: bool = True
    refusal: str = None
    notes: tuple = ()
    down_services: tuple = ()
    stale_services: tuple = ()

    @property
    def named(self):
        """Whether the operator named the release (no detection)."""
        return self.source == 'option'

    def check_writable(self, remedy=None):
        """Raise InvalidInput unless healreq may write to this release.

        ``remedy`` is what the line tells the operator to do instead
        (default: request-specs' WRITE_REMEDY).
        """
        if self.supported and self.refusal is None:
            return
        if self.refusal is not None:
            problem = self.refusal
        elif self.release is None:
            problem = 'cannot tell which Nova release runs (%s)' % (
                self.evidence)
        else:
            problem = 'the deployment runs no supported Nova release (%s)' % (
                self.evidence)
        raise exception.InvalidInput('%s: refusing to write; %s'
                                     % (problem, remedy or WRITE_REMEDY))

    def check_planned(self, planned):
        """Raise InvalidInput unless a plan derived under ``planned`` applies.

        ``planned`` is the Release a plan was written under (None if it
        could not be established then); this Detection is the release
        apply derives under now. A plan applied under another release
        would be judged by other rules.
        """
        if planned is not None and planned == self.release:
            return
        was = ('%s, detected' % planned.label if planned
               else 'no Nova release that could be established')
        if self.release is None:
            now = 'cannot tell which Nova release it runs (%s)' % (
                self.evidence)
        else:
            how = (self.evidence if self.named
                   else 'detected from %s' % self.evidence)
            now = 'runs %s, %s' % (self.release.label, how)
        raise exception.InvalidInput(
            'the plan was written under %s, but the deployment now %s: '
            'refusing to apply it; write a new plan' % (was, now))
