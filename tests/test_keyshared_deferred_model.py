"""storage/keyshared_deferred.py's DeferredSet against a brute-force model, in-process (issue 27, README
"Mutation testing", fifth run).

tests/test_keyshared_deferred.py checks the set's answers against a dict.
Here the rest of its state is checked too, after every one of random
operations (spans scanned after everything, single entries anywhere, discards,
ring changes past 254 consumers, compactions, head trims, dict-style
assignment): each deferred entry's cached wire forms (the scan's, or None for
one deferred alone, gone when it leaves), the owner byte of every position
(FREE exactly where nothing is deferred, else the ring's owner index capped at
254), the per-owner counts, the consumers' cursors (never above one of their
deferred entries), the position count, that emptied head blocks are dropped
and sparse sets compacted, and the dict-style lookups and their errors.
"""

from __future__ import annotations

import random
from array import array

import pytest

import storage.keyshared_deferred as kd
from storage.keyshared import HashRing
from storage.keyshared_deferred import FREE, OVERFLOW, DeferredSet, owner_bytes


class Model:
    def __init__(self) -> None:
        self.hashes: dict[int, int] = {}  # deferred ID -> hash
        self.pos: dict[int, tuple] = {}  # every position kept -> its cached (wid, wire), (None, None) when unknown

    def add(self, entry_id: int, hash_value: int) -> None:
        """One entry deferred: a new position has no cached wire forms; a kept one keeps its own."""
        self.hashes.setdefault(entry_id, hash_value)
        self.pos.setdefault(entry_id, (None, None))

    def discard(self, entry_id: int) -> None:
        if self.hashes.pop(entry_id, None) is not None:
            self.pos[entry_id] = (None, None)

    def dropped(self, dset: DeferredSet) -> None:
        """A head trim dropped whole emptied blocks: never a deferred entry's position, never one unknown."""
        kept = {i for block in dset.blocks for i in block.ids}
        assert kept <= set(self.pos) and not (set(self.pos) - kept) & set(self.hashes)
        self.pos = {i: w for i, w in self.pos.items() if i in kept}


def brute_owner_byte(ring: HashRing, names: list, hash_value: int) -> int:
    return min(names.index(ring.select(hash_value)), OVERFLOW)


def check(dset: DeferredSet, model: Model, ring: HashRing, rng: random.Random) -> None:
    slots, names = ring.table()
    assert dset.names == names and dset.index == {name: i for i, name in enumerate(names) if name is not None}
    assert len(dset) == dset.size == len(model.hashes) and bool(dset) == bool(model.hashes)
    assert list(dset.items()) == sorted(model.hashes.items())
    assert list(dset) == sorted(model.hashes)
    assert dset.positions == sum(len(block.ids) for block in dset.blocks)
    assert [block.ids[0] for block in dset.blocks] == dset.firsts
    seen = []
    for block in dset.blocks:
        assert len(block.ids) == len(block.hashes) == len(block.owners) == len(block.wids) == len(block.wires)
        assert block.ids == sorted(block.ids)
        seen += block.ids
        assert block.live == sum(1 for o in block.owners if o != FREE)
        for pos, entry_id in enumerate(block.ids):
            assert (block.wids[pos], block.wires[pos]) == model.pos[entry_id], entry_id
            if entry_id in model.hashes:
                assert block.hashes[pos] == model.hashes[entry_id]
                assert block.owners[pos] == brute_owner_byte(ring, names, model.hashes[entry_id]), entry_id
            else:
                assert block.owners[pos] == FREE
    assert seen == sorted(set(seen)) and set(seen) == set(model.pos)
    for byte in {*range(3), OVERFLOW}:
        mine = [i for i, h in model.hashes.items() if brute_owner_byte(ring, names, h) == byte]
        assert dset.count_owned(byte) == len(mine), byte
    for byte, cursor in dset.cursors.items():  # kept through joins too: never above one of its entries
        mine = [i for i, h in model.hashes.items() if brute_owner_byte(ring, names, h) == byte]
        assert all(i >= cursor for i in mine), (byte, cursor)
    for name in {*ring.members[:2], *names[:2], *names[253:257], *names[-2:]} - {None}:  # owner bytes below, at and past 254
        assert list(dset.owned_by(name)) == sorted((i, h) for i, h in model.hashes.items() if ring.select(h) == name), names.index(name)
    assert list(dset.owned_by(b"nobody")) == []
    probes = [rng.randint(0, 3000) for _ in range(5)] + sorted(model.hashes)[:3]
    for probe in probes:
        assert list(dset.irange(probe)) == sorted(i for i in model.hashes if i >= probe), probe
        assert (probe in dset) == (probe in model.hashes)
        assert dset.get(probe, -7) == model.hashes.get(probe, -7)
        if probe in model.hashes:
            assert dset[probe] == model.hashes[probe]
        else:
            with pytest.raises(KeyError) as missing:
                dset[probe]
            assert missing.value.args == (probe,)  # as a dict's
    assert dset.first() == (min(model.hashes) if model.hashes else None)


