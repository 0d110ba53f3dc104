"""XREADGROUP ... CLAIM min-idle-time (Redis 8.4) and XNACK (Redis 8.8).

A CLAIM read of `>` first re-delivers the group's claimable pending entries
(storage/claim.py decides which and in what order: the NACK zone, then owned
entries idle at least min-idle-time, longest idle first), then new entries,
the two sharing COUNT. Every entry of such a reply has four elements: ID,
fields, idle milliseconds before this delivery and the delivery count before
it (0 and 0 for a new entry; -1 as idle for a NACKed one, as XPENDING shows it).

Effects: a claim becomes the XCLAIM that recreates the PEL entry (owner,
absolute delivery time, count), a claimed entry whose stream entry is gone is
dropped as XACK (as XCLAIM and XAUTOCLAIM drop them), new entries as in a
plain XREADGROUP. XNACK becomes `XNACK key group FAIL IDS n id... RETRYCOUNT c
FORCE` per run of equal resulting counts, IDs in their final zone order:
replayed, each lands with its exact count at the zone's tail, as on the primary.
"""

from __future__ import annotations

from contextlib import closing

from protocol.errors import ReplyError, arg_text
from storage.claim import NACK_MODES, claim_order, has_claimable, nack, next_claimable, next_count
from storage.stream import Stream
from storage.stream_id import MAX_ID, format_id, format_ids

from ..command import command
from ..syntax import DECLARED, Arg
from .args import to_int
from .groups import _nogroup, delivery_effect, parse_id_fast, xclaim_effect
from .stream_args import lookup_stream

MIN_IDLE_NOT_INTEGER = "ERR min-idle-time is not an integer"

# COMMAND DOCS: XNACK's arguments with the names redis.io gives them (XREADGROUP's CLAIM history: stream_docs.py).
DECLARED["xnack"] = [
    Arg("key", "key"),
    Arg("group", "string"),
    Arg("mode", "oneof", arguments=[Arg(m.lower(), "pure-token", token=m, display=True) for m in ("SILENT", "FAIL", "FATAL")]),
    Arg("ids", "block", token="IDS", arguments=[Arg("numids", "integer"), Arg("id", "string", flags=["multiple"])]),
    Arg("count", "integer", token="RETRYCOUNT", flags=["optional"]),
    Arg("force", "pure-token", token="FORCE", flags=["optional"], display=True),
]


def parse_min_idle(arg: bytes) -> int:
    """CLAIM's min-idle-time: a non-negative integer of milliseconds."""
    value = to_int(arg, MIN_IDLE_NOT_INTEGER)
    if value < 0:
        raise ReplyError("ERR min-idle-time must be a positive integer")
    return value


def read_claim(
    stream: Stream,
    group,
    consumer,
    group_name: bytes,
    count: int,
    noack: bool,
    min_idle: int,
    now: int,
    key: bytes,
    effects: list,
    caps=None,
) -> list | None:
    """Serve `>` with CLAIM: claimable pending entries, then new ones, sharing count (0: no limit).

    None when there is nothing to deliver (the key is left out of the reply).
    Claimed entries stay pending (owned by the caller) under NOACK too; new ones
    are added to the PEL unless NOACK.
    """
    reply: list = []
    limit = count or None
    with closing(claim_order(group, now, min_idle)) as order:
        for entry_id, pending in order:
            fields = stream.get(entry_id)
            if fields is None:  # trimmed or deleted: not returned, and no longer pending
                group.drop_pending(entry_id)
                effects.append([b"XACK", key, group_name, format_id(entry_id)])
                continue
            idle = now - pending.delivery_time if pending.consumer is not None else -1
            before = pending.delivery_count
            if caps and not caps.admit(format_id(entry_id), fields, _claim_bytes(idle, before)):
                if pending.consumer is not None:  # its timeline record was taken: put it back, unchanged
                    group.retime(entry_id, pending, pending.delivery_time)
                break  # MAXCOUNT/MAXSIZE (Redis 8.10): neither sent nor claimed
            deliver_claimed(group, consumer, key, group_name, entry_id, pending, fields, idle, before, now, effects, reply)
            if len(reply) == limit:
                break  # before the generator takes (consumes) the next one
    room = None if limit is None else limit - len(reply)
    if group.keyshared is not None:  # issue 22: claimed keys move whole, new entries by the KEYSHARED rules
        from .keyshared import claim_read_rest

        return claim_read_rest(stream, group, consumer, group_name, room, now, key, effects, caps, reply)
    if room is None or room > 0:
        new = stream.range(group.last_id + 1, MAX_ID, room)
        if caps and new:
            fitting = 0
            for entry_id, fields in new:
                if not caps.admit(format_id(entry_id), fields, _claim_bytes(0, 0)):
                    break
                fitting += 1
            new = new[:fitting]
        if new:
            delivered = [entry_id for entry_id, _fields in new]
            group.advance_many(stream, delivered)
            wire_ids = format_ids(delivered)
            if not noack:
                group.add_new(delivered, consumer, now)
                effects.append(delivery_effect(key, group_name, consumer.name, wire_ids, now, wire_ids[-1]))
                consumer.active_time = now
            effects.append([b"XGROUP", b"SETID", key, group_name, wire_ids[-1], b"ENTRIESREAD", b"%d" % group.entries_read])
            reply += [[wire_id, fields, 0, 0] for wire_id, (_entry_id, fields) in zip(wire_ids, new, strict=True)]
    return reply or None


