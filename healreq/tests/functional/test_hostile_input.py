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

"""Inputs a script can get wrong must never widen what a run touches."""

import json
import os
import uuid

import fixtures
import sqlalchemy as sa
from sqlalchemy.engine import url as sa_url
import testtools

from healreq.db import tables
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests import cli
from healreq.tests.functional import audit_case
from healreq.tests.functional import backends
from healreq.tests.functional import deployment_case


class EmptyFilterTest(deployment_case.DeploymentTestCase):
    """An empty ``$UUID`` in a cron line must not mean "everything"."""

    def setUp(self):
        super().setUp()
        self.drifted = [self.add_drifted(self.cell1),
                        self.add_drifted(self.cell2)]

    def assert_refused_untouched(self, result, option):
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertIn(option, lines[0])
        self.assertIn('empty', lines[0])

    def test_request_specs_refuses_empty_filters(self):
        before = self.all_spec_texts()
        for option in ('--instance', '--cell'):
            for value in ('', ' ', '\t\n'):
                for extra in ([], ['--dry-run']):
                    result = self.heal(option, value, *extra)
                    self.assert_refused_untouched(result, option)
        self.assertEqual(before, self.all_spec_texts())
        self.assertEqual([], os.listdir(self.state_path))

    def test_empty_output_paths_are_refused(self):
        for option in ('--plan', '--metrics-file'):
            result = self.heal('--dry-run', option, '')
            self.assert_refused_untouched(result, option)

    def test_revert_refuses_an_empty_instance(self):
        heal = self.heal('--format', 'json')
        self.assertEqual(0, heal.code, heal.stderr)
        run_id = json.loads(heal.stdout)['run_id']
        healed = self.all_spec_texts()
        for value in ('', '  '):
            result = self.run_cli('revert', run_id, '--instance', value)
            self.assert_refused_untouched(result, '--instance')
        self.assertEqual(healed, self.all_spec_texts())


class NumberValidationTest(deployment_case.DeploymentTestCase):
    """Numbers that cannot be honoured are refused before any write."""

    REFUSED = [
        ('--sleep', 'nan'), ('--sleep', 'inf'), ('--sleep', '-1'),
        ('--max-rate', '1e-300'), ('--max-rate', 'nan'),
        ('--max-rate', 'inf'), ('--max-rate', '0'),
        ('--batch-size', '99999999999999999999'), ('--batch-size', '0'),
        ('--max-count', '1.7'), ('--max-count', '-3'),
        ('--workers', '1e3'), ('--workers', '100000'),
    ]

    def test_request_specs_refuses_unusable_numbers(self):
        self.add_drifted(self.cell1)
        self.add_drifted(self.cell2)
        before = self.all_spec_texts()
        for option, value in self.REFUSED:
            result = self.heal(option, value)
            self.assertEqual(127, result.code,
                             '%s %s: %s' % (option, value, result.stderr))
            lines = result.stderr.strip().splitlines()
            self.assertEqual(1, len(lines), result.stderr)
            self.assertIn(option, lines[0])
        self.assertEqual(before, self.all_spec_texts())
        self.assertEqual([], os.listdir(self.state_path))

    def test_audit_list_refuses_unusable_limits(self):
        for value in ('1e20', '99999999999999999999', '0', 'x'):
            result = self.run_cli('audit', 'list', '--limit', value)
            self.assertEqual(127, result.code, result.stderr)
            self.assertEqual(1, len(result.stderr.strip().splitlines()),
                             result.stderr)

    def test_fractional_pauses_and_rates_are_accepted(self):
        uuid = self.add_drifted(self.cell1)
        before = self.deployment.spec_text(uuid)
        result = self.heal('--sleep', '0.001', '--max-rate', '1e6')
        self.assertEqual(0, result.code, result.stderr)
        self.assertNotEqual(before, self.deployment.spec_text(uuid))


class PasswordLeakTest(audit_case.AuditTestCase):
    """No part of a password appears in any output or stored byte."""

    def assert_no_secret(self, secret_parts, *texts):
        for part in secret_parts:
            for text in texts:
                self.assertNotIn(part, text)
            self.assertNotIn(part.encode('utf-8'), self.state_bytes())

    def test_audit_connection_password_with_spaces(self):
        config = self.write_config(
            'audit_connection = mysql+pymysql://healreq:Leak Part Secret@'
            '127.0.0.1:1/healreq\n')
        for argv in (['request-specs', '--dry-run'], ['audit', 'list'],
                     ['request-specs', '--format', 'json']):
            result = cli.run_main(['--config-file', config] + argv)
            self.assertEqual(127, result.code, result.stderr)
            self.assertEqual(1, len(result.stderr.strip().splitlines()),
                             result.stderr)
            self.assertIn('audit store', result.stderr)
            self.assert_no_secret(['Leak', 'Part', 'Secret'],
                                  result.stdout, result.stderr)


