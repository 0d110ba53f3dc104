"""Every new piece of state at once, on one primary: a replica, an AOF rewrite without preamble and a snapshot reproduce it.

Each feature's own tests cover its state alone (test_idmp_durability,
test_claim_effects, test_keyshared, test_retention_model, test_lag_durability).
Here one seeded workload mixes them on the same streams: IDMP maps with small
limits, a NACK zone, a KEYSHARED group with members, pending hashes and a
deferred set, consumption retention with AUTO and MANUAL subscribers, release
points and counters, XACKDEL and DELREF/ACKED trims between. The state is read
from each server's own SAVEd snapshot (the maps, the ring and the deferred set
are not visible to clients otherwise) in a layout-free form: entries, counters,
groups, IDMP and retention state. It must be the same on the primary, its
replica, after BGREWRITEAOF with aof-use-rdb-preamble no and a kill -9
(every feature's rewrite commands replayed together), and after a restart from
the snapshot.
"""

from __future__ import annotations

import random

from persistence.snapshot import read
from storage import retention
from storage.consumer_group import dump_groups
from storage.stream_id import MAX_ID
from tests.servers import start_millrace
from tests.test_keyshared import keys_of, ring_of
from tests.test_persistence import kill9, no_child, wait_for
from tests.test_replication import caught_up

NODE = "4"


def state(proc) -> dict:
    """SAVE, then each key of the snapshot file as entries, counters, groups and extras (node layout left out)."""
    assert proc.client().save() is True
    out = {}
    for index, (data, expires) in read(f"{proc.dir}/dump.mpk").dbs.items():
        for key, value in data.items():
            if isinstance(value, bytes):
                out[(index, key)] = (value, expires.get(key))
                continue
            counters = (value.length, value.last_id, value.first_id, value.max_deleted_entry_id, value.entries_added)
            groups = dump_groups(value.groups)
            for group in groups:
                group[3].sort()  # consumers: a rewrite creates them in its own order
            idmp = value.idmp.dump() if value.idmp is not None else None
            if idmp is not None:
                idmp["duplicates"] = 0  # a repeat propagates nothing: the replica and the AOF do not count it
            out[(index, key)] = (value.range(0, MAX_ID), counters, groups, idmp, retention.dump(value))
    return out


