"""Consumption-based retention (Pravega PDP-47) for one stream: the policy, group roles, the truncation point.

A stream with a CONSUMPTION policy keeps what its *subscriber* groups have not
yet processed, never less than its MIN limit and never more than its MAX
limit. Everything here is pure: the caller passes `now_ms`, gets back the
truncation point and the counters to record, and trims the stream itself
(the server propagates the trim as an exact `XTRIM key MINID = <id>`).

Cuts are exclusive IDs: a cut `c` means "entries with ID < c may go".

- A group's role is NONE (default: it holds nothing), AUTO (its release point
  is its ack floor: the lowest ID it still has pending, else the entry after
  its last-delivered-id) or MANUAL (`XGROUP RELEASE key group id` releases
  every entry <= id; the point never moves back).
- SLB, the subscribers' lower bound, is the lowest release point. With no
  subscriber the stream behaves as Pravega's plain policy: it keeps its MIN
  (everything older is consumed by definition) or, without a MIN, only MAX
  trims it.
- T = max(whole(min(SLB, MIN cut)), MAX cut): MIN moves the point back, MAX
  forward; what the subscribers and MIN release is freed a node at a time
  (`whole` rounds down to the first live entry of the node the point falls
  in, Pravega's "cut before the lower bound"), so a stream under a steady
  consumer trims once per node, not once per entry. MAX is exact and wins
  over MIN (a stream never holds more than MAX).
- Limits: LEN counts live entries; AGE compares the entry IDs' ms with now (an
  entry is `now - ms` old: MIN-AGE m keeps ms >= now - m, MAX-AGE m drops
  ms < now - m); BYTES is the stream's memory as MEMORY USAGE reports it
  (Stream.memory_usage() plus the key), measured in whole nodes: MIN-BYTES
  keeps the newest nodes until MEMORY USAGE would reach the limit, MAX-BYTES
  drops the oldest nodes whose keeping would take it past the limit (see
  _bytes_cut for how the node lists are counted so both hold afterwards).
- Entries a group loses are counted in its `entries_lost`: removed entries it
  had pending or not yet delivered (NONE, AUTO) or not yet released (MANUAL).
  The stream's `entries_lost` counts removed entries some subscriber still held
  (only MAX forces those).
"""

from __future__ import annotations

import struct
import sys
from bisect import bisect_left, bisect_right

from .rank import count_live
from .stream import node_memory
from .stream_id import MAX_ID

_getsizeof = sys.getsizeof
_EMPTY_LIST = sys.getsizeof([])
_POINTER = struct.calcsize("P")  # a list's slot
_DIGIT_BITS = sys.int_info.bits_per_digit

NONE, AUTO, MANUAL = b"none", b"auto", b"manual"
MODES = (NONE, AUTO, MANUAL)
RUN_MAX_ENTRIES = 100_000  # entries one run removes at most (the rest at the next run)


class GroupRole:
    """A group's subscriber role; `group` is the ConsumerGroup it belongs to (a recreated group starts over)."""

    __slots__ = ("group", "mode", "release", "entries_lost")

    def __init__(self, group, mode: bytes = NONE, release: int = 0, entries_lost: int = 0) -> None:
        self.group = group
        self.mode = mode
        self.release = release  # MANUAL: the last released ID (entries <= it may go)
        self.entries_lost = entries_lost


class Retention:
    """A stream's policy (None when OFF), its group roles and its counters."""

    __slots__ = ("policy", "roles", "entries_truncated", "entries_lost", "last_run", "meter")

    def __init__(self) -> None:
        self.policy: tuple[tuple[bytes, int] | None, tuple[bytes, int] | None] | None = None  # (min, max)
        self.roles: dict[bytes, GroupRole] = {}
        self.entries_truncated = 0
        self.entries_lost = 0
        self.last_run = 0
        self.meter: ByteMeter | None = None  # byte limits' cached node sizes (derived, never saved)

    # -- roles ---------------------------------------------------------------

    def role(self, stream, name: bytes) -> GroupRole | None:
        """The role of the group called name, if the group still exists and has one."""
        role = self.roles.get(name)
        if role is None:
            return None
        if stream.groups.get(name) is not role.group:  # destroyed (and maybe recreated): forget it
            del self.roles[name]
            return None
        return role

    def role_for(self, stream, name: bytes, group) -> GroupRole:
        role = self.role(stream, name)
        if role is None:
            role = self.roles[name] = GroupRole(group)
        return role

    def subscribers(self, stream) -> list[tuple[bytes, GroupRole]]:
        return [(name, role) for name in list(self.roles) if (role := self.role(stream, name)) is not None and role.mode != NONE]

    def is_empty(self) -> bool:
        return self.policy is None and not self.roles and not (self.entries_truncated or self.entries_lost or self.last_run)


