"""Lag rules (storage/consumer_group.py) against two models.

The brute-force model keeps every ID ever added and which are still live, and
counts: the true lag of a group is the number of live entries after its last
delivered ID; its true entries-read is the number of entries ever added up to
that ID. The Redis model transcribes Redis 7.4's rules (t_stream.c with the
fixes of redis#13338 and #13473, and #13958's read counter for a group behind
the first entry) over the same counters: where Redis computes a number,
Millrace must compute that number, and it may answer "unknown" (None / -1)
only where Redis answers nil. Every number Redis's rules give must also be the
true one here (no XSETID in these workloads). Reads go one entry at a time
(`advance`) and in bulk (`advance_many`, XREADGROUP's fast path).
"""

from __future__ import annotations

import bisect

from hypothesis import given, settings
from hypothesis import strategies as st

from storage.consumer_group import (
    INVALID_ENTRIES_READ,
    ConsumerGroup,
    PendingEntry,
    PendingList,
    clamp_entries_read,
    estimate_entries_read,
    lag,
)


class ModelStream:
    """Just the counters Redis keeps, maintained as Redis maintains them, plus the full history."""

    def __init__(self) -> None:
        self.live: list[int] = []  # sorted live IDs
        self.ever: list[int] = []  # every ID ever added
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_entry_id = 0
        self.entries_added = 0
        self.next_id = 1

    def __len__(self) -> int:
        return len(self.live)

    def add(self, gap: int) -> None:
        entry_id = self.next_id + gap
        self.next_id = entry_id + 1
        self.live.append(entry_id)
        self.ever.append(entry_id)
        self.last_id = entry_id
        self.entries_added += 1
        if len(self.live) == 1:
            self.first_id = entry_id

    def delete(self, index: int) -> None:
        if not self.live:
            return
        entry_id = self.live.pop(index % len(self.live))
        self.max_deleted_entry_id = max(self.max_deleted_entry_id, entry_id)
        self.first_id = self.live[0] if self.live else 0

    def trim(self, maxlen: int) -> None:
        if len(self.live) > maxlen:
            del self.live[: len(self.live) - maxlen]
            self.first_id = self.live[0] if self.live else 0

    def after(self, entry_id: int, count: int) -> list[int]:
        start = bisect.bisect_right(self.live, entry_id)
        return self.live[start : start + count]

    # the truth
    def true_lag(self, group: ConsumerGroup) -> int:
        return len(self.live) - bisect.bisect_right(self.live, group.last_id)

    def true_entries_read(self, group: ConsumerGroup) -> int:
        return bisect.bisect_right(self.ever, group.last_id)


def add(stream: ModelStream, op: str, arg: int) -> None:
    """`add`: one entry after a gap of arg; `many`: arg entries in a row."""
    for _ in range(arg if op == "many" else 1):
        stream.add(arg if op == "add" else 0)


def read(stream: ModelStream, group: ConsumerGroup, count: int, bulk: bool = False) -> list[int]:
    """Deliver up to count entries after the group's last ID, one by one or in one advance_many."""
    delivered = stream.after(group.last_id, count)
    if bulk and delivered:
        group.advance_many(stream, delivered)
    else:
        for entry_id in delivered:
            group.advance(stream, entry_id)
    return delivered


class RedisGroup:
    """A group's last_id and entries_read as Redis keeps them (None: SCG_INVALID_ENTRIES_READ)."""

    def __init__(self, last_id: int, entries_read: int | None = None) -> None:
        self.last_id = last_id
        self.entries_read = entries_read

    def deliver(self, s: ModelStream, entry_id: int) -> None:
        """streamReplyWithRange, per entry: count on only from a valid counter, at or after the first
        entry, with no tombstone from the last ID on; otherwise estimate the new ID's counter."""
        if self.entries_read is not None and self.last_id >= s.first_id and not redis_tombstones_from(s, self.last_id):
            self.entries_read += 1
        elif s.entries_added:
            self.entries_read = redis_estimate(s, entry_id)
        self.last_id = entry_id


def redis_tombstones_from(s: ModelStream, start: int) -> bool:
    """streamRangeHasTombstones(s, start, NULL): only the greatest deleted ID is known."""
    if not s.live or not s.max_deleted_entry_id:
        return False
    return start <= s.max_deleted_entry_id