class QueryPasswordLeakTest(audit_case.AuditTestCase):
    """``?password=`` (a form PyMySQL accepts) is masked like ``:pw@``."""

    SECRET = 'TopSecret42'

    def unopenable_stores(self):
        """``(store URL, secret)``: unreachable, refused, no database."""
        stores = [
            ('mysql+pymysql://healreq@127.0.0.1:1/healreq?password=%s'
             % self.SECRET, self.SECRET),
            ('mysql+pymysql://healreq@127.0.0.1:1/healreq?charset=utf8'
             '&passwd=%s&ssl_key_password=Key%%20%s' % (
                 self.SECRET, self.SECRET), self.SECRET)]
        if self.db.name == 'MySQL':
            # The server is reached: a wrong password, a missing database.
            url = sa_url.make_url(self.db.reference_url())
            missing = url.set(password=None,
                              database='healreq_missing_%s'
                              % uuid.uuid4().hex[:10])
            stores += [
                (missing.update_query_dict({'password': self.SECRET})
                 .render_as_string(), self.SECRET),
                (missing.update_query_dict({'password': url.password})
                 .render_as_string(), 'password=%s' % url.password)]
        return stores

    def test_store_that_cannot_be_opened(self):
        for store, secret in self.unopenable_stores():
            config = self.write_config('audit_connection = %s\n' % store)
            for argv in (['request-specs', '--dry-run'], ['audit', 'list'],
                         ['request-specs', '--format', 'json'],
                         ['audit', 'list', '--format', 'json']):
                result = cli.run_main(['--config-file', config] + argv)
                self.assertEqual(127, result.code, result.stderr)
                self.assertEqual(1, len(result.stderr.strip().splitlines()),
                                 result.stderr)
                self.assertIn('audit store: cannot open', result.stderr)
                self.assertIn('=****', result.stderr)
                for text in (result.stdout, result.stderr):
                    self.assertNotIn(secret, text)
            debug = cli.run_main(['--config-file', config, '--debug',
                                  'request-specs', '--dry-run'])
            self.assertEqual(127, debug.code, debug.stderr)
            self.assertNotIn(secret, debug.stdout + debug.stderr)
        self.assertNotIn(self.SECRET.encode(), self.state_bytes())

    def test_urls_logged_by_libraries(self):
        # oslo.db logs this URL with the password of its user information
        # masked, not that of its query string.
        store = 'mysql://healreq@127.0.0.1:1/healreq?password=%s' % (
            self.SECRET)
        with open(self.config_file) as handle:
            text = handle.read().replace(
                '[DEFAULT]\n', '[DEFAULT]\ndefault_log_levels = '
                'oslo_db.sqlalchemy.engines=WARNING\n')
        config = self.write_config_text(
            text + 'audit_connection = %s\n' % store)
        for argv in (['request-specs', '--dry-run'], ['audit', 'list'],
                     ['--debug', 'audit', 'list']):
            result = cli.run_main(['--config-file', config] + argv)
            self.assertEqual(127, result.code, result.stderr)
            self.assertIn("does not contain a '+drivername'", result.stderr)
            self.assertNotIn(self.SECRET, result.stdout + result.stderr)

    def test_cell_url_that_cannot_be_parsed(self):
        self.add_drifted(self.cell1)
        # A typo (one slash): SQLAlchemy 1.4 quotes the whole URL.
        stored = 'mysql+pymysql:/nova@db/nova_cell2?password=%s' % (
            self.SECRET)
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.cell_mappings.update().where(
                tables.cell_mappings.c.uuid == self.cell2.uuid).values(
                    database_connection=stored))
        for args in ((), ('--verbose',), ('--format', 'json'),
                     ('--dry-run', '--format', 'json', '--verbose')):
            result = self.heal(*args)
            self.assertEqual(2, result.code, result.stdout + result.stderr)
            self.assertNotIn(self.SECRET, result.stdout + result.stderr)
        self.assertNotIn(self.SECRET.encode(), self.state_bytes())


