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


"""The library API: one call per command that writes request specs.

Each call is a whole audited run: settle what crashed runs left pending,
record the start of the run, do the work, record its end and exit code.
The command line, the tests and the benchmark all go through here::

    from healreq import api

    conf = api.load_config(['/etc/nova/nova.conf'])
    result = api.run_request_specs(conf, api.Options(dry_run=True))
    print(result.exit_code, result.report.summary(), result.run_id)

Errors that end a run are raised as ``healreq.exception.HealreqError``
subclasses, each with its exit code and the component that failed.
"""

import contextlib
import dataclasses
import json
import os
import time

from oslo_config import cfg
from oslo_log import log as logging
import sqlalchemy
import sqlalchemy.engine
import sqlalchemy.exc

from healreq.audit import plan
from healreq.audit import schema as audit_schema
from healreq.audit import store as audit_store
from healreq import clock as clock_module
from healreq import conf as healreq_conf
from healreq.db import api_queries
from healreq.db import engines
from healreq.db import urls
from healreq import exception
from healreq.exception import ExitCode
from healreq.heal import decisions
from healreq.heal.findings import RunReport
from healreq.heal.findings import Status
from healreq import masking
from healreq import metrics
from healreq import policies
from healreq.protected import Protected
from healreq import releases
from healreq.run import allocation_walk
from healreq.run import budget
from healreq.run import context
from healreq.run import replay
from healreq.run import walker
from healreq.run import writer

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Options:
    """What a run of request-specs does (see ``nova-heal request-specs``).

    ``batch_size`` and ``service_down_time`` default to their options'
    defaults (``[healreq]/batch_size``, ``[DEFAULT]/service_down_time``);
    the command line sets them from the configuration. ``collect_plan``
    (with ``dry_run``) keeps every would-be change in the report's
    ``planned``; ``settings`` are the per-instance decisions'.
    """
    dry_run: bool = False
    instance_uuid: str = None
    cell_uuid: str = None
    max_count: int = None
    batch_size: int = healreq_conf.option('healreq', 'batch_size').default
    collect_plan: bool = False
    workers: int = 1
    sleep: float = 0.0
    max_rate: float = None
    # A releases.Release named by the operator, instead of detecting it.
    target_release: object = None
    # [DEFAULT]/service_down_time: services silent longer are down.
    service_down_time: int = healreq_conf.option(
        'DEFAULT', 'service_down_time').default
    settings: decisions.Settings = dataclasses.field(
        default_factory=decisions.Settings)


@dataclasses.dataclass
class RunResult:
    """The outcome of one run.

    ``problems`` are one-line messages about files the run could not
    write (plan, metrics); they are already counted in ``exit_code``.
    """
    run_id: str
    report: RunReport
    exit_code: ExitCode
    problems: list = dataclasses.field(default_factory=list)


def load_config(config_files=()):
    """A ConfigOpts holding healreq's options, read from ``config_files``.

    nova.conf files work as they are.
    """
    conf = cfg.ConfigOpts()
    healreq_conf.register_opts(conf)
    conf(args=[], default_config_files=list(config_files))
    healreq_conf.check(conf)
    return conf


def exit_code_for(report):
    """Map a RunReport to the exit code of the most severe outcome."""
    statuses = {finding.status for finding in report.findings}
    if Status.ERROR in statuses or any(c.error for c in report.cells):
        return ExitCode.NEEDS_ATTENTION
    if Status.CONFLICT in statuses:
        return ExitCode.CONFLICT
    if report.more_remain:
        return ExitCode.MAX_COUNT_REACHED
    if statuses & {Status.HEALED, Status.DRIFTED}:
        return ExitCode.HEALED
    return ExitCode.NOTHING_TO_HEAL


