"""KEYSHARED consumer groups: key-ordered delivery with draining hashes (issue 22; storage/keyshared.py).

Commands:

- `XGROUP CREATE key group id ... KEYSHARED field` (the option is parsed here,
  see `split_create_option`);
- `XGROUP SETCONFIG key group [KEYSHARED field | KEYSHARED OFF]
  [SESSION-TIMEOUT ms] [LOOKAHEAD n]`: options of group_config.py's SETCONFIG;
- `XGROUP LEAVE key group consumer`: the consumer leaves the ring, its pending
  entries go back to the group for their new owners -> how many it had;
- `XINFO KEYSHARED key group [consumer]`: ring ranges and draining hashes.

Effects (ARCHITECTURE.md rule 4): who gets what is decided here, on the
primary, and travels as explicit effects: `XCLAIM ... FORCE JUSTID` for every
delivery, `XGROUP SETID ... ENTRIESREAD` for the cursor, `XGROUP LEAVE` for a
leave (also the primary's session-timeout decision), and two effect-only
subcommands, refused to ordinary clients: `XGROUP JOIN key group consumer`
(ring membership, in join order) and `XGROUP DEFER|UNDEFER key group id ...`
(the deferred set; a read's scan defers as `XGROUP DEFER key group RANGE first
last`: every live entry in the range that is neither pending nor deferred).
Replayed, they rebuild exactly the same state.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from operator import itemgetter

from hiredis import pack_command

from protocol.errors import ReplyError, arg_text
from protocol.reply import OK, Entries, Map, Raw
from storage.claim import next_count
from storage.keyshared import (
    NONE_KEY,
    POINTS,
    HashRing,
    KeyShared,
    _hash_cache,
    first_held_back,
    held_back,
    pending_owner,
    sticky_hash,
)
from storage.keyshared_deferred import FREE, OVERFLOW, owner_bytes
from storage.lag import register_held_back
from storage.stream import Stream, _expand
from storage.stream_id import MAX_ID, format_id, format_ids, parse_strict_id

from ..command import command
from .args import LLONG_MAX, Cursor, to_int
from .group_config import setconfig_option
from .groups import _delivered_ids, delivery_effect, xclaim_effect  # groups.py imports this module last, once these exist
from .stream_args import lookup_stream, read_stream
from .streams import wire_entries

register_held_back(lambda stream, group: held_back(group, stream), lambda stream, group: first_held_back(group, stream))  # exact lag (XGROUPLAG, XINFO) counts deferred entries

NOT_KEYSHARED = "ERR The consumer group '{}' is not KEYSHARED"
NOACK_REFUSED = "ERR NOACK is not allowed in a KEYSHARED consumer group: entries without a pending entry cannot keep their key at one consumer"
INTERNAL = "ERR XGROUP {} is an internal command, only for replication and AOF loading"


def _no_such_group(group: bytes, key: bytes) -> ReplyError:
    return ReplyError(f"NOGROUP No such consumer group '{arg_text(group)}' for key name '{arg_text(key)}'")


def _group(ctx, key: bytes, name: bytes, keyshared: bool = True):
    stream = lookup_stream(ctx, key)
    if stream is None:
        raise ReplyError("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
    group = stream.groups.get(name)
    if group is None:
        raise _no_such_group(name, key)
    if keyshared and group.keyshared is None:
        raise ReplyError(NOT_KEYSHARED.format(arg_text(name)))
    return stream, group


# -- CREATE's option ------------------------------------------------------------------


def split_create_option(argv: list[bytes]) -> tuple[list[bytes], bytes | None]:
    """XGROUP CREATE's argv without `KEYSHARED field` (among the options after the ID), and the field."""
    i = 5
    while i < len(argv) - 1:
        option = argv[i].upper()
        if option == b"KEYSHARED":
            return argv[:i] + argv[i + 2 :], argv[i + 1]
        i += 2 if option == b"ENTRIESREAD" else 1  # ENTRIESREAD's value is no option
    return argv, None


def make_keyshared(stream: Stream, group, field: bytes) -> None:
    """Turn group into a KEYSHARED group on field (or re-key it), indexing its pending entries."""
    old = group.keyshared
    state = KeyShared(field)
    if old is not None:
        state.session_timeout, state.lookahead = old.session_timeout, old.lookahead
        for name in old.ring.members:
            state.ring.add(name)
        state.deferred.retable(state.ring.table())  # (join() does it per member)
    group.keyshared = state
    state.index_pending((entry_id, state.hash_of(stream.get(entry_id)), pending_owner(pending)) for entry_id, pending in group.pel.items())
    if old is not None:
        for entry_id in list(old.deferred):
            state.defer(entry_id, state.hash_of(stream.get(entry_id)))


# -- XGROUP SETCONFIG / LEAVE / JOIN / DEFER / UNDEFER ----------------------------------


def _keyshared_given(cursor: Cursor, before: bool) -> bool:
    """Whether this SETCONFIG names `KEYSHARED <field>` (not OFF) before the cursor (before=True) or anywhere."""
    args = [a.upper() for a in cursor.argv[4 : cursor.pos if before else len(cursor.argv)]]
    return any(a == b"KEYSHARED" and i + 1 < len(args) and args[i + 1] != b"OFF" for i, a in enumerate(args))


