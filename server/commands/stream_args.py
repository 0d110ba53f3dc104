"""Arguments and lookups shared by the stream and the consumer-group commands."""

from __future__ import annotations

from protocol.encoder import encode3
from protocol.errors import ReplyError
from protocol.reply import Map, Raw
from storage.stream import Stream
from storage.stream_id import MAX_ID, U64_MAX, parse_id, parse_strict_id

from ..command import container
from .args import LLONG_MAX, read_lookup, to_int

# XINFO's subcommands live in streams.py (STREAM, HELP) and groups.py (GROUPS, CONSUMERS).
container("xinfo", group="stream", summary="A container for stream introspection commands.", since="5.0.0")


def lookup_stream(ctx, key: bytes) -> Stream | None:
    """The stream at key, None if absent; WRONGTYPE for another type."""
    return ctx.db.lookup_type(key, ctx.server.now, Stream)


def read_stream(ctx, key: bytes) -> Stream | None:
    """lookup_stream for the commands Redis looks their key up with lookupKeyRead (a keyspace hit or miss)."""
    return read_lookup(ctx, key, Stream)


_COUNTS = {b"%d" % n: n for n in range(1, 1001)}  # the usual COUNT arguments, read without to_int


def parse_count(arg: bytes) -> int:
    """A COUNT argument as the stream commands take it: an integer, negatives meaning 0."""
    return _COUNTS.get(arg) or max(to_int(arg), 0)


def streams_keys(argv: list[bytes]) -> list[int]:
    """Key positions of XREAD/XREADGROUP: the first half of what follows STREAMS."""
    for index in range(1, len(argv)):
        if argv[index].lower() == b"streams":
            first = index + 1
            return list(range(first, first + (len(argv) - first) // 2))
    return []


def streams_reply(ctx, served: list) -> list | Map | Raw:
    """XREAD/XREADGROUP's reply: one [key, entries] per stream served, a map in RESP3.

    A key named twice is served twice and appears twice, in RESP3 as well
    (Redis writes the map's pairs as it serves them, repeats included); a
    dict cannot hold a repeated key, so that rare map is encoded here.
    """
    if ctx.resp != 3:
        return [[key, entries] for key, entries in served]
    if len({key for key, _ in served}) == len(served):
        return Map(served)
    out = [b"%%%d\r\n" % len(served)]
    for key, entries in served:
        encode3(key, out)
        encode3(entries, out)
    return Raw(b"".join(out))


def parse_timeout(arg: bytes, now: int) -> int:
    """BLOCK milliseconds (0 = for ever), as Redis's getTimeoutFromObjectOrReply checks them."""
    timeout = to_int(arg, "ERR timeout is not an integer or out of range")
    if timeout < 0:
        raise ReplyError("ERR timeout is negative")
    if timeout > 0 and timeout > LLONG_MAX - now:
        raise ReplyError("ERR timeout is out of range")
    return timeout


def parse_interval_start(arg: bytes) -> int:
    """A range start: an ID (seq defaults to 0), `-`, `+`, or `(id` meaning the ID after it."""
    if len(arg) > 1 and arg[:1] == b"(":
        entry_id = parse_strict_id(arg[1:], 0)
        if entry_id == MAX_ID:
            raise ReplyError("ERR invalid start ID for the interval")
        return entry_id + 1
    return parse_id(arg, 0)


def parse_interval_end(arg: bytes) -> int:
    """A range end: an ID (seq defaults to the maximum), `-`, `+`, or `(id` meaning the ID before it."""
    if len(arg) > 1 and arg[:1] == b"(":
        entry_id = parse_strict_id(arg[1:], U64_MAX)
        if entry_id == 0:
            raise ReplyError("ERR invalid end ID for the interval")
        return entry_id - 1
    return parse_id(arg, U64_MAX)
