"""A replica never expires keys by its own clock, as Redis's: only the primary's DELs remove them.

A replica that expired keys itself would lose any key the primary kept: a
PERSIST or a new EXPIRE that reaches it late (lag, a stalled link) arrives
after the key is gone, and a failover makes the loss final. The primary here
has active expiry off (DEBUG SET-ACTIVE-EXPIRE 0), so no DEL is sent: the
replica must keep counting its keys past their TTL (reads already hide them),
beside a Redis 8.2.3 pair doing the same.
"""

from __future__ import annotations

import time

import pytest

from tests.servers import require_redis, start_millrace, start_redis
from tests.test_persistence import wait_for


def pair_of(kind: str):
    if kind == "redis":
        require_redis()
        primary = start_redis("--enable-debug-command", "yes")
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
    else:
        primary = start_millrace("--enable-debug-command", "yes")
        replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port))
    return primary, replica


@pytest.mark.parametrize("kind", ["redis", "millrace"])
def test_a_replica_keeps_keys_past_their_ttl_until_the_primary_deletes_them(kind):
    primary, replica = pair_of(kind)
    try:
        source, copy = primary.client(), replica.client()
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        source.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        for n in range(5):
            source.set(f"k{n}", "v", px=300)
        source.xadd("s", {"f": "v"})
        source.pexpire("s", 300)
        assert source.wait(1, 5000) == 1
        time.sleep(1.0)  # past every TTL; several of the replica's cron ticks
        assert copy.dbsize() == 6  # counted, not removed
        assert copy.get("k0") is None and copy.exists("s") == 0  # but hidden from reads
        source.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")  # the primary expires them: its DELs reach the replica
        wait_for(lambda: copy.dbsize() == 0)
    finally:
        primary.stop()
        replica.stop()


@pytest.mark.parametrize("kind", ["redis", "millrace"])
def test_a_writable_replica_expires_the_keys_its_own_clients_gave_a_ttl(kind):
    """No DEL will come from the primary for them (Redis's slaveKeysWithExpire, INFO slave_expires_tracked_keys)."""
    if kind == "redis":
        require_redis()
        primary = start_redis()
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port), "--replica-read-only", "no")
    else:
        primary = start_millrace()
        replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--replica-read-only", "no")
    try:
        copy = replica.client()
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        copy.set("local", "v", px=1000)
        copy.xadd("ls", {"f": "v"})
        copy.pexpire("ls", 1000)
        copy.set("kept", "v")  # no TTL: not tracked
        time.sleep(0.3)  # several cron ticks, well before the TTL: nothing expired yet
        assert copy.dbsize() == 3
        assert copy.info("stats")["slave_expires_tracked_keys"] == 2
        wait_for(lambda: copy.dbsize() == 1)
        assert copy.info("stats")["slave_expires_tracked_keys"] == 0
        assert copy.info("stats")["expired_keys"] == 2
    finally:
        primary.stop()
        replica.stop()


def writes_on_keys_past_their_ttl(kind: str) -> list:
    if kind == "redis":
        require_redis()
        primary = start_redis("--enable-debug-command", "yes")
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port), "--replica-read-only", "no")
    else:
        primary = start_millrace("--enable-debug-command", "yes")
        replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--replica-read-only", "no")
    try:
        source, copy = primary.client(), replica.client()
        wait_for(lambda: copy.info("replication")["master_link_status"] == "up")
        source.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")  # no DEL comes: the keys stay on the replica, past their TTL
        for key in ("incr", "float", "append", "range", "keepttl", "del", "unlink", "stream"):
            source.set(key, "5", px=200)
        assert source.wait(1, 5000) == 1
        time.sleep(0.5)
        seen = [
            copy.incr("incr"), copy.incrbyfloat("float", 1.5), copy.append("append", "x"), copy.setrange("range", 0, "x"),
            copy.set("keepttl", "new", keepttl=True), copy.delete("del"), copy.unlink("unlink"),
            copy.xadd("stream", {"f": "v"}, id="1-1"),  # a string past its TTL is no WRONGTYPE for a write
        ]
        time.sleep(0.3)  # a few of the replica's cron ticks: nothing written here may expire
        for key in ("incr", "float", "append", "range", "keepttl", "del", "unlink"):
            seen.append((key, copy.get(key), copy.ttl(key)))
        seen += [copy.xlen("stream"), copy.ttl("stream"), copy.dbsize()]
        return seen
    finally:
        primary.stop()
        replica.stop()


def test_a_client_write_on_a_writable_replica_replaces_a_key_past_its_ttl():
    """Redis's lookupKeyWrite deletes the expired key first (EXPIRE_FORCE_DELETE_EXPIRED): INCR, APPEND,
    SETRANGE or SET KEEPTTL make a new key with no TTL instead of writing under the dead one (the value
    hidden at once, then deleted by the replica's cron); DEL and UNLINK count the key."""
    millrace, redis = writes_on_keys_past_their_ttl("millrace"), writes_on_keys_past_their_ttl("redis")
    assert millrace == redis
    assert millrace[0] == 1 and ("incr", b"1", -1) in millrace
