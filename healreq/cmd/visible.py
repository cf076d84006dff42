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

"""Control characters made visible in text output and logs.

Values read from the databases (a flavor name, a Glance property, a cell
name) may hold line breaks, terminal escape sequences or bidi controls.
Written as they are, they could forge report lines or drive the
terminal; escaped (``\\n``, ``\\x1b``, ``\\u202e``), each line of the
report and of the log stays one unambiguous line. JSON needs none of
this: it is written ASCII-only, with its own escapes.
"""

import logging
import unicodedata

# Control characters (C0, DEL, C1), format characters (bidi controls,
# zero-width characters), surrogates, unassigned code points (a newer
# Unicode may make them format characters) and the line and paragraph
# separators. Every other character, spaces included, is shown as it is.
_ESCAPED = frozenset(('Cc', 'Cf', 'Cs', 'Cn', 'Zl', 'Zp'))
_SHORT = {'\n': '\\n', '\r': '\\r', '\t': '\\t'}


def _escaped(char):
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return '\\x%02x' % code
    if code < 0x10000:
        return '\\u%04x' % code
    return '\\U%08x' % code


def escape(text):
    """``text`` with every control or format character escaped."""
    # Every character escaped here is one str.isprintable() refuses.
    if text.isprintable():
        return text
    return ''.join(_escaped(char) if unicodedata.category(char) in _ESCAPED
                   else char for char in text)


class Formatter(logging.Formatter):
    """Wraps a handler's formatter: every log line comes out escaped.

    The message (with its prefix) becomes one line whatever it holds; a
    traceback keeps its lines, each of them escaped.
    """

    def __init__(self, formatter):
        super().__init__()
        self.formatter = formatter

    def format(self, record):
        text = self.formatter.format(record)
        if not record.exc_info or '\n' not in text:
            return escape(text)
        # The message, without the traceback, then the traceback's lines.
        exc_info, exc_text = record.exc_info, record.exc_text
        record.exc_info = record.exc_text = None
        try:
            line = escape(self.formatter.format(record))
        finally:
            record.exc_info, record.exc_text = exc_info, exc_text
        return '\n'.join([line] + [escape(part) for part in
                                   self._trace(record).split('\n')])

    def _trace(self, record):
        try:
            # oslo.log's formatter prefixes each line as it does a message.
            trace = self.formatter.formatException(record.exc_info,
                                                   record=record)
        except TypeError:
            trace = self.formatter.formatException(record.exc_info)
        return trace.rstrip('\n')


def escape_logs(logger=None):
    """Escape what every handler of ``logger`` (default: root) writes."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        formatter = handler.formatter or logging.Formatter()
        if not isinstance(formatter, Formatter):
            handler.setFormatter(Formatter(formatter))
