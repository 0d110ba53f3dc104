"""The KEYSHARED hash and ring against Pulsar 4.0's algorithm (no server needed).

murmur3_32 against published MurmurHash3 x86_32 vectors; the sticky-key hash
derived by hand from them as Pulsar's StickyKeyConsumerSelectorUtils does it
((h & 0x7fffffff) % 65535 + 1); ring points named as Pulsar's
ConsistentHashingStickyKeyConsumerSelector names them; select() against a
brute-force ring over random joins and leaves, collisions resolved the way
Pulsar does (the first to join keeps the point, the next takes it over).
"""

from __future__ import annotations

import random

import pytest

from storage.keyshared import NONE_KEY, HashRing, entry_key, murmur3_32, point_hashes, sticky_hash

# (data, seed, MurmurHash3_x86_32) from SMHasher's verification set as commonly published
VECTORS = [
    (b"", 0, 0),
    (b"", 1, 0x514E28B7),
    (b"", 0xFFFFFFFF, 0x81F16F39),
    (b"\xff\xff\xff\xff", 0, 0x76293B50),
    (b"\x21\x43\x65\x87", 0, 0xF55B516B),
    (b"\x21\x43\x65\x87", 0x5082EDEE, 0x2362F9DE),
    (b"\x21\x43\x65", 0, 0x7E4A8634),
    (b"\x21\x43", 0, 0xA0F7B07A),
    (b"\x21", 0, 0x72661CF4),
    (b"\x00\x00\x00\x00", 0, 0x2362F9DE),
    (b"aaaa", 0x9747B28C, 0x5A97808A),
    (b"Hello, world!", 0x9747B28C, 0x24884CBA),
    (b"The quick brown fox jumps over the lazy dog", 0x9747B28C, 0x2FA826CD),
    (b"hello", 0, 0x248BFA47),
]


@pytest.mark.parametrize(("data", "seed", "expected"), VECTORS)
def test_murmur3_32_vectors(data, seed, expected):
    assert murmur3_32(data, seed) == expected


def test_murmur3_32_default_seed_is_zero():
    """sticky_hash relies on the default seed; its memo hides a changed default from the vectors through it."""
    zero_seeded = [(data, expected) for data, seed, expected in VECTORS if seed == 0]
    assert len(zero_seeded) >= 5
    assert all(murmur3_32(data) == expected for data, expected in zero_seeded)


def test_sticky_hash_is_pulsars_range_reduction():
    # 0x248BFA47 = 613153351; & 0x7fffffff keeps it; 613153351 % 65535 = 7891; + 1
    assert sticky_hash(b"hello") == 7892
    # 0x76293B50 = 1982413648 = 30249 * 65535 + 45433
    assert sticky_hash(b"\xff\xff\xff\xff") == 45434
    # 0xF55B516B has the top bit set: Java's & Integer.MAX_VALUE leaves 0x755B516B = 1968918891 = 30043 * 65535 + 50886
    assert sticky_hash(b"\x21\x43\x65\x87") == 50887
    assert sticky_hash(b"") == 1  # murmur("") = 0 -> 0 % 65535 + 1
    rng = random.Random(7)
    for _ in range(2000):
        key = rng.randbytes(rng.randint(0, 20))
        assert 1 <= sticky_hash(key) <= 65535


def test_points_are_named_like_pulsars():
    # key = consumerName + "\0" + consumerNameIndex + "\0" + hashRingPointIndex, hashed like a sticky key
    points = point_hashes(b"consumer-1")
    assert len(points) == 100
    assert points[0] == (murmur3_32(b"consumer-1\x000\x000") & 0x7FFFFFFF) % 65535 + 1
    assert points[42] == (murmur3_32(b"consumer-1\x000\x0042") & 0x7FFFFFFF) % 65535 + 1


def test_entry_key_defaults_to_none_key():
    assert entry_key([b"a", b"1", b"key", b"x"], b"key") == b"x"
    assert entry_key([b"a", b"1"], b"key") == NONE_KEY
    assert entry_key([b"key"], b"key") == NONE_KEY  # no value to pair with


def brute_select(members: list[bytes], hash_value: int) -> bytes | None:
    best = None
    for name in members:  # join order: on a tie the earlier joiner keeps the point
        for point in point_hashes(name):
            rank = (point < hash_value, point)
            if best is None or rank < best[0]:
                best = (rank, name)
    return best[1] if best else None


