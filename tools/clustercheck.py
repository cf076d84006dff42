#!/usr/bin/env python3
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

"""A clustercheck responder for one Galera node, for HAProxy's httpchk.

    tools/clustercheck.py --listen PORT --node-port PORT [--name NAME]

Answers every HTTP request on 127.0.0.1:LISTEN with 200 when the node
on 127.0.0.1:NODE-PORT says its ``wsrep_local_state_comment`` is
``Synced``, and with 503 otherwise (a donor, a joiner, a node that does
not answer), as the clustercheck responder kolla-ansible runs beside
each node does. The state is asked, at every request, with the
``mariadb`` client over TCP as the ``openstack_citest`` account
(HEALREQ_CLUSTERCHECK_USER / HEALREQ_CLUSTERCHECK_PASSWORD override
it). Each change of answer is logged on stderr, with the time.
``tools/galera-cluster.sh proxy-start`` runs one per node.
Python 3 standard library only.
"""

import argparse
import http.server
import os
import subprocess
import sys
import time

# The longest a check may take: HAProxy's checks run every second.
CLIENT_TIMEOUT = 2
QUERY = "SHOW STATUS LIKE 'wsrep_local_state_comment'"


def node_state(node_port, user, password):
    """The node's wsrep_local_state_comment, or why there is none."""
    command = ['mariadb', '--no-defaults', '--protocol=TCP',
               '-h127.0.0.1', '-P%d' % node_port, '-u' + user,
               '--connect-timeout=1', '-N', '-B', '-e', QUERY]
    try:
        done = subprocess.run(
            command, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=CLIENT_TIMEOUT,
            env=dict(os.environ, MYSQL_PWD=password))
    except subprocess.TimeoutExpired:
        return None, 'no answer within %ds' % CLIENT_TIMEOUT
    except OSError as exc:
        return None, 'cannot run mariadb: %s' % exc
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return None, lines[-1] if lines else 'exit %d' % done.returncode
    fields = done.stdout.strip().split('\t')
    if len(fields) != 2:
        return None, 'unexpected answer %r' % done.stdout.strip()
    return fields[1], fields[1]


class Handler(http.server.BaseHTTPRequestHandler):
    """200 when the node is Synced, 503 otherwise, whatever the request."""

    server_version = 'healreq-clustercheck'
    protocol_version = 'HTTP/1.0'

    def answer(self, with_body=True):
        server = self.server
        state, why = node_state(server.node_port, server.user,
                                server.password)
        if state == 'Synced':
            code, body = 200, '%s is synced.\r\n' % server.name
        else:
            code, body = 503, '%s is not synced: %s\r\n' % (server.name,
                                                            why)
        server.note(code, why)
        data = body.encode()
        head = ('HTTP/1.0 %d %s\r\nServer: %s\r\n'
                'Content-Type: text/plain\r\nContent-Length: %d\r\n'
                'Connection: close\r\n\r\n' % (
                    code, self.responses[code][0], self.server_version,
                    len(data))).encode()
        # One write: HAProxy closes the connection once it has read the
        # status line, and a second write would meet its reset.
        try:
            self.wfile.write(head + data if with_body else head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self):
        self.answer()

    def do_OPTIONS(self):
        # HAProxy's "option httpchk" sends OPTIONS / by default.
        self.answer()

    def do_POST(self):
        self.answer()

    def do_HEAD(self):
        self.answer(with_body=False)

    def log_message(self, format, *args):
        # One line per change of answer (Server.note), not per check.
        pass


class Server(http.server.HTTPServer):

    def __init__(self, listen, node_port, name, user, password):
        super().__init__(('127.0.0.1', listen), Handler)
        self.node_port = node_port
        self.name = name
        self.user = user
        self.password = password
        self.last = None

    def handle_error(self, request, client_address):
        log('%s: error answering %s:%d: %s' % (
            self.name, client_address[0], client_address[1],
            sys.exc_info()[1]))

    def note(self, code, why):
        if (code, why) == self.last:
            return
        self.last = (code, why)
        log('%s (127.0.0.1:%d): %d %s' % (
            self.name, self.node_port, code, why))


def log(message):
    sys.stderr.write('%s %s\n' % (time.strftime('%Y-%m-%d %H:%M:%S'),
                                  message))
    sys.stderr.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--listen', type=int, required=True,
                        help='the loopback port to answer on')
    parser.add_argument('--node-port', type=int, required=True,
                        help="the node's MariaDB port on 127.0.0.1")
    parser.add_argument('--name', default=None,
                        help='the name of the node in answers and logs')
    args = parser.parse_args(argv)
    name = args.name or 'node 127.0.0.1:%d' % args.node_port
    user = os.environ.get('HEALREQ_CLUSTERCHECK_USER', 'openstack_citest')
    password = os.environ.get('HEALREQ_CLUSTERCHECK_PASSWORD',
                              'openstack_citest')
    try:
        server = Server(args.listen, args.node_port, name, user, password)
    except OSError as exc:
        log('cannot listen on 127.0.0.1:%d: %s' % (args.listen, exc))
        return 1
    log('answering for %s on 127.0.0.1:%d' % (name, args.listen))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
