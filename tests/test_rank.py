"""The rank structure (storage/rank.py) against brute force over random workloads.

Random appends (several node sizes, so nodes open, fill and seal), XDEL of
random live entries (emptying nodes too), exact and approximate trims by
MAXLEN and MINID with LIMIT, and copies; after random steps, count_live over
random ranges must equal the count of live IDs the model holds in that range.
Queries come at random moments, so the lazy folding-in of appends (sync) is
exercised after every kind of change.
"""

from __future__ import annotations

import copy
import random
from bisect import bisect_left, bisect_right
from functools import partial

import pytest

from storage import rank as rank_module
from storage import refs
from storage.consumer_group import ConsumerGroup
from storage.rank import count_live, count_live_after, stream_rank
from storage.stream import Stream
from storage.stream_id import MAX_ID


def _model_count(live: list[int], start: int, end: int) -> int:
    return max(bisect_right(live, end) - bisect_left(live, start), 0)


def _random_id(rng: random.Random, live: list[int], stream: Stream) -> int:
    pick = rng.random()
    if live and pick < 0.6:
        return rng.choice(live) + rng.choice((-1, 0, 1))
    if pick < 0.8:
        return rng.randrange(0, stream.last_id + 3)
    return rng.choice((0, 1, MAX_ID, stream.last_id, stream.first_id))


def _check(rng: random.Random, stream: Stream, live: list[int]) -> None:
    for _ in range(4):
        a, b = _random_id(rng, live, stream), _random_id(rng, live, stream)
        assert count_live(stream, a, b) == _model_count(live, a, b), (a, b)
        assert count_live_after(stream, a) == _model_count(live, a + 1, MAX_ID)
    assert count_live(stream) == len(live) == len(stream)
    # every node that left the stream left the structure too (an empty one counts nothing, but it holds a slot)
    assert stream.rank.alive == len(stream.nodes)


@pytest.mark.parametrize("seed", range(12))
def test_count_live_matches_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    node_size = rng.choice((1, 2, 5, 10, 100))
    stream = Stream()
    stream.groups[b"g"] = ConsumerGroup(0)  # (policy trims act only on a stream with groups)
    live: list[int] = []
    now = 1
    for step in range(1500):
        op = rng.random()
        if op < 0.55:
            now += rng.choice((0, 0, 1, 5))
            value = rng.choice((b"v", b"w", b"x" * rng.randrange(1, 60)))
            text = stream.add(now, [b"f", value], node_size, 4096)
            ms, seq = text.split(b"-")
            live.append(int(ms) << 64 | int(seq))
        elif op < 0.75 and live:
            victims = rng.sample(live, min(len(live), rng.randrange(1, 4)))
            removed = stream.delete(victims + [rng.randrange(1, stream.last_id + 2)])
            for entry_id in removed:
                live.remove(entry_id)
        elif op < 0.85:
            approx = rng.random() < 0.5
            limit = rng.choice((0, 0, node_size, 3 * node_size))
            # half of them through a DELREF policy trim (a group exists), which drops eligible nodes left
            # with only tombstones and keeps the node it ends in (storage/refs.py)
            trim = stream.trim if rng.random() < 0.5 else partial(refs.trim, stream, policy=refs.DELREF)
            if rng.random() < 0.5:
                trim(maxlen=rng.randrange(0, len(live) + 3), approx=approx, limit=limit)
            else:
                trim(minid=_random_id(rng, live, stream), approx=approx, limit=limit)
            survivors = {i for node in stream.nodes for i in (node.ids if node.ids is not None else stream_ids(node))}
            live = [i for i in live if i in survivors]
        elif op < 0.87:
            stream = copy.deepcopy(stream)  # COPY: the copied structure follows the copied nodes
        if rng.random() < 0.3 or step % 97 == 0:
            _check(rng, stream, live)
    _check(rng, stream, live)
    # the live model agrees with the stream itself
    assert [i for i, _ in stream.range(0, MAX_ID)] == live


def stream_ids(node) -> list[int]:
    from storage.stream import _decoded

    return _decoded(node)[0]


def test_rank_is_built_lazily_and_loaded_streams_rebuild() -> None:
    stream = Stream()
    for ms in range(1, 1001):
        stream.add(ms, [b"f", b"v"], 10, 4096)
    assert stream.rank is None  # appends alone never build it
    stream.delete([5 << 64, 500 << 64])
    assert stream.rank is None
    assert count_live(stream, 1 << 64, 10 << 64) == 9
    assert stream.rank is not None
    loaded = Stream.load(stream.dump())
    assert loaded.rank is None
    assert count_live(loaded, 400 << 64, 600 << 64) == 200
    assert count_live_after(loaded, 999 << 64) == 1


def test_disabled_structure_walks_the_nodes(monkeypatch) -> None:
    monkeypatch.setattr(rank_module, "ENABLED", False)
    stream = Stream()
    for ms in range(1, 301):
        stream.add(ms, [b"f", b"v"], 7, 4096)
    stream.delete([(ms << 64) for ms in range(1, 301, 3)])
    assert count_live(stream, 0, 150 << 64) == 100
    assert stream.rank is None


def test_many_trimmed_nodes_compact_the_slots() -> None:
    stream = Stream()
    for ms in range(1, 5001):
        stream.add(ms, [b"f", b"v"], 5, 4096)
    stream_rank(stream)
    stream.trim(maxlen=100)
    rank = stream_rank(stream)
    assert len(rank.masters) < 200  # the dead head slots were dropped
    assert count_live(stream, 0, MAX_ID) == 100
    assert count_live(stream, 4950 << 64, MAX_ID) == 51