def settings(conf, force=False, checked_fields=None,
             az_policy=policies.DEFAULT, create_missing=False,
             hint_policy=policies.DEFAULT,
             flavor_policy=policies.DEFAULT):
    """The per-instance decision settings from configuration."""
    values = dict(skip_updated_within=conf.healreq.skip_updated_within,
                  force=force, az_policy=az_policy, hint_policy=hint_policy,
                  flavor_policy=flavor_policy,
                  create_missing=create_missing,
                  default_zone=conf.default_availability_zone)
    if checked_fields is not None:
        values['checked_fields'] = checked_fields
    return decisions.Settings(**values)


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
    ``command`` is recorded in the audit; ``progress(cell, cell_report,
    total)`` is called after each batch; ``stop_check()`` after each
    batch and while the walk waits for a cell database, and raises (e.g.
    exception.Interrupted) to end the run. ``audit`` is an open AuditStore
    to use instead of the configured one; ``clock`` returns naive UTC
    now. Returns a RunResult.
    """
    if plan_file:
        options = dataclasses.replace(options, collect_plan=True)

    def work(api_engine, store, run_id):
        run_context = _context(conf, api_engine, clock,
                               options.target_release,
                               options.service_down_time)
        run = walker.Walker(
            run_context, options,
            budget.Budget(options.max_count, options.sleep,
                          options.max_rate),
            writer.SpecWriter(
                api_engine, clock, audit=store, run_id=run_id,
                dry_run=options.dry_run,
                retry_within=conf.healreq.lock_wait_timeout),
            audit=store, run_id=run_id)
        run.progress = progress
        if stop_check is not None:
            run.stop_check = stop_check
        try:
            return run.run()
        except _ENDS_AFTER_WORK as exc:
            # What the cells finished so far: reported, audited, counted.
            _attach_report(exc, run.report, run.report.cells)
            raise
        finally:
            run_context.close()

    def outputs(report, code, run_id, duration):
        return _write_outputs(report, code, run_id, duration,
                              options.dry_run, plan_file, metrics_file,
                              options.settings)

    files = [('--plan', plan_file), ('--metrics-file', metrics_file)]
    protected = refuse_unsafe_outputs(conf, files)
    mode = 'dry-run' if options.dry_run else 'heal'
    # Each cell worker reads and writes the API database.
    with _checked_api_engine(conf, audit, files, protected,
                             engines.POOL_SIZE * options.workers) as (
            api_engine), _audit_store(conf, audit) as store:
        return _recorded_run(api_engine, store, mode, command,
                             _filters(options), work, outputs)


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
    if report.cell_errors or report.count('error'):
        return ExitCode.NEEDS_ATTENTION
    if report.count('mismatch'):
        return ExitCode.HEALED
    return ExitCode.NOTHING_TO_HEAL


def run_allocations(conf, *, instance_uuid=None, cell_uuid=None,
                    batch_size=None, metrics_file=None, target=None,
                    clock=clock_module.utcnow, stop_check=None):
    """Compare every instance's Placement allocations with Nova's. Read only.

    Reads the API, cell and Placement databases; writes nothing to any
    (no audit run is recorded); ``metrics_file`` receives the run's
    metrics. ``target`` is a Release that overrides detection.
    ``stop_check()`` is called after each batch; an Interrupted it raises
    ends the run with the report of what was checked so far and the
    signal's exit code. Raises InvalidInput (exit 127) without
    ``[placement_database]/connection``. Returns an AllocationsResult.
    """
    if not conf.placement_database.connection:
        raise exception.InvalidInput(
            '[placement_database]/connection is not set; pass '
            '--config-file /etc/placement/placement.conf')
    refuse_unsafe_outputs(conf, [('--metrics-file', metrics_file)])
    started = time.monotonic()
    with _api_engine(conf) as api_engine, _placement_engine(
            conf) as placement_engine:
        run_context = _context(conf, api_engine, clock,
                               target or target_release(conf),
                               conf.service_down_time)
        try:
            walk = allocation_walk.AllocationWalk(
                run_context, placement_engine,
                batch_size or conf.healreq.batch_size,
                instance_uuid=instance_uuid, cell_uuid=cell_uuid)
            if stop_check is not None:
                walk.stop_check = stop_check
            report = walk.run()
            code = allocations_exit_code(report)
        except exception.Interrupted as exc:
            report, code = exc.report, exc.exit_code
        finally:
            run_context.close()
    problems = []
    if metrics_file:
        now = time.time()
        text = metrics.render_allocations(report, code,
                                          time.monotonic() - started, now)
        success = now if code in (ExitCode.HEALED,
                                  ExitCode.NOTHING_TO_HEAL) else None
        try:
            metrics.write(metrics_file, text, success,
                          prefix=metrics.ALLOCATIONS_PREFIX)
        except OSError as exc:
            problems.append('nova-heal: error: cannot write metrics file '
                            '%s: %s' % (metrics_file, exc))
            code = ExitCode.NEEDS_ATTENTION
    return AllocationsResult(report, code, problems)


@contextlib.contextmanager
def _placement_engine(conf):
    """The engine of ``[placement_database]/connection``."""
    try:
        # A connection for each of the walk's loaders.
        engine = engines.create_engine(
            conf.placement_database.connection,
            pool_size=allocation_walk.LOADERS,
            lock_wait_timeout=conf.healreq.lock_wait_timeout)
    except (sqlalchemy.exc.ArgumentError, ValueError, ImportError) as exc:
        raise exception.InvalidInput(
            'invalid [placement_database]/connection: %s'
            % engines.describe_error(exc))
    try:
        yield engine
    finally:
        engine.dispose()


def refuse_unsafe_outputs(conf, files):
    """Refuse output files that would replace what the configuration names.

    ``files`` are ``(option, path)`` pairs; nothing is read (see
    healreq.protected). Returns the configuration's Protected. Raises
    UnsafeOutput.
    """
    protected = Protected.configured(conf)
    protected.check_outputs(files, audit_url(conf))
    return protected


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
    def changes_to_revert(store, api_engine):
        if store.get_run(run_id) is None:
            raise exception.InvalidInput('no run %s in the audit store'
                                         % run_id)
        if store.is_running(run_id):
            if not wait:
                raise exception.RunInProgress(
                    'run %s is still running (its lease is held); revert '
                    'it once it has ended, or pass --wait' % run_id)
            with deferring():
                _wait_for_end(store, run_id, stop_check, pause)
            # It may have died instead of ending: settle what it left.
            store.recover(api_engine)
        # Newest first: if a run touched a row twice, undo in reverse.
        return [writer.Change(
            instance_uuid=c['instance_uuid'], spec_id=c['spec_id'],
            fields=json.loads(c['fields']), before=c['before_text'],
            after=c['after_text'], before_digest=c['before_digest'],
            after_digest=c['after_digest'], action=c['action']).inverse()
            for c in reversed(store.changes(run_id, instance_uuid,
                                            audit_store.APPLIED))]

    return _replay_run(conf, 'revert', command,
                       {'revert_of': run_id, 'instance': instance_uuid},
                       changes_to_revert, dry_run, audit, clock,
                       rederive=False, revert_of=run_id)


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
    return _replay_run(conf, 'apply', command,
                       {'plan': plan_file, 'plan_run': planned_by},
                       lambda store, api_engine: changes, dry_run, audit,
                       clock, rederive=True,
                       decision_settings=dataclasses.replace(
                           settings(conf), **chosen),
                       release=release, check_release=check_release)


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


def _replay_run(conf, mode, command, filters, prepare, dry_run, audit,
                clock, rederive, decision_settings=None, release=None,
                check_release=None, revert_of=None):
    """A recorded run of revert or apply.

    ``decision_settings`` default to the configuration's; ``release`` is
    the Release to apply (None: [healreq]/target_release, else
    detected); ``check_release(detection)``, once the release is known,
    may refuse it.
    """
    def work(api_engine, store, run_id, changes):
        run_context = _context(conf, api_engine, clock,
                               release or target_release(conf),
                               conf.service_down_time)
        replayer = replay.Replayer(
            run_context, decision_settings or settings(conf), store, run_id,
            dry_run=dry_run, rederive=rederive, revert_of=revert_of,
            check_release=check_release)
        try:
            return replayer.run(changes)
        except _ENDS_AFTER_WORK as exc:
            _attach_report(exc, replayer.report, replayer.report.findings)
            raise
        finally:
            run_context.close()

    with _checked_api_engine(conf, audit) as api_engine, _audit_store(
            conf, audit) as store:
        return _recorded_run(api_engine, store, mode, command, filters,
                             work, prepare=prepare)


def _recorded_run(api_engine, store, mode, command, filters, work,
                  outputs=None, prepare=None):
    """Recover, start a run record, do ``work``, finish the record.

    ``prepare(store, api_engine)``, if given, runs before the run is
    recorded and may refuse the run; its result is passed on to ``work``.
    """
    store.recover(api_engine)
    arguments = () if prepare is None else (prepare(store, api_engine),)
    run_id = store.start_run(mode, masking.mask_password(command), filters)
    try:
        return _leased_run(api_engine, store, run_id, work, outputs,
                           arguments)
    finally:
        # On every way out, exceptions included: once the run can write
        # nothing more, recovery may settle what it left pending.
        store.release(run_id)


def _leased_run(api_engine, store, run_id, work, outputs, arguments):
    """Run ``work`` for the started run ``run_id`` and finish its record.

    Once work has begun, what it did is always reported: an error that
    ends it after some work (the audit store or the API database
    failing, a signal) becomes the result's exit code and problem, with
    the report of the work done.
    """
    started = time.monotonic()
    problems = []
    try:
        report = work(api_engine, store, run_id, *arguments)
        code = exit_code_for(report)
    except _ENDS_AFTER_WORK as exc:
        if exc.report is None:
            _finish_failed(store, run_id, exc)
            raise
        report, code = exc.report, exc.exit_code
        if not isinstance(exc, exception.Interrupted):
            problems.append(exc.line())
    except exception.HealreqError as exc:
        _finish_failed(store, run_id, exc)
        raise
    except Exception as exc:
        _finish_unexpected(store, run_id, exc)
        raise
    if report.audit_error:
        _add_problem(problems, report.audit_error)
    if outputs is not None:
        for problem in outputs(report, code, run_id,
                               time.monotonic() - started):
            _add_problem(problems, problem)
    if problems and code < ExitCode.INVALID_INPUT:
        code = ExitCode.NEEDS_ATTENTION
    summary = report.summary()
    if problems:
        summary['problems'] = list(problems)
    try:
        store.finish_run(run_id, summary, code)
    except exception.AuditStoreError as exc:
        _add_problem(problems, exc.line())
        code = code if code >= ExitCode.INVALID_INPUT else (
            ExitCode.NEEDS_ATTENTION)
    return RunResult(run_id, report, code, problems)


def _add_problem(problems, line):
    """Add ``line`` to ``problems`` unless it is there already.

    A database that is gone (a failed Galera node) fails every statement
    with the same error: it is reported once.
    """
    if line not in problems:
        problems.append(line)


# Errors that may end a run after it did some work, which is reported.
_ENDS_AFTER_WORK = (exception.Interrupted, exception.AuditStoreError,
                    exception.ApiDatabaseError)


def _attach_report(exc, report, worked):
    """Let ``exc`` carry ``report`` if the run did any work (``worked``).

    An interruption always carries it: the run stopped as asked.
    """
    if worked or isinstance(exc, exception.Interrupted):
        exc.report = report


def _finish_failed(store, run_id, exc):
    """Close the run of ``exc``; a store that fails too is passed over."""
    try:
        store.finish_run(run_id, {'error': exc.line()}, exc.exit_code)
    except exception.AuditStoreError:
        if not isinstance(exc, exception.AuditStoreError):
            raise


def _finish_unexpected(store, run_id, exc):
    """Close the run of an unexpected error with 255, if the store can."""
    message = masking.mask_password('%s: %s' % (
        type(exc).__name__, exception.first_line(exc)))
    try:
        store.finish_run(run_id, {'error': message},
                         ExitCode.UNEXPECTED_ERROR)
    except exception.HealreqError:
        pass  # the original error is the one to report


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


def _context(conf, api_engine, clock, release, service_down_time):
    """The RunContext of a run on ``api_engine``, as configured."""
    return context.RunContext(
        api_engine, conf.database.connection,
        lock_wait_timeout=conf.healreq.lock_wait_timeout, clock=clock,
        target_release=release, service_down_time=service_down_time)


@contextlib.contextmanager
def _api_engine(conf, pool_size=engines.POOL_SIZE):
    """The API database engine of ``[api_database]/connection``."""
    if not conf.api_database.connection:
        raise exception.InvalidInput('[api_database]/connection is not set; '
                                     'pass --config-file /etc/nova/nova.conf')
    try:
        engine = engines.create_engine(
            conf.api_database.connection, pool_size=pool_size,
            lock_wait_timeout=conf.healreq.lock_wait_timeout)
    except (sqlalchemy.exc.ArgumentError, ValueError, ImportError) as exc:
        raise exception.InvalidInput('invalid [api_database]/connection: '
                                     '%s' % engines.describe_error(exc))
    try:
        yield engine
    finally:
        engine.dispose()


@contextlib.contextmanager
def _checked_api_engine(conf, audit, files=(), protected=None,
                        pool_size=engines.POOL_SIZE):
    """The API database engine, once the cells' databases are protected.

    The cell mappings are read first: the configured audit store must not
    be one of the cells' databases (unless ``audit`` is given instead),
    and no output ``files`` ((option, path) pairs) may replace a cell's
    SQLite file. ``protected`` is the configuration's, if known.
    """
    if protected is None:
        protected = Protected.configured(conf)
    with _api_engine(conf, pool_size) as api_engine:
        if audit is None or any(path for _, path in files):
            with exception.reraised_as(exception.ApiDatabaseError):
                with api_engine.connect() as conn:
                    cells = api_queries.get_cells(conn)
            with_cells = protected.with_cells(cells,
                                              conf.database.connection)
            if audit is None:
                with_cells.check_store(audit_url(conf))
            with_cells.check_outputs(files, audit_url(conf))
        yield api_engine


def audit_url(conf):
    """The audit store's URL: ``audit_connection`` or under state_path."""
    return conf.healreq.audit_connection or 'sqlite:///%s' % os.path.join(
        os.path.abspath(conf.healreq.state_path), 'audit.sqlite')


