"""XCOUNT key start end (server/commands/xcount.py) against brute force, Redis's XRANGE and a replica.

The invariant: XCOUNT key start end == len(XRANGE key start end), for any
bounds XRANGE takes, after any sequence of writes. Random seeded workloads
(XADD with explicit and `ms-*` IDs, XDEL, XDELEX, XACKDEL, XTRIM and XADD
trims by MAXLEN and MINID, exact and `~`, with LIMIT and KEEPREF/DELREF/ACKED,
XSETID forwards and back to the last entry, DEL) run through the real server
with small nodes, so ranges start and end inside, between and across nodes;
queries come at random moments, so the rank structure's lazy folding-in of
appends meets every kind of change. Each range is checked three ways: XCOUNT,
len(XRANGE) on the same server (the brute force), and a count over the full
ID list with the bounds parsed by the test's own model of XRANGE's syntax.
With `oracle`, the same workload (minus what Redis 8.2.3 does differently,
see tests/test_r8_refs_diff.py) also runs on Redis 8.2.3, whose len(XRANGE)
must equal Millrace's XCOUNT. Bad bounds must give XRANGE's error texts.
"""

from __future__ import annotations

import random
from bisect import bisect_left, bisect_right

import pytest
import redis

from storage import stream as stream_module
from storage.stream import Stream
from tests.test_groups import as_map, raw
from tests.test_replication import caught_up, replica_of
from tests.test_replication import start as start_named

U64 = 2**64 - 1
MAX_ID = (U64 << 64) | U64
POLICIES = ("", "KEEPREF", "DELREF", "ACKED")


def to_int(text: str) -> int:
    ms, _, seq = text.partition("-")
    return (int(ms) << 64) | int(seq)


def fmt(entry_id: int) -> str:
    return f"{entry_id >> 64}-{entry_id & U64}"


def model_bound(arg: str, end: bool) -> int | None:
    """The test's own reading of an XRANGE bound (None: XRANGE refuses it)."""
    if arg in ("-", "+"):
        return 0 if arg == "-" else MAX_ID
    exclusive = arg.startswith("(")
    text = arg[1:] if exclusive else arg
    ms, dash, seq = text.partition("-")
    if not ms.isdigit() or (dash and not seq.isdigit()) or int(ms) > U64 or (dash and int(seq) > U64):
        return None
    value = (int(ms) << 64) | (int(seq) if dash else (U64 if end else 0))
    if exclusive:
        if (value == MAX_ID and not end) or (value == 0 and end):
            return None
        value += -1 if end else 1
    return value


def model_count(live: list[int], start: int, end: int) -> int:
    return max(bisect_right(live, end) - bisect_left(live, start), 0)