def _parse_keyshared(ctx, stream: Stream, group, cursor: Cursor):
    field = cursor.next()
    if field.upper() != b"OFF":
        return field, [b"KEYSHARED", field]
    names = {a.upper() for a in cursor.argv[4:]}
    if b"SESSION-TIMEOUT" in names or b"LOOKAHEAD" in names:
        raise ReplyError("ERR SESSION-TIMEOUT and LOOKAHEAD need a KEYSHARED group")
    if group.keyshared is not None and group.keyshared.deferred:
        raise ReplyError(
            f"ERR KEYSHARED cannot be turned off while {len(group.keyshared.deferred)} entries are deferred; "
            "let the consumers read them or move the group with XGROUP SETID"
        )
    return None, [b"KEYSHARED", b"OFF"]


def _apply_keyshared(ctx, stream: Stream, name: bytes, group, field: bytes | None) -> None:
    if field is None:
        group.keyshared = None
    elif group.keyshared is None or group.keyshared.field != field:
        make_keyshared(stream, group, field)


def _parse_number(option: bytes, high: int):
    def parse(ctx, stream: Stream, group, cursor: Cursor):
        value = cursor.next_int()
        if not 0 <= value <= high:
            raise ReplyError(f"ERR {option.decode()} must be between 0 and {high}")
        if group.keyshared is None and not _keyshared_given(cursor, before=True):
            raise ReplyError(NOT_KEYSHARED.format(arg_text(cursor.argv[3])))
        return value, [option, b"%d" % value]

    return parse


def _parse_session_timeout(ctx, stream: Stream, group, cursor: Cursor):
    value, args = _parse_number(b"SESSION-TIMEOUT", LLONG_MAX)(ctx, stream, group, cursor)
    return (value, cursor.argv[2]), args


def _apply_session_timeout(ctx, stream: Stream, name: bytes, group, value: tuple[int, bytes]) -> None:
    """The timeout, and the stream registered for the primary's session cron (server/keyshared_sessions.py)."""
    from ..keyshared_sessions import register

    group.keyshared.session_timeout, key = value
    if group.keyshared.session_timeout:
        register(ctx.server, ctx.db.id, key, stream)


def _apply_lookahead(ctx, stream: Stream, name: bytes, group, value: int) -> None:
    group.keyshared.lookahead = value


# XGROUP SETCONFIG key group [KEYSHARED field | KEYSHARED OFF] [SESSION-TIMEOUT ms] [LOOKAHEAD n]
# (server/commands/group_config.py parses every option before applying any; SESSION-TIMEOUT and
# LOOKAHEAD need the group to be KEYSHARED already or a KEYSHARED field before them).
setconfig_option(b"KEYSHARED", _parse_keyshared, _apply_keyshared)
setconfig_option(b"SESSION-TIMEOUT", _parse_session_timeout, _apply_session_timeout)
setconfig_option(b"LOOKAHEAD", _parse_number(b"LOOKAHEAD", 1_000_000), _apply_lookahead)


def leave(stream: Stream, group, name: bytes) -> int:
    """The consumer leaves the ring; its pending entries go back to the group (deferred, for their new owners).

    Those above last-delivered-id (pending since before an XGROUP SETID backwards) are not deferred: the
    group's `>` cursor reaches them again as new entries, and deferring them as well delivered them twice."""
    state = group.keyshared
    state.remove_member(name)
    consumer = group.consumers.get(name)
    if consumer is None or not consumer.pel:
        return 0
    ids = list(consumer.pel)
    hashes = [state.pel_hash.get(i) or state.hash_of(stream.get(i)) for i in ids]
    group.ack_many(ids)
    get, last = stream.get, group.last_id
    for entry_id, hash_value in zip(ids, hashes, strict=True):
        if entry_id <= last and get(entry_id) is not None:  # a PEL reference whose entry is gone (XDEL, KEEPREF) has nothing to deliver
            state.defer(entry_id, hash_value)
    return len(ids)


@command("xgroup|leave", 5, "write", keys=(2, 2, 1), group="stream", summary="Removes a consumer from a KEYSHARED group's ring, releasing its pending entries (Millrace).", since="8.2.0")
def xgroup_leave(ctx, argv):
    """XGROUP LEAVE key group consumer -> the number of pending entries released to the group."""
    stream, group = _group(ctx, argv[2], argv[3])
    was_member = argv[4] in group.keyshared.ring.members
    released = leave(stream, group, argv[4])
    if not was_member and not released:
        return 0, []
    return released, [[b"XGROUP", b"LEAVE", argv[2], argv[3], argv[4]]]


def delconsumer(ctx, argv, stream: Stream, group):
    """XGROUP DELCONSUMER in a KEYSHARED group: a leave (pending entries released, not discarded), then the deletion."""
    released = leave(stream, group, argv[4])
    if group.delete_consumer(argv[4]) is None:
        return 0, []
    return released, [[b"XGROUP", b"DELCONSUMER", argv[2], argv[3], argv[4]]]


def _internal(ctx, argv) -> None:
    if not ctx.loading:
        raise ReplyError(INTERNAL.format(arg_text(argv[1]).upper()))


def _join_effect(key: bytes, name: bytes, consumer: bytes) -> list[bytes]:
    return [b"XGROUP", b"JOIN", key, name, consumer]


@command("xgroup|join", 5, "write", keys=(2, 2, 1), group="stream", summary="Effect: adds a consumer to a KEYSHARED group's ring (Millrace, internal).", since="8.2.0")
def xgroup_join(ctx, argv):
    """XGROUP JOIN key group consumer -> 1 if it joined (replication and AOF loading only)."""
    _internal(ctx, argv)
    _stream, group = _group(ctx, argv[2], argv[3])
    group.consumer(argv[4], ctx.server.now)
    joined = group.keyshared.join(argv[4])
    return int(joined), [_join_effect(argv[2], argv[3], argv[4])] if joined else []


