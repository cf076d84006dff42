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

"""Cell database URL templates as Nova formats them, and masking."""

import testtools

from healreq.db import urls
from healreq import masking

REFERENCE = 'mysql+pymysql://nova:p%40ss@db.example.org/nova?charset=utf8'
MULTI_HOST = 'rabbit://a:b@h1:5672,c:d@h2:5673/vh'


class FormatCellUrlTest(testtools.TestCase):

    def test_documented_template(self):
        self.assertEqual(
            'mysql+pymysql://nova:p%40ss@db.example.org/nova_cell1'
            '?charset=utf8',
            urls.format_cell_url(
                '{scheme}://{username}:{password}@{hostname}/{path}_cell1'
                '?{query}', REFERENCE))

    def test_password_is_not_unquoted(self):
        # Nova substitutes urlparse's raw password: the %-escape stays.
        self.assertEqual('p%40ss',
                         urls.format_cell_url('{password}', REFERENCE))

    def test_path_loses_its_leading_slash(self):
        self.assertEqual('nova', urls.format_cell_url('{path}', REFERENCE))

    def test_missing_port_renders_none(self):
        self.assertEqual('db.example.org:None',
                         urls.format_cell_url('{hostname}:{port}', REFERENCE))

    def test_missing_parts_render_none_or_empty(self):
        # urlparse gives None for absent credentials and '' for absent
        # query and fragment; Nova substitutes them as they are.
        self.assertEqual(
            'None|None|None|||None',
            urls.format_cell_url(
                '{username}|{password}|{hostname}|{query}|{fragment}|'
                '{port}', 'sqlite:////var/lib/nova/nova.sqlite'))

    def test_reference_with_port(self):
        self.assertEqual(
            'mysql+pymysql://nova:pw@db:3307/nova_cell1',
            urls.format_cell_url(
                '{scheme}://{username}:{password}@{hostname}:{port}/'
                '{path}_cell1',
                'mysql+pymysql://nova:pw@db:3307/nova'))

    def test_port_is_an_integer(self):
        # Nova passes urlparse's int port, so format specs apply to it.
        self.assertEqual('03307', urls.format_cell_url(
            '{port:05d}', 'mysql://nova:pw@db:3307/nova'))

    def test_fragment(self):
        self.assertEqual(
            'mysql://db/nova_cell1#frag',
            urls.format_cell_url('{scheme}://{hostname}/{path}_cell1'
                                 '#{fragment}', 'mysql://u:p@db/nova#frag'))

    def test_hostname_is_lower_cased(self):
        # urlparse().hostname lower-cases, and so does Nova's template.
        self.assertEqual('db.example.org', urls.format_cell_url(
            '{hostname}', 'mysql://u:p@DB.Example.ORG/nova'))

    def test_multi_host_indexed_fields(self):
        self.assertEqual(
            'h1|5673|c|b|5672|h2|d|a',
            urls.format_cell_url(
                '{hostname1}|{port2}|{username2}|{password1}|{port1}|'
                '{hostname2}|{password2}|{username1}', MULTI_HOST))

    def test_multi_host_ports_are_strings(self):
        # _parse_netloc keeps the raw text: no int conversion.
        self.assertEqual('5672', urls.format_cell_url('{port1!s}',
                                                      MULTI_HOST))
        self.assertRaises(urls.TemplateError, urls.format_cell_url,
                          '{port1:05d}', MULTI_HOST)

    def test_multi_host_unindexed_fields_follow_urlparse(self):
        # urlparse reads the host after the last '@' and the credentials
        # before the first ':'; Nova substitutes exactly that.
        self.assertEqual(
            'h2|5673|a|b@h1:5672,c:d',
            urls.format_cell_url('{hostname}|{port}|{username}|{password}',
                                 MULTI_HOST))

    def test_multi_host_without_credentials(self):
        self.assertEqual(
            '|None|h1|5672',
            urls.format_cell_url(
                '{username1}|{password1}|{hostname1}|{port1}',
                'rabbit://h1:5672,c:d@h2:5673/vh'))

    def test_multi_host_entry_splits_credentials_at_first_at_sign(self):
        # Nova's _parse_netloc: netloc.split('@', 1). With an unescaped
        # '@' in a password the host is what follows the FIRST '@'.
        self.assertEqual(
            'a|p|ss@h1|5672',
            urls.format_cell_url(
                '{username1}|{password1}|{hostname1}|{port1}',
                'rabbit://a:p@ss@h1:5672,c:d@h2:5673/vh'))

    def test_multi_host_without_computable_port_is_a_template_error(self):
        # urlparse cannot compute .port here ('5672,h2:5673'); Nova then
        # fails to build its substitutions and leaves the template
        # unformatted, even for fields that do not need the port. We
        # report it instead.
        self.assertRaises(urls.TemplateError, urls.format_cell_url,
                          '{hostname1}', 'rabbit://a:b@h1:5672,h2:5673/vh')

    def test_multi_host_without_computable_port_plain_url(self):
        plain = 'mysql+pymysql://nova:pw@db/nova_cell1'
        self.assertEqual(plain, urls.format_cell_url(
            plain, 'rabbit://a:b@h1:5672,h2:5673/vh'))

    def test_single_host_has_no_indexed_fields(self):
        self.assertRaises(urls.TemplateError, urls.format_cell_url,
                          '{hostname1}', REFERENCE)

    def test_ipv6_reference(self):
        self.assertEqual(
            'mysql+pymysql://nova:pw@[::1]:3306/nova_cell1',
            urls.format_cell_url(
                '{scheme}://{username}:{password}@[{hostname}]:{port}/'
                '{path}_cell1',
                'mysql+pymysql://nova:pw@[::1]:3306/nova'))

    def test_ipv6_multi_host_port_keeps_colon(self):
        # Nova's _parse_netloc keeps everything after ']' as the port.
        self.assertEqual('::1|:5672|h2|None', urls.format_cell_url(
            '{hostname1}|{port1}|{hostname2}|{port2}',
            'rabbit://u:p@[::1]:5672,x:y@h2/vh'))

    def test_invalid_ipv6_reference_is_a_template_error(self):
        self.assertRaises(urls.TemplateError, urls.format_cell_url,
                          '{scheme}://h/{path}_cell1', 'mysql://u:p@[::1/n')

    def test_plain_url_unchanged(self):
        plain = 'mysql+pymysql://nova:secret@cell1-db/nova_cell1'
        for reference in (REFERENCE, MULTI_HOST, None, '',
                          'mysql://u:p@[::1/n',
                          'rabbit://a:b@h1:5672,h2:5673/vh'):
            self.assertEqual(plain, urls.format_cell_url(plain, reference),
                             reference)

    def test_plain_url_with_lone_closing_brace_unchanged(self):
        # str.format raises on a single '}'; Nova returns the URL as is.
        stored = 'mysql+pymysql://nova:se}cret@db/nova_cell1'
        self.assertEqual(stored, urls.format_cell_url(stored, REFERENCE))

    def test_template_without_reference(self):
        error = self.assertRaises(
            urls.TemplateError, urls.format_cell_url,
            '{scheme}://{username}:{password}@{hostname}/{path}_cell1', None)
        self.assertIn('[database]/connection', str(error))

    def test_unknown_field(self):
        error = self.assertRaises(urls.TemplateError, urls.format_cell_url,
                                  '{scheme}://{nonsense}/nova', REFERENCE)
        self.assertIn('KeyError', str(error))

    def test_plain_url_with_braces_in_password_is_used_as_stored(self):
        # Nova falls back to the stored value when formatting fails; the
        # password must not surface in an error either.
        for stored in ('mysql+pymysql://nova:Leak{LeakPart}@db/nova_cell1',
                       'mysql+pymysql://nova:x{0}y@db/nova_cell1?a=b',
                       'mysql+pymysql://nova:{}@db/nova_cell1'):
            for reference in (REFERENCE, None):
                self.assertEqual(stored,
                                 urls.format_cell_url(stored, reference))

    def test_template_errors_never_quote_the_value(self):
        for stored in ('{scheme}://nova:Leak{LeakPart}@{hostname}/x',
                       '{scheme}://nova:Leak{0}@db/x', '{hostname1}Leak'):
            error = self.assertRaises(urls.TemplateError,
                                      urls.format_cell_url, stored,
                                      REFERENCE)
            self.assertNotIn('Leak', str(error))

    def test_template_errors_are_value_errors(self):
        self.assertTrue(issubclass(urls.TemplateError, ValueError))

    def test_malformed_templates(self):
        for template in ('{0}', '{hostname.real}', '{hostname!z}',
                         '{hostname', '{port:d}', '{path[99]}'):
            self.assertRaises(urls.TemplateError, urls.format_cell_url,
                              template, REFERENCE)

    def test_template_error_does_not_leak_password(self):
        error = self.assertRaises(urls.TemplateError, urls.format_cell_url,
                                  '{nonsense}', REFERENCE)
        self.assertNotIn('p%40ss', str(error))

    def test_doubled_braces_are_literal(self):
        self.assertEqual(
            'mysql://db/nova_cell1?x={y}',
            urls.format_cell_url('{scheme}://{hostname}/{path}_cell1'
                                 '?x={{y}}', 'mysql://u:p@db/nova'))

    def test_doubled_braces_without_fields(self):
        # Nova formats every stored value, so '{{' becomes '{' even when
        # nothing else is substituted.
        self.assertEqual('mysql://u:p@db/nova?x={y}', urls.format_cell_url(
            'mysql://u:p@db/nova?x={{y}}', REFERENCE))


