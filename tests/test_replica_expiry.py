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
