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


"""Plan files: the changes a dry run would make, for review and apply."""

import dataclasses
import datetime
import json

from healreq import atomic_file
from healreq.audit import store as audit_store
from healreq import exception
from healreq import policies

FORMAT = 'healreq-plan/1'


@dataclasses.dataclass
class PlannedChange:
    """One change of a plan: ``before`` becomes ``after`` in a spec row.

    ``action`` insert creates a missing row (``spec_id`` and ``before``
    None).
    """
    instance_uuid: str
    spec_id: int
    fields: list
    before: str
    after: str
    before_digest: str
    action: str = audit_store.UPDATE


def write_plan(path, run_id, planned, settings):
    """Write ``planned`` (finding, spec row, new text) triples to ``path``.

    ``settings`` (a JSON object) are the run's settings that change what
    is derived (its release and policies), which apply derives under
    again. Replaced atomically and owner-only (see healreq.atomic_file),
    so a reviewer never sees half a plan.
    """
    changes = []
    for finding, spec_row, new_spec in planned:
        before = None if spec_row is None else spec_row['spec']
        changes.append({
            'instance_uuid': finding.instance_uuid,
            'cell_uuid': finding.cell_uuid,
            'action': (audit_store.INSERT if spec_row is None
                       else audit_store.UPDATE),
            'spec_id': None if spec_row is None else spec_row['id'],
            'fields': finding.rewritten,
            'reason': finding.reason,
            'summary': [str(change) for change in finding.changes],
            'before_digest': audit_store.digest(before),
            'after_digest': audit_store.digest(new_spec),
            'before': before,
            'after': new_spec,
        })
    document = {
        'format': FORMAT,
        'created_at': datetime.datetime.now(
            datetime.timezone.utc).isoformat(timespec='seconds'),
        'run_id': run_id,
        'settings': settings,
        # For the releases before settings were recorded.
        'az_policy': settings.get('az_policy'),
        'changes': changes,
    }
    atomic_file.write(path, json.dumps(document, indent=2) + '\n', 0o600)
    return len(changes)


def _spec_id(path, change, action):
    """The change's spec_id: a JSON integer, never 1.7, "1" or true.

    An insert has none (null).
    """
    spec_id = change['spec_id']
    if action == audit_store.INSERT and spec_id is None:
        return None
    if type(spec_id) is not int:
        raise exception.PlanError(
            'plan %s is malformed: spec_id %s of %s is not an integer'
            % (path, json.dumps(spec_id), change['instance_uuid']))
    return spec_id


def _action(path, change):
    action = change.get('action', audit_store.UPDATE)
    if action not in (audit_store.UPDATE, audit_store.INSERT):
        raise exception.PlanError('plan %s is malformed: action %s of %s '
                                  'is neither update nor insert' % (
                                      path, json.dumps(action),
                                      change['instance_uuid']))
    return action


def _text(path, change, key, action=None):
    if key == 'before' and action == audit_store.INSERT and (
            change[key] is None):
        return None
    if not isinstance(change[key], str):
        raise exception.PlanError('plan %s is malformed: %s %s is not a '
                                  'string' % (path, key,
                                              json.dumps(change[key])))
    return change[key]


def _names(path, change):
    fields = change['fields']
    if not isinstance(fields, list) or not all(
            isinstance(name, str) for name in fields):
        raise exception.PlanError(
            'plan %s is malformed: fields of %s is not a list of names'
            % (path, change['instance_uuid']))
    return fields


def read_plan(path):
    """Read a plan; return ``(run_id, settings, [PlannedChange])``.

    ``settings`` is the mapping write_plan recorded; a plan of a release
    before they were recorded gives its az_policy alone, and one before
    --flavor-policy the policy those releases followed. Raises PlanError
    if the file is not a plan or was edited.
    """
    try:
        with open(path) as handle:
            document = json.load(handle)
    except (OSError, ValueError) as exc:
        raise exception.PlanError('cannot read plan %s: %s' % (path, exc))
    if not isinstance(document, dict) or document.get('format') != FORMAT:
        raise exception.PlanError('%s is not a %s file' % (path, FORMAT))
    changes = []
    try:
        for change in document['changes']:
            action = _action(path, change)
            before = _text(path, change, 'before', action)
            after = _text(path, change, 'after')
            if (audit_store.digest(before) != change['before_digest']
                    or audit_store.digest(after) != change['after_digest']):
                raise exception.PlanError(
                    'plan %s was edited: the digests of %s no longer match'
                    % (path, change['instance_uuid']))
            changes.append(PlannedChange(
                instance_uuid=_text(path, change, 'instance_uuid'),
                spec_id=_spec_id(path, change, action),
                fields=_names(path, change), before=before, after=after,
                before_digest=change['before_digest'], action=action))
    except (KeyError, TypeError, AttributeError) as exc:
        raise exception.PlanError('plan %s is malformed: %s' % (path, exc))
    settings = document.get('settings')
    if settings is None:
        settings = {'az_policy': document.get('az_policy', policies.AZ_REPORT)}
    elif not isinstance(settings, dict):
        raise exception.PlanError('plan %s is malformed: settings %s'
                                  % (path, json.dumps(settings)))
    # Releases before --flavor-policy healed propagated flavors.
    settings.setdefault('flavor_policy', policies.FLAVOR_INSTANCE)
    return document.get('run_id'), settings, changes
