"""replica-ignore-disk-write-errors: a replica whose own AOF cannot be written stops at the primary's next
write (default `no`), or goes on applying the stream with a warning (`yes`), as Redis 7's processCommand.

Redis cannot be the oracle here: the full disk is a file-size limit put on the running replica
(prlimit), and redis-server dies of SIGXFSZ at it, where Python ignores the signal and gets EFBIG.
"""

from __future__ import annotations

import os
import resource

import pytest

from tests.servers import start_millrace, wait_for


def aof_size(replica) -> int:
    folder = os.path.join(replica.dir, "appendonlydir")
    return sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))


@pytest.mark.parametrize("ignore", ["no", "yes"])
def test_a_replica_that_cannot_write_its_aof(ignore):
    primary = start_millrace("--save", "")
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--appendonly", "yes", "--appendfsync", "everysec",
                             "--save", "", "--replica-ignore-disk-write-errors", ignore)  # fmt: skip
    try:
        client, mirror = primary.client(), replica.client()
        wait_for(lambda: "online" in str(client.info("replication").get("slave0", "")), what="link up")
        wait_for(lambda: not mirror.info("persistence")["aof_rewrite_in_progress"], what="the replica's AOF rewrite after its sync")
        hard = resource.prlimit(replica.proc.pid, resource.RLIMIT_FSIZE)[1]
        resource.prlimit(replica.proc.pid, resource.RLIMIT_FSIZE, (aof_size(replica) + 16 * 1024, hard))
        for i in range(300):
            client.set(f"k{i}", "x" * 1000)
        # the stream may arrive in one read and be applied before its AOF write fails, or the failure may
        # come mid-stream: writes go on until one finds the replica's disk refusing
        if ignore == "no":
            wait_for(lambda: client.set("after", "1") and replica.proc.poll() is not None, what="the replica stopping", interval=0.1)
            assert replica.proc.wait(5) == 1
            assert "Replica was unable to write command to disk." in replica.read_log()
        else:
            wait_for(lambda: mirror.info("persistence")["aof_last_write_status"] == "err", what="the replica's AOF write failing")
            client.set("after", "1")
            wait_for(lambda: mirror.dbsize() == 301, what="every write applied")
            assert replica.proc.poll() is None
            assert "Replica is applying a command even though it is unable to write to disk." in replica.read_log()
    finally:
        replica.stop()
        primary.stop()
