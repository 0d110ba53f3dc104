"""Reference policies, XDELEX and XACKDEL differentially: random workloads against Millrace and Redis 8.2.3.

Redis 8.2 added KEEPREF / DELREF / ACKED to XADD and XTRIM, XDELEX and XACKDEL.
Every reply is compared raw (RESP2 and RESP3), errors by their text, and the
stream's state after each step that can change it: entries, XINFO STREAM's
counters and node counts, every group's PEL, cursor, entries-read and lag.

Left out: `~` trims with DELREF or ACKED. 8.2.3 predates the 8.6 fix (#14623):
it deletes nothing where a whole node cannot go, which the fixed rule (per-entry
deletion inside eligible nodes) replaces; tests/test_r8_refs.py checks the
fixed rule against Redis's own test cases and against a model. XGROUP DESTROY:
8.2.3 keeps the destroyed group's last-delivered-id in its min_cgroup_last_id
cache, so ACKED still protects entries only that group had not read (fixed in
8.6, #14552; tests/test_r8_refs.py checks the fixed rule). Times are masked as
in tests/test_groups_differential.py.
"""

from __future__ import annotations

import random

import pytest
import redis

from tests.test_groups import as_map, raw
from tests.test_groups_differential import mask, run

KEYS = ["s1", "s2"]
GROUPS = ["g1", "g2"]
CONSUMERS = ["alice", "bob"]
POLICIES = ["KEEPREF", "DELREF", "ACKED", "keepref", "Acked"]
STATE_FIELDS = (
    b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id", b"max-deleted-entry-id",
    b"entries-added", b"recorded-first-entry-id", b"first-entry", b"last-entry",
)  # fmt: skip


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def pair(request, server, oracle_server):
    """Millrace and Redis 8.2.3 clients in one protocol, flushed, with small nodes (gaps and node edges show)."""
    clients = []
    for proc in (server, oracle_server):
        client = raw(proc.client(protocol=request.param))
        client.flushall()
        client.config_set("stream-node-max-entries", "4")
        clients.append(client)
    yield clients
    for client in clients:
        client.config_set("stream-node-max-entries", "100")
        client.close()


class Workload:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_ms = dict.fromkeys(KEYS, 1)

    def some_id(self, key: str) -> str:
        return f"{self.rng.randint(0, self.next_ms[key])}-{self.rng.randint(0, 1)}"

    def policy(self) -> list[str]:
        return [self.rng.choice(POLICIES)] if self.rng.random() < 0.85 else []

    def trim(self, key: str, approx_ok: bool) -> list[str]:
        rng = self.rng
        if rng.random() < 0.5:
            strategy = ["MAXLEN", rng.choice(["=", ""]), str(rng.randint(0, 12))]
        else:
            strategy = ["MINID", rng.choice(["=", ""]), self.some_id(key)]
        if approx_ok and rng.random() < 0.4:
            strategy[1] = "~"
            if rng.random() < 0.5:
                strategy += ["LIMIT", str(rng.randint(0, 9))]
        return [arg for arg in strategy if arg]

    def commands(self, n: int):
        rng = self.rng
        for _ in range(n):
            key = rng.choice(KEYS)
            group = rng.choice(GROUPS)
            roll = rng.random()
            if roll < 0.30:
                ms = self.next_ms[key]
                self.next_ms[key] += rng.randint(1, 2)
                options = []
                if rng.random() < 0.35:
                    policy = self.policy()
                    options = self.trim(key, approx_ok=not policy or policy[0].upper() == "KEEPREF") + policy
                    if rng.random() < 0.5:
                        options = policy + self.trim(key, approx_ok=not policy or policy[0].upper() == "KEEPREF")
                yield ["XADD", key, *options, f"{ms}-{rng.randint(0, 1)}", "f", str(rng.randint(0, 9))]
            elif roll < 0.40:
                policy = self.policy()
                trim = self.trim(key, approx_ok=not policy or policy[0].upper() == "KEEPREF")
                yield ["XTRIM", key, *(policy + trim if rng.random() < 0.5 else trim + policy)]
            elif roll < 0.50:
                ids = [self.some_id(key) for _ in range(rng.randint(1, 4))]
                yield ["XDELEX", key, *self.policy(), "IDS", str(len(ids)), *ids]
            elif roll < 0.60:
                ids = [self.some_id(key) for _ in range(rng.randint(1, 4))]
                head = ["XACKDEL", key, rng.choice([*GROUPS, "nogroup"])]
                policy = self.policy()
                block = ["IDS", str(len(ids)), *ids]
                yield head + (policy + block if rng.random() < 0.7 else block + policy)
            elif roll < 0.63:
                yield ["XDEL", key, self.some_id(key)]
            elif roll < 0.68:
                yield ["XGROUP", "CREATE", key, group, rng.choice(["0", "$", self.some_id(key)]), "MKSTREAM"]
            elif roll < 0.71:
                yield ["XGROUP", "SETID", key, group, rng.choice(["0", "$", self.some_id(key)])]
            elif roll < 0.85:
                count = ["COUNT", str(rng.randint(1, 4))] if rng.random() < 0.8 else []
                noack = ["NOACK"] if rng.random() < 0.1 else []
                yield ["XREADGROUP", "GROUP", group, rng.choice(CONSUMERS), *count, *noack, "STREAMS", key, ">"]
            elif roll < 0.92:
                yield ["XACK", key, group, *[self.some_id(key) for _ in range(rng.randint(1, 3))]]
            else:
                yield ["XPENDING", key, group, "-", "+", "100"]


