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


"""Internal ``_nova*`` hints and a rebuild's forced hosts, against Nova.

A deployment at the installed Nova's versions holds specs a rebuild with
a new image saved (the rebuild hint, forced host and node), specs with
hints a user sent at boot, one of them with flavor drift as well, and
specs that are consistent. The real command heals it. Every written row
is loaded with that Nova's ``RequestSpec._from_db_object``:
``request_is_rebuild`` is then false and the other hints are those
stored. The touched keys of each written document (the hints, the
forced destinations, their entries in the change list) are compared
with what that Nova writes for the stored primitive after
``reset_forced_destinations`` and the removal of the internal hints.
"""

import json

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.compat import base
from healreq.tests.functional import deployment_case

try:
    from nova import context as nova_context
    from nova import objects
    from nova.scheduler import utils as scheduler_utils
except ImportError:  # pragma: no cover - depends on the environment
    objects = None

DATA = 'nova_object.data'
CHANGES = 'nova_object.changes'
REBUILD = {'_nova_check_type': ['rebuild']}
OTHER_HINTS = {'rack': ['r1'],
               'different_host': ['0f7e5c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b']}


def _forced(changes):
    return sorted(set(changes) & {'force_hosts', 'force_nodes'})


class InternalHintsCompatTest(base.CommandInItsOwnProcess, base.NovaTestCase,
                              deployment_case.DeploymentTestCase):

    def setUp(self):
        super().setUp()
        self.context = nova_context.get_admin_context()
        for cell in self.deployment.cells:
            if cell.engine is not None:
                with cell.engine.begin() as conn:
                    conn.execute(tables.services.update().values(
                        version=base.RELEASE.service_version))
        self.cases = {}

    def _add(self, case, hints, forced=None, changes=None,
             cur=demo.M1_SMALL, spec_flavor=None, drifts=True):
        uuid = self.deployment.add_instance(
            self.cell1, cur, spec_flavor=spec_flavor, spec_fields={
                'version': '%d.%d' % base.RELEASE.spec_version,
                'spec_image': dep.image(props_version='%d.%d'
                                        % base.RELEASE.props_version),
                'scheduler_hints': dict(hints)})
        spec = json.loads(self.deployment.spec_text(uuid))
        if forced is not None:
            spec[DATA]['force_hosts'] = [forced]
            spec[DATA]['force_nodes'] = [forced]
        if changes is not None:
            spec[CHANGES] = changes
        self.deployment.set_spec(uuid, json.dumps(spec))
        self.cases[uuid] = (case, drifts)
        return uuid

    def _build(self):
        # What a rebuild with a new image saved through the is_bfv heal.
        self._add('rebuild', dict(OTHER_HINTS, **REBUILD), 'compute-1',
                  ['force_hosts', 'force_nodes', 'is_bfv'])
        self._add('rebuild, forced alone in the changes',
                  dict(REBUILD), 'compute-1', ['force_hosts', 'force_nodes'])
        self._add('rebuild with flavor drift', dict(OTHER_HINTS, **REBUILD),
                  'compute-1', ['force_hosts', 'force_nodes', 'is_bfv'],
                  cur=demo.M1_LARGE, spec_flavor=demo.M1_SMALL)
        # Sent by a user at boot before Nova 34.
        self._add('injected', dict(OTHER_HINTS, _nova_check_type=['rebuild'],
                                   _nova_other=['x']))
        self._add('injected other value, forced at boot',
                  dict(_nova_check_type=['resize']), 'compute-2')
        # Consistent: the twin, and a user's forced host at boot.
        self._add('twin', OTHER_HINTS, drifts=False)
        self._add('forced at boot', OTHER_HINTS, 'compute-2', drifts=False)

    def _nova_writes(self, stored_text):
        """What this Nova stores once it resets the stored spec.

        The stored primitive, as Nova carries it over RPC (changes kept),
        its forced destinations reset, its internal hints removed in
        place, serialised again.
        """
        spec = objects.RequestSpec.obj_from_primitive(json.loads(stored_text))
        if scheduler_utils.request_is_rebuild(spec):
            spec.reset_forced_destinations()
        for key in [k for k in spec.scheduler_hints if k.startswith('_nova')]:
            del spec.scheduler_hints[key]
        return spec.obj_to_primitive()

    def test_written_specs_load_and_match_nova(self):
        self._build()
        originals = self.all_spec_texts()
        result = self.heal('--format', 'json')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        document = json.loads(result.stdout)
        healed = {r['instance_uuid'] for r in document['results']
                  if r['status'] == 'healed'}
        self.assertEqual({u for u, (_, drifts) in self.cases.items()
                          if drifts}, healed)
        checks, disagreements = 0, []
        for uuid, (case, drifts) in sorted(self.cases.items()):
            text = self.deployment.spec_text(uuid)
            if not drifts:
                self.assertEqual(originals[uuid], text, case)
                continue
            loaded = objects.RequestSpec._from_db_object(
                self.context, objects.RequestSpec(),
                {'id': 1, 'instance_uuid': uuid, 'spec': text})
            stored = objects.RequestSpec.obj_from_primitive(
                json.loads(originals[uuid]))
            expected_hints = {k: v for k, v in stored.scheduler_hints.items()
                              if not k.startswith('_nova')}
            written = json.loads(text)
            nova = self._nova_writes(originals[uuid])
            comparisons = [
                ('request_is_rebuild', False,
                 scheduler_utils.request_is_rebuild(loaded)),
                ('loaded hints', expected_hints, loaded.scheduler_hints),
                ('loaded force_hosts', nova[DATA]['force_hosts'],
                 loaded.force_hosts),
                ('loaded force_nodes', nova[DATA]['force_nodes'],
                 loaded.force_nodes),
            ]
            for key in ('scheduler_hints', 'force_hosts', 'force_nodes'):
                comparisons.append(('stored ' + key, nova[DATA][key],
                                    written[DATA][key]))
            # Nested objects loaded from a primitive count as changed in
            # Nova's list; the reset decides the forced fields' entries.
            comparisons.append(('recorded resets',
                                _forced(nova.get(CHANGES, [])),
                                _forced(written.get(CHANGES, []))))
            for what, want, got in comparisons:
                checks += 1
                if want != got:
                    disagreements.append((case, what, want, got))
        base.record_summary('internal hints, %d cases, %d checks, %d '
                            'disagreements' % (len(self.cases), checks,
                                               len(disagreements)))
        self.assertEqual([], disagreements)
