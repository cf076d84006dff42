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

"""Whether a command waits for a lock: what the MySQL process list shows."""

import time

import sqlalchemy as sa

# The longest a test waits for a command to reach a lock wait.
DEADLINE = 30


def wait_for_statement(test, process, engine, statement, observer=None):
    """Return once ``process`` runs ``statement`` in ``engine``'s database.

    ``statement`` is a LIKE pattern. Only the database of ``engine`` is
    looked at: tests running beside it on the same server wait for locks
    of their own. ``observer`` (default ``engine``) reads the process
    list; the command must not end meanwhile.
    """
    query = sa.text("SELECT COUNT(*) FROM information_schema.processlist "
                    "WHERE db = :db AND info LIKE :statement AND info "
                    "NOT LIKE '%processlist%'").bindparams(
        statement=statement, db=engine.url.database)
    deadline = time.monotonic() + DEADLINE
    while True:
        with (observer or engine).connect() as conn:
            if conn.execute(query).scalar():
                return
        test.assertIsNone(process.poll(), 'the command ended early')
        test.assertLess(time.monotonic(), deadline)
        time.sleep(0.05)
