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


"""The library API: one call per command.

Each call of a command that writes request specs is a whole audited
run: settle what crashed runs left pending, record the start of the
run, do the work, record its end and exit code. ``list_runs`` and
``show_run`` read the audit store back.
The command line, the tests and the benchmark all go through here;
``Options.from_conf`` reads the settings the configuration holds, as
the command does, and takes the command's arguments as keywords::

    from healreq import api

    conf = api.load_config(['/etc/nova/nova.conf'])
    options = api.Options.from_conf(conf, dry_run=True)
    result = api.run_request_specs(conf, options)
    print(result.exit_code, result.report.summary(), result.run_id)

Errors that end a run are raised as ``healreq.exception.HealreqError``
subclasses, each with its exit code and the component that failed.
"""

import contextlib
import dataclasses
import json
import time

from oslo_config import cfg
from oslo_log import log as logging

from healreq.audit import plan
from healreq.audit import store as audit_store
from healreq import clock as clock_module
from healreq import conf as healreq_conf
from healreq.db import engines
from healreq import exception
from healreq.exception import ExitCode
from healreq.heal import decisions
from healreq.heal.findings import RunReport
from healreq import masking
from healreq import metrics
from healreq import policies
from healreq import releases
from healreq.run import allocation_walk
from healreq.run import audited
from healreq.run import budget
from healreq.run import context
from healreq.run import databases
from healreq.run import host_walk
from healreq.run import replay
from healreq.run import walker
from healreq.run import writer

LOG = logging.getLogger(__name__)


# The fields of Options and of decisions.Settings that the configuration
# sets, each with its option (group, name).
_CONFIGURED_OPTIONS = {
    'batch_size': ('healreq', 'batch_size'),
    'service_down_time': ('DEFAULT', 'service_down_time'),
}
_CONFIGURED_SETTINGS = {
    'skip_updated_within': ('healreq', 'skip_updated_within'),
    'default_zone': ('DEFAULT', 'default_availability_zone'),
}


def _default(group, name):
    return healreq_conf.option(group, name).default


def _configured(conf, group, name):
    """The value of option ``name`` of ``group`` in ``conf``."""
    return conf[name] if group == 'DEFAULT' else conf[group][name]


@dataclasses.dataclass
class Options:
    """What a run of request-specs does (see ``nova-heal request-specs``).

    Build it with ``from_conf``, which reads what the configuration sets;
    a field left out here has the default of its option or argument.
    ``collect_plan`` (with ``dry_run``) keeps every would-be change in
    the report's ``planned``; ``settings`` are the per-instance
    decisions'.
    """
    dry_run: bool = False
    instance_uuid: str = None
    cell_uuid: str = None
    max_count: int = None
    # [healreq]/batch_size, or --batch-size.
    batch_size: int = _default('healreq', 'batch_size')
    collect_plan: bool = False
    workers: int = 1
    sleep: float = 0.0
    max_rate: float = None
    # A releases.Release named by the operator ([healreq]/target_release
    # or --target-release), instead of detecting it.
    target_release: object = None
    # [DEFAULT]/service_down_time: services silent longer are down.
    service_down_time: int = _default('DEFAULT', 'service_down_time')
    settings: decisions.Settings = dataclasses.field(
        default_factory=decisions.Settings)

    @classmethod
    def from_conf(cls, conf, **overrides):
        """The Options of a run under ``conf``, with ``overrides``.

        ``overrides`` are fields of Options or of decisions.Settings, as
        the command's arguments give them; one that is None is not
        given, and the field takes the configured value
        (``[healreq]/batch_size``, ``skip_updated_within`` and
        ``target_release``, ``[DEFAULT]/service_down_time`` and
        ``default_availability_zone``), else its default.
        ``target_release`` is a Release or a name. Raises InvalidInput
        for a release name that is not supported.
        """
        given = {name: value for name, value in overrides.items()
                 if value is not None}
        settings_names = {f.name for f in dataclasses.fields(
            decisions.Settings)}
        chosen = {name: given.pop(name) for name in list(given)
                  if name in settings_names}
        values = {name: _configured(conf, *option)
                  for name, option in _CONFIGURED_OPTIONS.items()}
        values['settings'] = _settings_from_conf(conf, chosen)
        values.update(given)
        release = values.get('target_release')
        if release is None or isinstance(release, str):
            values['target_release'] = target_release(conf, release)
        return cls(**values)


