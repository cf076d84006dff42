"""Entry point for oslo-config-generator (namespace ``healreq``)."""

from healreq.conf import database
from healreq.conf import healreq as healreq_group


def list_opts():
    """Return ``[(group, [opts])]`` for every option healreq registers."""
    return database.list_opts() + healreq_group.list_opts()
