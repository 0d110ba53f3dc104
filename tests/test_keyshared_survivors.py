"""storage/keyshared.py against brute-force models, in-process (issue 27, README "Mutation testing", fifth run).

The fifth mutation run's survivors of storage/keyshared.py: the group state's
PEL index (track, moved, forget), draining, the per-consumer queues, the
look-ahead bound, membership and dump/load, checked after every one of random
operations against plain dicts and a brute-force ring (the first point at or
above a hash, wrapping; the earlier joiner keeping a shared point); the ring's
ranges against select() for every hash, also with a point at 65534 or 65535
(the wrap-around range of one hash, or none); held_back and first_held_back
against the live deferred entries of streams trimmed and deleted from.
"""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest

import storage.keyshared as ks_mod
from storage.consumer_group import ConsumerGroup
from storage.keyshared import (
    LOOKAHEAD_MAX,
    LOOKAHEAD_PER_CONSUMER,
    NONE_KEY,
    RANGE_SIZE,
    HashRing,
    KeyShared,
    entry_key,
    first_held_back,
    held_back,
    murmur3_32,
    point_hashes,
    sticky_hash,
)
from storage.stream import Stream
from storage.stream_id import MAX_ID
from tests.test_keyshared_ring import brute_select

NAMES = [b"alice", b"bob", b"carol", b"dave", b"erin", b"frank"]


class Model:
    """The group state as plain dicts."""

    def __init__(self, lookahead: int) -> None:
        self.lookahead = lookahead
        self.members: list[bytes] = []
        self.pending: dict[int, int] = {}  # id -> hash
        self.owner: dict[int, bytes | None] = {}  # hash -> the consumer holding its pending entries
        self.deferred: dict[int, int] = {}
        self.blocked: dict[int, int] = {}

    def draining(self) -> dict[int, bytes | None]:
        return {h: o for h, o in self.owner.items() if brute_select(self.members, h) != o}


def check(state: KeyShared, model: Model) -> None:
    assert state.ring.members == model.members
    assert all((name in state.ring) == (name in model.members) for name in NAMES)
    assert state.pel_hash == model.pending
    assert state.pending_hashes() == Counter(model.pending.values())
    assert state.holders() == model.owner
    select = {h: brute_select(model.members, h) for h in {*model.owner, *model.deferred.values()}}
    draining = model.draining()
    assert state.draining() == draining
    counts = Counter(model.pending.values())
    assert state.drain == {h: counts[h] for h in draining}  # only draining hashes are counted
    model.blocked = {h: n for h, n in model.blocked.items() if h in draining}  # kept while their hash drains
    assert state.blocked == model.blocked
    assert sorted(state.deferred.items()) == sorted(model.deferred.items())
    queues: dict = {}
    for entry_id in sorted(model.deferred):
        queues.setdefault(select[model.deferred[entry_id]], []).append(entry_id)
    assert state.queues == queues
    bound = model.lookahead or min(LOOKAHEAD_PER_CONSUMER * max(len(model.members), 1), LOOKAHEAD_MAX)
    assert state.lookahead_limit() == bound


def round_trip(state: KeyShared, model: Model) -> KeyShared:
    """dump() -> msgpack-able data -> load(), with a PEL naming each pending entry's owner (its hash's)."""
    data = state.dump()
    assert all(len(item) == 16 for item in data["pending"][0::2] + data["deferred"][0::2])  # IDs as 16 bytes, the format's
    assert [int.from_bytes(i, "big") for i in data["pending"][0::2]] == sorted(model.pending)
    pel = {i: SimpleNamespace(consumer=None if model.owner[h] is None else SimpleNamespace(name=model.owner[h])) for i, h in model.pending.items()}
    loaded = KeyShared.load(data, pel)
    assert (loaded.field, loaded.session_timeout, loaded.lookahead) == (state.field, state.session_timeout, state.lookahead)
    return loaded


