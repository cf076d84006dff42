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


"""PyMySQL connections that share their default TLS context.

Given no TLS option, PyMySQL 1.2 and later try TLS on every connection
(their PREFERRED mode) and build a new default context for each, which
loads the system's CA certificates: some 25 ms of CPU per connection,
paid about ten times by a run, most of it before the first page is read.
That context depends on nothing but the absent options, so one per
process serves every such connection. A connection with TLS options of
its own still gets a context made from them, and older PyMySQL releases,
which make no context without options, behave as they always did.
"""

import threading

from pymysql import connections

_lock = threading.Lock()
_shared = []  # the default context, once made


class Connection(connections.Connection):
    """A PyMySQL connection whose PREFERRED-mode TLS context is shared."""

    def _create_ssl_ctx(self, sslp):
        # PyMySQL asks with an empty dict for the PREFERRED mode's
        # context; anything else is the connection's own TLS options.
        if not isinstance(sslp, dict) or sslp:
            return super()._create_ssl_ctx(sslp)
        with _lock:
            if not _shared:
                _shared.append(super()._create_ssl_ctx(sslp))
            return _shared[0]


def connect(dialect, connection_record, cargs, cparams):
    """SQLAlchemy's ``do_connect`` hook: open a Connection."""
    return Connection(*cargs, **cparams)