def _settings_from_conf(conf, chosen):
    """decisions.Settings: ``chosen`` over the configured values."""
    values = {name: _configured(conf, *option)
              for name, option in _CONFIGURED_SETTINGS.items()}
    values.update(chosen)
    return decisions.Settings(**values)


# The outcome of a recorded run, and the exit code of a report.
RunResult = audited.RunResult
exit_code_for = audited.exit_code_for


def load_config(config_files=()):
    """A ConfigOpts holding healreq's options, read from ``config_files``.

    nova.conf files work as they are.
    """
    conf = cfg.ConfigOpts()
    healreq_conf.register_opts(conf)
    conf(args=[], default_config_files=list(config_files))
    healreq_conf.check(conf)
    return conf


def settings(conf, **chosen):
    """The per-instance decision settings under ``conf``.

    ``chosen`` are fields of decisions.Settings (None: not chosen), over
    what the configuration sets, as Options.from_conf takes them.
    """
    return _settings_from_conf(conf, {name: value for name, value in
                                      chosen.items() if value is not None})


def target_release(conf, name=None):
    """The Release named by ``name`` or ``[healreq]/target_release``.

    None when neither names one (the release is then detected). Raises
    InvalidInput for a name that is not a supported release.
    """
    name = name if name is not None else conf.healreq.target_release
    if name is None:
        return None
    try:
        return releases.by_name(name)
    except ValueError as exc:
        raise exception.InvalidInput(str(exc))


def run_request_specs(conf, options, *, plan_file=None, metrics_file=None,
                      command='nova-heal request-specs', progress=None,
                      stop_check=None, audit=None, clock=clock_module.utcnow):
    """Run request-specs with ``options`` (an Options).

    ``plan_file`` (with ``options.dry_run``) receives every change the
    run would make; ``metrics_file`` the run's Prometheus metrics.
    ``command`` is recorded in the audit; ``progress`` follows the walk
    (see walker.Walker); ``stop_check()`` after each
    batch and while the walk waits for a cell database, and raises (e.g.
    exception.Interrupted) to end the run. ``audit`` is an open AuditStore
    to use instead of the configured one; ``clock`` returns naive UTC
    now. Returns a RunResult.
    """
    if plan_file:
        options = dataclasses.replace(options, collect_plan=True)
    files = [('--plan', plan_file), ('--metrics-file', metrics_file)]
    mode = 'dry-run' if options.dry_run else 'heal'
    # A dry run is still run, unrecorded, where the store cannot be
    # written; a heal and a plan (which names its run) must be recorded.
    may_go_unrecorded = options.dry_run and not plan_file and audit is None
    # Each cell worker reads and writes the API database.
    with databases.checked_api_database(
            conf, files, uses_store=audit is None,
            pool_size=engines.POOL_SIZE * options.workers) as api_engine, (
            contextlib.ExitStack()) as stack:
        store, open_error = audit, None
        try:
            store = stack.enter_context(databases.opened_audit(conf, audit))
        except exception.AuditStoreError as exc:
            if not (may_go_unrecorded and databases.cannot_write(exc)):
                raise
            open_error = exc
        _settle_dead_runs(store, api_engine, options.dry_run)
        unrecorded = None
        if may_go_unrecorded:
            unrecorded = (lambda exc: _unrecorded_notice(exc or open_error))
        with audited.started(store, mode, command, _filters(options),
                             unrecorded) as run:
            with run.working():
                run.report = _walk(conf, options, api_engine, run, clock,
                                   progress, stop_check)
            run.add_problems(_write_outputs(
                run.report, run.code, run.run_id, run.duration(),
                options.dry_run, plan_file, metrics_file, options.settings))
            return run.finish()