@command("xgroup|defer", -5, "write", keys=(2, 2, 1), group="stream", summary="Effect: entries a KEYSHARED group passed over (Millrace, internal).", since="8.2.0")
def xgroup_defer(ctx, argv):
    """XGROUP DEFER key group [WITHHASH] id [hash] [id [hash] ...] | RANGE first last -> OK (replication and AOF loading only).

    WITHHASH (an AOF rewrite) states each entry's hash: a deferred entry may have been deleted since.
    RANGE (a read's scan): every live entry from first to last that is neither pending nor deferred.
    """
    _internal(ctx, argv)
    stream, group = _group(ctx, argv[2], argv[3])
    state = group.keyshared
    args = argv[4:]
    if args and args[0].upper() == b"RANGE":
        if len(args) != 3:
            raise ReplyError("ERR syntax error")
        first, last = parse_strict_id(args[1]), parse_strict_id(args[2])
        pel, deferred, field = group.pel, state.deferred, state.field
        for entry_id, node, row in _new_entries(stream, first - 1, 256):
            if entry_id > last:
                break
            if entry_id not in pel and entry_id not in deferred:
                deferred.add(entry_id, sticky_hash(_key_of(node.fields, row, field)))
        return OK, [list(argv)]
    if args and args[0].upper() == b"WITHHASH":
        if len(args) % 2 == 0:
            raise ReplyError("ERR syntax error")
        for i in range(1, len(args), 2):
            state.defer(parse_strict_id(args[i]), to_int(args[i + 1]))
        return OK, [list(argv)]
    for arg in args:
        entry_id = parse_strict_id(arg)
        state.defer(entry_id, state.hash_of(stream.get(entry_id)))
    return OK, [list(argv)]


@command("xgroup|undefer", -5, "write", keys=(2, 2, 1), group="stream", summary="Effect: entries leaving a KEYSHARED group's deferred set (Millrace, internal).", since="8.2.0")
def xgroup_undefer(ctx, argv):
    """XGROUP UNDEFER key group id [id ...] -> OK (replication and AOF loading only)."""
    _internal(ctx, argv)
    _stream, group = _group(ctx, argv[2], argv[3])
    group.keyshared.undefer([parse_strict_id(arg) for arg in argv[4:]])
    return OK, [list(argv)]


def rewrite_setup(key: bytes, name: bytes, group):
    """AOF rewrite (server/rewrite.py), after XGROUP CREATE: the configuration, then the ring in join order."""
    state = group.keyshared
    yield [
        b"XGROUP", b"SETCONFIG", key, name, b"KEYSHARED", state.field,
        b"SESSION-TIMEOUT", b"%d" % state.session_timeout, b"LOOKAHEAD", b"%d" % state.lookahead,
    ]  # fmt: skip
    for member in state.ring.members:
        yield _join_effect(key, name, member)


def rewrite_deferred(key: bytes, name: bytes, group, batch: int = 256):
    """AOF rewrite, after the PEL: the deferred set, oldest first."""
    pairs = list(group.keyshared.deferred.items())
    for i in range(0, len(pairs), batch):
        part = pairs[i : i + batch]
        yield [b"XGROUP", b"DEFER", key, name, b"WITHHASH", *[x for entry_id, h in part for x in (format_id(entry_id), b"%d" % h)]]


def setid_hook(ctx, key: bytes, name: bytes, group) -> list:
    """A client's XGROUP SETID in a KEYSHARED group: every entry up to the new position counts as read,
    so the deferred set is cleared (its UNDEFER effect; a replayed SETID leaves the set alone)."""
    state = group.keyshared
    if state is None or ctx.loading or not state.deferred:
        return []
    return [[b"XGROUP", b"UNDEFER", key, name, *format_ids(state.clear_deferred())]]


# -- delivery ---------------------------------------------------------------------------


def _key_of(fields: tuple[bytes, ...], row: list, field: bytes) -> bytes:
    """An entry's key from its node row (no flat list built)."""
    if row[0] is not None:
        try:
            return row[fields.index(field)]
        except ValueError:
            return NONE_KEY
    flat = row
    for i in range(1, len(flat) - 1, 2):
        if flat[i] == field:
            return flat[i + 1]
    return NONE_KEY


def _new_entries(stream: Stream, after: int, chunk: int):
    """(id, node, row) of live entries after `after`, in order, read a few nodes at a time."""
    while True:
        spans = stream.spans(after + 1, MAX_ID, chunk)
        if not spans:
            return
        for node, ids, rows, lo, hi in spans:
            yield from zip(ids[lo:hi], [node] * (hi - lo), rows[lo:hi], strict=True)
        after = spans[-1][1][spans[-1][4] - 1]


def _ring_for(state: KeyShared, name: bytes) -> HashRing:
    if name in state.ring.members:
        return state.ring
    ring = HashRing()
    for member in state.ring.members:
        ring.add(member)
    ring.add(name)
    return ring


def can_deliver(stream: Stream, group, name: bytes) -> bool:
    """Whether a `>` read by name would deliver something now (pure: what a blocked reader waits for)."""
    state = group.keyshared
    state.settle()
    ring = _ring_for(state, name)
    deferred = state.deferred
    if ring is state.ring:  # name's own hashes: pending elsewhere only if draining
        candidates = deferred.owned_by(name)
        drain = state.drain
        draining_elsewhere = drain.__contains__
    else:  # not a member yet: as if it had joined (its hashes are pending at their current ring owners)
        candidates = ((i, h) for i, h in deferred.items() if ring.select(h) == name)
        holders = state.holders()
        draining_elsewhere = lambda h: h in holders and holders[h] != name  # noqa: E731
    for entry_id, h in candidates:
        if not draining_elsewhere(h) and stream.get(entry_id) is not None:
            return True
    room = state.lookahead_limit(0 if ring is state.ring else 1) - len(deferred)  # a read joins first
    held: set[int] = set()
    select, field, pel = ring.select, state.field, group.pel
    for entry_id, node, row in _new_entries(stream, group.last_id, 256):
        if entry_id in pel or entry_id in deferred:
            continue
        h = sticky_hash(_key_of(node.fields, row, field))
        if h not in held and select(h) == name and not draining_elsewhere(h):
            return True
        if room <= 0:
            return False
        room -= 1
        held.add(h)
    return False


