"""The effects of policy trims, XDELEX, XACKDEL and capped reads replay into exactly the same state.

Random workloads (tests/test_group_effects.py's, with XADD/XTRIM under every
policy, exact and `~` with LIMIT, XDELEX, XACKDEL and XREADGROUP with MAXCOUNT/
MAXSIZE, CLAIM too, mixed in, small nodes) run in-process; their propagated
effects are applied to a fresh server through a LoadingClient and the two are
compared: test_group_effects.dump()'s entries,
counters, groups, PELs and consumers, plus the node layout (first IDs, live
and deleted counts), which later `~` trims and XINFO's radix-tree figures
depend on. The persistence and replication of the same workloads through real
processes is tests/test_r8_refs_persist.py.
"""

from __future__ import annotations

import pytest

from protocol.reply import NULL_ARRAY, Error
from server.client import LoadingClient
from server.server import Server
from storage.stream import Stream
from tests.test_group_effects import CONSUMERS, GROUPS, KEYS, assert_pels_counted, dump
from tests.test_group_effects import Workload as GroupWorkload

POLICIES = ["KEEPREF", "DELREF", "ACKED"]
NODE_MAX = 4


def layout(srv: Server) -> dict:
    """Each stream's nodes: master ID, live and deleted entries (what `~` and XINFO read)."""
    return {
        key: [(node.master_id, node.count, node.deleted) for node in value.nodes]
        for db in srv.keyspace.dbs
        for key, value in db.data.items()
        if isinstance(value, Stream)
    }


class Workload(GroupWorkload):
    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.run("CONFIG", "SET", "stream-node-max-entries", NODE_MAX)

    def near_id(self, key: bytes) -> str:
        """Mostly an entry or a pending ID of the stream (so deletions and acknowledgements happen), else any."""
        stream = self.client.db.data.get(key)
        if isinstance(stream, Stream) and self.rng.random() < 0.8:
            known = [entry_id for entry_id, _ in stream.range(0, 2**128 - 1)]
            for group in stream.groups.values():
                known += group.pel.keys()
            if known:
                entry_id = self.rng.choice(known)
                return f"{entry_id >> 64}-{entry_id & (2**64 - 1)}"
        return self.some_id(key)

    def trim_args(self, key: bytes) -> list:
        rng = self.rng
        strategy = ["MAXLEN", rng.randint(0, 8)] if rng.random() < 0.5 else ["MINID", self.near_id(key)]
        mode = rng.choice([["="], ["~"], ["~"], []])
        limit = ["LIMIT", rng.randint(1, 9)] if mode == ["~"] and rng.random() < 0.4 else []
        policy = [rng.choice([*POLICIES, "ACKED"])] if rng.random() < 0.9 else []
        return [strategy[0], *mode, strategy[1], *limit, *policy]

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if 0.45 < roll < 0.55:  # MAXCOUNT / MAXSIZE reads (Redis 8.10): only what was sent is delivered
            caps = rng.choice([["MAXCOUNT", rng.randint(1, 3)], ["MAXSIZE", rng.choice([1, 60, 150])], ["MAXCOUNT", 2, "MAXSIZE", 90]])
            claim = ["CLAIM", rng.choice([0, 5, 1000])] if rng.random() < 0.3 else []
            start = ">" if rng.random() < 0.8 else "0"
            self.run("XREADGROUP", "GROUP", rng.choice(GROUPS), rng.choice(CONSUMERS), *caps, *claim, "STREAMS", *KEYS, start, start)
            return
        if roll > 0.45:
            super().step()
            return
        key = rng.choice(KEYS)
        self.server.now += rng.choice([0, 1, 7])
        ids = [self.near_id(key) for _ in range(rng.randint(1, 4))]
        policy = [rng.choice(POLICIES)] if rng.random() < 0.9 else []
        if roll < 0.15:
            self.run("XADD", key, *self.trim_args(key), "*", "f", rng.randint(0, 9))
        elif roll < 0.25:
            self.run("XTRIM", key, *self.trim_args(key))
        elif roll < 0.35:
            self.run("XDELEX", key, *policy, "IDS", len(ids), *ids)
        else:
            group = rng.choice([*GROUPS, b"nogroup"])
            self.run("XACKDEL", key, group, *policy, "IDS", len(ids), *ids)


def replay(batches, now: int, transactions: bool) -> Server:
    fresh = Server()
    fresh.now = now
    loader = LoadingClient(fresh)
    fresh.execute(loader, [b"CONFIG", b"SET", b"stream-node-max-entries", b"%d" % NODE_MAX])
    for batch in batches:
        for argv in batch:
            if not transactions and argv[0].upper() in (b"MULTI", b"EXEC"):
                continue
            reply = fresh.execute(loader, argv)
            assert type(reply) is not Error, (argv, reply)
    return fresh


@pytest.mark.parametrize("seed", range(30))
def test_policy_effects_replay_to_the_same_state(seed):
    work = Workload(seed)
    for step in range(300):
        work.step()
        if step % 25 == 0:
            assert_pels_counted(work.server)
    fresh = replay(work.batches, work.server.now + 60_000, transactions=seed % 2 == 1)
    assert dump(fresh) == dump(work.server)
    assert layout(fresh) == layout(work.server)
    assert_pels_counted(fresh)


