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


"""Values Nova defines that both the queries and the rules use."""

# CellMapping.CELL0_UUID: the cell of instances that were never scheduled.
CELL0_UUID = '00000000-0000-0000-0000-000000000000'

# Migration statuses after which Nova no longer tracks the migration
# (migration_get_in_progress_by_host_and_node). 'finished' is in progress.
TERMINAL_MIGRATION_STATUSES = ('confirmed', 'reverted', 'error', 'failed',
                               'completed', 'cancelled', 'done')