def redis_estimate(s: ModelStream, entry_id: int) -> int | None:
    """streamEstimateDistanceFromFirstEverEntry."""
    if not s.entries_added:
        return 0
    if not s.live and entry_id <= s.last_id:
        return s.entries_added
    if entry_id and entry_id < s.max_deleted_entry_id:
        return None
    if entry_id == s.last_id:
        return s.entries_added
    if entry_id > s.last_id:
        return None
    if not s.max_deleted_entry_id or s.max_deleted_entry_id < s.first_id:
        if entry_id < s.first_id:
            return s.entries_added - len(s.live)
        if entry_id == s.first_id:
            return s.entries_added - len(s.live) + 1
    return None


def redis_lag(s: ModelStream, g: RedisGroup) -> int | None:
    """streamReplyWithCGLag: nil is None."""
    if not s.entries_added or not s.live:
        return 0
    if g.last_id < s.first_id and s.max_deleted_entry_id < s.first_id:
        return len(s.live)
    if g.entries_read is not None and not redis_tombstones_from(s, g.last_id):
        return s.entries_added - g.entries_read
    estimated = redis_estimate(s, g.last_id)
    return None if estimated is None else s.entries_added - estimated


def position(stream: ModelStream, where: str, arbitrary: int) -> ConsumerGroup:
    """A group created (or SETID) where users put them; ENTRIESREAD not given."""
    if where == "zero":
        return ConsumerGroup(0)
    if where == "last":
        return ConsumerGroup(stream.last_id)
    if where == "first":
        return ConsumerGroup(stream.live[0] if stream.live else 0)
    return ConsumerGroup(arbitrary)


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 3)),
        st.tuples(st.just("del"), st.integers(0, 50)),
        st.tuples(st.just("trim"), st.integers(0, 8)),
        st.tuples(st.just("read"), st.integers(1, 4)),
        st.tuples(st.just("bulk"), st.integers(1, 4)),
        st.tuples(st.just("many"), st.integers(2, 6)),
        st.tuples(st.just("group"), st.sampled_from(["zero", "last", "first", "arbitrary", "exact"])),
    ),
    max_size=60,
)


def check(stream: ModelStream, groups: list[tuple[ConsumerGroup, bool]], deleted_inside: bool) -> None:
    for group, knowable in groups:
        reported = lag(stream, group)
        if reported is not None:
            assert reported == stream.true_lag(group)
        elif knowable and not deleted_inside:
            raise AssertionError("lag unknown although nothing was deleted in the middle")
        if group.entries_read != INVALID_ENTRIES_READ:
            assert group.entries_read == stream.true_entries_read(group)
        estimated = estimate_entries_read(stream, group.last_id)
        if estimated != INVALID_ENTRIES_READ and len(stream) and group.last_id >= stream.first_id:
            assert estimated == stream.true_entries_read(group)


@settings(max_examples=400, deadline=None)
@given(ops, st.integers(0, 200))
def test_lag_is_never_wrong(operations, arbitrary):
    stream = ModelStream()
    groups: list[tuple[ConsumerGroup, bool]] = []
    deleted_inside = False
    for op, arg in operations:
        if op in ("add", "many"):
            add(stream, op, arg)
        elif op == "del":
            stream.delete(arg)
            deleted_inside = deleted_inside or bool(stream.max_deleted_entry_id)
        elif op == "trim":
            stream.trim(arg)
        elif op in ("read", "bulk"):
            for group, _knowable in groups:
                read(stream, group, arg, bulk=op == "bulk")
        elif arg == "exact":
            group = ConsumerGroup(0)
            group.set_id(stream.last_id, stream.entries_added, stream.entries_added)
            groups.append((group, True))
        else:
            groups.append((position(stream, arg, arbitrary), arg == "zero"))
        check(stream, groups, deleted_inside)


boundaries = st.lists(st.one_of(st.none(), st.none(), st.none(), st.tuples(st.sampled_from(["del_last", "trim_past", "maxdeleted"]), st.integers(0, 50))), max_size=8)