@pytest.mark.parametrize("seed", range(10))
def test_group_state_matches_plain_dicts_over_random_operations(seed: int) -> None:
    rng = random.Random(seed)
    lookahead = rng.choice((0, 0, 7))
    state = KeyShared(b"key", rng.choice((0, 5000)), lookahead)
    model = Model(lookahead)
    hashes = [rng.randint(1, RANGE_SIZE) for _ in range(12)] + [1, RANGE_SIZE]
    for _step in range(300):
        roll = rng.random()
        entry_id = rng.randint(1, 60)
        h = rng.choice(hashes)
        name = rng.choice([*NAMES, None]) if rng.random() < 0.1 else rng.choice(NAMES)
        if roll < 0.25:  # a delivery or forced claim
            state.track(entry_id, h, name)
            model.deferred.pop(entry_id, None)
            model.pending.setdefault(entry_id, h)
            model.owner[model.pending[entry_id]] = name
        elif roll < 0.32:  # XCLAIM of one entry: its hash follows
            state.moved(entry_id, name)
            if entry_id in model.pending:
                model.owner[model.pending[entry_id]] = name
        elif roll < 0.47:  # acknowledged or dropped (some never pending, some twice)
            ids = rng.sample(range(1, 61), rng.randint(1, 8))
            ids += ids[:1]
            draining = state.draining()  # (this settles the index: the counts of hashes that stopped draining go)
            model.blocked = {h: n for h, n in model.blocked.items() if h in model.draining()}
            if draining and rng.random() < 0.5:  # a read held one back
                state.blocked[rng.choice(sorted(draining))] = rng.randint(1, 9)
                model.blocked = dict(state.blocked)
            state.forget(ids)
            for i in ids:
                old = model.pending.pop(i, None)
                if old is not None and old not in model.pending.values():
                    del model.owner[old]
                    model.blocked.pop(old, None)
        elif roll < 0.6:
            joined = state.join(name) if name is not None else None
            if name is not None:
                assert joined == (name not in model.members)
                if joined:
                    model.members.append(name)
        elif roll < 0.7:
            if name is not None:
                assert state.remove_member(name) == (name in model.members)
                if name in model.members:
                    model.members.remove(name)
        elif roll < 0.85:
            state.defer(entry_id, h)
            model.deferred.setdefault(entry_id, h)
        elif roll < 0.93:
            ids = rng.sample(range(1, 61), rng.randint(1, 6))
            state.undefer(ids)
            for i in ids:
                model.deferred.pop(i, None)
        elif roll < 0.96:
            assert state.clear_deferred() == sorted(model.deferred)
            model.deferred.clear()
        else:
            state = round_trip(state, model)
            model.blocked = {}  # a statistic: not persisted
        if rng.random() < 0.3:  # (checking settles the index: runs of unchecked steps leave it unsettled)
            check(state, model)
    loaded = round_trip(state, model)
    model.blocked = {}
    check(loaded, model)


def test_an_ack_while_unsettled_leaves_the_counting_to_the_recount() -> None:
    """A draining hash gets a new pending entry at its owner (a forced claim: the index is unsettled), then
    its old entry is acknowledged: the hash still drains with one entry, held by the same consumer (counting
    down the stale count instead released the hash and lost its owner)."""
    state = KeyShared(b"key")
    state.join(b"alice")
    h = next(h for h in range(1, RANGE_SIZE + 1) if brute_select([b"alice", b"bob"], h) == b"bob")
    state.track(1, h, b"alice")
    state.join(b"bob")
    assert state.draining() == {h: b"alice"} and state.drain == {h: 1}
    state.track(2, h, b"alice")
    state.forget([1])
    assert state.draining() == {h: b"alice"} and state.drain == {h: 1}
    assert state.holders() == {h: b"alice"}
    state.forget([2])
    assert state.draining() == {} and state.drain == {} and state.holders() == {}


def test_ranges_cover_every_hash_as_select_does() -> None:
    """Each member's ranges hold exactly the hashes select() gives it, adjacent ranges joined: also when the
    last point is 65534 (the wrap-around range is the one hash 65535) or 65535 (no wrap-around range)."""
    assert HashRing().ranges() == {}
    last_points: dict[int, bytes] = {}
    i = 0
    while len(last_points) < 2:
        name = b"c%d" % i
        top = max(point_hashes(name))
        if top >= RANGE_SIZE - 1:
            last_points.setdefault(top, name)
        i += 1
    rings = [[last_points[RANGE_SIZE - 1]], [last_points[RANGE_SIZE]], [last_points[RANGE_SIZE - 1], b"x"], NAMES[:3]]
    for members in rings:
        ring = HashRing()
        for name in members:
            ring.add(name)
        owners = [None] + [ring.select(h) for h in range(1, RANGE_SIZE + 1)]
        got = ring.ranges()
        assert set(got) == set(members)
        for name, spans in got.items():
            assert sorted(spans) == spans
            assert all(a[1] + 1 < b[0] for a, b in zip(spans, spans[1:], strict=False))  # joined when adjacent
            assert sum(end - start + 1 for start, end in spans) == owners.count(name), name
            assert all(owners[h] == name for start, end in spans for h in range(start, end + 1))


