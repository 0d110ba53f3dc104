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

import sys
from bisect import bisect_left, bisect_right

from .rank import count_live
from .stream import node_memory
from .stream_id import MAX_ID

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
    """Each node's part of MEMORY USAGE (node_memory() plus its key), kept between runs.

    Sealed nodes change only when they are repacked or removed, which changes
    the node count, the head node or its packed bytes, or the live entries
    outside the open tail: while that signature holds the sealed sizes are
    reused. The open tail is only appended to until an XDEL or a trim touches
    it (its count drops or its tombstones grow): appended entries are added
    one by one. So a run costs O(1) on a stream that only grows at the tail,
    and a full measure once per node.
    """

    __slots__ = ("signature", "sealed", "tail", "tail_seen", "tail_entries")

    def __init__(self) -> None:
        self.signature = None
        self.sealed: list[int] = []
        self.tail = None
        self.tail_seen = 0
        self.tail_entries = 0

    def sizes(self, stream) -> list[int]:
        """Per node, oldest first: the bytes it adds to MEMORY USAGE (without the node lists' slots)."""
        nodes, keys = stream.nodes, stream.keys
        if not nodes:
            return []
        tail = nodes[-1] if nodes[-1].packed is None else None
        outside = stream.length - (tail.count if tail is not None else 0)
        head = nodes[0]
        signature = (len(nodes), head, head.packed, outside)
        if signature != self.signature:
            upto = len(nodes) - (tail is not None)
            self.sealed = [node_memory(nodes[i]) + sys.getsizeof(keys[i]) for i in range(upto)]
            self.signature = signature
        if tail is None:
            return self.sealed
        return [*self.sealed, self._tail_size(tail) + sys.getsizeof(keys[-1])]

    def _tail_size(self, tail) -> int:
        ids, rows = tail.ids, tail.rows
        if tail is not self.tail or tail.count < self.tail_seen or tail.deleted:
            self.tail, self.tail_seen, self.tail_entries = tail, 0, 0
        getsizeof = sys.getsizeof
        for j in range(self.tail_seen, len(ids)):
            row = rows[j]
            self.tail_entries += getsizeof(ids[j]) + getsizeof(row) + sum(map(getsizeof, row))
        self.tail_seen = len(ids)
        size = getsizeof(tail) + getsizeof(tail.master_id) + getsizeof(tail.last_id) + getsizeof(ids) + getsizeof(rows)
        return size + self.tail_entries


def _bytes_cut(stream, meter: ByteMeter, limit: int, keep_until_reached: bool, extra: int) -> int:
    """Whole-node cuts by MEMORY USAGE, counted from the newest node back.

    A node adds its size (ByteMeter) and a slot to each of the two node
    lists. MAX keeps the newest nodes while the total stays within limit,
    counting the lists at their current allocation (they only shrink when
    nodes go), so MEMORY USAGE afterwards is within limit. MIN keeps nodes
    until the total reaches limit, counting the lists at the least they can
    take (8 bytes a slot), so MEMORY USAGE afterwards reaches it.
    """
    nodes = stream.nodes
    sizes = meter.sizes(stream)
    if keep_until_reached:
        total, slot = stream.base_memory() + 2 * sys.getsizeof([]) + extra, 16
    else:
        total, slot = stream.base_memory() + sys.getsizeof(nodes) + sys.getsizeof(stream.keys) + extra, 0
        if total + sum(sizes) <= limit:
            return 0
    for i in range(len(nodes) - 1, -1, -1):
        total += sizes[i] + slot
        if keep_until_reached and total >= limit:
            return _first_live(stream, i)
        if not keep_until_reached and total > limit:
            return _first_live(stream, i + 1) if i + 1 < len(nodes) else stream.last_id + 1
    return 0


def _first_live(stream, i: int) -> int:
    return stream.node_ids(stream.nodes[i])[0]


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
    if retention.policy is None or not len(stream):
        return None
    minimum, maximum = retention.policy
    length = len(stream)
    first_count = stream.nodes[0].count
    max_idle = maximum is None or (maximum[0] == b"len" and length <= maximum[1])  # MAX takes nothing
    if max_idle and minimum is not None and minimum[0] == b"len" and length - minimum[1] < first_count:
        # The MIN-LEN cut lies within the first node, and so does min(SLB, MIN cut): no whole node goes.
        # (What the usual write to a stream under a steady consumer finds: O(1).)
        return None
    holder, slb = head_holder(stream, retention)
    if max_idle and (slb is None and minimum is None or slb is not None and slb <= stream.node_ids(stream.nodes[0])[-1]):
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
    if maximum is not None:
        cut = max(cut, limit_cut(stream, retention, maximum, now_ms, False, extra_bytes))
    if cut <= stream.first_id:
        return None
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