@settings(max_examples=1000, deadline=None)
@given(ops, boundaries, st.integers(0, 200))
def test_lag_follows_redis_rules_exactly(operations, boundaries, arbitrary):
    """Millrace's entries-read and lag equal the Redis model's after every step, nil only where Redis's is,
    and every number the rules give is the true one (until XSETID sets a max-deleted-entry-id of its own).

    Besides the shared operations, the workload deletes a group's own last ID, trims the head
    just past a group, and sets max-deleted-entry-id to an entry's ID: the boundaries of the rules."""
    stream = ModelStream()
    groups: list[tuple[ConsumerGroup, RedisGroup]] = []
    rewritten = False
    for step, (op, arg) in enumerate(operations):
        boundary = boundaries[step % len(boundaries)] if boundaries else None
        if boundary is not None and groups and stream.ever:
            kind, pick = boundary
            if kind == "del_last":  # XDEL of the ID a group last read
                last = groups[pick % len(groups)][0].last_id
                if last in stream.live:
                    stream.delete(stream.live.index(last))
            elif kind == "trim_past":  # XTRIM MAXLEN <the entries after a group>: the head passes it
                group = groups[pick % len(groups)][0]
                stream.trim(len(stream.after(group.last_id, len(stream))) - pick % 2)
            else:  # XSETID ... MAXDELETEDID <an ID added before>
                stream.max_deleted_entry_id = stream.ever[pick % len(stream.ever)]
                rewritten = True
        if op in ("add", "many"):
            add(stream, op, arg)
        elif op == "del":
            stream.delete(arg)
        elif op == "trim":
            stream.trim(arg)
        elif op in ("read", "bulk"):
            for group, model in groups:
                for entry_id in read(stream, group, arg, bulk=op == "bulk"):
                    model.deliver(stream, entry_id)
        elif arg == "exact":
            group = ConsumerGroup(0)
            group.set_id(stream.last_id, stream.entries_added, stream.entries_added)
            groups.append((group, RedisGroup(stream.last_id, stream.entries_added)))
        else:
            group = position(stream, arg, arbitrary)
            groups.append((group, RedisGroup(group.last_id)))
        for group, model in groups:
            assert group.last_id == model.last_id
            assert group.entries_read == (INVALID_ENTRIES_READ if model.entries_read is None else model.entries_read)
            expected = redis_lag(stream, model)
            assert lag(stream, group) == expected
            if expected is not None and not rewritten:
                assert expected == stream.true_lag(group)
            if model.entries_read is not None and not rewritten:
                assert model.entries_read == stream.true_entries_read(group)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_reading_everything_without_deletes_leaves_zero_lag(operations):
    stream = ModelStream()
    groups = []
    for op, arg in operations:
        if op in ("add", "many"):
            add(stream, op, arg)
        elif op == "trim":
            stream.trim(arg)
        elif op == "group":
            groups.append(position(stream, arg if arg in ("zero", "first", "last") else "zero", 0))
        elif op in ("read", "bulk"):
            for group in groups:
                read(stream, group, arg, bulk=op == "bulk")
    for group in groups:
        read(stream, group, 10**6)
        assert lag(stream, group) == 0
        if group.entries_read != INVALID_ENTRIES_READ:
            assert group.entries_read == stream.true_entries_read(group)
            if group.last_id == stream.last_id:
                assert group.entries_read == stream.entries_added


def test_redis_documented_cases():
    """The worked examples from Redis's XINFO/lag tests, number for number."""
    stream = ModelStream()
    for _ in range(5):
        stream.add(0)  # IDs 1..5
    group = ConsumerGroup(0)
    assert lag(stream, group) == 5 and group.entries_read == INVALID_ENTRIES_READ
    read(stream, group, 2)
    assert (group.entries_read, lag(stream, group)) == (2, 3)
    stream.delete(2)  # ID 3, after the group: the lag is no longer known
    assert lag(stream, group) is None
    read(stream, group, 1)  # reads 4: past the tombstone, but its counter cannot be derived
    assert group.last_id == 4 and group.entries_read == INVALID_ENTRIES_READ and lag(stream, group) is None
    read(stream, group, 1)
    assert (group.entries_read, lag(stream, group)) == (5, 0)
    # Trimming everything: an empty stream has no lag.
    stream.trim(0)
    assert lag(stream, group) == 0
    # A group behind a trimmed head counts the remaining entries.
    stream2 = ModelStream()
    for _ in range(5):
        stream2.add(0)
    behind = ConsumerGroup(0)
    read(stream2, behind, 1)
    stream2.trim(1)
    assert lag(stream2, behind) == 1
    read(stream2, behind, 1)
    assert (behind.entries_read, lag(stream2, behind)) == (5, 0)


def test_entries_read_is_clamped_to_entries_added():
    assert clamp_entries_read(100, 1) == 1
    assert clamp_entries_read(-1, 1) == -1
    assert clamp_entries_read(0, 5) == 0
    stream = ModelStream()
    stream.add(0)
    group = ConsumerGroup(0)
    group.set_id(stream.last_id, 100, stream.entries_added)
    assert (group.entries_read, lag(stream, group)) == (1, 0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "pop", "first", "last", "range"]), st.integers(0, 12), st.integers(0, 40)), max_size=200))
