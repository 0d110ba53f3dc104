"""KEYSHARED groups on the real server: commands, errors, blocking, leaves, claims, and durability.

Which consumer a key belongs to is computed here with storage.keyshared's
ring (checked against a brute-force ring in test_keyshared_ring.py), given the
order in which consumers joined.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from storage.keyshared import HashRing, sticky_hash
from tests.servers import start_millrace
from tests.test_persistence import kill9, wait_for
from tests.test_replication import caught_up

KEYS = [b"order-%d" % i for i in range(60)]


def ring_of(*members: bytes) -> HashRing:
    ring = HashRing()
    for name in members:
        ring.add(name)
    return ring


def keys_of(ring: HashRing, name: bytes, keys=KEYS) -> list[bytes]:
    return [k for k in keys if ring.select(sticky_hash(k)) == name]


def read(client, consumer: str, count: int | None = None, key: str = "s", group: str = "g", maxcount=None, maxsize=None, **kw) -> list:
    if maxcount or maxsize:  # Redis 8.10's options, which this redis-py does not know
        caps = ["MAXCOUNT", maxcount] if maxcount else ["MAXSIZE", maxsize]
        reply = client.execute_command("XREADGROUP", "GROUP", group, consumer, *caps, "STREAMS", key, ">")
    else:
        reply = client.xreadgroup(group, consumer, {key: ">"}, count=count, **kw)
    if not reply:
        return []
    if isinstance(reply, dict):  # RESP3: {key: [entries]}
        return list(reply.values())[0][0]
    return reply[0][1]


def id_key(wire: bytes) -> tuple[int, int]:
    ms, seq = wire.split(b"-")
    return int(ms), int(seq)


def info_map(reply) -> dict:
    """An XINFO reply as a dict whatever the protocol (redis-py gives RESP2 maps as flat lists)."""
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


@pytest.fixture
def c(server):
    client = server.client(protocol=3)
    client.flushall()
    yield client
    client.close()


def test_create_keyshared_and_xinfo_groups(c):
    c.xgroup_create("s", "g", "0", mkstream=True)
    c.execute_command("XGROUP", "CREATE", "s", "ks", "0", "KEYSHARED", "order")
    c.xadd("s", {"order": "a", "v": 1})
    groups = {g["name"]: g for g in c.xinfo_groups("s")}
    assert set(groups[b"g"]) == {"name", "consumers", "pending", "last-delivered-id", "entries-read", "lag"}
    ks = groups[b"ks"]
    assert ks["key-shared-field"] == b"order" and ks["deferred"] == 0 and ks["draining-hashes"] == 0
    assert ks["lag"] == 1
    info = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "ks"))
    assert info[b"field"] == b"order" and info[b"points"] == 100 and info[b"members"] == 0 and info[b"pending-hashes"] == 0
    assert info[b"lookahead"] == 2000  # Pulsar's 2000 per consumer (one at least), at most 20000


def test_errors(c):
    c.xgroup_create("s", "g", "0", mkstream=True)
    c.execute_command("XGROUP", "CREATE", "s", "ks", "0", "KEYSHARED", "k")
    with pytest.raises(redis.ResponseError, match="NOACK is not allowed in a KEYSHARED consumer group"):
        c.xreadgroup("ks", "a", {"s": ">"}, noack=True)
    with pytest.raises(redis.ResponseError, match="The consumer group 'g' is not KEYSHARED"):
        c.execute_command("XGROUP", "LEAVE", "s", "g", "a")
    with pytest.raises(redis.ResponseError, match="is not KEYSHARED"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "10")
    with pytest.raises(redis.ResponseError, match="SESSION-TIMEOUT and LOOKAHEAD need a KEYSHARED group"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "KEYSHARED", "OFF", "LOOKAHEAD", "10")
    with pytest.raises(redis.ResponseError, match="XGROUP JOIN is an internal command"):
        c.execute_command("XGROUP", "JOIN", "s", "ks", "a")
    with pytest.raises(redis.ResponseError, match="XGROUP DEFER is an internal command"):
        c.execute_command("XGROUP", "DEFER", "s", "ks", "0-1")
    with pytest.raises(redis.ResponseError, match="SESSION-TIMEOUT must be between 0 and"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "SESSION-TIMEOUT", "-1")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "LOOKAHEAD", "x")
    with pytest.raises(redis.ResponseError, match="Unrecognized XGROUP SETCONFIG option 'BOGUS'"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "BOGUS", "1")
    with pytest.raises(redis.ResponseError, match="NOGROUP"):
        c.execute_command("XINFO", "KEYSHARED", "s", "nope")
    with pytest.raises(redis.ResponseError, match="is not KEYSHARED"):
        c.execute_command("XINFO", "KEYSHARED", "s", "g")
    # KEYSHARED OFF is refused while entries are deferred: they would be skipped
    c.xadd("s", {"k": KEYS[0]})
    c.xadd("s", {"k": KEYS[1]})
    read(c, "a", group="ks")
    ring = ring_of(b"a", b"b")
    other = next(k for k in KEYS if ring.select(sticky_hash(k)) == b"a")
    c.xadd("s", {"k": other})
    assert read(c, "b", group="ks") == []  # b's read defers a's new entry
    with pytest.raises(redis.ResponseError, match="KEYSHARED cannot be turned off while 1 entries are deferred"):
        c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "KEYSHARED", "OFF")
    c.xgroup_setid("s", "ks", "$")  # SETID: everything up to it counts as read, the deferred set is cleared
    assert c.execute_command("XGROUP", "SETCONFIG", "s", "ks", "KEYSHARED", "OFF") == b"OK"
    assert "key-shared-field" not in {g["name"]: g for g in c.xinfo_groups("s")}[b"ks"]


@pytest.mark.parametrize("first", [["k", "v"], ["v", "k"]], ids=["field-first", "field-second"])
def test_entries_with_their_own_field_names_are_keyed_by_their_own_field(c, first):
    """One node holds entries in the master field layout and entries with their own field names (the
    group's field elsewhere, or missing: NONE_KEY); every entry goes to the ring owner of its own key,
    whether the group's field is the node's first master field or not."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []  # both join before anything is read
    ring = ring_of(b"A", b"B")
    layouts = [
        lambda key: {first[0]: key if first[0] == "k" else b"1", first[1]: key if first[1] == "k" else b"1"},
        lambda key: {"other": b"x", "k": key},  # the field last, after a field the node does not have
        lambda key: {"k": key, "w": b"2", "v": b"3"},  # more fields than the master entry
        lambda key: {"v": key},  # no key field at all: NONE_KEY (its value here is not a key)
    ]
    owner_of = {}
    for i, key in enumerate(KEYS[:40]):
        fields = layouts[i % 4](key)
        entry_id = c.xadd("s", fields)
        key_of = fields.get("k", b"NONE_KEY")
        owner_of[entry_id] = ring.select(sticky_hash(key_of if isinstance(key_of, bytes) else key_of.encode()))
    got = {b"A": [], b"B": []}
    for _ in range(6):
        for name in (b"A", b"B"):
            got[name] += [entry_id for entry_id, _fields in read(c, name.decode(), count=5)]
    assert sorted(got[b"A"] + got[b"B"], key=id_key) == sorted(owner_of, key=id_key)  # each delivered once
    for name, ids in got.items():
        assert ids and all(owner_of[i] == name for i in ids)
        assert ids == sorted(ids, key=id_key)


def test_moved_hashes_drain_and_unrelated_keys_flow(c):
    """A joins alone and takes every key; B joins: the keys that move to B wait until A acknowledges them, new keys flow."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    old, new = KEYS[:30], KEYS[30:]
    for key in old:
        c.xadd("s", {"k": key})
    got = read(c, "A")
    assert len(got) == 30
    ring = ring_of(b"A", b"B")
    moved = keys_of(ring, b"B", old)
    assert moved and len(moved) < 30
    for key in old + new:
        c.xadd("s", {"k": key})
    got_b = [fields[b"k"] for _id, fields in read(c, "B")]
    assert got_b == keys_of(ring, b"B", new)  # old keys that moved are draining at A; new ones flow
    info = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))
    assert info[b"draining-hashes"] == len({sticky_hash(k) for k in moved})
    assert info[b"pending-hashes"] == len({sticky_hash(k) for k in old + keys_of(ring, b"B", new)})
    consumers = {x[b"name"]: x for x in info[b"consumers"]}
    draining = consumers[b"A"][b"draining-hashes"]
    assert {d[b"hash"] for d in draining} == {sticky_hash(k) for k in moved}
    assert all(d[b"owner"] == b"A" and d[b"unacked"] == 1 and d[b"blocked-attempts"] >= 1 for d in draining)
    assert consumers[b"A"][b"hash-ranges"] == ring.ranges()[b"A"]
    groups = c.xinfo_groups("s")[0]
    assert groups["draining-hashes"] == info[b"draining-hashes"] and groups["deferred"] > 0
    # A acknowledges one moved key: its hash stops draining and B gets that key's newer entry
    first = moved[0]
    ack = [entry_id for entry_id, fields in got if fields[b"k"] == first]
    c.xack("s", "g", *ack)
    assert [fields[b"k"] for _id, fields in read(c, "B")] == [first]
    # A reads its own keys' second entries (old keys that stayed at A)
    got_a = [fields[b"k"] for _id, fields in read(c, "A")]
    assert got_a == keys_of(ring, b"A", old) + keys_of(ring, b"A", new)


def test_blocked_readers_are_woken_only_for_their_keys(server, c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []  # both join (in this order)
    ring = ring_of(b"A", b"B")
    key_a, key_b = keys_of(ring, b"A")[0], keys_of(ring, b"B")[0]
    results: dict[str, list] = {}

    def waiter(name: str) -> None:
        client = server.client(protocol=3)
        results[name] = read(client, name, block=5000)
        client.close()

    threads = {name: threading.Thread(target=waiter, args=(name,)) for name in ("A", "B")}
    for t in threads.values():
        t.start()
    wait_for(lambda: c.info("clients")["blocked_clients"] == 2)
    c.xadd("s", {"k": key_b})
    threads["B"].join(5)
    assert [f[b"k"] for _i, f in results["B"]] == [key_b]
    time.sleep(0.1)
    assert "A" not in results and c.info("clients")["blocked_clients"] == 1
    c.xadd("s", {"k": key_a})
    threads["A"].join(5)
    assert [f[b"k"] for _i, f in results["A"]] == [key_a]


@pytest.mark.parametrize("release", ["XACK", "XCLAIM", "DELCONSUMER"])
def test_a_blocked_reader_is_woken_when_its_draining_key_is_released(server, c, release):
    """B waits (BLOCK) for a key that drains at A: A's acknowledgement, a claim of A's entry by B or
    A's deletion ends the draining and must wake B with the held-back entry, not leave it parked
    until its timeout (or for ever with BLOCK 0) while its entry waits."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == []
    key_b = keys_of(ring_of(b"A", b"B"), b"B")[0]
    first = c.xadd("s", {"k": key_b})
    assert [i for i, _f in read(c, "A")] == [first]  # A alone: the key is A's, pending there
    assert read(c, "B") == []  # B joins: the key is B's now, draining at A
    second = c.xadd("s", {"k": key_b})
    assert read(c, "B") == []  # held back while A holds the first
    results: list = []

    def waiter() -> None:
        client = server.client(protocol=3)
        results.append(read(client, "B", block=4000))
        client.close()

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_for(lambda: c.info("clients")["blocked_clients"] == 1)
    start = time.monotonic()
    if release == "XACK":
        assert c.xack("s", "g", first) == 1
    elif release == "XCLAIM":
        assert c.xclaim("s", "g", "B", 0, [first], justid=True) == [first]  # to its ring owner: no more draining
    else:
        assert c.execute_command("XGROUP", "DELCONSUMER", "s", "g", "A") == 1
    thread.join(5)
    assert time.monotonic() - start < 2  # woken by the release, not by its BLOCK timeout
    # DELCONSUMER in a KEYSHARED group gives A's pending entries back to the group, in order
    assert [i for i, _f in results[0]] == ([first, second] if release == "DELCONSUMER" else [second])


def test_leave_and_delconsumer_release_pending_entries_in_order(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "B") == [] and read(c, "A") == []  # B joins, then A
    for key in KEYS[:10] * 2:
        c.xadd("s", {"k": key})
    ring = ring_of(b"B", b"A")
    got_a = read(c, "A")
    assert [f[b"k"] for _i, f in got_a] == keys_of(ring, b"A", KEYS[:10]) * 2
    assert c.execute_command("XGROUP", "LEAVE", "s", "g", "A") == len(got_a)
    got_b = read(c, "B")  # B, alone now, gets its own keys and A's released ones, in stream order
    assert [i for i, _f in got_b] == sorted((i for i, _f in got_b), key=id_key) and len(got_b) == 20
    assert c.execute_command("XGROUP", "DELCONSUMER", "s", "g", "B") == 20
    assert c.xpending("s", "g")["pending"] == 0
    again = read(c, "C")
    assert [i for i, _f in again] == [i for i, _f in got_b]  # released, not discarded


def test_session_timeout_is_decided_by_the_next_read(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "200")
    for key in KEYS[:20]:
        c.xadd("s", {"k": key})
    assert len(read(c, "A")) == 20
    time.sleep(0.3)
    got = read(c, "B")
    assert len(got) == 20  # A timed out: its entries went back to the group, and B is alone
    members = {x[b"name"]: x[b"member"] for x in info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))[b"consumers"]}
    assert members == {b"A": 0, b"B": 1}


