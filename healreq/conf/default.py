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


"""The nova.conf ``[DEFAULT]`` options healreq reads, as Nova reads them."""

from oslo_config import cfg

default_opts = [
    cfg.StrOpt('default_availability_zone',
               default='nova',
               help='As in nova.conf: the availability zone of compute '
                    'hosts in no aggregate that names one. healreq uses it '
                    'to tell the zone of an instance\'s host and whether a '
                    'pinned zone still exists.'),
    cfg.IntOpt('service_down_time',
               default=60,
               min=1,
               max=86400,
               help='As in nova.conf: a Nova service that has not reported '
                    'for this many seconds is down. healreq judges which '
                    'Nova release runs from the nova-conductor and '
                    'nova-scheduler services that are up, and names the '
                    'services it ignored as down.'),
]


def register_opts(conf):
    conf.register_opts(default_opts)


def list_opts():
    return [('DEFAULT', default_opts)]
