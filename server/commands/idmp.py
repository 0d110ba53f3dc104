"""Idempotent production (Redis 8.6): XADD's IDMP/IDMPAUTO, XCFGSET, XIDMPRECORD, the IDMP expiry cron.

Effects (ARCHITECTURE rule 4). A fresh idempotent XADD to a stream already
tracking iids propagates as one `XADD key IDMP pid iid <id> field value ...`
(IDMPAUTO's iid as the 16 bytes computed on the primary; the form with a
concrete ID is taken from loading and primary clients only, and does what the
pair below does); the stream's first iid, an expiry on the way or a trim
propagate the plain XADD with its concrete ID and `XIDMPRECORD key pid iid id`.
A repeat adds nothing; it propagates the lifetime counters it changed (`iids-duplicates`) as
`XCFGSET key IIDS-ADDED n IIDS-DUPLICATES n` with absolute values, which counts one change
(Redis 8.6.2, redis#14858: the counter is persisted, so a repeat marks the key dirty) and, as
Redis's keyModified(..., 0), touches no WATCH and wakes no reader. A stream takes the `stream-idmp-*` configs' values when it
first tracks an iid (or gets XCFGSET): that moment propagates
`XCFGSET key IDMP-DURATION d IDMP-MAXSIZE m`, so replicas and the AOF hold the
primary's limits whatever their own configs say. Expiry is decided on the
primary (the cron, or an idempotent XADD that finds iids past their time) and
propagates as `XCFGSET key IDMP-EXPIRE before-ms`, a threshold; the AOF
rewrite's lifetime counters as `XCFGSET key IIDS-ADDED n IIDS-DUPLICATES n`.
Those two XCFGSET forms are taken from loading and primary clients only.
"""

from __future__ import annotations

from protocol.errors import SYNTAX, ReplyError
from protocol.reply import Simple
from storage.idmp import _U128, DURATION_RANGE, MAXSIZE_RANGE, Idmp, auto_iid, xxh3_128_digest
from storage.stream import Stream
from storage.stream_id import SEQ_MASK, format_id, parse_strict_id

from ..command import command
from .args import to_int
from .stream_args import lookup_stream

OK = Simple(b"OK")
ONLY_AUTO_IDS = "ERR IDMP/IDMPAUTO can be used only with auto-generated IDs"
TWICE = "ERR IDMP/IDMPAUTO specified multiple times"
EMPTY_PID = "ERR IDMP requires a non-empty producer ID"
EMPTY_IID = "ERR IDMP requires a non-empty idempotent ID"
EMPTY_AUTO_PID = "ERR IDMPAUTO requires a non-empty producer ID"
NO_SUCH_KEY = "ERR no such key"
_digest, _from_bytes = xxh3_128_digest, int.from_bytes  # auto_iid's, for its two-pair case inlined below


# -- XADD IDMP / IDMPAUTO -----------------------------------------------------------


def parse_idmp(args, argv: list[bytes], i: int, auto: bool) -> int:
    """`IDMP pid iid` or `IDMPAUTO pid` at argv[i] into args (TrimArgs); returns the index of its last word."""
    if args.idmp_pid is not None:
        raise ReplyError(TWICE)
    pid = argv[i + 1]
    if auto:
        if not pid:
            raise ReplyError(EMPTY_AUTO_PID)
        args.idmp_pid, args.idmp_iid = pid, None
        return i + 1
    iid = argv[i + 2]
    if not pid:
        raise ReplyError(EMPTY_PID)
    if not iid:
        raise ReplyError(EMPTY_IID)
    args.idmp_pid, args.idmp_iid = pid, iid
    return i + 2


def stream_idmp(ctx, key: bytes, stream: Stream, effects: list) -> Idmp:
    """The stream's IDMP state, made from the configs (and pinned by an XCFGSET effect) on first use."""
    idmp = stream.idmp
    if idmp is None:
        config = ctx.server.config
        idmp = stream.idmp = Idmp(config["stream-idmp-duration"], config["stream-idmp-maxsize"])
        effects.append(limits_effect(key, idmp))
    register(ctx.server, ctx.db.id, key, stream)
    return idmp


