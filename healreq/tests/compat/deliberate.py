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


"""Where healreq deliberately differs from Nova, by name.

doc/source/admin/differences.rst describes each name, and its docs build
lists it under the releases APPLIES names ("Deliberate differences from
Nova, per release"). The differential tests leave out
exactly the cases these predicates match, count them by name in their
report, and test_deliberate_differences checks that each named case still
differs from the installed Nova as stated here.
"""

import re

from healreq import releases

# notation.MAX_CPU_IDS, restated so that a change to it shows here.
MAX_CPU_IDS = 1 << 20

# A flavor with fewer than 0 or more than MAX_CPU_IDS vCPUs: healreq
# refuses it ('ValueError') instead of deriving a topology.
VCPUS_OUT_OF_RANGE = 'vcpus-outside-0-to-1048576'
# A flavor CPU list (hw:numa_cpus.N, hw:cpu_dedicated_mask,
# hw:cpu_realtime_mask) or image hw_cpu_realtime_mask whose ranges name
# more than MAX_CPU_IDS CPUs: healreq refuses it without expanding it
# ('Invalid'); Nova expands it and refuses later for another reason.
NUMA_CPU_LIST_TOO_LONG = 'numa-cpu-list-beyond-1048576-cpus'
# An image hw_numa_cpus.N of that kind: Nova keeps the image, healreq
# refuses it.
IMAGE_CPU_LIST_TOO_LONG = 'image-cpu-list-beyond-1048576-cpus'
# An InstanceNUMACell written below 1.2 (1.1) carries no cpu_pinning_raw
# (pagesize), which Nova's backport leaves in.
CELL_FIELDS_BELOW_VERSION = 'numa-cell-fields-dropped-below-their-version'
# A legacy stored topology that the point releases of one release load
# differently: healreq refuses it (AmbiguousTopology); each point release
# of Nova loads it by its own rule.
AMBIGUOUS_LEGACY_CELLS = 'legacy-numa-cells-point-release-dependent'
# A spec healed in place, whose image is still the instance's, keeps the
# image as Nova's API stored it from Glance at boot: its min_disk and
# Glance's own fields, where from_components given ImageMeta.from_instance
# has system metadata's (flavor-adjusted) min_disk and none of them.
IMAGE_KEPT_IN_PLACE = 'image-from-glance-kept-in-place'
# A spec healed in place keeps pci_requests without the instance uuid, as
# the API builds them at boot; from_components given the instance's own
# requests (InstancePCIRequests.get_by_instance) carries it.
PCI_UUID_KEPT_IN_PLACE = 'pci-requests-instance-uuid-as-booted'

EVERY_RELEASE = tuple(r.series for r in releases.RELEASES)
APPLIES = {
    VCPUS_OUT_OF_RANGE: EVERY_RELEASE,
    NUMA_CPU_LIST_TOO_LONG: EVERY_RELEASE,
    IMAGE_CPU_LIST_TOO_LONG: EVERY_RELEASE,
    CELL_FIELDS_BELOW_VERSION: EVERY_RELEASE,
    AMBIGUOUS_LEGACY_CELLS: tuple(r.series for r in releases.RELEASES
                                  if len(r.legacy_cell_rules) > 1),
    IMAGE_KEPT_IN_PLACE: EVERY_RELEASE,
    PCI_UUID_KEPT_IN_PLACE: EVERY_RELEASE,
}

_FLAVOR_CPU_LISTS = re.compile(
    r'^(hw:numa_cpus\.\d+|hw:cpu_dedicated_mask|hw:cpu_realtime_mask)$')
_IMAGE_CPU_LISTS = re.compile(r'^hw_cpu_realtime_mask$')


def applies(name, release):
    """Whether difference ``name`` applies to ``release``."""
    return release.series in APPLIES[name]


def _ranged_cpus(text):
    """How many CPUs the ranges of a CPU list name, overlaps counted."""
    total = 0
    for item in str(text).split(','):
        low, dash, high = item.strip().lstrip('^').partition('-')
        if not dash:
            continue
        try:
            first, last = int(low), int(high)
        except ValueError:
            continue
        if first <= last:
            total += last - first + 1
    return total


def numa_case(vcpus, specs, raw_image):
    """The difference a numa_get_constraints case falls under, or None."""
    if not 0 <= vcpus <= MAX_CPU_IDS:
        return VCPUS_OUT_OF_RANGE
    for source, pattern in ((specs, _FLAVOR_CPU_LISTS),
                            (raw_image, _IMAGE_CPU_LISTS)):
        for key, value in source.items():
            if pattern.match(key) and _ranged_cpus(value) > MAX_CPU_IDS:
                return NUMA_CPU_LIST_TOO_LONG
    return None


def image_case(sysmeta):
    """The difference a system metadata case falls under, or None."""
    for key, value in sysmeta.items():
        if (re.match(r'^image_hw_numa_cpus\.\d+$', str(key))
                and value is not None
                and _ranged_cpus(value) > MAX_CPU_IDS):
            return IMAGE_CPU_LIST_TOO_LONG
    return None


def describe(excluded):
    """`` (N excluded by name: NAME=N, ...)`` or an empty string."""
    if not excluded:
        return ''
    return ' (%d excluded by name: %s)' % (
        sum(excluded.values()),
        ', '.join('%s=%d' % item for item in sorted(excluded.items())))
