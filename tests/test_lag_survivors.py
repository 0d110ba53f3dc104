"""storage/lag.py against a brute-force model, in-process (issue 27, README "Mutation testing").

tests/test_lag.py checks the same figures through a server process, which
mutmut cannot attribute to storage/lag.py. Here random seeded workloads (XADD,
XDEL, exact and approximate trims, groups moving to random IDs, XSETID raising
the last ID) drive a Stream and ConsumerGroups directly; after each step every
function of storage/lag.py is compared with the model, which keeps every ID
ever added and counts: the lag is the live entries after the group's
last-delivered-id plus what the registered held-back counters add; the first
undelivered entry is a held-back one, else the first live entry after it;
entries-read is the number of IDs ever added up to the position (Redis's
convention behind the first entry: every removed entry counts as read), and it
is known exactly where no deleted entry lies after the position.
"""

from __future__ import annotations

import random
from bisect import bisect_right

import pytest

from storage import lag as lag_module
from storage.consumer_group import INVALID_ENTRIES_READ, ConsumerGroup, lag
from storage.stream import Stream
from storage.stream_id import MAX_ID


class Model:
    def __init__(self) -> None:
        self.live: list[int] = []
        self.ever: list[int] = []
        self.max_deleted = 0  # the greatest ID XDEL removed
        self.last_id = 0

    def live_after(self, entry_id: int) -> int:
        return len(self.live) - bisect_right(self.live, entry_id)

    def entries_read(self, entry_id: int) -> int | None:
        """The logical read counter at entry_id, None where a deleted entry after it hides it."""
        if not self.ever:
            return 0
        if entry_id > self.last_id:
            return None
        if not self.live:
            return len(self.ever)  # an empty stream: everything up to the last ID counts as read
        behind = entry_id < self.live[0]
        if entry_id < self.max_deleted and not (self.live and self.max_deleted < self.live[0]):
            return None
        if behind:
            return len(self.ever) - len(self.live)  # every removed entry counts as read
        return bisect_right(self.ever, entry_id)


def _random_id(rng: random.Random, model: Model) -> int:
    pick = rng.random()
    if model.live and pick < 0.5:
        return rng.choice(model.live) + rng.choice((-1, 0, 0, 1))
    if model.ever and pick < 0.7:
        return rng.choice(model.ever) + rng.choice((-1, 0, 1))
    if pick < 0.8:
        return rng.choice((0, 1, model.last_id, model.last_id + 1, model.max_deleted, model.max_deleted + 1, MAX_ID))
    return rng.randrange(0, model.last_id + 3)


def _check(stream: Stream, model: Model, groups: dict[str, ConsumerGroup], held: dict[str, tuple[int, int | None]]) -> None:
    assert len(stream) == len(model.live)
    for name, group in groups.items():
        count, first = held.get(name, (0, None))
        want_lag = model.live_after(group.last_id) + count
        assert lag_module.exact_lag(stream, group) == want_lag, (name, group.last_id)
        after = model.live[bisect_right(model.live, group.last_id) :]
        want_first = first if first is not None else (after[0] if after else None)
        assert lag_module.first_undelivered_id(stream, group) == want_first, (name, group.last_id)
        truth = model.entries_read(group.last_id)
        computed = lag_module.exact_entries_read(stream, group.last_id)
        assert computed == (INVALID_ENTRIES_READ if truth is None else truth), (name, group.last_id, model.max_deleted)
        reported = lag_module.group_entries_read(stream, group)
        assert reported == (group.entries_read if truth is None else truth)
        redis_read, redis_lag = lag_module.xinfo_lag(stream, group, False)
        assert redis_read == (None if group.entries_read == INVALID_ENTRIES_READ else group.entries_read)
        assert redis_lag == lag(stream, group)
        exact_read, exact = lag_module.xinfo_lag(stream, group, True)
        assert exact == want_lag
        assert exact_read == (None if reported == INVALID_ENTRIES_READ else reported)


