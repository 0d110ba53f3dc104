"""KEYSHARED session timeouts decided by the primary's cron (server/keyshared_sessions.py): members that stop
reading leave, and release their pending entries, without anyone reading the group; the decision reaches a
replica and the AOF as XGROUP LEAVE, and the cron goes on after a restart from the snapshot."""

from __future__ import annotations

import threading
import time

import pytest

from tests.servers import start_millrace
from tests.test_keyshared import info_map, keys_of, read, ring_of
from tests.test_persistence import wait_for
from tests.test_replication import caught_up


def keyshared_info(client) -> dict:
    info = info_map(client.execute_command("XINFO", "KEYSHARED", "s", "g"))
    return {
        "members": info[b"members"],
        "deferred": info[b"deferred"],
        "consumers": {info_map(c)[b"name"]: info_map(c)[b"member"] for c in info[b"consumers"]},
        "pending": client.xpending("s", "g")["pending"],
    }


@pytest.fixture
def pair(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_millrace("--appendonly", "yes", "--hz", "50", workdir=str(tmp_path / "p"))
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), workdir=str(tmp_path / "r"))
    yield primary, replica, tmp_path
    primary.stop()
    replica.stop()


def test_silent_members_leave_without_a_read(pair):
    primary, replica, tmp_path = pair
    c = primary.client()
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "400")
    assert read(c, "A") == [] and read(c, "B") == []
    ring = ring_of(b"A", b"B")
    c.xadd("s", {"k": keys_of(ring, b"A")[0]})
    c.xadd("s", {"k": keys_of(ring, b"B")[0]})
    assert len(read(c, "A")) == 1  # A holds one pending entry; B's entry waits for B, deferred
    state = keyshared_info(c)
    assert (state["members"], state["deferred"], state["pending"]) == (2, 1, 1)
    # nobody reads: the cron alone must notice the silence (a read would decide it too)
    wait_for(lambda: keyshared_info(c)["members"] == 0, timeout=5)
    after = keyshared_info(c)
    assert after == {"members": 0, "deferred": 2, "consumers": {b"A": 0, b"B": 0}, "pending": 0}  # A's entry released
    caught_up(c, replica.client())
    assert keyshared_info(replica.client()) == after  # the leave travelled as an effect
    log = b"".join(p.read_bytes() for p in sorted((tmp_path / "p").rglob("*.aof")))
    assert b"LEAVE" in log
    # a member reading again joins again and gets its key's entries back, in order
    assert len(read(c, "A")) == 2


def test_the_cron_goes_on_after_a_restart_from_the_snapshot(tmp_path):
    server = start_millrace("--appendonly", "no", "--hz", "50", workdir=str(tmp_path))
    try:
        c = server.client()
        c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
        c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "4000")  # longer than a restart
        assert read(c, "A") == []
        c.save()
        server.stop()
        server = start_millrace("--appendonly", "no", "--hz", "50", workdir=str(tmp_path), port=server.port)
        c = server.client()
        assert keyshared_info(c)["members"] == 1
        wait_for(lambda: keyshared_info(c)["members"] == 0, timeout=10)  # the loaded stream is watched too
    finally:
        server.stop()


def test_a_replica_does_not_decide_timeouts(pair):
    """A replica keeps its primary's members until the primary says they left (no clock of its own);
    while the primary is paused (CLIENT PAUSE WRITE) its cron decides nothing either."""
    primary, replica, _tmp_path = pair
    c = primary.client()
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "200")
    assert read(c, "A") == []
    caught_up(c, replica.client())
    c.execute_command("CLIENT", "PAUSE", "2000", "WRITE")
    time.sleep(1)
    assert keyshared_info(replica.client())["members"] == 1 == keyshared_info(c)["members"]
    c.execute_command("CLIENT", "UNPAUSE")
    wait_for(lambda: keyshared_info(c)["members"] == 0, timeout=5)
    caught_up(c, replica.client())
    assert keyshared_info(replica.client())["members"] == 0


def test_a_timed_out_holder_wakes_the_blocked_new_owner(pair):
    """A holds a key the ring gave to B when B joined (draining at A); A stops reading, B waits (BLOCK) for
    that key: A's timeout, decided by the cron, releases the entry and wakes B with it, in order."""
    primary, _replica, _tmp_path = pair
    c = primary.client()
    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SESSION-TIMEOUT", "500")
    assert read(c, "A") == []
    key_b = keys_of(ring_of(b"A", b"B"), b"B")[0]
    first = c.xadd("s", {"k": key_b})
    assert [i for i, _f in read(c, "A")] == [first]  # A alone: pending at A
    assert read(c, "B") == []  # B joins: the key is B's, draining at A
    second = c.xadd("s", {"k": key_b})
    results: list = []

    def waiter() -> None:
        client = primary.client()
        results.append(read(client, "B", block=3000))
        client.close()

    thread = threading.Thread(target=waiter)
    start = time.monotonic()
    thread.start()
    thread.join(5)
    assert time.monotonic() - start < 2.5  # woken by A's timeout (500 ms), not by its BLOCK timeout
    assert [i for i, _f in results[0]] == [first, second]
    assert keyshared_info(c)["consumers"][b"A"] == 0