def _settle_dead_runs(store, api_engine, dry_run):
    """Settle the intents of runs that died; only a run that writes does.

    A dry run must not write, and may run without the right to.
    """
    if not dry_run:
        store.recover(api_engine)


def _unrecorded_notice(exc):
    """The line of a dry run the store ``exc`` came from cannot record."""
    return _one_line('nova-heal: warning: this dry run is not recorded: '
                     'audit store: %s' % databases.with_store_options(exc))


def _one_line(text):
    """``text`` in one line, passwords masked."""
    return masking.mask_password(' '.join(str(text).split()))


def _walk(conf, options, api_engine, run, clock, progress, stop_check):
    """Walk the cells for the started ``run``; return the RunReport."""
    run_context = _context(conf, api_engine, clock, options)
    walk = walker.Walker(
        run_context, options,
        budget.Budget(options.max_count, options.sleep, options.max_rate),
        writer.SpecWriter(
            api_engine, clock, audit=run.store, run_id=run.run_id,
            dry_run=options.dry_run,
            retry_within=conf.healreq.lock_wait_timeout),
        audit=run.store, run_id=run.run_id)
    walk.progress = progress
    if stop_check is not None:
        walk.stop_check = stop_check
    try:
        return walk.run()
    except audited.ENDS_AFTER_WORK as exc:
        # What the cells finished so far: reported, audited, counted.
        audited.attach_report(exc, walk.report, walk.report.cells)
        raise
    finally:
        run_context.close()


@dataclasses.dataclass
class AllocationsResult:
    """The outcome of a run of ``allocations`` (nothing is recorded).

    ``report`` is a heal.allocation_checks.AllocationReport; ``problems``
    one-line messages about files the run could not write (metrics),
    already counted in ``exit_code``.
    """
    report: object
    exit_code: ExitCode
    problems: list = dataclasses.field(default_factory=list)


def allocations_exit_code(report):
    """The exit code of an AllocationReport: 2, else 0 if found, else 4."""
    return _audit_exit_code(report, 'mismatch')


def _audit_exit_code(report, found):
    """2 if a cell or a result failed, else 0 if any is ``found``, else 4."""
    if report.cell_errors or report.count('error'):
        return ExitCode.NEEDS_ATTENTION
    if report.count(found):
        return ExitCode.HEALED
    return ExitCode.NOTHING_TO_HEAL


def run_allocations(conf, *, instance_uuid=None, cell_uuid=None,
                    batch_size=None, metrics_file=None, target=None,
                    clock=clock_module.utcnow, progress=None,
                    stop_check=None):
    """Compare every instance's Placement allocations with Nova's. Read only.

    Reads the API, cell and Placement databases; writes nothing to any
    (no audit run is recorded); ``metrics_file`` receives the run's
    metrics. ``target`` is a Release that overrides detection.
    ``progress`` follows the walk (see AllocationWalk);
    ``stop_check()`` is called after each batch; an Interrupted it raises
    ends the run with the report of what was checked so far and the
    signal's exit code. Raises InvalidInput (exit 127) without
    ``[placement_database]/connection``. Returns an AllocationsResult.
    """
    def start_walk(run_context, placement_engine, options):
        walk = allocation_walk.AllocationWalk(
            run_context, placement_engine, options.batch_size,
            instance_uuid=options.instance_uuid, cell_uuid=options.cell_uuid)
        walk.progress = progress
        return walk
    return _read_only_audit(
        conf, dict(instance_uuid=instance_uuid, cell_uuid=cell_uuid,
                   batch_size=batch_size, target_release=target),
        start_walk, allocations_exit_code, metrics_file,
        metrics.render_allocations, metrics.ALLOCATIONS_PREFIX, clock,
        stop_check)


def hosts_exit_code(report):
    """The exit code of a HostReport: 2, else 0 if found, else 4."""
    return _audit_exit_code(report, 'mismatched')