def test_the_workloads_exercise_every_policy_path():
    """The random workloads above do reach gaps, dropped references and acknowledgements with deletions."""
    seen = {"acked-gap": 0, "delref-xack": 0, "xackdel-2": 0, "xdelex-1": 0}
    for seed in range(30):
        work = Workload(seed)
        for _ in range(300):
            work.step()
        for batch in work.batches:
            for argv in batch:
                if argv[0] in (b"XADD", b"XTRIM") and b"ACKED" in argv:
                    seen["acked-gap"] += 1
        for argv, reply in work.replies:
            if argv[0] == b"XACKDEL" and isinstance(reply, list) and 2 in reply:
                seen["xackdel-2"] += 1
            if argv[0] == b"XDELEX" and isinstance(reply, list) and 1 in reply:
                seen["xdelex-1"] += 1
            if argv[0] in (b"XADD", b"XTRIM") and b"DELREF" in argv:
                seen["delref-xack"] += 1
    assert all(count >= 5 for count in seen.values()), seen


def test_xackdel_effects_are_the_acks_and_deletes_that_happened():
    work = Workload(0)
    for i in range(1, 7):
        work.run("XADD", "s", f"{i}-0", "f", i)
    for group in (b"g1", b"g2"):
        work.run("XGROUP", "CREATE", "s", group, "0")
        work.run("XREADGROUP", "GROUP", group, CONSUMERS[0], "COUNT", "4", "STREAMS", "s", ">")
    work.batches.clear()
    assert work.run("XACKDEL", "s", "g1", "ACKED", "IDS", "3", "1-0", "9-0", "1-0") == [2, -1, -1]
    assert work.batches == [[[b"XACK", b"s", b"g1", b"1-0"]]]
    work.batches.clear()
    assert work.run("XACKDEL", "s", "g2", "DELREF", "IDS", "2", "2-0", "1-0") == [1, 1]
    assert work.batches == [[
        [b"MULTI"], [b"XACK", b"s", b"g2", b"2-0", b"1-0"], [b"XACK", b"s", b"g1", b"2-0"],
        [b"XDEL", b"s", b"2-0", b"1-0"], [b"EXEC"],
    ]]  # fmt: skip
    work.run("XACK", "s", "g1", "3-0")
    work.run("XACK", "s", "g2", "3-0")
    work.batches.clear()
    # 3-0 is free; 4-0 is pending in both groups, 5-0 and 6-0 were delivered to neither: a gap at 3-0 only
    assert work.run("XTRIM", "s", "MAXLEN", "=", "1", "ACKED") == 1
    assert work.batches == [[[b"XTRIM", b"s", b"MAXLEN", b"=", b"3", b"ACKED"]]]
    work.batches.clear()
    assert work.run("XDELEX", "s", "IDS", "2", "4-0", "4-0") == [1, -1]
    assert work.batches == [[[b"XDEL", b"s", b"4-0"]]]
    assert work.run("XDELEX", "s", "IDS", "1", "4-0") == [-1]
    assert work.batches == [[[b"XDEL", b"s", b"4-0"]]]  # nothing more propagated


def test_xreadgroup_propagates_a_new_consumer_even_when_nothing_is_delivered():
    """Redis 8.6.4 (#14963): a consumer XREADGROUP creates reaches the AOF and replicas even when
    nothing is delivered (nothing new, or NOACK, or a MAXCOUNT that skipped its stream)."""
    work = Workload(0)
    work.run("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    work.run("XGROUP", "CREATE", "s2", "g", "$", "MKSTREAM")
    start = len(work.batches)
    assert work.run("XREADGROUP", "GROUP", "g", "idle", "STREAMS", "s", ">") is NULL_ARRAY
    work.run("XADD", "s", "1-0", "f", "v")
    work.run("XADD", "s2", "1-0", "f", "v")
    work.run("XREADGROUP", "GROUP", "g", "quiet", "NOACK", "STREAMS", "s", ">")
    work.run("XREADGROUP", "GROUP", "g", "capped", "MAXCOUNT", "1", "STREAMS", "s2", "s", ">", ">")
    created = [argv[4] for batch in work.batches[start:] for argv in batch if argv[:2] == [b"XGROUP", b"CREATECONSUMER"]]
    assert created.count(b"idle") == 1 and created.count(b"quiet") == 1 and created.count(b"capped") == 2
    fresh = replay(work.batches, work.server.now, transactions=True)
    groups = {key: fresh.keyspace.dbs[0].data[key].groups[b"g"] for key in (b"s", b"s2")}
    assert set(groups[b"s"].consumers) == {b"idle", b"quiet", b"capped"} and set(groups[b"s2"].consumers) == {b"capped"}
    assert dump(fresh) == dump(work.server)


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", ["ends in an emptied node", "an emptied node before the next", "an empty node eligible"])
def test_trims_ending_in_an_emptied_node_replay_to_the_same_nodes(case, policy):
    """An exact MINID trim that empties the node it ends in keeps it: the effect states the MINID, as the
    length it reached would, replayed, drop that node (tests/test_r8_refs_diff.py has the cases against Redis)."""
    from tests.test_r8_refs_diff import NODE_EDGES

    work = Workload(0)
    for step in NODE_EDGES[case]:
        work.run(*[arg.replace("{P}", policy).encode() for arg in step])
    for ms in range(20, 25):
        work.run(b"XADD", b"e", b"%d-0" % ms, b"f", b"v")
    fresh = replay(work.batches, work.server.now, transactions=False)
    assert layout(fresh) == layout(work.server)
    assert dump(fresh) == dump(work.server)
