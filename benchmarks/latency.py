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


"""A TCP relay that adds a fixed delay each way: a database across a network.

The benchmark's server usually runs on the same host, where a query's round
trip costs about 0.1 ms; in production the database sits behind a network
and often a load balancer (HAProxy in front of Galera), where a round trip
costs from a few tenths of a millisecond to a few milliseconds. Relaying
the contenders' connections through this process adds ``--rtt-ms`` to every
round trip (half on the way in, half on the way out), whatever the size of
the data: each chunk is held until its due time, then written in order, so
bandwidth is not limited.

Run it in the foreground; it prints ``listening HOST:PORT`` once ready::

    python benchmarks/latency.py --target 127.0.0.1:3306 --rtt-ms 1
"""

import argparse
import collections
import socket
import sys
import threading
import time

CHUNK = 256 * 1024


class _DelayLine(object):
    """Bytes read from ``source`` are sent to ``sink`` ``delay`` s later.

    One thread reads and stamps each chunk with its due time, another
    sends the chunks in order once due (threads, not asyncio: its timers
    round sleeps up to whole milliseconds).
    """

    def __init__(self, source, sink, delay):
        self.source = source
        self.sink = sink
        self.delay = delay
        self.pending = collections.deque()
        self.ready = threading.Condition()

    def start(self):
        for target in (self._receive, self._deliver):
            threading.Thread(target=target, daemon=True).start()

    def _receive(self):
        while True:
            try:
                data = self.source.recv(CHUNK)
            except OSError:
                data = b''
            with self.ready:
                self.pending.append((time.monotonic() + self.delay, data))
                self.ready.notify()
            if not data:
                return

    def _deliver(self):
        while True:
            with self.ready:
                while not self.pending:
                    self.ready.wait()
                due, data = self.pending.popleft()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                if not data:
                    self.sink.shutdown(socket.SHUT_WR)
                    return
                self.sink.sendall(data)
            except OSError:
                return


def _connect(client, target, delay):
    try:
        server = socket.create_connection(target)
    except OSError:
        client.close()
        return
    for end in (client, server):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _DelayLine(client, server, delay).start()
    _DelayLine(server, client, delay).start()


def _address(text):
    host, _, port = text.rpartition(':')
    return host or '127.0.0.1', int(port)


def serve(listen, target, rtt_ms):
    """Accept connections on ``listen`` and relay them to ``target``."""
    delay = rtt_ms / 2000.0
    listener = socket.create_server(listen)
    host, port = listener.getsockname()[:2]
    print('listening %s:%d' % (host, port), flush=True)
    while True:
        client, _ = listener.accept()
        _connect(client, target, delay)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--listen', default='127.0.0.1:0',
                        help='HOST:PORT to listen on (default: a free port '
                             'on 127.0.0.1).')
    parser.add_argument('--target', default='127.0.0.1:3306',
                        help='HOST:PORT of the database server.')
    parser.add_argument('--rtt-ms', type=float, required=True,
                        help='Milliseconds added to every round trip.')
    args = parser.parse_args(argv)
    try:
        serve(_address(args.listen), _address(args.target), args.rtt_ms)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