class MaskPasswordTest(testtools.TestCase):

    def test_masks_url_in_message(self):
        self.assertEqual(
            'cell database unreachable: cannot connect to '
            'mysql+pymysql://nova:****@db/nova_cell1 (timed out)',
            masking.mask_password(
                'cell database unreachable: cannot connect to '
                'mysql+pymysql://nova:s3cr3t@db/nova_cell1 (timed out)'))

    def test_masks_every_url(self):
        masked = masking.mask_password(
            'api mysql://nova:one@db/nova_api, cell '
            'mysql://nova:two@db2/nova_cell1')
        self.assertEqual('api mysql://nova:****@db/nova_api, cell '
                         'mysql://nova:****@db2/nova_cell1', masked)

    def test_masks_encoded_and_colon_passwords(self):
        self.assertEqual('mysql://nova:****@db/nova',
                         masking.mask_password('mysql://nova:p%40ss@db/nova'))
        self.assertEqual('mysql://nova:****@db/nova',
                         masking.mask_password('mysql://nova:a:b@db/nova'))

    def test_masks_passwords_with_spaces_and_braces(self):
        for password in ('Leak Part Secret', 'Leak{LeakPart}', ' Leak ',
                         'Le/ak:Pa rt'):
            text = ('cannot open mysql+pymysql://healreq:%s@db:3306/x: '
                    'refused' % password)
            masked = masking.mask_password(text)
            for part in password.split():
                self.assertNotIn(part, masked)
            self.assertIn('mysql+pymysql://healreq:****@db:3306/x', masked)

    def test_masks_quoted_url(self):
        masked = masking.mask_password(
            "Could not parse URL 'mysql://nova:hunter2@db:3306/nova'")
        self.assertNotIn('hunter2', masked)
        self.assertIn("'mysql://nova:****@db:3306/nova'", masked)

    def test_leaves_urls_without_password(self):
        for text in ('mysql://nova@db/nova',
                     'sqlite:////var/lib/nova/nova.sqlite',
                     'see http://db.example.org:8080/status',
                     'no url at all: user:name@host'):
            self.assertEqual(text, masking.mask_password(text))

    def test_none(self):
        self.assertIsNone(masking.mask_password(None))

    def test_non_string_is_converted(self):
        error = ValueError('mysql://nova:secret@db/nova')
        self.assertEqual('mysql://nova:****@db/nova',
                         masking.mask_password(error))


