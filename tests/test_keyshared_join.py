"""A KEYSHARED join updates the ring's lookup table in place (issue 22, performance), in-process.

HashRing keeps each member's index in `names` while it is a member (a join takes
the lowest free one, a leave frees its own), adds a joiner's points by bisection
and writes only their runs into the table; DeferredSet keeps the other members'
cursors on a join. Checked here over random joins and leaves (colliding points,
past 255 members where the table turns 16-bit): the table against a from-scratch
build and a brute-force ring, the indexes against the rule, and KEYSHARED reads
with the kept cursors against reads whose cursors every join resets.
"""

from __future__ import annotations

import random
from array import array

import pytest

import storage.keyshared_deferred as kd
from storage.keyshared import RANGE_SIZE, HashRing, KeyShared, point_hashes
from tests.test_keyshared_ring import brute_select


def brute_table(members: list[bytes]) -> list[bytes | None]:
    """Every hash's owner (0..65535) by brute force: points claimed in join order (the first joiner keeps a
    shared one), then each hash goes to the first claimed point >= it, wrapping to the lowest."""
    claimed: dict[int, bytes] = {}
    for name in members:
        for point in point_hashes(name):
            claimed.setdefault(point, name)
    if not claimed:
        return [None] * (RANGE_SIZE + 1)
    out: list[bytes | None] = [None] * (RANGE_SIZE + 1)
    owner = claimed[min(claimed)]  # past the last point: the wrap-around
    for h in range(RANGE_SIZE, -1, -1):
        owner = claimed.get(h, owner)
        out[h] = owner
    return out


def rebuilt(ring: HashRing) -> tuple:
    """The table as table() builds it from scratch (same indexes)."""
    saved = ring._table
    ring._table = None
    try:
        return ring.table()
    finally:
        ring._table = saved


def check(ring: HashRing, members: list[bytes], before: dict[bytes, int], joined: bytes | None) -> None:
    slots, names = ring.table()
    assert ring.members == members
    wide = len(names) > 255
    assert isinstance(slots, array) == wide and isinstance(slots, bytearray) != wide and len(slots) == RANGE_SIZE + 1
    # indexes: stable for those who stayed, the lowest free one for a joiner, None where free
    assert {name: names.index(name) for name in members} == ring.index
    assert all(name is None or name in ring for name in names) and len(names) >= 1
    assert all(ring.index[name] == i for name, i in before.items() if name in ring)
    if joined is not None:
        free_before = [i for i in range(len(names)) if i not in before.values()]
        assert ring.index[joined] == free_before[0]
    fresh_slots, fresh_names = rebuilt(ring)
    assert fresh_names == names and fresh_slots == slots  # in place == from scratch
    owners = brute_table(members)
    if members:
        assert [names[i] for i in slots] == owners
    else:
        assert names == [None] and not any(slots)
    for h in (1, 65535, *random.Random(len(members)).sample(range(1, 65536), 5)):
        assert names[slots[h]] == brute_select(members, h) == ring.select(h)


@pytest.mark.parametrize(("seed", "pool", "steps"), [(0, 6, 40), (1, 30, 60), (2, 60, 50)])
def test_the_table_kept_in_place_is_a_from_scratch_build_and_a_brute_force_ring(seed, pool, steps):
    rng = random.Random(seed)
    names = [b"w%d-%d" % (seed, i) for i in range(pool)]
    ring = HashRing()
    ring.table()  # built from the start: every join below updates it in place
    members: list[bytes] = []
    collisions = 0
    for _ in range(steps):
        before = dict(ring.index)
        name = rng.choice(names)
        joined = None
        if name in ring and rng.random() < 0.45:
            ring.remove(name)
            members.remove(name)
            ring.table()
        elif name not in ring:
            taken = {p for m in members for p in point_hashes(m)}
            collisions += len(taken & set(point_hashes(name)))
            slots_before = ring.table()[0]
            ring.add(name)
            members.append(name)
            joined = name
            assert ring.table()[0] is slots_before  # updated in place, not rebuilt
        check(ring, members, before, joined)
    assert collisions  # shared points were met (the first joiner keeps them)


