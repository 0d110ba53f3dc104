"""Consumer group commands: XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO GROUPS/CONSUMERS.

Semantics and error texts follow Redis 7.4's t_stream.c; where newer Redis
changed a rule (ENTRIESREAD clamped to entries-added) the newest wins.

Effects (see ARCHITECTURE.md): every change is returned as commands that
replay it exactly, with concrete IDs and absolute times:

- a delivery or a claim: `XCLAIM key group consumer 0 id TIME t RETRYCOUNT n
  FORCE JUSTID LASTID last` (the PEL entry, its owner, count and time); the
  entries one XREADGROUP delivers share owner, time and count (1), so they
  go in one XCLAIM with all their IDs;
- a pending entry dropped because its stream entry is gone: `XACK key group id`;
- the group's cursor: `XGROUP SETID key group last-id ENTRIESREAD n`;
- a consumer's existence and times: `XGROUP CREATECONSUMER key group name
  SEENTIME t ACTIVETIME t`. The two trailing options are Millrace's, accepted
  only from loading/replica clients; they pin the times a replayed XCLAIM
  would otherwise set to the replay's clock. They come last in each batch.
"""

from __future__ import annotations

from itertools import islice

from protocol.errors import SYNTAX, WRONGTYPE, ReplyError, arg_text, subcommand_error, wrong_arity
from protocol.reply import NULL_ARRAY, OK, Entries, Map, Raw, Simple
from storage.claim import nacked_count, next_count
from storage.consumer_group import INVALID_ENTRIES_READ, ConsumerGroup, PendingEntry
from storage.lag import exact_entries_read, xinfo_lag
from storage.stream import Stream, expand_rows
from storage.stream_id import MAX_ID, format_id, format_ids, parse_id, parse_strict_id

from ..blocking import Block
from ..command import command, container
from .args import LLONG_MAX, help_reply, read_lookup, to_int
from .read_caps import MAXCOUNT_NOT_POSITIVE, MAXSIZE_NOT_POSITIVE, ReadCaps, check_count, parse_positive
from .stream_args import (
    lookup_stream,
    parse_count,
    parse_interval_end,
    parse_interval_start,
    parse_timeout,
    read_stream,
    streams_keys,
    streams_reply,
)
from .streams import wire_entries

NO_KEY = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."


# -- argument helpers -------------------------------------------------------------


def parse_id_fast(arg: bytes) -> int:
    """parse_strict_id with a fast path for the canonical `ms-seq` form clients send back."""
    ms, dash, seq = arg.partition(b"-")
    if dash and ms.isdigit() and seq.isdigit() and len(ms) < 20 and len(seq) < 20:
        return int(ms) << 64 | int(seq)
    return parse_strict_id(arg)


class DeliveredIds:
    """The wire form -> ID of the entries recently delivered, which XACK gets back as they were sent.

    Only a memo of parse_id_fast for IDs format_id wrote (the same answer,
    without parsing): two generations of at most `size` IDs each, the older
    dropped when the newer fills, so it stays small whatever the PELs hold.
    """

    __slots__ = ("new", "old", "size")

    def __init__(self, size: int = 4096) -> None:
        self.new: dict[bytes, int] = {}
        self.old: dict[bytes, int] = {}
        self.size = size

    def remember(self, wire_ids: list[bytes], entry_ids: list[int]) -> None:
        """Keep one delivery's IDs (not one larger than a generation: its acks are parsed)."""
        if len(wire_ids) > self.size:
            return
        new = self.new
        if len(new) >= self.size:
            self.old = new
            new = self.new = {}
        new.update(zip(wire_ids, entry_ids, strict=True))

    def parse(self, args: list[bytes]) -> list[int]:
        """parse_id_fast of each argument (raising as it does)."""
        ids = list(map(self.new.get, args))
        if not all(ids):  # a miss (None); a 0-0 hit only takes the slower path, which keeps it
            old = self.old.get
            ids = [old(arg) if entry_id is None else entry_id for entry_id, arg in zip(ids, args, strict=True)]
            if None in ids:
                ids = [parse_id_fast(arg) if entry_id is None else entry_id for entry_id, arg in zip(ids, args, strict=True)]
        return ids


_delivered_ids = DeliveredIds()


def _entries_reply(spans, wire_ids: list[bytes]) -> Raw:
    """The entries of these spans (Stream.spans; wire_ids their IDs) as an Entries reply encodes them, the same in RESP2 and RESP3."""
    chunks = [b"*%d\r\n" % len(wire_ids)]
    if len(spans) == 1:
        node, ids, rows, lo, hi = spans[0]
        chunks += wire_entries(ids[lo:hi], node.fields, rows[lo:hi], wire_ids)
    else:
        done = 0
        for node, ids, rows, lo, hi in spans:
            chunks += wire_entries(ids[lo:hi], node.fields, rows[lo:hi], wire_ids[done : done + hi - lo])
            done += hi - lo
    return Raw(b"".join(chunks))


def _int_bytes(value: int) -> bytes:
    return b"%d" % value


