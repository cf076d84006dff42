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


"""The command-line reference, generated from nova-heal's own parser.

The documentation (CLI reference and the ``nova-heal(1)`` man page) renders
these reStructuredText lines, so that every command and option documented
is one the parser accepts, with the help text it prints.
"""

import argparse

from healreq.cmd import main

# Usage lines are wrapped to this width in the generated text.
_WIDTH = 72


def build_parser():
    """nova-heal's argparse parser (see ``main.build_parser``)."""
    return main.build_parser()


def subcommands(parser):
    """``(name, parser)`` of each subcommand of ``parser``, in order."""
    for action in _arguments(parser):
        if _is_subcommands(action):
            yield from action.choices.items()


def walk(parser, path=()):
    """``(command words, parser)`` of ``parser`` and every nested command."""
    yield path, parser
    for name, child in subcommands(parser):
        yield from walk(child, path + (name,))


def documented_actions(parser):
    """The arguments and options of ``parser`` itself (no ``--help``)."""
    return [action for action in _arguments(parser)
            if not _is_help(action) and not _is_subcommands(action)]


def _formatter(parser):
    return argparse.HelpFormatter(parser.prog, width=_WIDTH)


def usage(parser):
    """The usage line(s) of ``parser``, wrapped to a fixed width."""
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, _arguments(parser),
                        _exclusive_groups(parser), prefix='')
    return formatter.format_help().strip()


def help_text(parser, action):
    """The help text of ``action`` as ``--help`` prints it (expanded)."""
    if not action.help:
        return ''
    return ' '.join(_expanded_help(_formatter(parser), action).split())


def _term(parser, action):
    return _invocation(_formatter(parser), action)


# -- argparse internals ----------------------------------------------------
# argparse documents how to build a parser, not how to read one back: it
# has no public way to list a parser's arguments or its mutually exclusive
# groups, nor to format one argument as --help does. The few private
# members needed (unchanged since Python 3.2, and what other generators of
# argparse documentation read too) are used here and nowhere else; the CLI
# reference tests fail if one of them changes.

def _arguments(parser):
    return parser._actions


def _exclusive_groups(parser):
    return parser._mutually_exclusive_groups


def _groups(parser):
    """``(title, actions)`` of each argument group, in --help's order."""
    return [(group.title, group._group_actions)
            for group in parser._action_groups]


def _is_subcommands(action):
    return isinstance(action, argparse._SubParsersAction)


def _is_help(action):
    return isinstance(action, argparse._HelpAction)


def _expanded_help(formatter, action):
    return formatter._expand_help(action)


def _invocation(formatter, action):
    """``--opt METAVAR`` of an option, the metavar of a positional.

    An option with aliases is written ``--opt, --alias METAVAR``, as
    Python 3.13's ``--help`` writes it, on every Python (older ones repeat
    the metavar after each alias), so that the committed man page does not
    depend on the Python that built it.
    """
    if not action.option_strings:
        return formatter._metavar_formatter(action, action.dest)(1)[0]
    names = ', '.join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = formatter._get_default_metavar_for_optional(action)
    return '%s %s' % (names, formatter._format_args(action, metavar))


def escape(text):
    """``text`` with reStructuredText's inline markup characters escaped."""
    return text.replace('\\', '\\\\').replace('*', '\\*').replace(
        '`', '\\`').replace('|', '\\|').replace('_ ', '\\_ ')


def _literal(text):
    return ['::', ''] + ['   ' + line for line in text.splitlines()] + ['']


def _options(parser, actions=None):
    lines = ['.. program:: %s' % parser.prog, '']
    for action in (documented_actions(parser) if actions is None
                   else actions):
        lines.append('.. option:: %s' % _term(parser, action))
        lines.append('')
        lines.append('   %s' % (escape(help_text(parser, action))
                                or 'Undocumented.'))
        lines.append('')
    return lines


def _section(title, level):
    return [title, level * len(title), '']


def parser_lines(parser, title=None, level='~'):
    """reStructuredText for one command: usage, description, options."""
    lines = _section(title, level) if title else []
    lines += _literal(usage(parser))
    if parser.description:
        lines += [escape(' '.join(parser.description.split())), '']
    lines += _options(parser)
    if parser.epilog:
        lines += _literal(parser.epilog)
    return lines


def synopsis_lines(parser):
    """One usage block per command, as the man page's synopsis."""
    lines = []
    for path, command in walk(parser):
        if path and not list(subcommands(command)):
            lines += _literal(usage(command))
    return lines


def commands_lines(parser, level='~'):
    """A section per (nested) command with its usage and every option."""
    lines = []
    for path, command in walk(parser):
        if path and not list(subcommands(command)):
            lines += parser_lines(command, 'nova-heal %s' % ' '.join(path),
                                  level)
    return lines


def global_options_lines(parser):
    """The global options (given before the command), grouped as in --help.

    The options of the first group come first; each other group (oslo.log's
    options) follows under its title.
    """
    documented = documented_actions(parser)
    lines = []
    for title, actions in _groups(parser):
        actions = [action for action in actions if action in documented]
        if not actions:
            continue
        if lines:
            lines += ['.. rubric:: %s' % escape(title[:1].upper() + title[1:]),
                      '']
        lines += _options(parser, actions)
    return lines
