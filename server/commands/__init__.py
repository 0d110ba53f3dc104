"""Command handlers, one module per Redis command group; importing registers them."""

from . import (  # noqa: F401
    acl,
    claim,
    client,
    connection,
    groups,
    idmp,
    introspection,
    keyspace,
    lag,
    latency,
    memory,
    persistence,
    pubsub,
    replication,
    server,
    stream_docs,
    stream_refs,
    streams,
    strings,
    transactions,
)
