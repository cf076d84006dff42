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


"""A Prometheus text-format metrics file for node_exporter's textfile
collector, written atomically (write, then rename) at the end of a run.
"""

from healreq import atomic_file
from healreq.heal import allocation_checks
from healreq.heal.findings import Status
from healreq.heal import host_checks

_PREFIX = 'nova_heal_request_specs'

_COUNTERS = (
    ('checked', 'Instances checked in the last run.', 'checked'),
    ('drifted', 'Instances found drifted and not healed in the last run '
     '(with --dry-run, those that would be healed too); reported_only '
     'counts those of which nothing is written.', 'drifted'),
    ('reported_only', 'Instances found drifted of which nothing is '
     'written, in the last run: every drifted field is only reported, as '
     '--az-policy, --hint-policy and --flavor-policy report say; drifted '
     'counts them too.', 'reported_only'),
    ('healed', 'Instances healed in the last run.', 'healed'),
    ('skipped', 'Instances skipped in the last run.', 'skipped'),
    ('errors', 'Instances that could not be evaluated in the last run.',
     'errors'),
    ('conflicts', 'Writes refused because the row changed, last run.',
     'conflicts'),
    ('flavor_outdated', 'Instances whose embedded flavor is older than '
     'the flavor\'s current definition (its extra specs differ), last run; '
     'information, not drift.', 'flavor_outdated'),
)


def _label(value):
    """A label value escaped as the text format requires."""
    text = '' if value is None else str(value)
    return (text.replace('\\', '\\\\').replace('"', '\\"')
            .replace('\n', '\\n'))


def render(report, exit_code, duration, finished_at, dry_run):
    """The metrics of a finished run as Prometheus text."""
    lines = []
    for name, help_text, attribute in _COUNTERS:
        metric = '%s_%s' % (_PREFIX, name)
        lines.append('# HELP %s %s' % (metric, help_text))
        lines.append('# TYPE %s gauge' % metric)
        for cell in report.cells:
            lines.append('%s{cell_uuid="%s",cell_name="%s"} %d' % (
                metric, _label(cell.uuid), _label(cell.name),
                getattr(cell, attribute)))
    lines += _by_field(
        report, 'drift_by_field', lambda finding: finding.drift,
        'Instances whose spec field drifted (healed or not) in the last '
        'run.')
    lines += _by_field(
        report, 'reported_only_by_field',
        lambda finding: finding.reported_only,
        'Instances whose spec field drifted and was only reported, never '
        'written (a zone pin under --az-policy report, a same_host hint '
        'under --hint-policy report, a propagated flavor under '
        '--flavor-policy report), in the last run; '
        'drift_by_field counts them too.')
    metric = '%s_cell_failed' % _PREFIX
    lines.append('# HELP %s 1 if the cell could not be processed.' % metric)
    lines.append('# TYPE %s gauge' % metric)
    for cell in report.cells:
        lines.append('%s{cell_uuid="%s",cell_name="%s"} %d' % (
            metric, _label(cell.uuid), _label(cell.name),
            1 if cell.error else 0))
    for name, help_text, value in (
            ('exit_code', 'Exit code of the last run.', int(exit_code)),
            ('dry_run', '1 if the last run was a dry run.',
             1 if dry_run else 0),
            ('duration_seconds', 'Wall time of the last run.',
             '%.3f' % duration),
            ('last_run_timestamp_seconds', 'When the last run ended.',
             '%d' % finished_at)):
        metric = '%s_%s' % (_PREFIX, name)
        lines.append('# HELP %s %s' % (metric, help_text))
        lines.append('# TYPE %s gauge' % metric)
        lines.append('%s %s' % (metric, value))
    return '\n'.join(lines) + '\n'


