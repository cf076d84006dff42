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

Evidence outranks guesses. The controllers that report in now outrank
the rows that decommissioned hosts leave behind forever; and what the
deployment's Nova demonstrably wrote, the object versions of its newest
specs, must agree with what its controllers say. The compute API loads
the specs too, but under WSGI it writes its row when it starts and never
reports again: its version guards the write, never its heartbeat.
Computes do not read the specs and have no say. When the evidence
disagrees, when the deciding controllers run different versions, or when
a compute API may be older than them (an upgrade in progress), the
release is still reported, but nothing may be written.

Pure: run.records reads the rows (``read_release_records``) and
``establish`` judges them, the one judgement of the release.
"""

import dataclasses

from healreq.objects import primitive
from healreq.objects import versions
from healreq import releases

# The services whose release decides the rules and the object versions:
# they load RequestSpecs and report a heartbeat.
CONTROLLERS = ('nova-conductor', 'nova-scheduler')
# The compute API loads RequestSpecs too; it must not be older than the
# controllers whose rules write them.
COMPUTE_API = 'nova-osapi_compute'
# Services that run under WSGI: they write their row when they start and
# send no heartbeat, so they are never judged up or down.
WSGI_SERVICES = (COMPUTE_API, 'nova-metadata')

# Services named one by one in a message; the rest are counted.
_NAMED_IN_MESSAGES = 5

_REMEDIES = ('finish the upgrade, delete the stale service record '
             '(openstack compute service delete), or name the release '
             '(--target-release)')


def _timestamp(value):
    return None if value is None else '%sZ' % value.isoformat(
        timespec='seconds')


@dataclasses.dataclass(frozen=True)
class Records:
    """What the deployment's databases hold about its release, as read.

    ``specs`` are the texts of its newest request specs; ``services`` a
    ``(cell, rows)`` pair for each cell that could be read (its name, else
    its uuid, and its ``services`` rows, cell_queries.get_services);
    ``schema_heads`` the API database's migration heads (None if they
    could not be read). A run that follows a release the operator named
    reads neither services nor heads.
    """
    specs: tuple = ()
    services: tuple = ()
    schema_heads: tuple = None


def establish(records, now, down_time, target_release=None):
    """``(detection, profile)``: the release a run follows, and why.

    ``records`` are the Records read, ``now`` naive UTC, ``down_time``
    ``[DEFAULT]/service_down_time``. ``target_release`` (a releases.Release
    the operator named) overrides what the records say; else ``judge``
    tells the release from the services, the API schema head and the
    object versions of the newest specs. The profile (an
    objects.versions.VersionProfile) carries the release's rules (the
    newest release's when none is known) and the object versions to
    write.
    """
    profile = observed_versions(records.specs)
    if target_release is not None:
        detection = named(target_release)
    else:
        services = [service for cell, rows in records.services
                    for service in services_from_rows(cell, rows)]
        detection = judge(services, now, down_time,
                          _schema_head(records.schema_heads), profile)
    return detection, profile.for_release(
        detection.release or releases.LATEST, named=detection.named)


def observed_versions(specs):
    """The VersionProfile of the object versions ``specs`` (texts) hold.

    The newest specs were written by the running Nova; a spec that is no
    JSON document is passed over.
    """
    profile = versions.VersionProfile()
    for text in specs:
        try:
            profile.observe(primitive.load_json(text, 'spec'))
        except primitive.PrimitiveError:
            continue
    return profile


def _schema_head(heads):
    """The API database's migration head, or None if it does not say."""
    return heads[0] if heads is not None and len(heads) == 1 else None


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
    # When the row was last written: updated_at, else created_at. A WSGI
    # service writes it when it starts.
    last_written: object = None

    def describe(self):
        """E.g. ``nova-conductor on ctl-1 (version 64, last report ...)``."""
        return '%s on %s (version %d, last report %s)' % (
            self.binary, self.host, self.version,
            _timestamp(self.last_seen) or 'never')

    def describe_written(self):
        """E.g. ``nova-osapi_compute on api-1 (version 72, last ...)``."""
        return '%s on %s (version %d, last written %s)' % (
            self.binary, self.host, self.version,
            _timestamp(self.last_written) or 'never')

    def as_dict(self):
        return {'cell': self.cell, 'host': self.host, 'binary': self.binary,
                'version': self.version,
                'last_report': _timestamp(self.last_seen)}

    def written_dict(self):
        """Like as_dict, with the last write instead of the last report."""
        return {'cell': self.cell, 'host': self.host, 'binary': self.binary,
                'version': self.version,
                'last_written': _timestamp(self.last_written)}