def test_setid_backwards_clears_the_deferred_set_and_reads_stay_in_order(c):
    """XGROUP SETID is the one way back for the cursor: it clears the deferred set, so every deferred entry lies
    at or below the cursor and a read's deliveries (its deferred entries, then the scan's, here the slow scan's:
    entries past the cursor are pending) come in ID order."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []  # A joins, then B
    ring = ring_of(b"A", b"B")
    a_keys, b_keys = keys_of(ring, b"A", KEYS[:20]), keys_of(ring, b"B", KEYS[:20])
    first = [c.xadd("s", {"k": key}) for key in KEYS[:20]]
    got_a = read(c, "A")
    assert [f[b"k"] for _i, f in got_a] == a_keys
    c.xack("s", "g", *[i for i, _f in got_a])
    assert [f[b"k"] for _i, f in read(c, "B")] == b_keys  # pending at B from here on
    second = [c.xadd("s", {"k": key}) for key in KEYS[:20]]
    assert read(c, "B", count=1)[0][1][b"k"] == b_keys[0]  # passes over A's new entries: deferred
    assert info_map(c.xinfo_groups("s")[0])["deferred"] > 0
    c.xgroup_setid("s", "g", "0")  # back: A's acknowledged entries are new again, B's pending ones lie past the cursor
    assert info_map(c.xinfo_groups("s")[0])["deferred"] == 0
    got_b = read(c, "B", count=1)  # past A's entries (deferred) to a key of B's: its first entries are pending at B already
    assert [f[b"k"] for _i, f in got_b] == [b_keys[1]] and info_map(c.xinfo_groups("s")[0])["deferred"] > 0
    got = read(c, "A", maxcount=100)  # (MAXCOUNT: the entry-by-entry paths) deferred entries, then the scan's
    ids = [i for i, _f in got]
    assert ids == sorted(ids, key=id_key)
    assert ids == [i for i in first + second if i in ids] and len(ids) == 2 * len(a_keys)


def test_a_read_after_setid_backwards_passes_over_pending_entries(c):
    """Redis hands an entry still pending to a `>` reader after XGROUP SETID backwards (delivery count
    1 again); a KEYSHARED group leaves it with its consumer, as one owner per key demands, and counts
    it as read: the read delivers only the entries nobody holds."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    ids = [c.xadd("s", {"k": KEYS[i % 3]}) for i in range(6)]
    assert [i for i, _f in read(c, "A", count=3)] == ids[:3]
    c.xgroup_setid("s", "g", "0")
    assert [i for i, _f in read(c, "A")] == ids[3:]
    pending = c.xpending_range("s", "g", "-", "+", 10)
    assert [p["message_id"] for p in pending] == ids and {p["times_delivered"] for p in pending} == {1}
    group = {g["name"]: g for g in c.xinfo_groups("s")}[b"g"]
    assert group["entries-read"] == 6 and group["lag"] == 0 and group["deferred"] == 0
    assert read(c, "A") == []


