"""Differential tests: long random stream workloads sent to Redis (the oracle) and to Millrace.

Every reply is compared raw (redis-py's response callbacks removed), errors
by their text. The workload uses explicit and `ms-*` IDs (a plain `*` takes
the servers' clocks), exact and approximate trims with LIMIT, deletes,
XSETID, XREAD and XINFO STREAM; values are sometimes long so that nodes
fill up by bytes as well as by entries. The oracle is Redis 8.2.3; XREAD's
`+` ID (7.4+) is sent too.
"""

from __future__ import annotations

import random

import pytest
import redis

from tests.redis8_fields import without_newer_fields

KEYS = ["s1", "s2", "s3"]
FIELDS = ["a", "b", "c", "sensor-id", "temperature", "1", "-7"]


def call(client: redis.Redis, args: list) -> tuple[str, object]:
    try:
        if args[0] == "XINFO" and args[1] == "STREAM":
            return "ok", without_newer_fields(client.execute_command(*args))
        return "ok", client.execute_command(*args)
    except redis.ResponseError as exc:
        return "err", str(exc)


class Workload:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.ms = dict.fromkeys(KEYS, 1)
        self.added: dict[str, list[int]] = {key: [1] for key in KEYS}  # ms parts used so far

    def value(self) -> str:
        rnd = self.rnd
        kind = rnd.random()
        if kind < 0.3:
            return str(rnd.randint(-5000, 100000))
        if kind < 0.45:
            return f"{rnd.uniform(-100, 100):.2f}"
        if kind < 0.85:
            return rnd.choice(["v", "hello", "", "0", "007", "x" * 63, "y" * 64])
        return "z" * rnd.randint(50, 600)

    def entry_id(self, key: str) -> str:
        rnd = self.rnd
        roll = rnd.random()
        if roll < 0.03:
            return "0-0"
        if roll < 0.06:
            return f"{max(self.ms[key] - rnd.randint(1, 3), 0)}-{rnd.randint(0, 2)}"  # usually too small
        self.ms[key] += rnd.choice([0, 0, 1, 1, 2, 50, 1000])
        self.added[key].append(self.ms[key])
        if roll < 0.5:
            return f"{self.ms[key]}-*"
        return f"{self.ms[key]}-{rnd.randint(0, 3)}"

    def some_id(self, key: str) -> str:
        """Mostly near IDs that were used, sometimes anywhere."""
        rnd = self.rnd
        recent = self.added[key][-400:]
        ms = rnd.choice(recent) if rnd.random() < 0.8 else rnd.randint(0, self.ms[key] + 2)
        return str(ms) if rnd.random() < 0.3 else f"{ms}-{rnd.randint(0, 3)}"

    def trim_args(self, key: str) -> list:
        rnd = self.rnd
        if rnd.random() < 0.65:
            args = ["MAXLEN"]
            threshold = str(rnd.choice([0, 50, 99, 100, 101, 150, 199, 200, 250, 400, 1000, 1000]))
        else:
            args = ["MINID"]
            added = self.added[key]
            keep = rnd.choice([20, 100, 200, 300, 500, 1000, 1000])  # about how many recent IDs survive
            threshold = f"{added[max(len(added) - keep, 0)]}-{rnd.randint(0, 2)}"
        mode = rnd.choice(["", "=", "~", "~"])
        if mode:
            args.append(mode)
        args.append(threshold)
        if mode == "~" and rnd.random() < 0.4:
            args += ["LIMIT", str(rnd.choice([0, 1, 50, 100, 150, 1000]))]
        return args

    def commands(self) -> list[list]:
        """One command, or now and then a burst of XADDs that grows a stream by a few nodes."""
        rnd = self.rnd
        if rnd.random() < 0.01:
            key = rnd.choice(KEYS)
            burst = []
            for _ in range(rnd.randint(30, 250)):
                self.ms[key] += rnd.choice([0, 1])
                self.added[key].append(self.ms[key])
                burst.append(["XADD", key, f"{self.ms[key]}-*", "a", str(rnd.randint(0, 300)), "b", rnd.choice(["x", "yy", "z" * 40])])
            return burst
        return [self.command()]

    def command(self) -> list:
        rnd = self.rnd
        key = rnd.choice(KEYS)
        roll = rnd.random()
        if roll < 0.45:
            args = ["XADD", key]
            if rnd.random() < 0.05:
                args.append("NOMKSTREAM")
            if rnd.random() < 0.08:
                args += self.trim_args(key)
            args.append(self.entry_id(key))
            for _ in range(rnd.choice([1, 1, 2, 2, 3])):
                args += [rnd.choice(FIELDS[:3]) if rnd.random() < 0.7 else rnd.choice(FIELDS), self.value()]
            return args
        if roll < 0.55:
            bounds = ["-", "+", self.some_id(key), "(" + self.some_id(key), self.some_id(key)]
            start, end = rnd.choice(bounds), rnd.choice(bounds)
            args = [rnd.choice(["XRANGE", "XREVRANGE"]), key, start, end]
            if rnd.random() < 0.6:
                args += ["COUNT", str(rnd.choice([-1, 0, 1, 3, 10, 1000]))]
            return args
        if roll < 0.57:
            return ["XTRIM", key, *self.trim_args(key)]
        if roll < 0.72:
            return ["XDEL", key, *[self.some_id(key) for _ in range(rnd.randint(1, 3))]]
        if roll < 0.74:
            self.ms[key] += rnd.randint(0, 3)
            args = ["XSETID", key, f"{self.ms[key]}-{rnd.randint(0, 5)}"]
            if rnd.random() < 0.5:
                args += ["ENTRIESADDED", str(rnd.randint(0, 3000))]
            if rnd.random() < 0.5:
                args += ["MAXDELETEDID", self.some_id(key)]
            return args
        if roll < 0.79:
            return ["XLEN", key]
        if roll < 0.88:
            options = rnd.choice([[], [], ["FULL"], ["FULL", "COUNT", str(rnd.choice([0, 1, 5, -1]))]])
            return ["XINFO", "STREAM", key, *options]
        if roll < 0.95:
            keys = rnd.sample(KEYS, rnd.randint(1, 3))
            ids = [rnd.choice(["$", "+", "0", "0-0", self.some_id(k)]) for k in keys]
            args = ["XREAD"]
            if rnd.random() < 0.6:
                args += ["COUNT", str(rnd.choice([0, 1, 2, 10]))]
            return [*args, "STREAMS", *keys, *ids]
        if roll < 0.952:
            return ["DEL", key]
        if roll < 0.97:
            return ["SET", "str", "x"] if rnd.random() < 0.5 else ["XADD", "str", "1-1", "f", "v"]
        if roll < 0.985:
            return ["TYPE", key]
        return ["XADD", key, "MAXLEN", "~", str(rnd.choice([100, 200, 300])), f"{self.ms[key]}-*", "f", self.value()]