def services_from_rows(cell, rows):
    """The Services of a cell's ``services`` rows (cell_queries).

    Rows that are forced down or have no version are left out, as Nova's
    own minimum-version query leaves them out.
    """
    return [Service(cell=cell, host=row['host'], binary=row['binary'],
                    version=row['version'],
                    last_seen=row['last_seen_up'] or row['created_at'],
                    last_written=row['updated_at'] or row['created_at'])
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
    VersionProfile of the newest specs. The controllers that are up
    decide; when none is, every registered controller does, and the report
    says so; without any, the release is not established. The compute
    API's rows guard the write (see ``_compute_api_refusal``).
    """
    heartbeats = [s for s in services if s.binary not in WSGI_SERVICES]
    down = [s for s in heartbeats if not is_up(s, now, down_time)]
    controllers = [s for s in heartbeats if s.binary in CONTROLLERS]
    controllers_up = [s for s in controllers if is_up(s, now, down_time)]
    basis, notes = _deciding(controllers, controllers_up, down, down_time)
    if not basis:
        return releases.Detection(
            None, 'detected', 'no nova-conductor or nova-scheduler service '
            'registered in any cell', supported=False, notes=tuple(notes),
            down_services=tuple(down))
    detection = detect(
        min(s.version for s in basis), api_schema_head,
        profile.highest_seen('ImageMetaProps'))
    apis = [s for s in services if s.binary == COMPUTE_API]
    stale, older, newer = _sorted_apis(detection, basis, apis)
    notes += _api_notes(detection.release, stale, newer)
    return dataclasses.replace(
        detection, notes=tuple(notes), down_services=tuple(down),
        stale_services=tuple(stale),
        refusal=_refusal(detection, basis, bool(controllers_up), older,
                         profile))


def detect(service_version, api_schema_head, props_version):
    """The releases.Detection matching what the deployment's records say.

    ``service_version`` is the lowest version of the controllers that
    decide (None if none is registered); ``api_schema_head``
    the API database's migration head; ``props_version`` the highest
    ImageMetaProps version of its newest specs. Releases sharing a
    service version are told apart by the schema head (2023.1/2023.2)
    or by ImageMetaProps (2024.1/2024.2); without that evidence the older
    one is taken, whose rules and object versions are the safer.
    """
    if service_version is None:
        return releases.Detection(None, 'detected', 'no live Nova service '
                                  'registered in any cell', supported=False)
    evidence = 'service version %d' % service_version
    latest, oldest = releases.LATEST, releases.OLDEST
    if service_version > latest.service_version:
        return releases.Detection(latest, 'detected', evidence + ', newer '
                                  'than ' + latest.label, supported=False)
    if service_version < oldest.service_version:
        return releases.Detection(oldest, 'detected', evidence + ', older '
                                  'than ' + oldest.label, supported=False)
    reached = [r for r in releases.RELEASES
               if r.service_version <= service_version]
    tied = [r for r in reached
            if r.service_version == reached[-1].service_version]
    chosen = tied[0]
    for candidate in tied[1:]:
        if (candidate.api_schema_head != chosen.api_schema_head
                and api_schema_head == candidate.api_schema_head):
            chosen = candidate
            evidence += ', API schema %s' % api_schema_head
        elif (candidate.props_version > chosen.props_version
              and props_version is not None
              and props_version >= candidate.props_version):
            chosen = candidate
            evidence += ', ImageMetaProps %d.%d in specs' % props_version
    return releases.Detection(chosen, 'detected', evidence)


def named(release):
    """The releases.Detection for a release the operator named."""
    return releases.Detection(release, 'option', 'named by the operator')


def _deciding(controllers, controllers_up, down, down_time):
    """``(basis, notes)``: the controllers that decide, and what to say."""
    if controllers_up:
        notes = []
        if down:
            notes.append('%d service(s) down for more than %d s, ignored: '
                         '%s' % (len(down), down_time, _named(down)))
        return controllers_up, notes
    notes = []
    if controllers:
        notes.append('no controller service has reported within %d s '
                     '(an offline copy of the databases, or a maintenance '
                     'window?): judged from every nova-conductor and '
                     'nova-scheduler row that is not forced down'
                     % down_time)
    if down:
        notes.append('%d service(s) down for more than %d s: %s'
                     % (len(down), down_time, _named(down)))
    return controllers, notes


def _sorted_apis(detection, basis, apis):
    """``(stale, older, newer)`` compute API rows, beside the controllers.

    Stale: too old for any release to run beside the controllers'.
    Older: older than the controllers, but possibly live.
    """
    release = detection.release
    lowest = min(s.version for s in basis)
    stale = [s for s in apis if not release.runs_beside(s.version)]
    older = [s for s in apis
             if release.runs_beside(s.version) and s.version < lowest]
    newer = [s for s in apis if s.version > lowest]
    return stale, older, newer


def _api_notes(release, stale, newer):
    notes = []
    if stale:
        notes.append(
            '%d compute API service(s) older than any release that runs '
            'beside %s (service version %d on), stale and ignored: %s'
            % (len(stale), release.label, release.oldest_supported_service,
               _named(stale, written=True)))
    if newer:
        notes.append(
            '%d compute API service(s) newer than the controllers, which '
            'load what the controllers\' release writes: %s'
            % (len(newer), _named(newer, written=True)))
    return notes


def _refusal(detection, basis, basis_up, older_apis, profile):
    """Why nothing may be written for this evidence, or None."""
    versions = sorted({s.version for s in basis})
    if len(versions) > 1:
        up = 'that are up ' if basis_up else ''
        return ('an upgrade is in progress: the controllers %srun '
                'service versions %s (%s)'
                % (up, ', '.join(map(str, versions)), _named(basis)))
    release = detection.release
    if not detection.supported:
        return None
    if older_apis:
        return _compute_api_refusal(release, versions[0], older_apis)
    newer = ['%s %d.%d' % (name, *seen)
             for name, seen in _seen_versions(profile)
             if not release.can_load(name, seen)]
    if not newer:
        return None
    return ('the evidence disagrees: the services say %s (%s) but the '
            'newest specs hold %s, which it cannot load'
            % (release.label, _named(basis), ', '.join(newer)))


def _compute_api_refusal(release, controllers_version, older):
    """The refusal for compute APIs that may be older than the rules."""
    return ('an upgrade is in progress: %d compute API service(s) older '
            'than the controllers (service version %d, %s) may not load '
            'what their release writes: %s; %s'
            % (len(older), controllers_version, release.label,
               _named(older, written=True), _REMEDIES))


def _seen_versions(profile):
    for name in releases.OBJECT_NAMES:
        seen = profile.highest_seen(name)
        if seen is not None:
            yield name, seen


def _named(services, written=False):
    """The oldest few services described, and how many more there are."""
    ordered = sorted(services, key=lambda s: (s.version, s.binary, s.host))
    text = ', '.join(s.describe_written() if written else s.describe()
                     for s in ordered[:_NAMED_IN_MESSAGES])
    if len(ordered) > _NAMED_IN_MESSAGES:
        text += ' and %d more' % (len(ordered) - _NAMED_IN_MESSAGES)
    return text
