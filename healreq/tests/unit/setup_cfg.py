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

"""What the checkout's setup.cfg declares, for the tests that check it."""

import configparser
import os
import re

PATH = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'setup.cfg')


def read():
    """setup.cfg, parsed."""
    setup = configparser.ConfigParser()
    setup.read(PATH)
    return setup


def supported_pythons():
    """The Python versions setup.cfg declares, oldest first."""
    found = re.findall(r'Programming Language :: Python :: (3\.\d+)$',
                       read()['metadata']['classifier'], re.M)
    return sorted(found, key=lambda v: tuple(map(int, v.split('.'))))


def console_scripts():
    """``{script name: 'module:function'}`` of its console scripts."""
    return dict(line.split(' = ') for line in read().get(
        'entry_points', 'console_scripts').strip().splitlines())