def raw_client(client: redis.Redis) -> redis.Redis:
    client.response_callbacks.clear()
    return client


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_workload_matches_redis(r2, oracle, seed):
    ours, theirs = raw_client(r2), raw_client(oracle)
    workload = Workload(seed)
    history: list = []
    for _ in range(3000):
        for args in workload.commands():
            history.append(args)
            expected, got = call(theirs, args), call(ours, args)
            if expected != got:
                tail = "\n".join(" ".join(map(str, a))[:200] for a in history[-15:])
                pytest.fail(f"{args}\nredis:    {expected}\nmillrace: {got}\nlast commands:\n{tail}")
    for key in KEYS:
        assert call(ours, ["XRANGE", key, "-", "+"]) == call(theirs, ["XRANGE", key, "-", "+"])


@pytest.mark.parametrize(("seed", "max_entries", "max_bytes"), [(5, 5, 4096), (6, 3, 300), (7, 100, 0), (8, 10, 150)])
def test_random_workload_with_other_node_sizes(r2, oracle, seed, max_entries, max_bytes):
    ours, theirs = raw_client(r2), raw_client(oracle)
    try:
        for client in (ours, theirs):
            client.execute_command("CONFIG", "SET", "stream-node-max-entries", max_entries)
            client.execute_command("CONFIG", "SET", "stream-node-max-bytes", max_bytes)
        workload = Workload(seed)
        history: list = []
        for _ in range(1500):
            for args in workload.commands():
                history.append(args)
                expected, got = call(theirs, args), call(ours, args)
                if expected != got:
                    tail = "\n".join(" ".join(map(str, a))[:200] for a in history[-15:])
                    pytest.fail(f"{args}\nredis:    {expected}\nmillrace: {got}\nlast commands:\n{tail}")
    finally:
        for client in (ours, theirs):
            client.execute_command("CONFIG", "SET", "stream-node-max-entries", 100)
            client.execute_command("CONFIG", "SET", "stream-node-max-bytes", 4096)


