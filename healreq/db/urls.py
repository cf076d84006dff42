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


"""Cell database URLs: template formatting as Nova does it, and masking.

``cell_mappings.database_connection`` may be a ``str.format`` template
filled from the local ``[database]/connection``. Nova's rules apply
unchanged: missing parts render as ``None``, indexed fields exist for
comma-separated multi-host references, and any failure leaves the stored
value untouched.
"""

from urllib import parse

from sqlalchemy.engine import url as sa_url

from healreq import masking


class TemplateError(ValueError):
    """The stored value is a template that cannot be formatted."""


def _split_host_entry(netloc):
    """Split one ``user:pass@host:port`` entry, keeping raw text."""
    if '@' in netloc:
        userpass, hostport = netloc.split('@', 1)
    else:
        userpass, hostport = '', netloc
    parts = {'username': None, 'password': None,
             'hostname': None, 'port': None}
    if hostport.startswith('['):
        end = hostport.find(']')
        if end < 0:
            raise ValueError('Invalid IPv6 URL')
        parts['hostname'] = hostport[1:end]
        parts['port'] = hostport[end + 1:]
    elif ':' in hostport:
        parts['hostname'], parts['port'] = hostport.split(':', 1)
    else:
        parts['hostname'] = hostport
    if ':' in userpass:
        parts['username'], parts['password'] = userpass.split(':', 1)
    else:
        parts['username'] = userpass
    return parts


def _substitutions(reference):
    ref = parse.urlparse(reference)
    values = {
        'scheme': ref.scheme,
        'username': ref.username,
        'password': ref.password,
        'hostname': ref.hostname,
        'port': ref.port,
        'path': ref.path.lstrip('/'),
        'query': ref.query,
        'fragment': ref.fragment,
    }
    if ',' in ref.netloc:
        for index, entry in enumerate(ref.netloc.split(','), start=1):
            for key, value in _split_host_entry(entry).items():
                values['%s%d' % (key, index)] = value
    return values


def format_cell_url(stored, reference):
    """Return the connection URL Nova would use for a cell mapping.

    ``reference`` is the local ``[database]/connection`` (may be None).
    Like Nova, a value that cannot be formatted is used as it is stored
    when it is a complete URL whose braces are all in its password (a
    plain URL with a password such as ``p{x}``). Raises TemplateError when
    it is a real template that Nova would leave unformatted, so that the
    caller reports it instead of connecting to a URL with braces in it.
    The error never quotes the stored value or the formatting error, which
    may hold parts of a password.
    """
    if reference is None:
        if _is_template(stored):
            raise TemplateError('the cell database URL is a template but '
                                '[database]/connection is not set')
        return stored
    try:
        return stored.format(**_substitutions(reference))
    except (KeyError, IndexError, ValueError, AttributeError,
            TypeError) as exc:
        if _is_template(stored):
            raise TemplateError(
                'the cell database URL template cannot be formatted from '
                '[database]/connection (%s)' % type(exc).__name__)
        return stored


def _is_template(stored):
    """Whether braces in ``stored`` stand anywhere but in its password."""
    if '{' not in stored and '}' not in stored:
        return False
    try:
        url = sa_url.make_url(stored)
    except Exception:
        return True
    visible = [url.drivername, url.username, url.host, url.database]
    for key, value in url.query.items():
        visible.append(key)
        visible.extend([value] if isinstance(value, str) else value)
    return any('{' in part or '}' in part for part in visible if part)


def mask_url(url):
    """``url`` as it may be shown: every secret in it is ``****``.

    Exact for a URL SQLAlchemy parses, whatever its secrets hold (white
    space included); otherwise masked as free text (``mask_password``).
    """
    try:
        parsed = sa_url.make_url(url)
    except Exception:
        return masking.mask_password(url)
    if parsed.password is not None:
        parsed = parsed.set(password=masking.MASK)
    parsed = parsed.set(query={
        key: masking.MASK if masking.is_secret_key(key) else value
        for key, value in parsed.query.items()})
    return masking.mask_password(parsed.render_as_string(hide_password=False))