class MaskQueryPasswordTest(testtools.TestCase):
    """Drivers read passwords from the query string too."""

    def test_password_parameter(self):
        self.assertEqual(
            'cannot open mysql+pymysql://u@h/db?password=****: refused',
            masking.mask_password('cannot open mysql+pymysql://u@h/db'
                                  '?password=TopSecret42: refused'))

    def test_secret_keys_in_any_case_and_position(self):
        for key in ('password', 'passwd', 'PASSWORD', 'PassWd', 'pwd',
                    'ssl_key_password', 'sslpassword', 'passphrase',
                    'client_secret', 'auth_token', 'p%61ssword',
                    'pass%77ord'):
            for url in ('mysql://u@h/db?%s=TopSecret42' % key,
                        'mysql://u@h/db?charset=utf8&%s=TopSecret42' % key,
                        'mysql://u@h/db?%s=TopSecret42&charset=utf8' % key):
                masked = masking.mask_password('cannot open %s (x)' % url)
                self.assertNotIn('TopSecret42', masked)
                self.assertIn('%s=****' % key, masked)

    def test_other_parameters_are_kept(self):
        for text in ('mysql://u@h/db?charset=utf8&read_timeout=5',
                     'sqlite:////var/lib/x.sqlite?mode=ro&uri=true',
                     'see https://example.org/?q=pass',
                     'mysql://u@h/db?ssl_key=/etc/ssl/key.pem'):
            self.assertEqual(text, masking.mask_password(text))

    def test_value_ends_at_the_end_of_the_url(self):
        for text, masked in (
                ('mysql://u@h/d?password=a:b#f', 'mysql://u@h/d?password=****'
                                                 '#f'),
                ("'mysql://u@h/d?passwd=x'.", "'mysql://u@h/d?passwd=****'."),
                ('"mysql://u@h/d?passwd=x"', '"mysql://u@h/d?passwd=****"'),
                ('mysql://u@h/d?passwd=x:', 'mysql://u@h/d?passwd=****:'),
                ('mysql://u@h/d?passwd=x y', 'mysql://u@h/d?passwd=**** y')):
            self.assertEqual(masked, masking.mask_password(text))

    def test_userinfo_and_query_together(self):
        masked = masking.mask_password(
            'mysql://nova:one@db/nova?passwd=two&x=1, '
            'mysql://nova@db2/cell?password=three')
        self.assertEqual('mysql://nova:****@db/nova?passwd=****&x=1, '
                         'mysql://nova@db2/cell?password=****', masked)


class MaskUrlTest(testtools.TestCase):

    def test_every_secret_of_a_url(self):
        masked = urls.mask_url('mysql+pymysql://u:Leak Part@h:3306/db'
                               '?password=Top Secret42&charset=utf8'
                               '&ssl_key_password=Key%20Pw')
        for part in ('Leak', 'Part', 'Top', 'Secret42', 'Key', 'Pw'):
            self.assertNotIn(part, masked)
        self.assertEqual('mysql+pymysql://u:****@h:3306/db?charset=utf8'
                         '&password=****&ssl_key_password=****', masked)

    def test_url_without_secrets_is_unchanged(self):
        for url in ('mysql+pymysql://nova@db/nova?charset=utf8',
                    'sqlite:////var/lib/nova-heal/audit.sqlite'):
            self.assertEqual(url, urls.mask_url(url))

    def test_unparsable_url_is_masked_as_text(self):
        self.assertEqual('not a url?password=****',
                         urls.mask_url('not a url?password=TopSecret42'))