def test_a_leave_after_setid_backwards_defers_nothing_past_the_cursor(c):
    """B's pending entries lie past the cursor after SETID backwards: its leave gives them back to the group as
    new entries (the cursor reaches them again), not as deferred ones, so A gets each once, in order."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ids = [c.xadd("s", {"k": key}) for key in KEYS[:20]]
    got_a, got_b = read(c, "A"), read(c, "B")
    assert len(got_a) + len(got_b) == 20 and got_b
    c.xack("s", "g", *[i for i, _f in got_a])
    c.xgroup_setid("s", "g", "0")
    assert c.execute_command("XGROUP", "LEAVE", "s", "g", "B") == len(got_b)
    assert info_map(c.xinfo_groups("s")[0])["deferred"] == 0
    again = [i for i, _f in read(c, "A")]  # alone now: every entry, A's acknowledged ones new again after SETID
    assert again == ids


def test_a_claim_moves_every_pending_entry_of_the_hash(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    ids = [c.xadd("s", {"k": "same"}) for _ in range(3)] + [c.xadd("s", {"k": "other"})]
    assert len(read(c, "A")) == 4
    claimed = c.xclaim("s", "g", "B", 0, [ids[1]], justid=True)
    assert sorted(claimed) == sorted(ids[:3])  # the whole hash, past the one ID asked for
    owners = {p["message_id"]: p["consumer"] for p in c.xpending_range("s", "g", "-", "+", 10)}
    assert owners == {ids[0]: b"B", ids[1]: b"B", ids[2]: b"B", ids[3]: b"A"}
    auto = c.xautoclaim("s", "g", "C", 0, "0", count=1, justid=True)  # redis-py gives JUSTID's IDs alone
    assert sorted(auto) == sorted(ids[:3])  # COUNT 1, but the hash moves as a whole
    assert read(c, "A", count=10) == []


def test_acked_trims_keep_deferred_entries(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    key_b = keys_of(ring, b"B")[0]
    c.xadd("s", {"k": key_b})
    assert read(c, "A") == []  # A's read passes B's entry over: deferred, below last-delivered-id
    assert c.execute_command("XTRIM", "s", "MAXLEN", "0", "ACKED") == 0
    assert [f[b"k"] for _i, f in read(c, "B")] == [key_b]


# -- durability: AOF, snapshot and a replica rebuild the same KEYSHARED state ----------------


def full_state(client) -> dict:
    """What a client can see of every KEYSHARED group (times that move with the clock left out)."""
    out = {}
    for group in client.xinfo_groups("s"):
        name = group["name"]
        out[name] = {
            "group": {k: v for k, v in group.items()},
            "keyshared": info_map(client.execute_command("XINFO", "KEYSHARED", "s", name)),
            "pending": [(p["message_id"], p["consumer"], p["times_delivered"]) for p in client.xpending_range("s", name, "-", "+", 10_000)],
        }
        for info in out[name]["keyshared"][b"consumers"]:
            for d in info[b"draining-hashes"]:
                d[b"blocked-attempts"] = None  # a statistic: not persisted, not replicated
    return out


def drive(client, seed: int) -> None:
    import random

    rng = random.Random(seed)
    client.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    client.execute_command("XGROUP", "SETCONFIG", "s", "g", "LOOKAHEAD", "50")
    for step in range(400):
        roll = rng.random()
        name = rng.choice(["w1", "w2", "w3", "w4"])
        if roll < 0.4:
            client.xadd("s", {"k": rng.choice(KEYS), "n": step})
        elif roll < 0.75:
            read(client, name, count=rng.choice([1, 5, None]))
        elif roll < 0.9:
            mine = [p["message_id"] for p in client.xpending_range("s", "g", "-", "+", 50, consumername=name)]
            if mine:
                client.xack("s", "g", *rng.sample(mine, max(1, len(mine) // 2)))
        elif roll < 0.95:
            client.execute_command("XGROUP", rng.choice(["LEAVE", "DELCONSUMER"]), "s", "g", name)
        else:
            client.xautoclaim("s", "g", name, 0, "0", count=2)


def test_aof_snapshot_and_replica_rebuild_the_same_state(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_millrace("--appendonly", "yes", "--appendfsync", "always", workdir=str(tmp_path / "p"))
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), workdir=str(tmp_path / "r"))
    try:
        client = primary.client(protocol=3)
        drive(client, 5)
        before = full_state(client)
        assert before[b"g"]["keyshared"][b"deferred"] or before[b"g"]["pending"]  # the workload left state to compare
        caught_up(client, replica.client())
        assert full_state(replica.client(protocol=3)) == before
        kill9(primary)
        primary = start_millrace("--appendonly", "yes", workdir=str(tmp_path / "p"))  # from the AOF
        client = primary.client(protocol=3)
        assert full_state(client) == before
        client.save()
        primary.stop()
        primary = start_millrace("--appendonly", "no", workdir=str(tmp_path / "p"))  # from dump.mpk
        assert full_state(primary.client(protocol=3)) == before
    finally:
        primary.stop()
        replica.stop()


def test_lag_and_entries_read_count_deferred_entries(c):
    """Entries passed over for another consumer are not read yet: lag has them, entries-read does not (also XGROUPLAG)."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    c.xadd("s", {"k": keys_of(ring, b"B")[0]})
    c.xadd("s", {"k": keys_of(ring, b"A")[0]})
    assert len(read(c, "A")) == 1  # B's entry is deferred, below last-delivered-id
    group = c.xinfo_groups("s")[0]
    assert (group["lag"], group["entries-read"], group["deferred"]) == (1, 1, 1)
    lag = info_map(c.execute_command("XGROUPLAG", "s", "g")[0])
    assert (lag[b"lag"], lag[b"entries-read"], lag[b"backlog"]) == (1, 1, 2)  # entries-read as XINFO GROUPS has it
    c.config_set("stream-exact-lag", "yes")
    try:
        group = c.xinfo_groups("s")[0]
        assert (group["lag"], group["entries-read"]) == (1, 1)
    finally:
        c.config_set("stream-exact-lag", "no")
    assert len(read(c, "B")) == 1
    group = c.xinfo_groups("s")[0]
    assert (group["lag"], group["entries-read"], group["deferred"]) == (0, 2, 0)