def limits_effect(key: bytes, idmp: Idmp) -> list[bytes]:
    return [b"XCFGSET", key, b"IDMP-DURATION", b"%d" % idmp.duration, b"IDMP-MAXSIZE", b"%d" % idmp.maxsize]


class IdempotentAdd:
    """One XADD with IDMP/IDMPAUTO: the lookup before the entry is appended, the record after.

    `original` is the reply of a repeat (the first entry's ID), None when the
    entry is to be added; `effects` what the IDMP state itself changed (an
    expiry on the way), which follow the XADD's own effects.
    """

    __slots__ = ("key", "pid", "iid", "original", "effects", "expired")

    def __init__(self, ctx, key: bytes, stream: Stream, pid: bytes, iid: bytes | None, fields: list[bytes]) -> None:
        self.key, self.pid = key, pid
        self.iid = iid if iid is not None else auto_iid(fields)
        self.original: bytes | None = None
        self.effects: list[list[bytes]] = []
        idmp = stream.idmp
        if idmp is None:
            return
        if not ctx.loading:
            before = idmp.expiry_due(ctx.server.now)
            if before is not None and idmp.expire(before):
                self.effects.append(expire_effect(key, before))
        entry_id = idmp.lookup(self.pid, self.iid)
        if entry_id is not None:
            idmp.iids_duplicates += 1
            self.original = format_id(entry_id)
            self.effects.append(counters_effect(key, idmp))

    def finish(self, ctx, stream: Stream, reply: bytes, effects: list) -> list:
        """Record the iid of the entry just added; the XADD's effects, then the IDMP ones."""
        out = effects + self.effects
        idmp = stream_idmp(ctx, self.key, stream, out)
        idmp.record(self.pid, self.iid, parse_strict_id(reply))
        out.append([b"XIDMPRECORD", self.key, self.pid, self.iid, reply])
        return out


def xadd_idempotent(ctx, argv: list[bytes], pid: bytes, iid: bytes | None, field_pos: int):
    """`XADD key IDMPAUTO pid * ...` / `XADD key IDMP pid iid * ...` without other options: the usual
    idempotent XADD, inline (IdempotentAdd's steps) and through Stream.add's fast path.

    The steady state (the stream tracks iids already, none expired on the way) propagates one
    command, `XADD key IDMP pid iid <id> ...` (xadd_recorded); the first iid of a stream, or an
    expiry on the way, the plain XADD and XIDMPRECORD around the XCFGSET they need.
    """
    if not pid:
        raise ReplyError(EMPTY_AUTO_PID if iid is None else EMPTY_PID)
    fields = argv[field_pos:]
    if iid is None:
        if len(fields) == 4:  # two pairs, the usual event: auto_iid's sum, inlined (one Python call less)
            a, b, c, d = fields
            iid = ((_from_bytes(_digest(a + b, len(a))) + _from_bytes(_digest(c + d, len(c)))) & _U128).to_bytes(16)
        else:
            iid = auto_iid(fields)
    elif not iid:
        raise ReplyError(EMPTY_IID)
    key = argv[1]
    server = ctx.server
    now = server.now
    stream = ctx.db.lookup_type(key, now, Stream)
    if stream is not None and (idmp := stream.idmp) is not None and idmp.oldest_ms + idmp.duration * 1000 >= now:
        # the steady state: nothing can be due to expire (Idmp.expiry_due, inlined: with iids tracked,
        # due means oldest_ms < now - duration; with none, oldest_ms is -1 and either path is right)
        iids = idmp.producers.get(pid)
        if iids is not None:
            entry_id = iids.get(iid)
            if entry_id is not None:  # a repeat: the counter changed (its effect), nothing else
                idmp.iids_duplicates += 1
                return format_id(entry_id), [counters_effect(key, idmp)]
        max_entries, max_bytes = server.config.stream_node_limits
        reply = stream.add(now, fields, max_entries, max_bytes)
        home = idmp.home
        if home is None or home[1] != key or home[0] != ctx.db.id:  # moved since (or displaced): the cron's registry
            register(server, ctx.db.id, key, stream)
        entry_id = stream.last_id
        if iids is None:
            idmp.record(pid, iid, entry_id)
        else:  # Idmp.record for a producer that has iids, inlined (its steady state: a full FIFO)
            order = iids.order
            if len(iids) < idmp.maxsize:
                idmp.tracked += 1
            else:  # Fifo.pop_oldest and Fifo.add, inlined
                del iids[order.popleft()]
            iids[iid] = entry_id
            order.append(iid)
            idmp.iids_added += 1
            if entry_id >> 64 < idmp.oldest_ms:  # (a producer with iids: oldest_ms is set)
                idmp.oldest_ms = entry_id >> 64
        return reply, [[b"XADD", key, b"IDMP", pid, iid, reply, *fields]]
    return _xadd_idempotent(ctx, key, stream, pid, iid, fields)


