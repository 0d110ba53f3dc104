"""Stream commands: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID, XREAD, XINFO STREAM/HELP.

Parsing follows t_stream.c so that errors come out in Redis's order and words.
Writes return effects that reproduce their outcome exactly: XADD with the ID
it generated and, when it trimmed, `MAXLEN = <resulting length>`; XTRIM as
`MAXLEN = <resulting length>`; XDEL with the IDs actually removed; XSETID with
explicit ENTRIESADDED and MAXDELETEDID.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

from hiredis import pack_command

from protocol.errors import SYNTAX, ReplyError, subcommand_error, wrong_arity
from protocol.reply import NULL_ARRAY, Entries, Map, Raw, Simple
from server.blocking import Block
from storage.refs import KEEPREF, POLICIES, TrimOutcome
from storage.refs import trim as policy_trim
from storage.stream import Node, Stream, expand_rows
from storage.stream_id import MAX_ID, SEQ_MASK, U64_MAX, format_id, parse_strict_id, parse_xadd_id

from ..command import command
from .args import help_reply, to_int
from .idmp import ONLY_AUTO_IDS, IdempotentAdd, info_fields, parse_idmp, xadd_idempotent, xadd_recorded
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
from .stream_refs import trim_effects

NO_SUCH_KEY = "ERR no such key"


def entries_reply(entries: list[tuple[int, list[bytes]]]) -> list:
    """[[id, [field, value, ...]], ...] as Redis emits a range."""
    return Entries([[b"%d-%d" % (entry_id >> 64, entry_id & SEQ_MASK), fields] for entry_id, fields in entries])


# -- XRANGE / XREVRANGE replies, pre-encoded ----------------------------------------
#
# A range reply is the same RESP in both protocol versions (see protocol.reply.Entries),
# so XRANGE answers with those bytes (Raw) directly. Sealed nodes only change by being
# repacked, so the wire form of their entries is kept per node (filled as entries are
# read, validated against node.packed) in a small LRU: reading the same entries again,
# the usual XRANGE pattern, costs a slice per node.

_WIRE: OrderedDict[Node, tuple[bytes, list[bytes | None]]] = OrderedDict()
_WIRE_MAX = 32


def wire_entries(ids: list[int], fields: tuple[bytes, ...], rows: list[list], wire_ids: list[bytes] | None = None) -> list[bytes]:
    """Entries of one node as the encoder writes them: *2, the ID as a bulk string, the field array.

    wire_ids: the IDs' wire form when the caller has it already (XREADGROUP).
    """
    if wire_ids is None:
        wire_ids = [b"%d-%d" % (entry_id >> 64, entry_id & SEQ_MASK) for entry_id in ids]
    out = []
    if len(fields) == 2:  # the usual shape, in one formatting step per entry
        f0, f1 = fields
        head0, head1 = b"*4\r\n$%d\r\n%s\r\n" % (len(f0), f0), b"$%d\r\n%s\r\n" % (len(f1), f1)
        for wire_id, row in zip(wire_ids, rows, strict=True):
            v0 = row[0]
            if v0 is not None:
                v1 = row[1]
                out.append(b"*2\r\n$%d\r\n%s\r\n%s$%d\r\n%s\r\n%s$%d\r\n%s\r\n" % (len(wire_id), wire_id, head0, len(v0), v0, head1, len(v1), v1))
            else:
                out.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(wire_id), wire_id, pack_command(tuple(row[1:]))))
        return out
    for wire_id, flat in zip(wire_ids, expand_rows(fields, rows), strict=True):
        out.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(wire_id), wire_id, pack_command(tuple(flat))))
    return out


def range_reply(stream: Stream, start: int, end: int, count: int | None, rev: bool) -> Raw:
    """entries_reply(stream.range(...)) already encoded, from the per-node cache where it can."""
    chunks = [b""]
    total = 0
    for node, ids, rows, lo, hi in stream.spans(start, end, count, rev):
        packed = node.packed
        if packed is None:  # the open tail node: its entries still change
            part = wire_entries(ids[lo:hi], node.fields, rows[lo:hi])
        else:
            cached = _WIRE.get(node)
            if cached is None or cached[0] is not packed:
                cached = _WIRE[node] = (packed, [None] * len(ids))
                if len(_WIRE) > _WIRE_MAX:
                    _WIRE.popitem(last=False)
            else:
                _WIRE.move_to_end(node)
            wire = cached[1]
            part = wire[lo:hi]
            if None in part:
                wire[lo:hi] = part = wire_entries(ids[lo:hi], node.fields, rows[lo:hi])
        if rev:
            part.reverse()
        chunks += part
        total += hi - lo
    chunks[0] = b"*%d\r\n" % total
    return Raw(b"".join(chunks))


# -- XADD / XTRIM arguments --------------------------------------------------------


class TrimArgs:
    """streamAddTrimArgs: the trimming options of XADD and XTRIM, plus XADD's ID."""

    __slots__ = ("strategy", "approx", "limit", "maxlen", "minid", "id_pos", "ms", "seq", "id_given", "nomkstream", "policy", "idmp_pid", "idmp_iid")

    def __init__(self) -> None:
        self.strategy: bytes | None = None  # b"maxlen" or b"minid"
        self.approx = False
        self.limit = 0
        self.maxlen = 0
        self.minid = 0
        self.id_pos = 0
        self.ms: int | None = None
        self.seq: int | None = None
        self.id_given = False
        self.nomkstream = False
        self.policy = KEEPREF  # KEEPREF | DELREF | ACKED (Redis 8.2): see storage/refs.py
        self.idmp_pid: bytes | None = None  # IDMP pid iid / IDMPAUTO pid (iid None): see idmp.py
        self.idmp_iid: bytes | None = None

    def exact_minid(self) -> int | None:
        """An exact MINID trim's threshold (what its effect states), else None."""
        return self.minid if self.strategy == b"minid" and not self.approx else None

    def trim(self, stream: Stream) -> TrimOutcome:
        if self.strategy is None:
            return TrimOutcome()
        if self.strategy == b"maxlen":
            return policy_trim(stream, maxlen=self.maxlen, approx=self.approx, limit=self.limit, policy=self.policy)
        return policy_trim(stream, minid=self.minid, approx=self.approx, limit=self.limit, policy=self.policy)


