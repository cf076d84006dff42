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


"""PCI requests: ``instance_extra.pci_requests`` and the spec's primitive.

The instance keeps its requests as a JSON list of dicts; the spec keeps an
``InstancePCIRequests`` primitive. Requests with an ``alias_name`` come
from the flavor and must agree; requests without one come from Neutron
ports and change with interface attach/detach, which Nova never copies
into the spec, so they are compared for information only.
"""

from healreq.objects import primitive

PrimitiveError = primitive.PrimitiveError

REQUESTS_NAME = 'InstancePCIRequests'
REQUEST_NAME = 'InstancePCIRequest'

# Fields of InstancePCIRequest and the version that added them.
_REQUEST_FIELDS = (('count', (1, 0)), ('spec', (1, 0)),
                   ('alias_name', (1, 0)), ('is_new', (1, 0)),
                   ('request_id', (1, 1)), ('numa_policy', (1, 2)),
                   ('requester_id', (1, 3)))
# Host annotations added by the compute node, never part of a request.
_HOST_SPEC_KEYS = frozenset(['rp_uuids', 'parent_ifname'])


def _request(data, what):
    """Validate one request (dict form) and return a normalised copy."""
    if not isinstance(data, dict):
        raise PrimitiveError('%s is not a PCI request' % what)
    count = data.get('count')
    if isinstance(count, bool) or not isinstance(count, int):
        raise PrimitiveError('%s.count is not an integer' % what)
    spec = data.get('spec')
    if spec is None:
        spec = []
    if not isinstance(spec, list) or not all(
            isinstance(s, dict) for s in spec):
        raise PrimitiveError('%s.spec is not a list of dicts' % what)
    spec = [_device_spec(s, what) for s in spec]
    alias_name = data.get('alias_name')
    if alias_name is not None and not isinstance(alias_name, str):
        raise PrimitiveError('%s.alias_name is not a string' % what)
    request = dict(data)
    request['spec'] = spec
    request['alias_name'] = alias_name
    request.setdefault('numa_policy', 'legacy')
    request['is_new'] = False
    return request


def _device_spec(spec, what):
    """A device spec as Nova's dict of nullable strings holds it."""
    coerced = {}
    for key, value in spec.items():
        if value is not None and not isinstance(value, (str, int, float)):
            raise PrimitiveError('%s.spec holds a %s value for %r'
                                 % (what, type(value).__name__, key))
        coerced[key] = None if value is None else str(value)
    return coerced


def from_instance_extra(text):
    """Parse ``instance_extra.pci_requests``; NULL means no requests."""
    what = 'instance_extra.pci_requests'
    if text is None:
        return []
    document = primitive.load_json(text, what)
    if document is None:
        return []
    if not isinstance(document, list):
        raise PrimitiveError('%s is not a list' % what)
    return [_request(item, '%s[%d]' % (what, i))
            for i, item in enumerate(document)]


def from_primitive(document, what):
    """Parse the spec's InstancePCIRequests primitive into request dicts."""
    if document is None:
        return []
    data = primitive.unwrap(document, REQUESTS_NAME, what)
    requests = data.get('requests')
    if requests is None:
        requests = []
    if not isinstance(requests, list):
        raise PrimitiveError('%s.requests is not a list' % what)
    return [_request(primitive.unwrap(item, REQUEST_NAME,
                                      '%s.requests[%d]' % (what, i)),
                     '%s.requests[%d]' % (what, i))
            for i, item in enumerate(requests)]


def _alias_key(request):
    # (key, is-null, value) sorts whatever mix of null and string values.
    specs = tuple(sorted(
        tuple(sorted((k, v is None, v or '') for k, v in spec.items()
                     if k not in _HOST_SPEC_KEYS))
        for spec in request['spec']))
    return (request['alias_name'], request['count'], specs)


def alias_requests(requests):
    """The flavor (alias) requests, as a comparable sorted list."""
    return sorted(_alias_key(r) for r in requests
                  if r['alias_name'] is not None)


def port_requests(requests):
    return [r for r in requests if r['alias_name'] is None]


def describe(requests):
    """Short human form, e.g. ``t4 x1`` or ``none``."""
    aliases = ['%s x%d' % (key[0], key[1]) for key in alias_requests(requests)]
    return ', '.join(aliases) or 'none'


def to_primitive(requests, instance_uuid, requests_version,
                 request_version):
    """InstancePCIRequests primitive at the given versions.

    ``instance_uuid`` is None to leave it out (boot-time specs carry none).
    """
    target = primitive.parse_version(request_version, 'PCI request version')
    items = []
    for request in requests:
        data = {name: request.get(name) for name, added in _REQUEST_FIELDS
                if target >= added and (name in request or name == 'is_new')}
        items.append(primitive.wrap(REQUEST_NAME, request_version, data))
    data = {'requests': items}
    if instance_uuid is not None:
        data['instance_uuid'] = instance_uuid
    return primitive.wrap(REQUESTS_NAME, requests_version, data)
