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
(the deferred set). Replayed, they rebuild exactly the same state.
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections import deque

from protocol.errors import ReplyError, arg_text
from protocol.reply import OK, Entries, Map
from storage.claim import next_count
from storage.keyshared import NONE_KEY, POINTS, HashRing, KeyShared, _hash_cache, first_held_back, held_back, sticky_hash
from storage.lag import register_held_back
from storage.stream import Stream, _expand, expand_rows
from storage.stream_id import MAX_ID, format_id, format_ids, parse_strict_id

from ..command import command
from .args import LLONG_MAX, Cursor, to_int
from .group_config import setconfig_option
from .groups import _delivered_ids, delivery_effect, xclaim_effect  # groups.py imports this module last, once these exist
from .stream_args import lookup_stream, read_stream

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
    """XGROUP CREATE's argv without `KEYSHARED field` (anywhere after the ID), and the field."""
    for i in range(5, len(argv) - 1):
        if argv[i].upper() == b"KEYSHARED":
            return argv[:i] + argv[i + 2 :], argv[i + 1]
    return argv, None


def make_keyshared(stream: Stream, group, field: bytes) -> None:
    """Turn group into a KEYSHARED group on field (or re-key it), indexing its pending entries."""
    old = group.keyshared
    state = KeyShared(field)
    if old is not None:
        state.session_timeout, state.lookahead = old.session_timeout, old.lookahead
        for name in old.ring.members:
            state.ring.add(name)
    group.keyshared = state
    for entry_id, pending in group.pel.items():
        owner = pending.consumer.name if pending.consumer is not None else None  # None: NACKed, pending at nobody
        state.track(entry_id, state.hash_of(stream.get(entry_id)), owner)
    if old is not None:
        for entry_id in sorted(old.deferred):
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


def _apply_session_timeout(ctx, stream: Stream, name: bytes, group, value: int) -> None:
    group.keyshared.session_timeout = value


def _apply_lookahead(ctx, stream: Stream, name: bytes, group, value: int) -> None:
    group.keyshared.lookahead = value


# XGROUP SETCONFIG key group [KEYSHARED field | KEYSHARED OFF] [SESSION-TIMEOUT ms] [LOOKAHEAD n]
# (server/commands/group_config.py parses every option before applying any; SESSION-TIMEOUT and
# LOOKAHEAD need the group to be KEYSHARED already or a KEYSHARED field before them).
setconfig_option(b"KEYSHARED", _parse_keyshared, _apply_keyshared)
setconfig_option(b"SESSION-TIMEOUT", _parse_number(b"SESSION-TIMEOUT", LLONG_MAX), _apply_session_timeout)
setconfig_option(b"LOOKAHEAD", _parse_number(b"LOOKAHEAD", 1_000_000), _apply_lookahead)


def leave(stream: Stream, group, name: bytes) -> int:
    """The consumer leaves the ring; its pending entries go back to the group (deferred, for their new owners)."""
    state = group.keyshared
    state.remove_member(name)
    consumer = group.consumers.get(name)
    if consumer is None or not consumer.pel:
        return 0
    ids = list(consumer.pel)
    hashes = [state.pel_hash.get(i) or state.hash_of(stream.get(i)) for i in ids]
    group.ack_many(ids)
    get = stream.get
    for entry_id, hash_value in zip(ids, hashes, strict=True):
        if get(entry_id) is not None:  # a PEL reference whose entry is gone (XDEL, KEEPREF) has nothing to deliver
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
    """XGROUP DEFER key group [WITHHASH] id [hash] [id [hash] ...] -> OK (replication and AOF loading only).

    WITHHASH (an AOF rewrite) states each entry's hash: a deferred entry may have been deleted since.
    """
    _internal(ctx, argv)
    stream, group = _group(ctx, argv[2], argv[3])
    state = group.keyshared
    args = argv[4:]
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
    deferred = group.keyshared.deferred
    ids = sorted(deferred)
    for i in range(0, len(ids), batch):
        part = ids[i : i + batch]
        yield [b"XGROUP", b"DEFER", key, name, b"WITHHASH", *[x for entry_id in part for x in (format_id(entry_id), b"%d" % deferred[entry_id])]]


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
    ring = _ring_for(state, name)
    draining_elsewhere = state.draining_elsewhere
    deferred = state.deferred
    candidates = state.queues.get(name, ()) if ring is state.ring else sorted(i for i, h in deferred.items() if ring.select(h) == name)
    for entry_id in candidates:
        if not draining_elsewhere(deferred[entry_id], name) and stream.get(entry_id) is not None:
            return True
    room = state.lookahead_limit() - len(deferred)
    held: set[int] = set()
    select, field, pel = ring.select, state.field, group.pel
    for entry_id, node, row in _new_entries(stream, group.last_id, 256):
        if entry_id in pel or entry_id in deferred:
            continue
        h = sticky_hash(_key_of(node.fields, row, field))
        if h not in held and select(h) == name and not draining_elsewhere(h, name):
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


