"""Configuration options, one module per option group."""

from healreq.conf import database
from healreq.conf import healreq as healreq_group


def register_opts(conf):
    """Register every option healreq reads on ``conf``."""
    database.register_opts(conf)
    healreq_group.register_opts(conf)