def run_hosts(conf, *, host=None, cell_uuid=None, batch_size=None,
              metrics_file=None, clock=clock_module.utcnow, stop_check=None):
    """Audit what the scheduler reads about each host. Read only.

    Reads the API database's aggregates, every selected cell's compute
    nodes, services, instances and PCI devices, and the Placement
    database; writes nothing to any (no audit run is recorded).
    ``metrics_file`` receives the run's metrics. ``stop_check()`` is
    called after each page; an Interrupted it raises ends the run with
    the report so far and the signal's exit code. Raises InvalidInput
    (exit 127) without ``[placement_database]/connection``. Returns an
    AllocationsResult whose report is a heal.host_checks.HostReport.
    """
    def start_walk(run_context, placement_engine, options):
        return host_walk.HostWalk(
            run_context, placement_engine, options.batch_size, host=host,
            cell_uuid=options.cell_uuid)
    return _read_only_audit(
        conf, dict(cell_uuid=cell_uuid, batch_size=batch_size), start_walk,
        hosts_exit_code, metrics_file, metrics.render_hosts,
        metrics.HOSTS_PREFIX, clock, stop_check)


def _read_only_audit(conf, option_values, start_walk, exit_code,
                     metrics_file, render, prefix, clock, stop_check):
    """Run an audit that reads the cells and Placement and writes nothing.

    The guards first, then ``start_walk(run_context, placement_engine,
    options)`` gives the walk, whose report ``exit_code(report)`` judges;
    ``render`` writes its metrics under ``prefix``. An Interrupted ends
    the walk with the report so far. Returns an AllocationsResult.
    """
    _require_placement(conf)
    started = time.monotonic()
    with databases.checked_api_database(
            conf, [('--metrics-file', metrics_file)],
            uses_store=False) as api_engine, (
            databases.placement_database(conf)) as placement_engine:
        options = Options.from_conf(conf, **option_values)
        run_context = _context(conf, api_engine, clock, options)
        try:
            walk = start_walk(run_context, placement_engine, options)
            if stop_check is not None:
                walk.stop_check = stop_check
            report = walk.run()
            code = exit_code(report)
        except exception.Interrupted as exc:
            report, code = exc.report, exc.exit_code
        finally:
            run_context.close()
    problems = []
    if metrics_file:
        now = time.time()
        problems = _write_metrics(
            metrics_file, render(report, code, time.monotonic() - started,
                                 now), code, now, prefix=prefix)
        if problems:
            code = ExitCode.NEEDS_ATTENTION
    return AllocationsResult(report, code, problems)


def _require_placement(conf):
    """InvalidInput unless ``[placement_database]/connection`` is set."""
    if not conf.placement_database.connection:
        raise exception.InvalidInput(
            '[placement_database]/connection is not set; pass '
            '--config-file /etc/placement/placement.conf')


def revert(conf, run_id, *, instance_uuid=None, dry_run=False, wait=False,
           command='nova-heal revert', audit=None, clock=clock_module.utcnow,
           stop_check=None, deferring=contextlib.nullcontext,
           pause=time.sleep):
    """Put back the values run ``run_id`` replaced, newest first.

    Only the changes of ``instance_uuid`` if given. A run still running
    (its lease held) is never reverted in part: RunInProgress (exit 3)
    is raised before anything is recorded. With ``wait``, its end is
    awaited instead, within ``deferring()``, looking every WAIT_INTERVAL
    seconds (``pause``); ``stop_check()``, called between looks, raises
    (e.g. exception.Interrupted) to end the wait. Raises InvalidInput
    for an unknown run. Returns a RunResult.
    """
    with databases.checked_api_database(
            conf, uses_store=audit is None) as api_engine, (
            databases.opened_audit(conf, audit)) as store:
        _settle_dead_runs(store, api_engine, dry_run)
        changes = _changes_to_revert(store, api_engine, run_id,
                                     instance_uuid, wait, deferring,
                                     stop_check, pause, dry_run)
        filters = {'revert_of': run_id, 'instance': instance_uuid}
        with audited.started(store, 'revert', command, filters) as run:
            with run.working():
                run.report = _replay(
                    conf, Options.from_conf(conf), api_engine, run, clock,
                    changes, dry_run=dry_run, rederive=False,
                    revert_of=run_id)
            return run.finish()