def of(stream) -> Retention:
    """The stream's Retention, created on first use."""
    retention = stream.retention
    if retention is None:
        retention = stream.retention = Retention()
    return retention


def ack_floor(stream, group) -> int:
    """An AUTO subscriber's release point: the lowest pending ID whose entry still exists, else last-delivered + 1,
    or a KEYSHARED group's lowest deferred entry if lower (passed over is not delivered).

    A pending entry whose stream entry is gone (trimmed with its PEL reference
    kept, or XDEL'd) holds nothing: XCLAIM and XAUTOCLAIM would only drop it.
    Below the first entry they are all gone; above it only an XDEL'd one can
    be, which max-deleted-entry-id tells cheaply.
    """
    floor = _pel_floor(stream, group)
    keyshared = group.keyshared
    if keyshared is not None and keyshared.deferred:  # passed over, not delivered yet (issue 22): still held
        held = _deferred_floor(stream, keyshared)
        if held is not None and held < floor:
            return held
    return floor


def _pel_floor(stream, group) -> int:
    """ack_floor() from the PEL alone."""
    pel = group.pel
    last = group.last_id
    if pel and stream.length:  # in an empty stream every pending entry is gone
        first = pel.first()
        if first > last:
            return last + 1
        max_deleted = stream.max_deleted_entry_id
        if stream.first_id <= first and first > max_deleted:
            return first
        for entry_id in pel.irange(stream.first_id, last):
            if entry_id > max_deleted or stream.get(entry_id) is not None:
                return entry_id
    return last + 1


def _deferred_floor(stream, keyshared) -> int | None:
    """A KEYSHARED group's lowest deferred entry that still exists (the set is kept in ID order)."""
    max_deleted = stream.max_deleted_entry_id
    for entry_id in keyshared.deferred.irange(stream.first_id):
        if entry_id > max_deleted or stream.get(entry_id) is not None:
            return entry_id
    return None


# -- counting entries ------------------------------------------------------------


def _entry_at(stream, index: int) -> int:
    """The ID of the live entry at index (0 = oldest) from the head."""
    for node in stream.nodes:
        if index < node.count:
            return stream.node_ids(node)[index]
        index -= node.count
    raise IndexError(index)


def count_below(stream, cut: int, cap: int = MAX_ID) -> tuple[int, int]:
    """Live entries with ID < cut, counted from the head, and the cut lowered so that at most cap go."""
    counted = 0
    for node in stream.nodes:
        if node.master_id >= cut:
            break
        if node.last_id < cut:
            n = node.count
        else:
            n = bisect_left(stream.node_ids(node), cut)
        if counted + n > cap:
            return cap, stream.node_ids(node)[cap - counted]
        counted += n
        if n < node.count:
            break
    return counted, cut


# -- the truncation point ---------------------------------------------------------


def _len_cut(stream, keep: int) -> int:
    """The cut that keeps the newest `keep` live entries."""
    if len(stream) <= keep:
        return 0
    if keep == 0:
        return stream.last_id + 1
    return _entry_at(stream, len(stream) - keep)


def _age_cut(now_ms: int, age: int) -> int:
    """The cut below the entries at most `age` ms old (ms >= now - age)."""
    ms = now_ms - age
    return ms << 64 if ms > 0 else 0


