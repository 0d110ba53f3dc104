"""storage/keyspace.py and storage/scan.py without a server: SCAN's guarantee, active expiry sampling, helpers."""

from __future__ import annotations

import random

from storage.keyspace import Database, Keyspace
from storage.scan import ScanBuilder, ScanIndex

NOW = 1_000_000


def full_scan(db: Database, count: int, between_steps=None) -> list[bytes]:
    cursor, found, step = 0, [], 0
    while True:
        cursor, keys = db.scan(cursor, count, NOW)
        found.extend(keys)
        step += 1
        if between_steps is not None:
            between_steps(step)
        if cursor == 0:
            return found


def test_scan_returns_every_key_once_when_nothing_changes():
    db = Database(0)
    for i in range(2000):
        db.set(b"k%d" % i, b"v")
    for count in (1, 7, 100, 5000):
        found = full_scan(db, count)
        assert sorted(found) == sorted(db.data)
        assert len(found) == len(db.data)


def test_scan_guarantee_with_random_churn_and_competing_iterations():
    rng = random.Random(5)
    db = Database(0)
    stable = {b"stable:%d" % i for i in range(800)}
    for key in stable:
        db.set(key, b"v")
    churn = [b"churn:%d" % i for i in range(3000)]

    def mutate(step: int) -> None:
        for _ in range(rng.randint(0, 30)):
            key = rng.choice(churn)
            if key in db.data:
                db.delete(key, NOW)
            else:
                db.set(key, b"v")
        if rng.random() < 0.2:  # another client starts or finishes an iteration: new snapshot
            db.scan(0, rng.randint(1, 50), NOW)
        if rng.random() < 0.1:
            db.scan_index = None

    for count in (3, 10, 64):
        found = set(full_scan(db, count, mutate))
        assert stable <= found
        assert found <= stable | set(churn)


def test_scan_cursor_is_independent_of_the_snapshot():
    data = {b"k%d" % i: b"" for i in range(100)}
    first = ScanIndex(data)
    cursor, page = first.step(0, 30)
    data.update({b"new%d" % i: b"" for i in range(100)})
    second = ScanIndex(data)
    rest = []
    while cursor:
        cursor, keys = second.step(cursor, 30)
        rest.extend(keys)
    old = {b"k%d" % i for i in range(100)}
    assert set(page) | (set(rest) & old) == old
    assert not set(page) & set(rest)  # no key is returned twice here: positions are stable


def test_scan_groups_equal_hashes_in_one_step():
    index = ScanIndex({})
    index.keys = [b"a", b"b", b"c", b"d"]
    from array import array

    index.hashes = array("q", [1, 5, 5, 9])
    assert index.step(0, 2) == (9 + (1 << 63), [b"a", b"b", b"c"])
    assert index.step(9 + (1 << 63), 2) == (0, [b"d"])
    assert index.step((1 << 64) - 1, 2) == (0, [])


def test_scan_filters_expired_and_deleted_keys():
    db = Database(0)
    db.set(b"live", b"1")
    db.set(b"dead", b"1")
    db.set_expire(b"dead", NOW - 1)
    assert full_scan(db, 10) == [b"live"]
    assert db.expired == [b"dead"]


def test_expire_cycle_removes_expired_keys_with_bounded_work():
    db = Database(0)
    for i in range(1000):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, NOW - 1 if i % 2 else NOW + 10_000)
    removed, stale = db.expire_cycle(NOW, keys_per_loop=20, max_loops=4)
    assert len(removed) <= 80 and stale  # half of each sample expired: more work is wanted
    total = set(removed)
    for _ in range(200):
        removed, stale = db.expire_cycle(NOW, keys_per_loop=20, max_loops=4)
        total.update(removed)
    assert total == {b"k%d" % i for i in range(1, 1000, 2)}
    assert len(db.data) == 500 and len(db.expires) == 500


def test_expire_cycle_reaches_keys_behind_long_lived_ones():
    """Sampling rotates through the TTL table, so a short TTL set last is found behind many long ones."""
    db = Database(0)
    for i in range(500):
        db.set(b"long%d" % i, b"v")
        db.set_expire(b"long%d" % i, NOW + 10**9)
    db.set(b"short", b"v")
    db.set_expire(b"short", NOW - 1)
    found = []
    for _ in range(30):
        removed, stale = db.expire_cycle(NOW)
        assert not stale
        found.extend(removed)
    assert found == [b"short"]
    assert len(db.expires) == 500


def test_expiry_boundary_is_redis_now_greater_than_when():
    db = Database(0)
    db.set(b"k", b"v")
    db.set_expire(b"k", NOW)
    assert db.lookup(b"k", NOW) == b"v"  # when == now: still alive (PTTL answers 0)
    assert db.lookup(b"k", NOW + 1) is None