def _xadd_idempotent(ctx, key: bytes, stream: Stream | None, pid: bytes, iid: bytes, fields: list[bytes]):
    """xadd_idempotent's other cases: a new stream, its first iid, or iids that may be due to expire."""
    server = ctx.server
    now = server.now
    created = stream is None
    out = []
    if created:
        stream = Stream()
    elif (idmp := stream.idmp) is not None:
        before = idmp.expiry_due(now)
        if before is not None and not ctx.loading and idmp.expire(before):
            out.append(expire_effect(key, before))
        entry_id = idmp.lookup(pid, iid)
        if entry_id is not None:
            idmp.iids_duplicates += 1
            out.append(counters_effect(key, idmp))
            return format_id(entry_id), out
    max_entries, max_bytes = server.config.stream_node_limits
    reply = stream.add(now, fields, max_entries, max_bytes)
    if created:
        ctx.db.set(key, stream)
    out.insert(0, [b"XADD", key, reply, *fields])
    idmp = stream.idmp if stream.idmp is not None and not created else stream_idmp(ctx, key, stream, out)
    if not created:
        register(server, ctx.db.id, key, stream)
    idmp.record(pid, iid, stream.last_id)
    out.append([b"XIDMPRECORD", key, pid, iid, reply])
    return reply, out


def xadd_recorded(ctx, argv: list[bytes]):
    """`XADD key IDMP pid iid <ms-seq> field value ...`, from the AOF loader or a primary only: what
    `XADD key <ms-seq> field value ...` then `XIDMPRECORD key pid iid <ms-seq>` do, in one command
    (a fresh idempotent add's effect). A pair already mapped is refused before anything changes."""
    key, pid, iid = argv[1], argv[3], argv[4]
    if not pid:
        raise ReplyError(EMPTY_PID)
    if not iid:
        raise ReplyError(EMPTY_IID)
    entry_id = parse_strict_id(argv[5])
    server = ctx.server
    stream = ctx.db.lookup_type(key, server.now, Stream)
    created = stream is None
    if not created and stream.idmp is not None and stream.idmp.lookup(pid, iid) is not None:
        raise ReplyError("ERR The pid/iid pair is already mapped to a different stream ID")
    if created:
        stream = Stream()
    fields = argv[6:]
    max_entries, max_bytes = server.config.stream_node_limits
    reply = stream.add_id(entry_id >> 64, entry_id & SEQ_MASK, fields, max_entries, max_bytes)
    if created:
        ctx.db.set(key, stream)
    if stream.idmp is None:  # as XIDMPRECORD: the limits from this server's configs, and their XCFGSET
        out = [[b"XADD", key, reply, *fields]]
        stream_idmp(ctx, key, stream, out).record(pid, iid, entry_id)
        out.append([b"XIDMPRECORD", key, pid, iid, reply])
        return reply, out
    register(server, ctx.db.id, key, stream)
    stream.idmp.record(pid, iid, entry_id)
    return reply, [[b"XADD", key, b"IDMP", pid, iid, reply, *fields]]


def expire_effect(key: bytes, before: int) -> list[bytes]:
    return [b"XCFGSET", key, b"IDMP-EXPIRE", b"%d" % before]


