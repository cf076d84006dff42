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

"""The MySQL backend fixture drops its databases whatever a test left."""

import time

import sqlalchemy as sa
import testtools

from healreq.tests.functional import backends


class MySQLCleanupTest(testtools.TestCase):

    def test_a_transaction_left_open_does_not_hold_up_the_drop(self):
        backend = backends.MySQLBackend()
        backend.setUp()
        url = backend.database_url('left_open')
        engine = sa.create_engine(url)
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            conn.execute(sa.text('CREATE TABLE t (id INT PRIMARY KEY)'))
        # A failed test's lock, never released: a metadata lock on t.
        held = engine.connect()
        held.begin()
        held.execute(sa.text('SELECT id FROM t FOR UPDATE'))
        started = time.monotonic()
        backend.cleanUp()
        self.assertLess(time.monotonic() - started, 30)
        with backend.backend.engine.connect() as conn:
            self.assertEqual([], conn.execute(sa.text(
                'SHOW DATABASES LIKE :name'), {
                    'name': sa.engine.make_url(url).database}).all())
        self.assertRaises(sa.exc.DBAPIError, held.execute,
                          sa.text('SELECT 1'))
        held.invalidate()
