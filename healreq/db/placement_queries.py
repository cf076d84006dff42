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

"""Queries against the Placement database. Functions take a Connection.

Read only. Allocations are read by consumer, one query per batch of
consumers; resource class names and provider uuids come with them.
"""

import sqlalchemy as sa

from healreq.db import tables

# os-resource-classes 1.1.0's STANDARDS, the version every supported
# release pins (see tables.py): a standard class's id is its position
# here. Placement numbers custom classes from 10000.
STANDARD_RESOURCE_CLASSES = (
    'VCPU', 'MEMORY_MB', 'DISK_GB', 'PCI_DEVICE', 'SRIOV_NET_VF',
    'NUMA_SOCKET', 'NUMA_CORE', 'NUMA_THREAD', 'NUMA_MEMORY_MB',
    'IPV4_ADDRESS', 'VGPU', 'VGPU_DISPLAY_HEAD',
    'NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC', 'PCPU',
    'MEM_ENCRYPTION_CONTEXT', 'FPGA', 'PGPU',
    'NET_PACKET_RATE_KILOPACKET_PER_SEC',
    'NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC',
    'NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC')


def _statements():
    a = tables.allocations
    p = tables.resource_providers
    consumers = sa.bindparam('consumers', expanding=True)
    return dict(
        allocations=sa.select(a.c.consumer_id, p.c.uuid,
                              a.c.resource_class_id, a.c.used).select_from(
            a.join(p, p.c.id == a.c.resource_provider_id)).where(
            a.c.consumer_id.in_(consumers)).order_by(a.c.id),
        consumer_page=sa.select(a.c.consumer_id).where(
            a.c.consumer_id > sa.bindparam('after')).group_by(
            a.c.consumer_id).order_by(a.c.consumer_id).limit(
            sa.bindparam('limit')),
        classes=sa.select(tables.resource_classes.c.id,
                          tables.resource_classes.c.name),
    )


_QUERIES = _statements()


def get_resource_classes(conn):
    """``{id: name}`` of every resource class, standard ones included."""
    names = dict(enumerate(STANDARD_RESOURCE_CLASSES))
    names.update(conn.execute(_QUERIES['classes']).fetchall())
    return names


def get_allocations(conn, consumer_uuids, class_names):
    """Allocations of consumers: ``{consumer: {provider uuid: {class: n}}}``.

    ``class_names`` is get_resource_classes' map; a class id it does not
    know is named ``#ID``. Consumers without allocations are absent.
    """
    found = {}
    if not consumer_uuids:
        return found
    result = conn.execute(_QUERIES['allocations'],
                          {'consumers': list(consumer_uuids)})
    for consumer, provider, class_id, used in result.fetchall():
        name = class_names.get(class_id, '#%s' % class_id)
        by_class = found.setdefault(consumer, {}).setdefault(provider, {})
        by_class[name] = by_class.get(name, 0) + used
    return found


def get_consumer_page(conn, after, limit):
    """Consumers holding allocations with uuid ``> after``, in uuid order."""
    return [row[0] for row in conn.execute(
        _QUERIES['consumer_page'], {'after': after, 'limit': limit})]
