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

"""The constraints of the Nova 34 differential tests are master's."""

import os

import testtools

_DIRECTORY = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                          'tools', 'constraints')
# The pins nova 34.0.0 requires newer versions of than master's file has.
LIFTED = ('keystoneauth1', 'oslo.versionedobjects')


def _pins(name):
    with open(os.path.join(_DIRECTORY, name)) as handle:
        return [line.rstrip('\n') for line in handle
                if line.strip() and not line.startswith('#')]


class NovaCompatConstraintsTest(testtools.TestCase):

    def test_master_less_the_pins_nova_34_outgrew(self):
        master = _pins('upper-constraints-master.txt')
        lifted = [line for line in master
                  if line.split('===')[0] in LIFTED]
        self.assertEqual(len(LIFTED), len(lifted))
        self.assertEqual(
            [line for line in master if line not in lifted],
            _pins('upper-constraints-master-nova-34.0.0.txt'))