def test_indexes_and_the_16_bit_table_past_255_members():
    """A join that makes names reach 256 switches the table to 16-bit items; leaves free indexes that later
    joins reuse (lowest first); a leave back below keeps the others' indexes and a byte table again."""
    rng = random.Random(5)
    ring = HashRing()
    ring.table()
    members: list[bytes] = []
    for i in range(262):
        before = dict(ring.index)
        name = b"m%d" % i
        ring.add(name)
        members.append(name)
        if i in (0, 254, 255, 256, 261):  # (brute force is slow at this size: at the edges only)
            check(ring, members, before, name)
        else:
            assert ring.index[name] == i
    assert isinstance(ring.table()[0], array)
    for name in rng.sample(members, 12):
        before = dict(ring.index)
        ring.remove(name)
        members.remove(name)
    check(ring, members, before, None)
    names = ring.table()[1]
    assert names[-1] is not None and len(names) == max(ring.index.values()) + 1  # trailing free indexes dropped
    assert names.count(None) == len(names) - len(members)  # the others kept until a join takes them
    for i in range(262, 270):  # the lowest free indexes first
        before = dict(ring.index)
        ring.add(b"m%d" % i)
        members.append(b"m%d" % i)
        check(ring, members, before, b"m%d" % i)
    while len(members) > 200:
        ring.remove(members.pop())
    before = dict(ring.index)
    check(ring, members, before, None)
    # the last ones joined were removed first, so names shrank below 256: bytes again
    assert isinstance(ring.table()[0], bytearray)


def test_an_emptied_ring_keeps_the_empty_table_and_index_0_is_reused():
    ring = HashRing()
    assert ring.table()[1] == [None] and not any(ring.table()[0]) and isinstance(ring.table()[0], bytearray)
    for name in (b"a", b"b", b"c"):
        ring.add(name)
    for name in (b"b", b"a", b"c"):
        ring.remove(name)
    check(ring, [], {}, None)
    ring.add(b"d")
    assert ring.index == {b"d": 0}
    check(ring, [b"d"], {}, b"d")


def test_a_join_keeps_the_other_members_cursors_and_a_leave_drops_them():
    state = KeyShared(b"k")
    for name in (b"a", b"b", b"c"):
        state.join(name)
    dset = state.deferred
    dset.cursors.update({0: 10, 1: 20, 2: 30})
    state.join(b"d")
    assert dset.cursors == {0: 10, 1: 20, 2: 30}
    assert dset.index == {b"a": 0, b"b": 1, b"c": 2, b"d": 3}
    state.remove_member(b"b")
    assert dset.cursors == {} and dset.index == {b"a": 0, b"c": 2, b"d": 3}
    dset.cursors.update({0: 10, 2: 30, 1: 5})  # (a stale cursor of the freed byte: the joiner's is dropped)
    state.join(b"e")
    assert dset.index[b"e"] == 1 and dset.cursors == {0: 10, 2: 30}


@pytest.mark.parametrize("seed", range(3))
def test_reads_with_cursors_kept_through_joins_decide_as_with_cursors_reset(seed, monkeypatch):
    """KEYSHARED reads over random workloads with many joins: the state and effects are the same whether
    a join keeps the other members' cursors or resets them all (and as the brute-force step 1's)."""
    import tests.test_keyshared_model as model_test

    monkeypatch.setattr(model_test, "CONSUMERS", [b"c%d" % i for i in range(14)])
    reset = kd.DeferredSet.retable
    outcomes = []
    for mode in ("kept", "reset", "reference"):
        if mode == "reset":
            monkeypatch.setattr(kd.DeferredSet, "retable", lambda self, table, joined=None: reset(self, table))
        if mode == "reference":
            model_test.use_reference_paths(monkeypatch)
        model = model_test.Model(2000 + seed)
        joins = 0
        for _ in range(250):
            members = len(model.group().keyshared.ring.members)
            model.step()
            joins += len(model.group().keyshared.ring.members) > members
            model.check()
        assert joins > 20
        outcomes.append((model_test.keyshared_state(model.server), model.batches))
    assert outcomes[0] == outcomes[1] == outcomes[2]