@pytest.mark.parametrize(("seed", "members", "block_max"), [(0, 5, 16), (1, 40, 64), (2, 280, 32), (3, 3, 4096)])
def test_every_position_and_cursor_against_the_model(seed: int, members: int, block_max: int, monkeypatch) -> None:
    monkeypatch.setattr(kd, "_BLOCK_MAX", block_max)
    rng = random.Random(seed)
    ring = HashRing()
    names = [b"c%d" % i for i in range(members)]
    for name in rng.sample(names, min(members, 4)):
        ring.add(name)
    dset = DeferredSet()
    dset.retable(ring.table())
    model = Model()
    next_id = 100
    for _ in range(220):
        roll = rng.random()
        if roll < 0.3:  # a read's scanned span (owner bytes FREE where delivered), after everything or not
            n = rng.randint(1, 30)
            overlap = model.pos and rng.random() < 0.2  # (a leave's release past the group's cursor)
            if overlap:
                ids = sorted(rng.sample(range(50, next_id + 10), n))
            else:
                ids = list(range(next_id, next_id + n))
            next_id = max(next_id, ids[-1] + 1 + rng.randint(0, 2))
            hs = [rng.randint(1, 65535) for _ in ids]
            slots, table_names = dset.slots, dset.names
            owners = owner_bytes(slots, len(table_names), hs)
            for i in range(n):
                if rng.random() < 0.3:
                    owners[i] = FREE
            live = n - owners.count(FREE)
            if live:
                wids = [b"w%d" % i for i in ids]
                wires = [b"*2 %d" % i for i in ids]
                dset.add_span(ids, array("H", hs), owners, live, wids, wires)
                if ids[0] <= max(model.pos, default=0):  # entry by entry
                    for i, h, o in zip(ids, hs, owners, strict=True):
                        if o != FREE:
                            model.add(i, h)
                else:
                    for i, h, o, w, x in zip(ids, hs, owners, wids, wires, strict=True):
                        model.pos[i] = (w, x)
                        if o != FREE:
                            model.hashes[i] = h
                    model.dropped(dset)
                    if len(dset.blocks) > 1:
                        assert dset.blocks[0].live > 0  # emptied blocks at the head are dropped
        elif roll < 0.45:  # one entry, anywhere (a leave's release, a replayed DEFER)
            entry_id = rng.randint(50, next_id + 3)
            h = rng.randint(1, 65535)
            if rng.random() < 0.5:
                assert dset.add(entry_id, h) == (entry_id not in model.hashes)
            else:
                dset[entry_id] = h  # as a dict: the hash replaced
                model.discard(entry_id)
            model.add(entry_id, h)
            next_id = max(next_id, entry_id + 1)
        elif roll < 0.65 and model.hashes:  # delivered or deleted
            for entry_id in rng.sample(sorted(model.hashes), min(len(model.hashes), rng.randint(1, 12))):
                assert dset.discard(entry_id) == model.hashes[entry_id]
                model.discard(entry_id)
                assert dset.discard(entry_id) is None
        elif roll < 0.72 and model.hashes:  # a consumer's read moved its cursor up to its first deferred entry
            byte = rng.choice([dset.owner_byte(h) for h in model.hashes.values()])
            mine = sorted(i for i, h in model.hashes.items() if dset.owner_byte(h) == byte)
            dset.cursors[byte] = mine[0]
        elif roll < 0.82:  # the ring moves: owner bytes follow, cursors reset
            if ring.members and rng.random() < 0.5:
                ring.remove(rng.choice(ring.members))
            else:
                for name in rng.sample(names, min(members, rng.randint(1, 60))):
                    ring.add(name)
            dset.retable(ring.table())
            assert dset.cursors == {}
        elif roll < 0.86 and len(ring.members) < members:  # one consumer joins: the others keep their cursors
            name = rng.choice([n for n in names if n not in ring])
            ring.add(name)
            kept = dict(dset.cursors)
            dset.retable(ring.table(), joined=name)
            kept.pop(min(ring.index[name], OVERFLOW), None)
            assert dset.cursors == kept
        elif roll < 0.9:
            dset._compact()
            model.pos = {i: w for i, w in model.pos.items() if i in model.hashes}
            assert all(block.live == len(block.ids) for block in dset.blocks)  # only deferred positions kept
        else:
            dset._trim()
            model.dropped(dset)
            if len(dset.blocks) > 1:
                assert dset.blocks[0].live > 0
        check(dset, model, ring, rng)
    dset.clear()
    model = Model()
    assert (dset.blocks, dset.firsts, dset.size, dset.positions, dset.cursors) == ([], [], 0, 0, {})
    check(dset, model, ring, rng)


