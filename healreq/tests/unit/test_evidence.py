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

"""Judging the release from services and specs, and the write guards."""

import copy
import datetime
import json
import random

import testtools

from healreq import exception
from healreq.heal import decisions
from healreq.heal import evidence
from healreq.heal import findings
from healreq.objects import versions
from healreq import releases
from healreq.testing import deployment as dep

NOW = datetime.datetime(2026, 12, 1, 12, 0, 0)
UP = NOW - datetime.timedelta(seconds=10)
DOWN = NOW - datetime.timedelta(days=400)
INSTANCE_UUID = dep.INSTANCE_UUID
CELL = dep.CELL_MAPPING
M1_SMALL = dep.flavor(2, 'm1.small', vcpus=1, memory_mb=2048, root_gb=20)
M1_LARGE = dep.flavor(4, 'm1.large', vcpus=4, memory_mb=8192, root_gb=80)


def _service(binary, version, last_seen=UP, host=None, last_written=None):
    return evidence.Service('cell1', host or '%s-%d' % (binary, version),
                            binary, version, last_seen, last_written)


def _api(version, host=None, last_written=DOWN):
    """A compute API row as Nova 34's WSGI API writes it: no heartbeat."""
    return _service('nova-osapi_compute', version, None,
                    host=host or 'api-%d' % version,
                    last_written=last_written)


def _profile(*documents):
    profile = versions.VersionProfile()
    for document in documents:
        profile.observe(document)
    return profile


def _spec(props_version='1.44', version='1.15'):
    return dep.request_spec(INSTANCE_UUID, M1_SMALL, version=version,
                            spec_image=dep.image(props_version=props_version))


class ServiceRowsTest(testtools.TestCase):

    def test_forced_down_and_unversioned_rows_are_left_out(self):
        rows = [dict(host='a', binary='nova-conductor', version=74,
                     forced_down=False, last_seen_up=UP, created_at=DOWN,
                     updated_at=UP),
                dict(host='b', binary='nova-conductor', version=64,
                     forced_down=True, last_seen_up=UP, created_at=DOWN,
                     updated_at=UP),
                dict(host='c', binary='nova-conductor', version=None,
                     forced_down=False, last_seen_up=UP, created_at=DOWN,
                     updated_at=UP),
                dict(host='d', binary='nova-compute', version=70,
                     forced_down=None, last_seen_up=None, created_at=DOWN,
                     updated_at=None)]
        self.assertEqual(
            [('a', UP, UP), ('d', DOWN, DOWN)],
            [(s.host, s.last_seen, s.last_written)
             for s in evidence.services_from_rows('cell1', rows)])

    def test_up_within_the_down_time_either_way(self):
        for seen, up in ((NOW - datetime.timedelta(seconds=60), True),
                         (NOW - datetime.timedelta(seconds=61), False),
                         (NOW + datetime.timedelta(seconds=60), True),
                         (NOW + datetime.timedelta(seconds=61), False),
                         (None, False)):
            self.assertEqual(up, evidence.is_up(
                _service('nova-conductor', 74, seen), NOW, 60), seen)


def _service_row(binary, version, host, forced_down=False):
    return dict(host=host, binary=binary, version=version,
                forced_down=forced_down, last_seen_up=UP, created_at=DOWN,
                updated_at=UP)


