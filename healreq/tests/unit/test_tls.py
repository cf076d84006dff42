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

"""Which TLS contexts healreq's PyMySQL connections share, and which not."""

import ssl

from pymysql import connections
import testtools

from healreq.db import tls


def _contexts(*options):
    """The context a connection asks for with each of ``options``."""
    connection = tls.Connection.__new__(tls.Connection)  # nothing opened
    return [connection._create_ssl_ctx(sslp) for sslp in options]


class SharedContextTest(testtools.TestCase):

    def test_the_default_context_is_made_once(self):
        first, second = _contexts({}, {})
        self.assertIsInstance(first, ssl.SSLContext)
        self.assertIs(first, second)
        self.assertIs(first, _contexts({})[0])

    def test_it_is_the_context_pymysql_makes_without_options(self):
        shared, = _contexts({})
        plain = connections.Connection.__new__(connections.Connection)
        made = plain._create_ssl_ctx({})
        self.assertIsNot(shared, made)
        self.assertEqual((made.verify_mode, made.check_hostname,
                          made.options, made.verify_flags),
                         (shared.verify_mode, shared.check_hostname,
                          shared.options, shared.verify_flags))

    def test_options_of_a_connection_get_a_context_of_their_own(self):
        options = {'ca': None, 'verify_mode': True, 'check_hostname': False}
        default, first, second = _contexts({}, options, dict(options))
        self.assertIsNot(first, second)
        self.assertIsNot(first, default)
        self.assertEqual(ssl.CERT_REQUIRED, first.verify_mode)
        self.assertEqual(ssl.CERT_NONE, default.verify_mode)

    def test_a_context_given_is_used_as_it_is(self):
        given = ssl.create_default_context()
        self.assertIs(given, _contexts(given)[0])
