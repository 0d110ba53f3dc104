"""Command handlers, one module per Redis command group; importing registers them."""

from . import client, connection, introspection, keyspace, server, strings, transactions  # noqa: F401
