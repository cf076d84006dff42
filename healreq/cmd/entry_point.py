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

``python -m healreq`` and the documentation generators reach ``main`` and
``build_parser`` through here, so they follow the command wherever it
lives, also from a checkout that is not installed. setup.cfg's console
script names the same module (a unit test keeps the two equal).
"""

import importlib

# The module of setup.cfg's "nova-heal = healreq.cmd.main:main".
SCRIPT_MODULE = 'healreq.cmd.main'


def module():
    """The module that the ``nova-heal`` console script runs."""
    return importlib.import_module(SCRIPT_MODULE)


def main(argv=None):
    """Run ``nova-heal`` with ``argv``; return the exit code."""
    return module().main(argv)


def build_parser():
    """nova-heal's argparse parser, with every command and option."""
    return module().build_parser()