def join_for_read(key: bytes, group_name: bytes, group, name: bytes, effects: list) -> None:
    """A consumer joins the ring by reading (also when it is about to block)."""
    if group.keyshared.join(name):
        effects.append(_join_effect(key, group_name, name))


def expire_sessions(stream: Stream, group, key: bytes, group_name: bytes, reader: bytes, now: int, effects: list) -> None:
    """Members silent for longer than SESSION-TIMEOUT leave, decided here on the primary (an XGROUP LEAVE effect)."""
    state = group.keyshared
    timeout = state.session_timeout
    if not timeout:
        return
    consumers = group.consumers
    for member in list(state.ring.members):
        consumer = consumers.get(member)
        if member != reader and (consumer is None or now - consumer.seen_time > timeout):
            leave(stream, group, member)
            effects.append([b"XGROUP", b"LEAVE", key, group_name, member])


class _Taken:
    """What one read delivers, in delivery order: IDs, their wire forms, reply items and hashes."""

    __slots__ = ("ids", "wids", "wires", "hashes")

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.wids: list[bytes] = []
        self.wires: list[bytes] = []
        self.hashes: list[int] = []


def _wire_item(wire_id: bytes, flat: list[bytes]) -> bytes:
    """One entry's reply item ([id, fields]) as the encoder writes it."""
    return b"*2\r\n$%d\r\n%s\r\n%s" % (len(wire_id), wire_id, pack_command(tuple(flat)))


_first = itemgetter(0)
USE_CURSORS = True  # the consumers' cursors over the deferred blocks (tests turn them off: same decisions, longer walks)
USE_BULK = True  # _take_deferred's bulk take of a block (tests turn it off: same decisions, entry by entry)


def _one(pos: int):
    """itemgetter(pos), answering a one-item tuple as itemgetter(*several) answers a tuple."""
    return lambda seq: (seq[pos],)


def _positions(owners: bytearray, byte: int, start: int, need: int) -> list[int]:
    """The first `need` positions of byte in owners from start (bytearray.find: memchr)."""
    find = owners.find
    found: list[int] = []
    pos = find(byte, start) if need > 0 else -1
    while pos >= 0:
        found.append(pos)
        if len(found) == need:  # no search past the last one wanted
            break
        pos = find(byte, pos + 1)
    return found


def _take_deferred(stream: Stream, state: KeyShared, name: bytes, limit: int, caps, extra: int, taken: _Taken, held: set, gone: list) -> int:
    """Step 1 of read_new: the caller's deferred entries, oldest first, found by their owner byte.

    A hash draining at another consumer is held (with every later entry of it: order). Entries whose
    stream entry is gone leave the set (`gone`). Returns the limit (lowered when MAXCOUNT/MAXSIZE stop).
    A block's entries are taken in bulk when none of them needs a decision (`_take_block` otherwise)."""
    dset = state.deferred
    me = dset.index.get(name)
    if me is None or not dset.size:
        return limit
    byte = min(me, OVERFLOW)
    exact = me >= OVERFLOW  # the byte is shared: each entry's owner checked by hash
    cursors = dset.cursors
    cursor = cursors.get(byte, 0) if USE_CURSORS and not exact else 0
    blocks = dset.blocks
    b = max(bisect_right(dset.firsts, cursor) - 1, 0)
    drain = state.drain  # the caller's hashes pending elsewhere are exactly those draining (state settled)
    first = stream.first_id if stream.length else MAX_ID  # a cached reply item is its entry's from here on (see DeferredSet)
    ids_out = taken.ids
    walk = [None, None]  # [first held ID, where the next walk may resume]
    bulk = USE_BULK and not exact and not caps
    while b < len(blocks) and walk[1] is None:
        block = blocks[b]
        b += 1
        if not block.live:
            continue
        owners, ids = block.owners, block.ids
        # Each block from its start, not from the cursor's position in it: the caller has no deferred entry
        # below its cursor, so the find loop meets none there either, and memchr over a few KB costs less
        # than a bisection through IDs deferred thousands of reads ago (each comparison a cache miss)
        if bulk and not held:
            found = _positions(owners, byte, 0, limit - len(ids_out))
            if not found:
                continue
            get = itemgetter(*found) if len(found) > 1 else _one(found[0])
            hs = get(block.hashes)
            wires = get(block.wires)
            if ids[found[0]] >= first and None not in wires and (not drain or drain.keys().isdisjoint(hs)):
                ids_out += get(ids)
                block_wids, block_wires = block.wids, block.wires
                taken.wids += get(block_wids)
                taken.wires += wires
                taken.hashes += hs
                for pos in found:  # taken: no longer deferred, its reply item no longer kept
                    owners[pos] = FREE
                    block_wires[pos] = block_wids[pos] = None
                block.live -= len(found)
                dset.size -= len(found)
                if len(ids_out) >= limit:
                    last = found[-1] + 1
                    walk[1] = ids[last] if last < len(ids) else ids[-1] + 1
                continue
        limit = _take_block(stream, state, dset, block, 0, name, byte, exact, first, limit, caps, extra, taken, held, gone, walk)
    if not exact:
        first_held, resume = walk
        if resume is None:
            resume = blocks[-1].ids[-1] + 1 if blocks else 0
        cursors[byte] = resume if first_held is None else min(first_held, resume)
    return limit