def test_a_claim_read_moves_keys_whole_then_reads_by_the_ring(c, m):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    same = [c.xadd("s", {"k": "K"}) for _ in range(3)]
    other = c.xadd("s", {"k": "L"})
    assert len(read(c, "A")) == 4
    time.sleep(0.01)
    reply = m.execute_command("XREADGROUP", "GROUP", "g", "B", "COUNT", "1", "CLAIM", "5", "STREAMS", "s", ">")
    entries = reply[0][1]  # (m: redis-py's stream parsing off, so the claim fields stay)
    claimed = [entry[0] for entry in entries]
    assert sorted(claimed, key=id_key) == same  # COUNT 1 claimed K's first entry, the other two came with it
    assert all(entry[3] == 1 for entry in entries)  # each one's delivery count before this delivery
    owners = {p["message_id"]: p["consumer"] for p in c.xpending_range("s", "g", "-", "+", 10)}
    assert owners == {same[0]: b"B", same[1]: b"B", same[2]: b"B", other: b"A"}
    members = {x[b"name"]: x[b"member"] for x in info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))[b"consumers"]}
    assert members == {b"A": 1, b"B": 1}  # B joined by reading, though its claims filled COUNT
    later = c.xadd("s", {"k": "K"})
    ring = ring_of(b"A", b"B")
    reader = "A" if ring.select(sticky_hash(b"K")) == b"A" else "B"
    got = [i for i, _f in read(c, reader)]
    assert got == ([] if reader == "A" else [later])  # K is B's now: it drains there if the ring says A


