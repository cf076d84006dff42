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

"""Run the audit store's revisions on the connection given by healreq.

alembic executes this file for every command; ``healreq.audit.migrations``
puts the connection, already in a transaction that holds the migration
lock, in the configuration's attributes.
"""

from alembic import context

from healreq.audit import migrations
from healreq.audit import schema


context.configure(connection=context.config.attributes['connection'],
                  target_metadata=schema.metadata,
                  version_table=migrations.VERSION_TABLE)
with context.begin_transaction():
    context.run_migrations()