def _changes_to_revert(store, api_engine, run_id, instance_uuid, wait,
                       deferring, stop_check, pause, dry_run):
    """The inverse of each change run ``run_id`` applied, newest first.

    Raises InvalidInput for an unknown run, RunInProgress for one still
    running unless ``wait`` (see revert).
    """
    if store.get_run(run_id) is None:
        raise exception.InvalidInput('no run %s in the audit store' % run_id)
    if store.is_running(run_id):
        if not wait:
            raise exception.RunInProgress(
                'run %s is still running (its lease is held); revert it '
                'once it has ended, or pass --wait' % run_id)
        with deferring():
            _wait_for_end(store, run_id, stop_check, pause)
        # It may have died instead of ending: settle what it left.
        _settle_dead_runs(store, api_engine, dry_run)
    # Newest first: if a run touched a row twice, undo in reverse.
    return [writer.Change(
        instance_uuid=c['instance_uuid'], spec_id=c['spec_id'],
        fields=json.loads(c['fields']), before=c['before_text'],
        after=c['after_text'], before_digest=c['before_digest'],
        after_digest=c['after_digest'], action=c['action']).inverse()
        for c in reversed(store.changes(run_id, instance_uuid,
                                        audit_store.APPLIED))]


# How often a revert --wait looks whether the run it waits for has ended.
WAIT_INTERVAL = 1.0


def _wait_for_end(store, run_id, stop_check, pause):
    """Return once run ``run_id`` can write nothing more."""
    LOG.warning('Run %s is still running; waiting for it to end', run_id)
    while store.is_running(run_id):
        if stop_check is not None:
            stop_check()
        pause(WAIT_INTERVAL)
    if stop_check is not None:
        stop_check()


def apply_plan(conf, plan_file, *, dry_run=False, command='nova-heal apply',
               audit=None, clock=clock_module.utcnow):
    """Apply the changes of a plan file written by a dry run.

    A change is written only where the row still holds the plan's before
    value and a heal would write exactly the plan's after value now;
    other changes are refused (conflict, or error ``change-not-derived``
    / ``plan-spec-id-mismatch``). Raises PlanError (exit 127) before
    anything is recorded if the file is not a usable plan. Returns a
    RunResult.
    """
    planned_by, recorded, planned = plan.read_plan(plan_file)
    chosen = _planned_policies(plan_file, recorded)
    release, check_release = _applied_release(conf, plan_file, recorded)
    changes = [writer.Change(
        instance_uuid=p.instance_uuid, spec_id=p.spec_id, fields=p.fields,
        before=p.before, after=p.after, before_digest=p.before_digest,
        action=p.action) for p in planned]
    filters = {'plan': plan_file, 'plan_run': planned_by}
    with databases.checked_api_database(
            conf, uses_store=audit is None) as api_engine, (
            databases.opened_audit(conf, audit)) as store:
        _settle_dead_runs(store, api_engine, dry_run)
        with audited.started(store, 'apply', command, filters) as run:
            with run.working():
                run.report = _replay(
                    conf, Options.from_conf(conf, target_release=release,
                                            **chosen),
                    api_engine, run, clock, changes, dry_run=dry_run,
                    rederive=True, check_release=check_release)
            return run.finish()


def _planned_policies(plan_file, recorded):
    """The policies a plan recorded (policies.CHOICES), as settings.

    Raises PlanError for a policy this release does not know or a value
    it does not take: the plan cannot be derived again as it was.
    """
    chosen = {}
    for name, value in recorded.items():
        if name == 'release':
            continue
        if value not in policies.CHOICES.get(name, ()):
            raise exception.PlanError(
                'plan %s is malformed or newer than this release: setting '
                '%s %s' % (plan_file, name, json.dumps(value)))
        chosen[name] = value
    return chosen