def test_xinfo_help_matches_redis(r2, oracle):
    ours = call(raw_client(r2), ["XINFO", "HELP"])[1]
    theirs = call(raw_client(oracle), ["XINFO", "HELP"])[1]
    assert ours == theirs


@pytest.mark.parametrize(
    "args",
    [
        ["XADD", "k", "MAXLEN"],
        ["XADD", "k", "MAXLEN", "~", "*", "f", "v"],
        ["XADD", "k", "MAXLEN", "=", "5", "LIMIT", "5", "*", "f", "v"],
        ["XADD", "k", "LIMIT", "0", "1-1", "f", "v"],
        ["XADD", "k", "NOMKSTREAM", "NOMKSTREAM", "1-1", "f", "v"],
        ["XADD", "k", "1-1", "f"],
        ["XADD", "k", "+", "f", "v"],
        ["XADD", "k", "-5-*", "f", "v"],
        ["XADD", "k", " 5-1", "f", "v"],
        ["XADD", "k", "007-01", "f", "v"],
        ["XADD", "k", "18446744073709551616-0", "f", "v"],
        ["XADD", "k", "2-18446744073709551616", "f", "v"],
        ["XADD", "k", "1-1", "f", "v", "g"],
        ["XADD", "k", "MAXLEN", "=", "1", "2-5", "f", "v"],  # the form a trimming XADD propagates
        ["XADD", "k", "MAXLEN", "=", "0", "2-0", "f", "v"],
        ["XADD", "k", "MAXLEN", "=", "01", "2-0", "f", "v"],
        ["XADD", "k", "MAXLEN", "=", "1", "1-0", "f", "v"],
        ["XADD", "k", "MAXLEN", "=", "1", "0-0", "f", "v"],
        ["XADD", "k", "MAXLEN", "=", "1", "2-0", "f", "v", "g"],
        ["XADD", "k", "MAXLEN", "=", "1", "2-*", "f", "v"],
        ["XTRIM", "k", "MAXLEN", "~", "1", "LIMIT"],
        ["XTRIM", "k", "MINID", "-"],
        ["XTRIM", "k"],
        ["XRANGE", "k", "(", "+"],
        ["XRANGE", "k", "((1", "+"],
        ["XREVRANGE", "k", "+", "-", "COUNT", "1", "COUNT", "2"],
        ["XREAD", "COUNT", "1"],
        ["XREAD", "STREAMS"],
        ["XREAD", "NOACK", "STREAMS", "k", "0"],
        ["XREAD", "STREAMS", "k", "k", "0", "0"],
        ["XREAD", "STREAMS", "k", "+"],
        ["XREAD", "STREAMS", "k", "nokey", "+", "+"],
        ["XREAD", "COUNT", "5", "STREAMS", "k", "+"],
        ["XDEL", "k"],
        ["XSETID", "k"],
        ["XSETID", "k", "1-1", "ENTRIESADDED"],
        ["XINFO", "STREAM"],
        ["XINFO", "STREAM", "k", "FULL", "COUNT", "x"],
        ["XLEN", "k", "x"],
    ],
)
def test_edge_cases_match_redis(r2, oracle, args):
    ours, theirs = raw_client(r2), raw_client(oracle)
    for client in (ours, theirs):
        client.execute_command("XADD", "k", "1-0", "f", "v")
    assert call(ours, args) == call(theirs, args)
    assert call(ours, ["XRANGE", "k", "-", "+"]) == call(theirs, ["XRANGE", "k", "-", "+"])
