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


"""The deployment recipes under etc/ parse, and their commands are valid.

Every nova-heal command line in a recipe is checked against the command's
own parser, so that a renamed or removed option breaks a test rather than
a deployment.
"""

import configparser
import contextlib
import io
import os
import re
import shlex
import subprocess

import fixtures
from oslo_config import cfg
from oslo_log import log as logging
import testtools
import yaml

from healreq.cmd import cli_reference
from healreq import conf as healreq_conf
from healreq.heal import findings
from healreq import metrics

_ETC = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'etc')
_SHELL_OPERATORS = ('2>>', '2>', '>', '>>', '|', '||', '&&', ';')


def _path(*parts):
    return os.path.join(_ETC, *parts)


def _read(*parts):
    with open(_path(*parts)) as handle:
        return handle.read()


def _yaml(*parts):
    return list(yaml.safe_load_all(_read(*parts)))


def _unit(*parts):
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(_read(*parts))
    return parser


class _Commands(object):
    """Checks nova-heal command lines against the real parser."""

    def __init__(self):
        self.parser = cli_reference.build_parser()
        self.commands = dict(cli_reference.subcommands(self.parser))
        self.global_options = {
            option: action for action in self.parser._actions
            for option in action.option_strings}

    def check(self, words):
        """Return the command's name and namespace; raise if invalid."""
        words = list(words)
        for index, word in enumerate(words):
            if word in _SHELL_OPERATORS:
                words = words[:index]
                break
        if os.path.basename(words[0]) != 'nova-heal':
            raise ValueError('not a nova-heal command: %s' % words)
        rest = words[1:]
        while rest and rest[0].startswith('-'):
            name = rest.pop(0).split('=')[0]
            action = self.global_options.get(name)
            if action is None:
                raise ValueError('unknown global option %s' % name)
            if action.nargs != 0 and '=' not in name:
                rest.pop(0)
        command = self.commands[rest[0]]
        errors = io.StringIO()
        try:
            with contextlib.redirect_stderr(errors):
                return rest[0], command.parse_args(rest[1:])
        except SystemExit:
            raise ValueError('%s: %s' % (' '.join(words), errors.getvalue()))


class CommandCheckerTest(testtools.TestCase):
    """The checker itself rejects what nova-heal rejects."""

    def test_rejects_unknown_options(self):
        commands = _Commands()
        commands.check(['nova-heal', '--config-file', 'x', 'request-specs',
                        '--dry-run'])
        for words in (['nova-heal', '--no-such', 'request-specs'],
                      ['nova-heal', 'request-specs', '--no-such'],
                      ['nova-heal', 'request-specs', '--max-count'],
                      ['nova-heal', 'revert']):
            self.assertRaises(ValueError, commands.check, words)


