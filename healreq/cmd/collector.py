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


"""How often the cycle collector runs during a walk: per batches, not rows.

A walk allocates millions of short-lived rows and JSON documents, nearly
all freed by reference counting. Python's default (a collection after 700
new container objects) makes the collector scan every batch in flight
over and over; even a collection per 50,000 still scans each batch a few
times, about a fifth of a dry run's CPU. Collecting after four batches'
worth of containers leaves the cost a few percent. The older
generations keep their default pace, so that the little cyclic garbage
there is does not pile up over a long run.
"""

import gc

from healreq import conf as healreq_conf

# The dicts and lists a batch holds per instance while it is decided: its
# rows, its parsed spec and what is derived from them (about 90 measured).
CONTAINERS_PER_INSTANCE = 100
BATCHES_PER_COLLECTION = 4
_LEAST = 50000
_OLDER_GENERATIONS = (10, 10)
_DEFAULT_BATCH_SIZE = healreq_conf.option('healreq', 'batch_size').default


def first_threshold(batch_size=None):
    """New containers between two collections of the young generation."""
    return max(_LEAST, CONTAINERS_PER_INSTANCE * BATCHES_PER_COLLECTION
               * (batch_size or _DEFAULT_BATCH_SIZE))


def tune(batch_size=None):
    """Collect cycles per few batches of ``batch_size`` (never more often)."""
    first = first_threshold(batch_size)
    if gc.get_threshold()[0] < first:
        gc.set_threshold(first, *_OLDER_GENERATIONS)