class Workload:
    """Random writes to stream `s` with two groups; `oracle` leaves out what 8.2.3 does differently."""

    def __init__(self, seed: int, oracle: bool) -> None:
        self.rng = random.Random(seed)
        self.oracle = oracle
        self.last = 0  # last-generated-id as the test tracks it
        self.ever: list[int] = []  # every ID ever added (deleted ones make good bounds)
        self.pending: list[str] = []

    def new_id(self) -> str:
        rng = self.rng
        ms, seq = self.last >> 64, self.last & U64
        if rng.random() < 0.5:
            return f"{ms}-{seq + rng.randint(1, 3)}"
        step = rng.randint(1, 4)
        return f"{ms + step}-*" if rng.random() < 0.3 else f"{ms + step}-{rng.randint(0, 2)}"

    def some_ids(self, live: list[int], n: int) -> list[str]:
        pool = live + self.ever[-50:] if live else self.ever[-50:] or [1]
        return [fmt(self.rng.choice(pool)) for _ in range(n)]

    def trim_args(self, live: list[int], xadd: bool) -> list[str]:
        rng = self.rng
        approx = rng.random() < 0.5
        policy = rng.choice(POLICIES)
        if self.oracle and approx and policy in ("DELREF", "ACKED"):
            policy = ""
        if rng.random() < 0.5:
            trim = ["MAXLEN", "~" if approx else rng.choice(("=", "")), str(rng.randint(0, len(live) + 2))]
        else:
            trim = ["MINID", "~" if approx else rng.choice(("=", "")), rng.choice(self.some_ids(live, 1) + ["0", "1"])]
        trim = [t for t in trim if t]
        if approx and rng.random() < 0.4:
            trim += ["LIMIT", str(rng.randint(0, 8))]
        if not policy:
            return trim
        return [policy, *trim] if xadd else [*trim, policy]

    def step(self, clients: list[redis.Redis], live: list[int]) -> None:
        """One random write, sent alike to every client (Millrace first: its reply drives the test's state)."""
        rng = self.rng
        op = rng.random()
        if op < 0.45 or not live:
            command = ["XADD", "s"]
            if live and rng.random() < 0.3:
                command += self.trim_args(live, xadd=True)
            command += [self.new_id(), "f", str(rng.randint(0, 9))]
            replies = [c.execute_command(*command) for c in clients]
            new = to_int(replies[0].decode())
            self.last = new
            self.ever.append(new)
            if not live:  # (re)created: the groups the policies look at
                for c in clients:
                    for group in ("g1", "g2"):
                        try:
                            c.execute_command("XGROUP", "CREATE", "s", group, "0")
                        except redis.ResponseError:
                            pass  # BUSYGROUP
        elif op < 0.55:
            group = rng.choice(("g1", "g2"))
            command = ["XREADGROUP", "GROUP", group, "c", "COUNT", str(rng.randint(1, 6)), "STREAMS", "s", ">"]
            replies = [c.execute_command(*command) for c in clients]
            if replies[0]:
                self.pending += [(group, entry[0].decode()) for entry in replies[0][0][1]]
        elif op < 0.6 and self.pending:
            picks = rng.sample(self.pending, min(len(self.pending), rng.randint(1, 4)))
            for group, entry in picks:
                self.pending.remove((group, entry))
                for c in clients:
                    c.execute_command("XACK", "s", group, entry)
        elif op < 0.7:
            command = ["XDEL", "s", *self.some_ids(live, rng.randint(1, 3))]
            for c in clients:
                c.execute_command(*command)
        elif op < 0.75:
            ids = self.some_ids(live, rng.randint(1, 3))
            policy = [rng.choice(POLICIES[1:])] if rng.random() < 0.7 else []
            command = ["XDELEX", "s", *policy, "IDS", str(len(ids)), *ids]
            for c in clients:
                c.execute_command(*command)
        elif op < 0.8:
            ids = self.some_ids(live, rng.randint(1, 3))
            policy = [rng.choice(POLICIES[1:])] if rng.random() < 0.7 else []
            command = ["XACKDEL", "s", rng.choice(("g1", "g2")), *policy, "IDS", str(len(ids)), *ids]
            for c in clients:
                c.execute_command(*command)
        elif op < 0.93:
            command = ["XTRIM", "s", *self.trim_args(live, xadd=False)]
            for c in clients:
                c.execute_command(*command)
        elif op < 0.98:
            # forwards, or back down to the last live entry (or the greatest deleted ID, XSETID's floor)
            if rng.random() < 0.5:
                target = self.last + rng.randint(1, 3) + (rng.randint(0, 3) << 64)
            else:
                deleted = as_map(clients[0].execute_command("XINFO", "STREAM", "s"))[b"max-deleted-entry-id"]
                target = max(live[-1], to_int(deleted.decode()))
            command = ["XSETID", "s", fmt(target)]
            for c in clients:
                c.execute_command(*command)
            self.last = target
        else:
            for c in clients:
                c.delete("s")
            self.pending.clear()

    def bound(self, live: list[int], end: bool) -> str:
        """A bound on, beside, between or beyond entries, live or deleted, in any of XRANGE's forms."""
        rng = self.rng
        pick = rng.random()
        if pick < 0.1:
            return rng.choice(("-", "+"))
        if pick < 0.15:
            return rng.choice(("0", "0-0", "(0-0", "18446744073709551615", "(18446744073709551615-0", fmt(MAX_ID)))
        pool = live if live and pick < 0.6 else self.ever or [1]
        base = rng.choice(pool) + rng.choice((-1, 0, 0, 1))
        base = min(max(base, 0), MAX_ID)
        text = fmt(base) if rng.random() < 0.7 else str(base >> 64)
        return ("(" + text) if rng.random() < 0.3 else text