def test_pending_list_matches_a_sorted_dict(operations):
    """PendingList (dict + lazily cleaned sorted IDs) behaves like a sorted mapping."""
    pel = PendingList()
    model: dict[int, object] = {}
    for op, a, b in operations:
        if op == "add":
            value = PendingEntry(None, a)
            pel[a] = value
            model[a] = value
        elif op == "pop":
            assert pel.pop(a) is model.pop(a, None)
        elif op == "first" and model:
            assert pel.first() == min(model)
        elif op == "last" and model:
            assert pel.last() == max(model)
        elif op == "range":
            assert list(pel.irange(a, b)) == sorted(k for k in model if a <= k <= b)
        assert len(pel) == len(model)
        assert list(pel.items()) == sorted(model.items())
        assert len(pel.order) - pel.head - pel.stale == len(model)  # `stale` counts exactly the removed IDs kept


@settings(max_examples=100, deadline=None)
@given(st.integers(65, 300), st.data())
def test_pending_list_compacts_when_stale_ids_outnumber_live_ones(n, data):
    """Past 64 stale IDs that outnumber the live ones, `order` is rebuilt from the live IDs alone."""
    pel = PendingList()
    for entry_id in range(n):
        pel[entry_id] = PendingEntry(None, entry_id)
    keep = set(data.draw(st.lists(st.integers(0, n - 1), max_size=n // 4)))
    for entry_id in range(n):
        if entry_id not in keep:
            pel.pop(entry_id)
    assert list(pel) == sorted(keep)
    assert pel.stale <= max(64, len(keep))  # compacted as it went
    assert len(pel.order) - pel.head - pel.stale == len(keep)
    if keep:
        assert (pel.first(), pel.last()) == (min(keep), max(keep))


def test_pending_list_counts_stale_ids_dropped_at_either_end():
    pel = PendingList()
    for entry_id in (1, 2, 3, 4):
        pel[entry_id] = PendingEntry(None, entry_id)
    pel.pop(1)
    pel.pop(4)
    assert (len(pel.order), pel.head, pel.stale) == (4, 0, 2)
    assert pel.first() == 2 and (pel.head, pel.stale) == (1, 1)
    assert pel.last() == 3 and (len(pel.order), pel.stale) == (3, 0)
    pel.pop(2)
    pel[5] = PendingEntry(None, 5)
    assert pel.first() == 3 and (pel.head, pel.stale) == (2, 0)


def test_ack_many_keeps_every_pel_counted():
    """XACK's bulk removal from the group's PEL and its owners': the stale counts stay exact."""
    group = ConsumerGroup(0)
    alice, _ = group.consumer(b"alice", 0)
    bob, _ = group.consumer(b"bob", 0)
    group.add_new([1, 2, 3], alice, 10)
    group.add_new([4, 5, 6], bob, 20)

    def counted() -> None:
        for pel in (group.pel, alice.pel, bob.pel):
            assert len(pel.order) - pel.head - pel.stale == len(pel.entries)

    assert group.ack_many([2]) == [True]
    counted()
    assert group.ack_many([6]) == [True] and bob.pel.stale == 1
    group.pel[6] = bob.pel[6] = PendingEntry(bob, 20)  # given back, as add_pending would
    counted()
    assert group.ack_many([3, 5, 9]) == [True, True, False]
    counted()
    assert (list(group.pel), list(alice.pel), list(bob.pel)) == ([1, 4, 6], [1], [4, 6])
    assert (group.pel.stale, alice.pel.stale, bob.pel.stale) == (3, 2, 1)
    assert group.ack_many([4]) == [True] and bob.pel.stale == 2  # one owner: counted on, not reset
    group.pel[4] = bob.pel[4] = PendingEntry(bob, 20)
    counted()
    assert group.ack_many([9]) == [False]
    assert group.ack_many([1, 4, 6]) == [True, True, True]
    assert (len(group.pel), group.pel.order, alice.pel.order, bob.pel.order) == (0, [], [], [])


def test_bulk_read_across_a_tombstone_estimates_as_one_by_one():
    """advance_many counts on only without a tombstone ahead: across one, it re-estimates as advance does."""
    for bulk in (False, True):
        stream = ModelStream()
        add(stream, "many", 2)
        group = ConsumerGroup(0, 0)
        read(stream, group, 2, bulk=bulk)
        assert group.entries_read == 2
        add(stream, "many", 3)  # 3, 4, 5
        stream.delete(2)  # 3: a tombstone after the group
        assert read(stream, group, 2, bulk=bulk) == [4, 5]
        assert (group.entries_read, lag(stream, group)) == (5, 0)
