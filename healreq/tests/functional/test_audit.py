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

"""The audit trail: run records, ``audit``, ``revert``, plans and ``apply``.

Every command runs in-process against real databases; the audit store is
the default SQLite file under the test's state path. What the audit says
is always checked against the rows of Nova's API database. Crashes are in
test_audit_crash.
"""

import datetime
import hashlib
import json
import os
import re
import socket
import stat
import uuid as uuidlib

import fixtures
import sqlalchemy as sa

from healreq import api
from healreq.audit import identity
from healreq.audit import store as audit_store
from healreq.db import tables
from healreq.heal import decisions
from healreq.heal import field_checks
from healreq.testing import demo
from healreq.testing import deployment as dep
from healreq.tests.functional import audit_case
from healreq.tests.functional import clocks
from healreq import version

HEAL_FILTERS = {'instance': None, 'cell': None, 'max_count': None,
                'force': False, 'fields': list(field_checks.FIELD_NAMES)}


def sha256(text):
    return hashlib.sha256(text.encode('utf-8')).hexdigest()


class RunRecordTest(audit_case.AuditTestCase):
    """Each run of request-specs is recorded with its changes."""

    def setUp(self):
        super().setUp()
        self.drifted = sorted([self.add_drifted(self.cell1),
                               self.add_drifted(self.cell2)])
        self.consistent = self.add_consistent(self.cell1)

    def test_heal_is_recorded(self):
        before = self.all_spec_texts()
        started = clocks.utcnow()
        result, document = self.heal_json()
        ended = clocks.utcnow()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        after = self.all_spec_texts()
        run_id = document['run_id']
        self.assertEqual(str(uuidlib.UUID(run_id)), run_id)

        run = self.audit_runs()[run_id]
        self.assertEqual('heal', run['mode'])
        self.assertEqual(identity.operator(), run['operator'])
        self.assertEqual(socket.gethostname(), run['host'])
        self.assertEqual(version.version_info.release_string(),
                         run['tool_version'])
        self.assertEqual(HEAL_FILTERS, {key: run['filters'].get(key)
                                        for key in HEAL_FILTERS})
        self.assertEqual(document['summary'], run['summary'])
        self.assertEqual(2, run['summary']['healed'])
        self.assertEqual(0, run['exit_code'])
        self.assertEqual('nova-heal --config-file %s request-specs '
                         '--format json' % self.config_file, run['command'])
        started_at = datetime.datetime.fromisoformat(run['started_at'])
        ended_at = datetime.datetime.fromisoformat(run['ended_at'])
        self.assertLessEqual(started.replace(microsecond=0), started_at)
        self.assertLessEqual(started_at, ended_at)
        self.assertLessEqual(ended_at, ended)

        shown = self.audit_show(run_id)
        self.assertEqual(run_id, shown['id'])
        changes = {c['instance_uuid']: c for c in shown['changes']}
        self.assertEqual(self.drifted, sorted(changes))
        cells = {self.drifted[0]: None, self.drifted[1]: None}
        for finding in document['results']:
            cells[finding['instance_uuid']] = finding['cell_uuid']
        spec_ids = self.spec_ids()
        for uuid, change in changes.items():
            self.assertNotEqual(before[uuid], after[uuid])
            self.assertEqual(
                dict(instance_uuid=uuid, cell_uuid=cells[uuid],
                     spec_id=spec_ids[uuid], action='update',
                     state='applied', detail=None,
                     fields=['flavor'], before=before[uuid],
                     after=after[uuid], before_digest=sha256(before[uuid]),
                     after_digest=sha256(after[uuid])), change)
        self.assertEqual(
            sorted((uuid, 'healed', ['flavor']) for uuid in self.drifted),
            sorted((f['instance_uuid'], f['status'], f['drift'])
                   for f in shown['findings']))
        self.assertEqual(before[self.consistent], after[self.consistent])

    def spec_ids(self):
        t = tables.request_specs
        with self.deployment.api_engine.connect() as conn:
            return dict(conn.execute(
                sa.select(t.c.instance_uuid, t.c.id)).all())

    def test_text_report_names_the_recorded_run(self):
        result = self.heal()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        lines = [line for line in result.stdout.splitlines()
                 if line.startswith('Run id: ')]
        self.assertEqual(1, len(lines), result.stdout)
        run_id = lines[0].split()[2]
        self.assertEqual('Run id: %s ("nova-heal audit show %s")'
                         % (run_id, run_id), lines[0])
        runs = self.audit_runs()
        self.assertEqual([run_id], list(runs))
        self.assertEqual('nova-heal --config-file %s request-specs'
                         % self.config_file, runs[run_id]['command'])
        self.assertEqual(self.drifted,
                         sorted(self.changes_by_instance(run_id)))

    def test_show_prints_a_diff_of_the_changed_fields(self):
        run_id = self.heal_run('--instance', self.drifted[0])
        result = self.run_cli('audit', 'show', run_id)
        self.assertEqual(0, result.code, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual('Run %s (heal) by %s@%s, healreq %s' % (
            run_id, identity.operator(), socket.gethostname(),
            version.version_info.release_string()), lines[0])
        self.assertIn('  command: nova-heal --config-file %s request-specs '
                      '--format json --instance %s'
                      % (self.config_file, self.drifted[0]), lines)
        heading = [n for n, line in enumerate(lines)
                   if line.startswith('Change ')]
        self.assertEqual(1, len(heading), result.stdout)
        self.assertRegex(lines[heading[0]], r'^Change \d+: instance %s, '
                         r'fields flavor: applied$' % self.drifted[0])
        diff = lines[heading[0] + 1:]
        self.assertEqual(['    --- before', '    +++ after'], diff[:2])
        self.assertTrue(diff[2].startswith('    @@ '), diff)
        removed = [line[5:].strip().rstrip(',') for line in diff[3:]
                   if line.startswith('    -')]
        added = [line[5:].strip().rstrip(',') for line in diff[3:]
                 if line.startswith('    +')]
        # m1.small -> m1.large: name, id, flavorid, vcpus, memory, disk.
        for key, small, large in (('name', '"m1.small"', '"m1.large"'),
                                  ('flavorid', '"000002"', '"000004"'),
                                  ('vcpus', '1', '4'),
                                  ('memory_mb', '2048', '8192'),
                                  ('root_gb', '20', '80')):
            self.assertIn('"%s": %s' % (key, small), removed)
            self.assertIn('"%s": %s' % (key, large), added)
        # The diff is of the changed field only: the one top-level key.
        top_level = {line[5:].split('"')[1] for line in diff[3:]
                     if line[5:].startswith('  "')
                     and not line[5:].startswith('   ')}
        self.assertEqual({'flavor'}, top_level)
        # Only the changed field is shown, not the rest of the spec.
        self.assertNotIn('project_id', result.stdout)
        self.assertNotIn('security_groups', result.stdout)
        self.assertNotIn('instance_uuid', '\n'.join(diff))

    def test_dry_run_is_recorded_with_its_findings(self):
        before = self.all_spec_texts()
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(before, self.all_spec_texts())
        run_id = document['run_id']
        self.assertIsNotNone(run_id)
        run = self.audit_runs()[run_id]
        self.assertEqual('dry-run', run['mode'])
        self.assertEqual(0, run['exit_code'])
        self.assertEqual(document['summary'], run['summary'])
        self.assertEqual(2, run['summary']['drifted'])
        shown = self.audit_show(run_id)
        self.assertEqual([], shown['changes'])
        self.assertEqual(
            sorted((uuid, 'drifted', 'spec-drift', ['flavor'])
                   for uuid in self.drifted),
            sorted((f['instance_uuid'], f['status'], f['reason'],
                    f['drift']) for f in shown['findings']))

    def test_list_text(self):
        dry_run = self.heal_json('--dry-run')[1]['run_id']
        result = self.run_cli('audit', 'list')
        self.assertEqual(0, result.code, result.stderr)
        lines = result.stdout.splitlines()
        # The header line, then the run's.
        self.assertEqual(2, len(lines), result.stdout)
        self.assertEqual(
            ['RUN ID', 'STARTED', 'MODE', 'EXIT', 'OPERATOR@HOST',
             'SUMMARY'], re.split(' {2,}', lines[0]))
        self.assertTrue(lines[1].startswith(dry_run + '  '), lines[1])
        self.assertEqual(
            [dry_run, 'dry-run', '0', '%s@%s' % (identity.operator(),
                                                 socket.gethostname()),
             'drifted 2, healed 0, errors 0, conflicts 0'],
            [cell for i, cell in enumerate(re.split(' {2,}', lines[1]))
             if i != 1])

    def test_list_text_columns_line_up(self):
        """Every column of ``audit list`` starts under its header."""
        self.heal_json('--dry-run')
        heal_run = self.heal_run()
        self.assertEqual(0, self.run_cli('revert', '--dry-run',
                                         heal_run).code)
        result = self.run_cli('audit', 'list')
        self.assertEqual(0, result.code, result.stderr)
        header, *rows = result.stdout.splitlines()
        self.assertEqual(3, len(rows), result.stdout)
        for name in ('STARTED', 'MODE', 'EXIT', 'OPERATOR@HOST', 'SUMMARY'):
            start = header.index(name)
            for row in rows:
                self.assertEqual('  ', row[start - 2:start], (name, row))
                self.assertNotEqual(' ', row[start], (name, row))
        self.assertEqual(['revert', 'heal', 'dry-run'],
                         [re.split(' {2,}', row)[2] for row in rows])

    def test_list_is_newest_first(self):
        """``audit list --limit N`` shows the N latest runs, newest first.

        Runs started within the same second must still be listed in the
        order they were started.
        """
        run_ids = []
        for uuid in self.drifted * 3:
            result, document = self.heal_json('--dry-run', '--instance',
                                              uuid)
            self.assertEqual(0, result.code, result.stderr)
            run_ids.append(document['run_id'])
        result, runs = self.run_json('audit', 'list', '--limit', '4')
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual(run_ids[::-1][:4], [run['id'] for run in runs])

    def test_recorded_exit_code_is_the_commands(self):
        """A run failing at its very end is recorded with its real code.

        The plan and the metrics file are written after the heal; when
        they cannot be, the command fails, and the audit must not say the
        run exited 0. A missing directory is not an unexpected error.
        """
        missing = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'missing')
        outcomes = []
        for option in ('--plan', '--metrics-file'):
            known = set(self.audit_runs())
            result = self.heal('--dry-run', option,
                               os.path.join(missing, 'file'))
            runs = self.audit_runs()
            new = set(runs) - known
            self.assertEqual(1, len(new), option)
            outcomes.append((option, result.code, runs[new.pop()][
                'exit_code']))
        # (option, exit code, exit code recorded)
        self.assertEqual([(o, code, code) for o, code, _ in outcomes],
                         outcomes)
        self.assertEqual([], [(o, code) for o, code, _ in outcomes
                              if code in (0, 255)])

    def test_show_unknown_run(self):
        result = self.run_cli('audit', 'show', str(uuidlib.uuid4()))
        self.assertEqual(127, result.code)
        self.assertIn('no run', result.stderr)

    def test_run_id_in_upper_case(self):
        run_id = self.heal_run()
        shown = self.audit_show(run_id.upper())
        self.assertEqual(run_id, shown['id'])
        result, document = self.run_json('revert', '--dry-run',
                                         run_id.upper())
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(2, document['summary']['drifted'])

    def test_list_invalid_limit(self):
        result = self.run_cli('audit', 'list', '--limit', '0')
        self.assertEqual(127, result.code)

    def test_no_credentials_in_the_audit(self):
        """Nothing the audit stores holds a password of the config.

        The API database URL (with a password on MySQL), the transport
        URL and an unreachable cell's URL carry passwords; a second
        configuration points at an unreachable API database whose URL
        holds a password: its run ends before the store is opened (the
        cell mappings are read first), with a masked error.
        """
        secrets = ['Rabbit-S3cret-4c1e', 'Cell-S3cret-9d2f',
                   'Api-S3cret-71ab']
        api_password = self.deployment.api_engine.url.password
        if api_password:
            secrets.append(api_password)
        self.deployment.add_cell(
            'cell3', 'mysql+pymysql://nova:%s@127.0.0.1:9/nova'
            % secrets[1], create_schema=False)
        api_url = self.deployment.api_engine.url.render_as_string(
            hide_password=False)
        config = self.write_config_text(
            '[DEFAULT]\ntransport_url = rabbit://nova:%s@mq:5672/\n'
            '[api_database]\nconnection = %s\n'
            '[database]\nconnection = %s\n'
            '[healreq]\nskip_updated_within = 60\n'
            % (secrets[0], api_url, self.db.reference_url()))
        broken = self.write_config_text(
            '[api_database]\nconnection = '
            'mysql+pymysql://nova:%s@127.0.0.1:9/nova_api\n' % secrets[2])
        with open(config) as handle:
            text = handle.read()
        for secret in secrets[:1] + secrets[3:]:
            self.assertIn(secret, text)

        results = [self.heal('--dry-run', config_file=config),
                   self.heal(config_file=config),
                   self.heal('--dry-run', config_file=broken)]
        self.assertEqual([2, 2, 2], [r.code for r in results])
        self.assertIn('nova-heal: error: API database: ', results[2].stderr)
        runs = self.audit_runs()
        self.assertEqual(2, len(runs))
        heal = [r for r in runs.values() if r['mode'] == 'heal']
        self.assertEqual(2, heal[0]['summary']['healed'])
        self.assertEqual(1, heal[0]['summary']['cells_failed'])
        revert = self.run_cli('revert', heal[0]['id'], config_file=config)
        self.assertEqual(0, revert.code, revert.stdout + revert.stderr)

        dump = '\n'.join(self.audit_dump())
        self.assertIn(heal[0]['id'], dump)
        raw = self.state_bytes()
        for secret in secrets:
            self.assertNotIn(secret, dump)
            self.assertNotIn(secret.encode('utf-8'), raw)
            for result in results:
                self.assertNotIn(secret, result.stdout + result.stderr)