def full_ids(client: redis.Redis) -> list[int]:
    return [to_int(entry[0].decode()) for entry in client.execute_command("XRANGE", "s", "-", "+")]


def check(work: Workload, clients: list[redis.Redis], ranges: int) -> list[int]:
    """XCOUNT against len(XRANGE) on every client and against the model over the full ID list."""
    millrace = clients[0]
    live = full_ids(millrace)
    queries = [(work.bound(live, False), work.bound(live, True)) for _ in range(ranges)]
    pipe = millrace.pipeline(transaction=False)
    for start, end in queries:
        pipe.execute_command("XCOUNT", "s", start, end)
        pipe.execute_command("XRANGE", "s", start, end)
    got = pipe.execute(raise_on_error=False)
    oracle = []
    if len(clients) > 1:
        pipe = clients[1].pipeline(transaction=False)
        for start, end in queries:
            pipe.execute_command("XRANGE", "s", start, end)
        oracle = pipe.execute(raise_on_error=False)
    for i, (start, end) in enumerate(queries):
        count, entries = got[2 * i], got[2 * i + 1]
        lo, hi = model_bound(start, end=False), model_bound(end, end=True)
        where = f"XCOUNT s {start} {end} over {len(live)} entries"
        if lo is None or hi is None:
            assert isinstance(count, redis.ResponseError) and str(count) == str(entries), where
            if oracle:
                assert str(oracle[i]) == str(count), where
            continue
        assert count == len(entries) == model_count(live, lo, hi), where
        if oracle:
            assert len(oracle[i]) == count, where
    return live


@pytest.fixture
def millrace(server):
    client = raw(server.client(protocol=2))
    client.flushall()
    yield client
    client.config_set("stream-node-max-entries", "100")
    client.close()


@pytest.mark.parametrize("seed", range(6))
def test_xcount_is_len_xrange_over_random_workloads(millrace, seed):
    """Millrace alone, with every write form (the `~` DELREF/ACKED trims included)."""
    work = Workload(seed, oracle=False)
    millrace.config_set("stream-node-max-entries", str(work.rng.choice((1, 3, 4, 10, 100))))
    live: list[int] = []
    checked = 0
    for _ in range(400):
        work.step([millrace], live)
        if work.rng.random() < 0.4:  # let appends pile up between queries too
            live = check(work, [millrace], 6)
            checked += 1
        else:
            live = full_ids(millrace)
    assert checked > 100


@pytest.mark.parametrize("seed", range(3))
def test_xcount_equals_redis_xrange_count(millrace, oracle, seed):
    """The same workload on Redis 8.2.3: its len(XRANGE) is Millrace's XCOUNT, its errors XCOUNT's."""
    oracle = raw(oracle)
    work = Workload(100 + seed, oracle=True)
    size = str(work.rng.choice((1, 4, 10)))
    for c in (millrace, oracle):
        c.config_set("stream-node-max-entries", size)
    live: list[int] = []
    try:
        for _ in range(250):
            work.step([millrace, oracle], live)
            live = check(work, [millrace, oracle], 4)
            assert live == full_ids(oracle)
    finally:
        oracle.config_set("stream-node-max-entries", "100")