class ByteMeter:
    """Each node's part of MEMORY USAGE (node_memory() plus its key), kept between runs with a running total.

    A sealed node's bytes change only when entries leave it (an XDEL or a trim
    lowers its live count and repacks it) or when it is unsealed as the tail
    (after a load). So the meter keeps the sealed nodes it measured, in order,
    with their live counts and the prefix sums of their sizes: nodes that left
    the head are dropped from the front, newly sealed ones measured at the
    back, a head whose count dropped (a partial trim) measured again alone.
    Anything else (an XDEL in a sealed node, a node gone from the middle) shows
    as the measured nodes no longer ending where the stream's sealed ones do,
    or their counts no longer adding up to the live entries outside the open
    tail: then every node is measured again. The open tail is only appended to
    until an XDEL or a trim touches it: appended entries are added one by one.
    So a run costs O(1) on a stream that only grows at the tail (each node is
    measured once, when sealed), and any node suffix's size is O(1).
    """

    __slots__ = (
        "nodes", "counts", "cum", "start", "live", "last_packed", "sealed", "lists", "seen", "base",
        "tail", "tail_ids", "tail_rows", "tail_seen", "tail_entries", "tail_fixed", "tail_lists", "tail_room", "tail_size",
        "ids_sized", "row", "row_size",
    )  # fmt: skip

    def __init__(self) -> None:
        self.nodes: list = []  # the measured sealed nodes: nodes[start:] are the stream's first ones
        self.counts: list[int] = []  # their live counts when measured
        self.cum: list[int] = [0]  # prefix sums: nodes[j]'s size is cum[j + 1] - cum[j] (cum[start] moves when the head is remeasured)
        self.start = 0
        self.live = 0  # sum(counts[start:])
        self.last_packed = None  # the last measured node's packed bytes: it alone can have been unsealed and sealed again
        self.sealed = 0  # cum[-1] - cum[start]
        self.lists = 0  # the sizes of the stream's two node lists
        self.seen = (None, None, -1)  # (node list, key list, node count) after a run that found an open tail
        self.base = (-1, 0)  # (interned field sets, Stream.base_memory()): the sets are only ever added to
        self.tail = None  # the open tail whose entries tail_entries sums, the first tail_seen of them
        self.tail_ids = self.tail_rows = None  # its lists then
        self.tail_seen = 0
        self.tail_entries = 0
        self.tail_fixed = 0  # the tail object, its master ID and key
        self.tail_lists = 0  # the sizes of its two lists, which hold up to tail_room entries without growing
        self.tail_room = -1
        self.tail_size = 0  # the open tail's size with its key (0: the last node is sealed)
        self.ids_sized = (1, 0, 0)  # the IDs from floor to below (excluded) take size bytes (sys.int_info: per digit)
        self.row = None  # the last row measured and its size with its items (appends often share one row)
        self.row_size = 0

    def measure(self, stream) -> int:
        """Bring the sizes up to date; the sum over all nodes (what MEMORY USAGE adds for them, without the node lists' slots)."""
        nodes = stream.nodes
        seen = self.seen
        tail = self.tail
        if (
            nodes is seen[0] and stream.keys is seen[1] and len(nodes) == seen[2] and nodes[-1] is tail
            and tail.ids is self.tail_ids and not tail.deleted and stream.length - tail.count == self.live
        ):  # fmt: skip
            # The usual run: only entries appended to the same open tail (the node lists as they were).
            ids = tail.ids
            n = len(ids)
            if n != self.tail_seen:
                floor, below, id_size = self.ids_sized
                if n == self.tail_seen + 1 and n <= self.tail_room and floor <= ids[-1] < below and tail.rows[-1] is self.row:
                    # one entry, its ID as long as the last one, its row the last one's, room in the lists
                    self.tail_seen = n
                    self.tail_entries += id_size + self.row_size
                    self.tail_size += id_size + self.row_size
                else:
                    self._appended(tail, ids)
            return self.sealed + self.tail_size
        tail = nodes[-1] if nodes and nodes[-1].packed is None else None
        sealed = len(nodes) - (tail is not None)
        if not self._follow(stream, sealed) or self.live != stream.length - (tail.count if tail is not None else 0):
            self._measure_all(stream, sealed)
        self.sealed = self.cum[-1] - self.cum[self.start]
        self.lists = _getsizeof(nodes) + _getsizeof(stream.keys)
        if tail is None:
            self.tail_size = 0
            self.seen = (None, None, -1)
        else:
            self._tail_size(tail, stream.keys[-1])
            self.seen = (nodes, stream.keys, len(nodes))
        return self.sealed + self.tail_size

    def base_memory(self, stream) -> int:
        """stream.base_memory(), measured again only when a field set was interned."""
        fields = len(stream._fields)
        if self.base[0] != fields:
            self.base = (fields, stream.base_memory())
        return self.base[1]

    def suffix(self, i: int) -> int:
        """The size of the stream's nodes from index i on (after measure(), with i <= len(nodes))."""
        j = self.start + i
        cum = self.cum
        if j < len(cum) - 1:
            return cum[-1] - cum[j] + self.tail_size
        return self.tail_size if j == len(cum) - 1 else 0

    def sizes(self, stream) -> list[int]:
        """Per node, oldest first: the bytes it adds to MEMORY USAGE (without the node lists' slots)."""
        self.measure(stream)
        cum, start = self.cum, self.start
        out = [cum[j + 1] - cum[j] for j in range(start, len(cum) - 1)]
        return [*out, self.tail_size] if self.tail_size else out

    def _follow(self, stream, sealed: int) -> bool:
        """Catch up with appends and head trims; False when something else changed (measure everything).

        A measured node other than the last changes only by losing entries (its count drops): the head is
        checked here, the others by the caller's sum. The last one may also have been unsealed, appended
        to and sealed again (its count can then be anything): its packed bytes tell."""
        nodes, keys, mine, counts, cum = stream.nodes, stream.keys, self.nodes, self.counts, self.cum
        start = self.start
        if start < len(mine):
            if not sealed:
                return False
            head = nodes[0]
            if mine[start] is not head:  # nodes left the head
                j = bisect_left(mine, head.master_id, start, key=_master_id)
                if j < len(mine) and mine[j] is not head:
                    return False
                self.live -= sum(counts[start:j])
                start = self.start = j
                if start > 64 and 2 * start > len(mine):  # forget what left, now and then
                    del mine[:start], counts[:start], cum[:start]
                    start = self.start = 0
            measured = len(mine) - start
            if measured > sealed:  # the last one was unsealed: it is the open tail now
                if measured != sealed + 1 or mine[-1] is not nodes[-1]:
                    return False
                mine.pop()
                cum.pop()
                self.live -= counts.pop()
                measured -= 1
            elif measured and mine[-1].packed is not self.last_packed:  # unsealed and sealed again (or lost entries)
                if nodes[measured - 1] is not mine[-1]:
                    return False
                node = mine[-1]
                cum[-1] = cum[-2] + node_memory(node) + _getsizeof(keys[measured - 1])
                self.live += node.count - counts[-1]
                counts[-1] = node.count
            if measured and nodes[measured - 1] is not mine[-1]:  # a node went from the middle
                return False
            if measured and counts[start] != head.count:  # the head was trimmed into (or lost an entry)
                cum[start] = cum[start + 1] - node_memory(head) - _getsizeof(keys[0])
                self.live += head.count - counts[start]
                counts[start] = head.count
        else:
            measured = 0
        for i in range(measured, sealed):  # sealed since the last run
            node = nodes[i]
            mine.append(node)
            counts.append(node.count)
            cum.append(cum[-1] + node_memory(node) + _getsizeof(keys[i]))
            self.live += node.count
        self.last_packed = mine[-1].packed if len(mine) > start else None
        return True

    def _measure_all(self, stream, sealed: int) -> None:
        nodes, keys = stream.nodes, stream.keys
        self.nodes = nodes[:sealed]
        self.counts = [node.count for node in self.nodes]
        cum = self.cum = [0]
        total = 0
        for i in range(sealed):
            total += node_memory(nodes[i]) + _getsizeof(keys[i])
            cum.append(total)
        self.start = 0
        self.live = sum(self.counts)
        self.last_packed = self.nodes[-1].packed if sealed else None

    def _tail_size(self, tail, key: int) -> None:
        """tail_size: node_memory(tail) plus its key; a tail that lost entries is measured afresh every time."""
        ids, rows = tail.ids, tail.rows
        if tail.deleted or tail is not self.tail or ids is not self.tail_ids or rows is not self.tail_rows or len(ids) < self.tail_seen:
            self.tail, self.tail_ids, self.tail_rows, self.tail_seen, self.tail_entries, self.tail_room = tail, ids, rows, 0, 0, -1
            self.tail_fixed = _getsizeof(tail) + _getsizeof(tail.master_id) + _getsizeof(key)
        self._appended(tail, ids)
        if tail.deleted or not ids:  # its last ID is a tombstone's
            self.tail_size += _getsizeof(tail.last_id) - self.ids_sized[2]

    def _appended(self, tail, ids) -> None:
        """tail_size after the entries appended to the tail since the last call (no entry left it).

        Appends reallocate a list only when it is full, so the lists' sizes are asked again only then; an
        int's size depends only on its count of digits, so IDs are measured once per count; the last ID is
        the last entry's; rows are often one shared list, measured once."""
        n = len(ids)
        id_floor, id_below, id_size = self.ids_sized
        seen = self.tail_seen
        if seen < n:
            rows = tail.rows
            entries = self.tail_entries
            last_row, row_size = self.row, self.row_size
            for j in range(seen, n):
                row = rows[j]
                if row is not last_row:
                    last_row, row_size = row, _getsizeof(row) + sum(map(_getsizeof, row))
                entry_id = ids[j]
                if not id_floor <= entry_id < id_below:
                    id_floor, id_below, id_size = _id_sized(entry_id)
                entries += id_size + row_size
            self.row, self.row_size = last_row, row_size
            self.tail_entries = entries
            self.tail_seen = n
        elif n and not id_floor <= ids[-1] < id_below:
            id_floor, id_below, id_size = _id_sized(ids[-1])
        self.ids_sized = (id_floor, id_below, id_size)
        if n > self.tail_room:  # appended past the slots they had: reallocated
            ids_size, rows_size = _getsizeof(ids), _getsizeof(tail.rows)
            self.tail_lists = ids_size + rows_size
            self.tail_room = (min(ids_size, rows_size) - _EMPTY_LIST) // _POINTER
        self.tail_size = self.tail_fixed + id_size + self.tail_lists + self.tail_entries


