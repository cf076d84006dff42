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


"""The ``nova-heal`` console script, and where it finds the command.

setup.cfg's console script, ``python -m healreq`` and the documentation
generators reach the command through here, so they follow it wherever
it lives, also from a checkout that is not installed. ``nova-heal
--version`` alone is answered here: it needs none of the library, whose
imports are most of the command's start-up.
"""

import importlib
import sys

from healreq.cmd import streams
from healreq import version

# The module of the command: its ``main`` and ``build_parser``.
COMMAND_MODULE = 'healreq.cmd.main'


def module():
    """The module that runs the ``nova-heal`` command."""
    return importlib.import_module(COMMAND_MODULE)


def main(argv=None):
    """Run ``nova-heal`` with ``argv``; return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments == ['--version']:
        return _print_version()
    return module().main(arguments)


def _print_version():
    """Print what the command's own ``--version`` prints; return 0."""
    streams.reopen_closed()
    with streams.guarded():
        sys.stdout.write(version.version_info.release_string() + '\n')
    return 0


def build_parser():
    """nova-heal's argparse parser, with every command and option."""
    return module().build_parser()