class EstablishTest(testtools.TestCase):
    """The records as read, judged into a release and object versions."""

    def establish(self, records, target_release=None):
        return evidence.establish(records, NOW, 60, target_release)

    def records(self, version=74, heads=None, specs=None):
        return evidence.Records(
            specs=(json.dumps(_spec('1.37')),) if specs is None else specs,
            services=(('cell1', (
                _service_row('nova-conductor', version, 'ctl-1'),
                _service_row('nova-scheduler', 64, 'ctl-2',
                             forced_down=True))),),
            schema_heads=heads)

    def test_the_services_of_every_cell_decide(self):
        detection, profile = self.establish(self.records(67))
        self.assertEqual(('2024.1', 'detected', 'service version 67'),
                         (detection.release.series, detection.source,
                          detection.evidence))
        self.assertEqual((detection.release, False),
                         (profile.release, profile.named))
        self.assertEqual((1, 37), profile.highest_seen('ImageMetaProps'))

    def test_one_schema_head_tells_only(self):
        head = releases.by_name('2023.2').api_schema_head
        self.assertEqual('2023.2', self.establish(self.records(
            66, heads=(head,)))[0].release.series)
        for heads in (None, (), (head, 'other')):
            self.assertEqual('2023.1', self.establish(self.records(
                66, heads=heads))[0].release.series, heads)

    def test_a_spec_that_is_no_document_is_passed_over(self):
        _detection, profile = self.establish(self.records(
            specs=('{', json.dumps(_spec('1.39')))))
        self.assertEqual((1, 39), profile.highest_seen('ImageMetaProps'))

    def test_a_named_release_overrides_the_records(self):
        zed = releases.by_name('zed')
        detection, profile = self.establish(self.records(), zed)
        self.assertEqual((zed, 'option', True), (
            detection.release, detection.source, detection.named))
        self.assertEqual((zed, True), (profile.release, profile.named))
        self.assertEqual((1, 37), profile.highest_seen('ImageMetaProps'))

    def test_without_a_release_the_newest_rules_apply(self):
        detection, profile = self.establish(evidence.Records())
        self.assertEqual((None, False), (detection.release,
                                         detection.supported))
        self.assertEqual(releases.LATEST, profile.release)


