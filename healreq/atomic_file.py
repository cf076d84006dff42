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

"""Replace a file in one step, safely in a directory others can write."""

import os
import tempfile


def write(path, text, mode):
    """Write ``text`` to ``path`` with permissions ``mode``, atomically.

    The text goes to a new file with an unpredictable name in the target's
    own directory, created exclusively (never through an existing file or
    symlink), and is then renamed over ``path``; a symlink at ``path`` is
    replaced, never followed. Readers see the old file or the new one.
    The temporary file is removed if anything fails.
    """
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(
        dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        with os.fdopen(descriptor, 'w') as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