def deliver_claimed(group, consumer, key: bytes, group_name: bytes, entry_id: int, pending, fields, idle: int, before: int,
                    now: int, effects: list, reply: list) -> None:
    """A CLAIM read takes a pending entry: the reader owns it, delivered now, count + 1; its XCLAIM effect and
    its reply row [id, fields, idle before, count before] (plain groups here, a KEYSHARED key's other entries too)."""
    pending = group.transfer(entry_id, pending, consumer)
    pending.delivery_count = next_count(before)
    group.retime(entry_id, pending, now)
    consumer.active_time = now
    effects.append(xclaim_effect(key, group_name, group, entry_id, pending))
    reply.append([format_id(entry_id), fields, idle, before])


def _claim_bytes(idle: int, count: int) -> int:
    """What a CLAIM reply entry adds to [id, fields]: its idle time and delivery count (MAXSIZE measures them)."""
    return len(b":%d\r\n" % idle) + len(b":%d\r\n" % count)


def can_serve(stream: Stream, group, min_idle: int, now: int) -> bool:
    """Whether a CLAIM read of `>` would deliver something now (a claimable entry, whatever its payload, or a new one)."""
    return has_claimable(group, now, min_idle) or (len(stream) > 0 and stream.last_valid_id() > group.last_id)


def wake_time(resolved, min_idle: int) -> int | None:
    """When a blocked CLAIM read should look again: the earliest moment an owned entry becomes claimable."""
    times = [t for _key, _stream, group, _start in resolved if (t := next_claimable(group, min_idle)) is not None]
    return min(times) if times else None


# -- XNACK ------------------------------------------------------------------------


class NackRequest:
    """A parsed XNACK: the mode, the IDs in order, RETRYCOUNT and FORCE."""

    __slots__ = ("mode", "ids", "retry_count", "force")

    def __init__(self, argv: list[bytes]) -> None:
        self.mode = argv[3].upper()
        if self.mode not in NACK_MODES:
            raise ReplyError("ERR mode must be SILENT, FAIL, or FATAL")
        self.ids: list[int] | None = None
        self.retry_count: int | None = None
        self.force = False
        argc = len(argv)
        i = 4
        while i < argc:
            option = argv[i].upper()
            more = argc - i - 1
            if option == b"IDS" and more and self.ids is None:
                numids = to_int(argv[i + 1], "ERR numids must be a positive integer")
                if numids <= 0:
                    raise ReplyError("ERR numids must be a positive integer")
                if numids > more - 1:
                    raise ReplyError("ERR number of IDs doesn't match numids")
                self.ids = [parse_id_fast(arg) for arg in argv[i + 2 : i + 2 + numids]]
                i += 2 + numids
                continue
            if option == b"RETRYCOUNT" and more:
                retry_count = to_int(argv[i + 1])
                if retry_count < 0:
                    raise ReplyError("ERR Invalid RETRYCOUNT value, must be >= 0")
                self.retry_count = retry_count
                i += 2
                continue
            if option == b"FORCE":
                self.force = True
                i += 1
                continue
            raise ReplyError(f"ERR Unrecognized XNACK option '{arg_text(argv[i])}'")
        if self.ids is None:
            raise ReplyError("ERR syntax error, expected IDS keyword")


def nack_effects(key: bytes, group_name: bytes, group, touched: list[int], batch: int = 0) -> list[list[bytes]]:
    """The deterministic form of one XNACK: its IDs in final zone order, one command per run of equal counts
    (of at most `batch` IDs if given: the AOF rewrite's)."""
    final = list(dict.fromkeys(reversed(touched)))[::-1]  # an ID NACKed twice sits where its last NACK put it
    effects: list[list[bytes]] = []
    run: list[int] = []
    for entry_id in final:
        if run and (group.pel[run[0]].delivery_count != group.pel[entry_id].delivery_count or len(run) == batch):
            effects.append(_nack_effect(key, group_name, run, group.pel[run[0]].delivery_count))
            run = []
        run.append(entry_id)
    effects.append(_nack_effect(key, group_name, run, group.pel[run[0]].delivery_count))
    return effects


def _nack_effect(key: bytes, group_name: bytes, ids: list[int], delivery_count: int) -> list[bytes]:
    return [b"XNACK", key, group_name, b"FAIL", b"IDS", b"%d" % len(ids), *map(format_id, ids),
            b"RETRYCOUNT", b"%d" % delivery_count, b"FORCE"]  # fmt: skip


@command(
    "xnack", -7, "write fast", keys=(1, 1, 1), group="stream", since="8.8.0",
    summary="Releases pending messages back to the group's PEL without acknowledging them, making them available for re-delivery.",
    complexity="O(1) for each message ID processed.",
)  # fmt: skip
def xnack(ctx, argv):
    """XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE] -> how many IDs were NACKed."""
    request = NackRequest(argv)
    key, group_name = argv[1], argv[2]
    stream = lookup_stream(ctx, key)
    group = stream.groups.get(group_name) if stream is not None else None
    if group is None:
        raise _nogroup(key, group_name)
    ids = request.ids
    if group.keyshared is not None:  # issue 22: a key's pending entries are NACKed together
        from .keyshared import nack_ids

        ids = nack_ids(ctx, stream, group, ids, request.force)
    touched = []
    for entry_id in ids:
        exists = request.force and entry_id not in group.pel and stream.get(entry_id) is not None
        if nack(group, entry_id, request.mode, request.retry_count, exists) is not None:
            touched.append(entry_id)
    if group.keyshared is not None and touched:
        from .keyshared import nacked

        nacked(stream, group, touched)
    if not touched:
        return 0, []
    return len(touched), nack_effects(key, group_name, group, touched)
