"""XGROUPLAG and XBACKLOG: exact lag and backlog analysis (issue 23; Pulsar PIP-187, Redis's lag PR).

XGROUPLAG key [group ...] -> per group a map: name, consumers,
last-delivered-id, entries-read, lag, pending, backlog, oldest-undelivered-ms,
oldest-pending-idle-ms, lag-status. `lag` is exact (storage/lag.py),
`lag-status` is Burrow's verdict over the group's window (server/lag_watch.py).

XBACKLOG key group [FROM id | FROM ACKFLOOR] [COUNT n] [TIMEOUT ms]
[CURSOR c] [WHERE field EQ value | WHERE field MATCH glob [NOCASE] |
WHERE field EXISTS] ... -> a map of counts over at most COUNT positions of
the group's backlog (storage/backlog.py), stopping after TIMEOUT ms, with a
SCAN-style cursor. Both are read-only and propagate nothing.
"""

from __future__ import annotations

import time

from protocol.errors import SYNTAX, ReplyError, arg_text
from protocol.reply import Map
from storage.backlog import Filter, ack_floor, scan
from storage.consumer_group import INVALID_ENTRIES_READ
from storage.lag import exact_lag, first_undelivered_id, group_entries_read, held_back
from storage.stream_id import MAX_ID, format_id, parse_id, parse_strict_id

from ..command import command
from ..lag_watch import lag_watch
from ..syntax import DECLARED, Arg
from .args import to_int
from .stream_args import read_stream

DEFAULT_COUNT = 10_000  # Pulsar's subscriptionBacklogScanMaxEntries
DEFAULT_TIMEOUT_MS = 5  # a few ms: the event loop is shared (Pulsar's 2 minutes would freeze it)
MAX_TIMEOUT_MS = 1000
MAX_FILTERS = 64


def _stream(ctx, key: bytes):
    stream = read_stream(ctx, key)
    if stream is None:
        raise ReplyError("ERR no such key")
    return stream


def _nogroup(key: bytes, name: bytes) -> ReplyError:
    return ReplyError(f"NOGROUP No such key '{arg_text(key)}' or consumer group '{arg_text(name)}'")


def group_lag_map(ctx, key: bytes, name: bytes, stream, group) -> Map:
    """One group's XGROUPLAG map; samples the group into its Burrow window first."""
    now = ctx.server.now
    window = lag_watch(ctx.server).observe(ctx.db.id, key, name, stream, group, now)
    lag = exact_lag(stream, group)
    pending = len(group.pel)
    entries_read = group_entries_read(stream, group)
    if entries_read != INVALID_ENTRIES_READ:
        entries_read = max(entries_read - held_back(stream, group), 0)  # as XINFO GROUPS: held back is not read
    undelivered = first_undelivered_id(stream, group)
    oldest_undelivered = max(now - (undelivered >> 64), 0) if undelivered is not None else 0
    first = group.pel[group.pel.first()] if pending else None
    if first is None:
        oldest_idle = 0
    elif first.consumer is None:  # NACKed (XNACK): no delivery time, -1 as XPENDING shows it
        oldest_idle = -1
    else:
        oldest_idle = max(now - first.delivery_time, 0)
    return Map(
        {
            b"name": name,
            b"consumers": len(group.consumers),
            b"last-delivered-id": format_id(group.last_id),
            b"entries-read": entries_read if entries_read != INVALID_ENTRIES_READ else None,
            b"lag": lag,
            b"pending": pending,
            b"backlog": lag + pending,
            b"oldest-undelivered-ms": oldest_undelivered,
            b"oldest-pending-idle-ms": oldest_idle,
            b"lag-status": window.status(lag + pending, now).encode(),
        }
    )


@command("xgrouplag", -2, "readonly", keys=(1, 1, 1), group="stream", summary="Returns the exact lag, backlog and Burrow lag-status of consumer groups.",
         since="7.4.0", complexity="O(G log N) for G groups and N nodes")
def xgrouplag(ctx, argv):
    """XGROUPLAG key [group ...] -> one map per group (all groups, by name, when none is named)."""
    key = argv[1]
    stream = _stream(ctx, key)
    if len(argv) > 2:
        names = argv[2:]
        for name in names:
            if name not in stream.groups:
                raise _nogroup(key, name)
    else:
        names = sorted(stream.groups)
    return [group_lag_map(ctx, key, name, stream, stream.groups[name]) for name in names]


def _positive(arg: bytes, what: str, high: int) -> int:
    value = to_int(arg, f"ERR {what} is not an integer or out of range")
    if not 1 <= value <= high:
        raise ReplyError(f"ERR {what} must be between 1 and {high}")
    return value