@pytest.mark.parametrize("seed", range(6))
def test_node_rank_is_bisect_over_the_node_ids(seed):
    """Stream.node_rank (the count inside a node that XCOUNT's rank structure adds to its prefix sums)
    bisects a sealed node's ms parts and seqs without building its IDs, from a cache keyed by the node's
    packed bytes: it must equal bisect_right over the node's IDs, also after XDEL and trims repacked it."""
    rng = random.Random(seed)
    node_size = rng.choice((1, 3, 10, 100))
    stream, now, rank = Stream(), 1, 0
    for step in range(800):
        op = rng.random()
        if op < 0.6:
            now += rng.choice((0, 0, 1, 7))  # several seqs per ms: the seq bisect matters
            stream.add(now, [b"f", b"v"], node_size, 4096)
        elif op < 0.85 and len(stream):
            ids = [i for i, _ in stream.range(0, MAX_ID)]
            stream.delete(rng.sample(ids, min(len(ids), rng.randint(1, 4))))
        else:
            stream.trim(maxlen=rng.randint(0, len(stream) + 2), approx=rng.random() < 0.5)
        if rng.random() < 0.5:
            stream_module._DECODED.clear()  # the path that unpacks only ms parts and seqs
        for node in stream.nodes:
            ids = stream_module._decoded(node)[0] if rng.random() < 0.2 else list(stream.node_ids(node))
            probes = [node.master_id - 1, node.master_id, node.last_id, node.last_id - 1, rng.randint(0, MAX_ID)]
            for entry_id in ids[:3] + ids[-3:] + rng.sample(ids, min(3, len(ids))):
                ms = entry_id >> 64
                probes += [entry_id - 1, entry_id, entry_id + 1, (ms << 64) - 1, (ms << 64) | U64]
            if rng.random() < 0.5:
                stream_module._DECODED.pop(node, None)
            for entry_id in probes:
                if 0 <= entry_id <= MAX_ID:
                    assert stream.node_rank(node, entry_id) == bisect_right(ids, entry_id), (step, fmt(entry_id))
                    rank += 1
    assert rank > 5000


# -- errors and edges ------------------------------------------------------------------------

BAD_RANGES = [
    ("x", "+"), ("-", "x"), ("(-", "+"), ("-", "(+"), ("(+", "+"), ("-", "(-"), ("1-x", "+"), ("-", "1-"),
    ("-1", "+"), ("18446744073709551616", "+"), ("1-18446744073709551616", "+"), ("(", "+"), ("-", "("),
    ("(18446744073709551615-18446744073709551615", "+"), ("-", "(0-0"), ("(x", "(y"), ("x" * 200, "+"),
    ("1.5", "+"), ("1-1-1", "+"), ("0x10", "+"),
]  # fmt: skip
ODD_RANGES = [(" 1", "+"), ("+1", "+"), ("01-01", "+"), ("-", "+5"), ("(+1", "+"), ("-", "(+3-0")]  # strtoull takes them


@pytest.mark.parametrize(("start", "end"), BAD_RANGES)
def test_bad_bounds_give_xrange_errors(millrace, oracle, start, end):
    """The error texts of XRANGE (Redis 8.2.3's and Millrace's) for the same bounds, on a stream, a missing key
    and another type (a bad ID is refused before the key is looked up, as XRANGE does)."""
    for c in (millrace, oracle):
        c.xadd("s", {"f": "v"}, id="5-5")
        c.set("str", "x")
    for key in ("s", "missing", "str"):
        with pytest.raises(redis.ResponseError) as expected:
            oracle.execute_command("XRANGE", key, start, end)
        with pytest.raises(redis.ResponseError) as got:
            millrace.execute_command("XCOUNT", key, start, end)
        assert str(got.value) == str(expected.value)


def test_odd_bounds_that_xrange_accepts(millrace, oracle):
    for c in (millrace, oracle):
        for n in range(1, 7):
            c.xadd("s", {"f": n}, id=f"{n}-{n}")
    for start, end in ODD_RANGES:
        assert millrace.execute_command("XCOUNT", "s", start, end) == len(oracle.xrange("s", start, end)), (start, end)


