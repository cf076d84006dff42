#!/usr/bin/env python3
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

"""Find Python interpreters by minor version, or say which one is missing.

``tools/find_python.py 3.10 3.13`` prints ``VERSION PATH`` per line. It
looks, in this order, at ``$HEALREQ_PYTHON310`` (dots removed), at
``python3.10`` on PATH and at ``$(pyenv root)/versions/3.10.*``, and keeps
the first candidate that really runs that version. Exit status 1 and one
line per missing interpreter on stderr when any is not found.
"""

import glob
import os
import shutil
import subprocess
import sys


def env_var(version):
    """The variable that names the interpreter for ``version``."""
    return 'HEALREQ_PYTHON' + version.replace('.', '')


def _pyenv_root():
    root = os.environ.get('PYENV_ROOT')
    if root:
        return root
    if shutil.which('pyenv'):
        try:
            out = subprocess.run(['pyenv', 'root'], capture_output=True,
                                 text=True, timeout=30, check=True)
            return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return os.path.expanduser('~/.pyenv')


def _patch_level(path):
    try:
        return int(path.split(os.sep)[-3].split('.')[2])
    except (IndexError, ValueError):
        return -1


def _candidates(version):
    named = os.environ.get(env_var(version))
    if named:
        yield named
    on_path = shutil.which('python' + version)
    if on_path:
        yield on_path
    pattern = os.path.join(_pyenv_root(), 'versions', version + '.*',
                           'bin', 'python' + version)
    yield from sorted(glob.glob(pattern), key=_patch_level, reverse=True)


def _runs_version(path, version):
    try:
        out = subprocess.run(
            [path, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
            capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and out.stdout.strip() == version


def find(version):
    """Return the path of a working Python ``version`` or None."""
    for path in _candidates(version):
        if _runs_version(path, version):
            return os.path.abspath(path)
    return None


def missing_message(version):
    """One line saying where Python ``version`` was looked for."""
    return ('Python %s not found: looked at $%s, python%s on PATH and '
            '$(pyenv root)/versions/%s.*; install it (for example '
            '"pyenv install %s") or set %s to its path'
            % (version, env_var(version), version, version, version,
               env_var(version)))


def main(argv):
    missing = []
    for version in argv:
        path = find(version)
        if path is None:
            missing.append(version)
            print('ERROR: ' + missing_message(version), file=sys.stderr)
        else:
            print('%s %s' % (version, path))
    return 1 if missing else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
