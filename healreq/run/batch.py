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

"""Deciding and writing one batch of a cell's instances.

Every instance of a batch is evaluated (``decisions``); those to write
are read again, all at once, and each is written only if the decision
taken again on its fresh records leads to the same new spec
(``writer``).
"""

from oslo_log import log as logging

from healreq import exception
from healreq.heal import decisions
from healreq.heal import findings
from healreq.heal.findings import Finding
from healreq.heal.findings import Outcome
from healreq.heal.findings import Status
from healreq import masking
from healreq.run import read_threads
from healreq.run import records
from healreq.run import writer as spec_writer

LOG = logging.getLogger(__name__)


class BatchHealer(object):
    """Decides and writes the batches of one run of ``request-specs``.

    ``context``, ``options``, ``budget`` and ``writer`` are the walk's
    (see walker.Walker); ``stop_check()`` is called while a batch's
    instances to write are read again, and raises to stop the run.
    """

    def __init__(self, context, options, budget, writer, stop_check):
        self.context = context
        self.options = options
        self.budget = budget
        self.writer = writer
        self.stop_check = stop_check

    def process(self, cell, engine, batch, out):
        """Evaluate and heal a batch; return how many were processed.

        Its findings go to ``out`` (a CellFindings).
        """
        return self.finish(cell, batch, self.begin(cell, engine, batch), out)

    def begin(self, cell, engine, batch):
        """Evaluate a batch and start reading its instances to write again.

        Returns ``(evaluations, future of the fresh records)`` for
        ``finish``.
        """
        now = self.context.clock()
        evaluations = [self._evaluate(record, cell, now) for record in batch]
        # Instances about to be written are read again, all at once, right
        # before their writes: a decision is only acted upon if it still
        # holds for the records as they are now. A dry run does the same,
        # so that it reports what a heal would do.
        to_write = [record for record, evaluation in zip(batch, evaluations)
                    if _to_write(evaluation)]
        fresh = read_threads.started(
            lambda: records.reread(engine, to_write,
                                   self.options.settings.read_fields)
        ) if to_write else None
        return evaluations, fresh

    def finish(self, cell, batch, begun, out):
        """Heal and report a batch begun by ``begin``, into ``out``.

        Returns how many of its instances were processed: all, unless
        --max-count is used up.
        """
        evaluations, future = begun
        fresh = read_threads.waited(future, self.stop_check) if future else {}
        processed = len(batch)
        for position, (record, evaluation) in enumerate(
                zip(batch, evaluations)):
            if self.budget.used_up():
                processed = position
                break
            finding = self._final_finding(cell, record, fresh, evaluation,
                                          out)
            if finding is None:
                processed = position
                break
            out.add(finding)
        self.budget.checked(processed)
        out.end_batch()
        return processed

    def _final_finding(self, cell, record, fresh, evaluation, out):
        """The instance's Finding: as evaluated, or once its write ended.

        ``fresh`` holds the batch's records read again, by uuid. None,
        touching nothing, when --max-count is used up.
        """
        if not _to_write(evaluation):
            return evaluation.finding
        return self._heal_alone(cell, record,
                                fresh[record.instance['uuid']], evaluation,
                                out)

    def _evaluate(self, record, cell, now):
        """``decisions.evaluate``; an unexpected failure is an error."""
        try:
            return decisions.evaluate(record, cell, now,
                                      self.options.settings,
                                      self.context.profile)
        except Exception as exc:
            finding = Finding(instance_uuid=record.instance['uuid'],
                              cell_uuid=cell['uuid'], status=Status.ERROR)
            return decisions.Evaluation(
                findings.settle(finding, _internal_error(finding, exc)))

    def _heal_alone(self, cell, record, fresh, evaluation, out):
        """``_heal``; an unexpected failure fails this instance only.

        Errors that end the run (the API database or the audit store
        failing) are raised as they are.
        """
        try:
            return self._heal(cell, record, fresh, evaluation, out)
        except exception.HealreqError:
            raise
        except Exception as exc:
            return findings.settle(
                evaluation.finding,
                _internal_error(evaluation.finding, exc))

    def _heal(self, cell, record, fresh, evaluation, out):
        """Write the healed spec, deciding again on ``fresh``.

        Returns the instance's final Finding, or None, touching nothing,
        when --max-count is used up.
        """
        finding = evaluation.finding
        change = _change(cell, record, evaluation)
        outcome = (self._decide_again(cell, fresh, evaluation)
                   or self.writer.write(change, finding.cell_uuid,
                                        self.budget))
        if outcome is None:
            return None
        finding = findings.settle(finding, outcome)
        if finding.status is Status.HEALED:
            LOG.info('Healed request spec of instance %s: %s',
                     finding.instance_uuid,
                     '; '.join(str(c) for c in finding.changes))
        elif (finding.status is Status.DRIFTED
              and self.options.collect_plan):
            out.plan(finding, record.spec_row, evaluation.new_spec)
        return finding

    def _decide_again(self, cell, fresh, evaluation):
        """None if the fresh records lead to the same new spec.

        If not, the Outcome instead: the finding becomes a conflict.
        """
        again = decisions.evaluate(fresh, cell, self.context.clock(),
                                   self.options.settings,
                                   self.context.profile)
        if again.new_spec == evaluation.new_spec:
            return None
        return Outcome(
            Status.CONFLICT, 'instance-changed',
            'the instance changed while it was being checked (now: %s%s); '
            'left alone' % (again.finding.status.value,
                            ', %s' % again.finding.reason
                            if again.finding.reason else ''))


def _change(cell, record, evaluation):
    """The writer.Change that heals ``record`` as ``evaluation`` decided.

    A missing spec is inserted, in cell ``cell``.
    """
    finding = evaluation.finding
    if record.spec_row is None:
        return spec_writer.Change(
            instance_uuid=finding.instance_uuid, spec_id=None,
            fields=finding.rewritten, before=None,
            after=evaluation.new_spec,
            action=spec_writer.INSERT, cell_id=cell['id'])
    return spec_writer.Change(
        instance_uuid=finding.instance_uuid,
        spec_id=record.spec_row['id'], fields=finding.rewritten,
        before=record.spec_row['spec'], after=evaluation.new_spec)


def _to_write(evaluation):
    """Whether the evaluation asks for a write (not a report-only drift)."""
    return (evaluation.finding.status is Status.DRIFTED
            and evaluation.new_spec is not None)


def _internal_error(finding, exc):
    """The Outcome of ``finding`` after the unexpected error ``exc``."""
    LOG.exception('Instance %s: unexpected error', finding.instance_uuid)
    return Outcome(Status.ERROR, 'internal-error', masking.mask_password(
        '%s: %s' % (type(exc).__name__, exception.first_line(exc))),
        drop_changes=True)
