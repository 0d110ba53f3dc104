"""Command handlers, one module per Redis command group; importing registers them."""

from . import acl, client, connection, groups, introspection, keyspace, memory, server, streams, strings, transactions  # noqa: F401