def _take_queue_fast(stream: Stream, state: KeyShared, name: bytes, queue: list[int], limit: int, delivered, bodies, hashes) -> bool:
    """The usual queue read in bulk: none of the first `limit` queued hashes is pending anywhere (so none
    drains) and the rows kept at deferral are all valid (their sealed nodes unchanged and still in the
    stream, checked once per node). False (nothing done) otherwise: read_new's loop decides."""
    take = queue[:limit]
    deferred, rows, row_nodes = state.deferred, state.rows, state.row_nodes
    hs = list(map(deferred.__getitem__, take))
    if any(map(state.hash_pending.__contains__, hs)):
        return False
    cached = list(map(rows.get, take))
    if None in cached:
        return False
    metas = list(map(row_nodes.__getitem__, take))  # kept with the row, always
    nodes, keys = stream.nodes, stream.keys
    fields = None
    for node, packed in dict.fromkeys(metas):  # each node once (a node hashes by identity)
        if packed is None or node.packed is not packed or nodes[bisect_right(keys, node.master_id) - 1] is not node:
            return False
        if fields is None:
            fields = node.fields
        elif node.fields != fields:
            fields = ()
    if fields:
        found = expand_rows(fields, cached)
    else:
        found = [_expand(node.fields, row) for (node, _packed), row in zip(metas, cached, strict=True)]
    delivered += take
    bodies += found
    hashes += hs
    del queue[: len(take)]
    deque(map(deferred.__delitem__, take), 0)
    deque(map(rows.__delitem__, take), 0)
    deque(map(row_nodes.__delitem__, take), 0)
    return True


def _scan_fast_applies(state: KeyShared, group) -> bool:
    """Whether no entry after last-delivered-id is pending or deferred (claims and leaves can make some so)."""
    last = group.last_id
    if group.pel and group.pel.last() > last:
        return False
    return all(not queue or queue[-1] <= last for queue in state.queues.values())


