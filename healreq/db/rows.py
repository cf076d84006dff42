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

"""Result rows as plain dicts, cheaply.

``dict(row._mapping)`` looks the column names up again for every row,
and iterating over a result fetches its rows one call at a time; on the
hundreds of thousands of rows of a large run both show. These helpers
fetch all rows at once and look the names up once per result. The names
become plain strings (SQLAlchemy's are a subclass), which a page handed
to another process pickles once each; so do equal strings of a result
(hosts, owners, flavors...), which become one object (``OneCopy``).
"""


def dicts(result):
    """The rows of ``result`` as a list of dicts."""
    keys = _names(result)
    one = OneCopy()
    return [dict(zip(keys, map(one, row))) for row in result.fetchall()]


def plain_dicts(result):
    """The rows of ``result`` as a list of dicts, their values as read.

    For rows that stay in this process: no equal strings are shared,
    which saves a call per value on large reads.
    """
    keys = _names(result)
    return [dict(zip(keys, row)) for row in result.fetchall()]


def keyed(result, by):
    """The rows of ``result`` as dicts, by the value of column ``by``.

    The column must be unique in the result.
    """
    keys = _names(result)
    position = keys.index(by)
    one = OneCopy()
    return {row[position]: dict(zip(keys, map(one, row)))
            for row in result.fetchall()}


def grouped(result, by):
    """The rows of ``result`` as lists of dicts, by the value of ``by``."""
    keys = _names(result)
    position = keys.index(by)
    one = OneCopy()
    groups = {}
    for row in result.fetchall():
        groups.setdefault(row[position], []).append(
            dict(zip(keys, map(one, row))))
    return groups


class OneCopy(object):
    """Called on a value: the first equal string seen, or the value.

    Rows of one batch repeat many strings (the flavors of instance_extra,
    system metadata keys and values, hosts, owners): with one object for
    each, a batch is shorter to hand over between processes (pickle
    writes a repeated object once, and reads it back once) and takes less
    room.
    """

    def __init__(self):
        self._seen = {}

    def __call__(self, value):
        if type(value) is not str:
            return value
        return self._seen.setdefault(value, value)


def _names(result):
    return tuple(str(key) for key in result.keys())