def _by_field(report, name, fields_of, help_text):
    """The lines of a per-cell, per-field count of drifted findings."""
    counts = {}
    for finding in report.findings:
        if finding.status in (Status.DRIFTED, Status.HEALED):
            for field in fields_of(finding):
                key = (finding.cell_uuid, field)
                counts[key] = counts.get(key, 0) + 1
    metric = '%s_%s' % (_PREFIX, name)
    lines = ['# HELP %s %s' % (metric, help_text),
             '# TYPE %s gauge' % metric]
    for (cell_uuid, field), count in sorted(
            counts.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        lines.append('%s{cell_uuid="%s",field="%s"} %d'
                     % (metric, _label(cell_uuid), _label(field), count))
    return lines


ALLOCATIONS_PREFIX = 'nova_heal_allocations'


def _gauge(lines, metric, help_text):
    lines.append('# HELP %s %s' % (metric, help_text))
    lines.append('# TYPE %s gauge' % metric)


def render_allocations(report, exit_code, duration, finished_at):
    """The metrics of a run of ``allocations`` as Prometheus text.

    Per problem class (``reason``) and per status, so that an alert can
    fire on leftover consumers alone. Without a ``report`` (a run that
    ended before it had one), only the exit code and times.
    """
    lines = []
    if report is not None:
        _gauges(lines, ALLOCATIONS_PREFIX, (
            ('instances_checked', 'Instances checked in the last run.',
             report.instances_checked),))
        _audit_counts(lines, ALLOCATIONS_PREFIX, report, 'Instances',
                      allocation_checks.STATUSES)
    _run_times(lines, ALLOCATIONS_PREFIX, exit_code, duration, finished_at)
    return '\n'.join(lines) + '\n'


HOSTS_PREFIX = 'nova_heal_hosts'


def render_hosts(report, exit_code, duration, finished_at):
    """The metrics of a run of ``hosts`` as Prometheus text.

    As those of ``allocations``: per problem class (``reason``) and per
    status; without a ``report``, only the exit code and times.
    """
    lines = []
    if report is not None:
        _gauges(lines, HOSTS_PREFIX, (
            ('hosts_checked', 'Hosts checked in the last run.',
             report.hosts_checked),
            ('providers_checked', 'Resource providers checked in the '
             'last run.', report.providers_checked)))
        _audit_counts(lines, HOSTS_PREFIX, report, 'Hosts and providers',
                      host_checks.STATUSES)
    _run_times(lines, HOSTS_PREFIX, exit_code, duration, finished_at)
    return '\n'.join(lines) + '\n'


def _gauges(lines, prefix, named_values):
    """One unlabelled gauge per ``(name, help, value)``."""
    for name, help_text, value in named_values:
        metric = '%s_%s' % (prefix, name)
        _gauge(lines, metric, help_text)
        lines.append('%s %s' % (metric, value))


def _audit_counts(lines, prefix, report, what, statuses):
    """A read-only audit's counts by problem class, by status, of errors.

    ``what`` names what is counted; the cells that could not be read
    are counted apart.
    """
    metric = '%s_problems' % prefix
    _gauge(lines, metric, '%s with this problem in the last run.' % what)
    for reason, count in sorted(report.problem_counts().items()):
        lines.append('%s{reason="%s"} %d' % (metric, _label(reason), count))
    metric = '%s_results' % prefix
    _gauge(lines, metric, '%s reported with this status in the last run.'
           % what)
    for status in statuses:
        lines.append('%s{status="%s"} %d'
                     % (metric, status, report.count(status)))
    _gauges(lines, prefix, (
        ('cell_errors', 'Cells that could not be read in the last run.',
         len(report.cell_errors)),))


def _run_times(lines, prefix, exit_code, duration, finished_at):
    _gauges(lines, prefix, (
        ('exit_code', 'Exit code of the last run.', int(exit_code)),
        ('duration_seconds', 'Wall time of the last run.',
         '%.3f' % duration),
        ('last_run_timestamp_seconds', 'When the last run ended.',
         '%d' % finished_at)))


def write(path, text, success_timestamp=None, prefix=_PREFIX):
    """Write ``text`` to ``path`` atomically.

    ``success_timestamp`` (a run that ended with exit 0 or 4) is added as
    ``<prefix>_last_success_timestamp_seconds``; otherwise the value of the
    previous file is kept, so an alert can fire on its age.
    """
    metric = '%s_last_success_timestamp_seconds' % prefix
    if success_timestamp is None:
        success_timestamp = _previous_value(path, metric)
    if success_timestamp is not None:
        text += ('# HELP %s When a run last ended without errors.\n'
                 '# TYPE %s gauge\n%s %d\n'
                 % (metric, metric, metric, success_timestamp))
    atomic_file.write(path, text, 0o644)


def _previous_value(path, metric):
    try:
        with open(path) as handle:
            for line in handle:
                if line.startswith(metric + ' '):
                    return int(float(line.split()[1]))
    except (OSError, ValueError, IndexError):
        return None
    return None
