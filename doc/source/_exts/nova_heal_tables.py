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

"""The reference tables of the documentation, as reStructuredText lines.

Each function renders one table from the code that defines its facts;
nova_heal_docs.py, the Sphinx extension, parses the lines in place. This
module imports nothing of Sphinx, so that the unit tests render every
table without a documentation build.
"""

import os
import re
import tempfile

from healreq.cmd import cli_reference
from healreq import exception
from healreq.heal import allocation_checks
from healreq.heal import findings
from healreq.heal import host_checks
from healreq import metrics
from healreq import releases

CLI_PARTS = {
    'synopsis': cli_reference.synopsis_lines,
    'global-options': cli_reference.global_options_lines,
    'commands': cli_reference.commands_lines,
}


def cli_lines(part):
    """``synopsis``, ``global-options`` or ``commands`` of ``nova-heal``."""
    return CLI_PARTS[part](cli_reference.build_parser())


def table(header, rows, widths=None):
    """A list-table of ``header`` and ``rows`` (tuples of cell text)."""
    widths = widths or ((30, 70) if len(header) == 2 else
                        (100 // len(header),) * len(header))
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: %s' % ' '.join(str(w) for w in widths), '']
    for row in [header] + list(rows):
        lines.append('   * - %s' % row[0])
        lines += ['     - %s' % cell for cell in row[1:]]
    return lines + ['']


def rubric(title):
    return ['.. rubric:: %s' % title, '']


_STATUS_TITLES = (
    (findings.Status.DRIFTED, 'Drift (status drifted or healed)'),
    (findings.Status.SKIPPED, 'Skipped (nothing written)'),
    (findings.Status.ERROR, 'Errors (exit code %d, nothing written)'
     % exception.ExitCode.NEEDS_ATTENTION),
    (findings.Status.CONFLICT, 'Conflicts (exit code %d, nothing written)'
     % exception.ExitCode.CONFLICT),
)


def reason_codes_lines():
    """Every reason code and note, grouped by status, with its meaning."""
    lines = []
    for status, title in _STATUS_TITLES:
        lines += rubric(title)
        lines += table(('code', 'meaning'), (
            ('``%s``' % code, text)
            for code, text in findings.REASONS[status].items()))
    lines += rubric('Notes (informational)')
    lines += table(('code', 'meaning'), (
        ('``%s``' % code, text) for code, text in findings.NOTES.items()))
    return lines


_ALLOCATION_STATUS_TITLES = (
    (allocation_checks.MISMATCH, 'Problems (status mismatch)'),
    (allocation_checks.PENDING, 'Pending (never flagged)'),
    (allocation_checks.SKIPPED, 'Skipped (not compared)'),
    (allocation_checks.ERROR, 'Errors (exit code %d)'
     % exception.ExitCode.NEEDS_ATTENTION),
)


def allocation_reason_codes_lines():
    """Every reason code of ``allocations``, by status, with its meaning."""
    lines = []
    for status, title in _ALLOCATION_STATUS_TITLES:
        lines += rubric(title)
        lines += table(('code', 'meaning'), (
            ('``%s``' % code, text) for code, text in
            allocation_checks.ALLOCATION_REASONS[status].items()))
    return lines


_HOST_STATUS_TITLES = (
    (host_checks.MISMATCHED, 'Problems (status mismatched)'),
    (host_checks.SKIPPED, 'Skipped (pinned CPUs and PCI devices not judged)'),
    (host_checks.ERROR, 'Errors (exit code %d)'
     % exception.ExitCode.NEEDS_ATTENTION),
)


def host_reason_codes_lines():
    """Every reason code of ``hosts``, by status, with its meaning."""
    lines = []
    for status, title in _HOST_STATUS_TITLES:
        lines += rubric(title)
        lines += table(('code', 'meaning'), (
            ('``%s``' % code, text) for code, text in
            host_checks.HOST_REASONS[status].items()))
    return lines


REASON_CODE_TABLES = {
    'request-specs': reason_codes_lines,
    'allocations': allocation_reason_codes_lines,
    'hosts': host_reason_codes_lines,
}


def sample_allocation_metrics():
    """The metrics file of a small run of ``allocations``, as written."""
    report = allocation_checks.AllocationReport(instances_checked=1)
    report.add(allocation_checks.AllocationResult(
        'INSTANCE_UUID', 'CELL_UUID', allocation_checks.MISMATCH,
        problems=['missing']))
    text = metrics.render_allocations(report, int(exception.ExitCode.HEALED),
                                      1.0, 0)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, 'nova_heal_allocations.prom')
        metrics.write(path, text, success_timestamp=0,
                      prefix=metrics.ALLOCATIONS_PREFIX)
        with open(path) as handle:
            return handle.read()


def sample_host_metrics():
    """The metrics file of a small run of ``hosts``, as written."""
    report = host_checks.HostReport(hosts_checked=1, providers_checked=1)
    report.add(host_checks.HostResult('HOST', 'CELL_UUID',
                                      problems=['aggregate-missing']))
    text = metrics.render_hosts(report, int(exception.ExitCode.HEALED),
                                1.0, 0)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, 'nova_heal_hosts.prom')
        metrics.write(path, text, success_timestamp=0,
                      prefix=metrics.HOSTS_PREFIX)
        with open(path) as handle:
            return handle.read()


