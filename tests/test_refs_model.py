"""storage/refs.py in-process against models from the policies' definitions (issue 27, README "Mutation testing").

tests/test_r8_refs.py checks ACKED trims through an in-process server and
Redis's own cases through a process; tests/test_r8_refs_effects.py checks that
effects replay. Neither tells a wrong DELREF trim from a right one, so here,
over seeded random streams (small nodes, XDEL gaps) and groups (PELs with
owned and NACKed entries, last-delivered-ids anywhere):

- DELREF removes exactly the entries KEEPREF (Redis 7's trim, on a copy)
  removes, for every MAXLEN/MINID, `=`/`~` and LIMIT, and drops exactly those
  IDs from every group's and consumer's PEL (and reports them per group);
- ACKED with an exact MINID removes every entry below it that no group
  references, and nothing else; ACKED never touches a PEL;
- ACKED with an exact MAXLEN walks as Redis 7's exact trim (whole nodes while
  that keeps MAXLEN, then entry by entry in the first node that cannot go
  whole, and no further even when skips leave it above MAXLEN);
- `References.referenced` is the definition (pending somewhere, deferred by a
  KEYSHARED group, or after some group's last-delivered-id) for every ID;
- trims never move max-deleted-entry-id, `delete_entries` outside a trim does.
"""

from __future__ import annotations

import copy
import random

import pytest

from storage import refs
from storage.consumer_group import ConsumerGroup, PendingEntry
from storage.keyshared import KeyShared
from storage.stream import Stream
from storage.stream_id import MAX_ID


def _live(stream: Stream) -> list[int]:
    return [entry_id for entry_id, _ in stream.range(0, MAX_ID)]


def _pels(stream: Stream) -> dict[bytes, tuple[list[int], dict[bytes, list[int]], list[int]]]:
    return {
        name: (sorted(group.pel.keys()), {c: sorted(consumer.pel.keys()) for c, consumer in group.consumers.items()}, list(group.nacked))
        for name, group in stream.groups.items()
    }


