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


"""Which Nova release a deployment runs, judged from its own records.

Evidence outranks guesses. Services that report in now outrank the rows
that decommissioned hosts leave behind forever; and what the deployment's
Nova demonstrably wrote, the object versions of its newest specs, must
agree with what its services say. When it does not, or when the
controllers that are up run different versions (an upgrade in progress),
the release is still reported, but nothing may be written.

Pure: the caller reads the service rows and the specs.
"""

import dataclasses

from healreq import releases

# The services that load RequestSpecs: the controllers. Their release
# decides the rules and the object versions.
SPEC_READERS = ('nova-osapi_compute', 'nova-conductor', 'nova-scheduler')

# Services named one by one in a message; the rest are counted.
_NAMED_IN_MESSAGES = 5


@dataclasses.dataclass(frozen=True)
class Service:
    """One live (not deleted, not forced down) row of a cell's services."""
    cell: str
    host: str
    binary: str
    version: int
    # The last heartbeat as Nova's DB servicegroup driver reads it:
    # last_seen_up, else created_at.
    last_seen: object

    def describe(self):
        """E.g. ``nova-conductor on ctl-1 (version 64, last report ...)``."""
        seen = ('never' if self.last_seen is None
                else '%sZ' % self.last_seen.isoformat(timespec='seconds'))
        return '%s on %s (version %d, last report %s)' % (
            self.binary, self.host, self.version, seen)

    def as_dict(self):
        return {'cell': self.cell, 'host': self.host, 'binary': self.binary,
                'version': self.version,
                'last_report': None if self.last_seen is None
                else '%sZ' % self.last_seen.isoformat(timespec='seconds')}


def services_from_rows(cell, rows):
    """The Services of a cell's ``services`` rows (cell_queries).

    Rows that are forced down or have no version are left out, as Nova's
    own minimum-version query leaves them out.
    """
    return [Service(cell=cell, host=row['host'], binary=row['binary'],
                    version=row['version'],
                    last_seen=row['last_seen_up'] or row['created_at'])
            for row in rows
            if not row['forced_down'] and row['version'] is not None]


def is_up(service, now, down_time):
    """Whether ``service`` reported within ``down_time`` seconds of now."""
    if service.last_seen is None:
        return False
    return abs((now - service.last_seen).total_seconds()) <= down_time


def judge(services, now, down_time, api_schema_head, profile):
    """The releases.Detection the deployment's records support.

    ``services`` are every cell's Services, ``now`` naive UTC,
    ``down_time`` ``[DEFAULT]/service_down_time``, ``profile`` the
    VersionProfile of the newest specs. Controllers that are up decide;
    when none is, every registered service does, and the report says so.
    """
    up = [s for s in services if is_up(s, now, down_time)]
    down = [s for s in services if not is_up(s, now, down_time)]
    readers_up = [s for s in up if s.binary in SPEC_READERS]
    notes = []
    if readers_up:
        basis = readers_up
        if down:
            notes.append('%d service(s) down for more than %d s, ignored: '
                         '%s' % (len(down), down_time, _named(down)))
    else:
        # Computes included: any row that is neither deleted nor forced
        # down may be all the evidence an offline copy holds.
        basis = services
        if services:
            notes.append('no controller service has reported within %d s '
                         '(an offline copy of the databases, or a '
                         'maintenance window?): judged from every '
                         'registered service that is not forced down, '
                         'computes included' % down_time)
        if down:
            notes.append('%d service(s) down for more than %d s: %s'
                         % (len(down), down_time, _named(down)))
    detection = releases.detect(
        min((s.version for s in basis), default=None), api_schema_head,
        profile.highest_seen('ImageMetaProps'))
    return dataclasses.replace(
        detection, notes=tuple(notes), down_services=tuple(down),
        refusal=_refusal(detection, readers_up, basis, profile))


def _refusal(detection, readers_up, basis, profile):
    """Why nothing may be written for this evidence, or None."""
    versions = sorted({s.version for s in readers_up})
    if len(versions) > 1:
        return ('an upgrade is in progress: the controllers that are up run '
                'service versions %s (%s)'
                % (', '.join(map(str, versions)), _named(readers_up)))
    release = detection.release
    if release is None or not detection.supported:
        return None
    newer = ['%s %d.%d' % (name, *seen)
             for name, seen in _seen_versions(profile)
             if not release.can_load(name, seen)]
    if not newer:
        return None
    return ('the evidence disagrees: the services say %s (%s) but the '
            'newest specs hold %s, which it cannot load'
            % (release.label, _named(basis), ', '.join(newer)))


def _seen_versions(profile):
    for name in releases.OBJECT_NAMES:
        seen = profile.highest_seen(name)
        if seen is not None:
            yield name, seen


def _named(services):
    """The oldest few services described, and how many more there are."""
    ordered = sorted(services, key=lambda s: (s.version, s.binary, s.host))
    text = ', '.join(s.describe() for s in ordered[:_NAMED_IN_MESSAGES])
    if len(ordered) > _NAMED_IN_MESSAGES:
        text += ' and %d more' % (len(ordered) - _NAMED_IN_MESSAGES)
    return text
