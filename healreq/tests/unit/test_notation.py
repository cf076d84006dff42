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

"""Nova's string notations: CPU lists, per-node keys, byte sizes."""

from oslo_utils import strutils
import testtools

from healreq.objects import notation


class CpuListTest(testtools.TestCase):

    def test_elements(self):
        for spec, expected in (('0-3, ^1,6,,', {0, 2, 3, 6}),
                               ('0-3,^0-1,^3', {2}), ('', set()),
                               (' 1 - 2 ', {1, 2}), ('^1', set()),
                               ('4-4', {4}), ('^ 2,1-3', {1, 3}),
                               ('0-7,^3-4,9', {0, 1, 2, 5, 6, 7, 9})):
            self.assertEqual(expected, notation.parse_cpu_list(spec), spec)

    def test_unreadable_elements(self):
        for spec in ('x', '3-1', '-1', '1-', '^', '^x-2', '1-2-3', '^ x',
                     '^-1', '0,a'):
            self.assertRaises(notation.NotationError,
                              notation.parse_cpu_list, spec)

    def test_iteration_order_is_novas(self):
        # What Nova 34's parse_cpu_spec gives (in CPython): 16 and 8 share
        # a slot with 0 in a small set, and the first one in stays first.
        for spec, nova_order in (('16,8,0,1,^0', [16, 8, 1]),
                                 ('8,0-1', [8, 0, 1]),
                                 ('16,0-3,^1', [16, 0, 2, 3]),
                                 ('8-9,0-1', [8, 9, 0, 1])):
            self.assertEqual(nova_order,
                             list(notation.parse_cpu_list(spec)), spec)

    def test_ranges_count_together(self):
        limit = notation.MAX_CPU_IDS
        self.assertEqual(limit, len(notation.parse_cpu_list(
            '0-%d' % (limit - 1))))
        for spec in ('0-%d' % limit, '0-99999999999',
                     # Exclusions and overlaps count, too.
                     '0-600000,^600001-1200000', '0-600000,0-600000'):
            self.assertRaises(notation.NotationError,
                              notation.parse_cpu_list, spec)

    def test_an_invalid_element_before_too_many_cpus_is_reported(self):
        error = self.assertRaises(notation.NotationError,
                                  notation.parse_cpu_list, 'x,0-99999999999')
        self.assertIn("'x'", str(error))

    def test_format(self):
        self.assertEqual('0-3,6,8-9', notation.format_cpu_list(
            {9, 8, 6, 3, 2, 1, 0}))
        self.assertEqual('', notation.format_cpu_list(set()))
        self.assertEqual('5', notation.format_cpu_list([5]))


class PerNodeTest(testtools.TestCase):

    def test_read_up_to_the_first_gap(self):
        values = {'k.0': 'a', 'k.1': None, 'k.3': 'c', 'k': 'x'}
        self.assertEqual([('k.0', 'a'), ('k.1', None)],
                         notation.per_node(values, 'k'))
        self.assertEqual([], notation.per_node({'k.1': 'a'}, 'k'))

    def test_at_most_numa_nodes_max(self):
        values = {'k.%d' % node: node for node in range(200)}
        self.assertEqual(list(range(notation.NUMA_NODES_MAX)),
                         [v for _k, v in notation.per_node(values, 'k')])


class ByteSizeTest(testtools.TestCase):

    def test_sizes(self):
        for text, expected in (('2MB', 2 << 20), ('1GiB', 1 << 30),
                               ('512Kb', 65536), ('16Mbit', 2 << 20),
                               ('3072B', 3072), ('1.5KB', 1536),
                               ('.5MB', 1 << 19), ('0.4B', 1),
                               ('-2MB', -(2 << 20)), ('2MB\n', 2 << 20),
                               ('1QB', 1 << 100)):
            self.assertEqual(expected, notation.byte_size(text), text)

    def test_not_sizes(self):
        for text in ('2', '2 MB', 'big', '', '2mb', '1.MB', '2KiBB'):
            self.assertRaises(ValueError, notation.byte_size, text)

    def test_infinite(self):
        self.assertRaises(OverflowError, notation.byte_size,
                          '9' * 400 + 'B')


# Texts around the words Nova knows: cases, whitespace, near misses and
# values that are not text.
_TEXTS = ['1', 't', 'true', 'on', 'y', 'yes', '0', 'f', 'false', 'off', 'n',
          'no', 'TRUE', ' Yes\t', '\nOFF ', 'tru', 'yess', '', ' ', '2',
          '-1', '1.0', 'None', 'İ', 'ON\u00a0', '\u2003y', True, False, 1, 0,
          2, -0, 1.0, 0.0, None, [], {}, b'1', '01', ' 3', '3', 3, '+3',
          '-3', -3, '3.0', '1_000', '١', 1 << 70, str(1 << 70)]


class OsloReferenceTest(testtools.TestCase):
    """The readings agree with oslo.utils', which Nova calls."""

    def test_boolean(self):
        for text in _TEXTS:
            self.assertIs(strutils.bool_from_string(text),
                          notation.boolean(text), repr(text))

    def test_is_int_like(self):
        for text in _TEXTS:
            self.assertIs(strutils.is_int_like(text),
                          notation.is_int_like(text), repr(text))

    def test_readings(self):
        self.assertEqual(
            [True, True, False, False, False],
            [notation.boolean(v) for v in (' YES ', 1, 'no', 'maybe', None)])
        self.assertEqual(
            [True, True, False, False, False],
            [notation.is_int_like(v) for v in ('3', 3, '03', '3.0', True)])
