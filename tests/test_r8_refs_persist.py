"""Policy trims, XDELEX and XACKDEL through real processes: a replica, an AOF restart and a snapshot restart
all hold exactly the primary's state (tests/persist_workload.state(): entries, counters, node counts,
groups, PELs with owners and delivery times and counts, consumers)."""

from __future__ import annotations

import random

import redis

from tests.persist_workload import state
from tests.test_persistence import kill9, start
from tests.test_replication import caught_up, replica_of

KEYS = ["s1", "s2"]
GROUPS = ["g1", "g2"]
POLICIES = ["KEEPREF", "DELREF", "ACKED"]


def policy_workload(client: redis.Redis, seed: int, steps: int = 600) -> dict[str, int]:
    """Random XADD/XTRIM with policies, XDELEX, XACKDEL, group reads and acks; how often each changed something."""
    rng = random.Random(seed)
    next_ms = dict.fromkeys(KEYS, 1)
    changed = dict.fromkeys(["trim", "xdelex", "xackdel"], 0)

    def run(*argv):
        try:
            return client.execute_command(*argv)
        except redis.ResponseError as exc:
            return exc

    def some_id(key: str) -> str:
        return f"{rng.randint(max(1, next_ms[key] - 12), next_ms[key])}-0"

    for _ in range(steps):
        key, group = rng.choice(KEYS), rng.choice(GROUPS)
        policy = rng.choice(POLICIES)
        roll = rng.random()
        if roll < 0.35:
            next_ms[key] += 1
            trim = []
            if rng.random() < 0.4:
                trim = [policy, "MAXLEN", rng.choice(["=", "~"]), rng.randint(2, 15)]
            reply = run("XADD", key, *trim, f"{next_ms[key]}-0", "f", rng.randint(0, 9))
        elif roll < 0.45:
            mode = rng.choice(["=", "~"])
            limit = ["LIMIT", rng.randint(1, 20)] if mode == "~" and rng.random() < 0.3 else []
            changed["trim"] += bool(run("XTRIM", key, "MINID", mode, some_id(key), *limit, policy))
        elif roll < 0.55:
            ids = [some_id(key) for _ in range(rng.randint(1, 4))]
            reply = run("XDELEX", key, policy, "IDS", len(ids), *ids)
            changed["xdelex"] += isinstance(reply, list) and 1 in reply
        elif roll < 0.65:
            ids = [some_id(key) for _ in range(rng.randint(1, 4))]
            reply = run("XACKDEL", key, group, policy, "IDS", len(ids), *ids)
            changed["xackdel"] += isinstance(reply, list) and any(code > 0 for code in reply)
        elif roll < 0.70:
            run("XGROUP", "CREATE", key, group, rng.choice(["0", "$"]), "MKSTREAM")
        elif roll < 0.90:
            run("XREADGROUP", "GROUP", group, rng.choice(["alice", "bob"]), "COUNT", rng.randint(1, 5), "STREAMS", key, ">")
        else:
            run("XACK", key, group, *[some_id(key) for _ in range(3)])
    return changed


def test_replica_aof_and_snapshot_reproduce_policy_deletions(tmp_path):
    workdir = tmp_path / "primary"
    workdir.mkdir()
    primary = start(str(workdir), "--appendonly", "yes", "--stream-node-max-entries", "5", "--save", "")
    replica = replica_of(tmp_path, "replica", primary.port, "--stream-node-max-entries", "5")
    try:
        p = primary.client()
        changed = policy_workload(p, seed=21)
        assert all(count >= 10 for count in changed.values()), changed
        before = state(p)
        caught_up(p, replica.client())
        assert state(replica.client()) == before
        p.execute_command("SAVE")
    finally:
        replica.stop()
    kill9(primary)
    from_aof = start(str(workdir), "--appendonly", "yes", "--stream-node-max-entries", "5", "--save", "")
    try:
        assert state(from_aof.client()) == before
    finally:
        from_aof.stop()
    from_snapshot = start(str(workdir), "--appendonly", "no", "--stream-node-max-entries", "5", "--save", "")
    try:
        assert from_snapshot.client().info("persistence")["aof_enabled"] == 0
        assert state(from_snapshot.client()) == before
    finally:
        from_snapshot.stop()
