"""storage/keyshared_deferred.py's DeferredSet against a plain dict of ID -> hash, over random operations (seeded).

The blocks, owner bytes, cursors, splits and compactions are an index: the set
they answer (membership, hashes, ID order, the oldest entry, each consumer's
entries under the ring) must be exactly the dict's at every step, also past
254 consumers, where owner bytes are shared and each entry's owner is checked
by hash. Then KEYSHARED reads with more than 254 consumers: the bulk paths
decide as the per-entry ones (tests/test_keyshared_model.py's Model).
"""

from __future__ import annotations

import random
from array import array

import pytest

import storage.keyshared_deferred as kd
from storage.keyshared import HashRing
from storage.keyshared_deferred import FREE, DeferredSet, owner_bytes


def check(dset: DeferredSet, model: dict[int, int], ring: HashRing) -> None:
    assert len(dset) == len(model)
    assert list(dset.items()) == sorted(model.items())
    assert dset.first() == (min(model) if model else None)
    for entry_id in list(model)[:20]:
        assert entry_id in dset and dset.get(entry_id) == model[entry_id]
    if model:
        middle = sorted(model)[len(model) // 2]
        assert list(dset.irange(middle)) == sorted(i for i in model if i >= middle)
    for name in ring.members[:5] + ring.members[-3:]:
        assert list(dset.owned_by(name)) == sorted((i, h) for i, h in model.items() if ring.select(h) == name)
    assert sum(block.live for block in dset.blocks) == len(model)
    assert all(block.live == len(block.ids) - block.owners.count(FREE) for block in dset.blocks)
    assert [block.ids[0] for block in dset.blocks] == dset.firsts
    flat = [i for block in dset.blocks for i in block.ids]
    assert flat == sorted(flat) and len(set(flat)) == len(flat)  # blocks in order, never overlapping


@pytest.mark.parametrize(("seed", "members"), [(0, 4), (1, 40), (2, 300)])
def test_the_blocks_answer_as_a_dict(seed, members, monkeypatch):
    monkeypatch.setattr(kd, "_BLOCK_MAX", 64)  # splits and block limits come early
    rng = random.Random(seed)
    ring = HashRing()
    dset = DeferredSet()
    dset.retable(ring.table())
    model: dict[int, int] = {}
    names = [b"c%d" % i for i in range(members)]
    next_id = 1000
    for _ in range(400):
        roll = rng.random()
        if roll < 0.35:  # a scanned span after everything (owner bytes FREE where delivered)
            n = rng.randint(1, 40)
            ids = list(range(next_id, next_id + n))
            next_id += n + rng.randint(0, 3)
            hs = [rng.randint(1, 65535) for _ in ids]
            slots, table_names = dset.slots, dset.names
            owners = owner_bytes(slots, len(table_names), hs)
            for i in range(n):
                if rng.random() < 0.2:
                    owners[i] = FREE
            live = n - owners.count(FREE)
            if live:
                wids = [b"%d" % i for i in ids]
                dset.add_span(ids, array("H", hs), owners, live, wids, list(wids))
                model.update((i, h) for i, h, o in zip(ids, hs, owners, strict=True) if o != FREE)
        elif roll < 0.55 and next_id > 1000:  # one entry, anywhere (a leave's release, a replayed DEFER)
            entry_id = rng.randint(900, next_id + 5)
            h = rng.randint(1, 65535)
            added = dset.add(entry_id, h)
            assert added == (entry_id not in model)
            if added:
                model[entry_id] = h
                next_id = max(next_id, entry_id + 1)
        elif roll < 0.8 and model:  # entries leave (delivered, deleted)
            for entry_id in rng.sample(sorted(model), min(len(model), rng.randint(1, 10))):
                assert dset.discard(entry_id) == model.pop(entry_id)
            assert dset.discard(10**9) is None
        elif roll < 0.9:  # the ring moves
            if ring.members and rng.random() < 0.4:
                ring.remove(rng.choice(ring.members))
            else:
                for name in rng.sample(names, min(len(names), rng.randint(1, 30))):
                    ring.add(name)
            dset.retable(ring.table())
        else:
            dset._compact()
        check(dset, model, ring)
    dset.clear()
    check(dset, {}, ring)


def test_reads_past_254_consumers_decide_as_the_entry_loop(monkeypatch):
    """Owner bytes are shared past index 254: the take, cursors and span scan still decide as brute force."""
    import tests.test_keyshared_model as model_test

    monkeypatch.setattr(model_test, "CONSUMERS", [b"c%d" % i for i in range(270)])
    # the brute-force ring of 270 members is too slow per read: the contract is test_keyshared_model.py's,
    # here the two paths' decisions are compared, and the contract checked at the end
    monkeypatch.setattr(model_test.Model, "deliverable", lambda self, consumer: [])
    outcomes = []
    for mode in ("bulk", "reference"):
        if mode == "reference":
            model_test.use_reference_paths(monkeypatch)
        model = model_test.Model(7, timeout=0, deletes=False)
        for _ in range(60):
            model.step()
        for consumer in model_test.CONSUMERS:  # everyone joins: ring indexes past 254
            while consumer not in model.group().keyshared.ring:
                model.read(consumer, 1)
        assert len(model.group().keyshared.ring.members) > 254
        for _ in range(300):
            model.step()
        model.check()
        outcomes.append((model_test.keyshared_state(model.server), model.batches))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("seed", range(6))
def test_pending_insert_new_answers_as_one_by_one(seed: int) -> None:
    """PendingList.insert_new (a batch of older IDs appended, `order` sorted again only when an ordered
    answer is asked) answers as inserting the IDs one by one (__setitem__): the same IDs in the same
    order, first and last, ranges, and `stale` counting exactly the dead positions of `order`."""
    from storage.consumer_group import PendingEntry, PendingList

    rng = random.Random(seed)
    fast, slow = PendingList(), PendingList()
    for _ in range(600):
        roll = rng.random()
        if roll < 0.45 or not fast.entries:
            base = rng.randrange(0, 400)
            ids = sorted(i for i in set(rng.sample(range(base, base + rng.choice([3, 12, 60])), rng.randint(1, 3))) if i not in fast.entries)
            if not ids:
                continue
            pending = PendingEntry(None, 0)
            fast.insert_new(ids, dict.fromkeys(ids, pending))
            for entry_id in ids:
                slow[entry_id] = pending
        else:
            for entry_id in rng.sample(sorted(fast.entries), min(len(fast.entries), rng.randint(1, 4))):
                fast.pop(entry_id)
                slow.pop(entry_id)
        if rng.random() < 0.1 and fast.entries:
            assert fast.first() == slow.first()
        if rng.random() < 0.1 and fast.entries:
            assert fast.last() == slow.last()
            assert fast.last_bound() >= fast.last()
        if rng.random() < 0.1:
            low = rng.randrange(0, 450)
            assert list(fast.irange(low, low + 50)) == list(slow.irange(low, low + 50))
        for pel in (fast, slow):  # every position of `order` is a live ID or counted stale
            assert len(pel.order) - pel.head - pel.stale == len(pel.entries)
            assert set(pel.order[pel.head :]) >= set(pel.entries)
        if fast.unsorted:
            assert all(i <= fast.top for i in fast.order)
        assert fast.entries == slow.entries
        if rng.random() < 0.2:
            assert list(fast) == list(slow) == sorted(slow.entries)


def test_pending_insert_new_of_an_id_whose_stale_copy_ends_the_order() -> None:
    """An acknowledged last ID delivered again (a KEYSHARED leave released it): its stale copy is not a
    second live one, sorted or not."""
    from storage.consumer_group import PendingEntry, PendingList

    for ids in ([30], [30, 40], [20, 30]):
        pel = PendingList()
        pel.insert_new([10, 20, 30], dict.fromkeys([10, 20, 30], PendingEntry(None, 0)))
        pel.pop(30)
        if ids == [20, 30]:
            pel.pop(20)
        pel.insert_new(ids, dict.fromkeys(ids, PendingEntry(None, 0)))
        want = sorted({10, 20, 30, *ids})
        assert list(pel) == want and pel.last() == want[-1]
        assert len(pel.order) - pel.head - pel.stale == len(pel.entries)


def test_pending_compaction_while_unsorted_keeps_each_live_id_once() -> None:
    """Compacting an unsorted order (acks piling up stale IDs) keeps the live IDs once each, also one whose
    stale copy was appended again (re-delivered out of order)."""
    from storage.consumer_group import PendingEntry, PendingList

    pel = PendingList()
    pel.insert_new([10, 20, 30, *range(100, 200)], dict.fromkeys([10, 20, 30, *range(100, 200)], PendingEntry(None, 0)))
    pel.pop(20)
    pel.insert_new([20], dict.fromkeys([20], PendingEntry(None, 0)))  # older than the last: appended, unsorted
    assert pel.unsorted
    for entry_id in range(100, 200):
        pel.pop(entry_id)
        assert len(pel.order) - pel.head - pel.stale == len(pel.entries)
    assert len(pel.order) < 100  # compacted on the way (104 positions otherwise)
    assert list(pel) == [10, 20, 30] and pel.first() == 10 and pel.last() == 30