def state(client: redis.Redis, key: str):
    """What the workload may have changed: the counters, nodes, entries and groups of one stream."""
    try:
        info = as_map(client.execute_command("XINFO", "STREAM", key))
    except redis.ResponseError as exc:
        return str(exc)
    counters = {field: info[field] for field in STATE_FIELDS}
    full = as_map(client.execute_command("XINFO", "STREAM", key, "FULL", "COUNT", "0"))
    groups = []
    for group in full[b"groups"]:
        group = as_map(group)
        group.pop(b"nacked-count", None)  # Redis 8.8's field (XNACK), newer than the oracle
        group[b"pending"] = [[e[0], e[1], e[3]] for e in group[b"pending"]]  # without the delivery time
        group[b"consumers"] = [
            (c[b"name"], c[b"pel-count"], [e[0] for e in c[b"pending"]]) for c in map(as_map, group[b"consumers"])
        ]
        groups.append(group)
    return counters, groups, client.execute_command("XRANGE", key, "-", "+")


@pytest.mark.parametrize("seed", range(12))
def test_random_policy_workloads_match_redis(pair, seed):
    ours, oracle = pair
    workload = Workload(seed)
    for argv in workload.commands(250):
        expected = mask(argv, run(oracle, argv))
        got = mask(argv, run(ours, argv))
        assert got == expected, (argv, got, expected)
        if argv[0] in ("XADD", "XTRIM", "XDELEX", "XACKDEL"):
            key = argv[1]
            assert state(ours, key) == state(oracle, key), argv


# Exact trims whose walk ends in a node left with no live entry (its tombstones reach the threshold), and
# nodes with only tombstones before it: Redis keeps the node a trim ends in and drops eligible empty ones,
# under every policy; a later `~` trim sees the difference (nodes of 4)
NODE_EDGES = {
    "ends in an emptied node": [
        ["XADD", "e", "5-0", "f", "v"], ["XADD", "e", "6-0", "f", "v"], ["XGROUP", "CREATE", "e", "g", "$"],
        ["XDEL", "e", "6-0"], ["XTRIM", "e", "MINID", "5-1", "{P}"],
    ],
    "an emptied node before the next": [
        *[["XADD", "e", f"{i}-0", "f", "v"] for i in range(1, 9)], ["XGROUP", "CREATE", "e", "g", "$"],
        ["XDEL", "e", "4-0"], ["XTRIM", "e", "MINID", "4-0", "{P}"],
    ],
    "an empty node eligible": [
        *[["XADD", "e", f"{i}-0", "f", "v"] for i in range(5, 10)], ["XGROUP", "CREATE", "e", "g", "$"],
        ["XDEL", "e", "6-0", "7-0", "8-0"], ["XTRIM", "e", "MINID", "5-1"], ["XADD", "e", "10-0", "f", "v"],
        ["XTRIM", "e", "MINID", "9-5", "{P}"],
    ],
    "an empty node by MAXLEN": [
        *[["XADD", "e", f"{i}-0", "f", "v"] for i in range(5, 10)], ["XGROUP", "CREATE", "e", "g", "$"],
        ["XDEL", "e", "6-0", "7-0", "8-0"], ["XTRIM", "e", "MINID", "5-1"], ["XADD", "e", "10-0", "f", "v"],
        ["XTRIM", "e", "MAXLEN", "1", "{P}"],
    ],
}  # fmt: skip


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", list(NODE_EDGES))
def test_trims_leave_the_nodes_redis_leaves(pair, case, policy):
    ours, oracle = pair
    steps = [[arg.replace("{P}", policy) for arg in step] for step in NODE_EDGES[case]]
    steps += [["XADD", "e", f"{ms}-0", "f", "v"] for ms in range(20, 25)] + [["XTRIM", "e", "MAXLEN", "~", "2"]]
    for argv in steps:
        assert run(ours, argv) == run(oracle, argv), argv
        assert state(ours, "e") == state(oracle, "e"), argv
    for client in (ours, oracle):
        client.delete("e")