def test_a_sparse_set_is_compacted_and_emptied_head_blocks_dropped(monkeypatch) -> None:
    """Positions are kept at most 4 x the deferred entries + 8192: past that the next span compacts them."""
    monkeypatch.setattr(kd, "_BLOCK_MAX", 512)
    ring = HashRing()
    ring.add(b"a")
    dset = DeferredSet()
    dset.retable(ring.table())
    slots, names = ring.table()
    start = 1
    for _ in range(40):  # spans of 512 with 4 deferred each
        ids = list(range(start, start + 512))
        start += 512
        owners = bytearray([FREE]) * 512
        for k in (0, 100, 200, 511):
            owners[k] = 0
        dset.add_span(ids, array("H", [7] * 512), owners, 4, [None] * 512, [None] * 512)
        assert dset.positions <= 4 * dset.size + 8192 + 512
    assert dset.positions < 40 * 512 and dset.size == 160
    for entry_id in list(dset)[:20]:
        dset.discard(entry_id)
    dset.add_span([start], array("H", [7]), bytearray([0]), 1, [None], [None])
    assert dset.first() == list(dset)[0] and dset.blocks[0].live


def _wide_table() -> tuple:
    """A ring of 260 members (past the 254 owner bytes), its table, and hashes spread over the range."""
    ring = HashRing()
    for i in range(260):
        ring.add(b"m%d" % i)
    slots, names = ring.table()
    return ring, slots, names, list(range(1, 65536, 37))


def test_owner_bytes_cap_at_254_past_254_names() -> None:
    _ring, slots, names, hashes = _wide_table()
    assert list(owner_bytes(slots, len(names), hashes)) == [min(slots[h], OVERFLOW) for h in hashes]
    small = HashRing()
    small.add(b"x")
    small.add(b"y")
    slots, names = small.table()
    assert list(owner_bytes(slots, len(names), hashes)) == [names.index(small.select(h)) for h in hashes]
    assert DeferredSet().owner_byte(5) == 0  # no table yet


