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


"""Configuration options, one module per option group."""

from healreq.conf import database
from healreq.conf import default
from healreq.conf import healreq as healreq_group
from healreq.conf import opts


def register_opts(conf):
    """Register every option healreq reads on ``conf``."""
    default.register_opts(conf)
    database.register_opts(conf)
    healreq_group.register_opts(conf)


def option(group, name):
    """The declared option ``name`` of ``group`` ('DEFAULT' for [DEFAULT]).

    Its ``default`` and its type's bounds are the one source of those
    values: code that needs them outside a ConfigOpts reads them here.
    KeyError if healreq declares no such option.
    """
    for declared, group_opts in opts.list_opts():
        if getattr(declared, 'name', declared) != group:
            continue
        for opt in group_opts:
            if opt.name == name:
                return opt
    raise KeyError('[%s]/%s' % (group, name))


def check(conf):
    """Read every option healreq reads once, on a parsed ``conf``.

    oslo.config converts and bounds-checks a value only when it is read:
    reading them all up front makes a bad value in a configuration file
    an error (cfg.Error) before anything else is done.
    """
    for group, group_opts in opts.list_opts():
        name = getattr(group, 'name', group)
        values = conf if name == 'DEFAULT' else conf[name]
        for opt in group_opts:
            getattr(values, opt.dest)
