"""Command handlers, one module per Redis command group; importing registers them."""

from . import connection, keyspace, server, strings, transactions  # noqa: F401