def _take_block(stream: Stream, state: KeyShared, dset, block, pos: int, name: bytes, byte: int, exact: bool, first: int, limit: int, caps, extra: int, taken: _Taken, held: set, gone: list, walk: list) -> int:
    """_take_deferred's walk of one block from pos, entry by entry (see there); walk: [first held ID, resume]."""
    owners, ids, hashes = block.owners, block.ids, block.hashes
    names, slots = dset.names, dset.slots
    drain, blocked = state.drain, state.blocked
    ids_out = taken.ids
    while True:
        pos = owners.find(byte, pos)
        if pos < 0:
            return limit
        h = hashes[pos]
        if exact and names[slots[h]] != name:
            pos += 1
            continue
        entry_id = ids[pos]
        if h in held or h in drain:  # the caller's hash, draining at another consumer
            if h not in held:
                held.add(h)
                blocked[h] = blocked.get(h, 0) + 1
            if walk[0] is None:
                walk[0] = entry_id
            pos += 1
            continue
        wire = block.wires[pos] if entry_id >= first and not caps else None
        if wire is not None:
            wire_id = block.wids[pos]
        else:
            flat = stream.get(entry_id)
            if flat is None:  # deleted or trimmed since: nothing to deliver
                gone.append(entry_id)
                owners[pos] = FREE
                block.wires[pos] = block.wids[pos] = None
                block.live -= 1
                dset.size -= 1
                pos += 1
                continue
            wire_id = format_id(entry_id)
            if caps and not caps.admit(wire_id, flat, extra):
                walk[1] = entry_id
                return len(ids_out)  # the budget is spent: nothing more in this read
            wire = _wire_item(wire_id, flat)
        owners[pos] = FREE
        block.wires[pos] = block.wids[pos] = None
        block.live -= 1
        dset.size -= 1
        ids_out.append(entry_id)
        taken.wids.append(wire_id)
        taken.wires.append(wire)
        taken.hashes.append(h)
        pos += 1
        if len(ids_out) >= limit:
            walk[1] = ids[pos] if pos < len(ids) else entry_id + 1
            return limit


def _scan_fast_applies(group) -> bool:
    """Whether no entry after last-delivered-id is pending (XGROUP SETID backwards and forced claims can make some so;
    none is deferred: the set holds entries at or below the cursor, and SETID clears it)."""
    last = group.last_id
    return not (group.pel and group.pel.last_bound() > last and group.pel.last() > last)


def _scan_fast(stream: Stream, state: KeyShared, name: bytes, after: int, need: int, room: int, taken: _Taken) -> tuple[list[int], int]:
    """Step 2 of read_new a node span at a time: keys, hashes and owner bytes by C-level maps, the caller's
    entries found with bytearray.find, the span up to where the read stops kept whole in the deferred
    blocks with its entries' reply items (formatted here, once, while the node's rows are at hand).
    Same decisions as _scan_slow (which runs when _scan_fast_applies() is false or MAXCOUNT/MAXSIZE apply).
    -> (scanned IDs, how many were deferred)."""
    dset, field = state.deferred, state.field
    slots, names = dset.slots, dset.names
    me = dset.index.get(name, -1)
    byte = min(me, OVERFLOW) if me >= 0 else FREE  # FREE: never found in fresh owner bytes
    exact = me >= OVERFLOW
    hash_get = _hash_cache.get
    drain, blocked = state.drain, state.blocked
    ids_out, wids_out, wires_out, hashes_out = taken.ids, taken.wids, taken.wires, taken.hashes
    scanned: list[int] = []
    newly = 0
    room = max(room, 0)  # a leave's release can overfill the deferred set
    while need > 0:
        # each entry is delivered (need) or deferred (room): no further; and a few nodes at a time, as
        # spans() decodes every node it covers and the scan usually stops well before need + room
        chunk = min(need + room, 256)
        spans = stream.spans(after + 1, MAX_ID, chunk)
        if not spans:
            break
        for node, node_ids, node_rows, lo, hi in spans:
            seg_ids, seg_rows, fields = node_ids[lo:hi], node_rows[lo:hi], node.fields
            at = fields.index(field) if field in fields else -1
            if at >= 0 and None not in (firsts := list(map(_first, seg_rows))):  # (None: an entry with its own field names)
                keys = firsts if at == 0 else list(map(itemgetter(at), seg_rows))
            else:
                keys = [_key_of(fields, row, field) for row in seg_rows]
            hs = list(map(hash_get, keys))
            if None in hs:
                hs = [h if h is not None else sticky_hash(k) for h, k in zip(hs, keys, strict=True)]
            owners = owner_bytes(slots, len(names), hs)
            n = len(seg_ids)
            pos = 0
            cut = n
            mine: list[int] = []
            stop = False
            while True:
                at = owners.find(byte, pos)
                end = n if at < 0 else at
                if end - pos > room:  # other consumers' entries: deferred as far as the look-ahead allows
                    cut = pos + room
                    room = 0
                    stop = True
                    break
                room -= end - pos
                if at < 0:
                    break
                h = hs[at]
                if (exact and names[slots[h]] != name) or h in drain:
                    # another consumer's (a shared byte), or the caller's hash draining elsewhere: it waits
                    if room <= 0:
                        cut = at
                        stop = True
                        break
                    room -= 1
                    if not exact or names[slots[h]] == name:
                        blocked[h] = blocked.get(h, 0) + 1
                    pos = at + 1
                    continue
                owners[at] = FREE
                mine.append(at)
                need -= 1
                pos = at + 1
                if not need:
                    cut = pos
                    stop = True
                    break
            if cut:
                if cut < n:
                    seg_ids, seg_rows, hs, owners = seg_ids[:cut], seg_rows[:cut], hs[:cut], owners[:cut]
                wids = format_ids(seg_ids)
                wires = wire_entries(None, fields, seg_rows, wids)
                if mine:
                    ids_out += map(seg_ids.__getitem__, mine)
                    wids_out += map(wids.__getitem__, mine)
                    wires_out += map(wires.__getitem__, mine)
                    hashes_out += map(hs.__getitem__, mine)
                    for at in mine:  # delivered now: the block keeps no reply item for them
                        wires[at] = wids[at] = None
                live = cut - len(mine)
                if live:
                    dset.add_span(seg_ids, array("H", hs), owners, live, wids, wires)
                    newly += live
                scanned += seg_ids
            if stop:
                return scanned, newly
            after = node_ids[hi - 1]
    return scanned, newly