def workload(c, seed: int) -> None:
    rnd = random.Random(seed)
    c.xgroup_create("jobs", "work", "$", mkstream=True)
    c.xgroup_create("jobs", "sub", "$")
    c.xgroup_create("jobs", "manual", "$")
    c.execute_command("XGROUP", "SETCONFIG", "jobs", "sub", "SUBSCRIBER", "AUTO")
    c.execute_command("XGROUP", "SETCONFIG", "jobs", "manual", "SUBSCRIBER", "MANUAL")
    c.execute_command("XRETENTION", "SET", "jobs", "CONSUMPTION", "MIN-LEN", 6, "MAX-LEN", 40)
    c.execute_command("XCFGSET", "jobs", "IDMP-MAXSIZE", 5)
    c.execute_command("XGROUP", "CREATE", "ks", "g", "$", "MKSTREAM", "KEYSHARED", "k")
    c.execute_command("XGROUP", "SETCONFIG", "ks", "g", "SUBSCRIBER", "AUTO", "SESSION-TIMEOUT", 3_600_000, "LOOKAHEAD", 500)
    c.execute_command("XRETENTION", "SET", "ks", "CONSUMPTION", "MAX-LEN", 30)
    members = ["A", "B"]
    for name in members:
        c.xreadgroup("g", name, {"ks": ">"})
    keys = keys_of(ring_of(b"A", b"B"), b"A")[:4] + keys_of(ring_of(b"A", b"B"), b"B")[:4]
    for step in range(300):
        op = rnd.random()
        if op < 0.25:
            c.execute_command("XADD", "jobs", "IDMP", rnd.choice(["p1", "p2"]), f"i{rnd.randrange(9)}", "*", "n", step)
        elif op < 0.45:
            c.xadd("ks", {"k": rnd.choice(keys), "n": step})
        elif op < 0.55:
            reply = c.xreadgroup(rnd.choice(["work", "sub"]), rnd.choice(["w1", "w2"]), {"jobs": ">"}, count=3)
            if reply and rnd.random() < 0.5:
                c.execute_command("XNACK", "jobs", "work", "FAIL", "IDS", 1, reply[0][1][0][0])
        elif op < 0.6:
            c.execute_command("XREADGROUP", "GROUP", "work", "w3", "COUNT", 2, "CLAIM", 0, "STREAMS", "jobs", ">")
        elif op < 0.7:
            c.xreadgroup("g", rnd.choice(members), {"ks": ">"}, count=rnd.randrange(1, 4))
        elif op < 0.78:
            for key, group in (("jobs", "work"), ("jobs", "sub"), ("ks", "g")):
                pending = c.xpending_range(key, group, "-", "+", 3)
                if pending:
                    ids = [p["message_id"] for p in pending[: rnd.randrange(1, 4)]]
                    if rnd.random() < 0.5:
                        c.xack(key, group, *ids)
                    else:
                        c.execute_command("XACKDEL", key, group, rnd.choice(["KEEPREF", "ACKED"]), "IDS", len(ids), *ids)
        elif op < 0.82:
            c.execute_command("XGROUP", "RELEASE", "jobs", "manual", "$")
        elif op < 0.85:
            first = c.xrange("ks", count=3)
            if first:
                c.execute_command("XDELEX", "ks", rnd.choice(["KEEPREF", "DELREF", "ACKED"]), "IDS", 1, first[-1][0])
        elif op < 0.88:
            c.execute_command("XTRIM", "jobs", "MAXLEN", "=", 25, rnd.choice(["ACKED", "DELREF"]))
        elif op < 0.91 and len(members) < 4:
            name = f"M{step}"
            members.append(name)
            c.xreadgroup("g", name, {"ks": ">"}, count=1)  # joins: some hashes move and drain
        elif op < 0.93 and len(members) > 2:
            c.execute_command("XGROUP", "LEAVE", "ks", "g", members.pop(rnd.randrange(len(members))))
        else:
            pending = c.xpending_range("ks", "g", "-", "+", 1)
            if pending:
                c.xclaim("ks", "g", rnd.choice(members), 0, [pending[0]["message_id"]])
    for key in keys:  # the end: some keys pending at their owners, others' entries deferred behind them
        c.xadd("ks", {"k": key, "n": "last"})
    c.xreadgroup("g", "A", {"ks": ">"}, count=3)
    c.execute_command("XADD", "jobs", "IDMP", "p3", "last", "*", "n", "last")
    reply = c.xreadgroup("work", "w1", {"jobs": ">"}, count=2)
    c.execute_command("XNACK", "jobs", "work", "FATAL", "IDS", 1, reply[0][1][-1][0])


def test_every_feature_together_on_a_replica_after_a_rewrite_and_from_the_snapshot(tmp_path):
    args = ("--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no",
            "--stream-node-max-entries", NODE, "--save", "")
    (tmp_path / "p").mkdir()
    (tmp_path / "r").mkdir()
    primary = start_millrace(*args, workdir=str(tmp_path / "p"))
    replica = start_millrace("--replicaof", "127.0.0.1", str(primary.port), "--stream-node-max-entries", NODE,
                             workdir=str(tmp_path / "r"))
    try:
        client = primary.client()
        workload(client, 11)
        before = state(primary)
        ks = before[(0, b"ks")]
        keyshared = ks[2][0][5]["keyshared"]
        assert keyshared["deferred"] and keyshared["pending"] and len(keyshared["members"]) >= 2
        assert (keyshared["session-timeout"], keyshared["lookahead"]) == (3_600_000, 500)
        assert any(len(g) > 5 and g[5].get("nacked") for g in before[(0, b"jobs")][2])
        assert before[(0, b"jobs")][3]["producers"] and before[(0, b"jobs")][4]["truncated"] > 0
        caught_up(client, replica.client())
        assert state(replica) == before
        assert client.bgrewriteaof()
        wait_for(lambda: no_child(client))
    finally:
        replica.stop()
    kill9(primary)
    primary = start_millrace(*args, workdir=str(tmp_path / "p"), port=primary.port)
    try:
        assert state(primary) == before  # (state() SAVEs: dump.mpk is now this state)
    finally:
        kill9(primary)
    primary = start_millrace("--appendonly", "no", "--save", "", "--stream-node-max-entries", NODE,
                             workdir=str(tmp_path / "p"), port=primary.port)
    try:
        assert state(primary) == before
    finally:
        primary.stop()