def parse_trim_args(ctx, argv: list[bytes], xadd: bool) -> TrimArgs:
    """streamParseAddOrTrimArgsOrReply: options in any order, then (XADD) the ID."""
    args = TrimArgs()
    limit_given = False
    policy_given = False  # a second policy is an XADD ID (Invalid stream ID) or an XTRIM syntax error, as in Redis
    argc = len(argv)
    i = 2
    while i < argc:
        moreargs = argc - 1 - i
        opt = argv[i]
        if xadd and opt == b"*":
            break
        lower = opt.lower()
        if (lower == b"maxlen" or lower == b"minid") and moreargs:
            if args.strategy is not None:
                raise ReplyError("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
            args.approx = False
            following = argv[i + 1]
            if moreargs >= 2 and following == b"~":
                args.approx = True
                i += 1
            elif moreargs >= 2 and following == b"=":
                i += 1
            if lower == b"maxlen":
                args.maxlen = to_int(argv[i + 1])
                if args.maxlen < 0:
                    raise ReplyError("ERR The MAXLEN argument must be >= 0.")
            else:
                args.minid = parse_strict_id(argv[i + 1])
            i += 1
            args.strategy = lower
        elif lower == b"limit" and moreargs:
            args.limit = to_int(argv[i + 1])
            if args.limit < 0:
                raise ReplyError("ERR The LIMIT argument must be >= 0.")
            limit_given = True
            i += 1
        elif xadd and lower == b"nomkstream":
            args.nomkstream = True
        elif lower in POLICIES and not policy_given:
            args.policy = POLICIES[lower]
            policy_given = True
        elif xadd and (lower == b"idmp" and moreargs >= 2 or lower == b"idmpauto" and moreargs):
            i = parse_idmp(args, argv, i, lower == b"idmpauto")
        elif xadd:
            args.ms, args.seq = parse_xadd_id(opt)
            args.id_given = True
            break
        else:
            raise ReplyError(SYNTAX)
        i += 1
    args.id_pos = i
    if args.idmp_pid is not None and args.id_given:
        raise ReplyError(ONLY_AUTO_IDS)
    if args.limit and args.strategy is None:
        raise ReplyError("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
    if not xadd and args.strategy is None:
        raise ReplyError("ERR syntax error, XTRIM must be called with a trimming strategy")
    if ctx.loading:
        args.limit = 0  # effects are exact: never cap the work when replaying them
    elif limit_given:
        if not args.approx:
            raise ReplyError("ERR syntax error, LIMIT cannot be used without the special ~ option")
    elif args.approx:
        limit = 100 * ctx.server.config["stream-node-max-entries"]
        args.limit = 10000 if limit <= 0 else min(limit, 1000000)
    else:
        args.limit = 0
    return args


_PLAIN_XADD = TrimArgs()  # `XADD key * field value ...`: no options to parse
_PLAIN_XADD.id_pos = 2


def _is_count(arg: bytes) -> bool:
    """A non-negative integer as to_int takes it without overflow: digits, no leading zero."""
    return arg.isdigit() and len(arg) < 19 and (arg[0] != 48 or len(arg) == 1)


def _explicit_id(arg: bytes) -> tuple[int, int] | None:
    """ms and seq of an XADD ID written `ms-seq` in digits, above 0-0; None for any other form
    (`*`, `ms-*`, `ms`, an option, an invalid ID), which parse_trim_args handles with Redis's errors."""
    ms_text, dash, seq_text = arg.partition(b"-")
    if not (dash and ms_text.isdigit() and seq_text.isdigit()) or len(arg) > 127:
        return None
    ms, seq = int(ms_text), int(seq_text)
    if ms > U64_MAX or seq > U64_MAX or not (ms or seq):
        return None
    return ms, seq


@command(
    "xadd", -5, "write denyoom fast", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="Appends a new message to a stream. Creates the key if it doesn't exist.",
    complexity="O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.",
)
def xadd(ctx, argv):
    """XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid] [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field value [field value ...]"""
    if argv[2] == b"*" and len(argv) & 1:  # `XADD key * field value ...` (5+ arguments: the arity), the usual form
        key = argv[1]
        server = ctx.server
        stream = ctx.db.lookup_type(key, server.now, Stream)
        max_entries, max_bytes = server.config.stream_node_limits
        fields = argv[3:]
        if stream is None:
            stream = Stream()
            ctx.db.set(key, stream)
        reply = stream.add(server.now, fields, max_entries, max_bytes)
        return reply, [[b"XADD", key, reply, *fields]]
    argc = len(argv)
    if argv[2] == b"IDMPAUTO" and argc & 1 and argc >= 7 and argv[4] == b"*":  # the usual idempotent forms
        return xadd_idempotent(ctx, argv, argv[3], None, 5)
    if argv[2] == b"IDMP" and not argc & 1 and argc >= 8:
        if argv[5] == b"*":
            return xadd_idempotent(ctx, argv, argv[3], argv[4], 6)
        if ctx.loading:  # a fresh idempotent add's effect: `XADD key IDMP pid iid <ms-seq> ...`
            return xadd_recorded(ctx, argv)
    # What a replica (or the AOF loader) applies: `XADD key ms-seq field value ...`, and after a
    # trim `XADD key MAXLEN = n ms-seq field value ...`. Anything else, errors included, is parsed in full.
    if argc & 1:
        id_pos, maxlen = 2, -1
    elif argc >= 8 and argv[2] == b"MAXLEN" and argv[3] == b"=" and _is_count(argv[4]):
        id_pos, maxlen = 5, int(argv[4])
    else:
        id_pos = 0
    if id_pos and (explicit := _explicit_id(argv[id_pos])) is not None:
        key = argv[1]
        server = ctx.server
        stream = ctx.db.lookup_type(key, server.now, Stream)
        max_entries, max_bytes = server.config.stream_node_limits
        fields = argv[id_pos + 1 :]
        if stream is None:
            stream = Stream()
            reply = stream.add_id(*explicit, fields, max_entries, max_bytes)
            ctx.db.set(key, stream)
        else:
            reply = stream.add_id(*explicit, fields, max_entries, max_bytes)
        if maxlen >= 0 and stream.trim(maxlen=maxlen, approx=False, limit=0):
            return reply, [[b"XADD", key, b"MAXLEN", b"=", b"%d" % stream.length, reply, *fields]]
        return reply, [[b"XADD", key, reply, *fields]]
    args = _PLAIN_XADD if argv[2] == b"*" else parse_trim_args(ctx, argv, xadd=True)
    field_pos = args.id_pos + 1
    nfields = len(argv) - field_pos
    if nfields < 2 or nfields % 2:
        raise wrong_arity("xadd")
    if args.id_given and args.seq is not None and args.ms == 0 and args.seq == 0:
        raise ReplyError("ERR The ID specified in XADD must be greater than 0-0")
    key = argv[1]
    server = ctx.server
    stream = ctx.db.lookup_type(key, server.now, Stream)
    created = stream is None
    if created:
        if args.nomkstream:
            return None, []
        stream = Stream()
    fields = argv[field_pos:]
    idempotent = None
    if args.idmp_pid is not None:
        idempotent = IdempotentAdd(ctx, key, stream, args.idmp_pid, args.idmp_iid, fields)
        if idempotent.original is not None:  # a repeat: nothing added, only an expiry on the way propagates
            return idempotent.original, idempotent.effects
    if args.id_given:
        new_id = stream.next_id(server.now, args.ms, args.seq)
    else:
        new_id = stream.next_id(server.now)
    max_entries, max_bytes = server.config.stream_node_limits
    stream.append(new_id, fields, max_entries, max_bytes)
    if created:
        ctx.db.set(key, stream)
    reply = b"%d-%d" % (new_id >> 64, new_id & SEQ_MASK)
    effects = [[b"XADD", key, reply, *fields]]
    if args.strategy is not None:
        outcome = args.trim(stream)
        if outcome.deleted:
            effects = trim_effects(b"XADD", key, stream, args.policy, outcome, [reply, *fields], args.exact_minid())
    if idempotent is not None:
        effects = idempotent.finish(ctx, stream, reply, effects)
    return reply, effects


@command(
    "xtrim", -4, "write", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="Deletes messages from the beginning of a stream.",
    complexity="O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.",
)
def xtrim(ctx, argv):
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]"""
    args = parse_trim_args(ctx, argv, xadd=False)
    stream = lookup_stream(ctx, argv[1])
    if stream is None:
        return 0, []
    outcome = args.trim(stream)
    if not outcome.deleted:
        return 0, []
    return outcome.deleted, trim_effects(b"XTRIM", argv[1], stream, args.policy, outcome, [], args.exact_minid())


# -- reading ranges -----------------------------------------------------------------


def _range(ctx, argv: list[bytes], rev: bool):
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start = 0 if start_arg == b"-" else parse_interval_start(start_arg)
    end = MAX_ID if end_arg == b"+" else parse_interval_end(end_arg)
    count = -1
    j = 4
    argc = len(argv)
    while j < argc:
        if argc - j - 1 >= 1 and argv[j].lower() == b"count":
            count = parse_count(argv[j + 1])
            j += 2
        else:
            raise ReplyError(SYNTAX)
    stream = read_stream(ctx, argv[1])
    if stream is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return range_reply(stream, start, end, count if count > 0 else None, rev)


@command(
    "xrange", -4, "readonly", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="Returns the messages from a stream within a range of IDs.",
    complexity="O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
)
def xrange(ctx, argv):
    """XRANGE key start end [COUNT count]"""
    return _range(ctx, argv, rev=False)


@command(
    "xrevrange", -4, "readonly", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="Returns the messages from a stream within a range of IDs in reverse order.",
    complexity="O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).",
)
def xrevrange(ctx, argv):
    """XREVRANGE key end start [COUNT count]"""
    return _range(ctx, argv, rev=True)


@command("xlen", 2, "readonly fast", keys=(1, 1, 1), group="stream", since="5.0.0", summary="Return the number of messages in a stream.")
def xlen(ctx, argv):
    """XLEN key"""
    stream = read_stream(ctx, argv[1])
    return 0 if stream is None else stream.length


# -- XDEL / XSETID ----------------------------------------------------------------------


@command(
    "xdel", -3, "write fast", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="Returns the number of messages after removing them from a stream.",
    complexity="O(1) for each single item to delete in the stream, regardless of the stream size.",
)
def xdel(ctx, argv):
    """XDEL key id [id ...]"""
    stream = lookup_stream(ctx, argv[1])
    if stream is None:
        return 0, []
    ids = [parse_strict_id(arg) for arg in argv[2:]]
    removed = stream.delete(ids)
    if not removed:
        return 0, []
    return len(removed), [[b"XDEL", argv[1], *map(format_id, removed)]]


@command(
    "xsetid", -3, "write denyoom fast", keys=(1, 1, 1), group="stream", since="5.0.0",
    summary="An internal command for replicating stream values.",
)
def xsetid(ctx, argv):
    """XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]"""
    last_id = parse_strict_id(argv[2])
    entries_added = -1
    max_deleted = 0
    i = 3
    while i < len(argv):
        moreargs = len(argv) - 1 - i
        opt = argv[i].lower()
        if opt == b"entriesadded" and moreargs:
            entries_added = to_int(argv[i + 1])
            if entries_added < 0:
                raise ReplyError("ERR entries_added must be positive")
        elif opt == b"maxdeletedid" and moreargs:
            max_deleted = parse_strict_id(argv[i + 1])
            if last_id < max_deleted:
                raise ReplyError("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
        else:
            raise ReplyError(SYNTAX)
        i += 2
    stream = lookup_stream(ctx, argv[1])
    if stream is None:
        raise ReplyError(NO_SUCH_KEY)
    stream.set_id(last_id, entries_added, max_deleted)
    effect = [
        b"XSETID", argv[1], format_id(stream.last_id),
        b"ENTRIESADDED", b"%d" % stream.entries_added,
        b"MAXDELETEDID", format_id(stream.max_deleted_entry_id),
    ]
    return Simple(b"OK"), [effect]


# -- XREAD ----------------------------------------------------------------------------------


LAST_ENTRY = -1  # XREAD's `+`: resolved again each time the read is tried


def _read(ctx, keys: list[bytes], after: list[int], count: int, caps: ReadCaps | None = None):
    """Entries newer than after[i] in each stream, within MAXCOUNT/MAXSIZE (caps); None when no stream has any."""
    found = []
    if caps:
        caps = caps.fresh()
    for key, gt in zip(keys, after, strict=True):
        if caps and caps.spent:
            break  # the remaining streams are skipped (Redis 8.10)
        value = read_stream(ctx, key)  # Redis looks every key up again to serve it: a second hit or miss
        if value is None:
            continue
        if not value.length:
            continue
        last = value.last_valid_id()
        if gt == LAST_ENTRY:
            gt = last - 1
        if last > gt:
            if not caps:
                found.append((key, range_reply(value, gt + 1, MAX_ID, count or None, False)))  # XRANGE's encoded path
                continue
            entries = value.range(gt + 1, MAX_ID, caps.count(count) or None)
            take = caps.fit(key, [(format_id(entry_id), fields) for entry_id, fields in entries])
            if take:
                found.append((key, entries_reply(entries[:take])))
    if not found:
        return None
    return streams_reply(ctx, found)


@command(
    "xread", -4, "readonly blocking", keys=streams_keys, group="stream", since="5.0.0",
    summary="Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.",
    complexity="For each stream mentioned: O(N) with N being the number of elements being returned, it means that XREAD-ing with a fixed COUNT is O(1). Note that when the BLOCK option is used, XADD will pay O(M) time in order to serve the M clients blocked on the stream getting new data.",
)
def xread(ctx, argv):
    """XREAD [COUNT count] [MAXCOUNT maxcount] [MAXSIZE maxsize] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]"""
    timeout = -1
    count = 0
    caps = ReadCaps()  # MAXCOUNT / MAXSIZE (Redis 8.10), see read_caps.py
    streams_arg = 0
    argc = len(argv)
    i = 1
    while i < argc:
        moreargs = argc - i - 1
        opt = argv[i].lower()
        if opt == b"block" and moreargs:
            i += 1
            timeout = parse_timeout(argv[i], ctx.server.now)
        elif opt == b"count" and moreargs:
            i += 1
            count = parse_count(argv[i])
        elif opt == b"maxcount" and moreargs:
            i += 1
            caps.maxcount = parse_positive(argv[i], MAXCOUNT_NOT_POSITIVE)
        elif opt == b"maxsize" and moreargs:
            i += 1
            caps.maxsize = parse_positive(argv[i], MAXSIZE_NOT_POSITIVE)
        elif opt == b"streams" and moreargs:
            streams_arg = i + 1
            if (argc - streams_arg) % 2:
                raise ReplyError("ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified.")
            break
        elif opt == b"group" and moreargs >= 2:
            raise ReplyError("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
        elif opt == b"noack":
            raise ReplyError("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")
        elif opt == b"claim" and moreargs:  # Redis 8.4's XREADGROUP option
            raise ReplyError("ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.")
        else:
            raise ReplyError(SYNTAX)
        i += 1
    if not streams_arg:
        raise ReplyError(SYNTAX)
    check_count(count, caps.maxcount)
    nkeys = (argc - streams_arg) // 2
    keys = argv[streams_arg:streams_arg + nkeys]
    after: list[int] = []
    db, now = ctx.db, ctx.server.now
    for key, arg in zip(keys, argv[streams_arg + nkeys:], strict=True):
        stream = read_stream(ctx, key)  # WRONGTYPE before the ID is parsed, as Redis
        if arg == b"$":
            after.append(stream.last_id if stream is not None else 0)
        elif arg == b"+":
            after.append(LAST_ENTRY)
        elif arg == b">":
            raise ReplyError("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
        else:
            after.append(parse_strict_id(arg))
    reply = _read(ctx, keys, after, count, caps)
    if reply is not None:
        return reply
    if timeout == -1:
        return NULL_ARRAY
    if timeout > 10**12:
        timeout = 0  # beyond thirty years: wait for ever, the event loop's timers stop there

    seen = {key: _stream_mark(db.lookup(key, now)) for key in keys}

    def attempt():
        # Redis runs the blocked XREAD again only when one of its keys is
        # signalled as a stream (an entry added, a stream created or moved
        # there); the command then starts over, WRONGTYPE checks included.
        signalled = False
        for key in keys:
            value = ctx.db.lookup(key, ctx.server.now)
            if type(value) is Stream:
                before = seen[key]
                if before is None or before[0]() is not value or before[1] != value.entries_added:
                    signalled = True
            seen[key] = _stream_mark(value)
        if not signalled:
            return None
        for key in keys:  # the re-executed command's first pass over the keys
            read_stream(ctx, key)
        return _read(ctx, keys, after, count, caps)

    return Block(list(keys), timeout, attempt, NULL_ARRAY)


def _stream_mark(value) -> tuple | None:
    """What changes when a stream is signalled: the object (created, renamed) or entries-added (XADD).

    A weak reference: a waiting client must not keep a deleted stream alive.
    """
    if type(value) is not Stream:
        return None
    return weakref.ref(value), value.entries_added


# -- XINFO STREAM / HELP ---------------------------------------------------------------------

def full_groups_section(stream: Stream, count: int, exact: bool = False) -> list:
    """XINFO STREAM FULL's `groups`: [] without groups, else written by server/commands/groups.py."""
    if not stream.groups:
        return []
    from .groups import full_groups  # groups.py imports this module

    return full_groups(stream, count, exact)


