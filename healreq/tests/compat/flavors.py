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

"""Flavors that more than one spec test builds instances of.

``PCPU`` asks for dedicated CPUs through a resource, ``GPU`` for a PCI
device through its alias; ``T4_REQUEST`` is the PCI request Nova stores
for that alias in instance_extra.
"""

from healreq.testing import deployment as dep

PCPU = dep.flavor(13, 'p1.pcpu', vcpus=2, memory_mb=2048, root_gb=20,
                  extra_specs={'resources:PCPU': '2'})
GPU = dep.flavor(14, 'x1.gpu', vcpus=8, memory_mb=16384, root_gb=80,
                 extra_specs={'pci_passthrough:alias': 't4:1'})
T4_REQUEST = [{'count': 1, 'spec': [{'vendor_id': '10de',
                                     'product_id': '1eb8',
                                     'dev_type': 'type-PCI'}],
               'alias_name': 't4', 'is_new': False,
               'numa_policy': 'preferred',
               'request_id': 'e2394b25-5c6e-4bcb-9a57-8d9e1f2a3b4c',
               'requester_id': None}]