def _scan_slow(stream: Stream, state: KeyShared, group, name: bytes, limit: int, count: int, caps, extra: int, taken: _Taken) -> tuple[list[int], int]:
    """Step 2 of read_new entry by entry (pending or deferred entries after the cursor, MAXCOUNT/MAXSIZE)."""
    deferred = state.deferred
    room = state.lookahead_limit() - len(deferred)
    (slots, names), field, pel = state.ring.table(), state.field, group.pel
    drain, blocked = state.drain, state.blocked
    chunk = 256 if not count else max(count - len(taken.ids), 16)
    scanned: list[int] = []
    newly = 0
    for entry_id, node, row in _new_entries(stream, group.last_id, chunk):
        if len(taken.ids) >= limit:
            break
        if entry_id in pel or entry_id in deferred:
            scanned.append(entry_id)
            continue
        fields = node.fields
        h = sticky_hash(_key_of(fields, row, field))
        draining = h in drain
        # (an older deferred entry of h would be the caller's, met in step 1: delivered, or held because
        # h drains elsewhere, which `draining` sees too; so no check for it here)
        if names[slots[h]] == name and not draining:
            wire_id = format_id(entry_id)
            flat = _expand(fields, row)
            if caps and not caps.admit(wire_id, flat, extra):
                break  # over MAXCOUNT/MAXSIZE: it stays after the cursor
            taken.ids.append(entry_id)
            taken.wids.append(wire_id)
            taken.wires.append(_wire_item(wire_id, flat))
            taken.hashes.append(h)
            scanned.append(entry_id)
            continue
        if room <= 0:
            break  # the look-ahead is full: this entry stays after the cursor
        room -= 1
        if draining:
            blocked[h] = blocked.get(h, 0) + 1
        deferred.add(entry_id, h)
        newly += 1
        scanned.append(entry_id)
    return scanned, newly


def read_new(loading: bool, stream: Stream, group, consumer, key: bytes, group_name: bytes, count: int, now: int, effects: list, caps=None, extra: int = 0, raw: bool = True):
    """`XREADGROUP ... >` in a KEYSHARED group, one atomic step (Pulsar's dispatcher, PIP-379):

    1. the caller's deferred entries, oldest first, whose hash does not drain at another consumer;
    2. then the entries after last-delivered-id: the caller's are delivered; those of other
       consumers, of hashes with older deferred entries, or of hashes draining elsewhere are
       deferred, until the deferred set reaches the look-ahead bound.

    None when nothing was delivered (what was deferred on the way still changed the group).
    MAXCOUNT/MAXSIZE (caps, read_caps.py) stop the read at the first entry they do not admit:
    it stays deferred, or after the cursor (`extra`: reply bytes per entry beyond [id, fields]).
    `loading`: a loading or replica client's read (no session-timeout decisions there).
    `raw`: the reply pre-encoded (Raw); else Entries of [wire ID, fields] (XREADGROUP ... CLAIM).
    Effects: UNDEFER of deferred entries found deleted, XCLAIM of the delivered ones, `XGROUP DEFER
    ... RANGE first last` for what the scan passed over (every live entry in the scanned range that is
    neither pending nor deferred yet: exactly what this read deferred), SETID.
    """
    state = group.keyshared
    name = consumer.name
    if not loading and state.session_timeout:
        expire_sessions(stream, group, key, group_name, name, now, effects)
    if name not in state.ring.member_set:
        join_for_read(key, group_name, group, name, effects)
    if state.unsettled:
        state.settle()
    limit = count or (1 << 62)
    taken = _Taken()
    held: set[int] = set()  # hashes held back in step 1: their later entries wait too (order)
    gone: list[int] = []
    if state.deferred.size:
        limit = _take_deferred(stream, state, name, limit, caps, extra, taken, held, gone)
    if gone:
        effects.append([b"XGROUP", b"UNDEFER", key, group_name, *format_ids(gone)])
    scanned: list[int] = []
    newly = 0
    if len(taken.ids) < limit:
        if not caps and _scan_fast_applies(group):
            room = state.lookahead_limit() - len(state.deferred)
            scanned, newly = _scan_fast(stream, state, name, group.last_id, limit - len(taken.ids), room, taken)
        else:
            scanned, newly = _scan_slow(stream, state, group, name, limit, count, caps, extra, taken)
    defer_effect = [b"XGROUP", b"DEFER", key, group_name, b"RANGE", format_id(scanned[0]), format_id(scanned[-1])] if newly else None
    if scanned:
        group.advance_many(stream, scanned)
    delivered = taken.ids
    if not delivered:
        if defer_effect:
            effects.append(defer_effect)
        if scanned:
            effects.append([b"XGROUP", b"SETID", key, group_name, format_id(group.last_id), b"ENTRIESREAD", b"%d" % group.entries_read])
        return None
    # In ID order: step 1's deferred entries lie at or below the cursor, step 2's after it
    wire_ids, wires, hashes = taken.wids, taken.wires, taken.hashes
    group.add_new(delivered, consumer, now, fresh=True)
    # KeyShared.track(), in bulk: none was pending or deferred, none drains and name is their ring owner,
    # so `drain` is unchanged and `hash_owner` leaves them to the ring
    state.pel_hash.update(zip(delivered, hashes, strict=True))
    consumer.active_time = now
    _delivered_ids.remember(wire_ids, delivered)  # XACK gets them back as sent: no parsing
    effects.append(delivery_effect(key, group_name, name, wire_ids, now, format_id(group.last_id)))
    if defer_effect:
        effects.append(defer_effect)
    if scanned:
        effects.append([b"XGROUP", b"SETID", key, group_name, format_id(group.last_id), b"ENTRIESREAD", b"%d" % group.entries_read])
    if raw:
        return Raw(b"*%d\r\n%s" % (len(wires), b"".join(wires)))
    return Entries([wire_id, stream.get(entry_id)] for wire_id, entry_id in zip(wire_ids, delivered, strict=True))


