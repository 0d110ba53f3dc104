"""storage/retention.py's helpers against what they mean, over random streams (issue 27, README "Mutation testing").

The model workload (tests/test_retention_inprocess.py) has no KEYSHARED group,
no two subscribers with equal release points, no ages near zero; here each
helper is checked, over seeded random streams with tombstones and small nodes,
by the property that defines it rather than by the value it returns:

- count_below: the live entries below the cut, capped (the lowered cut leaves
  exactly cap below it);
- the MIN/MAX-LEN cut keeps the newest n (at or after it lie min(n, len)
  live entries); the age cut frees exactly the entries older than now - age;
- whole_nodes frees the entries below the cut except a node that straddles it;
- ack_floor is the lowest pending or deferred (KEYSHARED) ID that still
  exists, else last-delivered-id + 1;
- head_holder is the subscriber with the lowest point, the first by name on
  ties, and forgets the roles of destroyed groups; subscribers() lists the
  roles other than NONE of groups that exist; is_empty.
"""

from __future__ import annotations

import random
import sys

import pytest

from storage import retention as store
from storage.consumer_group import ConsumerGroup
from storage.keyshared import KeyShared
from storage.stream import Stream, node_memory
from storage.stream_id import MAX_ID


def _random_stream(rng: random.Random) -> tuple[Stream, list[int], list[int]]:
    """A stream with tombstones, its live IDs and every ID it was given (a PEL only ever holds those)."""
    stream = Stream()
    node = rng.choice((1, 2, 3, 5))
    ms = rng.choice((0, 1, 1000))
    for _ in range(rng.randrange(1, 30)):
        ms += rng.choice((0, 1, 2))
        stream.add_id(ms, 1 if stream.last_id >> 64 != ms else (stream.last_id & 0xFFFF) + 1, [b"f", b"v"], node)
    added = [i for i, _ in stream.range(0, MAX_ID)]
    stream.delete(rng.sample(added, rng.randrange(0, len(added))))
    return stream, [i for i, _ in stream.range(0, MAX_ID)], added


def _some_id(rng: random.Random, stream: Stream, live: list[int]) -> int:
    return rng.choice([*live, 0, 1, stream.last_id, stream.last_id + 1]) + rng.choice((-1, 0, 0, 1))