class JudgeTest(testtools.TestCase):

    def judge(self, services, profile=None, head=None):
        return evidence.judge(services, NOW, 60, head,
                              profile or _profile(_spec()))

    def test_down_controllers_are_outranked(self):
        detection = self.judge([
            _service('nova-conductor', 74), _service('nova-compute', 74),
            _service('nova-conductor', 64, DOWN, host='old-ctl')])
        self.assertEqual(('2026.2', None), (detection.release.series,
                                            detection.refusal))
        self.assertEqual(['old-ctl'],
                         [s.host for s in detection.down_services])
        self.assertEqual(1, len(detection.notes))
        self.assertIn('nova-conductor on old-ctl (version 64, last report '
                      '2025-10-27T12:00:00Z)', detection.notes[0])

    def test_up_computes_do_not_decide(self):
        detection = self.judge([_service('nova-conductor', 74),
                                _service('nova-compute', 64)])
        self.assertEqual('2026.2', detection.release.series)

    def test_fallback_when_no_controller_is_up(self):
        detection = self.judge(
            [_service('nova-conductor', 72, DOWN),
             _service('nova-compute', 74)],
            profile=_profile(_spec(props_version='1.42')))
        self.assertEqual(('2026.1', None), (detection.release.series,
                                            detection.refusal))
        self.assertIn('no controller service has reported within 60 s',
                      detection.notes[0])

    def test_fallback_counts_every_registered_controller(self):
        detection = self.judge(
            [_service('nova-conductor', 74, DOWN),
             _service('nova-compute', 66, DOWN, host='cmp-old')],
            profile=_profile(_spec(props_version='1.20', version='1.11')))
        self.assertEqual(('2026.2', None), (detection.release.series,
                                            detection.refusal))
        self.assertIn('judged from every nova-conductor and nova-scheduler '
                      'row that is not forced down', detection.notes[0])
        self.assertEqual(
            '2 service(s) down for more than 60 s: nova-compute on cmp-old '
            '(version 66, last report 2025-10-27T12:00:00Z), '
            'nova-conductor on nova-conductor-74 (version 74, last report '
            '2025-10-27T12:00:00Z)', detection.notes[1])

    def test_fallback_controllers_at_different_versions(self):
        detection = self.judge([_service('nova-conductor', 74, DOWN),
                                _service('nova-scheduler', 72, DOWN)])
        self.assertTrue(detection.refusal.startswith(
            'an upgrade is in progress: the controllers run service '
            'versions 72, 74 (nova-scheduler on '), detection.refusal)

    def test_no_controller_row_establishes_no_release(self):
        for services in ([_service('nova-compute', 74)],
                         [_service('nova-osapi_compute', 74, None)],
                         [_service('nova-compute', 74, DOWN),
                          _service('nova-osapi_compute', 74, None)]):
            detection = self.judge(services)
            self.assertIsNone(detection.release)
            self.assertEqual('no nova-conductor or nova-scheduler service '
                             'registered in any cell', detection.evidence)
            error = self.assertRaises(exception.InvalidInput,
                                      detection.check_writable)
            self.assertIn('cannot tell which Nova release runs',
                          str(error))

    def test_nothing_registered(self):
        detection = self.judge([])
        self.assertIsNone(detection.release)
        self.assertEqual((), detection.notes)
        self.assertRaises(exception.InvalidInput, detection.check_writable)

    def test_specs_newer_than_the_services_say(self):
        detection = self.judge([_service('nova-conductor', 64, DOWN)])
        self.assertEqual('2022.2', detection.release.series)
        self.assertIn('the evidence disagrees: the services say 2022.2 Zed '
                      '(Nova 26) (nova-conductor on nova-conductor-64 '
                      '(version 64, last report 2025-10-27T12:00:00Z)) but '
                      'the newest specs hold RequestSpec 1.15, '
                      'ImageMetaProps 1.44, which it cannot load',
                      detection.refusal)
        error = self.assertRaises(exception.InvalidInput,
                                  detection.check_writable)
        self.assertIn('refusing to write', str(error))

    def test_specs_older_than_the_services_agree(self):
        detection = self.judge(
            [_service('nova-conductor', 74)],
            profile=_profile(_spec(props_version='1.20', version='1.11')))
        self.assertIsNone(detection.refusal)
        detection.check_writable()

    def test_upgrade_in_progress(self):
        detection = self.judge([_service('nova-conductor', 74),
                                _service('nova-scheduler', 72),
                                _service('nova-osapi_compute', 74)])
        self.assertEqual('2026.1', detection.release.series)
        self.assertTrue(detection.refusal.startswith(
            'an upgrade is in progress: the controllers that are up run '
            'service versions 72, 74 (nova-scheduler on '))

    def test_many_services_are_counted_not_listed(self):
        detection = self.judge(
            [_service('nova-conductor', 74)]
            + [_service('nova-compute', 64, DOWN, host='c%d' % n)
               for n in range(8)])
        self.assertTrue(detection.notes[0].endswith(' and 3 more'))
        self.assertEqual(8, len(detection.down_services))

    def test_unsupported_release_is_not_also_a_disagreement(self):
        detection = self.judge([_service('nova-conductor', 61)])
        self.assertFalse(detection.supported)
        self.assertIsNone(detection.refusal)


