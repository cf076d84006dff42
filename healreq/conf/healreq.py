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


"""Options of healreq's own ``[healreq]`` group."""

from oslo_config import cfg

healreq_group = cfg.OptGroup(
    'healreq',
    title='healreq options',
    help='Options of the nova-heal tool.')

healreq_opts = [
    cfg.StrOpt('state_path',
               default='/var/lib/nova-heal',
               help='Directory for healreq\'s own state: the default '
                    'SQLite audit store lives here (created owner-only).'),
    cfg.StrOpt('audit_connection',
               secret=True,
               help='SQLAlchemy URL of the audit store that records every '
                    'run and every change before it is made (for example '
                    'mysql+pymysql://healreq:SECRET@db/healreq). Default: '
                    'an SQLite file audit.sqlite under state_path.'),
    cfg.IntOpt('batch_size',
               default=500,
               min=1,
               max=10000,
               help='Instances read per batch and cell. Memory use is '
                    'bounded by this number; --batch-size overrides it.'),
    cfg.FloatOpt('progress_interval',
                 default=30,
                 min=0,
                 max=86400,
                 help='Seconds between two progress lines of request-specs '
                      'and allocations when stderr is not a terminal (cron, '
                      'a container\'s log, a pipe): each line, logged at '
                      'INFO, gives the instances done out of the total for '
                      'the run and per cell, the rate, the ETA and the '
                      'findings so far. 0 logs none; --quiet too. On a '
                      'terminal one line for the whole run is rewritten '
                      'after each batch instead.'),
    cfg.IntOpt('lock_wait_timeout',
               default=5,
               min=1,
               max=10,
               help='Seconds a statement waits for a lock that another '
                    'session holds on a MySQL/MariaDB row or table, '
                    'instead of the server\'s innodb_lock_wait_timeout '
                    '(50) and lock_wait_timeout (a year). A request spec '
                    'locked longer is reported as a conflict (spec-locked) '
                    'and left alone; a cell whose tables stay locked needs '
                    'attention and is reported as locked. A signal that '
                    'arrives while a write waits for a locked row is '
                    'honoured when that wait ends, so at most 10 seconds '
                    'are allowed.'),
    cfg.IntOpt('database_timeout',
               default=60,
               min=5,
               max=3600,
               help='Seconds a run waits for a MySQL/MariaDB server to '
                    'accept a connection, take a statement or begin to '
                    'answer, beyond the lock waits that '
                    'lock_wait_timeout allows. Behind a proxy whose server '
                    'died, a connection stays open while nothing answers: '
                    'a run facing a dead node then fails its statement '
                    'within database_timeout + lock_wait_timeout seconds '
                    'and ends with its report, needing attention, instead '
                    'of waiting for '
                    'the proxy\'s own timeout (an hour with kolla-ansible\'s '
                    'settings). Set it above the longest read of one batch '
                    'on a loaded server.'),
    cfg.IntOpt('skip_updated_within',
               default=60,
               min=0,
               max=31536000,
               help='Skip instances whose instances.updated_at is less '
                    'than this many seconds old, so as not to race an '
                    'operation that has read the spec but not yet saved '
                    'it.'),
    cfg.StrOpt('target_release',
               help='The Nova release the deployment runs, by series, '
                    'codename or Nova major version (for example 2023.1, '
                    'antelope or 27), whose rules and object versions '
                    'healreq then applies. Default: detected from the '
                    'service versions in the cell databases, the API '
                    'schema and the newest specs. --target-release '
                    'overrides it.'),
]


def register_opts(conf):
    conf.register_group(healreq_group)
    conf.register_opts(healreq_opts, group=healreq_group)


def list_opts():
    return [(healreq_group, healreq_opts)]