@pytest.mark.parametrize("seed", range(6))
def test_cuts_mean_what_they_say(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(300):
        stream, live, _added = _random_stream(rng)
        if not live:
            continue
        cut = max(_some_id(rng, stream, live), 0)
        cap = rng.choice((0, 1, 2, len(live), MAX_ID))
        below = [i for i in live if i < cut]
        counted, lowered = store.count_below(stream, cut, cap)
        assert counted == min(len(below), cap)
        assert [i for i in live if i < lowered] == below[:counted]
        keep = rng.randrange(0, len(live) + 2)
        len_cut = store._len_cut(stream, keep)
        assert len([i for i in live if i >= len_cut]) == min(keep, len(live)), keep
        now, age = rng.choice((0, 1, 2, live[0] >> 64, (live[-1] >> 64) + 1)), rng.choice((0, 1, 2))
        age_cut = store._age_cut(now, age)
        assert [i for i in live if i < age_cut] == [i for i in live if (i >> 64) < now - age]
        rounded = store.whole_nodes(stream, cut)
        straddling = set()
        for node in stream.nodes:
            ids = [i for i in live if node.master_id <= i <= node.last_id]
            if ids and ids[0] < cut <= ids[-1]:
                straddling = set(ids)
        assert [i for i in live if i < rounded] == [i for i in below if i not in straddling], cut


@pytest.mark.parametrize("seed", range(6))
def test_ack_floor_is_the_lowest_entry_still_held(seed: int) -> None:
    rng = random.Random(100 + seed)
    for _ in range(300):
        stream, live, ever = _random_stream(rng)
        group = ConsumerGroup(rng.choice([0, *ever, stream.last_id]))
        consumer = group.consumer(b"c", 1)[0]
        for entry_id in ever:
            if rng.random() < 0.3:
                group.add_pending(entry_id, consumer, 1)  # maybe above last-delivered-id (SETID moved back)
        if rng.random() < 0.5:
            group.keyshared = KeyShared(b"f")
            for entry_id in ever:
                if entry_id not in group.pel.keys() and rng.random() < 0.3:
                    group.keyshared.deferred[entry_id] = 0
        held = [i for i in group.pel.keys() if i in set(live) and i <= group.last_id]
        if group.keyshared is not None:
            held += [i for i in group.keyshared.deferred if i in set(live)]
        assert store.ack_floor(stream, group) == min([group.last_id + 1, *held])


def test_head_holder_ties_by_name_and_destroyed_groups_are_forgotten() -> None:
    stream = Stream()
    for ms in range(1, 6):
        stream.add_id(ms, 0, [b"f", b"v"], 2)
    retention = store.of(stream)
    assert retention.is_empty()
    groups = {}
    for name, mode, release, last in ((b"b", store.MANUAL, 2 << 64, 0), (b"a", store.AUTO, 0, 2 << 64), (b"c", store.NONE, 0, 0)):
        group = groups[name] = stream.groups[name] = ConsumerGroup(last)
        role = retention.role_for(stream, name, group)
        role.mode, role.release = mode, release
    assert not retention.is_empty()  # roles alone are state
    assert store.head_holder(stream, retention) == (b"a", (2 << 64) + 1)  # equal points: the first by name
    assert [name for name, _ in retention.subscribers(stream)] == [b"b", b"a"]
    group_b = stream.groups.pop(b"b")  # destroyed, and first in the roles: the others are still looked at
    assert store.head_holder(stream, retention) == (b"a", (2 << 64) + 1)
    assert b"b" not in retention.roles
    stream.groups[b"b"] = group_b
    retention.role_for(stream, b"b", group_b).mode = store.MANUAL
    retention.roles[b"b"].release = 2 << 64
    del stream.groups[b"a"]  # destroyed: its role goes, the next subscriber holds
    assert store.head_holder(stream, retention) == (b"b", (2 << 64) + 1)
    assert b"a" not in retention.roles
    stream.groups[b"a"] = ConsumerGroup(0)  # recreated: a new group, no role
    assert [name for name, _ in retention.subscribers(stream)] == [b"b"]
    del stream.groups[b"b"], stream.groups[b"a"]
    assert store.head_holder(stream, retention) == (None, None)
    assert retention.roles.keys() == {b"c"}
    del stream.groups[b"c"]
    retention.role(stream, b"c")
    assert retention.is_empty()
    for counters in ((1, 0, 0), (0, 1, 0), (0, 0, 1)):
        retention.entries_truncated, retention.entries_lost, retention.last_run = counters
        assert not retention.is_empty()
    retention.entries_truncated = retention.entries_lost = retention.last_run = 0
    retention.policy = ((b"len", 1), None)
    assert not retention.is_empty()


@pytest.mark.parametrize("seed", range(6))
def test_account_counts_what_each_group_loses(seed: int) -> None:
    """entries-lost: the removed (live, below the cut) entries a group still had pending, deferred (KEYSHARED)
    or not yet delivered; for MANUAL, not yet released; the stream's: those at or after the holder's point."""
    rng = random.Random(200 + seed)
    for _ in range(200):
        stream, live, ever = _random_stream(rng)
        if not live:
            continue
        retention = store.of(stream)
        want = {}
        for name in (b"a", b"b", b"c"):
            group = stream.groups[name] = ConsumerGroup(rng.choice([0, *ever]))
            consumer = group.consumer(b"c", 1)[0]
            for entry_id in ever:
                if entry_id <= group.last_id and rng.random() < 0.3:
                    group.add_pending(entry_id, consumer, 1)
            if rng.random() < 0.5:
                group.keyshared = KeyShared(b"f")
                for entry_id in ever:
                    if entry_id <= group.last_id and entry_id not in group.pel.keys() and rng.random() < 0.3:
                        group.keyshared.deferred[entry_id] = 0
            mode = rng.choice((store.NONE, store.AUTO, store.MANUAL))
            role = retention.role_for(stream, name, group)
            role.mode, role.release = mode, rng.choice([0, *ever])
            if mode == store.MANUAL:
                want[name] = lambda i, role=role: i > role.release
            else:
                deferred = set(group.keyshared.deferred) if group.keyshared is not None else set()
                want[name] = lambda i, g=group, d=deferred: i > g.last_id or i in g.pel.keys() or i in d
        cut = max(_some_id(rng, stream, live), 1)
        slb = rng.choice((None, *live))
        gone = [i for i in live if i < cut]
        store.account(stream, retention, store.Plan(cut, None, slb, len(gone), None), 7)
        for name, holds in want.items():
            assert retention.roles[name].entries_lost == sum(1 for i in gone if holds(i)), name
        assert retention.entries_lost == (0 if slb is None else sum(1 for i in gone if i >= slb))
        assert (retention.entries_truncated, retention.last_run) == (len(gone), 7)


def _counted(stream: Stream, first_kept: int, at_least: bool, extra: int) -> int:
    """_bytes_cut's documented count of MEMORY USAGE with the nodes from first_kept on: each node's size and
    key; the node lists at their current allocation (MAX: they only shrink) or at 8 bytes a slot (MIN)."""
    nodes = stream.nodes
    sizes = [node_memory(node) + sys.getsizeof(key) for node, key in zip(nodes, stream.keys, strict=True)]
    if at_least:
        lists = 2 * sys.getsizeof([]) + 16 * (len(nodes) - first_kept)
    else:
        lists = sys.getsizeof(nodes) + sys.getsizeof(stream.keys)
    return stream.base_memory() + lists + extra + sum(sizes[first_kept:])


@pytest.mark.parametrize("seed", range(6))
def test_byte_cuts_keep_within_max_and_reach_min(seed: int) -> None:
    """MAX-BYTES keeps the most newest nodes whose count stays within the limit, and MEMORY USAGE afterwards
    is within it; MIN-BYTES keeps the fewest newest nodes whose count reaches it (all of them if none do).
    Limits are taken at and around each node boundary's count, where an off-by-one decides."""
    rng = random.Random(300 + seed)
    for _ in range(40):
        build_seed = rng.randrange(1 << 30)
        stream = _byte_stream(build_seed)
        extra = rng.choice((0, 50))
        nodes = len(stream.nodes)
        for at_least in (False, True):
            edges = [_counted(stream, i, at_least, extra) for i in range(nodes + 1)]
            for limit in sorted({edge + d for edge in edges for d in (-1, 0, 1)}):
                cut = store._bytes_cut(stream, store.ByteMeter(), limit, at_least, extra)
                first_kept = sum(1 for node in stream.nodes if stream.node_ids(node)[-1] < cut)
                if not at_least:
                    fits = [i for i in range(nodes + 1) if i == nodes or edges[i] <= limit]
                    assert first_kept == (0 if edges[0] <= limit else fits[0]), (limit, edges)
                    if 0 < first_kept < nodes and rng.random() < 0.2:
                        trimmed = _byte_stream(build_seed)  # the same lists, allocated the same way (a copy's are not)
                        trimmed.trim(minid=cut)
                        assert trimmed.memory_usage() + extra <= limit
                else:
                    reach = [i for i in range(nodes) if edges[i] >= limit]
                    assert first_kept == (reach[-1] if reach else 0), (limit, edges)


def _byte_stream(seed: int) -> Stream:
    rng = random.Random(seed)
    stream = Stream()
    for ms in range(1, rng.randrange(2, 40)):
        stream.add_id(ms, 0, [b"f", b"v" * rng.choice((1, 30, 300))], rng.choice((1, 2, 5)))
    live = [i for i, _ in stream.range(0, MAX_ID)]
    stream.delete(rng.sample(live, rng.randrange(0, len(live) // 2 + 1)))
    return stream


@pytest.mark.parametrize("seed", range(4))
def test_plan_with_min_bytes_alone_keeps_what_reaches_it(seed: int) -> None:
    """A MIN-BYTES policy without subscribers keeps the fewest newest nodes whose count, with the key's
    bytes, reaches the limit (MIN counted as MIN, never as MAX)."""
    rng = random.Random(400 + seed)
    for _ in range(40):
        stream = _byte_stream(rng.randrange(1 << 30))
        extra = rng.choice((0, 50))
        nodes = len(stream.nodes)
        edges = [_counted(stream, i, True, extra) for i in range(nodes + 1)]
        limit = rng.choice(edges) + rng.choice((-1, 0, 1))
        retention = store.Retention()
        retention.policy = ((b"bytes", limit), None)
        decided = store.plan(stream, retention, 0, extra_bytes=extra)
        reach = [i for i in range(nodes) if edges[i] >= limit]
        first_kept = reach[-1] if reach else 0
        if first_kept == 0:
            assert decided is None
        else:
            assert decided.keep_from == stream.node_ids(stream.nodes[first_kept])[0], (limit, edges)


def test_load_names_what_is_wrong_with_a_corrupt_record() -> None:
    """A snapshot's retention map naming a missing group or an unknown mode is refused with a message that
    says which (the loader reports it as `malformed record (...)`)."""
    stream = Stream()
    stream.add_id(1, 0, [b"f", b"v"])
    stream.groups[b"g"] = ConsumerGroup(0)
    with pytest.raises(ValueError, match=r"^a retention role names a missing group$"):
        store.load(stream, {"roles": [[b"x", b"auto", bytes(16), 0]]})
    with pytest.raises(ValueError, match=r"^unknown subscriber mode b'bogus'$"):
        store.load(stream, {"roles": [[b"g", b"bogus", bytes(16), 0]]})


def test_a_role_account_creates_has_released_nothing() -> None:
    """A group without a role that loses entries gets one (NONE) to count them; its release point is 0-0,
    which XRETENTION SETSTATE then states for it."""
    from server.retention import state_effect

    stream = Stream()
    for ms in range(1, 4):
        stream.add_id(ms, 0, [b"f", b"v"])
    stream.groups[b"g"] = ConsumerGroup(0)
    retention = store.of(stream)
    store.account(stream, retention, store.Plan(3 << 64, None, None, 2, 3 << 64), 5)
    role = retention.roles[b"g"]
    assert (role.mode, role.entries_lost, role.release) == (store.NONE, 2, 0)
    assert state_effect(b"s", retention)[-4:] == [b"GROUP", b"g", b"2", b"0-0"]
