"""Key-ordered delivery for a consumer group (Pulsar 4.0's Key_Shared with draining hashes, PIP-379).

The contract: in a KEYSHARED group the entries of one key are delivered, and
may be pending, at only one consumer at a time, and a consumer receives a
key's entries in stream order (not promised after an explicit re-delivery:
XCLAIM, XAUTOCLAIM). The key of an entry is the value of the group's field;
entries without the field share the key `NONE_KEY`, as in Pulsar.

Hashing is Pulsar's, so the same keys and consumer names give the same
assignment: `sticky_hash(key) = (murmur3_32(key) & 0x7fffffff) % 65535 + 1`,
and a consistent-hash ring where each consumer has 100 points, point i of
consumer `name` being `sticky_hash(name + b"\\0" + b"0" + b"\\0" + str(i))`
(the `0` is Pulsar's consumer-name index, always 0 here: names are unique in
a group). A hash goes to the consumer of the first point >= it, wrapping to
the first point; when two consumers' points collide the first to join keeps
the point and the next one takes it over when it leaves.

State of a group (`KeyShared`, hung on `ConsumerGroup.keyshared`):

- the ring (members in join order, which decides collisions);
- `pel_hash` (pending ID -> hash), kept in step with the PEL by the group's
  hooks, and `hash_owner` (hash -> the one consumer holding its pending
  entries) for the pending hashes that may not be at their ring owner: a
  pending hash it does not name is pending at its ring owner. So a read, which
  delivers hashes at their ring owner, writes nothing there; the hooks write
  whatever they move, and a ring change first writes down every pending
  hash's holder (the ring is about to name someone else). It may still name
  hashes with nothing pending left, until the next recount keeps only the
  draining ones;
- `drain` (draining hash -> its pending count), see below;
- `deferred` (ID -> hash): entries below the group's last-delivered-id that
  were passed over for another consumer or held back (Pulsar's replay
  queue), bounded by the look-ahead: a `DeferredSet` (keyshared_deferred.py),
  blocks of passed-over spans with one owner byte per entry, so a consumer
  finds its own at C speed; `queues` lists them per consumer (a view, for
  XINFO and tests).

A hash *drains* at its owner when it has pending entries there but the ring
now gives it to someone else: `draining(h) <=> h has pending entries and
owner(h) != ring(h)`. Only draining hashes are counted, as in PIP-379's
draining-hashes tracker: `drain` holds exactly them with their pending counts,
and every other pending hash is pending at its ring owner. A read delivers a
consumer only hashes the ring gives it that are not draining, so it never
changes `drain`; an acknowledgement lowers a draining hash's count and
releases it at zero. Whatever may move a hash off its ring owner (a join or
leave, a claim, a NACK, a forced claim, loading) marks the index `unsettled`,
and the next decision recounts `drain` from `pel_hash` and `hash_owner` (C-level
counting over the PEL), after which `hash_owner` names only the draining
hashes. So while nothing drains (the steady state), reads and
acknowledgements keep no per-hash state at all; and the state is derived from
the PEL index, never a reference count carried across ring changes (Pulsar's
needed a post-release fix for a stuck state): a hash that moves back to its
owner stops draining at the recount.

For lag: `held_back(group)` is the number of entries the group has passed over
and not delivered yet (the deferred set). A group's `>` cursor has moved past
them, so an exact lag is the entries after last-delivered-id plus
`held_back(group)`, and the entries the group has really read are
entries-read minus `held_back(group)`.

Pure: no clock, no I/O; times come in as arguments. Blocked-attempt counters
are statistics (like INFO stats): not persisted, not replicated.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter, deque
from itertools import repeat

from .keyshared_deferred import DeferredSet

NONE_KEY = b"NONE_KEY"  # Pulsar's key for messages without one
RANGE_SIZE = 65535  # hashes are 1..65535 (0 is Pulsar's "not set")
POINTS = 100  # ring points per consumer (subscriptionKeySharedConsistentHashingReplicaPoints)
LOOKAHEAD_PER_CONSUMER = 2000  # keySharedLookAheadMsgInReplayThresholdPerConsumer
LOOKAHEAD_MAX = 20000  # keySharedLookAheadMsgInReplayThresholdPerSubscription

_M32 = 0xFFFFFFFF


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of data, as an unsigned int (Austin Appleby's algorithm)."""
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _M32
    n = len(data)
    end = n & ~3
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * c2) & _M32
        h ^= k
        h = ((h << 13) | (h >> 19)) & _M32
        h = (h * 5 + 0xE6546B64) & _M32
    k = 0
    for i in range(n - end):
        k |= data[end + i] << (8 * i)
    if n - end:
        k = (k * c1) & _M32
        k = ((k << 15) | (k >> 17)) & _M32
        k = (k * c2) & _M32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return h