ERROR_PROBES = [
    ["XDELEX"], ["XDELEX", "s"], ["XDELEX", "s", "DELREF"], ["XDELEX", "s", "IDS", "1"],
    ["XDELEX", "s", "IDS", "0", "1-0"], ["XDELEX", "s", "IDS", "abc", "1-0"], ["XDELEX", "s", "IDS", "-5", "1-0"],
    ["XDELEX", "s", "IDS", "+5", "1-0"], ["XDELEX", "s", "IDS", "05", "1-0"],
    ["XDELEX", "s", "IDS", "9223372036854775807", "1-0"], ["XDELEX", "s", "IDS", "9223372036854775808", "1-0"],
    ["XDELEX", "s", "IDS", "3", "1-0", "2-0"], ["XDELEX", "s", "IDS", "1", "1-0", "2-0"],
    ["XDELEX", "s", "KEEPREF", "DELREF", "IDS", "1", "1-0"], ["XDELEX", "s", "ACKED", "ACKED", "IDS", "1", "1-0"],
    ["XDELEX", "s", "IDS", "1", "1-0", "ACKED", "DELREF"], ["XDELEX", "s", "FOO", "IDS", "1", "1-0"],
    ["XDELEX", "s", "IDS", "1", "bad"], ["XDELEX", "s", "IDS", "1", "-"], ["XDELEX", "s", "IDS", "1", "2-*"],
    ["XDELEX", "s", "IDS", "1", "1-0", "IDS"], ["XDELEX", "s", "IDS", "1", "1-0", "IDS", "x"],
    ["XDELEX", "s", "IDS", "2", "1-0", "bad"], ["XDELEX", "s", "ids", "1", "2-0", "acked"],
    ["XDELEX", "s", "IDS", "1", "9"], ["XDELEX", "s", "IDS", "2", "1-0", "1-0"],
    ["XDELEX", "s", "IDS", "1", "3-0", "IDS", "1", "4-0"], ["XDELEX", "s", "IDS", "1", "3-0", "IDS", "2", "4-0"],
    ["XDELEX", "str", "IDS", "1", "bad"], ["XDELEX", "str", "FOO", "IDS", "1", "1-0"],
    ["XDELEX", "nokey", "IDS", "1", "bad"], ["XDELEX", "nokey", "FOO", "IDS", "1", "1-0"],
    ["XDELEX", "nokey", "IDS", "0", "1-0"], ["XDELEX", "nokey", "IDS", "2", "1-0"],
    ["XACKDEL"], ["XACKDEL", "s"], ["XACKDEL", "s", "g"], ["XACKDEL", "s", "g", "IDS"], ["XACKDEL", "s", "g", "IDS", "1"],
    ["XACKDEL", "s", "g", "IDS", "1", "bad"], ["XACKDEL", "s", "g", "IDS", "0", "1-0"],
    ["XACKDEL", "s", "g", "KEEPREF", "DELREF", "IDS", "1", "1-0"], ["XACKDEL", "s", "g", "IDS", "2", "1-0"],
    ["XACKDEL", "s", "g", "IDS", "1", "1-0", "2-0"], ["XACKDEL", "s", "g", "ids", "1", "5-0", "keepref"],
    ["XACKDEL", "s", "nogroup", "IDS", "1", "bad"], ["XACKDEL", "s", "nogroup", "FOO", "IDS", "1", "1-0"],
    ["XACKDEL", "s", "nogroup", "IDS", "3", "1-0"], ["XACKDEL", "nokey", "g", "IDS", "2", "1-0", "bad"],
    ["XACKDEL", "str", "g", "IDS", "1", "bad"], ["XACKDEL", "s", "g", "IDS", "2", "6-0", "6-0"],
    ["XADD", "s", "KEEPREF", "DELREF", "9-0", "f", "v"], ["XADD", "s", "DELREF", "DELREF", "9-0", "f", "v"],
    ["XADD", "s", "keepref", "*"], ["XADD", "s", "NOMKSTREAM", "acked", "MAXLEN", "~", "1", "LIMIT", "5", "7-0", "f", "v"],
    ["XTRIM", "s", "MAXLEN", "1", "KEEPREF", "ACKED"], ["XTRIM", "s", "ACKED"], ["XTRIM", "s", "ACKED", "MAXLEN"],
    ["XTRIM", "s", "MAXLEN", "0", "LIMIT", "5", "ACKED"], ["XTRIM", "s", "MAXLEN", "=", "0", "DELREF", "DELREF"],
    ["XTRIM", "s", "ACKED", "MAXLEN", "=", "100"], ["XTRIM", "s", "MINID", "1-0", "Delref"],
]  # fmt: skip