@pytest.mark.parametrize("seed", range(10))
def test_lag_functions_match_brute_force(seed: int, monkeypatch) -> None:
    rng = random.Random(seed)
    held: dict[str, tuple[int, int | None]] = {}
    ids: dict[int, str] = {}
    monkeypatch.setattr(lag_module, "_HELD_BACK", [])
    monkeypatch.setattr(lag_module, "_HELD_FIRST", [])
    stream = Stream()

    def count_of(s: Stream, g: ConsumerGroup) -> int:
        return held.get(ids[id(g)], (0, None))[0] if s is stream else -1000  # the hooks are given the group's stream

    def first_of(s: Stream, g: ConsumerGroup) -> int | None:
        return held.get(ids[id(g)], (0, None))[1] if s is stream else -1

    if seed % 2:
        # key-ordered groups' hooks: two sources, the second giving a first ID only for some groups
        lag_module.register_held_back(count_of)
        lag_module.register_held_back(lambda s, g: 0, lambda s, g: None)
        lag_module.register_held_back(lambda s, g: 0, first_of)
    model = Model()
    groups: dict[str, ConsumerGroup] = {}
    node_size = rng.choice((1, 3, 8, 100))
    now = 1
    for step in range(300):
        op = rng.random()
        if op < 0.4:
            now += rng.choice((0, 1, 4))
            text = stream.add(now, [b"f", b"%d" % step], node_size)
            ms, seq = text.split(b"-")
            new = int(ms) << 64 | int(seq)
            model.live.append(new)
            model.ever.append(new)
            model.last_id = new
        elif op < 0.5 and model.live:
            victim = rng.choice(model.live)
            assert stream.delete([victim]) == [victim]
            model.live.remove(victim)
            model.max_deleted = max(model.max_deleted, victim)
        elif op < 0.56 and model.live:
            if rng.random() < 0.5:
                n = stream.trim(maxlen=rng.randrange(0, len(model.live) + 2), approx=rng.random() < 0.5)
            else:
                n = stream.trim(minid=_random_id(rng, model), approx=rng.random() < 0.5)
            del model.live[:n]
        elif op < 0.6:
            # XSETID to a greater last ID (entries-added unchanged)
            top = max(model.last_id, model.max_deleted) + rng.choice((1, 1 << 64))
            if model.live and rng.random() < 0.4:
                # MAXDELETEDID too, sometimes naming a live entry (the first one): a tombstone from there on
                model.max_deleted = max(model.max_deleted, rng.choice((model.live[0], rng.choice(model.live))))
            stream.set_id(top, max_deleted_entry_id=model.max_deleted)
            model.last_id = top
            now = max(now, top >> 64)
        elif op < 0.66 and len(groups) < 4:
            name = f"g{step}"
            at = _random_id(rng, model)
            group = ConsumerGroup(0)
            group.set_id(at, lag_module.exact_entries_read(stream, at) if rng.random() < 0.5 else INVALID_ENTRIES_READ, stream.entries_added)
            groups[name] = group
            ids[id(group)] = name
        elif op < 0.72 and groups:
            name = rng.choice(sorted(groups))
            groups[name].set_id(_random_id(rng, model), INVALID_ENTRIES_READ, stream.entries_added)
        elif op < 0.9 and groups:
            group = groups[rng.choice(sorted(groups))]
            new = [i for i in model.live if i > group.last_id][: rng.randrange(1, 5)]
            if new:
                if rng.random() < 0.5:
                    group.advance_many(stream, new)
                else:
                    for entry_id in new:
                        group.advance(stream, entry_id)
        elif groups and seed % 2:
            name = rng.choice(sorted(groups))
            behind = [i for i in model.live if i <= groups[name].last_id]
            first = rng.choice(behind) if behind and rng.random() < 0.6 else None
            held[name] = (rng.randrange(0, 4), first)
        _check(stream, model, groups, held)


def test_first_undelivered_id_at_the_end_of_the_id_space() -> None:
    """A group at MAX_ID has nothing after it (no ID above the greatest)."""
    stream = Stream()
    stream.add(5, [b"f", b"v"])
    assert lag_module.first_undelivered_id(stream, ConsumerGroup(MAX_ID)) is None
    assert lag_module.first_undelivered_id(stream, ConsumerGroup(0)) == 5 << 64
    assert lag_module.exact_lag(stream, ConsumerGroup(MAX_ID)) == 0
