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


"""The tool contender: one ``request-specs --dry-run`` over the deployment.

Runs the whole dry run once, in this process, through ``dry_run``: the
only place that knows how the tool is invoked (the library API). With
``--workers N``, the run processes up to N cells in parallel, as
``nova-heal request-specs --workers N`` does. Writes its JSON report
(``summary`` and ``dry_run`` at least) on stdout and exits with the
run's exit code.
"""

import argparse
import sys

from healreq import api
from healreq.cmd import collector
from healreq.cmd import output


def dry_run(config_file, batch_size, workers=1, fields=None):
    """Run request-specs --dry-run once; return (exit code, JSON text).

    Through the library API the command line calls, with the same
    garbage-collector tuning as ``nova-heal``. ``fields`` are those of
    ``--fields`` (default: every field).
    """
    collector.tune(batch_size)
    conf = api.load_config([config_file])
    result = api.run_request_specs(conf, api.Options.from_conf(
        conf, dry_run=True, batch_size=batch_size, workers=workers,
        checked_fields=fields))
    return result.exit_code, ''.join(output.json_chunks(
        result.report, result.exit_code, result.run_id))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--config-file', required=True)
    parser.add_argument('--batch-size', type=int, required=True)
    parser.add_argument('--workers', type=int, default=1,
                        help='Cells processed in parallel (default 1).')
    parser.add_argument('--fields',
                        help='Only these fields, comma-separated (as '
                             'request-specs --fields; default: all).')
    args = parser.parse_args(argv)
    fields = tuple(args.fields.split(',')) if args.fields else None
    code, text = dry_run(args.config_file, args.batch_size, args.workers,
                         fields)
    sys.stdout.write(text)
    sys.stdout.flush()
    return code


if __name__ == '__main__':
    sys.exit(main())
