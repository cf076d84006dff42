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

"""What no command may write into or over, and the refusals that say so.

The deployment's databases (the API database, ``[database]/connection``
and every cell's database) and the configuration files in use must
never hold the audit store, and no output file (``--plan``,
``--metrics-file``) may replace one of them, the audit store, or a file
named after the store (its lock and journal files). Both are refused with
exit code 127 before anything is written: the configuration's part before
anything is read, the cells' part as soon as the cell mappings are read.
"""

import glob
import os

from healreq.db import locations
from healreq.db import urls
from healreq import exception

API_DATABASE = 'the Nova API database ([api_database]/connection)'
LOCAL_DATABASE = 'the Nova database of [database]/connection'


class Protected(object):
    """The databases and files of a deployment, each with what it is."""

    def __init__(self, databases=(), files=(), config_dirs=()):
        # [(what, URL)], [(what, path)] and [directory]
        self.databases = list(databases)
        self.files = list(files)
        self.config_dirs = list(config_dirs)

    @classmethod
    def configured(cls, conf):
        """What the configuration ``conf`` names; nothing is read."""
        directories = _config_dirs(conf)
        files = list(conf.config_file or ())
        for directory in directories:
            files.extend(glob.glob(os.path.join(directory, '*.conf')))
        protected = cls(files=[('configuration file %s' % path, path)
                               for path in files], config_dirs=directories)
        protected._add_databases([(what, url) for what, url in (
            (API_DATABASE, conf.api_database.connection),
            (LOCAL_DATABASE, conf.database.connection)) if url])
        return protected

    def with_cells(self, cells, reference_url):
        """These, and the databases of ``cells`` (cell_mappings rows).

        A cell URL that cannot be formatted names no database here: the
        run reports that cell as failed without connecting to it.
        """
        databases = []
        for cell in cells:
            try:
                url = urls.format_cell_url(cell['database_connection'] or '',
                                           reference_url)
            except ValueError:
                continue
            databases.append(('the database of cell %s (%s)' % (
                cell['uuid'], cell['name'] or 'unnamed'), url))
        protected = Protected(self.databases, self.files, self.config_dirs)
        protected._add_databases(databases)
        return protected

    def _add_databases(self, databases):
        """Add ``databases`` and the files of the SQLite ones."""
        for what, url in databases:
            self.databases.append((what, url))
            path = locations.sqlite_file(url)
            if path is not None:
                self.files.append(('the SQLite file of %s' % what, path))

    def check_store(self, store_url):
        """Refuse a store URL naming one of these databases.

        Raises AuditStoreError (exit code 127): the audit tables would be
        created inside Nova's schema.
        """
        for what, url in self.databases:
            if locations.same_database(store_url, url):
                raise exception.AuditStoreError(
                    'it would be created in %s; give it a '
                    'database of its own ([healreq]/audit_connection)'
                    % what, exit_code=exception.ExitCode.INVALID_INPUT)

    def check_outputs(self, outputs, store_url):
        """Refuse output files that would replace a protected file.

        ``outputs`` are ``(option, path)`` pairs, a path None when the
        option is not given. Raises UnsafeOutput (exit code 127).
        """
        store = locations.sqlite_file(store_url)
        for option, path in outputs:
            if not path:
                continue
            for what, protected in self.files:
                if locations.same_file(path, protected):
                    raise exception.UnsafeOutput(option, path, what)
            if store is not None and _named_after(path, store):
                raise exception.UnsafeOutput(
                    option, path, 'the audit store or a file named after it '
                    '(its lock and journal files)')
            for directory in self.config_dirs:
                if path.endswith('.conf') and _in_directory(path, directory):
                    raise exception.UnsafeOutput(
                        option, path, 'a file of configuration directory %s'
                        % directory)


def _config_dirs(conf):
    """The configuration directories ``conf`` reads the ``*.conf`` of."""
    # oslo.config keeps only the last --config-dir in config_dir, but
    # reads them all and lists them all in its namespace.
    namespace = getattr(conf, '_namespace', None)
    directories = list(getattr(namespace, '_config_dirs', None) or ())
    for directory in conf.config_dir or conf.default_config_dirs or ():
        if directory not in directories:
            directories.append(directory)
    return [d for d in directories if os.path.isdir(d)]


def _resolved(path):
    """``path`` with its directory's links resolved, the name kept."""
    return os.path.join(os.path.realpath(os.path.dirname(
        os.path.abspath(path))), os.path.basename(path))


def _in_directory(path, directory):
    return any(os.path.dirname(candidate) == os.path.realpath(directory)
               for candidate in (_resolved(path), os.path.realpath(path)))


def _named_after(path, store):
    """Whether ``path`` is, or is beside and named after, the store file."""
    store = _resolved(store)
    for candidate in (_resolved(path), os.path.realpath(path)):
        if (os.path.dirname(candidate) == os.path.dirname(store)
                and os.path.basename(candidate).startswith(
                    os.path.basename(store))):
            return True
    return locations.same_file(path, store)