def _id_sized(entry_id: int) -> tuple[int, int, int]:
    """(floor, below, size): the ints from floor to below (excluded) have entry_id's count of digits, and its size."""
    digits = -(-entry_id.bit_length() // _DIGIT_BITS)
    if not digits:
        return 1, 0, _getsizeof(entry_id)  # 0: a range of nothing
    return 1 << _DIGIT_BITS * (digits - 1), 1 << _DIGIT_BITS * digits, _getsizeof(entry_id)


def _master_id(node) -> int:
    return node.master_id


def _bytes_cut(stream, meter: ByteMeter, limit: int, keep_until_reached: bool, extra: int) -> int:
    """Whole-node cuts by MEMORY USAGE, counted from the newest node back.

    A node adds its size (ByteMeter) and a slot to each of the two node
    lists. MAX keeps the newest nodes while the total stays within limit,
    counting the lists at their current allocation (they only shrink when
    nodes go), so MEMORY USAGE afterwards is within limit. MIN keeps nodes
    until the total reaches limit, counting the lists at the least they can
    take (8 bytes a slot), so MEMORY USAGE afterwards reaches it. The count
    from node i on only grows as i goes back, so the node is found by
    bisection over the meter's running sums, not by a walk.

    A node with no live entry (what an exact trim can leave) cannot be where
    a trim starts keeping: the trim drops it with the nodes before it. So MAX
    keeps from the first live entry at or after the node it finds (everything
    when none is), MIN from the first live entry of the nearest node at or
    before it that has one (nothing goes when none has: keeping any less
    would not reach the limit).
    """
    nodes = stream.nodes
    n = len(nodes)
    if not n:
        return 0
    whole = meter.measure(stream)
    suffix = meter.suffix
    if keep_until_reached:
        total = meter.base_memory(stream) + 2 * _EMPTY_LIST + extra
        if total + whole + 16 * n < limit:
            return 0
        lo, hi = 0, n - 1  # the last node i whose count from i on reaches limit: node lo's does
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if total + suffix(mid) + 16 * (n - mid) >= limit:
                lo = mid
            else:
                hi = mid - 1
        for i in range(lo, -1, -1):
            if nodes[i].count:
                return stream.node_ids(nodes[i])[0]
        return 0
    total = meter.base_memory(stream) + meter.lists + extra
    if total + whole <= limit:
        return 0
    lo, hi = 1, n  # the first node k whose count from k on is within limit (n: none, everything goes)
    while lo < hi:
        mid = (lo + hi) // 2
        if total + suffix(mid) <= limit:
            hi = mid
        else:
            lo = mid + 1
    for i in range(lo, n):
        if nodes[i].count:
            return stream.node_ids(nodes[i])[0]
    return stream.last_id + 1


def _within(stream, retention: Retention, limit: int, extra: int) -> bool:
    """MAX-BYTES takes nothing: MEMORY USAGE as _bytes_cut counts it for MAX is within limit (its cut is 0)."""
    meter = retention.meter
    if meter is None:
        meter = retention.meter = ByteMeter()
    return not stream.nodes or meter.measure(stream) + meter.base_memory(stream) + meter.lists + extra <= limit


def limit_cut(stream, retention: Retention, limit: tuple[bytes, int], now_ms: int, is_min: bool, extra_bytes: int = 0) -> int:
    kind, value = limit
    if kind == b"len":
        return _len_cut(stream, value)
    if kind == b"age":
        return _age_cut(now_ms, value)
    if retention.meter is None:
        retention.meter = ByteMeter()
    return _bytes_cut(stream, retention.meter, value, is_min, extra_bytes)


class Plan:
    """What one run decided: the cut, the group holding the head, the subscribers' lower bound."""

    __slots__ = ("cut", "holder", "slb", "removed", "keep_from")

    def __init__(self, cut: int, holder: bytes | None, slb: int | None, removed: int, keep_from: int | None) -> None:
        self.cut, self.holder, self.slb, self.removed = cut, holder, slb, removed
        self.keep_from = keep_from  # the first entry kept (None: none is), what the trim names as MINID


def head_holder(stream, retention: Retention) -> tuple[bytes | None, int | None]:
    """The subscriber with the lowest release point (the first by name on ties) and that point."""
    holder, slb = None, None
    groups = stream.groups
    gone = None
    for name, role in retention.roles.items():
        if role.mode == NONE:
            continue
        if groups.get(name) is not role.group:
            gone = [*(gone or ()), name]
            continue
        point = role.release + 1 if role.mode == MANUAL else ack_floor(stream, role.group)
        if slb is None or point < slb or (point == slb and name < holder):
            holder, slb = name, point
    for name in gone or ():
        retention.role(stream, name)  # destroyed: forgotten
    return holder, slb


def _first_live_node(stream):
    """The first node with a live entry (the stream is not empty): an exact trim that ends in a deleted
    entry keeps its node, as Redis does, with tombstones only, and such nodes hold nothing to keep or release."""
    for node in stream.nodes:
        if node.count:
            return node
    raise ValueError("an empty stream has no live node")


def whole_nodes(stream, cut: int) -> int:
    """cut rounded down so that only whole nodes go: a node with live entries on both sides of it stays whole."""
    i = bisect_right(stream.keys, cut) - 1
    if i < 0:
        return cut
    ids = stream.node_ids(stream.nodes[i])
    if ids and ids[0] < cut <= ids[-1]:
        return ids[0]
    return cut


def plan(stream, retention: Retention, now_ms: int, cap: int = RUN_MAX_ENTRIES, extra_bytes: int = 0) -> Plan | None:
    """The truncation this run makes, or None when the policy is off or nothing goes.

    extra_bytes: what MEMORY USAGE adds to the stream's own size (its key), for byte limits.
    """
    length = stream.length
    if retention.policy is None or not length:
        return None
    minimum, maximum = retention.policy
    head = stream.nodes[0]
    if not head.count:
        head = _first_live_node(stream)
    first_count = head.count
    max_idle = maximum is None or (length <= maximum[1] if maximum[0] == b"len" else maximum[0] == b"bytes" and _within(stream, retention, maximum[1], extra_bytes))  # MAX takes nothing
    if max_idle and minimum is not None and minimum[0] == b"len" and length - minimum[1] < first_count:
        # The MIN-LEN cut lies within the first node, and so does min(SLB, MIN cut): no whole node goes.
        # (What the usual write to a stream under a steady consumer finds: O(1).)
        return None
    holder, slb = head_holder(stream, retention)
    if max_idle and (slb is None and minimum is None or slb is not None and slb <= stream.node_ids(head)[-1]):
        return None  # the subscribers hold the first node (or, without them and MIN, nothing goes)
    if slb is not None:
        cut = slb
    else:
        cut = MAX_ID + 1 if minimum is not None else 0
    if minimum is not None:
        if minimum[0] == b"len":
            # The n-th newest entry is looked for from the head: a short walk while the stream holds
            # little more than MIN; past that, only when fewer than n entries lie at or after the cut.
            n = minimum[1]
            if len(stream) - n <= 10_000 or (count_live(stream, cut, MAX_ID) if cut <= MAX_ID else 0) < n:
                cut = min(cut, _len_cut(stream, n))
        else:
            cut = min(cut, limit_cut(stream, retention, minimum, now_ms, True, extra_bytes))
    if cut > stream.first_id:
        cut = whole_nodes(stream, cut)  # what subscribers and MIN release goes a node at a time
    drop_empty = False
    if not max_idle:
        max_cut = limit_cut(stream, retention, maximum, now_ms, False, extra_bytes)
        cut = max(cut, max_cut)
        # MAX-BYTES counts the nodes an exact trim left without live entries before the first one: when
        # it keeps from that entry they go, although no entry does (the trim at it drops them).
        drop_empty = max_cut == stream.first_id and maximum[0] == b"bytes" and head is not stream.nodes[0]
    if cut <= stream.first_id:
        return Plan(cut, holder, slb, 0, cut) if drop_empty else None
    removed, cut = count_below(stream, cut, cap)
    if not removed:
        return None
    keep_from = _entry_at(stream, removed) if removed < len(stream) else None
    return Plan(cut, holder, slb, removed, keep_from)


def _count_after(stream, after: int, cut: int) -> int:
    """Live entries with after < ID < cut (storage/rank.py's count, O(log n))."""
    if cut <= after + 1:
        return 0
    return count_live(stream, after + 1, min(cut - 1, MAX_ID))


def _pending_live(stream, group, upto: int) -> int:
    """The group's pending IDs from the stream's first entry to upto whose entries still exist."""
    max_deleted = stream.max_deleted_entry_id
    count = 0
    for entry_id in group.pel.irange(stream.first_id, upto):
        if entry_id > max_deleted or stream.get(entry_id) is not None:
            count += 1
    return count


def _deferred_live(stream, deferred, upto: int) -> int:
    """A KEYSHARED group's deferred IDs (passed over, never delivered) from the first entry to upto that still exist."""
    max_deleted = stream.max_deleted_entry_id
    first = stream.first_id
    return sum(1 for entry_id in deferred if first <= entry_id <= upto and (entry_id > max_deleted or stream.get(entry_id) is not None))


def account(stream, retention: Retention, decided: Plan, now_ms: int) -> None:
    """Record what the truncation at decided.cut costs each group, before the stream is trimmed."""
    cut = decided.cut
    lost_total = 0
    if decided.slb is not None and cut > decided.slb:
        lost_total = _count_after(stream, decided.slb - 1, cut)
    for name, group in stream.groups.items():
        role = retention.role(stream, name)
        if role is not None and role.mode == MANUAL:
            lost = _count_after(stream, role.release, cut)
        else:
            lost = _count_after(stream, group.last_id, cut)
            if group.pel:
                lost += _pending_live(stream, group, min(cut - 1, group.last_id))
            if group.keyshared is not None and group.keyshared.deferred:
                lost += _deferred_live(stream, group.keyshared.deferred, min(cut - 1, group.last_id))
        if lost:
            retention.role_for(stream, name, group).entries_lost += lost
    retention.entries_truncated += decided.removed
    retention.entries_lost += lost_total
    retention.last_run = now_ms


# -- snapshots -------------------------------------------------------------------


def dump(stream) -> dict | None:
    """The stream's retention state as an optional msgpack map (None: nothing to keep)."""
    retention = stream.retention
    if retention is None:
        return None
    for name in list(retention.roles):
        retention.role(stream, name)  # drops the roles of destroyed groups
    if retention.is_empty():
        return None
    out: dict = {"truncated": retention.entries_truncated, "lost": retention.entries_lost, "last_run": retention.last_run}
    if retention.policy is not None:
        out["policy"] = [list(limit) if limit is not None else None for limit in retention.policy]
    out["roles"] = [[name, role.mode, role.release.to_bytes(16, "big"), role.entries_lost] for name, role in retention.roles.items()]
    return out


def load(stream, data: dict) -> None:
    """The inverse of dump(), once the stream's groups are loaded."""
    retention = of(stream)
    retention.entries_truncated = int(data.get("truncated", 0))
    retention.entries_lost = int(data.get("lost", 0))
    retention.last_run = int(data.get("last_run", 0))
    policy = data.get("policy")
    if policy is not None:
        retention.policy = tuple((bytes(limit[0]), int(limit[1])) if limit is not None else None for limit in policy)
    for name, mode, release, lost in data.get("roles", ()):
        group = stream.groups.get(name)
        if group is None:
            raise ValueError("a retention role names a missing group")
        if mode not in MODES:
            raise ValueError(f"unknown subscriber mode {mode!r}")
        retention.roles[name] = GroupRole(group, bytes(mode), int.from_bytes(release, "big"), int(lost))