# -- XCFGSET ----------------------------------------------------------------------------


def _limit(arg: bytes, bounds: tuple[int, int], error: str) -> int:
    value = to_int(arg)
    if not bounds[0] <= value <= bounds[1]:
        raise ReplyError(error)
    return value


@command(
    "xcfgset", -2, "write fast", keys=(1, 1, 1), group="stream", since="8.6.0",
    summary="Sets the IDMP configuration parameters for a stream.",
)
def xcfgset(ctx, argv):
    """XCFGSET key [IDMP-DURATION idmp-duration] [IDMP-MAXSIZE idmp-maxsize] -> OK

    A new value forgets every tracked iid of the stream (all producers); the
    same values change nothing. Loading/primary clients also send
    `IDMP-EXPIRE before-ms` and `IIDS-ADDED n IIDS-DUPLICATES n` (module docstring).
    """
    if len(argv) == 2:
        raise ReplyError("ERR At least one parameter must be specified")
    duration = maxsize = expire = added = duplicates = None
    i, argc = 2, len(argv)
    while i < argc:
        opt = argv[i].upper()
        if i + 1 >= argc:
            raise ReplyError(SYNTAX)
        value = argv[i + 1]
        if opt == b"IDMP-DURATION":
            duration = _limit(value, DURATION_RANGE, "ERR IDMP-DURATION must be between 1 and 86400 seconds")
        elif opt == b"IDMP-MAXSIZE":
            maxsize = _limit(value, MAXSIZE_RANGE, "ERR IDMP-MAXSIZE must be between 1 and 10000 entries")
        elif ctx.loading and opt == b"IDMP-EXPIRE":
            expire = to_int(value)
        elif ctx.loading and opt == b"IIDS-ADDED":
            added = to_int(value)
        elif ctx.loading and opt == b"IIDS-DUPLICATES":
            duplicates = to_int(value)
        else:
            raise ReplyError(SYNTAX)
        i += 2
    key = argv[1]
    stream = lookup_stream(ctx, key)
    if stream is None:
        raise ReplyError(NO_SUCH_KEY)
    effects: list[list[bytes]] = []
    created = stream.idmp is None
    idmp = stream_idmp(ctx, key, stream, effects)
    if duration is not None or maxsize is not None:
        changed = idmp.configure(idmp.duration if duration is None else duration, idmp.maxsize if maxsize is None else maxsize)
        if changed and not created:
            effects.append(limits_effect(key, idmp))
        elif changed:
            effects[-1] = limits_effect(key, idmp)
    if expire is not None and idmp.expire(expire):
        effects.append(expire_effect(key, expire))
    if added is not None or duplicates is not None:
        idmp.iids_added = idmp.iids_added if added is None else added
        idmp.iids_duplicates = idmp.iids_duplicates if duplicates is None else duplicates
        effects.append(counters_effect(key, idmp))
    return OK, effects


def counters_effect(key: bytes, idmp: Idmp) -> list[bytes]:
    return [b"XCFGSET", key, b"IIDS-ADDED", b"%d" % idmp.iids_added, b"IIDS-DUPLICATES", b"%d" % idmp.iids_duplicates]


# -- XIDMPRECORD ----------------------------------------------------------------------------