def parse_backlog(argv: list[bytes]):
    """XBACKLOG's options: (from, cursor, count, timeout_ms, filters); from None means the ack floor."""
    start = None
    cursor = None
    count = DEFAULT_COUNT
    timeout_ms = DEFAULT_TIMEOUT_MS
    filters: list[Filter] = []
    i = 3
    n = len(argv)
    while i < n:
        option = argv[i].upper()
        if option == b"FROM" and i + 1 < n:
            start = None if argv[i + 1].upper() == b"ACKFLOOR" else parse_id(argv[i + 1], 0)
            i += 2
        elif option == b"COUNT" and i + 1 < n:
            count = _positive(argv[i + 1], "COUNT", 2**63 - 1)
            i += 2
        elif option == b"TIMEOUT" and i + 1 < n:
            timeout_ms = _positive(argv[i + 1], "TIMEOUT", MAX_TIMEOUT_MS)
            i += 2
        elif option == b"CURSOR" and i + 1 < n:
            cursor = 0 if argv[i + 1] == b"0" else parse_strict_id(argv[i + 1])
            i += 2
        elif option == b"WHERE" and i + 2 < n:
            name, op = argv[i + 1], argv[i + 2].upper()
            if op == b"EXISTS":
                filters.append(Filter.make(name, "exists"))
                i += 3
            elif op in (b"EQ", b"MATCH") and i + 3 < n:
                nocase = op == b"MATCH" and i + 4 < n and argv[i + 4].upper() == b"NOCASE"
                filters.append(Filter.make(name, op.decode().lower(), argv[i + 3], nocase))
                i += 5 if nocase else 4
            else:
                raise ReplyError(SYNTAX)
            if len(filters) > MAX_FILTERS:
                raise ReplyError(f"ERR too many WHERE filters (at most {MAX_FILTERS})")
        else:
            raise ReplyError(SYNTAX)
    if cursor and start is not None:
        raise ReplyError("ERR FROM and a non-zero CURSOR cannot be used together")
    return start, cursor, count, timeout_ms, filters


@command("xbacklog", -3, "readonly", keys=(1, 1, 1), group="stream", summary="Scans what a consumer group still has to process, with filters, in bounded steps.",
         since="7.4.0", complexity="O(COUNT) per call")
def xbacklog(ctx, argv):
    """XBACKLOG key group [FROM id|ACKFLOOR] [COUNT count] [TIMEOUT milliseconds] [CURSOR cursor] [WHERE field EQ value|MATCH pattern [NOCASE]|EXISTS ...] -> a map.

    Each WHERE adds a filter; they are AND-ed (COMMAND DOCS: the tree declared below).
    """
    began = time.perf_counter()
    start, cursor, count, timeout_ms, filters = parse_backlog(argv)
    key, name = argv[1], argv[2]
    stream = _stream(ctx, key)
    group = stream.groups.get(name)
    if group is None:
        raise _nogroup(key, name)
    if cursor:
        if cursor >= MAX_ID:
            raise ReplyError("ERR invalid cursor")
        begin = cursor + 1
    elif start is not None:
        begin = start
    else:
        begin = ack_floor(group)
    deadline = began + timeout_ms / 1000
    result = scan(stream, group, begin, count, lambda: time.perf_counter() > deadline, filters)
    return Map(
        {
            b"entries": result.entries,
            b"accepted": result.accepted,
            b"rejected": result.rejected,
            b"missing-field": result.missing_field,
            b"pending": result.pending,
            b"deleted-pending": result.deleted_pending,
            b"first-id": format_id(result.first_id) if result.first_id is not None else None,
            b"last-id": format_id(result.last_id) if result.last_id is not None else None,
            b"aborted": int(result.aborted),
            b"abort-reason": result.abort_reason.encode(),
            b"cursor": format_id(result.cursor) if result.aborted else b"0",
            b"elapsed-ms": round((time.perf_counter() - began) * 1000, 3),
        }
    )


# COMMAND DOCS argument trees (the syntax-line parser cannot express repeated WHERE blocks).
DECLARED["xgrouplag"] = [Arg("key", "key"), Arg("group", "string", flags=["optional", "multiple"])]
DECLARED["xbacklog"] = [
    Arg("key", "key"),
    Arg("group", "string"),
    Arg("start", "oneof", token="FROM", flags=["optional"], arguments=[
        Arg("id", "string"), Arg("ackfloor", "pure-token", token="ACKFLOOR"),
    ]),
    Arg("count", "integer", token="COUNT", flags=["optional"]),
    Arg("milliseconds", "integer", token="TIMEOUT", flags=["optional"]),
    Arg("cursor", "string", token="CURSOR", flags=["optional"]),
    Arg("filter", "block", token="WHERE", flags=["optional", "multiple"], arguments=[
        Arg("field", "string"),
        Arg("condition", "oneof", arguments=[
            Arg("value", "string", token="EQ"),
            Arg("match", "block", arguments=[
                Arg("pattern", "pattern", token="MATCH"), Arg("nocase", "pure-token", token="NOCASE", flags=["optional"]),
            ]),
            Arg("exists", "pure-token", token="EXISTS"),
        ]),
    ]),
]  # fmt: skip
