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

"""Where a database URL points: whether two URLs name one database.

Two URLs name the same database when they reach the same backend (any
driver: ``mysql+pymysql`` and ``mysql``, MariaDB and MySQL), on the same
host (``localhost``, ``127.0.0.1`` and ``::1`` are one host; no host is
the local one), on the same port (the backend's default when none is
given) and name the same database, whatever the user and password. Two
SQLite URLs do when their files are one file: the same resolved path, or
the same inode (a hard link).
"""

import os

from sqlalchemy.engine import url as sa_url

LOCAL_HOSTS = ('', 'localhost', '127.0.0.1', '::1')
DEFAULT_PORTS = {'mysql': 3306, 'postgresql': 5432}
# Backends that are one server protocol under two names.
_SAME_BACKEND = {'mariadb': 'mysql'}


def sqlite_file(url):
    """The file an SQLite URL names, or None (another backend, memory).

    Relative paths are taken from the current directory, as SQLite does.
    """
    try:
        parsed = sa_url.make_url(url)
    except Exception:
        return None
    if parsed.get_backend_name() != 'sqlite':
        return None
    path = parsed.database
    if path and path.startswith('file:') and parsed.query.get('uri'):
        path = path[len('file:'):]
    if not path or path == ':memory:' or 'mode=memory' in path:
        return None
    return os.path.abspath(path)


def audit_store_url(conf):
    """The audit store's URL, from the configuration ``conf``.

    ``[healreq]/audit_connection``, else the SQLite file
    ``audit.sqlite`` under ``[healreq]/state_path``.
    """
    return conf.healreq.audit_connection or 'sqlite:///%s' % os.path.join(
        os.path.abspath(conf.healreq.state_path), 'audit.sqlite')


def location(url):
    """What identifies the database ``url`` names; None if it names none.

    ``('sqlite', resolved path)`` or ``(backend, host, port, database)``.
    """
    path = sqlite_file(url)
    if path is not None:
        return ('sqlite', os.path.realpath(path))
    try:
        parsed = sa_url.make_url(url)
    except Exception:
        return None
    backend = parsed.get_backend_name()
    backend = _SAME_BACKEND.get(backend, backend)
    if backend == 'sqlite' or not parsed.database:
        return None
    host = (parsed.host or '').strip('[]').lower()
    if host in LOCAL_HOSTS:
        host = 'localhost'
    database = parsed.database
    if backend == 'mysql':
        # Case-insensitive where the server says so: refuse both.
        database = database.lower()
    return (backend, host, parsed.port or DEFAULT_PORTS.get(backend),
            database)


def same_file(one, other):
    """Whether paths ``one`` and ``other`` are one file.

    The same path once links are resolved, or the same inode; paths that
    do not exist compare by their resolved names only.
    """
    if os.path.realpath(one) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def same_database(one, other):
    """Whether URLs ``one`` and ``other`` name the same database."""
    first, second = location(one), location(other)
    if first is None or second is None:
        return False
    if first[0] == 'sqlite' and second[0] == 'sqlite':
        return same_file(first[1], second[1])
    return first == second