def test_rename_moves_ttl_and_replaces_destination_ttl():
    db = Database(0)
    db.set(b"a", b"1")
    db.set_expire(b"a", NOW + 5)
    db.set(b"b", b"2")
    db.set_expire(b"b", NOW + 9)
    db.rename(b"a", b"b")
    assert db.data == {b"b": b"1"} and db.expires == {b"b": NOW + 5}
    db.set(b"c", b"3")
    db.rename(b"c", b"b")
    assert db.data == {b"b": b"3"} and db.expires == {}


def test_keys_and_random_key():
    db = Database(0)
    for key in (b"a1", b"a2", b"b1"):
        db.set(key, b"v")
    db.set_expire(b"a2", NOW - 1)
    assert sorted(db.keys(b"a*", NOW)) == [b"a1"]
    assert sorted(db.keys(b"*", NOW)) == [b"a1", b"b1"]
    assert b"a2" in db.data  # KEYS does not remove
    picks = {db.random_key(NOW, random.Random(seed)) for seed in range(40)}
    assert picks == {b"a1", b"b1"}
    assert b"a2" not in db.data or db.lookup(b"a2", NOW) is None
    assert Database(1).random_key(NOW) is None


def test_swap_and_flush_drop_scan_snapshots():
    keyspace = Keyspace(2)
    keyspace[0].set(b"x", b"1")
    keyspace[0].scan(0, 0 + 1, NOW)
    keyspace.swap(0, 1)
    assert keyspace[0].scan_index is None and keyspace[1].scan_index is None
    assert keyspace[1].scan(0, 10, NOW) == (0, [b"x"])


def test_expiry_modes_for_primary_replica_and_loading():
    db = Database(0)
    db.set(b"k", b"v")
    db.set_expire(b"k", NOW - 1)
    try:
        Database.expiry = "keep"  # applying loaded/replicated effects
        assert db.lookup(b"k", NOW) == b"v" and db.expired == []
        Database.expiry = "hide"  # a replica answering reads
        assert db.lookup(b"k", NOW) is None and b"k" in db.data and db.expired == []
    finally:
        Database.expiry = "delete"
    assert db.lookup(b"k", NOW) is None and b"k" not in db.data and db.expired == [b"k"]


def test_random_key_terminates_when_expired_keys_stay():
    db = Database(0)
    for i in range(5):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, NOW - 1)
    try:
        Database.expiry = "hide"
        assert db.random_key(NOW) in db.data  # Redis's replica gives an expired key back after 100 tries
    finally:
        Database.expiry = "delete"
    assert db.random_key(NOW) is None and not db.data


def test_expire_cycle_compaction_keeps_every_live_ttl():
    db = Database(0)
    for i in range(6000):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, NOW + 10**6 if i % 10 == 0 else NOW - 1)
    table = db.expires
    for _ in range(2000):
        removed, stale = db.expire_cycle(NOW)
        if not removed and not stale:
            break
    assert db.expires is not table  # compacted at least once on the way
    assert db.expires == {b"k%d" % i: NOW + 10**6 for i in range(0, 6000, 10)}
    assert set(db.data) == set(db.expires)


def test_a_sliced_snapshot_is_the_sorted_one():
    """ScanBuilder (SCAN 0 on a big keyspace, sorted in slices) ends with the index ScanIndex sorts at
    once, whatever the size and however much work each step is given."""
    rng = random.Random(5)
    for size in (0, 1, 2, 17, ScanBuilder.CHUNK - 1, ScanBuilder.CHUNK, ScanBuilder.CHUNK + 1, 3 * ScanBuilder.CHUNK + 5):
        data = {b"k%d" % rng.randrange(10**9): None for _ in range(size)}
        builder, steps = ScanBuilder(data), 0
        while not builder.step(rng.choice((1, 7, 1000, ScanBuilder.CHUNK, 10**9))):
            steps += 1
        whole = ScanIndex(data)
        assert builder.index.keys == whole.keys and builder.index.hashes == whole.hashes and builder.index.data is data, size
        assert builder.step(1)  # done stays done


def test_a_sliced_snapshot_does_a_steps_worth_at_a_time():
    """Each step sorts or merges about `work` keys, never the whole keyspace: what keeps SCAN 0 from
    holding the server (a step that sorted every chunk at once built the same index)."""
    chunk = ScanBuilder.CHUNK
    data = {b"k%d" % i: None for i in range(5 * chunk)}
    builder = ScanBuilder(data)
    assert not builder.step(chunk) and len(builder.todo) == 4 * chunk and len(builder.chunks) == 1
    steps = 1
    while not builder.step(chunk):
        steps += 1
        assert len(builder.out) <= max(0, steps - 5) * chunk  # merged a step's worth at a time
    assert steps >= 10  # five steps to sort, five to merge
