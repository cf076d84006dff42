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

"""Configuration options and reading a deployment's nova.conf."""

import dataclasses
import inspect
import io
import os

import fixtures
from oslo_config import cfg
from oslo_config import types
import testtools

from healreq import api
from healreq.cmd import main
from healreq import conf as healreq_conf
from healreq.conf import opts
from healreq.db import engines
from healreq import exception
from healreq.heal import decisions
from healreq.run import context
from healreq.run import records

NOVA_CONF = """\
[DEFAULT]
my_ip = 192.0.2.10
transport_url = rabbit://nova:mqsecret@mq1:5672,nova:mqsecret@mq2:5672/
enabled_apis = osapi_compute,metadata
instances_path = /var/lib/nova/instances

[api]
auth_strategy = keystone

[api_database]
connection = mysql+pymysql://nova:apisecret@db/nova_api?charset=utf8
max_pool_size = 20
connection_recycle_time = 280

[database]
connection = mysql+pymysql://nova:cellsecret@db/nova?charset=utf8
max_overflow = 40

[pci]
alias = {"vendor_id": "10de", "product_id": "1eb8", "name": "t4"}
alias = {"vendor_id": "8086", "product_id": "0d5c", "name": "qat"}
device_spec = {"vendor_id": "10de", "product_id": "1eb8"}
device_spec = {"vendor_id": "8086", "product_id": "0d5c"}

[filter_scheduler]
enabled_filters = ComputeFilter,PciPassthroughFilter

[keystone_authtoken]
www_authenticate_uri = http://keystone:5000
password = ksecret

[placement]
region_name = RegionOne

[healreq]
batch_size = 50
"""


class ListOptsTest(testtools.TestCase):

    @staticmethod
    def _all_opts(conf):
        found = set()
        for key in conf:
            if isinstance(conf[key], cfg.ConfigOpts.GroupAttr):
                found.update((key, name) for name in conf[key])
            else:
                found.add(('DEFAULT', key))
        return found

    def _registered(self):
        """What register_opts adds to oslo.config's own options."""
        conf = cfg.ConfigOpts()
        builtin = self._all_opts(conf)
        healreq_conf.register_opts(conf)
        return conf, self._all_opts(conf) - builtin

    def _listed(self):
        listed = set()
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                listed.add((getattr(group, 'name', group), opt.dest))
        return listed

    def test_every_registered_option_is_listed(self):
        _, registered = self._registered()
        self.assertEqual(registered, self._listed())
        self.assertEqual({('DEFAULT', 'service_down_time'),
                          ('DEFAULT', 'default_availability_zone'),
                          ('api_database', 'connection'),
                          ('database', 'connection'),
                          ('placement_database', 'connection'),
                          ('healreq', 'batch_size'),
                          ('healreq', 'progress_interval'),
                          ('healreq', 'lock_wait_timeout'),
                          ('healreq', 'database_timeout'),
                          ('healreq', 'skip_updated_within'),
                          ('healreq', 'target_release'),
                          ('healreq', 'state_path'),
                          ('healreq', 'audit_connection')}, registered)

    def test_groups_are_opt_groups(self):
        # nova.conf's own [DEFAULT] options are listed as nova lists them.
        for group, _ in opts.list_opts():
            if group != 'DEFAULT':
                self.assertIsInstance(group, cfg.OptGroup)

    def test_help_texts(self):
        for group, group_opts in opts.list_opts():
            name = getattr(group, 'name', group)
            if name != 'DEFAULT':
                self.assertTrue(group.help and group.help.strip(), name)
            for opt in group_opts:
                self.assertTrue(opt.help and opt.help.strip(),
                                '%s.%s' % (name, opt.name))

    def test_numbers_are_bounded(self):
        """oslo.config refuses a value out of range, so each has a range."""
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                if isinstance(opt.type, (types.Integer, types.Float)):
                    name = '%s.%s' % (getattr(group, 'name', group),
                                      opt.name)
                    self.assertIsNotNone(opt.type.min, name)
                    self.assertIsNotNone(opt.type.max, name)

    def test_connections_are_secret(self):
        for group, group_opts in opts.list_opts():
            for opt in group_opts:
                if opt.name == 'connection':
                    self.assertTrue(opt.secret, group.name)

    def test_registering_on_a_fresh_conf(self):
        conf, _ = self._registered()
        conf([], project=None, default_config_files=[],
             default_config_dirs=[])
        self.assertIsNone(conf.api_database.connection)
        self.assertIsNone(conf.database.connection)
        self.assertEqual(500, conf.healreq.batch_size)
        self.assertEqual(60, conf.healreq.skip_updated_within)

    def test_registering_twice_is_harmless(self):
        conf = cfg.ConfigOpts()
        healreq_conf.register_opts(conf)
        healreq_conf.register_opts(conf)
        conf([], project=None, default_config_files=[],
             default_config_dirs=[])
        self.assertEqual(500, conf.healreq.batch_size)

    def test_listed_opts_register_like_register_opts(self):
        conf = cfg.ConfigOpts()
        for group, group_opts in opts.list_opts():
            conf.register_opts(group_opts, group=group)
        healreq_conf.register_opts(conf)
        conf([], project=None, default_config_files=[],
             default_config_dirs=[])
        self.assertEqual(60, conf.healreq.skip_updated_within)


class NovaConfTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.directory = self.useFixture(fixtures.TempDir()).path
        self.conf = cfg.ConfigOpts()
        healreq_conf.register_opts(self.conf)
        self.addCleanup(self.conf.reset)

    def _load(self, text):
        path = os.path.join(self.directory, 'nova.conf')
        with open(path, 'w') as handle:
            handle.write(text)
        self.conf(['--config-file', path], project=None,
                  default_config_files=[], default_config_dirs=[])
        return path

    def test_nova_conf_is_read(self):
        self._load(NOVA_CONF)
        self.assertEqual(
            'mysql+pymysql://nova:apisecret@db/nova_api?charset=utf8',
            self.conf.api_database.connection)
        self.assertEqual(
            'mysql+pymysql://nova:cellsecret@db/nova?charset=utf8',
            self.conf.database.connection)
        self.assertEqual(50, self.conf.healreq.batch_size)
        self.assertEqual(60, self.conf.healreq.skip_updated_within)

    def test_unknown_options_are_not_registered(self):
        self._load(NOVA_CONF)
        self.assertRaises(cfg.NoSuchOptError, getattr,
                          self.conf.api_database, 'max_pool_size')
        self.assertRaises(cfg.NoSuchOptError, getattr, self.conf, 'pci')

    def test_empty_file(self):
        self._load('')
        self.assertIsNone(self.conf.api_database.connection)
        self.assertEqual(500, self.conf.healreq.batch_size)

    def test_check_reads_every_value(self):
        for line in ('[healreq]\nskip_updated_within = 100000000000000000000',
                     '[healreq]\nbatch_size = 0',
                     '[healreq]\nlock_wait_timeout = many',
                     '[DEFAULT]\nservice_down_time = 86401'):
            self._load(line + '\n')
            self.assertRaises(cfg.ConfigFileValueError, healreq_conf.check,
                              self.conf)
            self.conf.reset()
            self.conf.clear()

    def test_check_accepts_a_nova_conf(self):
        self._load(NOVA_CONF)
        healreq_conf.check(self.conf)


