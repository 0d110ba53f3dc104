"""Generic key commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, EXPIRE and friends."""

from __future__ import annotations

from protocol.reply import OK, Simple
from storage.keyspace import type_name

from ..command import command


@command("del", -2, "write", keys=(1, -1, 1), group="generic", summary="Deletes one or more keys.")
def del_(ctx, argv):
    db, now = ctx.db, ctx.server.now
    removed = [key for key in argv[1:] if db.delete(key, now)]
    return len(removed), ([[b"DEL", *removed]] if removed else [])


@command("type", 2, "readonly fast", keys=(1, 1, 1), group="generic", summary="Determines the type of value stored at a key.")
def type_(ctx, argv):
    value = ctx.db.lookup(argv[1], ctx.server.now)
    return Simple(type_name(value).encode()) if value is not None else Simple(b"none")


@command("flushall", -1, "write", group="server", summary="Removes all keys from all databases.")
def flushall(ctx, argv):
    """FLUSHALL [ASYNC|SYNC]"""
    ctx.server.keyspace.flushall()
    return OK, [[b"FLUSHALL"]]


@command("flushdb", -1, "write", group="server", summary="Remove all keys from the current database.")
def flushdb(ctx, argv):
    """FLUSHDB [ASYNC|SYNC]"""
    ctx.db.flush()
    return OK, [[b"FLUSHDB"]]
