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


"""Run a command; write its wall time, CPU time, peak RSS and exit status.

Usage: ``python -I -S measure.py RESULT_FILE COMMAND [ARGS...]``.

Linux counts in a child's ``ru_maxrss`` the resident size of the process
it was forked from, so a command started straight from the benchmark
(which holds SQLAlchemy, oslo.db and the results) would report at least
the benchmark's own size. This launcher is a bare interpreter (a few MiB):
the peak RSS it reports (``wait4``) is the command's own, or that of a
process the command forked and waited for (the tool's cell readers), if
larger. So is the CPU time (user and system, of all its threads and of
those processes), which, unlike the wall time, does not grow when other
work takes the machine's cores.
"""

import json
import os
import sys
import time


def main(argv):
    result_file, command = argv[0], argv[1:]
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            os.execvp(command[0], command)
        finally:
            os._exit(127)
    _pid, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - started
    with open(result_file, 'w') as handle:
        json.dump({'wall': wall, 'rss_kib': usage.ru_maxrss,
                   'cpu': usage.ru_utime + usage.ru_stime,
                   'code': os.waitstatus_to_exitcode(status)}, handle)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