def _nogroup(key: bytes, group: bytes, suffix: str = "") -> ReplyError:
    return ReplyError(f"NOGROUP No such key '{arg_text(key)}' or consumer group '{arg_text(group)}'{suffix}")


def _no_such_group(group: bytes, key: bytes) -> ReplyError:
    return ReplyError(f"NOGROUP No such consumer group '{arg_text(group)}' for key name '{arg_text(key)}'")


def _help(name: str, lines: list[str]) -> list[Simple]:
    head = f"{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    return help_reply([head, *lines, "HELP", "    Print this help."])


# -- effects ----------------------------------------------------------------------


def xclaim_effect(key: bytes, group_name: bytes, group: ConsumerGroup, entry_id: int, pending) -> list[bytes]:
    """The XCLAIM that recreates one PEL entry exactly: owner, delivery time and count."""
    return [
        b"XCLAIM", key, group_name, pending.consumer.name, b"0", format_id(entry_id),
        b"TIME", _int_bytes(pending.delivery_time), b"RETRYCOUNT", _int_bytes(pending.delivery_count),
        b"FORCE", b"JUSTID", b"LASTID", format_id(group.last_id),
    ]  # fmt: skip


def delivery_effect(key: bytes, group_name: bytes, consumer_name: bytes, wire_ids: list[bytes], now: int, last_wire: bytes) -> list[bytes]:
    """The one XCLAIM that recreates a read's new PEL entries exactly: all owned by the reader, delivered now, once."""
    return [b"XCLAIM", key, group_name, consumer_name, b"0", *wire_ids, b"TIME", b"%d" % now,
            b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", last_wire]  # fmt: skip


def setid_effect(key: bytes, group_name: bytes, group: ConsumerGroup) -> list[bytes]:
    return [b"XGROUP", b"SETID", key, group_name, format_id(group.last_id), b"ENTRIESREAD", _int_bytes(group.entries_read)]


def consumer_effect(key: bytes, group_name: bytes, consumer) -> list[bytes]:
    """Create-if-missing plus both times: replays a consumer's state exactly."""
    seen = b"%d" % consumer.seen_time
    active = seen if consumer.active_time == consumer.seen_time else b"%d" % consumer.active_time
    return [b"XGROUP", b"CREATECONSUMER", key, group_name, consumer.name, b"SEENTIME", seen, b"ACTIVETIME", active]


# -- XGROUP -----------------------------------------------------------------------

container("xgroup", group="stream", summary="A container for consumer groups commands.", since="5.0.0")


def _xgroup_prologue(ctx, argv: list[bytes], group_must_exist: bool):
    """What Redis checks before any XGROUP subcommand: options, key type, key and group presence."""
    sub = argv[1].lower()
    mkstream = False
    entries_read = INVALID_ENTRIES_READ
    i = 5
    while i < len(argv):
        option = argv[i].upper()
        if sub == b"create" and option == b"MKSTREAM":
            mkstream = True
            i += 1
        elif sub in (b"create", b"setid") and option == b"ENTRIESREAD" and i + 1 < len(argv):
            entries_read = to_int(argv[i + 1])
            if entries_read < 0 and entries_read != INVALID_ENTRIES_READ:
                raise ReplyError("ERR value for ENTRIESREAD must be positive or -1")
            i += 2
        else:
            raise subcommand_error(argv)
    stream = lookup_stream(ctx, argv[2])
    group = None
    if not mkstream:
        if stream is None:
            raise ReplyError(NO_KEY)
        group = stream.groups.get(argv[3])
        if group is None and group_must_exist:
            raise _no_such_group(argv[3], argv[2])
    return stream, group, mkstream, entries_read


@command("xgroup|create", -5, "write denyoom", keys=(2, 2, 1), group="stream", summary="Creates a consumer group.", since="5.0.0")
def xgroup_create(ctx, argv):
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read] [KEYSHARED field] -> OK"""
    argv, keyshared_field = keyshared.split_create_option(argv)
    stream, _group, _mkstream, entries_read = _xgroup_prologue(ctx, argv, False)
    if not 5 <= len(argv) <= 8:
        raise subcommand_error(argv)
    key, name = argv[2], argv[3]
    if argv[4] == b"$":
        last_id = stream.last_id if stream is not None else 0
    else:
        last_id = parse_strict_id(argv[4])
    effect = [b"XGROUP", b"CREATE", key, name]
    if stream is None:
        stream = Stream()
        ctx.db.set(key, stream)
        created_key = True
    else:
        created_key = False
        if name in stream.groups:
            raise ReplyError("BUSYGROUP Consumer Group name already exists")
    group = stream.groups[name] = ConsumerGroup(0)
    if entries_read == INVALID_ENTRIES_READ and ctx.server.config["stream-exact-lag"]:
        entries_read = exact_entries_read(stream, last_id)  # issue 23: where the live count makes it exact
    group.set_id(last_id, entries_read, stream.entries_added)
    effect += [format_id(group.last_id), b"ENTRIESREAD", _int_bytes(group.entries_read)]
    if created_key:
        effect.append(b"MKSTREAM")
    if keyshared_field is not None:
        keyshared.make_keyshared(stream, group, keyshared_field)
        effect += [b"KEYSHARED", keyshared_field]
    return OK, [effect]


@command("xgroup|setid", -5, "write", keys=(2, 2, 1), group="stream", summary="Sets the last-delivered ID of a consumer group.", since="5.0.0")
def xgroup_setid(ctx, argv):
    """XGROUP SETID key group <id | $> [ENTRIESREAD entries-read] -> OK"""
    stream, group, _mkstream, entries_read = _xgroup_prologue(ctx, argv, True)
    if len(argv) not in (5, 7):
        raise subcommand_error(argv)
    last_id = stream.last_id if argv[4] == b"$" else parse_id(argv[4], 0)
    if ctx.loading:
        # An effect states the counter exactly, even one a read pushed past a lowered entries-added.
        group.last_id, group.entries_read = last_id, entries_read
    else:
        if entries_read == INVALID_ENTRIES_READ and ctx.server.config["stream-exact-lag"]:
            entries_read = exact_entries_read(stream, last_id)  # issue 23: where the live count makes it exact
        group.set_id(last_id, entries_read, stream.entries_added)
    return OK, [setid_effect(argv[2], argv[3], group), *keyshared.setid_hook(ctx, argv[2], argv[3], group)]


@command("xgroup|destroy", 4, "write", keys=(2, 2, 1), group="stream", summary="Destroys a consumer group.", since="5.0.0")
def xgroup_destroy(ctx, argv):
    """XGROUP DESTROY key group -> 1 if destroyed, 0 if there was no such group; blocked readers get NOGROUP."""
    stream, group, _mkstream, _entries_read = _xgroup_prologue(ctx, argv, False)
    if group is None:
        return 0, []
    del stream.groups[argv[3]]
    return 1, [[b"XGROUP", b"DESTROY", argv[2], argv[3]]]


@command("xgroup|createconsumer", 5, "write denyoom", keys=(2, 2, 1), group="stream", summary="Creates a consumer in a consumer group.", since="6.2.0",
         loading_max_args=9)  # the effect's SEENTIME/ACTIVETIME pair, from loading clients only
def xgroup_createconsumer(ctx, argv):
    """XGROUP CREATECONSUMER key group consumer -> 1 if created, 0 if it existed.

    From loading/replica clients only, `SEENTIME t ACTIVETIME t` also set the
    consumer's times (the effect that replays a consumer exactly).
    """
    pinned = None
    if len(argv) != 5:  # only loading clients get here with more (Command.loading_max_args)
        if len(argv) != 9:
            raise wrong_arity("xgroup|createconsumer")
        if argv[5].upper() != b"SEENTIME" or argv[7].upper() != b"ACTIVETIME":
            raise ReplyError(SYNTAX)
        pinned = (to_int(argv[6]), to_int(argv[8]))
    _stream, group, _mkstream, _entries_read = _xgroup_prologue(ctx, argv[:5], True)
    consumer, created = group.consumer(argv[4], ctx.server.now)
    if pinned is not None:
        consumer.seen_time, consumer.active_time = pinned
    elif not created:
        return 0, []
    return int(created), [consumer_effect(argv[2], argv[3], consumer)]


@command("xgroup|delconsumer", 5, "write", keys=(2, 2, 1), group="stream", summary="Deletes a consumer from a consumer group.", since="5.0.0")
def xgroup_delconsumer(ctx, argv):
    """XGROUP DELCONSUMER key group consumer -> the number of pending entries the consumer had."""
    stream, group, _mkstream, _entries_read = _xgroup_prologue(ctx, argv, True)
    if group.keyshared is not None:
        return keyshared.delconsumer(ctx, argv, stream, group)
    pending = group.delete_consumer(argv[4])
    if pending is None:
        return 0, []
    return pending, [[b"XGROUP", b"DELCONSUMER", argv[2], argv[3], argv[4]]]


XGROUP_HELP = [
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
]


@command("xgroup|help", 2, "loading stale", group="stream", summary="Returns helpful text about the different subcommands.", since="5.0.0")
def xgroup_help(ctx, argv):
    """XGROUP HELP"""
    return _help("XGROUP", XGROUP_HELP)


# -- XREADGROUP -------------------------------------------------------------------


class ReadGroupRequest:
    """A parsed XREADGROUP: what to read, for whom, how much, how long to wait."""

    __slots__ = ("group", "consumer", "count", "noack", "timeout", "keys", "ids", "claim", "caps")

    def __init__(self, ctx, argv: list[bytes]) -> None:
        argc = len(argv)
        self.noack = False
        self.timeout: int | None = None
        self.claim: int | None = None  # CLAIM min-idle-time (Redis 8.4), see claim.py
        self.caps = ReadCaps()  # MAXCOUNT / MAXSIZE (Redis 8.10), see read_caps.py
        if argc == 9 and argv[1].upper() == b"GROUP" and argv[4].upper() == b"COUNT" and argv[6].upper() == b"STREAMS":
            # The usual shape, `GROUP g c COUNT n STREAMS key id`: what the loop below would make of it.
            self.group, self.consumer = argv[2], argv[3]
            self.count = parse_count(argv[5])
            self.keys = argv[7:8]
            self.ids = argv[8:]
            return
        self.group = self.consumer = None
        self.count = 0
        streams_arg = 0
        i = 1
        while i < argc:
            option = argv[i].upper()
            more = argc - i - 1
            if option == b"BLOCK" and more:
                i += 1
                self.timeout = parse_timeout(argv[i], ctx.server.now)
            elif option == b"COUNT" and more:
                i += 1
                self.count = parse_count(argv[i])
            elif option == b"MAXCOUNT" and more:
                i += 1
                self.caps.maxcount = parse_positive(argv[i], MAXCOUNT_NOT_POSITIVE)
            elif option == b"MAXSIZE" and more:
                i += 1
                self.caps.maxsize = parse_positive(argv[i], MAXSIZE_NOT_POSITIVE)
            elif option == b"STREAMS" and more:
                streams_arg = i + 1
                if (argc - streams_arg) % 2:
                    raise ReplyError("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.")
                break
            elif option == b"GROUP" and more >= 2:
                self.group, self.consumer = argv[i + 1], argv[i + 2]
                i += 2
            elif option == b"NOACK":
                self.noack = True
            elif option == b"CLAIM":
                from .claim import MIN_IDLE_NOT_INTEGER, parse_min_idle  # claim.py imports this module

                if not more:
                    raise ReplyError(MIN_IDLE_NOT_INTEGER)
                i += 1
                self.claim = parse_min_idle(argv[i])
            else:
                raise ReplyError(SYNTAX)
            i += 1
        if not streams_arg:
            raise ReplyError(SYNTAX)
        if self.group is None:
            raise ReplyError("ERR Missing GROUP option for XREADGROUP")
        check_count(self.count, self.caps.maxcount)
        half = (argc - streams_arg) // 2
        self.keys = argv[streams_arg : streams_arg + half]
        self.ids = argv[streams_arg + half :]

    def resolve(self, ctx) -> list[tuple[bytes, Stream, ConsumerGroup, int | None]]:
        """Each key's stream, group and start (None for `>`); raises where Redis would."""
        resolved = []
        for key, arg in zip(self.keys, self.ids, strict=True):
            stream = read_stream(ctx, key)
            group = stream.groups.get(self.group) if stream is not None else None
            if group is None:
                raise _nogroup(key, self.group, " in XREADGROUP with GROUP option")
            if self.noack and group.keyshared is not None:
                raise ReplyError(keyshared.NOACK_REFUSED)
            if arg == b">":
                start = None
            elif arg == b"$" or arg == b"+":
                symbol = arg.decode()
                raise ReplyError(
                    f"ERR The {symbol} ID is meaningless in the context of XREADGROUP: you want to read the history "
                    f"of this consumer by specifying a proper ID, or use the > ID to get new messages. "
                    f"The {symbol} ID would just return an empty result set."
                )
            else:
                start = parse_strict_id(arg)
                if start == MAX_ID:  # Redis's own mark for `>`: given explicitly, it reads as `>`
                    start = None
            resolved.append((key, stream, group, start))
        return resolved