class ComponentErrorTest(audit_case.AuditTestCase):
    """A failing API database is named as such, not as the cell's."""

    def test_api_database_fails_during_the_walk(self):
        for _ in range(40):
            self.add_consistent(self.cell1)
        t = tables.request_specs

        def drop_specs():
            with self.deployment.api_engine.begin() as conn:
                conn.exec_driver_sql('ALTER TABLE %s RENAME TO gone'
                                     % t.name)
        # Clock call 1 comes with the first batch. The reader process is
        # at most as many pages ahead as its pipe buffers (64 KiB, a
        # dozen pages of one instance) and it loads: it reads the last
        # batches' API rows after the rename.
        clock = clocks.ActingClock(drop_specs, 1)
        conf = api.load_config([self.config_file])
        self.addCleanup(conf.reset)
        options = api.Options(
            dry_run=True, cell_uuid=self.cell1.uuid, batch_size=1,
            settings=decisions.Settings(skip_updated_within=60))
        # The walk had begun: what it did is reported, with the error.
        result = api.run_request_specs(conf, options, clock=clock)
        self.assertTrue(clock.fired)
        self.assertEqual(2, result.exit_code)
        line, = result.problems
        self.assertTrue(line.startswith('nova-heal: error: API database: '),
                        line)
        self.assertNotIn('cell', line)
        self.assertGreater(result.report.summary()['instances_checked'], 0)
        run, = self.audit_runs().values()
        self.assertEqual((2, [line]),
                         (run['exit_code'], run['summary']['problems']))


