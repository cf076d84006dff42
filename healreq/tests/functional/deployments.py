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

"""A Nova deployment on a real backend, and its nova.conf, as fixtures.

``CellsDeployment`` builds, with ``healreq.testing.deployment``, an API
database with cell0 and two cells on a backend fixture (see
``backends``); ``NovaConf`` writes the nova.conf that points the command
at it; ``StatePath`` gives every run of a test a fresh
``[healreq]/state_path`` (so its own audit store). ``DeploymentRows`` reads
and writes the deployment's rows for assertions and set-ups.
"""

import json
import os

import fixtures
import sqlalchemy as sa

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep


class StatePath(fixtures.Fixture):
    """A temporary ``[healreq]/state_path``, set for every run.

    Set through the environment, so that it applies whatever
    configuration file a run is given.
    """

    def _setUp(self):
        self.path = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_HEALREQ__STATE_PATH', self.path))


class DeploymentRows(object):
    """Row helpers over ``self.deployment`` (a testing Deployment)."""

    def add_drifted(self, cell, **kwargs):
        """An instance running m1.large whose spec holds m1.small."""
        return self.deployment.add_instance(
            cell, demo.M1_LARGE, spec_flavor=demo.M1_SMALL, **kwargs)

    def add_consistent(self, cell, **kwargs):
        """An instance running m1.small whose spec agrees."""
        return self.deployment.add_instance(cell, demo.M1_SMALL, **kwargs)

    def spec(self, instance_uuid):
        """The stored spec, parsed."""
        return json.loads(self.deployment.spec_text(instance_uuid))

    def spec_flavor(self, instance_uuid):
        """The flavor primitive of the stored spec."""
        return self.spec(instance_uuid)['nova_object.data']['flavor']

    def spec_updated_at(self, instance_uuid):
        """``request_specs.updated_at`` of an instance."""
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return conn.execute(sa.select(t.c.updated_at).where(
                t.c.instance_uuid == instance_uuid)).scalar()

    def all_spec_texts(self):
        """Every stored spec text, by instance UUID."""
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return dict(conn.execute(sa.select(t.c.instance_uuid,
                                               t.c.spec)).all())

    def update_instance(self, cell, instance_uuid, **values):
        """Set columns of an instance's ``instances`` row."""
        t = tables.instances
        with cell.engine.begin() as conn:
            conn.execute(t.update().where(
                t.c.uuid == instance_uuid).values(**values))

    def update_extra(self, cell, instance_uuid, **values):
        """Set columns of an instance's ``instance_extra`` row."""
        t = tables.instance_extra
        with cell.engine.begin() as conn:
            conn.execute(t.update().where(
                t.c.instance_uuid == instance_uuid).values(**values))

    def instance_flavors(self, cell, instance_uuid):
        """``instance_extra.flavor`` of an instance, parsed."""
        t = tables.instance_extra
        with cell.engine.connect() as conn:
            return json.loads(conn.execute(sa.select(t.c.flavor).where(
                t.c.instance_uuid == instance_uuid)).scalar())


class CellsDeployment(DeploymentRows, fixtures.Fixture):
    """An API database with cell0 and two cells, on one backend.

    ``backend`` is a backend fixture, already set up. cell1's mapping
    holds a URL template formatted from [database]/connection (the
    backend's reference URL); cell2's mapping holds a plain URL.
    """

    def __init__(self, backend):
        super().__init__()
        self.backend = backend

    def _setUp(self):
        self.deployment = dep.Deployment(self.backend.database_url('api'))
        self.addCleanup(self.deployment.dispose)
        self.cell0 = self.deployment.add_cell(
            'cell0', self.backend.database_url('cell0'),
            uuid=dep.CELL0_UUID)
        self.cell1 = self.deployment.add_cell(
            'cell1', self.backend.database_url('cell1'),
            stored_url=self.backend.template('cell1'))
        self.cell2 = self.deployment.add_cell(
            'cell2', self.backend.database_url('cell2'))

    def api_url(self):
        """The API database URL, password included."""
        return self.deployment.api_engine.url.render_as_string(
            hide_password=False)


class ConfigFile(fixtures.Fixture):
    """A configuration file holding exactly ``text``; ``path`` names it."""

    def __init__(self, text):
        super().__init__()
        self.text = text

    def _setUp(self):
        directory = self.useFixture(fixtures.TempDir()).path
        self.path = os.path.join(directory, 'nova.conf')
        with open(self.path, 'w') as handle:
            handle.write(self.text)


class NovaConf(ConfigFile):
    """The nova.conf of a CellsDeployment, plus ``extra`` [healreq] lines.

    Like a real one, it names a message bus, which the command must never
    need.
    """

    def __init__(self, cells, extra=''):
        super().__init__(
            '[DEFAULT]\ntransport_url = rabbit://nova:pw@mq//\n'
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\n%s'
            % (cells.api_url(), cells.backend.reference_url(), extra))