class BracedPasswordCellTest(audit_case.AuditTestCase):
    """A plain cell URL whose password holds braces works, as in Nova.

    Only MySQL URLs carry a password, so this runs on MySQL alone.
    """

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']
    PASSWORD = 'Leak{LeakPart}'

    def setUp(self):
        super().setUp()
        url = sa_url.make_url(self.cell2.url)
        user = 'hr_%s' % uuid.uuid4().hex[:10]
        admin = self.db.backend.engine
        with admin.begin() as conn:
            for host in ('localhost', '127.0.0.1', '%'):
                account = "'%s'@'%s'" % (user, host)
                conn.execute(sa.text(
                    'CREATE USER %s IDENTIFIED BY :pw' % account),
                    {'pw': self.PASSWORD})
                conn.execute(sa.text('GRANT ALL ON `%s`.* TO %s'
                                     % (url.database, account)))
        self.addCleanup(self._drop_user, admin, user)
        stored = 'mysql+pymysql://%s:%s@%s:%s/%s' % (
            user, self.PASSWORD, url.host, url.port or 3306, url.database)
        with self.deployment.api_engine.begin() as conn:
            conn.execute(tables.cell_mappings.update().where(
                tables.cell_mappings.c.uuid == self.cell2.uuid).values(
                    database_connection=stored))

    def _drop_user(self, admin, user):
        with admin.begin() as conn:
            for host in ('localhost', '127.0.0.1', '%'):
                conn.execute(sa.text("DROP USER IF EXISTS '%s'@'%s'"
                                     % (user, host)))

    def test_cell_is_healed_and_password_never_shown(self):
        drifted = self.add_drifted(self.cell2)
        before = self.deployment.spec_text(drifted)
        texts = []
        for args in (['--dry-run', '--verbose'], ['--verbose']):
            result, doc = self.heal_json(*args)
            self.assertEqual(0, result.code, result.stderr)
            self.assertEqual([(drifted, 'drifted' if '--dry-run' in args
                               else 'healed')],
                             [(r['instance_uuid'], r['status'])
                              for r in doc['results']])
            texts += [result.stdout, result.stderr]
        text = self.heal('--dry-run', '--verbose')
        texts += [text.stdout, text.stderr]
        self.assertNotEqual(before, self.deployment.spec_text(drifted))
        self.assert_no_secret(texts)

    def assert_no_secret(self, texts):
        for text in texts:
            self.assertNotIn('LeakPart', text)
        self.assertNotIn(b'LeakPart', self.state_bytes())


class OutputFileTest(deployment_case.DeploymentTestCase):
    """Plan and metrics files in a directory other users can write."""

    def setUp(self):
        super().setUp()
        self.add_drifted(self.cell1)
        self.shared = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.shared, 0o1777)
        self.victim = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'victim')
        with open(self.victim, 'w') as handle:
            handle.write('precious\n')

    def plant_symlinks(self, target):
        """Symlinks at every name a predictable writer could use."""
        names = [target + '.tmp-%d' % pid
                 for pid in range(os.getpid() - 5, os.getpid() + 50)]
        for name in names + [target]:
            os.symlink(self.victim, name)

    def test_planted_symlinks_are_never_followed(self):
        for option in ('--plan', '--metrics-file'):
            target = os.path.join(self.shared, option.strip('-'))
            self.plant_symlinks(target)
            result = self.heal('--dry-run', option, target)
            self.assertEqual(0, result.code, result.stderr)
            with open(self.victim) as handle:
                self.assertEqual('precious\n', handle.read())
            self.assertFalse(os.path.islink(target))
            self.assertGreater(os.path.getsize(target), 0)

    def test_failed_write_leaves_no_temporary_file(self):
        targets = []
        for option in ('--plan', '--metrics-file'):
            # A non-empty directory in the way makes the rename fail.
            target = os.path.join(self.shared, option.strip('-'))
            os.makedirs(os.path.join(target, 'keep'))
            targets.append(os.path.basename(target))
            result = self.heal('--dry-run', option, target)
            self.assertEqual(2, result.code, result.stderr)
            self.assertIn(target, result.stderr)
        self.assertEqual(sorted(targets), sorted(os.listdir(self.shared)))