def test_xnack_releases_a_key_whole_and_holds_it_until_claimed(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    same = [c.xadd("s", {"k": "K"}) for _ in range(3)]
    other = c.xadd("s", {"k": "L"})
    assert len(read(c, "A")) == 4
    assert c.execute_command("XNACK", "s", "g", "FAIL", "IDS", "1", same[1]) == 3  # the key's three entries
    owners = {p["message_id"]: p["consumer"] for p in c.xpending_range("s", "g", "-", "+", 10)}
    assert owners == {same[0]: b"", same[1]: b"", same[2]: b"", other: b"A"}
    later = c.xadd("s", {"k": "K"})
    assert read(c, "A") == []  # K waits while its entries are at nobody
    claimed = c.xautoclaim("s", "g", "C", 0, "0", count=1, justid=True)  # redis-py gives JUSTID's IDs alone
    assert sorted(claimed, key=id_key) == same  # one asked, the whole key moved
    assert read(c, "A") == []  # now K drains at C
    c.xack("s", "g", *same)
    assert [i for i, _f in read(c, "A")] == [later]


def test_retention_holds_deferred_entries():
    """A consumption-retention subscriber's ack floor counts entries passed over, not only pending ones."""
    import server.commands  # noqa: F401
    from server.client import Client
    from server.server import Server
    from storage.retention import ack_floor
    from storage.stream_id import format_id as fmt
    from tests.test_keyshared_model import items_of

    srv = Server()
    srv.now = 1_700_000_000_000
    client = Client(srv)

    def run(*argv):
        return srv.execute(client, [a if isinstance(a, bytes) else str(a).encode() for a in argv])

    run("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    run("XREADGROUP", "GROUP", "g", "A", "STREAMS", "s", ">")
    run("XREADGROUP", "GROUP", "g", "B", "STREAMS", "s", ">")
    ring = ring_of(b"A", b"B")
    held = run("XADD", "s", "*", "k", keys_of(ring, b"B")[0])
    run("XADD", "s", "*", "k", keys_of(ring, b"A")[0])
    mine = run("XREADGROUP", "GROUP", "g", "A", "STREAMS", "s", ">")
    stream = client.db.data[b"s"]
    group = stream.groups[b"g"]
    mine = items_of(mine)
    assert len(mine) == 1 and list(group.keyshared.deferred) and fmt(ack_floor(stream, group)) == held
    run("XACK", "s", "g", mine[0][0])
    assert fmt(ack_floor(stream, group)) == held  # nothing pending, but B's entry is not delivered yet


def test_maxcount_and_maxsize_stop_a_keyshared_read(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    key_a = keys_of(ring, b"A")[0]
    ids = [c.xadd("s", {"k": key}) for key in keys_of(ring, b"B")[:3] + [key_a] * 4]
    assert len(read(c, "B")) == 3  # and defers A's four entries
    assert [i for i, _f in read(c, "A", maxcount=2)] == ids[3:5]  # from A's deferred entries, capped
    assert [i for i, _f in read(c, "A", maxsize=1)] == ids[5:6]  # one entry always comes back, no more
    assert [i for i, _f in read(c, "A")] == ids[6:]  # the rest stayed deferred, in order