class AuditFileTest(audit_case.AuditTestCase):
    """The SQLite audit store is readable by its owner only."""

    def assertMode(self, mode, path):
        self.assertEqual(oct(mode), oct(stat.S_IMODE(os.stat(path).st_mode)))

    def test_created_owner_only(self):
        self.add_drifted(self.cell1)
        parent = self.useFixture(fixtures.TempDir()).path
        state = os.path.join(parent, 'nova-heal', 'state')
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_HEALREQ__STATE_PATH', state))
        # A permissive umask must not widen the modes.
        previous = os.umask(0)
        try:
            result = self.heal()
        finally:
            os.umask(previous)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertMode(0o700, state)
        self.assertMode(0o600, os.path.join(state, 'audit.sqlite'))
        for name in os.listdir(state):
            self.assertMode(0o600, os.path.join(state, name))

    def test_existing_file_made_owner_only(self):
        self.add_drifted(self.cell1)
        path = self.audit_path()
        with open(path, 'w'):
            pass
        os.chmod(path, 0o644)
        result = self.heal()
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertMode(0o600, path)
        self.assertEqual(1, len(self.audit_runs()))


class RevertTest(audit_case.AuditTestCase):
    """``revert`` puts back exactly what a run replaced, audited."""

    def setUp(self):
        super().setUp()
        self.first = self.add_drifted(self.cell1)
        self.second = self.add_drifted(self.cell2)
        self.third = self.deployment.add_instance(
            self.cell1, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM,
            new=demo.E2_MEDIUM)
        self.add_consistent(self.cell2)
        self.originals = self.all_spec_texts()

    def test_revert_restores_the_rows(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        changed = {u for u in healed if healed[u] != self.originals[u]}
        self.assertEqual({self.first, self.second, self.third}, changed)

        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual(
            sorted((u, 'healed', 'recorded-change') for u in changed),
            sorted((r['instance_uuid'], r['status'], r['reason'])
                   for r in document['results']))

        revert_run = document['run_id']
        self.assertNotEqual(heal_run, revert_run)
        run = self.audit_runs()[revert_run]
        self.assertEqual('revert', run['mode'])
        self.assertEqual({'revert_of': heal_run, 'instance': None},
                         run['filters'])
        self.assertEqual(0, run['exit_code'])
        self.assertEqual(3, run['summary']['healed'])
        self.assertEqual('nova-heal --config-file %s revert %s --format '
                         'json' % (self.config_file, heal_run),
                         run['command'])
        changes = self.changes_by_instance(revert_run)
        self.assertEqual(changed, set(changes))
        for uuid, change in changes.items():
            self.assertEqual(
                ('applied', healed[uuid], self.originals[uuid],
                 sha256(healed[uuid]), sha256(self.originals[uuid])),
                (change['state'], change['before'], change['after'],
                 change['before_digest'], change['after_digest']))

        # Reverting again finds every row reverted already: nothing to do.
        again, document = self.run_json('revert', heal_run)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([], document['results'])
        self.assertEqual(
            sorted((u, 'already-written') for u in changed),
            sorted((n['instance_uuid'], n['notes'][0]['code'])
                   for n in document['notices']))
        self.assertIn('NOTICE    %s cell1 already-written: already reverted '
                      '(by run %s): the row already holds the value to '
                      'write back; nothing to do' % (self.first, revert_run),
                      self.run_cli('revert', heal_run).stdout)

    def test_revert_one_instance(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        result, document = self.run_json('revert', heal_run, '--instance',
                                         self.second.upper())
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        expected = dict(healed)
        expected[self.second] = self.originals[self.second]
        self.assertEqual(expected, self.all_spec_texts())
        revert_run = document['run_id']
        self.assertEqual([self.second],
                         list(self.changes_by_instance(revert_run)))
        self.assertEqual({'revert_of': heal_run, 'instance': self.second},
                         self.audit_runs()[revert_run]['filters'])

    def test_revert_dry_run_writes_nothing(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        result, document = self.run_json('revert', heal_run, '--dry-run')
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(healed, self.all_spec_texts())
        self.assertEqual(3, document['summary']['drifted'])
        self.assertEqual(0, document['summary']['healed'])
        shown = self.audit_show(document['run_id'])
        self.assertEqual([], shown['changes'])
        self.assertEqual(3, len(shown['findings']))
        # The dry run changed nothing a real revert relies on.
        result = self.run_cli('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_row_changed_since_is_left_alone(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        nova = json.dumps(dep.request_spec(self.first, demo.M1_LARGE),
                          indent=1)
        self.deployment.set_spec(self.first, nova)
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        expected = dict(self.originals)
        expected[self.first] = nova
        self.assertEqual(expected, self.all_spec_texts())
        conflicts = [(r['instance_uuid'], r['reason'])
                     for r in document['results']
                     if r['status'] == 'conflict']
        self.assertEqual([(self.first, 'spec-changed')], conflicts)
        revert_run = document['run_id']
        changes = self.changes_by_instance(revert_run)
        self.assertEqual({self.second, self.third}, set(changes))
        self.assertEqual({'applied'}, {c['state'] for c in changes.values()})
        self.assertEqual(3, self.audit_runs()[revert_run]['exit_code'])
        self.assertNotEqual(nova, healed[self.first])

    def test_instance_busy_is_left_alone(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        self.update_instance(self.cell1, self.first,
                             task_state='resize_migrating')
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(healed[self.first],
                         self.deployment.spec_text(self.first))
        self.assertEqual(self.originals[self.second],
                         self.deployment.spec_text(self.second))
        self.assertIn((self.first, 'conflict', 'task-in-progress'),
                      [(r['instance_uuid'], r['status'], r['reason'])
                       for r in document['results']])

    def tamper(self, run_id, instance_uuid, **values):
        """Edit the audit store's record of a change, as an attacker."""
        engine = sa.create_engine(self.audit_url())
        self.addCleanup(engine.dispose)
        with engine.begin() as conn:
            conn.execute(sa.text(
                'UPDATE changes SET %s WHERE run_id = :run AND '
                'instance_uuid = :uuid' % ', '.join(
                    '%s = :%s' % (key, key) for key in values)),
                dict(values, run=run_id, uuid=instance_uuid))

    def assert_revert_refused(self, heal_run, detail):
        healed = self.all_spec_texts()
        result, document = self.run_json('revert', heal_run, '--instance',
                                         self.first)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(self.first, 'error', 'audit-record-invalid')],
            [(r['instance_uuid'], r['status'], r['reason'])
             for r in document['results']])
        self.assertIn(detail, document['results'][0]['detail'])
        self.assertEqual(healed, self.all_spec_texts())
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])

    def test_tampered_record_is_not_written_back(self):
        heal_run = self.heal_run()
        self.tamper(heal_run, self.first,
                    before_text='THIS IS NOT A REQUESTSPEC')
        self.assert_revert_refused(
            heal_run, 'does not match its recorded digest')

    def test_record_without_its_digest_is_not_written_back(self):
        heal_run = self.heal_run()
        self.tamper(heal_run, self.first,
                    before_text='THIS IS NOT A REQUESTSPEC',
                    before_digest=None)
        self.assert_revert_refused(
            heal_run, 'does not match its recorded digest')

    def test_record_of_another_instance_is_not_written_back(self):
        # A careful attacker recomputes the digest.
        heal_run = self.heal_run()
        other = self.originals[self.second]
        self.tamper(heal_run, self.first, before_text=other,
                    before_digest=sha256(other))
        self.assert_revert_refused(heal_run,
                                   'the RequestSpec of another instance')

    def test_record_of_another_row_is_not_written_back(self):
        heal_run = self.heal_run()
        document = json.loads(self.originals[self.first])
        document['nova_object.data']['id'] = 999999
        text = json.dumps(document)
        self.tamper(heal_run, self.first, before_text=text,
                    before_digest=sha256(text))
        self.assert_revert_refused(heal_run, 'request_specs row 999999')

    def test_revert_of_a_deleted_instance_skips_it(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        self.update_instance(self.cell1, self.first, deleted=1)
        self.assert_first_skipped_as_deleted(heal_run, healed)

    def assert_first_skipped_as_deleted(self, heal_run, expected_rows):
        """Reverting the first instance skips it, writing nothing."""
        result, document = self.run_json('revert', heal_run, '--instance',
                                         self.first)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual([(self.first, 'skipped', 'instance-deleted')],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in document['results']])
        self.assertEqual(expected_rows, self.all_spec_texts())

    def archive(self, cell, instance_uuid):
        """Delete and archive an instance: no mapping, spec or rows.

        As ``nova-manage db archive_deleted_rows`` leaves it.
        """
        with self.deployment.api_engine.begin() as conn:
            for table in (tables.request_specs, tables.instance_mappings):
                conn.execute(table.delete().where(
                    table.c.instance_uuid == instance_uuid))
        with cell.engine.begin() as conn:
            for table in (tables.instance_extra,
                          tables.instance_system_metadata,
                          tables.block_device_mapping, tables.migrations):
                conn.execute(table.delete().where(
                    table.c.instance_uuid == instance_uuid))
            conn.execute(tables.instances.delete().where(
                tables.instances.c.uuid == instance_uuid))

    def test_revert_of_an_archived_instance_skips_it(self):
        heal_run = self.heal_run()
        self.archive(self.cell1, self.first)
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(
            [(self.first, 'skipped', 'instance-deleted',
              'the instance was deleted and archived: it has no instance '
              'mapping and no request_specs row any more')],
            [(r['instance_uuid'], r['status'], r['reason'], r['detail'])
             for r in document['results'] if r['status'] != 'healed'])
        expected = dict(self.originals)
        del expected[self.first]
        self.assertEqual(expected, self.all_spec_texts())
        self.assertEqual({self.second, self.third},
                         set(self.changes_by_instance(document['run_id'])))
        self.assert_first_skipped_as_deleted(heal_run, expected)

    def test_revert_of_a_reverted_run_changed_since(self):
        heal_run = self.heal_run()
        result, document = self.run_json('revert', heal_run, '--instance',
                                         self.first)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        first_revert = document['run_id']
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        second_revert = document['run_id']
        self.assertEqual(
            [(self.first, 'already-written')],
            [(n['instance_uuid'], n['notes'][0]['code'])
             for n in document['notices']])
        self.assertIn('already reverted (by run %s)' % first_revert,
                      document['notices'][0]['notes'][0]['detail'])
        self.assertEqual(self.originals, self.all_spec_texts())
        # Nova changes the rows since (a resize, say).
        nova = {}
        for uuid in (self.first, self.second):
            nova[uuid] = json.dumps(dep.request_spec(uuid, demo.M1_LARGE),
                                    indent=1)
            self.deployment.set_spec(uuid, nova[uuid])
        expected = dict(self.originals, **nova)
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(expected, self.all_spec_texts())
        self.assertEqual([], document['results'])
        self.assertEqual(
            sorted([(self.first, 'already-reverted', first_revert),
                    (self.second, 'already-reverted', second_revert),
                    (self.third, 'already-written', second_revert)]),
            sorted((n['instance_uuid'], n['notes'][0]['code'],
                    n['notes'][0]['detail'].split('by run ')[1][:36])
                   for n in document['notices']))
        self.assertEqual([], self.audit_show(document['run_id'])['changes'])
        result = self.run_cli('revert', heal_run, '--instance', self.first)
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertIn('NOTICE    %s cell1 already-reverted: already reverted '
                      '(by run %s); the row changed since and is left alone; '
                      'nothing to do' % (self.first, first_revert),
                      result.stdout)
        self.assertEqual(expected, self.all_spec_texts())

    def test_unknown_run(self):
        self.heal_run()
        healed = self.all_spec_texts()
        for run_id in (str(uuidlib.uuid4()), 'not-a-run'):
            result = self.run_cli('revert', run_id)
            self.assertEqual(127, result.code, result.stdout + result.stderr)
            self.assertIn('no run %s' % run_id, result.stderr)
        self.assertEqual(healed, self.all_spec_texts())

    def test_revert_of_a_dry_run(self):
        result, document = self.heal_json('--dry-run')
        self.assertEqual(0, result.code, result.stderr)
        result = self.run_cli('revert', document['run_id'])
        self.assertEqual(4, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_revert_of_a_revert(self):
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        result = self.run_cli('revert', document['run_id'])
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(healed, self.all_spec_texts())
        # The first revert no longer stands: reverting the heal again
        # works, and is no "already reverted".
        result, document = self.run_json('revert', heal_run)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual([], document['notices'])


class PlanApplyTest(audit_case.AuditTestCase):
    """``request-specs --dry-run --plan`` and ``apply`` of the plan."""

    def setUp(self):
        super().setUp()
        self.first = self.add_drifted(self.cell1)
        self.second = self.add_drifted(self.cell2)
        self.third = self.deployment.add_instance(
            self.cell2, demo.A2_MEDIUM, spec_flavor=demo.E2_MEDIUM,
            new=demo.E2_MEDIUM)
        self.drifted = {self.first, self.second, self.third}
        self.add_consistent(self.cell1)
        self.originals = self.all_spec_texts()
        self.plan_path = os.path.join(
            self.useFixture(fixtures.TempDir()).path, 'plan.json')

    def write_plan(self):
        result, document = self.heal_json('--dry-run', '--plan',
                                          self.plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        with open(self.plan_path) as handle:
            return document['run_id'], json.load(handle)

    def test_plan_holds_what_a_heal_writes(self):
        plan_run, plan = self.write_plan()
        self.assertEqual(
            0o600, stat.S_IMODE(os.stat(self.plan_path).st_mode))
        self.assertEqual(['plan.json'],
                         os.listdir(os.path.dirname(self.plan_path)))
        self.assertEqual('healreq-plan/1', plan['format'])
        self.assertEqual(plan_run, plan['run_id'])
        self.assertEqual('dry-run', self.audit_runs()[plan_run]['mode'])
        changes = {c['instance_uuid']: c for c in plan['changes']}
        self.assertEqual(self.drifted, set(changes))
        cells = {self.first: self.cell1.uuid, self.second: self.cell2.uuid,
                 self.third: self.cell2.uuid}
        for uuid, change in changes.items():
            self.assertEqual(self.originals[uuid], change['before'])
            self.assertEqual(sha256(change['before']),
                             change['before_digest'])
            self.assertEqual(sha256(change['after']), change['after_digest'])
            self.assertEqual(cells[uuid], change['cell_uuid'])
            self.assertEqual(['flavor'], change['fields'])

        # The plan holds exactly what a real heal writes.
        self.heal_run()
        healed = self.all_spec_texts()
        for uuid, change in changes.items():
            self.assertEqual(healed[uuid], change['after'])

    def test_apply(self):
        plan_run, plan = self.write_plan()
        result, document = self.run_json('apply', self.plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        expected = dict(self.originals)
        for change in plan['changes']:
            expected[change['instance_uuid']] = change['after']
        self.assertEqual(expected, self.all_spec_texts())
        self.assertEqual(
            sorted((u, 'healed') for u in self.drifted),
            sorted((r['instance_uuid'], r['status'])
                   for r in document['results']))

        apply_run = document['run_id']
        run = self.audit_runs()[apply_run]
        self.assertEqual('apply', run['mode'])
        self.assertEqual({'plan': self.plan_path, 'plan_run': plan_run},
                         run['filters'])
        self.assertEqual(0, run['exit_code'])
        changes = self.changes_by_instance(apply_run)
        for change in plan['changes']:
            recorded = changes[change['instance_uuid']]
            self.assertEqual(
                ('applied', change['before'], change['after'],
                 change['before_digest'], change['after_digest']),
                (recorded['state'], recorded['before'], recorded['after'],
                 recorded['before_digest'], recorded['after_digest']))

        # Nothing is left to heal, and the same plan has nothing to do.
        self.assertEqual(4, self.heal('--dry-run').code)
        again = self.run_cli('apply', self.plan_path)
        self.assertEqual(4, again.code, again.stdout + again.stderr)
        self.assertEqual(3, again.stdout.count(' already-written: '))
        self.assertEqual(expected, self.all_spec_texts())

    def test_apply_after_revert_writes_the_same_rows(self):
        """Plan, heal, revert the heal, apply the plan: same rows."""
        self.write_plan()
        heal_run = self.heal_run()
        healed = self.all_spec_texts()
        self.assertEqual(0, self.run_cli('revert', heal_run).code)
        self.assertEqual(self.originals, self.all_spec_texts())
        result = self.run_cli('apply', self.plan_path)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertEqual(healed, self.all_spec_texts())

    def test_row_changed_after_the_plan(self):
        self.write_plan()
        nova = json.dumps(dep.request_spec(self.first, demo.M1_LARGE))
        self.deployment.set_spec(self.first, nova)
        # A change MySQL's PAD SPACE collation would not see.
        padded = self.originals[self.second] + ' '
        self.deployment.set_spec(self.second, padded)
        result, document = self.run_json('apply', self.plan_path)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(nova, self.deployment.spec_text(self.first))
        self.assertEqual(padded, self.deployment.spec_text(self.second))
        self.assertNotEqual(self.originals[self.third],
                            self.deployment.spec_text(self.third))
        self.assertEqual(
            sorted([(self.first, 'conflict', 'spec-changed'),
                    (self.second, 'conflict', 'spec-changed'),
                    (self.third, 'healed', 'recorded-change')]),
            sorted((r['instance_uuid'], r['status'], r['reason'])
                   for r in document['results']))
        self.assertEqual([self.third],
                         list(self.changes_by_instance(document['run_id'])))

    def test_task_started_after_the_plan(self):
        self.write_plan()
        self.update_instance(self.cell2, self.second, task_state='migrating')
        result, document = self.run_json('apply', self.plan_path)
        self.assertEqual(3, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals[self.second],
                         self.deployment.spec_text(self.second))
        self.assertIn((self.second, 'conflict', 'task-in-progress'),
                      [(r['instance_uuid'], r['status'], r['reason'])
                       for r in document['results']])
        changes = self.changes_by_instance(document['run_id'])
        self.assertEqual({self.first, self.third}, set(changes))

    def test_edited_plan(self):
        self.write_plan()
        with open(self.plan_path) as handle:
            plan = json.load(handle)
        change = plan['changes'][0]
        change['after'] = change['after'].replace('"m1.large"',
                                                  '"m1.xlarge"')
        self.assertNotEqual(sha256(change['after']), change['after_digest'])
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        runs = set(self.audit_runs())
        result = self.run_cli('apply', self.plan_path)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertIn('was edited', result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual(runs, set(self.audit_runs()))

    def test_edited_before_value(self):
        self.write_plan()
        with open(self.plan_path) as handle:
            plan = json.load(handle)
        plan['changes'][1]['before'] += ' '
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        result = self.run_cli('apply', self.plan_path)
        self.assertEqual(127, result.code, result.stdout + result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_not_a_plan(self):
        directory = os.path.dirname(self.plan_path)
        documents = {'config': None,
                     'other.json': {'format': 'healreq-plan/2',
                                    'changes': []},
                     'list.json': [],
                     'truncated.json': '{"format": "healreq-plan/1", ',
                     'malformed.json': {'format': 'healreq-plan/1',
                                        'changes': [{'before': 'x'}]}}
        for name, document in documents.items():
            path = os.path.join(directory, name)
            if name == 'config':
                path = self.config_file
            elif isinstance(document, str):
                with open(path, 'w') as handle:
                    handle.write(document)
            else:
                with open(path, 'w') as handle:
                    json.dump(document, handle)
            result = self.run_cli('apply', path)
            self.assertEqual(127, result.code,
                             '%s: %s' % (name, result.stdout + result.stderr))
        missing = self.run_cli('apply', os.path.join(directory, 'missing'))
        self.assertEqual(127, missing.code)
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual({}, self.audit_runs())

    def attack(self, instance_uuid, **values):
        """Keep only the change of ``instance_uuid``, with ``values`` set.

        The digests are recomputed, as anyone who can edit the file can.
        """
        with open(self.plan_path) as handle:
            plan = json.load(handle)
        change, = [c for c in plan['changes']
                   if c['instance_uuid'] == instance_uuid]
        change.update(values)
        change['before_digest'] = sha256(change['before'])
        change['after_digest'] = sha256(change['after'])
        plan['changes'] = [change]
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        return change

    def assert_apply_refuses(self, instance_uuid, reason, detail):
        """apply writes nothing, records no change and exits 2."""
        result, document = self.run_json('apply', self.plan_path)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        self.assertEqual([(instance_uuid, 'error', reason)],
                         [(r['instance_uuid'], r['status'], r['reason'])
                          for r in document['results']])
        self.assertIn(detail, document['results'][0]['detail'])
        self.assertEqual(0, document['summary']['healed'])
        self.assertEqual(self.originals, self.all_spec_texts())
        self.assertEqual({}, self.changes_by_instance(document['run_id']))
        self.assertEqual(2, self.audit_runs()[document['run_id']][
            'exit_code'])

    def test_after_replaced_by_garbage(self):
        self.write_plan()
        self.attack(self.first, after=json.dumps({'garbage': True}))
        self.assert_apply_refuses(self.first, 'change-not-derived',
                                  'not a RequestSpec document')

    def test_after_not_json(self):
        self.write_plan()
        self.attack(self.second, after='this is not json')
        self.assert_apply_refuses(self.second, 'change-not-derived',
                                  'not JSON')

    def test_after_is_another_instances_spec(self):
        _, plan = self.write_plan()
        afters = {c['instance_uuid']: c['after'] for c in plan['changes']}
        self.attack(self.first, after=afters[self.second])
        self.assert_apply_refuses(self.first, 'change-not-derived',
                                  'of another instance')

    def test_after_is_another_flavor(self):
        """A well-formed spec of the same instance, but not the heal's."""
        self.write_plan()
        other = json.dumps(dep.request_spec(self.first, demo.A2_MEDIUM))
        self.attack(self.first, after=other)
        self.assert_apply_refuses(self.first, 'change-not-derived',
                                  'differs from the derived one')

    def test_spec_id_of_another_row(self):
        _, plan = self.write_plan()
        ids = {c['instance_uuid']: c['spec_id'] for c in plan['changes']}
        self.attack(self.first, spec_id=ids[self.second])
        self.assert_apply_refuses(self.first, 'plan-spec-id-mismatch',
                                  'row %s' % ids[self.second])

    def test_spec_id_not_an_integer(self):
        _, plan = self.write_plan()
        spec_id = {c['instance_uuid']: c['spec_id']
                   for c in plan['changes']}[self.third]
        for value in (spec_id + 0.7, float(spec_id), str(spec_id), True,
                      None):
            self.write_plan()
            self.attack(self.third, spec_id=value)
            runs = set(self.audit_runs())
            result = self.run_cli('apply', self.plan_path)
            self.assertEqual(127, result.code,
                             '%r: %s' % (value, result.stdout + result.stderr))
            self.assertEqual(['nova-heal: error: plan %s is malformed: '
                              'spec_id %s of %s is not an integer'
                              % (self.plan_path, json.dumps(value),
                                 self.third)],
                             result.stderr.splitlines())
            self.assertEqual(self.originals, self.all_spec_texts())
            self.assertEqual(runs, set(self.audit_runs()))

    def test_change_values_of_the_wrong_type(self):
        for values in ({'fields': 'flavor'}, {'fields': [1]},
                       {'instance_uuid': [self.first]},
                       {'before': None}):
            self.write_plan()
            with open(self.plan_path) as handle:
                plan = json.load(handle)
            plan['changes'][0].update(values)
            with open(self.plan_path, 'w') as handle:
                json.dump(plan, handle)
            result = self.run_cli('apply', self.plan_path)
            self.assertEqual(127, result.code, '%r: %s' % (
                values, result.stdout + result.stderr))
            self.assertEqual(1, len(result.stderr.splitlines()),
                             result.stderr)
            self.assertIn('malformed', result.stderr)
        self.assertEqual(self.originals, self.all_spec_texts())

    def test_refused_change_does_not_stop_the_others(self):
        _, plan = self.write_plan()
        plan['changes'][0]['after'] = 'this is not json'
        plan['changes'][0]['after_digest'] = sha256('this is not json')
        with open(self.plan_path, 'w') as handle:
            json.dump(plan, handle)
        result, document = self.run_json('apply', self.plan_path)
        self.assertEqual(2, result.code, result.stdout + result.stderr)
        refused = plan['changes'][0]['instance_uuid']
        self.assertEqual(
            sorted([(refused, 'error')] + [
                (c['instance_uuid'], 'healed') for c in plan['changes'][1:]]),
            sorted((r['instance_uuid'], r['status'])
                   for r in document['results']))
        self.assertEqual(self.originals[refused],
                         self.deployment.spec_text(refused))

    def test_instance_changed_since_the_plan(self):
        """The plan's value is no longer what a heal writes: refused."""
        self.write_plan()
        self.attack(self.third)
        # The instance is resized to the spec's flavor after the plan.
        self.update_extra(self.cell2, self.third,
                          flavor=dep.instance_flavors(demo.E2_MEDIUM))
        self.update_instance(self.cell2, self.third, instance_type_id=831,
                             root_gb=25)
        self.assert_apply_refuses(self.third, 'change-not-derived',
                                  'consistent with the instance now')

    def test_plan_requires_dry_run(self):
        result = self.heal('--plan', self.plan_path)
        self.assertEqual(127, result.code)
        self.assertFalse(os.path.exists(self.plan_path))
        self.assertEqual(self.originals, self.all_spec_texts())


class AuditStoreTest(audit_case.AuditTestCase):
    """The store records what the command line reports, on any backend."""

    def test_audit_connection(self):
        """[healreq]/audit_connection puts the store in another database."""
        uuid = self.add_drifted(self.cell1)
        url = self.db.database_url('audit')
        config = self.write_config('audit_connection = %s\n' % url)
        result, document = self.heal_json(config_file=config)
        self.assertEqual(0, result.code, result.stdout + result.stderr)
        self.assertFalse(os.path.exists(self.audit_path()))
        store = audit_store.AuditStore(url)
        self.addCleanup(store.dispose)
        changes = store.changes(document['run_id'])
        self.assertEqual([(uuid, 'applied')],
                         [(c['instance_uuid'], c['state']) for c in changes])
        self.assertEqual(self.deployment.spec_text(uuid),
                         changes[0]['after_text'])
        result, shown = self.run_json('audit', 'show', document['run_id'],
                                      config_file=config)
        self.assertEqual(0, result.code, result.stderr)
        self.assertEqual([uuid],
                         [c['instance_uuid'] for c in shown['changes']])
