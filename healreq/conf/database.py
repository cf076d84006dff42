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


"""The nova.conf database options healreq reads.

Only ``connection`` is declared in each group; the other options a
nova.conf carries there are ignored, so an operator can point healreq at
their existing nova.conf.
"""

from oslo_config import cfg

api_database_group = cfg.OptGroup(
    'api_database',
    title='API database options',
    help='The Nova API database (nova_api), as in nova.conf.')

database_group = cfg.OptGroup(
    'database',
    title='Cell database options',
    help='The local cell database, as in nova.conf. healreq uses it only '
         'to format cell_mappings.database_connection templates.')

placement_database_group = cfg.OptGroup(
    'placement_database',
    title='Placement database options',
    help='The Placement database, as in placement.conf. Read only, by '
         'nova-heal allocations.')

api_database_opts = [
    cfg.StrOpt('connection',
               secret=True,
               help='SQLAlchemy URL of the Nova API database, for example '
                    'mysql+pymysql://nova:SECRET@db/nova_api. Required.'),
]

database_opts = [
    cfg.StrOpt('connection',
               secret=True,
               help='SQLAlchemy URL of the local cell database. Cell '
                    'mappings whose database_connection is a template '
                    '(for example {scheme}://{username}:{password}@'
                    '{hostname}/nova_cell1) are formatted from it exactly '
                    'as Nova formats them.'),
]

placement_database_opts = [
    cfg.StrOpt('connection',
               secret=True,
               help='SQLAlchemy URL of the Placement database, for example '
                    'mysql+pymysql://placement:SECRET@db/placement, as '
                    'placement.conf names it. Required by nova-heal '
                    'allocations, which only reads it; pass placement.conf '
                    'with a second --config-file.'),
]


def register_opts(conf):
    conf.register_group(api_database_group)
    conf.register_opts(api_database_opts, group=api_database_group)
    conf.register_group(database_group)
    conf.register_opts(database_opts, group=database_group)
    conf.register_group(placement_database_group)
    conf.register_opts(placement_database_opts,
                       group=placement_database_group)


def list_opts():
    return [(api_database_group, api_database_opts),
            (database_group, database_opts),
            (placement_database_group, placement_database_opts)]