class RecipesTest(testtools.TestCase):
    def setUp(self):
        super().setUp()
        self.commands = _Commands()

    def assert_verification(self, words):
        """A nightly read-only run with nova.conf and a metrics file."""
        name, namespace = self.commands.check(words)
        self.assertEqual('request-specs', name)
        self.assertTrue(namespace.dry_run)
        self.assertTrue(namespace.quiet)
        self.assertTrue(namespace.metrics_file)
        self.assertIn('--config-file', words)

    def test_cron_d(self):
        [line] = [line for line in _read('cron.d', 'nova-heal').splitlines()
                  if line and not line.startswith('#')]
        fields = shlex.split(line)
        self.assertEqual('nova', fields[5])
        self.assert_verification(fields[6:])

    def test_systemd_service_and_timer(self):
        service = _unit('systemd', 'nova-heal-verify.service')
        self.assertEqual('oneshot', service['Service']['Type'])
        self.assertEqual({'0', '4'},
                         set(service['Service']['SuccessExitStatus'].split()))
        self.assertEqual('nova-heal', service['Service']['StateDirectory'])
        self.assert_verification(shlex.split(service['Service']['ExecStart']))
        timer = _unit('systemd', 'nova-heal-verify.timer')
        self.assertIn('OnCalendar', timer['Timer'])
        self.assertEqual('timers.target', timer['Install']['WantedBy'])

    def test_kubernetes_cronjob(self):
        documents = {doc['kind']: doc for doc in
                     _yaml('kubernetes', 'nova-heal-cronjob.yaml')}
        self.assertEqual({'PersistentVolumeClaim', 'Secret', 'CronJob'},
                         set(documents))
        cronjob = documents['CronJob']
        self.assertEqual('batch/v1', cronjob['apiVersion'])
        self.assertEqual('Forbid', cronjob['spec']['concurrencyPolicy'])
        pod = cronjob['spec']['jobTemplate']['spec']['template']['spec']
        [container] = pod['containers']
        mounts = {m['mountPath']: m for m in container['volumeMounts']}
        volumes = {v['name']: v for v in pod['volumes']}
        # nova.conf comes read-only from openstack-helm's nova-etc secret.
        nova_conf = mounts['/etc/nova/nova.conf']
        self.assertTrue(nova_conf['readOnly'])
        self.assertEqual('nova-etc',
                         volumes[nova_conf['name']]['secret']['secretName'])
        # The audit store ([healreq]/state_path) outlives the pod.
        settings = self.load_config(
            documents['Secret']['stringData']['nova-heal.conf'])
        state = mounts[settings.healreq.state_path]
        self.assertEqual(
            documents['PersistentVolumeClaim']['metadata']['name'],
            volumes[state['name']]['persistentVolumeClaim']['claimName'])
        script = container['command'][2]
        self.assert_verification(shlex.split(script.splitlines()[0]))
        self.assertIn('PUSHGATEWAY_URL',
                      [env['name'] for env in container['env']])
        self.assert_shell_syntax(script)

    def test_openstack_ansible_playbook(self):
        [play] = _yaml('openstack-ansible', 'nova-heal.yml')[0]
        tasks = {next(key for key in task if key.startswith('ansible.')):
                 task for task in play['tasks']}
        pip = tasks['ansible.builtin.pip']['ansible.builtin.pip']
        self.assertIn('/openstack/venvs/nova-', play['vars']['nova_heal_venv'])
        self.assertEqual('{{ nova_heal_venv }}', pip['virtualenv'])
        self.assertTrue(pip['extra_args'].startswith('-c '))
        job = tasks['ansible.builtin.cron']['ansible.builtin.cron']['job']
        # Jinja variables: the play's own, then the os_nova role's.
        for _ in range(2):
            job = re.sub(r'{{ (\w+) }}', lambda match: play['vars'].get(
                match.group(1), match.group(1).upper()), job)
        words = shlex.split(job)
        self.assertEqual('/openstack/venvs/nova-NOVA_VENV_TAG/bin/nova-heal',
                         words[0])
        self.assert_verification(words)

    def test_kolla_ansible(self):
        [play] = _yaml('kolla-ansible', 'nova-heal.yml')[0]
        self.assertEqual('nova-api[0]', play['hosts'])
        [dropin] = [task['ansible.builtin.copy']['content']
                    for task in play['tasks']
                    if 'content' in task.get('ansible.builtin.copy', {})]
        [exec_start] = [line.split('=', 1)[1]
                        for line in dropin.splitlines()
                        if line.startswith('ExecStart=/')]
        words = shlex.split(exec_start)
        self.assertEqual('/usr/local/bin/nova-heal-kolla', words[0])
        wrapper = _read('kolla-ansible', 'nova-heal-kolla')
        self.assert_shell_syntax(wrapper)
        # The wrapper runs "nova-heal GLOBAL-OPTIONS" plus its arguments.
        command = shlex.split(wrapper.split('"$image" \\\n', 1)[1]
                              .replace('\\\n', ' '))
        self.assertEqual('"$@"', wrapper.rstrip().rsplit(None, 1)[1])
        self.assert_verification(command[:-1] + words[1:])
        self.assertIn('/etc/kolla/nova-api/nova.conf:/etc/nova/nova.conf:ro',
                      wrapper)
        settings = self.load_config(_read('kolla-ansible', 'nova-heal.conf'))
        self.assertTrue(settings.use_stderr)
        self.assertFalse(settings.log_dir)
        self.assertFalse(settings.log_file)
        self.assertIn('%s:%s:rw' % ((settings.healreq.state_path,) * 2),
                      wrapper)

    def test_containerfiles_install_with_constraints(self):
        for parts in (('container', 'Containerfile'),
                      ('kolla-ansible', 'Containerfile')):
            instructions = _instructions(_read(*parts))
            self.assertEqual('FROM', [name for name, _ in instructions
                                      if name != 'ARG'][0], parts)
            runs = ' '.join(args for name, args in instructions
                            if name == 'RUN')
            self.assertIn('pip install --no-cache-dir -c ', runs)
            self.assertIn('pip check', runs)
            copies = [args for name, args in instructions if name == 'COPY']
            self.assertTrue(any(
                args.startswith(
                    'tools/constraints/upper-constraints-${RELEASE}.txt ')
                for args in copies), parts)
            self.assertNotEqual('root', [args for name, args in instructions
                                         if name == 'USER'][-1])

    def assert_shell_syntax(self, script):
        subprocess.run(['sh', '-n'], input=script.encode(), check=True)

    def load_config(self, text):
        """The configuration nova-heal reads from ``text``."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path, 'conf')
        with open(path, 'w') as handle:
            handle.write(text)
        conf = cfg.ConfigOpts()
        logging.register_options(conf)
        healreq_conf.register_opts(conf)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[], use_env=False)
        self.addCleanup(conf.reset)
        return conf


def _instructions(text):
    """``[(INSTRUCTION, arguments)]`` of a Containerfile."""
    logical, current = [], ''
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith('#'):
            continue
        current += line.rstrip('\\').strip() + ' '
        if not line.endswith('\\'):
            logical.append(current.strip())
            current = ''
    return [tuple(line.split(None, 1)) for line in logical]


class AlertRulesTest(testtools.TestCase):
    """The alert rules use the metrics nova-heal writes."""

    def rules(self):
        [document] = _yaml('prometheus', 'nova-heal-alerts.yml')
        return {rule['alert']: rule for group in document['groups']
                for rule in group['rules']}

    def written_metrics(self):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'heal.prom')
        metrics.write(path, metrics.render(findings.RunReport(False), 4,
                                           1.0, 1700000000, True),
                      success_timestamp=1700000000)
        with open(path) as handle:
            return set(re.findall(r'^# TYPE (\S+)', handle.read(), re.M))

    def test_every_metric_of_a_rule_is_written(self):
        written = self.written_metrics()
        for name, rule in self.rules().items():
            used = set(re.findall(r'nova_heal_\w+', rule['expr']))
            self.assertTrue(used, name)
            self.assertLessEqual(used, written, name)

    def test_a_job_that_never_succeeded_fires(self):
        # time() - <missing series> is empty: only absent() sees it.
        self.assertIn(
            'absent(nova_heal_request_specs_last_success_timestamp_seconds)',
            [rule['expr'] for rule in self.rules().values()])