def _scan_fast(stream: Stream, state: KeyShared, name: bytes, after: int, need: int, room: int, delivered, bodies, hashes):
    """The scan past last-delivered-id a node span at a time: keys, hashes and owners by C-level maps,
    the caller's entries found with list.index, the runs between them deferred in bulk.
    Same decisions as the loop in read_new (which runs when _scan_fast_applies() is false)."""
    (slots, names), field = state.ring.table(), state.field
    me = names.index(name)
    hash_get = _hash_cache.get
    hash_pending, hash_owner, blocked = state.hash_pending, state.hash_owner, state.blocked
    deferred, rows, row_nodes, queues = state.deferred, state.rows, state.row_nodes, state.queues
    appenders: dict = {}
    scanned: list[int] = []
    newly: list[int] = []

    def defer_run(run_ids, run_hashes, run_owners, run_rows, node, packed) -> None:
        deferred.update(zip(run_ids, run_hashes, strict=True))
        rows.update(zip(run_ids, run_rows, strict=True))
        row_nodes.update(dict.fromkeys(run_ids, (node, packed)))
        for slot, entry_id in zip(run_owners, run_ids, strict=True):
            append = appenders.get(slot)
            if append is None:
                owner = names[slot]
                queue = queues.get(owner)
                if queue is None:
                    queue = queues[owner] = []
                append = appenders[slot] = queue.append
            append(entry_id)
        newly.extend(run_ids)

    room = max(room, 0)  # a leave's release can overfill the deferred set
    chunk = min(max(need, 64), 4096)
    while need > 0:
        spans = stream.spans(after + 1, MAX_ID, chunk)
        if not spans:
            break
        for node, ids, node_rows, lo, hi in spans:
            seg_ids, seg_rows, fields = ids[lo:hi], node_rows[lo:hi], node.fields
            if field in fields:
                index = fields.index(field)
                keys = [row[index] if row[0] is not None else _key_of(fields, row, field) for row in seg_rows]
            else:
                keys = [_key_of(fields, row, field) for row in seg_rows]
            hs = list(map(hash_get, keys))
            if None in hs:
                hs = [h if h is not None else sticky_hash(k) for h, k in zip(hs, keys, strict=True)]
            owners = list(map(slots.__getitem__, hs))  # indexes into names
            packed, n, pos = node.packed, len(seg_ids), 0
            stop = False
            while pos < n:
                try:
                    mine = owners.index(me, pos)
                except ValueError:
                    mine = n
                if mine > pos:  # other consumers' entries: deferred, as far as the look-ahead allows
                    run = min(mine - pos, room)
                    if run:
                        end = pos + run
                        defer_run(seg_ids[pos:end], hs[pos:end], owners[pos:end], seg_rows[pos:end], node, packed)
                        room -= run
                    if run < mine - pos:
                        pos += run
                        stop = True
                        break
                    pos = mine
                if mine == n:
                    break
                h = hs[mine]
                if h in hash_pending and hash_owner[h] != name:  # the caller's hash drains elsewhere: it waits
                    if room <= 0:
                        stop = True
                        break
                    blocked[h] = blocked.get(h, 0) + 1
                    defer_run(seg_ids[mine : mine + 1], hs[mine : mine + 1], owners[mine : mine + 1], seg_rows[mine : mine + 1], node, packed)
                    room -= 1
                else:
                    delivered.append(seg_ids[mine])
                    bodies.append(_expand(fields, seg_rows[mine]))
                    hashes.append(h)
                    need -= 1
                    if not need:
                        pos = mine + 1
                        stop = True
                        break
                pos = mine + 1
            scanned.extend(seg_ids[:pos])
            if stop:
                return scanned, newly
            after = seg_ids[-1]
    return scanned, newly


