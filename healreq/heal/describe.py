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


"""How the report words a drifted image: the before and after texts.

The values are those healreq.objects.image compares (booleans, integers,
strings, lists, sets, dicts); the texts are a FieldChange's ``before``
and ``after``, so they are part of the output operators read.
"""

import json


def _shorten(text, limit=40):
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _format_value(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (set, frozenset)):
        return '{%s}' % ','.join(str(v) for v in sorted(value))
    if isinstance(value, list):
        return '[%s]' % ','.join(_format_value(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(',', ':'))
    return str(value)


def _describe_one(image, name):
    if name == 'id':
        value = image.get('id')
        if value is None:
            return 'no id'
        return 'id %s' % (value if len(value) <= 10 else value[:8] + '..')
    if name.startswith('properties.'):
        name = name[len('properties.'):]
        source = image.get('properties') or {}
    else:
        source = image
    if name not in source:
        return '%s unset' % name
    return '%s=%s' % (name, _shorten(_format_value(source[name])))


def describe_difference(stored, derived, names):
    """Concise ``(before, after)`` text for the differing ``names``.

    ``names`` are those image.differing_fields returns, e.g.
    ``('id 3e1f7a52.., hw_cpu_policy=dedicated',
    'id 9a0b1c2d.., hw_cpu_policy=shared')``.
    """
    return (', '.join(_describe_one(stored, n) for n in names),
            ', '.join(_describe_one(derived, n) for n in names))