def _build(rng: random.Random) -> Stream:
    stream = Stream()
    node_size = rng.choice((1, 2, 3, 5, 100))
    for ms in range(1, rng.randrange(2, 40)):
        stream.add_id(ms, 0, [b"f", b"v"], node_size)
    live = _live(stream)
    stream.delete(rng.sample(live, rng.randrange(0, len(live) // 3 + 1)))
    ever = list(range(1 << 64, (stream.last_id >> 64) + 1 << 64, 1 << 64))
    for g in range(rng.choice((0, 1, 1, 2, 3))):
        group = ConsumerGroup(rng.choice((0, rng.choice(ever), stream.last_id, MAX_ID)))
        consumers = [group.consumer(name, 1)[0] for name in (b"a", b"b")]
        for entry_id in ever:
            if entry_id <= group.last_id and rng.random() < 0.3:
                group.add_pending(entry_id, rng.choice(consumers), 1)  # pending, the entry maybe deleted since
        pending = sorted(group.pel.keys())
        for entry_id in pending[: rng.randrange(0, 3)]:
            group.drop_pending(entry_id)
            group.pel[entry_id] = PendingEntry(None, 0, 1)  # XNACKed: in the group's PEL and its NACK zone only
            group.nacked[entry_id] = None
        if rng.random() < 0.3:
            # a KEYSHARED group: entries it passed over for another consumer are deferred, not yet delivered
            group.keyshared = KeyShared(b"f")
            for entry_id in ever:
                if entry_id <= group.last_id and entry_id not in group.pel.keys() and rng.random() < 0.3:
                    group.keyshared.deferred[entry_id] = 0
        stream.groups[b"g%d" % g] = group
    return stream


def _referenced(stream: Stream, entry_id: int) -> bool:
    return any(
        entry_id in group.pel.keys() or entry_id > group.last_id or (group.keyshared is not None and entry_id in group.keyshared.deferred)
        for group in stream.groups.values()
    )


def _acked_exact_maxlen(stream: Stream, maxlen: int) -> list[int]:
    """Redis 7's exact MAXLEN walk with ACKED's skips: node by node while removing a node whole would keep
    MAXLEN; inside the first node that cannot go whole, entry by entry until MAXLEN holds, and no further,
    even when skipped entries leave the stream above MAXLEN (checked against Redis 8.2.3, README)."""
    length = len(stream)
    doomed = []
    for node in stream.nodes:
        ids = [entry_id for entry_id, _ in stream.range(node.master_id, node.last_id)]
        if length <= maxlen:
            break
        whole = length - len(ids) >= maxlen
        for entry_id in ids:
            if length <= maxlen:
                break
            if not _referenced(stream, entry_id):
                doomed.append(entry_id)
                length -= 1
        if not whole:
            break
    return doomed


def _random_trim(rng: random.Random, stream: Stream) -> dict:
    live = _live(stream)
    approx = rng.random() < 0.5
    args: dict = {"approx": approx, "limit": rng.choice((0, 0, 1, 2, 3, 7)) if approx else 0}
    if rng.random() < 0.5:
        args["maxlen"] = rng.randrange(0, len(live) + 2)
    else:
        args["minid"] = rng.choice([*live, 0, 1, stream.last_id + 1]) + rng.choice((0, 0, 1))
    return args


@pytest.mark.parametrize("seed", range(10))
def test_delref_trims_as_keepref_and_drops_exactly_those_references(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        stream = _build(rng)
        args = _random_trim(rng, stream)
        before = _live(stream)
        pels = _pels(stream)
        counters = (stream.max_deleted_entry_id, stream.entries_added, stream.last_id)
        plain = copy.deepcopy(stream)
        kept = refs.trim(plain, **args, policy=refs.KEEPREF)
        outcome = refs.trim(stream, **args, policy=refs.DELREF)
        assert _live(stream) == _live(plain), args
        gone = [entry_id for entry_id in before if entry_id not in set(_live(stream))]
        assert outcome.deleted == kept.deleted == len(gone)
        assert (stream.max_deleted_entry_id, stream.entries_added, stream.last_id) == counters
        gone_set = set(gone)
        want_dropped = {}
        for name, (pel, consumers, nacked) in pels.items():
            group = stream.groups[name]
            assert sorted(group.pel.keys()) == [i for i in pel if i not in gone_set]
            assert {c: sorted(consumer.pel.keys()) for c, consumer in group.consumers.items()} == {
                c: [i for i in ids if i not in gone_set] for c, ids in consumers.items()
            }
            assert list(group.nacked) == [i for i in nacked if i not in gone_set]
            dropped = [i for i in gone if i in set(pel)]
            if dropped:
                want_dropped[name] = dropped
        assert outcome.dropped == want_dropped
        assert _pels(plain) == pels  # KEEPREF leaves the references dangling


@pytest.mark.parametrize("seed", range(10))
def test_acked_exact_minid_removes_every_unreferenced_entry_below(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(60):
        stream = _build(rng)
        live = _live(stream)
        minid = rng.choice([*live, 0, stream.last_id + 1]) + rng.choice((0, 1))
        pels = _pels(stream)
        max_deleted = stream.max_deleted_entry_id
        want = [i for i in live if i < minid and not (stream.groups and _referenced(stream, i))]
        outcome = refs.trim(stream, minid=minid, policy=refs.ACKED)
        assert _live(stream) == [i for i in live if i not in set(want)], (minid, want)
        assert outcome.deleted == len(want)
        assert outcome.dropped == {}
        assert _pels(stream) == pels
        assert stream.max_deleted_entry_id == max_deleted


@pytest.mark.parametrize("seed", range(10))
def test_acked_exact_maxlen_stops_in_the_first_node_that_cannot_go_whole(seed: int) -> None:
    rng = random.Random(300 + seed)
    stopped_above = 0
    for _ in range(60):
        stream = _build(rng)
        if not stream.groups:
            continue
        live = _live(stream)
        maxlen = rng.randrange(0, len(live) + 1)
        want = _acked_exact_maxlen(stream, maxlen)
        outcome = refs.trim(stream, maxlen=maxlen, policy=refs.ACKED)
        assert _live(stream) == [i for i in live if i not in set(want)], (maxlen, want)
        assert outcome.deleted == len(want)
        stopped_above += len(stream) > maxlen and len(stream.nodes) > 1
    assert stopped_above  # the workloads reach the rule's point: a trim that ends above MAXLEN


@pytest.mark.parametrize("seed", range(6))
def test_referenced_is_the_definition(seed: int) -> None:
    rng = random.Random(200 + seed)
    for _ in range(40):
        stream = _build(rng)
        references = refs.References(stream)
        assert references.min_last_id == min((g.last_id for g in stream.groups.values()), default=MAX_ID)
        for entry_id in range(0, stream.last_id + (3 << 64), 1 << 63):
            assert references.referenced(entry_id) == _referenced(stream, entry_id), entry_id


def test_delete_entries_moves_max_deleted_only_outside_a_trim() -> None:
    stream = Stream()
    for ms in range(1, 6):
        stream.add_id(ms, 0, [b"f", b"v"])
    assert refs.delete_entries(stream, [4 << 64, 9 << 64], trimming=True) == [4 << 64]
    assert stream.max_deleted_entry_id == 0
    assert refs.delete_entries(stream, [2 << 64, 2 << 64], trimming=False) == [2 << 64]
    assert stream.max_deleted_entry_id == 2 << 64
    assert _live(stream) == [1 << 64, 3 << 64, 5 << 64]


def test_drop_references_counts_an_id_given_twice_once() -> None:
    stream = Stream()
    for ms in range(1, 4):
        stream.add_id(ms, 0, [b"f", b"v"])
    group = stream.groups[b"g"] = ConsumerGroup(3 << 64)
    consumer = group.consumer(b"c", 1)[0]
    for ms in (1, 2):
        group.add_pending(ms << 64, consumer, 1)
    stream.groups[b"empty"] = ConsumerGroup(0)
    assert refs.drop_references(stream, [2 << 64, 2 << 64, 3 << 64]) == {b"g": [2 << 64]}
    assert sorted(group.pel.keys()) == sorted(consumer.pel.keys()) == [1 << 64]


def _layout(stream: Stream) -> list[tuple[int, int, int]]:
    return [(node.master_id, node.count, node.deleted) for node in stream.nodes]


@pytest.mark.parametrize("seed", range(6))
def test_keepref_with_groups_is_redis_7s_trim(seed: int) -> None:
    """KEEPREF ignores the groups: the nodes (master IDs, live and deleted counts, which later `~` trims and
    XINFO read) come out as a trim of the same stream without groups leaves them."""
    rng = random.Random(400 + seed)
    for _ in range(60):
        stream = _build(rng)
        args = _random_trim(rng, stream)
        plain = copy.deepcopy(stream)
        plain.groups = {}
        refs.trim(plain, **args, policy=refs.KEEPREF)
        outcome = refs.trim(stream, **args, policy=refs.KEEPREF)
        assert _layout(stream) == _layout(plain), args
        assert _live(stream) == _live(plain)
        assert outcome.dropped == {}