@command(
    "xidmprecord", 5, "write denyoom fast", keys=(1, 1, 1), group="stream", since="8.6.2",
    summary="An internal command for setting IDMP metadata on an existing stream message.",
)
def xidmprecord(ctx, argv):
    """XIDMPRECORD key pid iid stream-id -> OK

    Records that producer pid's iid added entry stream-id (what an idempotent
    XADD propagates, and the AOF rewrite writes per tracked iid). Refused when
    the entry does not exist, except from loading/primary clients: the map
    keeps an iid whose entry was deleted or trimmed since, and replaying it
    must keep it too.
    """
    key, pid, iid = argv[1], argv[2], argv[3]
    stream = lookup_stream(ctx, key)
    if stream is None:
        raise ReplyError(NO_SUCH_KEY)
    if not pid:
        raise ReplyError(EMPTY_PID)
    if not iid:
        raise ReplyError(EMPTY_IID)
    entry_id = parse_strict_id(argv[4])
    if not ctx.loading and stream.get(entry_id) is None:
        raise ReplyError("ERR The stream ID specified does not exist")
    effects: list[list[bytes]] = []
    if stream.idmp is not None:
        known = stream.idmp.lookup(pid, iid)
        if known == entry_id:
            return OK, []
        if known is not None:
            raise ReplyError("ERR The pid/iid pair is already mapped to a different stream ID")
    idmp = stream_idmp(ctx, key, stream, effects)
    idmp.record(pid, iid, entry_id)
    effects.append([b"XIDMPRECORD", key, pid, iid, format_id(entry_id)])
    return OK, effects


# -- XINFO STREAM, the AOF rewrite ------------------------------------------


def info_fields(ctx, stream: Stream) -> list[tuple[bytes, int]]:
    """XINFO STREAM's six IDMP fields (8.6), in Redis's order; the configs' values until the stream has its own."""
    idmp = stream.idmp
    if idmp is None:
        config = ctx.server.config
        return [
            (b"idmp-duration", config["stream-idmp-duration"]), (b"idmp-maxsize", config["stream-idmp-maxsize"]),
            (b"pids-tracked", 0), (b"iids-tracked", 0), (b"iids-added", 0), (b"iids-duplicates", 0),
        ]  # fmt: skip
    return [
        (b"idmp-duration", idmp.duration), (b"idmp-maxsize", idmp.maxsize), (b"pids-tracked", idmp.pids_tracked()),
        (b"iids-tracked", idmp.tracked), (b"iids-added", idmp.iids_added), (b"iids-duplicates", idmp.iids_duplicates),
    ]  # fmt: skip


def rewrite_commands(key: bytes, stream: Stream) -> list[list[bytes]]:
    """The commands that rebuild a stream's IDMP state exactly (after its entries): limits, iids oldest first, counters."""
    idmp = stream.idmp
    if idmp is None:
        return []
    out = [limits_effect(key, idmp)]
    for pid, iids in idmp.producers.items():
        out += [[b"XIDMPRECORD", key, pid, iid, format_id(entry_id)] for iid, entry_id in iids.items()]
    out.append(counters_effect(key, idmp))
    return out


# -- expiry -------------------------------------------------------------------------------------


def register(server, db: int, key: bytes, stream: Stream) -> None:
    """Streams with IDMP state, for the cron; a key that no longer holds the stream is dropped there.

    The stream's Idmp.home remembers its entry, so the usual idempotent XADD checks two fields
    instead of hashing a (db, key) tuple into the registry; a stream displaced from its entry
    (another took the key while it was renamed away) loses its home and registers again.
    """
    home = (db, key)
    registry = server.idmp_keys
    old = registry.get(home)
    if old is not None and old is not stream and old.idmp is not None and old.idmp.home == home:
        old.idmp.home = None
    registry[home] = stream
    stream.idmp.home = home


def register_loaded(server) -> None:
    """After a snapshot replaced the databases: the streams with IDMP state, for the cron (O(keys), once per load)."""
    server.idmp_keys = {}
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            if type(value) is Stream and value.idmp is not None:
                register(server, db.id, key, value)


def expire_cycle(server) -> None:
    """Forget the iids past their stream's IDMP-DURATION (on a primary; replicas apply its effects)."""
    if not server.idmp_keys or (server.replication is not None and server.replication.master is not None):
        return
    now = server.now
    for (db, key), stream in list(server.idmp_keys.items()):
        database = server.keyspace.dbs[db]
        idmp = stream.idmp
        if database.data.get(key) is not stream or idmp is None:
            del server.idmp_keys[(db, key)]
            if idmp is not None and idmp.home == (db, key):
                idmp.home = None  # moved: its next idempotent XADD registers it where it is
            continue
        before = idmp.expiry_due(now)
        if before is not None and idmp.expire(before):
            server.after_write(db, [expire_effect(key, before)])