# -- claims: a hash moves as a whole ------------------------------------------------------


def claimed_new(stream: Stream, group, entry_id: int, consumer) -> None:
    """XCLAIM FORCE made entry_id pending (also when a delivery is replayed): index it."""
    state = group.keyshared
    state.track(entry_id, state.hash_of(stream.get(entry_id)), consumer.name)


def pull_siblings(
    stream: Stream, group, consumer, claimed_ids, key: bytes, group_name: bytes, now: int, justid: bool, retry_count: int,
    replies: list, effects: list, entry_reply, deleted: list | None = None,
) -> None:
    """After a client's claim: every other pending entry of each claimed hash moves to the claimer too,
    so no key is pending at two consumers (the reply may exceed COUNT; order is not promised). A sibling
    whose entry is gone leaves the PEL, listed in `deleted` (XAUTOCLAIM's third element) when given."""
    state = group.keyshared
    pel = group.pel
    hashes = {state.pel_hash[i] for i in claimed_ids if i in state.pel_hash and pel[i].consumer is consumer}
    if not hashes:
        return
    siblings = sorted(i for i, h in state.pel_hash.items() if h in hashes and pel[i].consumer is not consumer)
    for entry_id in siblings:
        pending = pel[entry_id]
        if stream.get(entry_id) is None:
            group.drop_pending(entry_id)
            effects.append([b"XACK", key, group_name, format_id(entry_id)])
            if deleted is not None:
                deleted.append(format_id(entry_id))
            continue
        pending = group.transfer(entry_id, pending, consumer)
        group.retime(entry_id, pending, now)  # every delivery-time change goes through retime (the CLAIM timeline)
        if retry_count >= 0:
            pending.delivery_count = retry_count
        elif not justid:
            pending.delivery_count = next_count(pending.delivery_count)
        replies.append(entry_reply(stream, entry_id, justid))
        effects.append(xclaim_effect(key, group_name, group, entry_id, pending))


def nack_ids(ctx, stream: Stream, group, ids: list[int], force: bool) -> list[int]:
    """XNACK in a KEYSHARED group: each ID's hash goes to the NACK zone whole, so the IDs asked for are
    followed by every other pending entry of their hashes (a replayed XNACK lists them all already)."""
    if ctx.loading:
        return ids
    state = group.keyshared
    hashes = set()
    for entry_id in ids:
        h = state.pel_hash.get(entry_id)
        if h is None and force and stream.get(entry_id) is not None:
            h = state.hash_of(stream.get(entry_id))
        if h is not None:
            hashes.add(h)
    siblings = sorted(i for i, h in state.pel_hash.items() if h in hashes)
    return list(dict.fromkeys([*ids, *siblings]))


def claim_read_rest(stream: Stream, group, consumer, group_name: bytes, room: int | None, now: int, key: bytes, effects: list, caps, reply: list) -> list | None:
    """XREADGROUP ... CLAIM in a KEYSHARED group, after claim.py's claims: every other pending entry of
    each claimed hash moves to the caller too (in the reply as claims: [id, fields, idle, count before];
    COUNT/MAXCOUNT may be exceeded, as XAUTOCLAIM's), then new entries by read_new's rules with what
    COUNT leaves ([id, fields, 0, 0])."""
    from .claim import deliver_claimed

    state = group.keyshared
    if consumer.name not in state.ring.member_set:  # a consumer joins by reading, also when its claims fill COUNT
        join_for_read(key, group_name, group, consumer.name, effects)
    pel = group.pel
    claimed = {state.pel_hash[parse_strict_id(item[0])] for item in reply if parse_strict_id(item[0]) in state.pel_hash}
    siblings = sorted(i for i, h in state.pel_hash.items() if h in claimed and pel[i].consumer is not consumer)
    for entry_id in siblings:
        pending = pel[entry_id]
        fields = stream.get(entry_id)
        if fields is None:
            group.drop_pending(entry_id)
            effects.append([b"XACK", key, group_name, format_id(entry_id)])
            continue
        idle = now - pending.delivery_time if pending.consumer is not None else -1
        deliver_claimed(group, consumer, key, group_name, entry_id, pending, fields, idle, pending.delivery_count, now, effects, reply)
    if room is None or room > 0:
        from .claim import _claim_bytes

        new = read_new(False, stream, group, consumer, key, group_name, room or 0, now, effects, caps, _claim_bytes(0, 0), raw=False)
        if new:
            reply += [[wire_id, fields, 0, 0] for wire_id, fields in new]
    return reply or None


