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

"""A guarded stream drops what it cannot write, and never raises."""

import io
import os
import sys

import testtools

from healreq.cmd import streams


def same_file(fd, path):
    here, there = os.fstat(fd), os.stat(path)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


class GuardedTest(testtools.TestCase):

    def broken_pipe_stream(self):
        reader, writer = os.pipe()
        os.close(reader)
        stream = open(writer, 'w', encoding='utf-8')
        self.addCleanup(stream.close)
        return stream

    def test_a_broken_pipe_goes_to_dev_null(self):
        stream = self.broken_pipe_stream()
        guarded = streams.Guarded(stream)
        self.assertEqual(6, guarded.write('report'))
        guarded.flush()
        self.assertTrue(guarded.failed)
        self.assertTrue(same_file(stream.fileno(), os.devnull))
        guarded.write('more')
        guarded.flush()
        stream.flush()  # what was buffered is gone quietly

    def test_a_closed_file_is_dropped(self):
        stream = io.StringIO()
        stream.close()
        guarded = streams.Guarded(stream)
        guarded.write('x')
        guarded.flush()
        self.assertTrue(guarded.failed)

    def test_text_that_cannot_be_encoded_is_the_callers_error(self):
        stream = io.TextIOWrapper(io.BytesIO(), encoding='ascii')
        guarded = streams.Guarded(stream)
        self.assertRaises(UnicodeEncodeError, guarded.write, '\u20ac')
        self.assertFalse(guarded.failed)

    def test_guarded_puts_the_streams_back(self):
        out, err = io.StringIO(), io.StringIO()
        self.patch(sys, 'stdout', out)
        self.patch(sys, 'stderr', err)
        with streams.guarded():
            self.assertIsInstance(sys.stdout, streams.Guarded)
            print('report')
            print('log', file=sys.stderr)
        self.assertIs(out, sys.stdout)
        self.assertIs(err, sys.stderr)
        self.assertEqual(('report\n', 'log\n'),
                         (out.getvalue(), err.getvalue()))