def _has_new(stream: Stream, group: ConsumerGroup, consumer: bytes) -> bool:
    """Whether a live entry lies after the group's last delivered ID (in a KEYSHARED group: one for consumer)."""
    if group.keyshared is not None:
        return keyshared.can_deliver(stream, group, consumer)
    return len(stream) > 0 and stream.last_valid_id() > group.last_id


def _read_group(ctx, request: ReadGroupRequest, resolved, effects: list) -> list:
    """Serve what can be served now; every touched consumer is created/seen as Redis does."""
    now = ctx.server.now
    served = []
    caps = request.caps.fresh() if request.caps else None
    count = request.count
    for key, stream, group, start in resolved:
        consumer, _created = group.consumer(request.consumer, now)
        consumer.seen_time = now
        if caps:
            if caps.spent:  # MAXCOUNT/MAXSIZE reached: the remaining streams are skipped (their consumers still seen)
                effects.append(consumer_effect(key, request.group, consumer))
                continue
            count = caps.count(request.count)
            caps.begin(key)
        if start is not None:
            history = _read_history(stream, group, consumer, start, count, now, key, request.group, effects, caps)
            if history is not None:
                served.append((key, history))
        elif request.claim is not None:
            from .claim import read_claim

            entries = read_claim(stream, group, consumer, request.group, count, request.noack, request.claim, now, key, effects, caps)
            if entries is not None:
                served.append((key, entries))
        elif group.keyshared is not None:
            entries = keyshared.read_new(ctx.loading, stream, group, consumer, key, request.group, count, now, effects, caps)
            if entries is not None:
                served.append((key, entries))
        else:
            entries = _read_new(stream, group, consumer, request.group, count, request.noack, now, key, effects, caps)
            if entries is not None:
                served.append((key, entries))
        effects.append(consumer_effect(key, request.group, consumer))
    return served