_hash_cache: dict[bytes, int] = {}


def sticky_hash(key: bytes) -> int:
    """Pulsar 4.0's sticky-key hash of key, in 1..65535 (memoized: a stream has far fewer keys than entries)."""
    value = _hash_cache.get(key)
    if value is None:
        if len(_hash_cache) >= 1 << 16:
            _hash_cache.clear()
        value = _hash_cache[key] = (murmur3_32(key) & 0x7FFFFFFF) % RANGE_SIZE + 1
    return value


def point_hashes(name: bytes, points: int = POINTS) -> list[int]:
    """The ring points of the consumer called name (Pulsar's name + NUL + name-index + NUL + i)."""
    return [sticky_hash(b"%s\x000\x00%d" % (name, i)) for i in range(points)]


def entry_key(fields: list[bytes] | None, field: bytes) -> bytes:
    """The key of an entry (its flat field/value list): the value of field, or NONE_KEY without it."""
    if fields is not None:
        for i in range(0, len(fields) - 1, 2):
            if fields[i] == field:
                return fields[i + 1]
    return NONE_KEY


class HashRing:
    """Pulsar's ConsistentHashingStickyKeyConsumerSelector over consumer names.

    Each member keeps one index into `names` (the lookup table's, see table()) for as long as it is a
    member: a join takes the lowest free one, a leave frees its own (None). So a join changes no other
    member's index, and updates the table in place (its new points' runs only) instead of rebuilding it.
    """

    __slots__ = ("members", "member_set", "points", "owners", "selected", "names", "index", "_table")

    def __init__(self) -> None:
        self.members: list[bytes] = []  # join order: it decides who keeps a colliding point
        self.member_set: set[bytes] = set()  # the same names, for membership tests on every read
        self.points: list[int] = []  # sorted ring points
        self.owners: dict[int, list[bytes]] = {}  # point -> consumers on it, the first selected
        self.selected: list[bytes] = []  # owners[points[i]][0], for select()
        self.names: list[bytes | None] = [None]  # table index -> member (None: free); never empty
        self.index: dict[bytes, int] = {}  # member -> its index in names, stable while it is a member
        self._table: tuple | None = None  # table()'s answer, built on first use after a leave

    def __contains__(self, name: bytes) -> bool:
        return name in self.member_set

    def add(self, name: bytes) -> None:
        """name joins: its new points go in by bisection and, once table() was built, their runs into it."""
        if name in self.member_set:
            return
        self.members.append(name)
        self.member_set.add(name)
        names = self.names
        slot = names.index(None) if None in names else len(names)
        if slot == len(names):
            names.append(None)
        names[slot] = name
        self.index[name] = slot
        table = self._table
        if table is not None and (len(names) > 255) != isinstance(table[0], array):
            table = self._table = None  # 16-bit slots from index 255 on: built anew
        owners, points, selected = self.owners, self.points, self.selected
        if table is not None:
            slots = table[0]
            one = array("H", (slot,)) if isinstance(slots, array) else bytes((slot,))  # in the table's own type
        for point in point_hashes(name):
            holders = owners.get(point)
            if holders is not None:
                if name not in holders:  # a consumer's own points may collide too: once is enough
                    holders.append(name)  # held: the first holder keeps the point
                continue
            owners[point] = [name]
            i = bisect_left(points, point)
            points.insert(i, point)
            selected.insert(i, name)
            if table is not None:
                # the hashes (previous point, point] are now name's; the first point also takes hash 0
                # and the wrap-around run after the last point
                low = points[i - 1] + 1 if i else 0
                slots[low : point + 1] = one * (point + 1 - low)
                if not i:
                    last = points[-1] + 1
                    slots[last:] = one * (RANGE_SIZE + 1 - last)

    def remove(self, name: bytes) -> None:
        """name leaves: its index is freed (the others keep theirs), the table built anew on next use."""
        if name not in self.member_set:
            return
        self.members.remove(name)
        self.member_set.discard(name)
        names = self.names
        names[self.index.pop(name)] = None
        while len(names) > 1 and names[-1] is None:
            names.pop()
        for point in set(point_hashes(name)):
            holders = self.owners[point]
            holders.remove(name)
            if not holders:
                del self.owners[point]
        self.points = sorted(self.owners)
        self.selected = [self.owners[p][0] for p in self.points]
        self._table = None

    def table(self) -> tuple:
        """select() for every hash at once: (slots, names), the owner of hash h being names[slots[h]].

        slots is a bytearray (an array of 16-bit indexes once names reaches 256): 64 KB per group, where
        a list of 65536 references would cost 512 KB; one C-level lookup per entry on the delivery path.
        Both are updated in place by add(): a holder of the pair sees the join (names keeps its indexes).
        """
        table = self._table
        if table is None:
            names, index = self.names, self.index
            wide = len(names) > 255
            points = self.points
            if not points:  # no members: names is [None] (trailing free indexes are dropped), one byte a slot
                slots = bytearray(RANGE_SIZE + 1)
            else:
                # One run per point (the hashes up to it, from the previous point's next), then the wrap-around
                # run to the first point's owner: the bytes of every run joined at once, a run being its
                # owner's index (one byte, or a native 16-bit item from index 255 on) repeated.
                lengths = [points[0] + 1, *map(int.__sub__, points[1:], points), RANGE_SIZE - points[-1]]
                owners = [*map(index.__getitem__, self.selected), index[self.selected[0]]]
                unit = [array("H", (i,)).tobytes() for i in range(len(names))] if wide else [bytes((i,)) for i in range(len(names))]
                raw = b"".join(map(bytes.__mul__, map(unit.__getitem__, owners), lengths))
                if wide:
                    slots = array("H")
                    slots.frombytes(raw)
                else:
                    slots = bytearray(raw)
            table = self._table = (slots, names)
        return table

    def select(self, hash_value: int) -> bytes | None:
        """The consumer whose point is the first >= hash_value (wrapping), None on an empty ring."""
        points = self.points
        if not points:
            return None
        i = bisect_left(points, hash_value)
        return self.selected[i if i < len(points) else 0]

    def ranges(self) -> dict[bytes, list[list[int]]]:
        """Each member's hash ranges [[start, end], ...] over 1..65535, adjacent ranges joined."""
        out: dict[bytes, list[list[int]]] = {name: [] for name in self.members}
        spans: list[list] = []  # [start, end, owner] in hash order
        start = 1
        for point, owner in zip(self.points, self.selected, strict=True):
            spans.append([start, point, owner])
            start = point + 1
        if self.points and start <= RANGE_SIZE:
            spans.append([start, RANGE_SIZE, self.selected[0]])  # the wrap-around goes to the first point
        merged: list[list] = []
        for span in spans:
            if merged and merged[-1][2] == span[2]:
                merged[-1][1] = span[1]
            else:
                merged.append(span)
        for start, end, owner in merged:
            out[owner].append([start, end])
        return out


