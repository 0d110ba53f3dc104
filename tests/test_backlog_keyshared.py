"""storage/backlog.py with KEYSHARED groups, in-process (issue 27, README "Mutation testing").

XBACKLOG's model scan (tests/test_backlog.py) has no KEYSHARED group, so the
deferred entries (passed over for another consumer, not delivered yet) were
left unchecked. Here seeded random streams, PELs (some entries deleted
since), deferred sets and SETIDs backwards are scanned directly: a scan's
positions are, in ID order from its start, the PEL IDs (live or not), the
deferred IDs still live, and the live entries after last-delivered-id; the
first COUNT are examined. ack_floor is the lowest of the PEL, the deferred
set and last-delivered-id + 1.
"""

from __future__ import annotations

import random

import pytest

from storage import backlog
from storage.consumer_group import ConsumerGroup
from storage.keyshared import KeyShared
from storage.stream import Stream
from storage.stream_id import MAX_ID


@pytest.mark.parametrize("seed", range(8))
def test_scan_counts_deferred_entries_as_backlog(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(120):
        stream = Stream()
        for ms in range(1, rng.randrange(2, 30)):
            stream.add_id(ms, 0, [b"k", b"v"], rng.choice((1, 3, 100)))
        ever = [i for i, _ in stream.range(0, MAX_ID)]
        group = ConsumerGroup(rng.choice([0, *ever, MAX_ID]) if rng.random() < 0.9 else ever[-1])
        consumer = group.consumer(b"c", 1)[0]
        for entry_id in ever:
            if rng.random() < 0.3:
                group.add_pending(entry_id, consumer, 1)  # above last-delivered-id too (a SETID backwards)
        group.keyshared = KeyShared(b"k")
        for entry_id in ever:
            if entry_id <= group.last_id and entry_id not in group.pel.keys() and rng.random() < 0.4:
                group.keyshared.deferred[entry_id] = 0
        stream.delete(rng.sample(ever, rng.randrange(0, len(ever) // 2 + 1)))
        live = {i for i, _ in stream.range(0, MAX_ID)}
        pel = set(group.pel.keys())
        deferred = set(group.keyshared.deferred)
        floor = min([*pel, *deferred, group.last_id + 1]) if group.last_id < MAX_ID else min([*pel, *deferred, MAX_ID])
        assert backlog.ack_floor(group) == floor
        start = rng.choice([floor, 0, *ever])
        count = rng.choice((1, 2, 3, 7, 1000))
        positions = sorted(
            {i for i in pel if i >= start} | {i for i in deferred if i >= start and i in live} | {i for i in live if i > group.last_id and i >= start}
        )
        taken = positions[:count]
        got = backlog.scan(stream, group, start, count, lambda: False, [])
        assert (got.entries, got.pending, got.deleted_pending) == (
            sum(1 for i in taken if i in live),
            sum(1 for i in taken if i in live and i in pel),
            sum(1 for i in taken if i not in live),
        ), (start, count)
        assert (got.first_id, got.last_id) == ((taken[0], taken[-1]) if taken else (None, None))
        more = len(positions) > count
        assert (got.aborted, got.abort_reason, got.cursor) == (more, "count" if more else "done", taken[-1] if more else 0)


def test_a_scan_past_its_deadline_stops_with_time_and_a_cursor() -> None:
    """The deadline is looked at every 64th position one by one (PEL), and before each node span in bulk:
    an expired scan stops there, reason `time`, the cursor at the last examined ID."""
    stream = Stream()
    for ms in range(1, 301):
        stream.add_id(ms, 0, [b"k", b"v"], 10)
    group = ConsumerGroup(200 << 64)
    consumer = group.consumer(b"c", 1)[0]
    for ms in range(1, 201):
        group.add_pending(ms << 64, consumer, 1)
    got = backlog.scan(stream, group, 1 << 64, 1000, lambda: True, [])
    assert (got.entries, got.aborted, got.abort_reason, got.cursor) == (63, True, "time", 63 << 64)
    got = backlog.scan(stream, ConsumerGroup(0), 1 << 64, 1000, lambda: True, [])
    assert (got.entries, got.aborted, got.abort_reason, got.cursor) == (10, True, "time", 10 << 64)  # one span of 10
    calls = []
    got = backlog.scan(stream, ConsumerGroup(0), 1 << 64, 1000, lambda: calls.append(1) or len(calls) > 2, [])
    assert (got.entries, got.abort_reason, got.cursor) == (30, "time", 30 << 64)
    got = backlog.scan(stream, group, 1 << 64, 1000, lambda: False, [])
    assert (got.entries, got.aborted, got.abort_reason, got.cursor) == (300, False, "done", 0)


def test_a_bulk_scan_goes_on_across_batches_of_node_spans() -> None:
    """The bulk walk reads node spans 256 at a time; the next batch starts right after the last ID read, so
    an entry whose ID is that ID + 1 (consecutive sequence numbers) is the next one examined."""
    stream = Stream()
    for seq in range(600):
        stream.add_id(7, seq, [b"k", b"v"], 1)  # 600 nodes of one entry, IDs 7-0 .. 7-599
    got = backlog.scan(stream, ConsumerGroup(0), 0, 10_000, lambda: False, [])
    assert (got.entries, got.first_id, got.last_id, got.aborted) == (600, 7 << 64, (7 << 64) + 599, False)


def test_the_entry_at_the_greatest_id_is_backlog() -> None:
    stream = Stream()
    stream.add_id(5, 0, [b"k", b"v"])
    stream.append(MAX_ID, [b"k", b"v"])  # XADD s 18446744073709551615-18446744073709551615
    got = backlog.scan(stream, ConsumerGroup(MAX_ID - 1), MAX_ID, 10, lambda: False, [])
    assert (got.entries, got.first_id, got.last_id) == (1, MAX_ID, MAX_ID)