@command(
    "xinfo|stream", -3, "readonly", keys=(2, 2, 1), group="stream", since="5.0.0",
    summary="Returns information about a stream.",
    complexity="O(N) with N being the number of returned items for the subcommands CONSUMERS and GROUPS. The STREAM subcommand is O(log N) with N being the number of items in the stream.",
)
def xinfo_stream(ctx, argv):
    """XINFO STREAM key [FULL [COUNT count]]"""
    stream = read_stream(ctx, argv[2])
    if stream is None:
        raise ReplyError(NO_SUCH_KEY)
    options = argv[3:]
    full = bool(options)
    count = 10
    if full:
        if len(options) not in (1, 3) or options[0].lower() != b"full":
            raise subcommand_error(argv)
        if len(options) == 3:
            if options[1].lower() != b"count":
                raise subcommand_error(argv)
            count = to_int(options[2])
            if count < 0:
                count = 10
    info = Map()
    info[b"length"] = stream.length
    info[b"radix-tree-keys"] = stream.radix_tree_keys()
    info[b"radix-tree-nodes"] = stream.radix_tree_nodes()
    info[b"last-generated-id"] = format_id(stream.last_id)
    info[b"max-deleted-entry-id"] = format_id(stream.max_deleted_entry_id)
    info[b"entries-added"] = stream.entries_added
    info[b"recorded-first-entry-id"] = format_id(stream.first_id)
    for name, value in info_fields(ctx, stream):
        info[name] = value
    if not full:
        info[b"groups"] = len(stream.groups)
        first, last = stream.first_entry(), stream.last_entry()
        info[b"first-entry"] = [format_id(first[0]), first[1]] if first else None
        info[b"last-entry"] = [format_id(last[0]), last[1]] if last else None
    else:
        info[b"entries"] = entries_reply(stream.range(0, MAX_ID, count or None))
        info[b"groups"] = full_groups_section(stream, count, ctx.server.config["stream-exact-lag"])
    if stream.retention is not None and stream.retention.policy is not None:
        from .retention import policy_fields  # a stream with a consumption-based retention policy

        info.update(policy_fields(stream, b"retention-"))
    return info


XINFO_HELP = (
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Print this help.",
)


@command("xinfo|help", 2, "loading stale", group="stream", since="5.0.0", summary="Returns helpful text about the different subcommands.")
def xinfo_help(ctx, argv):
    """XINFO HELP"""
    return help_reply(XINFO_HELP)
