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


"""The module behind the ``nova-heal`` console script.

``python -m healreq`` and the documentation generators find ``main`` and
``build_parser`` through the installed entry point, so they follow the
command wherever setup.cfg says it lives.
"""

import importlib
from importlib import metadata


def module():
    """The module that the ``nova-heal`` console script runs."""
    for entry in metadata.distribution('healreq').entry_points:
        if entry.group == 'console_scripts' and entry.name == 'nova-heal':
            return importlib.import_module(entry.module)
    raise LookupError('the healreq distribution has no nova-heal script')


def main(argv=None):
    """Run ``nova-heal`` with ``argv``; return the exit code."""
    return module().main(argv)


def build_parser():
    """nova-heal's argparse parser, with every command and option."""
    return module().build_parser()