def _applied_release(conf, plan_file, recorded):
    """``(release, check_release)``: how apply establishes its release.

    A plan is derived again under its release: the one it named, or the
    one detected then, which must be the one established now (the
    check refuses another). A plan of a release before they were
    recorded is applied as a heal would be.
    """
    if 'release' not in recorded:
        return target_release(conf), None
    planned, named = _planned_release(plan_file, recorded)
    if named:
        return planned, None
    return target_release(conf), (
        lambda detection: detection.check_planned(planned))


def _planned_release(plan_file, recorded):
    """``(release, named)``: the Release a plan was written under.

    The release is None if it could not be established then. Raises
    PlanError if the record is not one write_plan makes.
    """
    value = recorded['release']
    if value is None:
        return None, False
    try:
        named = value['named']
        if not isinstance(named, bool):
            raise ValueError('named is not true or false')
        return releases.by_name(value['series']), named
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise exception.PlanError('plan %s is malformed: release %s (%s)'
                                  % (plan_file, json.dumps(value), exc))


def _plan_settings(decision_settings, detection):
    """What a plan records of the settings that change what is derived.

    The policies (policies.CHOICES) and the release, with whether the
    operator named it (None if it could not be established).
    """
    recorded = {name: getattr(decision_settings, name)
                for name in policies.CHOICES}
    release = detection.release if detection is not None else None
    recorded['release'] = release and {'series': release.series,
                                       'named': detection.named}
    return recorded


def _replay(conf, options, api_engine, run, clock, changes, **how):
    """Replay ``changes`` for the started ``run``; return the RunReport.

    Under ``options``' release (else detected) and settings; ``how`` are
    replay.Replayer's dry_run, rederive, revert_of and check_release.
    """
    run_context = _context(conf, api_engine, clock, options)
    replayer = replay.Replayer(run_context, options.settings, run.store,
                               run.run_id, **how)
    try:
        return replayer.run(changes)
    except audited.ENDS_AFTER_WORK as exc:
        audited.attach_report(exc, replayer.report, replayer.report.findings)
        raise
    finally:
        run_context.close()


def _filters(options):
    return {'instance': options.instance_uuid, 'cell': options.cell_uuid,
            'max_count': options.max_count, 'force': options.settings.force,
            'workers': options.workers, 'sleep': options.sleep,
            'max_rate': options.max_rate,
            'fields': list(options.settings.checked_fields),
            'az_policy': options.settings.az_policy,
            'hint_policy': options.settings.hint_policy,
            'flavor_policy': options.settings.flavor_policy,
            'create_missing': options.settings.create_missing}


def _context(conf, api_engine, clock, options):
    """The RunContext of a run on ``api_engine`` with ``options``."""
    return context.RunContext(
        api_engine, conf.database.connection,
        lock_wait_timeout=conf.healreq.lock_wait_timeout,
        answer_timeout=conf.healreq.database_timeout, clock=clock,
        target_release=options.target_release,
        service_down_time=options.service_down_time)


def list_runs(conf, limit, warn=None):
    """The latest ``limit`` runs of the audit store, newest first.

    Each a dict of the run's columns, ``filters`` and ``summary``
    decoded (None if not recorded); the store is opened read-only
    (open_audit). Where the API database cannot be read, the store is
    read all the same and ``warn`` (default: a logged warning) receives
    one line saying its cells could not be checked. Raises
    AuditStoreError.
    """
    store = _open_for_reading(conf, warn)
    try:
        return [_decoded_run(run) for run in store.list_runs(limit)]
    finally:
        store.dispose()


