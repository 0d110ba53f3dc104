"""IDMP state survives restarts and reaches replicas exactly: real processes, maps compared through snapshots.

A primary with the AOF on (fsync always) and a replica run a workload of
idempotent XADDs (IDMP and IDMPAUTO, several producers, repeats, XCFGSET with
small limits so that iids are evicted, a one-second duration so that the cron
expires some). The maps themselves are not visible to clients, so each server
SAVEs and its snapshot file is read here: per stream the limits, each
producer's iids with their entry IDs in FIFO order (which fix when they expire)
and the lifetime counters must be the same on the replica, after a restart from
the AOF, after a restart from the snapshot and after a rewrite without preamble.
`iids-duplicates` included: a repeat propagates its counters (Redis 8.6.2 marks
the key dirty for it, redis#14858).
"""

from __future__ import annotations

import random
import time

from persistence.snapshot import read
from tests.servers import start_millrace
from tests.test_persistence import kill9, wait_for
from tests.test_replication import caught_up


def idmp_maps(proc) -> dict:
    """SAVE, then every stream's entries and IDMP dump as the snapshot file holds them."""
    client = proc.client()
    assert client.save() is True
    snapshot = read(f"{proc.dir}/dump.mpk")
    out = {}
    for index, (data, _expires) in snapshot.dbs.items():
        for key, stream in data.items():
            state = None if stream.idmp is None else stream.idmp.dump()
            out[(index, key)] = (stream.range(0, (1 << 128) - 1), state)
    return out


def workload(client, seed: int) -> None:
    rnd = random.Random(seed)
    client.xadd("short", {"f": "v"})
    client.execute_command("XCFGSET", "short", "IDMP-DURATION", "1", "IDMP-MAXSIZE", "5")
    client.xadd("small", {"f": "v"})
    client.execute_command("XCFGSET", "small", "IDMP-MAXSIZE", "3")
    for step in range(400):
        key = rnd.choice(["short", "small", "plain", "other"])
        pid = rnd.choice(["p1", "p2", "producer-3", "\u00e9"])
        if rnd.random() < 0.5:
            client.execute_command("XADD", key, "IDMP", pid, f"iid-{rnd.randrange(12)}", "*", "n", step)
        else:
            pairs = rnd.sample([("a", "1"), ("b", "2"), ("c", "3"), ("d", "4")], rnd.randrange(1, 4))
            client.execute_command("XADD", key, "MAXLEN", "~", "50", "IDMPAUTO", pid, "*", *[x for pair in pairs for x in pair])
        if step == 200:
            time.sleep(1.3)  # the cron expires the first half of "short"'s iids (and their producers)
        if step % 97 == 0 and client.xlen(key):
            client.xdel(key, client.xrange(key, count=1)[0][0])  # the map keeps the deleted entry's iid
    wait_for(lambda: fields(client, "short")[b"iids-tracked"] == 0)  # all expired: nothing changes under the SAVEs


def fields(client, key: str) -> dict:
    info = client.execute_command("XINFO", "STREAM", key)
    info = info if isinstance(info, dict) else dict(zip(info[0::2], info[1::2], strict=True))
    return {k if isinstance(k, bytes) else k.encode(): v for k, v in info.items()}


def test_replica_aof_and_snapshot_restarts_hold_the_same_maps(tmp_path):
    (tmp_path / "primary").mkdir()
    (tmp_path / "replica").mkdir()
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    primary = start_millrace(*args, workdir=str(tmp_path / "primary"))
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--stream-idmp-maxsize", "7",
                             workdir=str(tmp_path / "replica"))  # fmt: skip
    try:
        client = primary.client()
        workload(client, 3)
        short = fields(client, "short")
        assert short[b"iids-added"] > 0 and short[b"pids-tracked"] == 0 and short[b"iids-duplicates"] > 0
        caught_up(client, replica.client())
        expected = idmp_maps(primary)
        assert idmp_maps(replica) == expected
        assert expected[(0, b"small")][1]["maxsize"] == 3 and expected[(0, b"plain")][1]["maxsize"] == 100
        kill9(primary)  # restart from the AOF (its base, then every increment since)
        primary = start_millrace(*args, workdir=str(tmp_path / "primary"), port=primary.port)
        assert idmp_maps(primary) == expected
        client = primary.client()
        assert client.config_set("appendonly", "no")
        primary.stop()  # restart from the snapshot SAVE just wrote: exact, duplicates included
        primary = start_millrace("--save", "", workdir=str(tmp_path / "primary"), port=primary.port)
        assert idmp_maps(primary) == expected
        client = primary.client()
        # and the map still answers: the last tracked iid of a producer is a repeat
        (pid, iids), *_ = expected[(0, b"plain")][1]["producers"]
        iid, raw = iids[-1]
        original = b"%d-%d" % (int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big"))
        assert client.execute_command("XADD", "plain", "IDMP", pid, iid, "*", "again", "1") == original
    finally:
        replica.stop()
        primary.stop()


def test_snapshot_restart_and_rewrite_without_preamble_keep_the_counters(tmp_path):
    args = ("--appendonly", "yes", "--aof-use-rdb-preamble", "no", "--save", "", "--appendfsync", "always")
    proc = start_millrace(*args, workdir=str(tmp_path))
    try:
        client = proc.client()
        workload(client, 4)
        assert client.bgrewriteaof() is True
        wait_for(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0)
        base = tmp_path / "appendonlydir" / "appendonly.aof.2.base.aof"
        assert b"XIDMPRECORD" in base.read_bytes() and b"IIDS-DUPLICATES" in base.read_bytes()
        expected = idmp_maps(proc)
        small = expected[(0, b"small")][1]
        assert small["maxsize"] == 3 and small["duplicates"] > 0 and all(len(iids) == 3 for _pid, iids in small["producers"])
        kill9(proc)
        proc = start_millrace(*args, workdir=str(tmp_path), port=proc.port)
        assert idmp_maps(proc) == expected  # the rewrite's base carries the duplicates counter too
        proc.client().config_set("appendonly", "no")
        proc.stop()
        proc = start_millrace("--save", "", workdir=str(tmp_path), port=proc.port)
        assert idmp_maps(proc) == expected
    finally:
        proc.stop()


def test_iids_loaded_from_a_snapshot_still_expire(tmp_path):
    """The cron expires the iids of streams that came from a snapshot, with no idempotent XADD since (redis#14869)."""
    proc = start_millrace("--save", "", workdir=str(tmp_path))
    try:
        client = proc.client()
        client.xadd("s", {"f": "v"})
        client.execute_command("XCFGSET", "s", "IDMP-DURATION", "2")
        for i in range(5):
            client.execute_command("XADD", "s", "IDMP", f"p{i % 2}", f"i{i}", "*", "f", i)
        assert client.save() is True
        kill9(proc)
        proc = start_millrace("--save", "", workdir=str(tmp_path), port=proc.port)
        client = proc.client()
        assert fields(client, "s")[b"iids-tracked"] == 5  # loaded; then the cron forgets them
        wait_for(lambda: fields(client, "s")[b"pids-tracked"] == 0, timeout=8)
        assert fields(client, "s")[b"iids-added"] == 5
    finally:
        proc.stop()
