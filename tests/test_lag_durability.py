"""Exact lag through restarts and replication (issue 23).

The rank structure is derived (rebuilt on load) and Burrow windows live in
memory; what persists is the groups' entries-read that XGROUP CREATE/SETID
compute with `stream-exact-lag yes`: it travels in their effect (ENTRIESREAD
n), so a replica that does not even have the option on, a restart from the
AOF and a restart from the snapshot all hold the same counters, and report
the same exact lag. The option itself persists through CONFIG REWRITE.
"""

from __future__ import annotations

import random

from tests.persist_workload import state
from tests.test_cli import config_get, start_with_file
from tests.test_persistence import kill9, start
from tests.test_replication import caught_up, replica_of
from tests.test_replication import start as start_named


def lag_workload(client, seed: int) -> None:
    """Entries with tombstones, groups created and moved to arbitrary IDs, reads and acks."""
    rng = random.Random(seed)
    ids: list[str] = []
    for step in range(300):
        op = rng.random()
        if op < 0.5 or not ids:
            ids.append(client.xadd("s", {"f": str(step)}).decode())
        elif op < 0.6:
            client.xdel("s", rng.choice(ids))
        elif op < 0.7:
            name = f"g{rng.randrange(4)}"
            client.xgroup_destroy("s", name)
            client.xgroup_create("s", name, id=rng.choice(ids + ["0", "$"]))
        elif op < 0.8 and client.exists("s"):
            groups = [g["name"] for g in client.xinfo_groups("s")]
            if groups:
                client.xgroup_setid("s", rng.choice(groups), id=rng.choice(ids))
        elif op < 0.95:
            groups = [g["name"] for g in client.xinfo_groups("s")]
            if groups:
                name = rng.choice(groups)
                reply = client.xreadgroup(name, "c", {"s": ">"}, count=rng.randrange(1, 5))
                if reply and rng.random() < 0.5:
                    client.xack("s", name, reply[0][1][0][0])
        else:
            client.xtrim("s", maxlen=max(len(ids) // 2, 1))
    # a group between the last tombstone and the end: Redis would not know its entries-read
    late = [client.xadd("s", {"f": "late"}) for _ in range(5)]
    client.xgroup_create("s", "late", id=late[1])


def as_map(reply) -> dict:
    return dict(zip(reply[0::2], reply[1::2], strict=True)) if isinstance(reply, list) else dict(reply)


def lag_picture(client) -> list:
    """XGROUPLAG without what depends on the clock or on the window (ages, lag-status)."""
    out = []
    for group in client.execute_command("XGROUPLAG", "s"):
        fields = as_map(group)
        for name in (b"oldest-undelivered-ms", b"oldest-pending-idle-ms", b"lag-status"):
            fields.pop(name)
        out.append(fields)
    return out


def test_replica_aof_and_snapshot_hold_the_computed_counters(tmp_path) -> None:
    primary = start_named(tmp_path, "primary", "--appendonly", "yes", "--stream-exact-lag", "yes", "--enable-debug-command", "yes")
    replica = replica_of(tmp_path, "replica", primary.port)  # stream-exact-lag no there
    try:
        client = primary.client()
        lag_workload(client, 1)
        assert [g["entries-read"] for g in client.xinfo_groups("s") if g["name"] == b"late"] != [None]
        r = replica.client()
        caught_up(client, r)
        before, lags = state(client), lag_picture(client)
        client.config_set("stream-exact-lag", "no")  # the stored counters, as Redis shows them, on both
        late = [g for g in r.xinfo_groups("s") if g["name"] == b"late"][0]
        assert late["entries-read"] == primary.client().xinfo_stream("s")["entries-added"] - 3  # computed at CREATE, replicated
        assert state(r) == state(client)
        client.config_set("stream-exact-lag", "yes")
        r.config_set("stream-exact-lag", "yes")
        assert state(r) == before
        assert lag_picture(r) == lags
        # both commands are read-only: a replica answers them, the same as its primary
        scans = [as_map(c.execute_command("XBACKLOG", "s", "late", "TIMEOUT", 1000)) for c in (client, r)]
        for scan in scans:
            scan.pop(b"elapsed-ms")
        assert scans[0] == scans[1] and scans[0][b"entries"] == 3
    except BaseException:
        primary.stop()  # (on success it is killed below, to restart from its files)
        raise
    finally:
        replica.stop()
    kill9(primary)
    workdir = str(tmp_path / "primary")
    proc = start(workdir, "--appendonly", "yes", "--stream-exact-lag", "yes")  # from the AOF
    try:
        client = proc.client()
        assert state(client) == before
        assert lag_picture(client) == lags
        client.save()
    finally:
        proc.stop()
    proc = start(workdir, "--stream-exact-lag", "yes")  # from the snapshot
    try:
        client = proc.client()
        assert state(client) == before
        assert lag_picture(client) == lags
    finally:
        proc.stop()


def test_config_rewrite_keeps_stream_exact_lag(tmp_path) -> None:
    proc = start_with_file(tmp_path, "hz 10\n")
    try:
        client = proc.client()
        client.config_set("stream-exact-lag", "yes")
        client.config_rewrite()
    finally:
        proc.stop()
    assert "stream-exact-lag yes" in (tmp_path / "millrace.conf").read_text().splitlines()
    proc = start_with_file(tmp_path, (tmp_path / "millrace.conf").read_text())
    try:
        assert config_get(proc.port, "stream-exact-lag") == "yes"
    finally:
        proc.stop()