class ComputeApiTest(testtools.TestCase):
    """The compute API's rows: their versions guard, never their age."""

    def judge(self, *apis, controllers_seen=UP):
        return evidence.judge(
            [_service('nova-conductor', 74, controllers_seen),
             _service('nova-scheduler', 74, controllers_seen)] + list(apis),
            NOW, 60, None, _profile(_spec()))

    def test_never_judged_down(self):
        detection = self.judge(_api(74))
        self.assertEqual(('2026.2', None, (), (), ()),
                         (detection.release.series, detection.refusal,
                          detection.down_services, detection.stale_services,
                          detection.notes))
        detection.check_writable()

    def test_older_but_possibly_live_refuses_writing(self):
        for controllers_seen in (UP, DOWN):
            detection = self.judge(_api(74), _api(72, host='api-old'),
                                   controllers_seen=controllers_seen)
            self.assertEqual('2026.2', detection.release.series)
            self.assertEqual(
                'an upgrade is in progress: 1 compute API service(s) older '
                'than the controllers (service version 74, 2026.2 Hibiscus '
                '(Nova 34)) may not load what their release writes: '
                'nova-osapi_compute on api-old (version 72, last written '
                '2025-10-27T12:00:00Z); finish the upgrade, delete the '
                'stale service record (openstack compute service delete), '
                'or name the release (--target-release)', detection.refusal)
            self.assertRaises(exception.InvalidInput,
                              detection.check_writable)

    def test_older_than_any_release_beside_is_stale(self):
        detection = self.judge(_api(74), _api(57, host='api-xena'))
        self.assertIsNone(detection.refusal)
        self.assertEqual(['api-xena'],
                         [s.host for s in detection.stale_services])
        self.assertEqual(
            ('1 compute API service(s) older than any release that runs '
             'beside 2026.2 Hibiscus (Nova 34) (service version 72 on), '
             'stale and ignored: nova-osapi_compute on api-xena (version '
             '57, last written 2025-10-27T12:00:00Z)',), detection.notes)
        detection.check_writable()

    def test_newer_does_not_block(self):
        detection = self.judge(_api(76, host='api-new'))
        self.assertIsNone(detection.refusal)
        self.assertIn('1 compute API service(s) newer than the controllers',
                      detection.notes[0])

    def test_computes_neither_decide_nor_veto(self):
        for seen in (UP, DOWN):
            detection = evidence.judge(
                [_service('nova-conductor', 74, seen),
                 _service('nova-compute', 72, seen),
                 _service('nova-compute', 57, seen, host='cmp-xena')],
                NOW, 60, None, _profile(_spec()))
            self.assertEqual(('2026.2', None), (detection.release.series,
                                                detection.refusal))


class RandomServicesPropertyTest(testtools.TestCase):
    """For every release, random API and compute rows of any age.

    The controllers agree with the specs; whatever the API, compute and
    metadata rows say, the same release is chosen, and writing is
    refused exactly when a live compute API could be older than the
    controllers: a version from the oldest the release runs beside up to
    below its own.
    """

    CASES = 300

    def random_services(self, generator, release):
        seen = generator.choice((UP, DOWN))
        services = [_service(generator.choice(evidence.CONTROLLERS),
                             release.service_version, seen,
                             host='ctl-%d' % number)
                    for number in range(generator.randint(1, 3))]
        if seen is UP:
            # Down controllers of any release are ignored.
            services += [_service('nova-conductor', generator.randint(50, 80),
                                  DOWN, host='ctl-down-%d' % number)
                         for number in range(generator.randint(0, 2))]
        for number in range(generator.randint(0, 6)):
            binary = generator.choice(('nova-osapi_compute', 'nova-compute',
                                       'nova-metadata'))
            services.append(_service(
                binary, generator.randint(50, 80),
                generator.choice((UP, DOWN, None)),
                host='random-%d' % number,
                last_written=generator.choice((UP, DOWN, None))))
        generator.shuffle(services)
        return services

    def test_same_release_refused_exactly_when_an_api_may_be_older(self):
        generator = random.Random(20261201)
        for release in releases.RELEASES:
            profile = _profile(_spec(
                props_version=release.newest_text('ImageMetaProps'),
                version=release.newest_text('RequestSpec')))
            for case in range(self.CASES):
                services = self.random_services(generator, release)
                detection = evidence.judge(services, NOW, 60,
                                           release.api_schema_head, profile)
                apis = [s for s in services
                        if s.binary == 'nova-osapi_compute']
                older = [s for s in apis if release.oldest_supported_service
                         <= s.version < release.service_version]
                stale = [s for s in apis
                         if s.version < release.oldest_supported_service]
                context = (release.series, case, services)
                self.assertEqual(release, detection.release, context)
                self.assertEqual(bool(older), detection.refusal is not None,
                                 (context, detection.refusal))
                self.assertEqual(sorted(s.host for s in stale),
                                 sorted(s.host for s in
                                        detection.stale_services), context)
                self.assertFalse(
                    [s for s in detection.down_services
                     if s.binary in evidence.WSGI_SERVICES], context)