def read_new(loading: bool, stream: Stream, group, consumer, key: bytes, group_name: bytes, count: int, now: int, effects: list, caps=None, extra: int = 0) -> Entries | None:
    """`XREADGROUP ... >` in a KEYSHARED group, one atomic step (Pulsar's dispatcher, PIP-379):

    1. the caller's deferred entries, oldest first, whose hash does not drain at another consumer;
    2. then the entries after last-delivered-id: the caller's are delivered; those of other
       consumers, of hashes with older deferred entries, or of hashes draining elsewhere are
       deferred, until the deferred set reaches the look-ahead bound.

    None when nothing was delivered (what was deferred on the way still changed the group).
    MAXCOUNT/MAXSIZE (caps, read_caps.py) stop the read at the first entry they do not admit:
    it stays deferred, or after the cursor (`extra`: reply bytes per entry beyond [id, fields]).
    `loading`: a loading or replica client's read (no session-timeout decisions there).
    """
    state = group.keyshared
    name = consumer.name
    if not loading:
        expire_sessions(stream, group, key, group_name, name, now, effects)
    join_for_read(key, group_name, group, name, effects)
    limit = count or (1 << 62)
    delivered: list[int] = []
    bodies: list[list[bytes]] = []
    hashes: list[int] = []
    held: set[int] = set()  # hashes passed over in this read: their later entries wait too (order)
    deferred, rows, row_nodes = state.deferred, state.rows, state.row_nodes
    hash_pending, hash_owner = state.hash_pending, state.hash_owner
    blocked = state.blocked
    gone: list[int] = []
    queue = state.queues.get(name)
    if queue and not caps and _take_queue_fast(stream, state, name, queue, limit, delivered, bodies, hashes):
        queue = None  # the fast path took what the queue could give (see _take_queue_fast)
    if queue:
        kept: list[int] = []
        taken: list[int] = []
        position = 0
        nodes, keys = stream.nodes, stream.keys
        for entry_id in queue:
            if len(delivered) >= limit:
                break
            position += 1
            h = deferred[entry_id]
            if h in held or (h in hash_pending and hash_owner[h] != name):  # draining at another consumer
                if h not in held:
                    held.add(h)
                    blocked[h] = blocked.get(h, 0) + 1
                kept.append(entry_id)
                continue
            fields = None
            row = rows.get(entry_id)
            if row is not None:  # the row kept at deferral, while its sealed node is unchanged and still there
                node, packed = row_nodes[entry_id]
                if packed is not None and node.packed is packed and nodes[bisect_right(keys, entry_id) - 1] is node:
                    fields = _expand(node.fields, row)
            if fields is None:
                fields = stream.get(entry_id)
                if fields is None:
                    gone.append(entry_id)
                    continue
            if caps and not caps.admit(format_id(entry_id), fields, extra):
                position -= 1
                limit = len(delivered)  # the budget is spent: nothing more in this read
                break
            delivered.append(entry_id)
            bodies.append(fields)
            hashes.append(h)
            taken.append(entry_id)
        if gone or taken:
            state.queues[name] = kept + queue[position:]
            state.undefer(gone + taken, requeue=False)
    if gone:
        effects.append([b"XGROUP", b"UNDEFER", key, group_name, *format_ids(gone)])
    scanned: list[int] = []
    newly: list[int] = []
    if len(delivered) < limit and not caps and _scan_fast_applies(state, group):
        room = state.lookahead_limit() - len(deferred)
        scanned, newly = _scan_fast(stream, state, name, group.last_id, limit - len(delivered), room, delivered, bodies, hashes)
    elif len(delivered) < limit:
        room = state.lookahead_limit() - len(deferred)
        (slots, names), field, pel = state.ring.table(), state.field, group.pel
        queues = state.queues
        chunk = 256 if not count else max(count - len(delivered), 16)
        hash_cache = _hash_cache
        for entry_id, node, row in _new_entries(stream, group.last_id, chunk):
            if len(delivered) >= limit:
                break
            if entry_id in pel or entry_id in deferred:
                scanned.append(entry_id)
                continue
            fields = node.fields
            if row[0] is not None and field in fields:
                key_value = row[fields.index(field)]
            else:
                key_value = _key_of(fields, row, field)
            h = hash_cache.get(key_value) or sticky_hash(key_value)
            owner = names[slots[h]]
            draining = h in hash_pending and hash_owner[h] != name
            # (an older deferred entry of h would be in the caller's queue, met above: delivered, or
            # held because h drains elsewhere, which `draining` sees too; so no check for it here)
            if owner == name and not draining:
                body = _expand(fields, row)
                if caps and not caps.admit(format_id(entry_id), body, extra):
                    break  # over MAXCOUNT/MAXSIZE: it stays after the cursor
                delivered.append(entry_id)
                bodies.append(body)
                hashes.append(h)
                scanned.append(entry_id)
                continue
            if room <= 0:
                break  # the look-ahead is full: this entry stays after the cursor
            room -= 1
            if draining:
                blocked[h] = blocked.get(h, 0) + 1
            deferred[entry_id] = h  # KeyShared.defer(), inline: the hottest line of a KEYSHARED read
            owned = queues.get(owner)
            if owned is None:
                queues[owner] = [entry_id]
            elif not owned or entry_id > owned[-1]:
                owned.append(entry_id)
            else:
                insort(owned, entry_id)
            rows[entry_id] = row
            row_nodes[entry_id] = (node, node.packed)
            newly.append(entry_id)
            scanned.append(entry_id)
    if newly:
        effects.append([b"XGROUP", b"DEFER", key, group_name, *format_ids(newly)])
    if scanned:
        group.advance_many(stream, scanned)
    if not delivered:
        if scanned:
            effects.append([b"XGROUP", b"SETID", key, group_name, format_id(group.last_id), b"ENTRIESREAD", b"%d" % group.entries_read])
        return None
    if len(delivered) > 1 and delivered != sorted(delivered):  # the queue's entries, then newer ones: rarely out of order
        order = sorted(range(len(delivered)), key=delivered.__getitem__)
        delivered = [delivered[i] for i in order]
        bodies = [bodies[i] for i in order]
        hashes = [hashes[i] for i in order]
    group.add_new(delivered, consumer, now)
    state.pel_hash.update(zip(delivered, hashes, strict=True))  # KeyShared.track(), in bulk: none was pending or deferred
    for h in hashes:
        hash_pending[h] = hash_pending.get(h, 0) + 1
        hash_owner[h] = name
    consumer.active_time = now
    wire_ids = format_ids(delivered)
    _delivered_ids.remember(wire_ids, delivered)  # XACK gets them back as sent: no parsing
    effects.append(delivery_effect(key, group_name, name, wire_ids, now, format_id(group.last_id)))
    if scanned:
        effects.append([b"XGROUP", b"SETID", key, group_name, format_id(group.last_id), b"ENTRIESREAD", b"%d" % group.entries_read])
    return Entries(map(list, zip(wire_ids, bodies, strict=True)))