def test_errors_and_edge_replies_match_redis(pair):
    """Argument errors in Redis's order (WRONGTYPE, then options, then a missing key/group, then IDs) and words."""
    setup = [["SET", "str", "v"], *[["XADD", "s", f"{i}-0", "f", "v"] for i in range(1, 7)],
             ["XGROUP", "CREATE", "s", "g", "0"], ["XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">"]]  # fmt: skip
    for client in pair:
        for argv in setup:
            client.execute_command(*argv)
    ours, oracle = pair
    for argv in ERROR_PROBES:
        expected = run(oracle, argv)
        got = run(ours, argv)
        assert (type(got), str(got)) == (type(expected), str(expected)), argv
        assert state(ours, "s") == state(oracle, "s"), argv


def test_command_info_matches_redis(pair):
    """Arity, flags, ACL categories and key specs of the new commands, as redis-cli and cluster clients read them."""
    ours, oracle = pair
    for name in ("xdelex", "xackdel"):
        assert ours.execute_command("COMMAND", "INFO", name) == oracle.execute_command("COMMAND", "INFO", name)


EVENT_SCRIPT = [
    ["XADD", "s", "1-0", "f", "v"], ["XADD", "s", "2-0", "f", "v"], ["XADD", "s", "3-0", "f", "v"],
    ["XADD", "s", "4-0", "f", "v"], ["XGROUP", "CREATE", "s", "g", "0"],
    ["XREADGROUP", "GROUP", "g", "c", "COUNT", "3", "STREAMS", "s", ">"],
    ["XDELEX", "s", "IDS", "1", "1-0"], ["XDELEX", "s", "IDS", "1", "99-0"], ["XDELEX", "s", "ACKED", "IDS", "1", "2-0"],
    ["XACKDEL", "s", "g", "IDS", "1", "2-0"], ["XACKDEL", "s", "g", "ACKED", "IDS", "1", "3-0"],
    ["XACKDEL", "s", "g", "IDS", "1", "99-0"], ["XACKDEL", "s", "nogroup", "IDS", "1", "4-0"],
    ["XTRIM", "s", "MAXLEN", "=", "0", "ACKED"], ["XADD", "s", "ACKED", "MAXLEN", "=", "0", "5-0", "f", "v"],
    ["XDELEX", "s", "DELREF", "IDS", "1", "4-0"], ["XTRIM", "s", "MAXLEN", "=", "0", "DELREF"],
    ["XDELEX", "nokey", "IDS", "1", "1-0"],
    ["XADD", "t", "1-0", "f", "v"], ["XADD", "t", "2-0", "f", "v"], ["XGROUP", "CREATE", "t", "g", "$"],
    ["XADD", "t", "ACKED", "MAXLEN", "=", "1", "3-0", "f", "v"],  # an ACKED trim that deletes: `xadd` then `xtrim`
]  # fmt: skip


def events(client: redis.Redis, commands: list[list[str]]) -> list[tuple]:
    """Each command with the keyspace/keyevent messages it published (a subscriber on another connection)."""
    client.config_set("notify-keyspace-events", "KEA")
    listener = client.pubsub()
    listener.psubscribe("__key*@*__:*")
    assert listener.get_message(timeout=2)["type"] == "psubscribe"
    out = []
    try:
        for command in commands:
            run(client, command)
            client.publish("__keyevent@99__:marker", "end")  # published after the command's messages
            messages = []
            while (message := listener.get_message(timeout=5)) is not None:
                if message["type"] != "pmessage":
                    continue
                if message["channel"] == b"__keyevent@99__:marker":
                    break
                messages.append((message["channel"], message["data"]))
            out.append((command, messages))
    finally:
        client.config_set("notify-keyspace-events", "")
        listener.close()
    return out


def test_keyspace_events_match_redis(pair):
    """XDELEX and XACKDEL publish `xdel` when entries went, nothing otherwise; policy trims `xtrim` as before."""
    ours, oracle = pair
    got, expected = events(ours, EVENT_SCRIPT), events(oracle, EVENT_SCRIPT)
    assert got == expected
    assert any(b"xdel" in channel for _, messages in got for channel, _ in messages if b"keyevent" in channel)
