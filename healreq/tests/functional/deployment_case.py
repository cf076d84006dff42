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

"""The base of the functional tests: a deployment on each real backend.

Every test runs once on SQLite and once on MySQL/MariaDB (its id ends in
"(SQLite)" or "(MySQL)"), each time with its own freshly created
databases; see ``backends`` for how MySQL is found, skipped or required.
The deployment, its nova.conf and the state path come from the fixtures
in ``deployments``.
"""

import json

import testscenarios
import testtools

from healreq import api
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import backends
from healreq.tests.functional import deployments


class DeploymentTestCase(deployments.DeploymentRows,
                         testscenarios.WithScenarios, testtools.TestCase):
    """A deployment with cell0 and two cells on each backend.

    ``db`` is the backend fixture, ``deployment`` the testing Deployment,
    ``cell0``, ``cell1`` (mapped by URL template) and ``cell2`` (plain
    URL) its cells, ``config_file`` its nova.conf and ``state_path`` the
    directory of the audit store of every run.
    """

    scenarios = backends.SCENARIOS

    def setUp(self):
        super().setUp()
        self.state_path = self.useFixture(deployments.StatePath()).path
        self.db = self.useFixture(self.backend_fixture())
        self.cells = self.useFixture(deployments.CellsDeployment(self.db))
        self.deployment = self.cells.deployment
        self.cell0 = self.cells.cell0
        self.cell1 = self.cells.cell1
        self.cell2 = self.cells.cell2
        self.config_file = self.write_config()

    def write_config(self, extra=''):
        """A nova.conf for the deployment, plus ``extra`` [healreq] lines."""
        return self.useFixture(deployments.NovaConf(self.cells, extra)).path

    def add_placement(self):
        """A Placement database, named in the deployment's nova.conf.

        Returns the testing Placement; ``config_file`` becomes a nova.conf
        with its ``[placement_database]``.
        """
        placement = dep.Placement(self.db.database_url('placement'))
        self.addCleanup(placement.dispose)
        self.config_file = self.write_config(
            '\n[placement_database]\nconnection = %s\n'
            % placement.engine.url.render_as_string(hide_password=False))
        return placement

    def write_config_text(self, text):
        """Write a configuration file holding exactly ``text``."""
        return self.useFixture(deployments.ConfigFile(text)).path

    def run_cli(self, *argv, config_file=None):
        """Run any ``nova-heal`` command with the deployment's config."""
        return cli.run_main(['--config-file', config_file or self.config_file]
                            + list(argv))

    def run_json(self, *argv, config_file=None):
        """Run a command with ``--format json``; return result, document."""
        return self.parse_json(self.run_cli(
            *(list(argv) + ['--format', 'json']), config_file=config_file))

    def heal(self, *args, config_file=None):
        """Run ``request-specs`` with ``args``."""
        return self.run_cli('request-specs', *args, config_file=config_file)

    def heal_json(self, *args, config_file=None):
        """Run ``request-specs --format json``; return result, document."""
        return self.parse_json(self.heal('--format', 'json', *args,
                                         config_file=config_file))

    def parse_json(self, result):
        """``(result, document)``; fails unless stdout is one document."""
        try:
            return result, json.loads(result.stdout)
        except ValueError as exc:
            self.fail('stdout is not one JSON document (%s): %r\n%s'
                      % (exc, result.stdout, result.stderr))

    def run_in_process(self, clock=None, **options):
        """Run request-specs in-process through the API, as the CLI does.

        Returns the RunReport. ``clock`` replaces the run's clock.
        """
        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        kwargs = {'clock': clock} if clock is not None else {}
        return api.run_request_specs(
            conf, api.Options.from_conf(conf, **options), **kwargs).report