# -- claims: a hash moves as a whole ------------------------------------------------------


def claimed_new(stream: Stream, group, entry_id: int, consumer) -> None:
    """XCLAIM FORCE made entry_id pending (also when a delivery is replayed): index it."""
    state = group.keyshared
    state.track(entry_id, state.hash_of(stream.get(entry_id)), consumer.name)


def pull_siblings(stream: Stream, group, consumer, claimed_ids, key: bytes, group_name: bytes, now: int, justid: bool, retry_count: int, replies: list, effects: list, entry_reply) -> None:
    """After a client's claim: every other pending entry of each claimed hash moves to the claimer too,
    so no key is pending at two consumers (the reply may exceed COUNT; order is not promised)."""
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

        new = read_new(False, stream, group, consumer, key, group_name, room or 0, now, effects, caps, _claim_bytes(0, 0))
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
        state.hash_owner[state.pel_hash[entry_id]] = None


# -- observability ------------------------------------------------------------------------


def group_info(stream: Stream, group, fields: dict, exact: bool) -> None:
    """XINFO GROUPS for a KEYSHARED group: deferred entries count in lag, not in entries-read; draining counters.

    With `stream-exact-lag yes` the lag has them already (storage/lag.py asks `held_back`)."""
    state = group.keyshared
    back = held_back(group, stream)
    if back:
        if fields[b"lag"] is not None and not exact:
            fields[b"lag"] += back
        if fields[b"entries-read"] is not None:
            fields[b"entries-read"] = max(fields[b"entries-read"] - back, 0)
    draining = state.draining()
    fields[b"key-shared-field"] = state.field
    fields[b"deferred"] = back
    fields[b"draining-hashes"] = len(draining)
    fields[b"draining-unacked"] = sum(state.hash_pending[h] for h in draining)


def consumer_info(group, name: bytes, fields: dict) -> None:
    """XINFO CONSUMERS for a KEYSHARED group: ring membership and the consumer's draining hashes."""
    state = group.keyshared
    mine = [h for h, owner in state.draining().items() if owner == name]
    fields[b"member"] = int(name in state.ring.members)
    fields[b"draining-hashes"] = len(mine)
    fields[b"draining-unacked"] = sum(state.hash_pending[h] for h in mine)
    fields[b"blocked-attempts"] = sum(state.blocked.get(h, 0) for h in state.hash_pending if state.ring.select(h) == name)


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
                b"hash": h, b"owner": name, b"unacked": state.hash_pending[h],
                b"blocked-attempts": state.blocked.get(h, 0), b"oldest-pending-id": format_id(oldest[h]),
            })  # fmt: skip
            for h in sorted(draining)
            if draining[h] == name
        ]
        consumers.append(
            Map({
                b"name": name, b"member": int(name in state.ring.members), b"hash-ranges": ranges.get(name, []),
                b"deferred": len(state.queues.get(name, ())) if name in state.ring.members else 0,
                b"draining-hashes": hashes,
            })  # fmt: skip
        )
    return Map({
        b"field": state.field, b"session-timeout": state.session_timeout, b"lookahead": state.lookahead_limit(),
        b"points": POINTS, b"members": len(state.ring.members), b"deferred": len(state.deferred), b"pending-hashes": len(state.hash_pending),
        b"draining-hashes": len(draining), b"draining-unacked": sum(state.hash_pending[h] for h in draining),
        b"consumers": consumers,
    })  # fmt: skip

