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

"""The policies are stated once, in healreq.policies, and used so."""

import argparse

import testtools

from healreq.cmd import request_specs
from healreq.heal import decisions
from healreq import policies


def _request_specs_actions():
    parser = argparse.ArgumentParser()
    request_specs.add_parser(parser.add_subparsers())
    command = parser._subparsers._group_actions[0].choices['request-specs']
    return {action.dest: action for action in command._actions}


class PoliciesTest(testtools.TestCase):

    def test_every_default_is_a_choice(self):
        for name, choices in policies.CHOICES.items():
            self.assertIn(policies.DEFAULT, choices, name)

    def test_the_command_offers_the_choices_and_the_default(self):
        actions = _request_specs_actions()
        for name, choices in policies.CHOICES.items():
            self.assertEqual((choices, policies.DEFAULT),
                             (actions[name].choices, actions[name].default),
                             name)

    def test_the_settings_default_to_the_default(self):
        settings = decisions.Settings()
        for name in policies.CHOICES:
            self.assertEqual(policies.DEFAULT, getattr(settings, name), name)
