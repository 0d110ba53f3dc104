"""Lag rules (storage/consumer_group.py) against a brute-force model.

The model keeps every ID ever added and which are still live, and counts:
the true lag of a group is the number of live entries after its last
delivered ID; its true entries-read is the number of entries ever added up to
that ID. Redis's rules may answer "unknown" (None / -1) but must never give a
wrong number; and where nothing was deleted in the middle (only head trims),
a group created at 0 or with an exact ENTRIESREAD always knows its lag. (One
created at the first or last entry knows it until it reads an entry that is
neither: Redis cannot derive the counter of an arbitrary ID either.)
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


def read(stream: ModelStream, group: ConsumerGroup, count: int) -> None:
    for entry_id in stream.after(group.last_id, count):
        group.advance(stream, entry_id)


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
        if op == "add":
            stream.add(arg)
        elif op == "del":
            stream.delete(arg)
            deleted_inside = deleted_inside or bool(stream.max_deleted_entry_id)
        elif op == "trim":
            stream.trim(arg)
        elif op == "read":
            for group, _knowable in groups:
                read(stream, group, arg)
        elif arg == "exact":
            group = ConsumerGroup(0)
            group.set_id(stream.last_id, stream.entries_added, stream.entries_added)
            groups.append((group, True))
        else:
            groups.append((position(stream, arg, arbitrary), arg == "zero"))
        check(stream, groups, deleted_inside)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_reading_everything_without_deletes_leaves_zero_lag(operations):
    stream = ModelStream()
    groups = []
    for op, arg in operations:
        if op == "add":
            stream.add(arg)
        elif op == "trim":
            stream.trim(arg)
        elif op == "group":
            groups.append(position(stream, arg if arg in ("zero", "first", "last") else "zero", 0))
        elif op == "read":
            for group in groups:
                read(stream, group, arg)
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
@given(st.lists(st.tuples(st.sampled_from(["add", "pop", "first", "last", "range"]), st.integers(0, 40), st.integers(0, 40)), max_size=200))
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