def sample_metrics():
    """The metrics file of a small dry run with drift, as written."""
    cell = findings.CellReport(uuid='CELL_UUID', name='cell1', checked=1,
                               drifted=1)
    report = findings.RunReport(dry_run=True, cells=[cell], findings=[
        findings.Finding('INSTANCE_UUID', 'CELL_UUID',
                         findings.Status.DRIFTED, 'spec-drift',
                         changes=[findings.FieldChange('flavor', 'a', 'b'),
                                  findings.FieldChange(
                                      'availability_zone', 'az1', 'az2',
                                      rewritten=False)])])
    text = metrics.render(report, int(exception.ExitCode.HEALED), 1.0, 0,
                          True)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, 'nova_heal.prom')
        metrics.write(path, text, success_timestamp=0)
        with open(path) as handle:
            return handle.read()


def describe_metrics(text):
    """``[(name, labels, help)]`` of a metrics file's text."""
    helps, labels = {}, {}
    for line in text.splitlines():
        if line.startswith('# HELP '):
            name, _, help_text = line[len('# HELP '):].partition(' ')
            helps[name] = help_text
            labels.setdefault(name, [])
        elif line and not line.startswith('#'):
            name, _, rest = line.partition('{')
            name = name.split()[0]
            if rest:
                found = [pair.split('=')[0]
                         for pair in rest.split('}')[0].split(',')]
                labels[name] = found
    return [(name, labels[name], helps[name]) for name in helps]


def _metric_row(name, labels, help_text):
    named = ', '.join('``%s``' % label for label in labels)
    return ('``%s``' % name,
            help_text + (' Labels: %s.' % named if named else ''))


def metrics_lines(which='request-specs'):
    """Every metric the metrics file of ``which`` holds, with its labels."""
    samples = {'allocations': sample_allocation_metrics,
               'hosts': sample_host_metrics}
    sample = samples.get(which, sample_metrics)()
    return table(('metric (gauge)', 'meaning'), (
        _metric_row(*metric) for metric in describe_metrics(sample)))


_REASON_CODES = sorted(
    set([code for reasons in findings.REASONS.values() for code in reasons]
        + list(findings.NOTES)
        + [code for reasons in allocation_checks.ALLOCATION_REASONS.values()
           for code in reasons]
        + [code for reasons in host_checks.HOST_REASONS.values()
           for code in reasons]), key=len, reverse=True)
_MARKED_UP = re.compile(
    r'(?<![\w-])(--[a-z][a-z-]*|\w+_\w+|%s)(?![\w-])'
    % '|'.join(re.escape(code) for code in _REASON_CODES))


