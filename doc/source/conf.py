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

"""Sphinx configuration of the healreq documentation."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_exts'))

extensions = [
    'openstackdocstheme',
    'oslo_config.sphinxext',
    'reno.sphinxext',
    'nova_heal_docs',
]

# openstackdocstheme
openstackdocs_repo_name = 'openstack/healreq'
openstackdocs_pdf_link = False
openstackdocs_auto_name = False
openstackdocs_use_storyboard = False
openstackdocs_bug_project = 'healreq'
openstackdocs_bug_tag = 'doc'

project = 'healreq'
copyright = 'healreq developers'
master_doc = 'index'
source_suffix = '.rst'
exclude_patterns = ['_build']
pygments_style = 'native'
html_theme = 'openstackdocs'
html_static_path = []

# The command reference doubles as the nova-heal(1) manual page.
man_pages = [
    ('cli/nova-heal', 'nova-heal',
     'find and heal OpenStack Nova RequestSpecs that drifted from their '
     'instances', ['healreq developers'], 1),
]

# Keep '--option' and quotes as typed: the references quote command lines.
smartquotes = False