def _read_new(stream: Stream, group: ConsumerGroup, consumer, group_name: bytes, count: int, noack: bool, now: int, key: bytes, effects: list, caps: ReadCaps | None = None) -> Entries | None:
    """Deliver entries after the group's last ID (`>`): the group advances, the PEL grows unless NOACK.

    None (and no change) when there is nothing new, i.e. when _has_new() is false, or
    when MAXCOUNT/MAXSIZE (caps) take none of it: entries beyond them are not delivered.
    """
    spans = stream.spans(group.last_id + 1, MAX_ID, count or None)
    if caps and spans:
        fitting = _fit_spans(caps, spans)
        if fitting < sum(hi - lo for _node, _ids, _rows, lo, hi in spans):
            spans = stream.spans(group.last_id + 1, MAX_ID, fitting) if fitting else []
    if not spans:
        return None
    if len(spans) == 1:
        _node, ids, _rows, lo, hi = spans[0]
        delivered = ids[lo:hi]
    else:
        delivered = [entry_id for _node, ids, _rows, lo, hi in spans for entry_id in ids[lo:hi]]
    group.advance_many(stream, delivered)
    wire_ids = format_ids(delivered)
    reply = _entries_reply(spans, wire_ids)
    if not noack:
        group.add_new(delivered, consumer, now)
        _delivered_ids.remember(wire_ids, delivered)
        # Every entry delivered with `>` is pending for this consumer, delivered now, once: one
        # XCLAIM of them all recreates those PEL entries exactly.
        effects.append(delivery_effect(key, group_name, consumer.name, wire_ids, now, wire_ids[-1]))
        consumer.active_time = now
    # setid_effect(), with the new last ID's wire form at hand
    effects.append([b"XGROUP", b"SETID", key, group_name, wire_ids[-1], b"ENTRIESREAD", b"%d" % group.entries_read])
    return reply


