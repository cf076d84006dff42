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


"""The ``nova-heal`` console script (setup.cfg) and ``python -m healreq``.

``nova-heal --version`` alone is answered here, without importing the
library; any other command line goes to ``main``, where the command is.
"""

import sys

from healreq.cmd import streams
from healreq import version


def main(argv=None):
    """Run ``nova-heal`` with ``argv``; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ['--version']:
        return _print_version()
    # Imported here, not at the top: the command's modules import the
    # whole library (oslo.config, oslo.db, SQLAlchemy...), most of a
    # command's start-up, which --version alone does not need. Measured
    # in benchmarks/README.rst ("Start-up"): --version 0.12 s this way,
    # a one-instance dry run 1.09 s.
    from healreq.cmd import main as command
    return command.main(arguments)


def _print_version():
    """Print what the command's own ``--version`` prints; return 0."""
    streams.reopen_closed()
    with streams.guarded():
        sys.stdout.write(version.version_info.release_string() + '\n')
    return 0
