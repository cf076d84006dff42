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

"""Logging set up from nova.conf's oslo.log options, which never fails.

A nova.conf copied from a deployment names log paths of the host it came
from (kolla-ansible sets ``[DEFAULT]/log_dir = /var/log/kolla/nova``).
Where they exist, the tool logs there as nova-manage would, to
``<log_dir>/nova-heal.log``; where they do not, it logs to stderr and says
so, instead of failing before it has done anything. Every log line is
escaped into one line (see ``visible``).

A database error is reported in one line by the command that met it;
oslo.db's own log of every error it wraps and SQLAlchemy's pool's log of
a connection it cannot reset, each with a traceback, are kept for
``--debug``.
"""

import logging as std_logging

from oslo_log import log as logging

from healreq.cmd import visible
from healreq import masking

LOG = logging.getLogger(__name__)

LOG_FILE_IN_LOG_DIR = 'nova-heal.log'

# Logs "DB exception wrapped" and the traceback of every database error.
# Loggers whose errors the command reports in one line itself: oslo.db's
# log of every error it wraps, and SQLAlchemy's pool, which logs with a
# traceback a connection it cannot reset or close (a database server
# gone, a Galera node that lost quorum).
_QUIET_UNLESS_DEBUG = ('oslo_db.sqlalchemy.exc_filters', 'sqlalchemy.pool')


def setup(conf, product='healreq'):
    """Set up oslo.log from ``conf``; fall back to stderr on any error.

    Every line logged is masked (masking.mask_password): libraries log URLs
    with the password of their query string.
    """
    if conf.log_dir and not conf.log_file:
        conf.set_override('log_file', LOG_FILE_IN_LOG_DIR)
    try:
        _setup(conf, product)
        return
    except (OSError, logging.LogConfigError) as exc:
        problem = exc
    where = conf.log_config_append or _log_path(conf)
    for name, value in (('log_config_append', None), ('log_dir', None),
                        ('log_file', None), ('use_stderr', True)):
        conf.set_override(name, value)
    _setup(conf, product)
    LOG.warning('Cannot log to %s (%s); logging to stderr instead.',
                where, getattr(problem, 'strerror', None) or problem)


def _setup(conf, product):
    logging.setup(conf, product)
    _without_colors()
    _mask_every_line()
    visible.escape_logs()
    # The standard library's logger: oslo.log's getLogger would rename it.
    for name in _QUIET_UNLESS_DEBUG:
        std_logging.getLogger(name).setLevel(
            logging.DEBUG if conf.debug else logging.CRITICAL)


class _NoColors(std_logging.Filter):
    """Fill in the color fields a format string may name, with nothing."""

    def filter(self, record):
        record.color = record.reset_color = ''
        return True


def _without_colors():
    """Replace oslo.log's ColorHandler by a plain one on the same stream.

    Older oslo.log releases (Zed's 5.0) write every line to stderr through
    it, and it ends each line with a terminal escape, outside any
    formatter's reach; newer ones use it only if ``[DEFAULT]/log_color``
    asks for colors.
    """
    root = std_logging.getLogger()
    for handler in list(root.handlers):
        if type(handler).__name__ != 'ColorHandler':
            continue
        plain = std_logging.StreamHandler(handler.stream)
        plain.setLevel(handler.level)
        plain.setFormatter(handler.formatter)
        plain.addFilter(_NoColors())
        root.removeHandler(handler)
        root.addHandler(plain)


class _MaskPasswords(std_logging.Filter):
    def filter(self, record):
        message = record.getMessage()
        masked = masking.mask_password(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


def _mask_every_line():
    masking = _MaskPasswords()
    for handler in std_logging.getLogger().handlers:
        handler.addFilter(masking)


def _log_path(conf):
    if conf.log_dir:
        return '%s/%s' % (conf.log_dir.rstrip('/'), conf.log_file)
    return conf.log_file