@pytest.mark.parametrize("seed", range(4))
def test_select_matches_a_brute_force_ring_through_joins_and_leaves(seed):
    rng = random.Random(seed)
    names = [b"worker-%d" % i for i in range(12)]
    ring = HashRing()
    members: list[bytes] = []
    assert ring.select(5) is None
    for _ in range(40):
        name = rng.choice(names)
        if name in members and rng.random() < 0.5:
            ring.remove(name)
            members.remove(name)
        elif name not in members:
            ring.add(name)
            members.append(name)
        probes = [1, 65535, *(rng.randint(1, 65535) for _ in range(60))]
        assert [ring.select(h) for h in probes] == [brute_select(members, h) for h in probes]
        ranges = ring.ranges()
        covered = sorted((s, e, n) for n, spans in ranges.items() for s, e in spans)
        if members:
            assert covered[0][0] == 1 and covered[-1][1] == 65535
            assert all(a[1] + 1 == b[0] for a, b in zip(covered, covered[1:], strict=False))
            for start, end, name in covered:
                assert ring.select(start) == name and ring.select(end) == name


def test_a_colliding_point_stays_with_the_first_joiner_then_passes_on():
    taken: dict[int, bytes] = {}
    pair = None
    for i in range(2000):  # find two names sharing a point
        name = b"c%d" % i
        for point in point_hashes(name):
            if point in taken and taken[point] != name:
                pair = (taken[point], name, point)
                break
            taken[point] = name
        if pair:
            break
    first, second, point = pair
    ring = HashRing()
    ring.add(first)
    ring.add(second)
    assert ring.select(point) == first
    ring.remove(first)
    assert ring.select(point) == second
    ring.add(first)  # back, but now second joined earlier
    assert ring.select(point) == second


def test_a_hundred_points_split_keys_roughly_evenly():
    ring = HashRing()
    for i in range(4):
        ring.add(b"w%d" % i)
    counts: dict[bytes, int] = {}
    for i in range(20000):
        owner = ring.select(sticky_hash(b"order-%d" % i))
        counts[owner] = counts.get(owner, 0) + 1
    assert len(counts) == 4 and min(counts.values()) > 2500  # 5000 each if perfectly even


@pytest.mark.parametrize("members", [2, 300])  # a bytearray of indexes, then 16-bit ones past 255 members
def test_the_lookup_table_answers_as_select(members):
    ring = HashRing()
    for i in range(members):
        ring.add(b"m%d" % i)
    slots, names = ring.table()
    assert len(slots) == 65536
    assert all(names[slots[h]] == ring.select(h) for h in range(1, 65536))
    ring.remove(b"m0")  # a change rebuilds it
    slots, names = ring.table()
    assert b"m0" not in names and all(names[slots[h]] == ring.select(h) for h in range(1, 65536, 7))


def test_held_back_and_its_oldest_from_every_members_queue() -> None:
    """held_back/first_held_back (lag, oldest-undelivered-ms) over deferred entries queued at several members:
    the oldest is the least of all queues' heads, and dead ones below the stream's first entry do not count."""
    from types import SimpleNamespace

    from storage.keyshared import KeyShared, first_held_back, held_back
    from storage.stream import Stream

    stream = Stream()
    for ms in range(1, 11):
        stream.add(ms, [b"f", b"v"])
    state = KeyShared(b"k")
    state.join(b"A")
    state.join(b"B")
    a_hash = next(h for h in range(1, 65536) if state.ring.select(h) == b"A")
    b_hash = next(h for h in range(1, 65536) if state.ring.select(h) == b"B")
    for ms, h in ((7, a_hash), (3, b_hash), (9, b_hash), (5, a_hash)):
        state.defer(ms << 64, h)
    assert state.queues[b"A"] == [5 << 64, 7 << 64] and state.queues[b"B"] == [3 << 64, 9 << 64]
    group = SimpleNamespace(keyshared=state)
    assert (held_back(group, stream), first_held_back(group, stream)) == (4, 3 << 64)
    stream.delete([1 << 64, 2 << 64, 3 << 64, 4 << 64])  # the stream now starts at 5-0: 3-0 stays deferred, dead
    assert (held_back(group, stream), first_held_back(group, stream)) == (3, 5 << 64)
    state.undefer([5 << 64])
    assert (held_back(group, stream), first_held_back(group, stream)) == (2, 7 << 64)