def _fit_spans(caps: ReadCaps, spans) -> int:
    """How many of the entries in spans (stream.spans()'s) MAXCOUNT/MAXSIZE take, counted."""
    taken = 0
    for node, ids, rows, lo, hi in spans:
        bodies = expand_rows(node.fields, rows[lo:hi]) if caps.maxsize else [None] * (hi - lo)
        for entry_id, fields in zip(ids[lo:hi], bodies, strict=True):
            if not caps.admit(format_id(entry_id), fields):
                return taken
            taken += 1
    return taken


def _read_history(stream: Stream, group: ConsumerGroup, consumer, after: int, count: int, now: int, key: bytes, group_name: bytes, effects: list, caps: ReadCaps | None = None) -> list | None:
    """Re-deliver the consumer's own pending entries after `after`; deleted ones come back with nil bodies.

    With MAXCOUNT/MAXSIZE (caps) only the entries they take are re-delivered; None when
    they take none of several (the stream is left out, as a skipped one).
    """
    start = after + 1 if after < MAX_ID else 0  # Redis's streamIncrID wraps the last ID to 0-0
    reply = Entries()
    chosen = list(islice(consumer.pel.irange(minimum=start), count or None))
    if caps:
        bodies = [(entry_id, stream.get(entry_id)) for entry_id in chosen]
        taken = caps.fit_more([(format_id(entry_id), fields) for entry_id, fields in bodies])
        if chosen and not taken:
            return None
        chosen = chosen[:taken]
    for entry_id in chosen:
        fields = stream.get(entry_id)
        if fields is None:
            reply.append([format_id(entry_id), NULL_ARRAY])
            continue
        pending = group.own(entry_id, consumer.pel[entry_id])
        pending.delivery_count = next_count(pending.delivery_count)
        group.retime(entry_id, pending, now)
        effects.append(xclaim_effect(key, group_name, group, entry_id, pending))
        reply.append([format_id(entry_id), fields])
    return reply


@command(
    "xreadgroup", -7, "write blocking", keys=streams_keys, group="stream",
    summary="Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.",
    since="5.0.0", complexity="For each stream mentioned: O(M) with M being the number of elements returned.",
)  # fmt: skip
def xreadgroup(ctx, argv):
    """XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...] -> entries per stream, or nil."""
    request = ReadGroupRequest(ctx, argv)
    resolved = request.resolve(ctx)
    ctx.server.keyspace_hits += len(resolved)  # Redis looks each key up again to serve it
    effects: list = []
    if request.timeout is None or any(start is not None or _ready(request, stream, group, ctx.server.now) for _key, stream, group, start in resolved):
        served = _read_group(ctx, request, resolved, effects)
        if served or request.timeout is None or request.claim is None:
            return (streams_reply(ctx, served) if served else NULL_ARRAY), effects
        # CLAIM found only pending entries whose stream entry was gone (now dropped): wait as well
    # Nothing to serve: the consumers are created/seen now, then the client waits.
    now = ctx.server.now
    for key, _stream, group, _start in resolved:
        consumer, _created = group.consumer(request.consumer, now)
        consumer.seen_time = now
        if group.keyshared is not None:
            keyshared.join_for_read(key, request.group, group, request.consumer, effects)
        effects.append(consumer_effect(key, request.group, consumer))

    def attempt():
        """Re-run as Redis 7.4 re-executes a woken XREADGROUP: errors release the client."""
        again = request.resolve(ctx)
        ctx.server.keyspace_hits += len(again)
        now = ctx.server.now
        if not any(_ready(request, stream, group, now) for _key, stream, group, _start in again):
            if request.claim is not None:
                block.wake_at = _claim_wake_time(again, request.claim)
            return None
        retry_effects: list = []
        served = _read_group(ctx, request, again, retry_effects)
        if not served:  # only claimable entries whose payload was gone: dropped, keep waiting
            if retry_effects:
                ctx.server.after_write(ctx.db.id, retry_effects)
            return None
        return streams_reply(ctx, served), retry_effects

    block = Block(list(request.keys), request.timeout, attempt, NULL_ARRAY)
    block.effects = effects
    if request.claim is not None:
        block.wake_at = _claim_wake_time(resolved, request.claim)
    return block


