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


"""The database server's work during a contender's run.

Before and after each run, :class:`Observer` reads, over a connection of
its own:

* the server process's CPU time (user and system, all its threads) from
  ``/proc/<pid>/stat``, the pid read from the file ``@@pid_file`` names;
  only where the server runs on this host (else it is not reported);
* the global ``Handler_read_*`` counters (how many rows the storage
  engine handed to the SQL layer, by kind of read), ``Innodb_rows_read``
  (``Rows_read`` on MariaDB 10.6 and later, which dropped it), the
  buffer pool's page reads (``Innodb_buffer_pool_read_requests``) and
  the statements (``Questions``; the observer's own two per snapshot
  included);
* the other client sessions (``information_schema.processlist`` less
  this one, the server's own threads and the idle sessions with no
  database or one of the benchmark's: the benchmark's own, or a
  contender's closing as it ends), so that a figure polluted by someone
  else's work on the same server shows as such.

Both are global to the server: they measure the contender only on a
server that serves nothing else (see README.rst, *A private server*).
"""

import os

import sqlalchemy as sa

# Status counter -> its short name in the results. MariaDB 10.6 and later
# no longer have Innodb_rows_read; Rows_read counts the same reads there.
COUNTERS = (('Handler_read_first', 'first'), ('Handler_read_key', 'key'),
            ('Handler_read_last', 'last'), ('Handler_read_next', 'next'),
            ('Handler_read_prev', 'prev'), ('Handler_read_rnd', 'rnd'),
            ('Handler_read_rnd_next', 'rnd_next'),
            ('Innodb_rows_read', 'innodb rows'), ('Rows_read', 'rows read'),
            ('Innodb_buffer_pool_read_requests', 'page reads'),
            ('Questions', 'statements'))
_STATUS = ("SHOW GLOBAL STATUS WHERE Variable_name IN (%s)"
           % ', '.join("'%s'" % name for name, _short in COUNTERS))
_OTHERS = ("SELECT COUNT(*) FROM information_schema.processlist "
           "WHERE id <> CONNECTION_ID() AND command NOT IN "
           "('Daemon', 'Binlog Dump') AND user NOT IN "
           "('system user', 'event_scheduler') AND NOT (command = 'Sleep' "
           "AND (db IS NULL OR db LIKE 'healreq\\_bench\\_%%'))")
_TICKS = os.sysconf('SC_CLK_TCK')


def _process_cpu(pid):
    """User plus system seconds of ``pid``, or None if it is not here."""
    try:
        with open('/proc/%d/stat' % pid, 'rb') as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b')') + 2:].split()
    # After "pid (comm) ": state is field 3, utime 14 and stime 15.
    return (int(fields[11]) + int(fields[12])) / float(_TICKS)


class Observer(object):
    """Snapshots of one server's CPU time, read counters and sessions."""

    def __init__(self, url):
        self._engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
        self._conn = self._engine.connect()
        self.pid = self._server_pid()

    def _server_pid(self):
        path = self._conn.exec_driver_sql('SELECT @@pid_file').scalar()
        try:
            with open(path or '') as handle:
                pid = int(handle.read().strip())
            with open('/proc/%d/comm' % pid) as handle:
                name = handle.read().strip()
        except (OSError, ValueError):
            return None
        return pid if name in ('mariadbd', 'mysqld') else None

    def snapshot(self):
        """The server's CPU seconds, counters and other sessions now."""
        rows = self._conn.exec_driver_sql(_STATUS).fetchall()
        others = self._conn.exec_driver_sql(_OTHERS).scalar()
        return dict(cpu=_process_cpu(self.pid) if self.pid else None,
                    counters={name: int(value) for name, value in rows},
                    others=int(others))

    def close(self):
        self._conn.close()
        self._engine.dispose()


def difference(before, after):
    """The server's work between two snapshots."""
    cpu = (after['cpu'] - before['cpu']
           if None not in (before['cpu'], after['cpu']) else None)
    counters = {name: after['counters'][name] - before['counters'][name]
                for name, _short in COUNTERS
                if name in before['counters'] and name in after['counters']}
    return dict(cpu=cpu, counters=counters,
                others=max(before['others'], after['others']))


def present(work):
    """The ``COUNTERS`` (name, short name) that ``work`` holds."""
    return [(name, short) for name, short in COUNTERS
            if name in work['counters']]


def rows_read(work):
    """Rows read by the storage engine: Innodb_rows_read or Rows_read."""
    counters = work['counters']
    return counters.get('Innodb_rows_read', counters.get('Rows_read', 0))


def rows_handled(work):
    """Every row the engine handed over, all kinds of read together."""
    return sum(value for name, value in work['counters'].items()
               if name.startswith('Handler_read'))
