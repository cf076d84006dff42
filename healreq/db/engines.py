"""Database engines for the API database and each cell database."""

from oslo_db.sqlalchemy import engines


def create_engine(url):
    """Create an engine with oslo.db's settings for ``url``.

    The connection is not tried here (``max_retries=0``): an unreachable
    cell surfaces as a DBConnectionError on first use, so that the caller
    can report it and carry on with the other cells instead of waiting
    through oslo.db's retry loop.
    """
    return engines.create_engine(url, max_retries=0, max_pool_size=2,
                                 max_overflow=0)
