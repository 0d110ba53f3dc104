"""Which pending entries a group hands out again, and negative acknowledgements.

Redis 8.4's XREADGROUP ... CLAIM delivers a group's idle pending entries
before new ones; Redis 8.8's XNACK releases entries into the group's NACK
zone, which is claimed first (in NACK order), before the owned entries
longest idle first. `claim_order()` is that selection, the one place that
decides claim order: a key-ordered group (or anything else that restricts
who may claim what) filters or reorders here.

Order among owned entries: delivery time, oldest first; equal times by
entry ID (a pure function of the state, so a replica or a reloaded server
picks the same entries; Redis breaks such ties by its list's insertion
order, which one XREADGROUP's IDs also follow).

Pure: `now` is passed in. NACKed entries are always claimable, whatever
min-idle-time asks (Redis: delivery time 0 is infinitely idle).
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import heappop, heappush

from .consumer_group import ConsumerGroup, PendingEntry

LLONG_MAX = (1 << 63) - 1
NACK_MODES = (b"SILENT", b"FAIL", b"FATAL")


def _deadline(now: int, min_idle: int) -> int:
    """The latest delivery time that is idle enough; min-idle-time 0 takes every entry (as XAUTOCLAIM)."""
    return now - min_idle if min_idle else LLONG_MAX << 1


def zone(group: ConsumerGroup) -> list[int]:
    """The NACK zone's IDs in order; any that left the PEL by a path that did not tell the zone are forgotten."""
    entries = group.pel.entries
    nacked = group.nacked
    stale = [i for i in nacked if (p := entries.get(i)) is None or p.consumer is not None]
    for entry_id in stale:
        del nacked[entry_id]
    return list(nacked)


def _top(group: ConsumerGroup) -> tuple[int, int] | None:
    """The timeline's first live record (delivery_time, id), stale ones dropped on the way."""
    timeline = group.timeline if group.timeline is not None else group.build_timeline()
    entries = group.pel.entries
    while timeline:
        delivery_time, entry_id = timeline[0]
        pending = entries.get(entry_id)
        if pending is not None and pending.consumer is not None and pending.delivery_time == delivery_time:
            return delivery_time, entry_id
        heappop(timeline)
    return None


def claim_order(group: ConsumerGroup, now: int, min_idle: int) -> Iterator[tuple[int, PendingEntry]]:
    """The entries to claim, in claim order: the NACK zone, then owned entries idle enough, longest idle first.

    Lazy: the caller takes as many as it needs, claiming (retime) or dropping
    each one before asking for the next, and closes the generator when done
    (contextlib.closing). Timeline records are consumed as entries are
    yielded; an entry is yielded once even if its claim re-times it into the
    range still being walked (min-idle-time 0): such records are set aside
    and pushed back when the walk ends.
    """
    taken: set[int] = set()
    if group.nacked:
        entries = group.pel.entries
        for entry_id in zone(group):
            pending = entries.get(entry_id)
            if pending is not None and pending.consumer is None:  # still NACKed
                taken.add(entry_id)
                yield entry_id, pending
    deadline = _deadline(now, min_idle)
    again: list[tuple[int, int]] = []  # records of entries this walk already gave (re-timed by their claim)
    try:
        while True:
            top = _top(group)
            if top is None or top[0] > deadline:
                return
            heappop(group.timeline)
            if top[1] in taken:
                again.append(top)
                continue
            taken.add(top[1])
            yield top[1], group.pel.entries[top[1]]
    finally:  # when exhausted or closed: the claimed entries' new records go back
        timeline = group.timeline
        for record in again:
            heappush(timeline, record)


def has_claimable(group: ConsumerGroup, now: int, min_idle: int) -> bool:
    """Whether claim_order() would yield anything now."""
    if group.nacked and zone(group):
        return True
    top = _top(group)
    return top is not None and top[0] <= _deadline(now, min_idle)


def next_claimable(group: ConsumerGroup, min_idle: int) -> int | None:
    """When the longest-idle owned entry becomes claimable (absolute ms), None if nothing is pending."""
    if group.nacked and zone(group):
        return 0
    top = _top(group)
    return None if top is None else top[0] + min_idle


def nacked_count(group: ConsumerGroup) -> int:
    """XINFO STREAM FULL's nacked-count."""
    return len(zone(group)) if group.nacked else 0


def nack(group: ConsumerGroup, entry_id: int, mode: bytes, retry_count: int | None, exists: bool) -> PendingEntry | None:
    """XNACK of one ID: the entry leaves its owner for the NACK zone's tail; None if not NACKed.

    Not pending: skipped, unless `exists` (FORCE and the stream has the entry),
    which creates it with count 0. The delivery count becomes `retry_count` if
    given, else SILENT: one less (not below 0), FAIL: unchanged, FATAL: LLONG_MAX.
    The delivery time becomes 0.
    """
    pending = group.pel.get(entry_id)
    if pending is None:
        if not exists:
            return None
        pending = group.pel[entry_id] = PendingEntry(None, 0, 0)
    else:
        pending = group.own(entry_id, pending)
        if pending.consumer is not None:
            del pending.consumer.pel[entry_id]
            pending.consumer = None
    if retry_count is not None:
        pending.delivery_count = retry_count
    elif mode == b"SILENT":
        pending.delivery_count = max(pending.delivery_count - 1, 0)
    elif mode == b"FATAL":
        pending.delivery_count = LLONG_MAX
    pending.delivery_time = 0
    nacked = group.nacked
    nacked.pop(entry_id, None)
    nacked[entry_id] = None
    return pending


def next_count(delivery_count: int) -> int:
    """A delivery count after one more delivery, held at LLONG_MAX (FATAL's count) instead of overflowing."""
    return delivery_count + 1 if delivery_count < LLONG_MAX else LLONG_MAX
