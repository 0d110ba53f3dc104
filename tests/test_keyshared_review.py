"""KEYSHARED groups (issue 22): what a review against the issue's contract found, through a real server.

- XINFO STREAM FULL gives a KEYSHARED group's entries-read and lag as XINFO GROUPS does (its deferred
  entries are read by nobody yet), with and without stream-exact-lag.
- A consumer's first blocking read judges the look-ahead as the read itself will: with it joined.
- Another client's KEYSHARED read (its JOIN/DEFER/UNDEFER effects) no more aborts a WATCH than a
  plain group's read does.
- XAUTOCLAIM lists a claimed hash's deleted sibling among the IDs it dropped from the PEL.
- XGROUP CREATE ... ENTRIESREAD KEYSHARED: KEYSHARED read as ENTRIESREAD's value is not an integer.
"""

from __future__ import annotations

import time

import pytest
import redis

from storage.keyshared import HashRing, sticky_hash
from tests.servers import start_millrace


@pytest.fixture(scope="module")
def server():
    proc = start_millrace()
    yield proc
    proc.stop()


@pytest.fixture
def c(server):
    client = server.client(protocol=2)  # replies as flat lists
    client.flushall()
    for name in ("XPENDING", "XAUTOCLAIM", "XINFO STREAM", "XINFO GROUPS", "XREADGROUP"):
        client.response_callbacks.pop(name, None)
    yield client
    client.config_set("stream-exact-lag", "no")
    client.close()


def keys_of(*members: bytes) -> dict[bytes, list[bytes]]:
    """Keys k0..k399 by the member a ring of `members` gives them to."""
    ring = HashRing()
    for name in members:
        ring.add(name)
    owned: dict[bytes, list[bytes]] = {name: [] for name in members}
    for i in range(400):
        key = b"k%d" % i
        owned[ring.select(sticky_hash(key))].append(key)
    return owned


def fields(flat: list) -> dict:
    return dict(zip(flat[::2], flat[1::2], strict=True))


@pytest.mark.parametrize("exact", ["no", "yes"])
def test_xinfo_stream_full_counts_deferred_entries_as_xinfo_groups(c, exact):
    c.config_set("stream-exact-lag", exact)
    owned = keys_of(b"A", b"B")
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    for name in (b"A", b"B"):
        c.execute_command("XREADGROUP", "GROUP", "g", name, "STREAMS", "s", ">")  # both join
    for i in range(3):
        c.xadd("s", {"k": owned[b"A"][i]})
        c.xadd("s", {"k": owned[b"B"][i]})
    got = c.execute_command("XREADGROUP", "GROUP", "g", "A", "COUNT", 10, "STREAMS", "s", ">")
    assert len(got[0][1]) == 3  # B's three were passed over: deferred
    group = fields(c.execute_command("XINFO", "GROUPS", "s")[0])
    full = fields(fields(c.execute_command("XINFO", "STREAM", "s", "FULL"))[b"groups"][0])
    assert (group[b"entries-read"], group[b"lag"], group[b"deferred"]) == (3, 3, 3)
    assert (full[b"entries-read"], full[b"lag"]) == (3, 3)


def test_a_first_blocking_read_sees_what_the_same_read_without_block_gets(c):
    """2,500 entries of a key A keeps, then one of B's: beyond the look-ahead of A alone (2,000), within
    that of A and B (4,000), which B's read has once it joins."""
    owned = keys_of(b"A", b"B")
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XREADGROUP", "GROUP", "g", "A", "STREAMS", "s", ">")  # A joins, then stalls
    pipe = c.pipeline(transaction=False)
    for _ in range(2500):
        pipe.xadd("s", {"k": owned[b"A"][0]})
    pipe.xadd("s", {"k": owned[b"B"][0]})
    pipe.execute()
    start = time.monotonic()
    got = c.execute_command("XREADGROUP", "GROUP", "g", "B", "COUNT", 1, "BLOCK", 20000, "STREAMS", "s", ">")
    assert time.monotonic() - start < 10  # answered, not parked until the timeout
    assert got[0][1][0][1] == [b"k", owned[b"B"][0]]


def test_a_keyshared_read_does_not_abort_a_watch(server, c):
    reader = server.client(protocol=2)
    try:
        for members in ((), (b"A", b"B")):  # the read joins A; the read of a member defers B's entries
            c.flushall()
            c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
            for i in range(6):
                c.xadd("s", {"k": f"k{i}"})
            for name in members:
                reader.execute_command("XREADGROUP", "GROUP", "g", name, "COUNT", 1, "STREAMS", "s", ">")
            c.execute_command("WATCH", "s")
            reader.execute_command("XREADGROUP", "GROUP", "g", "A", "COUNT", 1, "STREAMS", "s", ">")
            c.execute_command("MULTI")
            c.execute_command("SET", "x", "1")
            assert c.execute_command("EXEC") == [b"OK"], members
    finally:
        reader.close()


def test_xautoclaim_lists_a_deleted_sibling_it_dropped(c):
    c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "KEYSHARED", "k")
    c.xadd("s", {"k": "x"})
    c.xadd("s", {"k": "y"})
    c.xadd("s", {"k": "x"})
    gone = c.xadd("s", {"k": "x"})
    c.execute_command("XREADGROUP", "GROUP", "g", "A", "STREAMS", "s", ">")
    c.xdel("s", gone)
    reply = c.execute_command("XAUTOCLAIM", "s", "g", "B", 0, "0", "COUNT", 1, "JUSTID")
    pending = [entry[0] for entry in c.execute_command("XPENDING", "s", "g", "-", "+", 10)]
    assert gone not in pending
    assert reply[2] == [gone]  # dropped from the PEL, so listed as deleted (Redis's third element)


def test_keyshared_after_entriesread_is_its_value(c):
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "ENTRIESREAD", "KEYSHARED", "k")
    assert c.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM", "ENTRIESREAD", "0", "KEYSHARED", "k") == b"OK"
    assert fields(c.execute_command("XINFO", "GROUPS", "s")[0])[b"key-shared-field"] == b"k"
