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

"""Control characters are escaped visibly, and log lines stay lines."""

import io
import logging

import testtools

from healreq.cmd import visible


class EscapeTest(testtools.TestCase):

    def test_ordinary_text_is_unchanged(self):
        for text in ('m1.large', 'Zone \u00e9t\u00e9 \u20ac', 'a\\nb',
                     '\u65e5\u672c', 'x\u00a0y', ''):
            self.assertEqual(text, visible.escape(text))

    def test_controls_are_escaped(self):
        for raw, shown in (
                ('\n', '\\n'), ('\r', '\\r'), ('\t', '\\t'),
                ('\x00', '\\x00'), ('\x1b[31m', '\\x1b[31m'),
                ('\x7f', '\\x7f'), ('\x85', '\\x85'), ('\x9b', '\\x9b'),
                ('\u2028', '\\u2028'), ('\u2029', '\\u2029'),
                ('\u200e', '\\u200e'), ('\u200f', '\\u200f'),
                ('\u202a', '\\u202a'), ('\u202e', '\\u202e'),
                ('\u2066', '\\u2066'), ('\u2069', '\\u2069'),
                ('\u061c', '\\u061c'), ('\ufeff', '\\ufeff'),
                ('\U000e0001', '\\U000e0001'), ('\ud800', '\\ud800')):
            self.assertEqual('a%sb' % shown, visible.escape('a%sb' % raw))


class FormatterTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.stream = io.StringIO()
        handler = logging.StreamHandler(self.stream)
        handler.setFormatter(logging.Formatter('P %(message)s'))
        self.logger = logging.Logger('visible-test')
        self.logger.addHandler(handler)
        visible.escape_logs(self.logger)

    def test_a_message_is_one_line(self):
        self.logger.warning('cell %s', 'c1\nP forged\x1b[2J')
        self.assertEqual('P cell c1\\nP forged\\x1b[2J\n',
                         self.stream.getvalue())

    def test_a_traceback_keeps_its_lines_escaped(self):
        try:
            raise ValueError('bad\x1b[31m')
        except ValueError:
            self.logger.exception('failed \u202e')
        lines = self.stream.getvalue().splitlines()
        self.assertEqual('P failed \\u202e', lines[0])
        self.assertEqual('Traceback (most recent call last):', lines[1])
        self.assertEqual('ValueError: bad\\x1b[31m', lines[-1])

    def test_escaping_is_installed_once(self):
        visible.escape_logs(self.logger)
        formatter = self.logger.handlers[0].formatter
        self.assertIsInstance(formatter, visible.Formatter)
        self.assertNotIsInstance(formatter.formatter, visible.Formatter)