class KeyShared:
    """A KEYSHARED group's configuration, ring, PEL hash index and deferred entries (see the module docstring)."""

    __slots__ = (
        "field", "session_timeout", "lookahead", "ring", "pel_hash", "hash_owner", "drain", "unsettled",
        "deferred", "blocked",
    )  # fmt: skip

    def __init__(self, field: bytes, session_timeout: int = 0, lookahead: int = 0) -> None:
        self.field = field
        self.session_timeout = session_timeout  # ms without a read before a member leaves; 0: never
        self.lookahead = lookahead  # deferred-set bound; 0: Pulsar's 2000 per consumer, at most 20000
        self.ring = HashRing()
        self.pel_hash: dict[int, int] = {}
        self.hash_owner: dict[int, bytes | None] = {}
        self.drain: dict[int, int] = {}  # draining hash -> its pending count (exact when not unsettled)
        self.unsettled = False  # a hash may have moved off its ring owner since the last recount
        self.deferred = DeferredSet()
        self.deferred.retable(self.ring.table())
        self.blocked: dict[int, int] = {}  # draining hash -> attempts held back while it drained (a statistic)

    # -- configuration -------------------------------------------------------------

    def lookahead_limit(self, joining: int = 0) -> int:
        """The deferred set's bound: LOOKAHEAD, else Pulsar's per consumer x members (with `joining` more), capped."""
        if self.lookahead:
            return self.lookahead
        return min(LOOKAHEAD_PER_CONSUMER * max(len(self.ring.members) + joining, 1), LOOKAHEAD_MAX)

    def hash_of(self, fields: list[bytes] | None) -> int:
        return sticky_hash(entry_key(fields, self.field))

    # -- membership ----------------------------------------------------------------

    def join(self, name: bytes) -> bool:
        """Add a consumer to the ring; whether it was not a member."""
        if name in self.ring:
            return False
        self._pin_owners()
        self.ring.add(name)
        self.deferred.retable(self.ring.table(), joined=name)
        self.unsettled = True
        return True

    def remove_member(self, name: bytes) -> bool:
        if name not in self.ring:
            return False
        self._pin_owners()
        self.ring.remove(name)
        self.deferred.retable(self.ring.table())
        self.unsettled = True
        return True

    def _pin_owners(self) -> None:
        """Before a ring change: each pending hash that hash_owner leaves to the ring gets its holder written down."""
        hash_owner = self.hash_owner
        slots, names = self.ring.table()
        for h in set(self.pel_hash.values()).difference(hash_owner):
            hash_owner[h] = names[slots[h]]

    @property
    def queues(self) -> dict[bytes | None, list[int]]:
        """The deferred IDs per consumer the ring gives their hash to, each in ID order (a view: XINFO, tests)."""
        out: dict[bytes | None, list[int]] = {}
        select = self.ring.select
        for entry_id, hash_value in self.deferred.items():
            out.setdefault(select(hash_value), []).append(entry_id)
        return out

    # -- the PEL index (the group's hooks call these) --------------------------------

    def track(self, entry_id: int, hash_value: int, owner: bytes | None) -> None:
        """entry_id became pending at owner (a delivery replayed, a forced claim, loading); it is no longer deferred."""
        self.deferred.discard(entry_id)
        hash_value = self.pel_hash.setdefault(entry_id, hash_value)
        self._own(hash_value, owner)

    def index_pending(self, pending) -> None:
        """Index a group's pending entries, (ID, hash, owner) each (loading, re-keying). A hash found pending
        at two consumers (re-keying on another field can make two keys one) is pending at nobody, as after
        XNACK: no reader gets its new entries until those are acknowledged or claimed (a claim moves them all)."""
        first: dict[int, bytes | None] = {}
        shared = set()
        for entry_id, hash_value, owner in pending:
            self.track(entry_id, hash_value, owner)
            if first.setdefault(hash_value, owner) != owner:
                shared.add(hash_value)
        for hash_value in shared:
            self._own(hash_value, None)

    def moved(self, entry_id: int, owner: bytes | None) -> None:
        """A pending entry changed owner (XCLAIM, XAUTOCLAIM, XNACK: None): its hash follows (all move together)."""
        hash_value = self.pel_hash.get(entry_id)
        if hash_value is not None:
            self._own(hash_value, owner)

    def _own(self, hash_value: int, owner: bytes | None) -> None:
        """hash_value's pending entries are at owner now: unsettled unless it is undrained and owner is its ring owner
        (settled, an undrained hash's pending entries are at its ring owner already: nothing moves)."""
        if hash_value in self.drain or self._ring_owner(hash_value) != owner:
            self.unsettled = True
        self.hash_owner[hash_value] = owner

    def _ring_owner(self, hash_value: int) -> bytes | None:
        slots, names = self.ring.table()
        return names[slots[hash_value]]

    def forget(self, entry_ids) -> None:
        """Pending entries acknowledged or dropped: draining hashes' counts go down, and at zero they are released."""
        drain = self.drain
        if not drain or self.unsettled:  # nothing to count (a recount reads pel_hash)
            deque(map(self.pel_hash.pop, entry_ids, repeat(None)), 0)
            return
        hash_owner, blocked = self.hash_owner, self.blocked
        for hash_value in map(self.pel_hash.pop, entry_ids, repeat(None)):
            left = drain.get(hash_value)
            if left is None:
                continue
            if left > 1:
                drain[hash_value] = left - 1
            else:
                del drain[hash_value]
                del hash_owner[hash_value]
                blocked.pop(hash_value, None)

    def settle(self) -> None:
        """Recount `drain` if a hash may have moved off its ring owner; hash_owner keeps the draining hashes only."""
        if not self.unsettled:
            return
        counts = self.pending_hashes()
        owners = self._owners_of(counts)
        slots, names = self.ring.table()
        self.drain = drain = {h: counts[h] for h, owner in owners.items() if names[slots[h]] != owner}
        self.hash_owner = {h: owners[h] for h in drain}  # every other pending hash is at its ring owner
        self.blocked = {h: n for h, n in self.blocked.items() if h in drain}
        self.unsettled = False

    def pending_hashes(self) -> Counter:
        """Hash -> pending count over every pending entry (O(PEL): XINFO, tests)."""
        return Counter(self.pel_hash.values())

    def holders(self) -> dict[int, bytes | None]:
        """Hash -> the consumer holding its pending entries, for every pending hash (O(PEL))."""
        return self._owners_of(self.pending_hashes())

    def _owners_of(self, hashes) -> dict[int, bytes | None]:
        """The holder of each of these pending hashes: hash_owner's, else its ring owner."""
        hash_owner = self.hash_owner
        slots, names = self.ring.table()
        return {h: hash_owner[h] if h in hash_owner else names[slots[h]] for h in hashes}

    def draining(self) -> dict[int, bytes | None]:
        """Draining hashes -> the consumer they drain at (pending there, given to someone else by the ring)."""
        self.settle()
        return {h: self.hash_owner[h] for h in self.drain}

    # -- the deferred set --------------------------------------------------------------

    def defer(self, entry_id: int, hash_value: int) -> None:
        """entry_id waits in the deferred set (for the consumer the ring gives hash_value to)."""
        self.deferred.add(entry_id, hash_value)

    def undefer(self, entry_ids) -> None:
        """Entries leave the deferred set (delivered, deleted, or cleared)."""
        discard = self.deferred.discard
        for entry_id in entry_ids:
            discard(entry_id)

    def clear_deferred(self) -> list[int]:
        ids = list(self.deferred)
        self.deferred.clear()
        return ids

    # -- snapshots -----------------------------------------------------------------------

    def dump(self) -> dict:
        """msgpack-able state; the deferred set and pending hashes as flat [id16, hash, ...] lists."""
        return {
            "field": self.field,
            "session-timeout": self.session_timeout,
            "lookahead": self.lookahead,
            "members": list(self.ring.members),
            "pending": [x for i, h in sorted(self.pel_hash.items()) for x in (i.to_bytes(16, "big"), h)],
            "deferred": [x for i, h in self.deferred.items() for x in (i.to_bytes(16, "big"), h)],
        }

    @classmethod
    def load(cls, data: dict, pel) -> KeyShared:
        """The inverse of dump(); pel is the group's PEL, which names each pending entry's owner."""
        state = cls(data["field"], data.get("session-timeout", 0), data.get("lookahead", 0))
        for name in data.get("members", []):
            state.ring.add(name)
        state.deferred.retable(state.ring.table())  # (join() does it per member)
        flat = data.get("pending", [])
        found = ((int.from_bytes(flat[i], "big"), flat[i + 1]) for i in range(0, len(flat), 2))
        state.index_pending((entry_id, h, pending_owner(pel[entry_id])) for entry_id, h in found if entry_id in pel)
        flat = data.get("deferred", [])
        for i in range(0, len(flat), 2):
            state.defer(int.from_bytes(flat[i], "big"), flat[i + 1])
        return state