def test_a_consumer_finds_its_entries_past_emptied_blocks(monkeypatch) -> None:
    """Blocks emptied by discards stay until a head trim (a span added after them): a consumer's walk skips
    them, whether first or between others, and finds its entries in the blocks after them."""
    monkeypatch.setattr(kd, "_BLOCK_MAX", 4)
    ring = HashRing()
    ring.add(b"a")
    dset = DeferredSet()
    dset.retable(ring.table())
    for start in (10, 20, 30):  # three full blocks of four
        ids = list(range(start, start + 4))
        dset.add_span(ids, array("H", [9] * 4), bytearray(4), 4, [None] * 4, [None] * 4)
    assert len(dset.blocks) == 3
    for entry_id in range(20, 24):  # the middle one emptied
        dset.discard(entry_id)
    assert [i for i, _h in dset.owned_by(b"a")] == [10, 11, 12, 13, 30, 31, 32, 33]
    for entry_id in range(10, 14):  # and the first
        dset.discard(entry_id)
    assert [block.live for block in dset.blocks] == [0, 0, 4]
    assert [i for i, _h in dset.owned_by(b"a")] == [30, 31, 32, 33]
    assert list(dset.irange(0)) == [30, 31, 32, 33] and dset.count_owned(0) == 4
    dset.add(15, 9)  # the first block holds one again: the emptied middle one is skipped by a compaction
    dset._compact()
    assert list(dset.items()) == [(15, 9), (30, 9), (31, 9), (32, 9), (33, 9)] and dset.positions == 5


def test_a_span_starting_at_the_last_position_goes_in_entry_by_entry(monkeypatch) -> None:
    """A span whose first ID is the last kept position's (a leave's release past the cursor) may not be
    joined as it is: that ID would have two positions."""
    ring = HashRing()
    ring.add(b"a")
    dset = DeferredSet()
    dset.retable(ring.table())
    dset.add_span([10, 11, 12, 13], array("H", [9] * 4), bytearray([0, FREE, 0, FREE]), 2, [None] * 4, [None] * 4)
    dset.add_span([13, 14], array("H", [9, 9]), bytearray([0, 0]), 2, [b"13", b"14"], [b"w13", b"w14"])
    positions = [i for block in dset.blocks for i in block.ids]
    assert positions == [10, 11, 12, 13, 14] and dset.positions == 5
    assert list(dset.items()) == [(10, 9), (12, 9), (13, 9), (14, 9)] and len(dset) == 4


def test_emptied_head_blocks_go_with_their_positions_when_a_span_comes(monkeypatch) -> None:
    """Discards leave emptied blocks; the next span's head trim drops those at the head (never the last one)
    and their positions leave the count that decides compaction."""
    monkeypatch.setattr(kd, "_BLOCK_MAX", 4)
    ring = HashRing()
    ring.add(b"a")
    dset = DeferredSet()
    dset.retable(ring.table())
    for start in (10, 20):
        dset.add_span(list(range(start, start + 4)), array("H", [9] * 4), bytearray(4), 4, [None] * 4, [None] * 4)
    for entry_id in [*range(10, 14), *range(20, 24)]:
        dset.discard(entry_id)
    assert (len(dset.blocks), dset.positions, len(dset)) == (2, 8, 0)
    dset.add_span([30, 31], array("H", [9, 9]), bytearray(2), 2, [None] * 2, [None] * 2)
    assert [block.ids for block in dset.blocks] == [[30, 31]] and dset.firsts == [30]
    assert (dset.positions, len(dset), list(dset)) == (2, 2, [30, 31])


def test_owned_by_is_exact_past_254_consumers() -> None:
    """Past 254 names owner bytes are shared: a consumer's entries are told apart by hash, exactly."""
    ring, slots, names, hashes = _wide_table()
    dset = DeferredSet()
    dset.retable((slots, names))
    for entry_id, h in enumerate(hashes):
        dset.add(entry_id, h)
    assert len(names) > 256
    for name in names[:2] + names[252:]:
        assert list(dset.owned_by(name)) == [(i, h) for i, h in enumerate(hashes) if ring.select(h) == name], names.index(name)