class WriteGuardTest(testtools.TestCase):
    """Per spec: never lower a stored version or drop a shared property."""

    def record(self, spec, properties):
        system_metadata = dep.image_system_metadata(
            dict(dep.IMAGE_PROPERTIES, **properties), min_disk=80)
        return dep.instance_record(
            M1_LARGE, spec=json.dumps(spec),
            extra_columns={'pci_requests': '[]'},
            system_metadata=system_metadata)

    def evaluate(self, spec_properties, properties, release, named=False):
        spec = dep.request_spec(
            INSTANCE_UUID, copy.deepcopy(M1_SMALL), spec_image=dep.image(
                properties=dict(dep.IMAGE_PROPERTIES, **spec_properties)))
        profile = versions.VersionProfile().for_release(release, named)
        return decisions.evaluate(self.record(spec, properties), CELL, NOW,
                                  decisions.Settings(), profile)

    def test_dropping_a_property_both_hold_is_refused(self):
        zed = releases.by_name('zed')
        # hw_sound_model (ImageMetaProps 1.40) in the spec and in system
        # metadata; the image differs in another property.
        spec = dict(hw_sound_model='ich9', hw_disk_bus='ide')
        system_metadata = dict(hw_sound_model='ich9', hw_disk_bus='scsi')
        finding = self.evaluate(spec, system_metadata, zed).finding
        self.assertEqual(
            (findings.Status.ERROR, 'image-property-would-be-lost'),
            (finding.status, finding.reason))
        self.assertIn('hw_sound_model', finding.detail)
        named = self.evaluate(spec, system_metadata, zed, named=True)
        self.assertEqual(findings.Status.DRIFTED, named.finding.status)
        self.assertNotIn('hw_sound_model', named.new_spec)
        latest = self.evaluate(spec, system_metadata, releases.LATEST)
        self.assertIn('hw_sound_model', latest.new_spec)

    def test_lowering_a_stored_version_is_refused(self):
        zed = releases.by_name('zed')
        # The image drifted; the spec holds ImageMetaProps 1.44, which
        # Zed does not load, so the heal would write 1.34.
        spec, system_metadata = dict(hw_disk_bus='ide'), dict(
            hw_disk_bus='scsi')
        finding = self.evaluate(spec, system_metadata, zed).finding
        self.assertEqual(
            (findings.Status.ERROR, 'object-version-downgrade'),
            (finding.status, finding.reason))
        self.assertIn('ImageMetaProps 1.44 to 1.34', finding.detail)
        named = self.evaluate(spec, system_metadata, zed, named=True)
        self.assertEqual(findings.Status.DRIFTED, named.finding.status)
        self.assertEqual(findings.Status.DRIFTED, self.evaluate(
            spec, system_metadata, releases.LATEST).finding.status)

    def test_lowered_compares_the_highest_version_of_each_object(self):
        before = dep.request_spec(INSTANCE_UUID, M1_SMALL)
        after = dep.request_spec(INSTANCE_UUID, M1_SMALL, version='1.14',
                                 spec_image=dep.image(props_version='1.34'))
        self.assertEqual([('ImageMetaProps', '1.44', '1.34'),
                          ('RequestSpec', '1.15', '1.14')],
                         versions.lowered(before, after))
        self.assertEqual([], versions.lowered(after, before))
        after['nova_object.data']['image'] = None
        self.assertEqual([('RequestSpec', '1.15', '1.14')],
                         versions.lowered(before, after))
