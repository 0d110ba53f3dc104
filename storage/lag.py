"""Exact lag figures of a consumer group, from the rank structure (storage/rank.py).

Redis's `lag` is nil whenever a tombstone may lie after the group; here the
lag is the number of live entries after the group's last-delivered-id,
counted, plus what key-ordered delivery holds back (`held_back`). Lag counts
entries, never ID arithmetic.

`entries-read` (the logical counter of the group's position) is exact when no
deleted entry lies after the position: then every entry ever added after it
is still live, so entries-read = entries-added - live entries after it. Behind
a tombstone the positions of deleted entries are unknown (the stream keeps
only the greatest deleted ID, as Redis does), so it stays unknown (-1) there
unless the group's own counter is valid.
"""

from __future__ import annotations

from collections.abc import Callable

from .consumer_group import INVALID_ENTRIES_READ, ConsumerGroup, estimate_entries_read, lag
from .rank import count_live_after
from .stream_id import MAX_ID

# Functions (stream, group) -> entries at or before the group's last-delivered-id that it has
# not been given yet because key-ordered delivery holds them back (issue 22 registers one).
_HELD_BACK: list[Callable[[object, ConsumerGroup], int]] = []


# Functions (stream, group) -> the oldest live held-back ID, or None: an older undelivered entry than the first after last-delivered-id.
_HELD_FIRST: list[Callable[[object, ConsumerGroup], int | None]] = []


def register_held_back(counter: Callable[[object, ConsumerGroup], int], first: Callable[[object, ConsumerGroup], int | None] | None = None) -> None:
    """Add a source of held-back entries to every group's lag (key-ordered groups, issue 22); `first` gives the oldest of them."""
    _HELD_BACK.append(counter)
    if first is not None:
        _HELD_FIRST.append(first)


def held_back(stream, group: ConsumerGroup) -> int:
    """Entries the group still has to be given although they lie before its last-delivered-id; 0 for ordinary groups."""
    return sum(counter(stream, group) for counter in _HELD_BACK) if _HELD_BACK else 0


def exact_lag(stream, group: ConsumerGroup) -> int:
    """Entries the group has not been given yet: live entries after last-delivered-id, plus held-back ones. Never None."""
    return count_live_after(stream, group.last_id) + held_back(stream, group)


def first_undelivered_id(stream, group: ConsumerGroup) -> int | None:
    """The group's oldest undelivered entry: a held-back one (key-ordered groups), else the first live entry after its
    last-delivered-id; None when there is none."""
    for first in _HELD_FIRST:
        held = first(stream, group)
        if held is not None:
            return held  # held-back entries lie at or before last-delivered-id: older than any after it
    if group.last_id >= MAX_ID:
        return None
    spans = stream.spans(group.last_id + 1, MAX_ID, 1)
    if not spans:
        return None
    _node, ids, _rows, lo, _hi = spans[0]
    return ids[lo]


def exact_entries_read(stream, entry_id: int) -> int:
    """The logical read counter of entry_id where the stream determines it, else -1.

    Redis's estimate first (it is exact where it answers); then, where no
    tombstone lies after entry_id (or every tombstone is before the first
    entry, Redis's own convention for a group behind the first entry), the count.
    """
    estimate = estimate_entries_read(stream, entry_id)
    if estimate != INVALID_ENTRIES_READ:
        return estimate
    if entry_id > stream.last_id:
        return INVALID_ENTRIES_READ  # a future ID: nothing tells what it will count
    max_deleted = stream.max_deleted_entry_id
    if entry_id >= max_deleted or (len(stream) and max_deleted < stream.first_id):
        return stream.entries_added - count_live_after(stream, entry_id)
    return INVALID_ENTRIES_READ


def group_entries_read(stream, group: ConsumerGroup) -> int:
    """The group's entries-read for exact reports: computed where exact, else its counter (which may be -1)."""
    computed = exact_entries_read(stream, group.last_id)
    return computed if computed != INVALID_ENTRIES_READ else group.entries_read


def xinfo_lag(stream, group: ConsumerGroup, exact: bool) -> tuple[int | None, int | None]:
    """XINFO GROUPS' (entries-read, lag): Redis's figures, or with `stream-exact-lag yes` the exact ones."""
    if not exact:
        entries_read = group.entries_read
        return (entries_read if entries_read != INVALID_ENTRIES_READ else None), lag(stream, group)
    entries_read = group_entries_read(stream, group)
    return (entries_read if entries_read != INVALID_ENTRIES_READ else None), exact_lag(stream, group)
