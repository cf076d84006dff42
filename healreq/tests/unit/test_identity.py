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

"""The operator recorded in the audit store."""

import os
import pwd

import testtools

from healreq.audit import identity
from healreq.tests.functional import other_user


class OperatorTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.uid = os.getuid()
        self.name = pwd.getpwuid(self.uid).pw_name

    def test_the_real_user(self):
        recorded = '%s (uid %d)' % (self.name, self.uid)
        self.assertEqual(recorded, identity.operator(self.uid, {}))
        self.assertEqual(recorded, identity.operator(
            self.uid, {'LOGNAME': self.name, 'USER': self.name,
                       'SUDO_USER': self.name}))

    def test_root(self):
        self.assertEqual('root (uid 0)',
                         identity.operator(0, {'USER': 'root'}))

    def test_the_environment_is_only_an_annotation(self):
        self.assertEqual('root (uid 0, LOGNAME=alice)', identity.operator(
            0, {'LOGNAME': 'alice', 'USER': 'bob'}))
        self.assertEqual('root (uid 0, USER=bob)', identity.operator(
            0, {'LOGNAME': '', 'USER': 'bob'}))
        self.assertEqual('root (uid 0, USERNAME=carol)', identity.operator(
            0, {'USERNAME': 'carol'}))

    def test_sudo_user(self):
        self.assertEqual('root (uid 0, SUDO_USER=alice)', identity.operator(
            0, {'SUDO_USER': 'alice', 'LOGNAME': 'root', 'USER': 'root'}))
        # sudo -E keeps the caller's LOGNAME: said once.
        self.assertEqual('root (uid 0, SUDO_USER=alice)', identity.operator(
            0, {'SUDO_USER': 'alice', 'LOGNAME': 'alice'}))
        self.assertEqual('root (uid 0, SUDO_USER=alice, LOGNAME=bob)',
                         identity.operator(0, {'SUDO_USER': 'alice',
                                               'LOGNAME': 'bob'}))

    def test_control_characters_are_stripped(self):
        forged = 'alice\n0000  2026-01-01 00:00:00  heal  exit 0  eve@h\r\x1b['
        recorded = identity.operator(0, {'LOGNAME': forged,
                                         'SUDO_USER': 'mal\tlory\x00'})
        self.assertTrue(recorded.isprintable(), recorded)
        self.assertEqual(1, len(recorded.splitlines()))
        self.assertTrue(recorded.startswith(
            'root (uid 0, SUDO_USER=mallory, LOGNAME=alice0000'), recorded)

    def test_unprintable_only_claims_are_dropped(self):
        self.assertEqual('root (uid 0)', identity.operator(
            0, {'LOGNAME': '\n\t', 'SUDO_USER': '\x1b'}))

    def test_long_claims_fit_the_column(self):
        recorded = identity.operator(
            0, {'LOGNAME': 'a' * 10000, 'SUDO_USER': 'b' * 10000})
        self.assertLessEqual(len(recorded), identity.MAX_LENGTH)
        self.assertEqual('root (uid 0, SUDO_USER=%s, LOGNAME=%s)' % (
            'b' * identity.MAX_CLAIM, 'a' * identity.MAX_CLAIM), recorded)

    def test_uid_without_passwd_entry(self):
        uid = other_user.uid_without_passwd_entry()
        self.assertEqual('uid=%d' % uid, identity.operator(uid, {}))
        self.assertEqual('uid=%d (USER=alice)' % uid,
                         identity.operator(uid, {'USER': 'alice'}))

    def test_defaults_are_this_process(self):
        self.assertEqual(identity.operator(os.getuid(), dict(os.environ)),
                         identity.operator())