def pending_owner(pending) -> bytes | None:
    """A pending entry's consumer name (None: NACKed, pending at nobody)."""
    return pending.consumer.name if pending.consumer is not None else None


def held_back(group, stream=None) -> int:
    """Entries a KEYSHARED group passed over and has not delivered yet (0 for a plain group): part of its lag.

    With the stream, only the live ones. Stream.delete() takes deleted entries out of the deferred set
    (XDEL, XDELEX, XACKDEL, ACKED/DELREF trims), so only plain trims from the head leave dead ones
    behind, all below first-id, until a read meets them."""
    state = getattr(group, "keyshared", None)
    if state is None:
        return 0
    deferred = state.deferred
    if stream is None or not deferred:
        return len(deferred)
    if not stream.length:
        return 0
    first = stream.first_id
    return len(deferred) if _oldest_deferred(state) >= first else sum(1 for _entry_id in deferred.irange(first))


def first_held_back(group, stream) -> int | None:
    """The oldest live deferred entry of a KEYSHARED group (None for a plain group, or none live)."""
    state = getattr(group, "keyshared", None)
    if state is None or not state.deferred or not stream.length:
        return None
    first = stream.first_id
    oldest = _oldest_deferred(state)
    if oldest >= first:
        return oldest
    return next(state.deferred.irange(first), None)


def _oldest_deferred(state: KeyShared) -> int:
    """min(state.deferred): the first live position of the first blocks (the set is kept in ID order)."""
    return state.deferred.first()