class LogSettingsTest(deployment_case.DeploymentTestCase):
    """oslo.log settings of a copied nova.conf never stop the tool."""

    def config_with(self, default_line):
        """The test's nova.conf with one more line in [DEFAULT]."""
        with open(self.config_file) as handle:
            text = handle.read()
        return self.write_config_text(
            text.replace('[DEFAULT]\n', '[DEFAULT]\n%s\n' % default_line))

    def test_missing_log_dir_falls_back_to_stderr(self):
        drifted = self.add_drifted(self.cell1)
        missing = os.path.join(self.state_path, 'no', 'such', 'dir')
        config = self.config_with('log_dir = %s' % missing)
        result = self.heal('--verbose', config_file=config)
        self.assertEqual(0, result.code, result.stderr)
        self.assertIn('logging to stderr instead', result.stderr)
        self.assertIn(missing, result.stderr)
        self.assertIn('Looking for instances in cell', result.stderr)
        self.assertIn(drifted, result.stdout)
        self.assertFalse(os.path.exists(missing))

    def test_missing_log_config_append_falls_back_to_stderr(self):
        config = self.config_with('log_config_append = %s' % os.path.join(
            self.state_path, 'logging.conf'))
        result = self.heal('--dry-run', config_file=config)
        self.assertEqual(4, result.code, result.stderr)
        self.assertIn('logging to stderr instead', result.stderr)

    def test_existing_log_dir_gets_the_log_file(self):
        log_dir = self.useFixture(fixtures.TempDir()).path
        config = self.config_with('log_dir = %s' % log_dir)
        result = self.heal('--dry-run', '--verbose', config_file=config)
        self.assertEqual(4, result.code, result.stderr)
        self.assertEqual(['nova-heal.log'], os.listdir(log_dir))
        with open(os.path.join(log_dir, 'nova-heal.log')) as handle:
            self.assertIn('Looking for instances in cell', handle.read())


class DemoWorkdirTest(testtools.TestCase):
    """``demo --workdir`` builds only where nothing would be mixed in."""

    def demo(self, workdir):
        return cli.run_main(['demo', '--workdir', workdir])

    def test_empty_and_new_directories_work_once(self):
        parent = self.useFixture(fixtures.TempDir()).path
        for workdir in (parent, os.path.join(parent, 'new')):
            if workdir != parent:
                self.assertFalse(os.path.exists(workdir))
            first = self.demo(workdir)
            self.assertEqual(0, first.code, first.stdout + first.stderr)
            self.assertIn('Demo complete', first.stdout)
            listing = sorted(os.listdir(workdir))
            again = self.demo(workdir)
            self.assertEqual(127, again.code, again.stderr)
            self.assertEqual(1, len(again.stderr.strip().splitlines()))
            self.assertIn('not an empty directory', again.stderr)
            self.assertEqual(listing, sorted(os.listdir(workdir)))

    def test_a_file_is_refused(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'file')
        with open(path, 'w') as handle:
            handle.write('keep')
        result = self.demo(path)
        self.assertEqual(127, result.code, result.stderr)
        with open(path) as handle:
            self.assertEqual('keep', handle.read())


class SpecCharsetTest(deployment_case.DeploymentTestCase):
    """The compare-and-swap matches a non-ASCII spec byte for byte.

    Nova writes ASCII-escaped JSON, but a spec edited by hand or by
    another tool may hold raw non-ASCII text.
    """

    TEXT = 'Zone \u00e9t\u00e9 \u20ac'

    def add_drifted_with_text(self, text_value):
        uuid_ = str(uuid.uuid4())
        document = dep.request_spec(uuid_, demo.M1_SMALL,
                                    availability_zone=text_value)
        # The instance is in the pinned zone: only the flavor drifted.
        return self.add_drifted(
            self.cell1, uuid=uuid_, availability_zone=text_value,
            spec=json.dumps(document, ensure_ascii=False))

    def test_non_ascii_spec_heals(self):
        self.assert_healed_once(self.add_drifted_with_text(self.TEXT))

    def assert_healed_once(self, drifted):
        before = self.deployment.spec_text(drifted)
        result, doc = self.heal_json()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual([(drifted, 'healed')],
                         [(r['instance_uuid'], r['status'])
                          for r in doc['results']])
        after = self.deployment.spec_text(drifted)
        self.assertNotEqual(before, after)
        self.assertEqual(json.loads(before)['nova_object.data'][
            'availability_zone'], json.loads(after)['nova_object.data'][
                'availability_zone'])
        again, doc = self.heal_json()
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual(after, self.deployment.spec_text(drifted))


class Latin1SpecColumnTest(SpecCharsetTest):
    """A request_specs.spec column in latin1, as old MySQL defaults made."""

    scenarios = [s for s in backends.SCENARIOS if s[0] == 'MySQL']
    TEXT = 'Zone \u00e9t\u00e9'

    def setUp(self):
        super().setUp()
        with self.deployment.api_engine.begin() as conn:
            conn.execute(sa.text('ALTER TABLE request_specs MODIFY spec '
                                 'MEDIUMTEXT CHARACTER SET latin1'))