def _ready(request: ReadGroupRequest, stream: Stream, group: ConsumerGroup, now: int) -> bool:
    """Whether a `>` read has something to deliver now: new entries, or with CLAIM claimable ones."""
    if request.claim is None:
        return _has_new(stream, group, request.consumer)
    from .claim import can_serve

    return can_serve(stream, group, request.claim, now)


def _claim_wake_time(resolved, min_idle: int) -> int | None:
    from .claim import wake_time

    return wake_time(resolved, min_idle)


# -- XACK -------------------------------------------------------------------------


@command("xack", -4, "write fast", keys=(1, 1, 1), group="stream", summary="Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", since="5.0.0", complexity="O(1) for each message ID processed.")
def xack(ctx, argv):
    """XACK key group id [id ...] -> how many IDs were pending and are now acknowledged."""
    stream = read_stream(ctx, argv[1])
    group = stream.groups.get(argv[2]) if stream is not None else None
    if group is None:
        return 0, []
    args = argv[3:]
    done = group.ack_many(_delivered_ids.parse(args))
    if all(done):
        return len(args), [[b"XACK", *argv[1:]]]
    acked = [arg for ok, arg in zip(done, args, strict=True) if ok]
    if not acked:
        return 0, []
    return len(acked), [[b"XACK", argv[1], argv[2], *acked]]


# -- XPENDING ---------------------------------------------------------------------


@command("xpending", -3, "readonly", keys=(1, 1, 1), group="stream", summary="Returns the information and entries from a stream consumer group's pending entries list.", since="5.0.0", complexity="O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.")
def xpending(ctx, argv):
    """XPENDING key group [[IDLE min-idle-time] start end count [consumer]] -> summary, or the pending entries."""
    argc = len(argv)
    if argc != 3 and not 6 <= argc <= 9:
        raise ReplyError(SYNTAX)
    consumer_name = None
    min_idle = 0
    if argc >= 6:
        first = 3
        if argv[3].upper() == b"IDLE":
            min_idle = to_int(argv[4])
            if argc < 8:
                raise ReplyError(SYNTAX)
            first += 2
        count = parse_count(argv[first + 2])
        start = parse_interval_start(argv[first])
        end = parse_interval_end(argv[first + 1])
        if first + 3 < argc:
            consumer_name = argv[first + 3]
    stream = read_stream(ctx, argv[1])
    group = stream.groups.get(argv[2]) if stream is not None else None
    if group is None:
        raise _nogroup(argv[1], argv[2])
    if argc == 3:
        pel = group.pel
        if not pel:
            return [0, None, None, NULL_ARRAY]
        owners = [
            [name, _int_bytes(len(consumer.pel))] for name, consumer in sorted(group.consumers.items()) if consumer.pel
        ]
        return [len(pel), format_id(pel.first()), format_id(pel.last()), owners]
    consumer = None
    if consumer_name is not None:
        consumer = group.consumers.get(consumer_name)
        if consumer is None:
            return []
    now = ctx.server.now
    reply = []
    if not count:
        return reply
    for entry_id, pending in group.pel_range(start, end, consumer):
        if pending.consumer is None:  # NACKed: unowned, never delivered since (Redis 8.8 shows idle -1)
            reply.append([format_id(entry_id), b"", -1, pending.delivery_count])
        else:
            idle = now - pending.delivery_time
            if min_idle and idle < min_idle:
                continue
            reply.append([format_id(entry_id), pending.consumer.name, max(idle, 0), pending.delivery_count])
        if len(reply) == count:
            break
    return reply


# -- XCLAIM / XAUTOCLAIM ----------------------------------------------------------


def _entry_reply(stream: Stream, entry_id: int, justid: bool):
    if justid:
        return format_id(entry_id)
    return [format_id(entry_id), stream.get(entry_id)]


