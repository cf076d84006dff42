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

"""What no command may write into: the deployment's databases.

The audit store must never live in one of them: the API database,
``[database]/connection`` or a cell's database. A store URL naming one is
refused with exit code 127 before anything is created: the
configuration's part before the store is opened by any command, the
cells' part as soon as the cell mappings are read.
"""

from healreq.db import locations
from healreq.db import urls
from healreq import exception

API_DATABASE = 'the Nova API database ([api_database]/connection)'
LOCAL_DATABASE = 'the Nova database of [database]/connection'


class Protected(object):
    """The databases of a deployment, each with what it is."""

    def __init__(self, databases=()):
        # [(what, URL)]
        self.databases = list(databases)

    @classmethod
    def configured(cls, conf):
        """What the configuration ``conf`` names; nothing is read."""
        return cls([(what, url) for what, url in (
            (API_DATABASE, conf.api_database.connection),
            (LOCAL_DATABASE, conf.database.connection)) if url])

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
        return Protected(self.databases + databases)

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
