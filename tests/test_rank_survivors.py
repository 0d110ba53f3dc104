"""storage/rank.py's own bookkeeping, and the walk used without it (issue 27, README "Mutation testing").

tests/test_rank.py checks the counts over random workloads; a count stays
right when the structure's bookkeeping is off in ways that only change when
it rebuilds. Here, after every step of random workloads (appends folded in
lazily, XDEL, trims with every option), the structure is checked against
what it describes: one slot per node ever seen since the last rebuild, in
master-ID order; each slot's count the node's live count (0 once removed);
`alive` the slots whose node is still there; every Fenwick prefix sum the sum
of the counts; and a rebuild exactly when fewer than half the slots are alive
and there are more than 64. The walk used with MILLRACE_STREAM_RANK=0 is
compared with the live IDs over random ranges.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right

import pytest

from storage import rank as rank_module
from storage.rank import count_live, stream_rank
from storage.stream import Stream
from storage.stream_id import MAX_ID


def _live_ids(stream: Stream) -> list[int]:
    return [entry_id for entry_id, _ in stream.range(0, MAX_ID)]


def _check_structure(stream: Stream) -> None:
    rank = stream.rank
    rank.sync()
    assert len(rank.masters) == len(rank.slot_nodes) == len(rank.counts) == len(rank.tree) - 1
    assert rank.masters == sorted(rank.masters)
    live_nodes = {id(node) for node in stream.nodes}
    for master, node, count in zip(rank.masters, rank.slot_nodes, rank.counts, strict=True):
        if node is None:
            assert count == 0
        else:
            assert node.master_id == master
            assert id(node) in live_nodes
            assert count == node.count
    assert [node for node in rank.slot_nodes if node is not None] == stream.nodes
    assert rank.alive == len(stream.nodes)
    total = 0
    for slot, count in enumerate(rank.counts):
        total += count
        assert rank._prefix(slot) == total, slot
    assert total == len(stream)


@pytest.mark.parametrize("seed", range(8))
def test_rank_bookkeeping_matches_the_nodes(seed: int) -> None:
    rng = random.Random(seed)
    node_size = rng.choice((1, 2, 3, 5))
    stream = Stream()
    now = 1
    for _ in range(5):
        now += 1
        stream.add(now, [b"f", b"v"], node_size, 4096)
    stream_rank(stream)  # built early: later nodes come in through sync()'s appends
    for _step in range(700):
        op = rng.random()
        if op < 0.6:
            for _ in range(rng.randrange(1, 2 * node_size + 2)):
                now += rng.choice((0, 1))
                stream.add(now, [b"f", b"v"], node_size, 4096)
        elif op < 0.8 and len(stream):
            live = _live_ids(stream)
            stream.delete(rng.sample(live, min(len(live), rng.randrange(1, node_size + 2))))
        elif len(stream):
            limit = rng.choice((0, 0, node_size, 10 * node_size))
            approx = rng.random() < 0.5
            if rng.random() < 0.5:
                stream.trim(maxlen=rng.randrange(0, len(stream) + 1), approx=approx, limit=limit)
            else:
                live = _live_ids(stream)
                stream.trim(minid=rng.choice(live) + rng.choice((0, 1)), approx=approx, limit=limit)
        if rng.random() < 0.5:
            _check_structure(stream)
            live = _live_ids(stream)
            a, b = sorted((rng.randrange(0, stream.last_id + 2), rng.randrange(0, stream.last_id + 2)))
            assert count_live(stream, a, b) == bisect_right(live, b) - bisect_left(live, a)
    _check_structure(stream)


def test_rebuild_exactly_when_most_slots_are_dead() -> None:
    """removed() rebuilds once fewer than half of more than 64 slots are alive, and not before."""
    stream = Stream()
    stream_rank(stream)
    for ms in range(1, 201):
        stream.add(ms, [b"f", b"v"], 1, 4096)  # one entry per node: 200 nodes, appended after the build
    rank = stream_rank(stream)
    rank.sync()
    assert len(rank.masters) == 200 and rank.alive == 200
    stream.trim(maxlen=101)  # 99 nodes removed: 101 of 200 alive, no rebuild yet
    assert len(rank.masters) == 200 and rank.alive == 101
    stream.trim(maxlen=100)  # 100 of 200: still not fewer than half
    assert len(rank.masters) == 200 and rank.alive == 100
    stream.trim(maxlen=99)  # 99 of 200: rebuilt from the live nodes
    assert len(rank.masters) == 99 and rank.alive == 99
    _check_structure(stream)
    for slots, rebuilt in ((64, False), (65, True)):
        small = Stream()
        stream_rank(small)
        for ms in range(1, slots + 1):
            small.add(ms, [b"f", b"v"], 1, 4096)
        stream_rank(small).sync()
        small.trim(maxlen=1)  # 1 slot of 64 alive: too few slots to bother; of 65: rebuilt
        assert len(small.rank.masters) == (1 if rebuilt else slots) and small.rank.alive == 1
        _check_structure(small)


@pytest.mark.parametrize("seed", range(4))
def test_walk_without_the_structure_counts_like_the_ids(seed: int, monkeypatch) -> None:
    monkeypatch.setattr(rank_module, "ENABLED", False)
    rng = random.Random(seed)
    stream = Stream()
    for ms in range(1, 301):
        stream.add(ms, [b"f", b"v"], rng.choice((3, 7, 50)), 4096)
    stream.delete([(ms << 64) for ms in range(1, 301) if rng.random() < 0.3])
    live = _live_ids(stream)
    for _ in range(200):
        a, b = rng.randrange(0, 303 << 64), rng.randrange(0, 303 << 64)
        assert count_live(stream, a, b) == max(bisect_right(live, b) - bisect_left(live, a), 0), (a, b)
    assert stream.rank is None