class DefaultsTest(testtools.TestCase):
    """Defaults and bounds of options are written once, in healreq.conf."""

    def setUp(self):
        super().setUp()
        self.conf = api.load_config()

    def test_option_finds_a_declared_option(self):
        option = healreq_conf.option('healreq', 'batch_size')
        self.assertEqual(self.conf.healreq.batch_size, option.default)
        self.assertEqual(self.conf.service_down_time, healreq_conf.option(
            'DEFAULT', 'service_down_time').default)
        self.assertRaises(KeyError, healreq_conf.option, 'healreq', 'nope')
        self.assertRaises(KeyError, healreq_conf.option, 'nope',
                          'batch_size')

    def test_api_options_default_to_the_options_defaults(self):
        declared = {opt.dest: opt for _, group_opts in opts.list_opts()
                    for opt in group_opts}
        shared = [field for field in dataclasses.fields(api.Options)
                  if field.name in declared]
        self.assertEqual({'batch_size', 'service_down_time',
                          'target_release'},
                         {field.name for field in shared})
        for field in shared:
            self.assertEqual(declared[field.name].default, field.default,
                             field.name)
        options = api.Options()
        self.assertEqual(
            (self.conf.healreq.batch_size, self.conf.service_down_time),
            (options.batch_size, options.service_down_time))

    def test_decision_settings_default_to_the_options_defaults(self):
        settings = decisions.Settings()
        self.assertEqual(
            (self.conf.healreq.skip_updated_within,
             self.conf.default_availability_zone),
            (settings.skip_updated_within, settings.default_zone))
        self.assertEqual(settings, api.Options.from_conf(self.conf).settings)

    def test_options_from_conf_read_the_configuration(self):
        # Overrides live on the shared option groups: reset undoes them.
        self.addCleanup(self.conf.reset)
        for group, name, value in (('healreq', 'batch_size', 7),
                                   ('healreq', 'skip_updated_within', 900),
                                   ('healreq', 'target_release', 'zed'),
                                   (None, 'service_down_time', 120),
                                   (None, 'default_availability_zone', 'az1')):
            self.conf.set_override(name, value, group)
        options = api.Options.from_conf(self.conf, dry_run=True)
        self.assertEqual(
            (True, 7, 120, 'zed', 900, 'az1'),
            (options.dry_run, options.batch_size, options.service_down_time,
             options.target_release.codename,
             options.settings.skip_updated_within,
             options.settings.default_zone))
        self.assertEqual(options, api.Options.from_conf(
            self.conf, dry_run=True, batch_size=None, target_release=None,
            skip_updated_within=None, force=None))

    def test_options_from_conf_take_the_arguments_over_it(self):
        self.addCleanup(self.conf.reset)
        self.conf.set_override('batch_size', 7, 'healreq')
        self.conf.set_override('target_release', 'zed', 'healreq')
        options = api.Options.from_conf(
            self.conf, batch_size=3, target_release='antelope', force=True,
            checked_fields=('flavor',), skip_updated_within=0)
        self.assertEqual(
            (3, '2023.1', True, ('flavor',), 0),
            (options.batch_size, options.target_release.series,
             options.settings.force, options.settings.checked_fields,
             options.settings.skip_updated_within))
        self.assertRaises(exception.InvalidInput, api.Options.from_conf,
                          self.conf, target_release='nope')

    def test_lower_layers_default_to_the_options_defaults(self):
        self.assertEqual(self.conf.healreq.lock_wait_timeout,
                         engines.LOCK_WAIT_TIMEOUT)
        self.assertEqual(self.conf.service_down_time,
                         records.SERVICE_DOWN_TIME)
        for function in (records.learn_deployment,
                         context.RunContext.__init__):
            self.assertEqual(
                self.conf.service_down_time,
                inspect.signature(function).parameters[
                    'service_down_time'].default, function)
        self.assertEqual(
            self.conf.healreq.lock_wait_timeout,
            inspect.signature(context.RunContext.__init__).parameters[
                'lock_wait_timeout'].default)
        self.assertEqual(self.conf.default_availability_zone,
                         decisions.Settings().default_zone)
        self.assertEqual(self.conf.default_availability_zone,
                         api.settings(self.conf).default_zone)

    def test_batch_size_bounds_of_the_command_line(self):
        bounds = healreq_conf.option('healreq', 'batch_size').type
        parser = main.build_parser()
        for command in ('request-specs', 'allocations'):
            for size in (bounds.min, bounds.max):
                self.assertEqual(size, parser.parse_args(
                    [command, '--batch-size', str(size)]).batch_size)
            for size in (bounds.min - 1, bounds.max + 1):
                self.useFixture(fixtures.MonkeyPatch('sys.stderr',
                                                     io.StringIO()))
                self.assertRaises(SystemExit, parser.parse_args,
                                  [command, '--batch-size', str(size)])
