"""Features that landed in parallel, used together through the real server.

Each test is one pair: KEYSHARED with deletes, DELREF trims and XACKDEL;
retention with XNACK and XACKDEL; IDMP with XDEL, XTRIM and retention. What a
Redis user would expect is stated per test; the one-owner rule of KEYSHARED is
checked through XINFO KEYSHARED and the PEL.
"""

from __future__ import annotations

import pytest

from tests.test_keyshared import info_map, keys_of, read, ring_of


@pytest.fixture
def c(server):
    client = server.client(protocol=3)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def one_per_node(c):
    """Nodes of one entry: retention frees whole nodes, so every entry can go on its own."""
    c.config_set("stream-node-max-entries", 1)
    yield c
    c.config_set("stream-node-max-entries", 100)


def _keyshared_with_deferred(c) -> tuple[list[bytes], list[bytes]]:
    """Group g on s keyed by k with members A and B; A has read its entries, B's are deferred. Returns (A's IDs, B's IDs)."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    a_keys, b_keys = keys_of(ring, b"A")[:3], keys_of(ring, b"B")[:3]
    b_ids = [c.xadd("s", {"k": key}) for key in b_keys]
    a_ids = [c.xadd("s", {"k": key}) for key in a_keys]
    assert [e[0] for e in read(c, "A")] == a_ids
    assert c.xinfo_groups("s")[0]["deferred"] == 3
    return a_ids, b_ids


def _lag(c) -> int:
    return info_map(c.execute_command("XGROUPLAG", "s", "g")[0])[b"lag"]


@pytest.mark.parametrize("how", ["XDEL", "XDELEX", "XACKDEL"])
def test_lag_leaves_out_deferred_entries_that_were_deleted(c, how):
    """Lag counts the live entries the group has not been given: a deferred entry deleted since is not one of them."""
    _a, b_ids = _keyshared_with_deferred(c)
    c.xgroup_create("s", "other", "0")
    assert _lag(c) == 3 and c.xinfo_groups("s")[0]["lag"] == 3
    if how == "XDEL":
        c.xdel("s", b_ids[0])
    elif how == "XDELEX":
        c.execute_command("XDELEX", "s", "DELREF", "IDS", 1, b_ids[0])
    else:  # another group acks and deletes it; g never had it pending
        c.xreadgroup("other", "x", {"s": ">"})
        assert c.execute_command("XACKDEL", "s", "other", "KEEPREF", "IDS", 1, b_ids[0]) == [1]
    assert c.xlen("s") == 5
    assert _lag(c) == 2
    assert c.xinfo_groups("s")[0]["lag"] == 2
    assert [e[0] for e in read(c, "B")] == b_ids[1:]  # the rest reach B, in order
    assert _lag(c) == 0


def test_delref_trim_releases_a_keyshared_hash(c):
    """A DELREF trim removes A's pending entries from the group: their keys stop draining at A."""
    a_ids, b_ids = _keyshared_with_deferred(c)
    ks = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))
    assert ks[b"pending-hashes"] == 3
    c.execute_command("XTRIM", "s", "MINID", "=", b_ids[-1], "DELREF")  # B's first two go, no PEL of theirs
    c.execute_command("XTRIM", "s", "MAXLEN", "=", 0, "DELREF")
    assert c.xlen("s") == 0 and c.xpending("s", "g")["pending"] == 0
    ks = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))
    assert ks[b"pending-hashes"] == 0 and ks[b"draining-hashes"] == 0
    assert _lag(c) == 0
    assert read(c, "B") == []  # the deleted deferred entries are not delivered
    # A key A had pending goes to B now that B holds it on the ring after A leaves: no draining wait
    c.execute_command("XGROUP", "LEAVE", "s", "g", "A")
    key = keys_of(ring_of(b"A", b"B"), b"A")[0]
    new = c.xadd("s", {"k": key})
    assert [e[0] for e in read(c, "B")] == [new]


def test_xackdel_acks_and_deletes_a_keyshared_groups_entries(c):
    """XACKDEL in a KEYSHARED group: acknowledged entries release their hash like XACK, ACKED keeps what B still needs."""
    a_ids, b_ids = _keyshared_with_deferred(c)
    # ACKED: A's entries are acknowledged by g, the only group, so they go
    assert c.execute_command("XACKDEL", "s", "g", "ACKED", "IDS", 3, *a_ids) == [1, 1, 1]
    assert c.xlen("s") == 3
    ks = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))
    assert ks[b"pending-hashes"] == 0 and ks[b"deferred"] == 3
    # an ACKED trim keeps B's deferred entries: not yet delivered
    c.execute_command("XTRIM", "s", "MAXLEN", "=", 0, "ACKED")
    assert c.xlen("s") == 3
    assert [e[0] for e in read(c, "B")] == b_ids