def test_missing_key_wrong_type_arity_and_edges(millrace):
    c = millrace
    assert c.execute_command("XCOUNT", "missing", "-", "+") == 0
    c.set("str", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE Operation against a key holding the wrong kind of value$"):
        c.execute_command("XCOUNT", "str", "-", "+")
    for argv in (["XCOUNT", "s"], ["XCOUNT", "s", "-"], ["XCOUNT", "s", "-", "+", "COUNT", "1"], ["XCOUNT", "s", "-", "+", "x"]):
        with pytest.raises(redis.ResponseError, match="^wrong number of arguments for 'xcount' command$"):
            c.execute_command(*argv)
    for n in range(1, 6):
        c.xadd("s", {"f": n}, id=f"{n}-{n}")
    assert c.execute_command("XCOUNT", "s", "+", "-") == 0  # start after end
    assert c.execute_command("XCOUNT", "s", "3", "3") == 1  # incomplete IDs: 3-0 .. 3-max
    assert c.execute_command("XCOUNT", "s", "(2-2", "(5-5") == 2
    assert c.execute_command("XCOUNT", "s", "(18446744073709551615", "+") == 0  # (ms: after ms-0
    c.xdel("s", "3-3", "4-4")
    assert c.execute_command("XCOUNT", "s", "-", "+") == 3 == c.xlen("s")
    c.execute_command("XSETID", "s", "9-0")
    assert c.execute_command("XCOUNT", "s", "(2-2", "+") == 1
    c.xtrim("s", maxlen=0)
    assert c.execute_command("XCOUNT", "s", "-", "+") == 0


def test_command_table_acl_and_multi(server, millrace):
    c = millrace
    c.response_callbacks.pop("COMMAND", None)  # the replies as sent
    info = c.execute_command("COMMAND", "INFO", "XCOUNT")[0]
    assert info[:6] == [b"xcount", 4, [b"readonly", b"fast"], 1, 1, 1]
    assert info[6] == [b"@read", b"@stream", b"@fast"]
    for category in ("stream", "read", "fast"):
        assert b"xcount" in c.execute_command("ACL", "CAT", category)
    for category in ("write", "slow"):
        assert b"xcount" not in c.execute_command("ACL", "CAT", category)
    docs = c.execute_command("COMMAND", "DOCS", "XCOUNT")
    docs = dict(zip(docs[1][0::2], docs[1][1::2], strict=True))
    assert docs[b"group"] == b"stream"
    assert [dict(zip(a[0::2], a[1::2], strict=True))[b"name"] for a in docs[b"arguments"]] == [b"key", b"start", b"end"]
    assert c.execute_command("COMMAND", "GETKEYS", "XCOUNT", "s", "-", "+") == [b"s"]
    c.xadd("s", {"f": 1}, id="1-1")
    pipe = c.pipeline(transaction=True)
    pipe.xadd("s", {"f": 2}, id="2-2")
    pipe.execute_command("XCOUNT", "s", "(1-1", "+")
    pipe.xdel("s", "2-2")
    pipe.execute_command("XCOUNT", "s", "(1-1", "+")
    assert pipe.execute() == [b"2-2", 1, 1, 0]


def test_replica_and_reload_count_the_same(tmp_path):
    """A read-only replica answers XCOUNT like its primary, and so does the primary after DEBUG RELOAD
    (the rank structure is derived: rebuilt from the loaded nodes)."""
    primary = start_named(tmp_path, "primary", "--enable-debug-command", "yes", "--stream-node-max-entries", "4")
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        p, r = raw(primary.client(protocol=2)), raw(replica.client(protocol=2))
        work = Workload(7, oracle=False)
        live: list[int] = []
        for _ in range(300):
            work.step([p], live)
            live = full_ids(p)
        p.execute_command("XADD", "s", fmt(live[-1] + 1 if live else 1), "f", "v")  # a stream that exists
        caught_up(p, r)
        queries = [(work.bound(live, False), work.bound(live, True)) for _ in range(200)]
        queries = [(a, b) for a, b in queries if model_bound(a, False) is not None and model_bound(b, True) is not None]

        def counts(client) -> list[int]:
            pipe = client.pipeline(transaction=False)
            for start, end in queries:
                pipe.execute_command("XCOUNT", "s", start, end)
            return pipe.execute()

        expected = counts(p)
        assert any(expected) and len(set(expected)) > 3
        assert list(r.config_get("replica-read-only").values()) == ["yes"]
        assert counts(r) == expected
        p.execute_command("DEBUG", "RELOAD")
        assert counts(p) == expected
        assert expected == [len(p.execute_command("XRANGE", "s", a, b)) for a, b in queries]
    finally:
        replica.stop()
        primary.stop()