@dataclasses.dataclass
class ShownRun:
    """One run of the audit store, with what it found and changed.

    ``run`` is a dict as list_runs gives them; ``findings`` and
    ``changes`` dicts of their columns, in the order they were recorded,
    ``drift`` and ``fields`` decoded. ``summary_text`` is the summary as
    it was recorded.
    """
    run: dict
    summary_text: str
    findings: list
    changes: list


def show_run(conf, run_id, warn=None):
    """The ShownRun of ``run_id``; the store is opened read-only.

    ``warn`` as for list_runs. Raises InvalidInput for a run the store
    does not hold, AuditStoreError.
    """
    store = _open_for_reading(conf, warn)
    try:
        run = store.get_run(run_id)
        if run is None:
            raise exception.InvalidInput('no run %s in the audit store'
                                         % run_id)
        changes = store.changes(run['id'])
        findings = store.run_findings(run['id'])
    finally:
        store.dispose()
    return ShownRun(
        run=_decoded_run(run), summary_text=run['summary'],
        findings=[dict(f, drift=json.loads(f['drift'] or '[]'))
                  for f in findings],
        changes=[dict(c, fields=json.loads(c['fields'])) for c in changes])


def _open_for_reading(conf, warn):
    """The audit store, read-only, checked against the cells if it can."""
    return databases.open_audit(
        conf, read_only=True, check_cells=True,
        unchecked=warn or (lambda line: LOG.warning('%s', line)))


def _decoded_run(run):
    """The columns of a run, its JSON columns decoded."""
    decoded = dict(run)
    for key in ('filters', 'summary'):
        decoded[key] = json.loads(run[key]) if run[key] else None
    return decoded


def write_failure_metrics(metrics_file, exit_code, dry_run=False,
                          duration=0.0):
    """Write the metrics of a run that ended with ``exit_code`` early.

    No cell is reported; the exit code is, and the last-success timestamp
    of the previous file is kept. Raises OSError if the file cannot be
    written.
    """
    text = metrics.render(RunReport(dry_run=dry_run), exit_code, duration,
                          time.time(), dry_run)
    metrics.write(metrics_file, text)


def write_allocations_failure_metrics(metrics_file, exit_code,
                                      duration=0.0):
    """Write the metrics of a run of ``allocations`` that ended early.

    Only the exit code and times: no count is known, so none is written,
    and the last-success timestamp of the previous file is kept. Raises
    OSError if the file cannot be written.
    """
    text = metrics.render_allocations(None, exit_code, duration, time.time())
    metrics.write(metrics_file, text, prefix=metrics.ALLOCATIONS_PREFIX)


def write_hosts_failure_metrics(metrics_file, exit_code, duration=0.0):
    """Write the metrics of a run of ``hosts`` that ended early.

    As write_allocations_failure_metrics: the exit code and times only.
    """
    text = metrics.render_hosts(None, exit_code, duration, time.time())
    metrics.write(metrics_file, text, prefix=metrics.HOSTS_PREFIX)


def _write_outputs(report, code, run_id, duration, dry_run, plan_file,
                   metrics_file, decision_settings):
    """Write the plan and metrics files; return one-line problems."""
    problems = []
    if plan_file:
        try:
            plan.write_plan(plan_file, run_id, report.planned,
                            _plan_settings(decision_settings,
                                           report.release))
        except OSError as exc:
            problems.append('nova-heal: error: cannot write plan file %s: %s'
                            % (plan_file, exc))
    if metrics_file:
        now = time.time()
        problems.extend(_write_metrics(
            metrics_file, metrics.render(report, code, duration, now,
                                         dry_run), code, now))
    return problems


def _write_metrics(path, text, code, now, **kwargs):
    """Write a run's metrics ``text``; return one-line problems.

    The last-success timestamp becomes ``now`` when ``code`` says the run
    succeeded, and is kept otherwise.
    """
    success = now if code in (ExitCode.HEALED,
                              ExitCode.NOTHING_TO_HEAL) else None
    try:
        metrics.write(path, text, success, **kwargs)
    except OSError as exc:
        return ['nova-heal: error: cannot write metrics file %s: %s'
                % (path, exc)]
    return []
