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


"""The policies: what a heal does with a drift the user may have wanted.

Each policy is a setting (``az_policy``, ``hint_policy``,
``flavor_policy``, the options ``--az-policy`` and so on) with the values
it takes. Every one defaults to reporting the drift without rewriting it.
The rules compare with these values, the command offers them, and plans
record them.
"""

# Report the drift (it counts as drift, is listed in reported_only), but
# leave the field as it is.
REPORT = 'report'

# What --az-policy does with a pin that no longer matches the instance.
AZ_REPORT = REPORT
AZ_REPIN = 'repin'
AZ_UNPIN = 'unpin'
AZ_POLICIES = (AZ_REPORT, AZ_REPIN, AZ_UNPIN)

# What --hint-policy does with a same_host hint naming instances that no
# longer exist: the user asked for it, so it is only reported by default.
HINT_REPORT = REPORT
HINT_PRUNE = 'prune'
HINT_POLICIES = (HINT_REPORT, HINT_PRUNE)

# What --flavor-policy does with a spec flavor an operator rewrote from
# the flavor's current definition (flavor-propagated).
FLAVOR_REPORT = REPORT
FLAVOR_INSTANCE = 'instance'
FLAVOR_POLICIES = (FLAVOR_REPORT, FLAVOR_INSTANCE)

# The default of every policy.
DEFAULT = REPORT

# The settings that change what a heal derives, each with the values it
# takes, in the order a plan records them (apply derives under them
# again).
CHOICES = {'az_policy': AZ_POLICIES,
           'hint_policy': HINT_POLICIES,
           'flavor_policy': FLAVOR_POLICIES}