def test_sticky_hashes_stay_right_past_the_memo_limit() -> None:
    """The memo is cleared at 65536 keys; every answer is the formula's, before and after."""
    ks_mod._hash_cache.clear()
    keys = [b"key-%d" % i for i in range((1 << 16) + 50)]
    assert [sticky_hash(k) for k in keys[-300:]] == [(murmur3_32(k) & 0x7FFFFFFF) % 65535 + 1 for k in keys[-300:]]
    for k in keys:
        sticky_hash(k)
    assert len(ks_mod._hash_cache) <= 1 << 16
    assert all(sticky_hash(k) == (murmur3_32(k) & 0x7FFFFFFF) % 65535 + 1 for k in keys[::997])


@pytest.mark.parametrize("seed", range(6))
def test_held_back_counts_the_live_deferred_entries(seed: int) -> None:
    """held_back (the lag's share) and first_held_back (oldest-undelivered) against the live deferred entries
    of a stream deleted from (which undefers) and trimmed from the head (which leaves dead ones behind)."""
    rng = random.Random(seed)
    assert held_back(ConsumerGroup(0)) == 0 and held_back(ConsumerGroup(0), Stream()) == 0
    assert first_held_back(ConsumerGroup(0), Stream()) is None
    for _ in range(60):
        stream = Stream()
        group = ConsumerGroup(0)
        stream.groups[b"g"] = group
        group.keyshared = KeyShared(b"k")
        for ms in range(1, rng.randint(1, 40)):
            stream.add_id(ms, 0, [b"k", b"v"], rng.choice((2, 5, 100)))
        ids = [i for i, _ in stream.range(0, MAX_ID)]
        group.last_id = stream.last_id
        for entry_id in ids:
            if rng.random() < 0.5:
                group.keyshared.defer(entry_id, rng.randint(1, RANGE_SIZE))
        if ids and rng.random() < 0.5:
            stream.delete(rng.sample(ids, rng.randint(0, len(ids))))
        if rng.random() < 0.6:
            stream.trim(maxlen=rng.randint(0, len(ids)), approx=False)
        live = {i for i, _ in stream.range(0, MAX_ID)}
        held = sorted(i for i in group.keyshared.deferred if i in live)
        assert held_back(group, stream) == len(held)
        assert first_held_back(group, stream) == (held[0] if held else None)
        assert held_back(group) == len(group.keyshared.deferred)  # without the stream: every deferred entry


def test_the_key_is_never_taken_from_a_value_equal_to_the_field_name() -> None:
    """Fields sit at even positions only: a value spelled like the key field is not the field."""
    assert entry_key([b"a", b"key", b"key", b"x"], b"key") == b"x"
    assert entry_key([b"a", b"key", b"b", b"key"], b"key") == NONE_KEY
    assert entry_key([b"key", b"key", b"key", b"y"], b"key") == b"key"  # the first one counts


def test_a_record_of_only_its_field_loads_as_a_fresh_group() -> None:
    """load() takes every key but the field as optional (absent = default, the snapshot rule): no timeout,
    the default look-ahead, no members, nothing pending or deferred."""
    state = KeyShared.load({"field": b"k"}, {})
    assert (state.field, state.session_timeout, state.lookahead, state.ring.members) == (b"k", 0, 0, [])
    assert (state.pel_hash, state.drain, state.hash_owner, list(state.deferred)) == ({}, {}, {}, [])
    assert state.lookahead_limit() == LOOKAHEAD_PER_CONSUMER


def test_a_new_group_has_no_session_timeout_and_the_default_look_ahead() -> None:
    """XGROUP CREATE ... KEYSHARED builds KeyShared(field): members never time out, the look-ahead is Pulsar's."""
    state = KeyShared(b"k")
    assert (state.session_timeout, state.lookahead, state.lookahead_limit()) == (0, 0, LOOKAHEAD_PER_CONSUMER)
    for i in range(12):
        state.join(b"m%d" % i)
    assert state.lookahead_limit() == LOOKAHEAD_MAX
