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


"""Passwords out of every text shown or logged.

The lowest layer: errors, logs and reports all mask what they print, so
this needs nothing of the package.
"""

import re
from urllib import parse

# ``scheme://user:password@`` and, in multi-host URLs, ``,user:password@``.
# SQLAlchemy passwords may contain '/', spaces and braces but not '@'; a
# password is masked up to the next '@' on its line, even if that masks a
# little more than the password.
_PASSWORD_IN_URL = re.compile(r'(://[^:/@\s]*:)[^@\n]*@')
_PASSWORD_IN_HOST_LIST = re.compile(r'(,[^:/@,\s]*:)[^@\n,]*@')
# ``?key=value`` or ``&key=value``: drivers take their password from the
# query string too (``?password=...``, ``&ssl_key_password=...``). In free
# text a value ends at '&', '#', a quote, white space, or a colon that ends
# the text or comes before white space ("cannot open URL: reason").
_QUERY_PARAMETER = re.compile(
    r'([?&;]([^=&#?\s\'"]+)=)(?:[^&#\s\'":]|:(?!\s|$))*')
# Query keys whose value is masked: password, passwd, passphrase,
# ssl_key_password, sslpassword, pwd, client_secret, auth_token...
_SECRET_KEY = re.compile(r'pass|pwd|secret|token', re.I)
MASK = '****'


def is_secret_key(key):
    """Whether a URL query key names a secret (case-insensitive)."""
    return bool(_SECRET_KEY.search(parse.unquote_plus(key)))


def _mask_parameter(match):
    if not is_secret_key(match.group(2)):
        return match.group(0)
    return match.group(1) + MASK


def mask_password(text):
    """Replace every password of every URL in ``text`` with ``****``.

    Passwords in the user information and the values of query parameters
    whose name says they are secret (``password``, ``passwd``,
    ``ssl_key_password``...; any case, percent-encoded or not).
    """
    if text is None:
        return text
    text = _PASSWORD_IN_URL.sub(r'\1%s@' % MASK, str(text))
    text = _PASSWORD_IN_HOST_LIST.sub(r'\1%s@' % MASK, text)
    return _QUERY_PARAMETER.sub(_mask_parameter, text)
