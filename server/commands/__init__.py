"""Command handlers, one module per Redis command group; importing registers them."""

from . import client, connection, groups, introspection, keyspace, memory, server, streams, strings, transactions  # noqa: F401