def markup(text):
    """reStructuredText of plain ``text``, options and codes as literals.

    Options, reason codes and identifiers (``spec_id``) become literals;
    everything else stays as it is.
    """
    return _MARKED_UP.sub(r'``\1``', cli_reference.escape(text))


EXIT_CODE_TABLES = {
    'request-specs': exception.MEANINGS,
    'revert-apply': exception.REPLAY_MEANINGS,
    'allocations': exception.ALLOCATIONS_MEANINGS,
    'hosts': exception.HOSTS_MEANINGS,
}


def exit_codes_lines(which='request-specs', actions=False):
    """The exit codes of ``which`` (a key of EXIT_CODE_TABLES).

    Each with its meaning, and with ``actions`` what to do about it; then
    the order in which they win.
    """
    meanings = EXIT_CODE_TABLES[which]
    if actions:
        lines = table(('code', 'meaning', 'what to do'), (
            ('%d' % code, markup(m.text), markup(m.action))
            for code, m in meanings.items()), widths=(8, 46, 46))
    else:
        lines = table(('code', 'meaning'), (
            ('%d' % code, markup(m.text))
            for code, m in meanings.items()), widths=(10, 90))
    order = exception.severity_order(meanings)
    return lines + ['When several apply, the most severe wins: %s.'
                    % ', '.join('%d' % code for code in order), '']


def exit_code(name):
    """The number of the exit code named ``name`` (``NOTHING_TO_HEAL``).

    Raises KeyError for a name ExitCode does not have.
    """
    return int(exception.ExitCode[name])


def _pythons(release):
    oldest, newest = release.pythons
    return oldest if oldest == newest else '%s - %s' % (oldest, newest)


def _release_name(release):
    name = '%s %s' % (release.series, release.codename.capitalize())
    return name + (' (master)' if release.constraints == 'master' else '')


def _supported_rows(tested):
    for release in releases.RELEASES:
        how = ['resolution on %s' % release.pythons[-1]]
        how += [' '.join(line.strip() for line in tested.get(
            release.series, []) if line.strip())]
        yield (_release_name(release),
               '%d (%s)' % (release.nova, release.nova_point),
               _pythons(release),
               '``upper-constraints-%s.txt``' % release.constraints,
               '; '.join(part for part in how if part))


def supported_releases_lines(tested):
    """The supported releases, with their Nova and Python versions.

    ``tested``: ``{series: [lines]}``, how CI tests each release beyond
    resolving its constraints.
    """
    return table(
        ('release', 'Nova', 'Python', 'constraints file',
         'tested in CI, every run'), _supported_rows(tested),
        widths=(14, 12, 10, 24, 40))


_PAGE_UNITS = {'KMGT': 'K to T', 'KMGTPEZYRQ': 'K to Q'}
_LEGACY_CELLS = {
    (releases.VICTORIA,): 'Victoria\'s rule',
    (releases.VICTORIA, releases.CURRENT):
        'either, by point release',
    (releases.CURRENT,): 'bug 2097360 fix',
}


def _rules_rows():
    for release in releases.RELEASES:
        yield (_release_name(release), '%d' % release.service_version,
               '%d' % release.oldest_supported_service,
               '``%s``' % release.api_schema_head,
               release.newest_text('RequestSpec'),
               release.newest_text('ImageMetaProps'),
               _PAGE_UNITS[release.page_size_prefixes],
               release.version_predicates,
               'yes' if release.numa_checks_memory_encryption else 'no',
               _LEGACY_CELLS[release.legacy_cell_rules])


def release_rules_lines():
    """What differs between the supported releases."""
    return table(
        ('release', 'service version', 'runs beside service versions from',
         'API schema head',
         'RequestSpec', 'ImageMetaProps', 'page-size units',
         'version predicates', 'checks memory encryption',
         'legacy NUMA cells'), _rules_rows(),
        widths=(13, 8, 8, 12, 10, 12, 9, 10, 9, 9))
