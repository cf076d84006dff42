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

"""Who runs a command, as the audit store records it.

The operator is the process's real user: its passwd name with its uid,
``root (uid 0)``, or ``uid=N`` alone when the user has no passwd entry (a
container started under an arbitrary UID). The environment can say
anything, so the names it gives (``SUDO_USER``, and ``LOGNAME``/``USER``,
which ``getpass.getuser()`` trusts) are only kept as a labelled
annotation where they differ: ``root (uid 0, SUDO_USER=alice)``. Nothing
recorded holds a control character.
"""

import os
import pwd

# The variables getpass.getuser() reads the login name from, in its order.
LOGIN_VARIABLES = ('LOGNAME', 'USER', 'LNAME', 'USERNAME')
# The width of runs.operator, and of one name taken from the environment.
MAX_LENGTH = 255
MAX_CLAIM = 64


def printable(text):
    """``text`` without control (or other unprintable) characters."""
    return ''.join(char for char in text if char.isprintable())


def passwd_name(uid):
    """The passwd name of ``uid`` (printable), or None if it has none."""
    try:
        name = printable(pwd.getpwuid(uid).pw_name)
    except KeyError:
        return None
    return name or None


def operator(uid=None, environ=None):
    """The operator to record for the real user ``uid`` (default: ours).

    ``environ`` (default: ours) adds the annotation (see the module).
    """
    uid = os.getuid() if uid is None else uid
    environ = os.environ if environ is None else environ
    name = passwd_name(uid)
    claimed = [('SUDO_USER', environ.get('SUDO_USER'))] + [next(
        ((variable, environ[variable]) for variable in LOGIN_VARIABLES
         if environ.get(variable)), (None, None))]
    if name is None:
        name, details = 'uid=%d' % uid, []
    else:
        details = ['uid %d' % uid]
    seen = {name}
    for variable, value in claimed:
        value = printable(value or '')[:MAX_CLAIM]
        if value and value not in seen:
            details.append('%s=%s' % (variable, value))
            seen.add(value)
    if details:
        name = '%s (%s)' % (name, ', '.join(details))
    return name[:MAX_LENGTH]
