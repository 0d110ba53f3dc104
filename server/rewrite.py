"""The keyspace as commands: an AOF base for `aof-use-rdb-preamble no`.

Redis's rewriteAppendOnlyFileRio: each key becomes the commands that rebuild
it, in the same effect forms the server propagates (so the loader needs no
other ones): strings as SET with PXAT, streams as XADD per entry then XSETID
with every counter, each group as XGROUP CREATE with ENTRIESREAD, its PEL as
XCLAIM with absolute TIME and RETRYCOUNT (its NACK zone as XNACK ... FORCE),
its consumers with their times; a KEYSHARED group adds its SETCONFIG, its ring
members as XGROUP JOIN and its deferred entries as XGROUP DEFER.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from persistence.aof import encode
from persistence.snapshot import fsync_dir
from storage.claim import zone
from storage.stream import Stream
from storage.stream_id import format_id

from .commands.claim import nack_effects
from .commands.groups import consumer_effect, xclaim_effect
from .commands.idmp import rewrite_commands as idmp_rewrite
from .commands.keyshared import rewrite_deferred as keyshared_deferred
from .commands.keyshared import rewrite_setup as keyshared_setup
from .retention import retention_commands


def key_commands(key: bytes, value: object, expire: int | None) -> Iterator[list[bytes]]:
    """The commands that rebuild one key exactly as it is."""
    if type(value) is bytes:
        yield [b"SET", key, value] + ([b"PXAT", b"%d" % expire] if expire is not None else [])
        return
    stream: Stream = value
    if stream.length:
        for entry_id, fields in stream.range(0, (1 << 128) - 1):
            yield [b"XADD", key, format_id(entry_id), *fields]
    else:  # an empty stream still exists: create it, then drop the placeholder entry
        yield [b"XADD", key, b"MAXLEN", b"0", format_id(max(stream.last_id, 1)), b"x", b"y"]
    yield [
        b"XSETID", key, format_id(stream.last_id), b"ENTRIESADDED", b"%d" % stream.entries_added,
        b"MAXDELETEDID", format_id(stream.max_deleted_entry_id),
    ]  # fmt: skip
    yield from idmp_rewrite(key, stream)
    for name, group in stream.groups.items():
        yield [b"XGROUP", b"CREATE", key, name, format_id(group.last_id), b"ENTRIESREAD", b"%d" % group.entries_read]
        if group.keyshared is not None:  # configuration and ring members in join order (issue 22)
            yield from keyshared_setup(key, name, group)
        for entry_id, pending in group.pel.items():
            if pending.consumer is not None:
                yield xclaim_effect(key, name, group, entry_id, pending)
        if group.keyshared is not None:
            yield from keyshared_deferred(key, name, group)
        if group.nacked:  # the NACK zone, in its order (Redis emits the same XNACK ... FORCE batches)
            yield from nack_effects(key, name, group, zone(group), batch=64)
        for consumer in group.consumers.values():
            yield consumer_effect(key, name, consumer)
    if stream.retention is not None:
        yield from retention_commands(key, stream)
    if expire is not None:
        yield [b"PEXPIREAT", key, b"%d" % expire]


def keyspace_commands(keyspace) -> Iterator[list[bytes]]:
    for db in keyspace.dbs:
        if not db.data:
            continue
        yield [b"SELECT", b"%d" % db.id]
        expires = db.expires
        for key, value in db.data.items():
            yield from key_commands(key, value, expires.get(key))


def write_command_base(path: str, keyspace) -> None:
    """Write the commands to path atomically (temp file, fsync, rename, directory fsync)."""
    temp = f"{path}.tmp"
    with open(temp, "wb") as handle:
        chunk: list[bytes] = []
        for argv in keyspace_commands(keyspace):
            chunk.append(encode(argv))
            if len(chunk) >= 4096:
                handle.write(b"".join(chunk))
                chunk = []
        handle.write(b"".join(chunk))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