_AUDIT_OPEN_ERRORS = (OSError, ValueError, ImportError,
                      audit_schema.SchemaTooNew) + exception.DB_ERRORS


def open_audit(conf, read_only=False, check_cells=False):
    """Open (creating or upgrading) the audit store; the caller disposes.

    With ``read_only``, an SQLite store that is already at this release's
    schema is opened read-only and nothing is written to it or its file
    (a store on read-only storage can be reviewed); one that needs an
    upgrade and cannot be written is reported in one line. Raises
    AuditStoreError (exit 127) if it cannot be opened, or if it would be
    a Nova database the configuration names (healreq.protected). With
    ``check_cells``, and an API database configured, the cell mappings
    are read first and a store in a cell's database is refused too (the
    commands that run work through _checked_api_engine instead); raises
    ApiDatabaseError if they cannot be read.
    """
    url = audit_url(conf)
    protected = Protected.configured(conf)
    protected.check_store(url)
    if check_cells and conf.api_database.connection:
        with _api_engine(conf, pool_size=1) as api_engine:
            with exception.reraised_as(exception.ApiDatabaseError):
                with api_engine.connect() as conn:
                    cells = api_queries.get_cells(conn)
        protected.with_cells(cells, conf.database.connection).check_store(
            url)
    try:
        if read_only:
            store = audit_store.open_read_only(url)
            if store is not None:
                return store
        return audit_store.AuditStore(url)
    except _AUDIT_OPEN_ERRORS as exc:
        reason = engines.describe_error(exc)
        if read_only and (isinstance(exc, OSError)
                          or 'readonly' in reason.lower()):
            reason = ('the store needs creating or upgrading to this '
                      'release\'s schema but cannot be written (%s)' % reason)
        raise exception.AuditStoreError(
            'cannot open %s: %s' % (urls.mask_url(url),
                                    masking.mask_password(reason)),
            exit_code=ExitCode.INVALID_INPUT)


@contextlib.contextmanager
def _audit_store(conf, store=None):
    """``store`` if given, else the configured store, disposed after."""
    if store is not None:
        yield store
        return
    store = open_audit(conf)
    try:
        yield store
    finally:
        store.dispose()


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
        text = metrics.render(report, code, duration, now, dry_run)
        success = now if code in (ExitCode.HEALED,
                                  ExitCode.NOTHING_TO_HEAL) else None
        try:
            metrics.write(metrics_file, text, success)
        except OSError as exc:
            problems.append('nova-heal: error: cannot write metrics file '
                            '%s: %s' % (metrics_file, exc))
    return problems