def nacked(stream: Stream, group, entry_ids: list[int]) -> None:
    """After XNACK: the entries are pending at nobody; their hashes wait (for every consumer) until a claim
    (XCLAIM, XAUTOCLAIM: the whole hash moves) or their acknowledgement."""
    state = group.keyshared
    for entry_id in entry_ids:
        if entry_id not in state.pel_hash:  # FORCE made it pending
            state.track(entry_id, state.hash_of(stream.get(entry_id)), None)
        state.moved(entry_id, None)


# -- observability ------------------------------------------------------------------------


def group_info(stream: Stream, group, fields: dict, exact: bool) -> None:
    """XINFO GROUPS for a KEYSHARED group: deferred entries count in lag, not in entries-read; draining counters.

    With `stream-exact-lag yes` the lag has them already (storage/lag.py asks `held_back`)."""
    state = group.keyshared
    fields[b"entries-read"], fields[b"lag"] = lag_fields(stream, group, fields[b"entries-read"], fields[b"lag"], exact)
    back = held_back(group, stream)
    draining = state.draining()
    fields[b"key-shared-field"] = state.field
    fields[b"deferred"] = back
    fields[b"draining-hashes"] = len(draining)
    fields[b"draining-unacked"] = sum(state.drain[h] for h in draining)


def lag_fields(stream: Stream, group, entries_read: int | None, lag: int | None, exact: bool) -> tuple[int | None, int | None]:
    """A KEYSHARED group's entries-read and lag (XINFO GROUPS, XINFO STREAM FULL): its deferred entries
    are read by nobody yet. With `stream-exact-lag yes` the lag has them already (storage/lag.py)."""
    back = held_back(group, stream)
    if back:
        if lag is not None and not exact:
            lag += back
        if entries_read is not None:
            entries_read = max(entries_read - back, 0)
    return entries_read, lag


def consumer_info(group, name: bytes, fields: dict) -> None:
    """XINFO CONSUMERS for a KEYSHARED group: ring membership and the consumer's draining hashes."""
    state = group.keyshared
    mine = [h for h, owner in state.draining().items() if owner == name]
    fields[b"member"] = int(name in state.ring.members)
    fields[b"draining-hashes"] = len(mine)
    fields[b"draining-unacked"] = sum(state.drain[h] for h in mine)
    fields[b"blocked-attempts"] = sum(state.blocked.get(h, 0) for h in state.drain if state.ring.select(h) == name)


def _deferred_of(state: KeyShared, name: bytes) -> int:
    """How many deferred entries the ring gives to member name (its owner byte counted at C speed)."""
    dset = state.deferred
    me = dset.index.get(name)
    if me is None:
        return 0
    if me < OVERFLOW:
        return dset.count_owned(me)
    return sum(1 for _entry in dset.owned_by(name))


@command("xinfo|keyshared", -4, "readonly", keys=(2, 2, 1), group="stream", summary="Returns a KEYSHARED group's ring ranges and draining hashes (Millrace).", since="8.2.0")
def xinfo_keyshared(ctx, argv):
    """XINFO KEYSHARED key group [consumer] -> the group's configuration and, per consumer, its hash ranges and draining hashes."""
    if len(argv) > 5:
        raise ReplyError("ERR syntax error")
    stream = read_stream(ctx, argv[2])
    if stream is None:
        raise ReplyError("ERR no such key")
    group = stream.groups.get(argv[3])
    if group is None:
        raise _no_such_group(argv[3], argv[2])
    state = group.keyshared
    if state is None:
        raise ReplyError(NOT_KEYSHARED.format(arg_text(argv[3])))
    ranges = state.ring.ranges()
    draining = state.draining()
    oldest: dict[int, int] = {}
    for entry_id, h in state.pel_hash.items():
        if h in draining and (h not in oldest or entry_id < oldest[h]):
            oldest[h] = entry_id
    names = sorted(set(group.consumers) | set(state.ring.members))
    if len(argv) == 5:
        names = [n for n in names if n == argv[4]]
    consumers = []
    for name in names:
        hashes = [
            Map({
                b"hash": h, b"owner": name, b"unacked": state.drain[h],
                b"blocked-attempts": state.blocked.get(h, 0), b"oldest-pending-id": format_id(oldest[h]),
            })  # fmt: skip
            for h in sorted(draining)
            if draining[h] == name
        ]
        consumers.append(
            Map({
                b"name": name, b"member": int(name in state.ring.members), b"hash-ranges": ranges.get(name, []),
                b"deferred": _deferred_of(state, name) if name in state.ring.members else 0,
                b"draining-hashes": hashes,
            })  # fmt: skip
        )
    return Map({
        b"field": state.field, b"session-timeout": state.session_timeout, b"lookahead": state.lookahead_limit(),
        b"points": POINTS, b"members": len(state.ring.members), b"deferred": len(state.deferred), b"pending-hashes": len(state.pending_hashes()),
        b"draining-hashes": len(draining), b"draining-unacked": sum(state.drain[h] for h in draining),
        b"consumers": consumers,
    })  # fmt: skip