@command("xclaim", -6, "write fast", keys=(1, 1, 1), group="stream", summary="Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", since="5.0.0", complexity="O(log N) with N being the number of messages in the PEL of the consumer group.")
def xclaim(ctx, argv):
    """XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]"""
    key, group_name = argv[1], argv[2]
    stream = read_stream(ctx, key)
    group = stream.groups.get(group_name) if stream is not None else None
    if group is None:
        raise _nogroup(key, group_name)
    min_idle = max(to_int(argv[4], "ERR Invalid min-idle-time argument for XCLAIM"), 0)
    ids = []
    j = 5
    while j < len(argv):
        try:
            ids.append(parse_strict_id(argv[j]))
        except ReplyError:
            break
        j += 1
    now = ctx.server.now
    retry_count = -1
    delivery_time = -1
    force = justid = False
    last_id = 0
    while j < len(argv):
        option = argv[j].upper()
        more = len(argv) - 1 - j
        if option == b"FORCE":
            force = True
        elif option == b"JUSTID":
            justid = True
        elif option == b"IDLE" and more:
            j += 1
            delivery_time = now - to_int(argv[j], "ERR Invalid IDLE option argument for XCLAIM")
        elif option == b"TIME" and more:
            j += 1
            delivery_time = to_int(argv[j], "ERR Invalid TIME option argument for XCLAIM")
        elif option == b"RETRYCOUNT" and more:
            j += 1
            retry_count = to_int(argv[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif option == b"LASTID" and more:
            j += 1
            last_id = parse_strict_id(argv[j])
        else:
            raise ReplyError(f"ERR Unrecognized XCLAIM option '{arg_text(argv[j])}'")
        j += 1
    effects: list = []
    if last_id > group.last_id:
        group.last_id = last_id
        effects.append(setid_effect(key, group_name, group))
    if (delivery_time < 0 or delivery_time > now) and not ctx.loading:
        delivery_time = now  # a client's TIME in the future; a replica takes its primary's as it is (clocks differ)
    consumer, _created = group.consumer(argv[3], now)
    consumer.seen_time = now
    reply = []
    pel = group.pel
    for entry_id in ids:
        pending = pel.get(entry_id)
        if stream.get(entry_id) is None:
            if pending is not None:  # the entry is gone: its PEL entry goes too
                group.drop_pending(entry_id)
                effects.append([b"XACK", key, group_name, format_id(entry_id)])
            continue
        if pending is None:
            if not force:
                continue
            pending = pel[entry_id] = PendingEntry(None, now)
            if group.keyshared is not None:
                keyshared.claimed_new(stream, group, entry_id, consumer)
        elif min_idle and pending.consumer is not None and now - pending.delivery_time < min_idle:
            continue  # (a NACKed entry is claimable whatever the idle time asked)
        pending = group.transfer(entry_id, pending, consumer)
        group.retime(entry_id, pending, delivery_time)
        if retry_count >= 0:
            pending.delivery_count = retry_count
        elif not justid:
            pending.delivery_count = next_count(pending.delivery_count)
        reply.append(_entry_reply(stream, entry_id, justid))
        consumer.active_time = now
        effects.append(xclaim_effect(key, group_name, group, entry_id, pending))
    if group.keyshared is not None and not ctx.loading:
        keyshared.pull_siblings(stream, group, consumer, ids, key, group_name, delivery_time, justid, retry_count, reply, effects, _entry_reply)
    effects.append(consumer_effect(key, group_name, consumer))
    return reply, effects


@command("xautoclaim", -6, "write fast", keys=(1, 1, 1), group="stream", summary="Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", since="6.2.0", complexity="O(1) if COUNT is small.")
def xautoclaim(ctx, argv):
    """XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID] -> [cursor, claimed, deleted IDs]"""
    key, group_name = argv[1], argv[2]
    stream = read_lookup(ctx, key)  # looked up first (a hit or a miss), its type checked after the arguments
    min_idle = max(to_int(argv[4], "ERR Invalid min-idle-time argument for XAUTOCLAIM"), 0)
    start = parse_interval_start(argv[5])
    count = 100
    justid = False
    j = 6
    while j < len(argv):
        option = argv[j].upper()
        if option == b"COUNT" and len(argv) - 1 - j:
            try:
                count = to_int(argv[j + 1], "ERR COUNT must be > 0")
            except ReplyError:
                raise ReplyError("ERR COUNT must be > 0")
            if not 1 <= count <= LLONG_MAX // 16:
                raise ReplyError("ERR COUNT must be > 0")
            j += 1
        elif option == b"JUSTID":
            justid = True
        else:
            raise ReplyError(SYNTAX)
        j += 1
    if stream is not None and type(stream) is not Stream:
        raise ReplyError(WRONGTYPE)
    group = stream.groups.get(group_name) if stream is not None else None
    if group is None:
        raise _nogroup(key, group_name)
    now = ctx.server.now
    consumer, _created = group.consumer(argv[3], now)
    consumer.seen_time = now
    attempts = count * 10
    candidates = group.autoclaim_candidates(start, attempts + 1)
    claimed = []
    deleted = []
    effects: list = []
    examined = 0
    for entry_id in candidates:
        if not count or examined == attempts:
            break
        examined += 1
        pending = group.pel[entry_id]
        if stream.get(entry_id) is None:
            group.drop_pending(entry_id)
            effects.append([b"XACK", key, group_name, format_id(entry_id)])
            deleted.append(format_id(entry_id))
            count -= 1
            continue
        if min_idle and pending.consumer is not None and now - pending.delivery_time < min_idle:
            continue
        pending = group.transfer(entry_id, pending, consumer)
        group.retime(entry_id, pending, now)
        if not justid:
            pending.delivery_count = next_count(pending.delivery_count)
        claimed.append(_entry_reply(stream, entry_id, justid))
        count -= 1
        consumer.active_time = now
        effects.append(xclaim_effect(key, group_name, group, entry_id, pending))
    cursor = candidates[examined] if examined < len(candidates) else 0
    if group.keyshared is not None:
        keyshared.pull_siblings(stream, group, consumer, candidates[:examined], key, group_name, now, justid, -1, claimed, effects, _entry_reply, deleted)
    effects.append(consumer_effect(key, group_name, consumer))
    return [format_id(cursor), claimed, deleted], effects


# -- XINFO GROUPS / CONSUMERS -------------------------------------------------------

def _xinfo_stream(ctx, key: bytes) -> Stream:
    stream = read_stream(ctx, key)
    if stream is None:
        raise ReplyError("ERR no such key")
    return stream


@command("xinfo|groups", 3, "readonly", keys=(2, 2, 1), group="stream", summary="Returns a list of the consumer groups of a stream.", since="5.0.0")
def xinfo_groups(ctx, argv):
    """XINFO GROUPS key -> per group: name, consumers, pending, last-delivered-id, entries-read, lag."""
    stream = _xinfo_stream(ctx, argv[2])
    exact = ctx.server.config["stream-exact-lag"]
    reply = []
    retained = stream.retention is not None and stream.retention.policy is not None
    for name, group in sorted(stream.groups.items()):
        entries_read, group_lag = xinfo_lag(stream, group, exact)
        info = Map(
            {
                b"name": name,
                b"consumers": len(group.consumers),
                b"pending": len(group.pel),
                b"last-delivered-id": format_id(group.last_id),
                b"entries-read": entries_read,
                b"lag": group_lag,
            }
        )
        if retained:  # a consumption-based retention policy: the group's role in it
            from .retention import group_fields

            info.update(group_fields(stream, name, group))
        if group.keyshared is not None:
            keyshared.group_info(stream, group, info, exact)
        reply.append(info)
    return reply


@command("xinfo|consumers", 4, "readonly", keys=(2, 2, 1), group="stream", summary="Returns a list of the consumers in a consumer group.", since="5.0.0")
def xinfo_consumers(ctx, argv):
    """XINFO CONSUMERS key group -> per consumer: name, pending, idle (since seen), inactive (since active, or -1)."""
    stream = _xinfo_stream(ctx, argv[2])
    group = stream.groups.get(argv[3])
    if group is None:
        raise _no_such_group(argv[3], argv[2])
    now = ctx.server.now
    reply = []
    for name, consumer in sorted(group.consumers.items()):
        active = consumer.active_time
        fields = Map(
            {
                b"name": name,
                b"pending": len(consumer.pel),
                b"idle": max(now - consumer.seen_time, 0),
                b"inactive": now - active if active != -1 else -1,
            }
        )
        if group.keyshared is not None:
            keyshared.consumer_info(group, name, fields)
        reply.append(fields)
    return reply


def full_groups(stream: Stream, count: int, exact: bool = False) -> list[Map]:
    """XINFO STREAM FULL's `groups` section: each group with its PEL and consumers (count 0 = all)."""
    limit = count or None
    reply = []
    for name, group in sorted(stream.groups.items()):
        entries_read, group_lag = xinfo_lag(stream, group, exact)
        if group.keyshared is not None:  # its deferred entries are read by nobody yet
            entries_read, group_lag = keyshared.lag_fields(stream, group, entries_read, group_lag, exact)
        pending = [
            [format_id(entry_id), entry.consumer.name if entry.consumer is not None else b"", entry.delivery_time, entry.delivery_count]
            for entry_id, entry in islice(group.pel.items(), limit)
        ]
        consumers = []
        for consumer_name, consumer in sorted(group.consumers.items()):
            consumers.append(
                Map(
                    {
                        b"name": consumer_name,
                        b"seen-time": consumer.seen_time,
                        b"active-time": consumer.active_time,
                        b"pel-count": len(consumer.pel),
                        b"pending": [
                            [format_id(entry_id), entry.delivery_time, entry.delivery_count]
                            for entry_id, entry in islice(consumer.pel.items(), limit)
                        ],
                    }
                )
            )
        reply.append(
            Map(
                {
                    b"name": name,
                    b"last-delivered-id": format_id(group.last_id),
                    b"entries-read": entries_read,
                    b"lag": group_lag,
                    b"pel-count": len(group.pel),
                    b"pending": pending,
                    b"consumers": consumers,
                    b"nacked-count": nacked_count(group),  # Redis 8.8; after consumers, as redis.io lists it
                }
            )
        )
    return reply


# KEYSHARED groups (issue 22) hook into the handlers above; imported last: its XGROUP subcommands need the container.
from . import keyshared  # noqa: E402

__all__ = ["full_groups", "parse_strict_id"]