def test_retention_keeps_nacked_entries_of_an_auto_subscriber(one_per_node):
    """An XNACKed entry is still the group's to process: an AUTO subscriber's ack floor stays below it."""
    c = one_per_node
    c.xgroup_create("s", "g", "$", mkstream=True)
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    ids = [c.xadd("s", {"n": i}, id=f"{i}-1") for i in range(1, 6)]
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", 100)
    assert len(read(c, "A")) == 5
    assert c.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, ids[1]) == 1
    c.xack("s", "g", ids[0], *ids[2:])
    c.xadd("s", {"n": 6}, id="6-1")  # a write runs the policy
    assert [e[0] for e in c.xrange("s")][0] == ids[1]
    got = c.execute_command("XREADGROUP", "GROUP", "g", "B", "CLAIM", 0, "STREAMS", "s", ">")
    entries = list(got.values())[0][0] if isinstance(got, dict) else got[0][1]
    assert entries[0][0] == ids[1]
    retention = c.execute_command("XRETENTION", "GET", "s")
    assert info_map(retention)[b"entries-lost"] == 0


def test_retention_after_xackdel(one_per_node):
    """XACKDEL deletes acknowledged entries itself; the policy then counts nothing lost and keeps the rest."""
    c = one_per_node
    c.xgroup_create("s", "g", "$", mkstream=True)
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    ids = [c.xadd("s", {"n": i}, id=f"{i}-1") for i in range(1, 6)]
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", 0)
    read(c, "A", count=3)
    assert c.execute_command("XACKDEL", "s", "g", "KEEPREF", "IDS", 2, ids[0], ids[2]) == [1, 1]
    # ack floor: ids[1] still pending, so nothing before it may go (and nothing is before it)
    assert [e[0] for e in c.xrange("s")] == [ids[1], *ids[3:]]
    c.xack("s", "g", ids[1])
    c.xadd("s", {"n": 6}, id="6-1")
    retention = info_map(c.execute_command("XRETENTION", "GET", "s"))
    assert retention[b"entries-lost"] == 0
    assert all(e[0] > ids[2] for e in c.xrange("s"))  # the AUTO floor moved past the acked head


@pytest.mark.parametrize("how", ["XDEL", "XTRIM", "retention"])
def test_idmp_answers_the_original_id_after_the_entry_is_gone(c, how):
    """Redis 8.6: a tracked iid answers its entry's ID even when the entry was deleted or trimmed; nothing is added."""
    first = c.execute_command("XADD", "s", "IDMP", "p", "i1", "*", "f", "v")
    c.xadd("s", {"f": "w"})
    if how == "XDEL":
        c.xdel("s", first)
    elif how == "XTRIM":
        c.xtrim("s", maxlen=1, approximate=False)
    else:
        c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", 1)
        c.xadd("s", {"f": "x"})
        assert c.xlen("s") == 1
    before = c.xlen("s")
    assert c.execute_command("XADD", "s", "IDMP", "p", "i1", "*", "f", "v") == first
    assert c.xlen("s") == before
    info = c.xinfo_stream("s")
    assert (info["iids-tracked"], info["iids-duplicates"]) == (1, 1)


def test_retention_max_takes_keyshared_deferred_entries_only_counting_them(one_per_node):
    """An AUTO subscriber's deferred entries hold the head; only MAX removes them, and counts them as the group's loss.

    The group lost B's three deferred entries (passed over, never delivered): its entries-lost says 3."""
    c = one_per_node
    a_ids, b_ids = _keyshared_with_deferred(c)
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    c.xack("s", "g", *a_ids)
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    c.xadd("s", {"k": "x"}, id="*")  # a run: B's deferred entries hold the head, nothing goes
    assert [e[0] for e in c.xrange("s")][:3] == b_ids
    assert info_map(c.execute_command("XRETENTION", "GET", "s"))[b"entries-lost"] == 0
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", 2)
    c.xadd("s", {"k": "y"}, id="*")
    assert c.xlen("s") == 2
    retention = info_map(c.execute_command("XRETENTION", "GET", "s"))
    # the stream's count is Pravega's: everything past the lowest release point (B's first deferred entry) that
    # MAX took, acknowledged entries above it included (b1-b3, a1, a2 when XRETENTION SET ran; a3 was past it then)
    assert retention[b"entries-lost"] == 5
    group = c.xinfo_groups("s")[0]
    assert (group["entries-lost"], group["deferred"], group["lag"]) == (3, 0, 2)
    assert _lag(c) == 2
    assert read(c, "B") + read(c, "A") != []  # x and y still reach their owners
    assert _lag(c) == 0



