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

"""The subset of Nova's tables that healreq reads and writes.

Mirrors the schema created by Nova 34.0.0's migrations (API head
cdeec0c85668, cell head ab450ba04102): same names, column types,
nullability, unique keys and the indexes our queries rely on. Every
column declared here exists, alike, from Zed's schema (API head
b30f573d3377, cell head ccb0fa1a2252) on; the compat tests check that
against the migrations of each release they run with. Only the
columns healreq uses are declared; a real deployment has more, which is
harmless because every statement names its columns.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

# nova.db.types.MediumText: TEXT, MEDIUMTEXT on MySQL.
MediumText = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql')

_MYSQL_TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8'}

api_metadata = sa.MetaData()
cell_metadata = sa.MetaData()
placement_metadata = sa.MetaData()


def _timestamps():
    return [sa.Column('created_at', sa.DateTime),
            sa.Column('updated_at', sa.DateTime)]


def _soft_delete():
    return [sa.Column('deleted_at', sa.DateTime),
            sa.Column('deleted', sa.Integer, default=0)]


# -- API database ----------------------------------------------------------

cell_mappings = sa.Table(
    'cell_mappings', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36), nullable=False),
    sa.Column('name', sa.String(255)),
    sa.Column('transport_url', sa.Text),
    sa.Column('database_connection', sa.Text),
    sa.Column('disabled', sa.Boolean, default=False),
    sa.UniqueConstraint('uuid', name='uniq_cell_mappings0uuid'),
    sa.Index('uuid_idx', 'uuid'),
    **_MYSQL_TABLE_ARGS)

instance_mappings = sa.Table(
    'instance_mappings', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(36), nullable=False),
    sa.Column('cell_id', sa.Integer, sa.ForeignKey('cell_mappings.id'),
              nullable=True),
    sa.Column('project_id', sa.String(255), nullable=False),
    sa.Column('queued_for_delete', sa.Boolean, default=False),
    sa.Column('user_id', sa.String(255), nullable=True),
    sa.UniqueConstraint('instance_uuid',
                        name='uniq_instance_mappings0instance_uuid'),
    sa.Index('instance_uuid_idx', 'instance_uuid'),
    sa.Index('project_id_idx', 'project_id'),
    sa.Index('instance_mappings_user_id_project_id_idx',
             'user_id', 'project_id'),
    **_MYSQL_TABLE_ARGS)

request_specs = sa.Table(
    'request_specs', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(36), nullable=False),
    sa.Column('spec', MediumText, nullable=False),
    sa.UniqueConstraint('instance_uuid',
                        name='uniq_request_specs0instance_uuid'),
    sa.Index('request_spec_instance_uuid_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)


# Server groups: Nova trusts their membership over the spec on load.
instance_groups = sa.Table(
    'instance_groups', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('user_id', sa.String(255)),
    sa.Column('project_id', sa.String(255)),
    sa.Column('uuid', sa.String(36), nullable=False),
    sa.Column('name', sa.String(255)),
    sa.UniqueConstraint('uuid', name='uniq_instance_groups0uuid'),
    **_MYSQL_TABLE_ARGS)

instance_group_member = sa.Table(
    'instance_group_member', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(255)),
    sa.Column('group_id', sa.Integer, sa.ForeignKey('instance_groups.id'),
              nullable=False),
    sa.Index('instance_group_member_instance_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

instance_group_policy = sa.Table(
    'instance_group_policy', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('policy', sa.String(255)),
    sa.Column('group_id', sa.Integer, sa.ForeignKey('instance_groups.id'),
              nullable=False),
    sa.Column('rules', sa.Text),
    sa.Index('instance_group_policy_policy_idx', 'policy'),
    **_MYSQL_TABLE_ARGS)

# Host aggregates: a host's availability zone is the availability_zone
# metadata of an aggregate it is in.
aggregates = sa.Table(
    'aggregates', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36)),
    sa.Column('name', sa.String(255)),
    sa.UniqueConstraint('name', name='uniq_aggregate0name'),
    sa.Index('aggregate_uuid_idx', 'uuid'),
    **_MYSQL_TABLE_ARGS)

aggregate_hosts = sa.Table(
    'aggregate_hosts', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('host', sa.String(255)),
    sa.Column('aggregate_id', sa.Integer, sa.ForeignKey('aggregates.id'),
              nullable=False),
    sa.UniqueConstraint('host', 'aggregate_id',
                        name='uniq_aggregate_hosts0host0aggregate_id'),
    **_MYSQL_TABLE_ARGS)

aggregate_metadata = sa.Table(
    'aggregate_metadata', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('aggregate_id', sa.Integer, sa.ForeignKey('aggregates.id'),
              nullable=False),
    sa.Column('key', sa.String(255), nullable=False),
    sa.Column('value', sa.String(255), nullable=False),
    sa.UniqueConstraint('aggregate_id', 'key',
                        name='uniq_aggregate_metadata0aggregate_id0key'),
    sa.Index('aggregate_metadata_key_idx', 'key'),
    **_MYSQL_TABLE_ARGS)


# Flavors: the current definitions. An instance runs on its embedded copy
# (instance_extra.flavor); a deleted flavor's rows are gone.
flavors = sa.Table(
    'flavors', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('name', sa.String(255), nullable=False),
    sa.Column('memory_mb', sa.Integer, nullable=False),
    sa.Column('vcpus', sa.Integer, nullable=False),
    sa.Column('root_gb', sa.Integer),
    sa.Column('ephemeral_gb', sa.Integer),
    sa.Column('flavorid', sa.String(255), nullable=False),
    sa.Column('swap', sa.Integer, nullable=False, default=0),
    sa.UniqueConstraint('flavorid', name='uniq_flavors0flavorid'),
    sa.UniqueConstraint('name', name='uniq_flavors0name'),
    **_MYSQL_TABLE_ARGS)

flavor_extra_specs = sa.Table(
    'flavor_extra_specs', api_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('key', sa.String(255), nullable=False),
    sa.Column('value', sa.String(255)),
    sa.Column('flavor_id', sa.Integer, sa.ForeignKey('flavors.id'),
              nullable=False),
    sa.UniqueConstraint('flavor_id', 'key',
                        name='uniq_flavor_extra_specs0flavor_id0key'),
    sa.Index('flavor_extra_specs_flavor_id_key_idx', 'flavor_id', 'key'),
    **_MYSQL_TABLE_ARGS)


# -- Cell databases --------------------------------------------------------

instances = sa.Table(
    'instances', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('user_id', sa.String(255)),
    sa.Column('project_id', sa.String(255)),
    sa.Column('image_ref', sa.String(255)),
    sa.Column('host', sa.String(255)),
    sa.Column('node', sa.String(255)),
    sa.Column('instance_type_id', sa.Integer),
    sa.Column('memory_mb', sa.Integer),
    sa.Column('vcpus', sa.Integer),
    sa.Column('root_gb', sa.Integer),
    sa.Column('ephemeral_gb', sa.Integer),
    sa.Column('vm_state', sa.String(255)),
    sa.Column('task_state', sa.String(255)),
    sa.Column('availability_zone', sa.String(255)),
    sa.Column('uuid', sa.String(36), nullable=False),
    sa.Column('hidden', sa.Boolean, default=False),
    sa.UniqueConstraint('uuid', name='uniq_instances0uuid'),
    sa.Index('instances_task_state_updated_at_idx',
             'task_state', 'updated_at'),
    sa.Index('instances_uuid_deleted_idx', 'uuid', 'deleted'),
    # nova-heal hosts reads the instances of a page of hosts.
    sa.Index('instances_host_node_deleted_idx', 'host', 'node', 'deleted'),
    **_MYSQL_TABLE_ARGS)

instance_extra = sa.Table(
    'instance_extra', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(36),
              sa.ForeignKey('instances.uuid'), nullable=False),
    sa.Column('numa_topology', sa.Text),
    sa.Column('pci_requests', sa.Text),
    sa.Column('flavor', sa.Text),
    sa.Column('migration_context', sa.Text),
    sa.Index('instance_extra_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

instance_system_metadata = sa.Table(
    'instance_system_metadata', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(36),
              sa.ForeignKey('instances.uuid'), nullable=False),
    sa.Column('key', sa.String(255), nullable=False),
    sa.Column('value', sa.String(255)),
    sa.Index('instance_uuid', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

block_device_mapping = sa.Table(
    'block_device_mapping', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('instance_uuid', sa.String(36),
              sa.ForeignKey('instances.uuid')),
    sa.Column('source_type', sa.String(255)),
    sa.Column('destination_type', sa.String(255)),
    sa.Column('boot_index', sa.Integer),
    sa.Column('volume_id', sa.String(36)),
    sa.Column('image_id', sa.String(36)),
    sa.Column('uuid', sa.String(36)),
    sa.UniqueConstraint('uuid', name='uniq_block_device_mapping0uuid'),
    sa.Index('block_device_mapping_instance_uuid_idx', 'instance_uuid'),
    **_MYSQL_TABLE_ARGS)

migrations = sa.Table(
    'migrations', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('source_compute', sa.String(255)),
    sa.Column('dest_compute', sa.String(255)),
    sa.Column('status', sa.String(255)),
    sa.Column('instance_uuid', sa.String(36),
              sa.ForeignKey('instances.uuid')),
    sa.Column('old_instance_type_id', sa.Integer),
    sa.Column('new_instance_type_id', sa.Integer),
    sa.Column('source_node', sa.String(255)),
    sa.Column('dest_node', sa.String(255)),
    sa.Column('migration_type',
              sa.Enum('migration', 'resize', 'live-migration', 'evacuation',
                      name='migration_type')),
    sa.Column('hidden', sa.Boolean, default=False),
    sa.Column('uuid', sa.String(36)),
    sa.UniqueConstraint('uuid', name='uniq_migrations0uuid'),
    sa.Index('migrations_instance_uuid_and_status_idx',
             'deleted', 'instance_uuid', 'status'),
    # nova-heal hosts reads the migrations from or to a page of hosts;
    # Nova has these two indexes since Nova 34 (2026.2).
    sa.Index('migrations_by_src_host_nodes_and_status_idx', 'deleted',
             'source_compute', 'source_node', 'status'),
    sa.Index('migrations_by_dest_host_nodes_and_status_idx', 'deleted',
             'dest_compute', 'dest_node', 'status'),
    **_MYSQL_TABLE_ARGS)

# Read only, to tell which Nova release runs (see healreq.releases).
services = sa.Table(
    'services', cell_metadata,
    *_timestamps(),
    sa.Column('deleted_at', sa.DateTime),
    sa.Column('deleted', sa.Integer),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('host', sa.String(255)),
    sa.Column('binary', sa.String(255)),
    sa.Column('topic', sa.String(255)),
    sa.Column('report_count', sa.Integer, nullable=False, default=0),
    sa.Column('version', sa.Integer, default=0),
    sa.Column('forced_down', sa.Boolean, default=False),
    # The last heartbeat (Service.save when report_count grows).
    sa.Column('last_seen_up', sa.DateTime),
    sa.UniqueConstraint('host', 'binary', 'deleted',
                        name='uniq_services0host0binary0deleted'),
    **_MYSQL_TABLE_ARGS)

# Read only, by ``nova-heal allocations``: the resource provider of a
# compute node has the node's uuid. Nova's table has many more columns,
# all with defaults or nullable.
compute_nodes = sa.Table(
    'compute_nodes', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36)),
    sa.Column('host', sa.String(255)),
    sa.Column('hypervisor_type', MediumText, nullable=False),
    sa.Column('hypervisor_hostname', sa.String(255)),
    # A NUMATopology primitive (JSON), read by ``nova-heal hosts``: its
    # cells' pcpuset are the host's dedicated pCPUs.
    sa.Column('numa_topology', sa.Text),
    sa.UniqueConstraint('host', 'hypervisor_hostname', 'deleted',
                        name='uniq_compute_nodes0host0hypervisor_hostname0'
                             'deleted'),
    sa.Index('compute_nodes_uuid_idx', 'uuid', unique=True),
    **_MYSQL_TABLE_ARGS)

# Read only, by ``nova-heal hosts``: the PCI devices of compute nodes and
# the instances holding them.
pci_devices = sa.Table(
    'pci_devices', cell_metadata,
    *_timestamps(),
    *_soft_delete(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36)),
    sa.Column('compute_node_id', sa.Integer,
              sa.ForeignKey('compute_nodes.id'), nullable=False),
    sa.Column('address', sa.String(12), nullable=False),
    sa.Column('vendor_id', sa.String(4), nullable=False),
    sa.Column('product_id', sa.String(4), nullable=False),
    sa.Column('dev_type', sa.String(8), nullable=False),
    sa.Column('dev_id', sa.String(255)),
    sa.Column('label', sa.String(255), nullable=False),
    sa.Column('status', sa.String(36), nullable=False),
    sa.Column('instance_uuid', sa.String(36)),
    sa.Index('ix_pci_devices_compute_node_id_deleted',
             'compute_node_id', 'deleted'),
    sa.Index('ix_pci_devices_instance_uuid_deleted',
             'instance_uuid', 'deleted'),
    sa.UniqueConstraint('compute_node_id', 'address', 'deleted',
                        name='uniq_pci_devices0compute_node_id0address0'
                             'deleted'),
    **_MYSQL_TABLE_ARGS)


# -- Placement database (read only) -----------------------------------------
#
# Mirrors openstack-placement 16.0.0's models (2026.2). Checked against
# the models of the Placement release of every supported Nova release
# (8.0.0 for Zed, then 9.0.0 to 15.0.0 for 2023.1 to 2026.1): the columns
# read (allocations: id, consumer_id, resource_provider_id,
# resource_class_id, used; resource_providers: id, uuid; resource_classes:
# id, name) and their types are the same in all of them. Only indexes
# differ: up to 9.0.0 resource_providers also has the indexes
# resource_providers_uuid_idx and resource_providers_name_idx, inventories
# two more, and placement_aggregates.uuid an index of its own, all
# dropped in 10.0.0 as redundant with unique constraints; no query here
# depends on them.
# Standard resource classes are numbered by their order in
# os-resource-classes' STANDARDS; the resource_classes table holds the
# custom ones (ids from 10000) and, since Placement syncs them at
# start-up with the same ids, the standard ones too. Every supported
# release's upper-constraints pins os-resource-classes 1.1.0, whose 21
# standard classes are placement_queries.STANDARD_RESOURCE_CLASSES.

resource_providers = sa.Table(
    'resource_providers', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, nullable=False),
    sa.Column('uuid', sa.String(36), nullable=False),
    sa.Column('name', sa.Unicode(200)),
    sa.Column('generation', sa.Integer, default=0),
    sa.Column('root_provider_id', sa.Integer,
              sa.ForeignKey('resource_providers.id')),
    sa.Column('parent_provider_id', sa.Integer,
              sa.ForeignKey('resource_providers.id')),
    sa.UniqueConstraint('uuid', name='uniq_resource_providers0uuid'),
    sa.UniqueConstraint('name', name='uniq_resource_providers0name'),
    **_MYSQL_TABLE_ARGS)

# Aggregates and traits, read by ``nova-heal hosts``: the uuid of a
# Nova aggregate is that of its Placement aggregate, and a sharing
# provider has the trait MISC_SHARES_VIA_AGGREGATE.
placement_aggregates = sa.Table(
    'placement_aggregates', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36)),
    sa.UniqueConstraint('uuid', name='uniq_placement_aggregates0uuid'),
    **_MYSQL_TABLE_ARGS)

resource_provider_aggregates = sa.Table(
    'resource_provider_aggregates', placement_metadata,
    *_timestamps(),
    sa.Column('resource_provider_id', sa.Integer, primary_key=True,
              nullable=False),
    sa.Column('aggregate_id', sa.Integer, primary_key=True, nullable=False),
    sa.Index('resource_provider_aggregates_aggregate_id_idx',
             'aggregate_id'),
    **_MYSQL_TABLE_ARGS)

traits = sa.Table(
    'traits', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, nullable=False,
              autoincrement=True),
    sa.Column('name', sa.Unicode(255), nullable=False),
    sa.UniqueConstraint('name', name='uniq_traits0name'),
    **_MYSQL_TABLE_ARGS)

resource_provider_traits = sa.Table(
    'resource_provider_traits', placement_metadata,
    *_timestamps(),
    sa.Column('trait_id', sa.Integer, sa.ForeignKey('traits.id'),
              primary_key=True, nullable=False),
    sa.Column('resource_provider_id', sa.Integer,
              sa.ForeignKey('resource_providers.id'), primary_key=True,
              nullable=False),
    sa.Index('resource_provider_traits_resource_provider_trait_idx',
             'resource_provider_id', 'trait_id'),
    **_MYSQL_TABLE_ARGS)

resource_classes = sa.Table(
    'resource_classes', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, nullable=False),
    sa.Column('name', sa.String(255), nullable=False),
    sa.UniqueConstraint('name', name='uniq_resource_classes0name'),
    **_MYSQL_TABLE_ARGS)

allocations = sa.Table(
    'allocations', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, nullable=False),
    sa.Column('resource_provider_id', sa.Integer, nullable=False),
    sa.Column('consumer_id', sa.String(36), nullable=False),
    sa.Column('resource_class_id', sa.Integer, nullable=False),
    sa.Column('used', sa.Integer, nullable=False),
    sa.Index('allocations_resource_provider_class_used_idx',
             'resource_provider_id', 'resource_class_id', 'used'),
    sa.Index('allocations_resource_class_id_idx', 'resource_class_id'),
    sa.Index('allocations_consumer_id_idx', 'consumer_id'),
    **_MYSQL_TABLE_ARGS)

consumers = sa.Table(
    'consumers', placement_metadata,
    *_timestamps(),
    sa.Column('id', sa.Integer, primary_key=True, nullable=False,
              autoincrement=True),
    sa.Column('uuid', sa.String(36), nullable=False),
    sa.Column('project_id', sa.Integer, nullable=False),
    sa.Column('user_id', sa.Integer, nullable=False),
    sa.Column('generation', sa.Integer, nullable=False, default=0,
              server_default='0'),
    sa.UniqueConstraint('uuid', name='uniq_consumers0uuid'),
    **_MYSQL_TABLE_ARGS)
