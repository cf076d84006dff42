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

The deployment's databases (the API database, ``[database]/connection``,
every cell's database and the Placement database) and the configuration
files in use must never hold the audit store. No output file of any
command (``--plan``, ``--metrics-file``, and the metrics a failure
writes) may replace one of them, the audit store, a file named after one
of their SQLite files (its lock, journal and WAL files), any other SQLite
database, or a device, pipe or socket. ``refuse_unsafe_outputs`` is that
one guard, which every command calls: with the configuration's part
before anything is read, and again with the cells' part as soon as the
cell mappings are read.
Both refuse with exit code 127 before anything is written.
"""

import glob
import os
import stat

from healreq.db import locations
from healreq.db import urls
from healreq import exception

API_DATABASE = 'the Nova API database ([api_database]/connection)'
LOCAL_DATABASE = 'the Nova database of [database]/connection'
PLACEMENT_DATABASE = ('the Placement database '
                      '([placement_database]/connection)')
AUDIT_STORE = 'the audit store or a file named after it (its lock and ' \
    'journal files)'

# The files SQLite keeps beside a database while it writes to it.
_SQLITE_SIDE_FILES = ('-journal', '-wal', '-shm')
# The first bytes of every SQLite database file.
_SQLITE_HEADER = b'SQLite format 3\x00'


def refuse_unsafe_outputs(conf, outputs, cells=None, cells_next=False):
    """Refuse output files that would replace what a command must keep.

    ``outputs`` are ``(option, path)`` pairs, a path None when the option
    is not given; ``cells`` the cell mappings rows once they are read.
    With ``cells_next``, the caller checks again with the cells, and
    what only they name (a cell's SQLite file) is left to that check,
    which names the cell. Nothing is read from any database. Returns the
    Protected checked. Raises UnsafeOutput (exit code 127).
    """
    protected = Protected.configured(conf)
    if cells is not None:
        protected = protected.with_cells(cells, conf.database.connection)
    protected.check_outputs(outputs, by_kind=not cells_next)
    return protected


class Protected(object):
    """The databases and files of a deployment, each with what it is."""

    def __init__(self, databases=(), files=(), config_dirs=(),
                 store_url=None):
        # [(what, URL)], [(what, path)] and [directory]
        self.databases = list(databases)
        self.files = list(files)
        self.config_dirs = list(config_dirs)
        self.store_url = store_url

    @classmethod
    def configured(cls, conf):
        """What the configuration ``conf`` names; nothing is read."""
        directories = _config_dirs(conf)
        files = list(conf.config_file or ())
        for directory in directories:
            files.extend(glob.glob(os.path.join(directory, '*.conf')))
        protected = cls(files=[('configuration file %s' % path, path)
                               for path in files], config_dirs=directories,
                        store_url=locations.audit_store_url(conf))
        protected._add_databases([(what, url) for what, url in (
            (API_DATABASE, conf.api_database.connection),
            (LOCAL_DATABASE, conf.database.connection),
            (PLACEMENT_DATABASE, conf.placement_database.connection))
            if url])
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
        protected = Protected(self.databases, self.files, self.config_dirs,
                              self.store_url)
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

    def check_outputs(self, outputs, by_kind=True):
        """Refuse output files that would replace a protected file.

        ``outputs`` are ``(option, path)`` pairs, a path None when the
        option is not given. ``by_kind``: also any SQLite database and
        anything that is not a regular file. Raises UnsafeOutput (exit
        code 127).
        """
        for option, path in outputs:
            if path:
                what = self._replaced_by(path)
                if what is None and by_kind:
                    what = _kind_refused(path)
                if what is not None:
                    raise exception.UnsafeOutput(option, path, what)

    def _replaced_by(self, path):
        """What writing ``path`` would replace that it must not, or None."""
        for what, protected in self.files:
            if locations.same_file(path, protected):
                return what
        store = locations.sqlite_file(self.store_url or '')
        if store is not None and _named_after(path, store):
            return AUDIT_STORE
        for what, protected in self.files:
            if any(locations.same_file(path, protected + suffix)
                   for suffix in _SQLITE_SIDE_FILES):
                return 'a journal file of %s' % what
        for directory in self.config_dirs:
            if path.endswith('.conf') and _in_directory(path, directory):
                return 'a file of configuration directory %s' % directory
        return None


def _kind_refused(path):
    """What ``path`` is if no output may replace it, else None.

    A symbolic link is replaced, never followed, so what it points to
    is judged by the checks above, not here.
    """
    for suffix in _SQLITE_SIDE_FILES:
        if path.endswith(suffix) and _is_sqlite_database(
                path[:-len(suffix)]):
            return 'a journal file of an SQLite database'
    try:
        info = os.lstat(path)
    except OSError:
        return None  # nothing there yet, or nothing that can be told
    if stat.S_ISLNK(info.st_mode) or stat.S_ISDIR(info.st_mode):
        return None  # a directory is never replaced: the write fails
    if not stat.S_ISREG(info.st_mode):
        return 'a device, pipe or socket'
    if _is_sqlite_database(path):
        return 'an SQLite database'
    return None


def _is_sqlite_database(path):
    """Whether ``path`` is a regular file holding an SQLite database."""
    try:
        with open(path, 'rb') as handle:
            return handle.read(len(_SQLITE_HEADER)) == _SQLITE_HEADER
    except OSError:
        return False  # none there, or none that can be told


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


def _named_after(path, database):
    """Whether ``path`` is, or is beside and named after, ``database``."""
    database = _resolved(database)
    for candidate in (_resolved(path), os.path.realpath(path)):
        if (os.path.dirname(candidate) == os.path.dirname(database)
                and os.path.basename(candidate).startswith(
                    os.path.basename(database))):
            return True
    return locations.same_file(path, database)