def test_grouplag_and_backlog_see_deferred_entries(c):
    """A KEYSHARED group's deferred entries are undelivered: the oldest of them sets oldest-undelivered-ms, and
    XBACKLOG scans them (from the ack floor, which lies at the first of them) with the pending entries."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    now = c.time()[0] * 1000
    old = c.xadd("s", {"k": keys_of(ring, b"B")[0]}, id=f"{now - 60_000}-0")  # a minute old, B's
    mine = c.xadd("s", {"k": keys_of(ring, b"A")[0]}, id=f"{now - 1_000}-0")
    assert [e[0] for e in read(c, "A")] == [mine]
    lag = info_map(c.execute_command("XGROUPLAG", "s", "g")[0])
    assert lag[b"lag"] == 1 and lag[b"pending"] == 1
    assert lag[b"oldest-undelivered-ms"] >= 59_000  # the deferred entry, not 0 ("nothing undelivered")
    scan = info_map(c.execute_command("XBACKLOG", "s", "g"))
    assert (scan[b"entries"], scan[b"pending"], scan[b"first-id"]) == (2, 1, old)
    c.xdel("s", old)  # a deleted deferred entry is nothing to process
    scan = info_map(c.execute_command("XBACKLOG", "s", "g"))
    assert (scan[b"entries"], scan[b"pending"], scan[b"deleted-pending"], scan[b"first-id"]) == (1, 1, 0, mine)
    assert info_map(c.execute_command("XGROUPLAG", "s", "g")[0])[b"oldest-undelivered-ms"] == 0


def test_delref_from_another_group_ends_a_draining_hash(c):
    """A key draining at its old owner waits for its pending entries; XACKDEL DELREF by another group removes them
    from every PEL, so the key moves on at once, its waiting entries in order to the new owner and to no one else."""
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.xgroup_create("s", "other", "$")
    assert read(c, "A") == [] and read(c, "B") == []
    moving = [k for k in keys_of(ring_of(b"A", b"B"), b"A") if k in keys_of(ring_of(b"A", b"B", b"C"), b"C")][0]
    held = c.xadd("s", {"k": moving})
    assert [e[0] for e in read(c, "A")] == [held]
    assert read(c, "C") == []  # C joins: the key is C's now, draining at A
    waiting = [c.xadd("s", {"k": moving}) for _ in range(2)]
    assert read(c, "C") == [] and read(c, "A") == []  # neither may have them while A holds the key
    ks = info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))
    assert ks[b"draining-hashes"] == 1
    c.xreadgroup("other", "x", {"s": ">"})
    assert c.execute_command("XACKDEL", "s", "other", "DELREF", "IDS", 1, held) == [1]
    assert c.xpending("s", "g")["pending"] == 0
    assert info_map(c.execute_command("XINFO", "KEYSHARED", "s", "g"))[b"draining-hashes"] == 0
    assert read(c, "A") == []
    assert [e[0] for e in read(c, "C")] == waiting


def test_explicit_reference_trims_under_a_retention_policy(one_per_node):
    """ACKED and DELREF trims keep Redis's meaning on a stream with a policy: they are not the policy's truncations
    (its counters stay), and what they change moves an AUTO subscriber's release point as XACK would."""
    c = one_per_node
    c.xgroup_create("s", "g", "$", mkstream=True)
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    ids = [c.xadd("s", {"n": i}, id=f"{i}-1") for i in range(1, 9)]
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", 0)
    assert len(read(c, "A", count=5)) == 5  # 1-5 pending, 6-8 not delivered
    c.execute_command("XTRIM", "s", "MAXLEN", "=", 0, "ACKED")  # everything is referenced: nothing goes
    assert c.xlen("s") == 8
    c.execute_command("XTRIM", "s", "MAXLEN", "=", 6, "DELREF")  # 1-2 go with their PEL references
    assert [e[0] for e in c.xrange("s")] == ids[2:]
    assert c.xpending("s", "g")["pending"] == 3
    c.xack("s", "g", ids[2])  # the release point moves past 3-1: the policy takes it
    assert [e[0] for e in c.xrange("s")] == ids[3:]
    retention = info_map(c.execute_command("XRETENTION", "GET", "s"))
    assert (retention[b"entries-truncated"], retention[b"entries-lost"]) == (1, 0)
    assert c.xinfo_groups("s")[0]["entries-lost"] == 0
