"""Streams and consumer groups together, differentially, over RESP2 and RESP3 on raw connections.

The other differential modules drive redis-py over RESP2. This one sends one
mixed workload (writes, trims, XSETID and its errors, groups, claims, XINFO,
wrong types, missing keys) to Redis (the oracle) and to Millrace on raw
sockets, after `HELLO 2` or `HELLO 3`, and compares the parsed replies: maps,
arrays, doubles, nulls and error texts as they came off the wire.

What differs legitimately is masked: times (idle, delivery, seen and active
times, `inactive`, but -1 for never is compared), and a group's lag and
entries-read once its stream has had `XSETID ... ENTRIESADDED`: Redis 8.2.3
keeps a group's entries-read as it was, so it can report entries-read above
entries-added and a negative lag; Millrace clamps entries-read to
entries-added (redis#15488, after 8.2.3; tests/test_groups.py pins it).
Everything else is compared: lag and entries-read after XDEL/XTRIM, consumers
that own nothing, CREATECONSUMER's reply, XREAD's `+`, ENTRIESREAD of any
value in XGROUP CREATE and SETID, XSETID below the max-deleted-entry-id. Not
sent: Redis 8.2's XDELEX and XACKDEL and the KEEPREF/DELREF/ACKED options of
XADD and XTRIM, which Millrace does not implement yet (the Redis 8 issue);
this oracle will check them then.
"""

from __future__ import annotations

import random

import hiredis
import pytest

from tests.claims import FAR, xautoclaim, xclaim
from tests.rawclient import RawConn, encode_command
from tests.redis8_fields import without_newer_fields

KEYS = ["s1", "s2", "s3"]
GROUPS = ["g1", "g2"]
CONSUMERS = ["alice", "bob"]
TIME_FIELDS = {b"idle", b"inactive", b"seen-time", b"active-time"}


class Workload:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.ms = dict.fromkeys(KEYS, 1)
        self.entries_added_set: set[str] = set()  # keys given XSETID ... ENTRIESADDED since they were last created
        self.used: dict[str, list[str]] = {key: ["1-0"] for key in KEYS}  # IDs given to XADD (`ms-*` as ms-0)

    def some_id(self, key: str) -> str:
        """Mostly an ID that was added (so XACK, XCLAIM, XDEL find something), sometimes any."""
        rnd = self.rnd
        if rnd.random() < 0.6:
            return rnd.choice(self.used[key][-30:])
        ms = rnd.randint(0, self.ms[key] + 1)
        return str(ms) if rnd.random() < 0.2 else f"{ms}-{rnd.randint(0, 2)}"

    def new_id(self, key: str) -> str:
        rnd = self.rnd
        roll = rnd.random()
        if roll < 0.05:
            return self.some_id(key)  # usually not greater than the top entry
        self.ms[key] += rnd.choice([0, 1, 1, 2, 7])
        new = f"{self.ms[key]}-*" if roll < 0.4 else f"{self.ms[key]}-{rnd.randint(0, 3)}"
        self.used[key].append(new.replace("*", "0"))
        return new

    def trim(self, key: str) -> list[str]:
        rnd = self.rnd
        if rnd.random() < 0.6:
            args = ["MAXLEN"]
            threshold = str(rnd.choice([0, 1, 3, 5, 10, 30]))
        else:
            args = ["MINID"]
            threshold = self.some_id(key) if rnd.random() < 0.8 else rnd.choice(["0", "-"])
        mode = rnd.choice(["", "=", "~"])
        if mode:
            args.append(mode)
        args.append(threshold)
        if rnd.random() < 0.25:
            args += ["LIMIT", str(rnd.choice([0, 1, 2, 100]))]
        return args

    def command(self) -> list[str]:
        rnd = self.rnd
        key = rnd.choice(KEYS)
        group = rnd.choice(GROUPS)
        consumer = rnd.choice(CONSUMERS)
        roll = rnd.random()
        if roll < 0.25:
            args = ["XADD", key]
            if rnd.random() < 0.08:
                args.append("NOMKSTREAM")
            if rnd.random() < 0.15:
                args += self.trim(key)
            args.append(self.new_id(key))
            for _ in range(rnd.choice([1, 1, 2])):
                args += [rnd.choice(["f", "g", "1"]), rnd.choice(["v", "", "12", "-3", "1.5", "x" * 70])]
            return args
        if roll < 0.28:
            return ["XTRIM", key, *self.trim(key)]
        if roll < 0.33:
            return ["XDEL", key, *[self.some_id(key) for _ in range(rnd.randint(1, 3))]]
        if roll < 0.36:
            if rnd.random() < 0.7:
                self.ms[key] += rnd.randint(0, 2)
                last = f"{self.ms[key]}-{rnd.randint(0, 3)}"
            else:
                last = self.some_id(key)
            args = ["XSETID", key, last]
            if rnd.random() < 0.4:
                args += ["ENTRIESADDED", str(rnd.choice([0, 1, 5, 40, 1000]))]
                self.entries_added_set.add(key)
            if rnd.random() < 0.4:
                args += ["MAXDELETEDID", rnd.choice([self.some_id(key), last, "0-0"])]
            return args
        if roll < 0.43:
            bounds = ["-", "+", self.some_id(key), "(" + self.some_id(key)]
            args = [rnd.choice(["XRANGE", "XREVRANGE"]), key, rnd.choice(bounds), rnd.choice(bounds)]
            if rnd.random() < 0.5:
                args += ["COUNT", str(rnd.choice([-1, 0, 1, 2, 5]))]
            return args
        if roll < 0.47:
            keys = rnd.sample(KEYS, rnd.randint(1, 3)) if rnd.random() < 0.8 else rnd.choices(KEYS, k=2)  # repeats too
            args = ["XREAD"]
            if rnd.random() < 0.5:
                args += ["COUNT", str(rnd.choice([0, 1, 2]))]
            return [*args, "STREAMS", *keys, *[rnd.choice(["$", "+", "0", "0-0", self.some_id(k)]) for k in keys]]
        if roll < 0.50:
            if rnd.random() < 0.3:
                return ["DEL", key] if rnd.random() < 0.7 else ["DEL", *KEYS[:2]]
            return rnd.choice([["XLEN", key], ["TYPE", key], ["EXISTS", *rnd.sample([*KEYS, "str"], 2)]])
        if roll < 0.53:
            return self.wrong_type()
        if roll < 0.58:
            start = rnd.choice(["0", "$", "-", self.some_id(key)])
            extra = rnd.choice([[], ["MKSTREAM"], ["ENTRIESREAD", "-1"], ["ENTRIESREAD", str(rnd.choice([0, 1, 3, 10, 1000]))]])
            return ["XGROUP", "CREATE", key, group, start, *extra]
        if roll < 0.60:
            extra = ["ENTRIESREAD", str(rnd.choice([-1, 0, 2, 5, 1000]))] if rnd.random() < 0.4 else []
            return ["XGROUP", "SETID", key, group, rnd.choice(["0", "$", self.some_id(key)]), *extra]
        if roll < 0.61:
            return ["XGROUP", "DESTROY", key, group]
        if roll < 0.63:
            return ["XGROUP", rnd.choice(["CREATECONSUMER", "DELCONSUMER"]), key, group, consumer]
        if roll < 0.73:
            options = []
            if rnd.random() < 0.6:
                options += ["COUNT", str(rnd.randint(0, 3))]
            if rnd.random() < 0.15:
                options.append("NOACK")
            keys = [key] if rnd.random() < 0.8 else rnd.choices(KEYS, k=2)
            ids = [">" if rnd.random() < 0.7 else rnd.choice(["0", self.some_id(k)]) for k in keys]
            return ["XREADGROUP", "GROUP", group, consumer, *options, "STREAMS", *keys, *ids]
        if roll < 0.77:
            return ["XACK", key, group, *[self.some_id(key) for _ in range(rnd.randint(1, 3))]]
        if roll < 0.82:
            return xclaim(rnd, key, group, consumer, self.some_id, idle=0.15, time=0.15)
        if roll < 0.86:
            return xautoclaim(rnd, key, group, consumer, self.some_id)
        if roll < 0.90:
            bounds = ["-", "+", self.some_id(key), "(" + self.some_id(key)]
            tail = rnd.choice(
                [
                    [],
                    [rnd.choice(bounds), rnd.choice(bounds), str(rnd.randint(0, 5))],
                    [rnd.choice(bounds), rnd.choice(bounds), str(rnd.randint(1, 5)), consumer],
                    ["IDLE", str(rnd.choice([0, FAR])), "-", "+", "10"],
                    ["IDLE", "0", "-", "+", "10", consumer],
                ]
            )
            return ["XPENDING", key, group, *tail]
        if roll < 0.995:
            return rnd.choice(
                [
                    ["XINFO", "STREAM", key],
                    ["XINFO", "STREAM", key, "FULL"],
                    ["XINFO", "STREAM", key, "FULL", "COUNT", str(rnd.choice([0, 1, 2]))],
                    ["XINFO", "GROUPS", key],
                    ["XINFO", "CONSUMERS", key, group],
                ]
            )
        return ["SET", "str", "x"]

    def wrong_type(self) -> list[str]:
        return self.rnd.choice(
            [
                ["XADD", "str", "1-1", "f", "v"],
                ["XRANGE", "str", "-", "+"],
                ["XLEN", "str"],
                ["XDEL", "str", "1-1"],
                ["XTRIM", "str", "MAXLEN", "0"],
                ["XSETID", "str", "1-1"],
                ["XREAD", "STREAMS", "s1", "str", "0", "0"],
                ["XINFO", "STREAM", "str"],
                ["XGROUP", "CREATE", "str", "g1", "0"],
                ["XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "str", ">"],
                ["XPENDING", "str", "g1"],
                ["XSETID", "nokey", "1-1"],
                ["XTRIM", "nokey", "MAXLEN", "0"],
                ["XDEL", "nokey", "1-1"],
                ["XINFO", "STREAM", "nokey"],
            ]
        )


def id_pair(text: bytes | str) -> tuple[int, int]:
    ms, _, seq = (text.decode() if isinstance(text, bytes) else text).partition("-")
    return int(ms), int(seq or 0)


def call_wire(conn: RawConn, argv: list[str]) -> tuple[bytes, object]:
    """One command's reply: the bytes as sent (nothing else is in flight) and parsed, errors as text."""
    conn.send(encode_command(*argv))
    wire = b""
    while True:
        data = conn.sock.recv(65536)
        if not data:
            raise ConnectionError("closed by server")
        wire += data
        conn.reader.feed(data)
        reply = conn.reader.gets()
        if reply is not Ellipsis:
            return wire, ("error", str(reply)) if isinstance(reply, hiredis.ReplyError) else reply


def assert_same_wire(port: int, oracle_port: int, commands: list, protocol: int = 2) -> None:
    """Play commands on a fresh connection to each server (flushed, in `protocol`); each reply's bytes must match."""
    ours, theirs = RawConn(port), RawConn(oracle_port)
    try:
        for conn in (ours, theirs):
            conn.call("HELLO", str(protocol))
            conn.call("FLUSHALL")
        for argv in commands:
            assert call_wire(ours, argv)[0] == call_wire(theirs, argv)[0], argv
    finally:
        ours.close()
        theirs.close()


def call(conn: RawConn, argv: list[str]):
    return call_wire(conn, argv)[1]


def masked(argv: list[str]) -> bool:
    """Replies that hold times or the ENTRIESADDED counters: compared parsed and masked, the rest byte for byte."""
    return argv[0].upper() == "XINFO" or (argv[0] == "XPENDING" and len(argv) > 3)


def fields(reply) -> dict:
    """A map reply as a dict: RESP3 sends a map, RESP2 a flat array."""
    return reply if isinstance(reply, dict) else dict(zip(reply[0::2], reply[1::2], strict=True))


def like(original, mapping: dict):
    return mapping if isinstance(original, dict) else [x for pair in mapping.items() for x in pair]


def group_info(group, counters_differ: bool):
    info = dict(fields(group))
    assert info.pop(b"nacked-count", 0) == 0  # Redis 8.8's field (XNACK), which the 8.2.3 oracle lacks
    if counters_differ:
        info.pop(b"lag", None)
        info.pop(b"entries-read", None)
    return info


def without_times(consumer) -> dict:
    """A consumer's fields, its times masked: -1 (never active) kept, any other time replaced."""
    return {k: v if k not in TIME_FIELDS or v == -1 else "a time" for k, v in fields(consumer).items()}


def mask(argv: list[str], reply, counters_differ: bool):
    """Drop what legitimately differs (see the module docstring); keep the reply's shape (map or array)."""
    if isinstance(reply, tuple):
        return reply
    name = argv[0].upper()
    sub = argv[1].upper() if len(argv) > 1 else ""
    if name == "XPENDING" and len(argv) > 3:
        return [[e[0], e[1], e[3]] for e in reply]
    if name == "XINFO" and sub == "CONSUMERS":
        return [like(c, without_times(c)) for c in reply]
    if name == "XINFO" and sub == "GROUPS":
        return [like(g, group_info(g, counters_differ)) for g in reply]
    if name == "XINFO" and sub == "STREAM" and reply is not None:
        info = fields(without_newer_fields(reply))
        if b"groups" in info and isinstance(info[b"groups"], list):
            groups = []
            for g in info[b"groups"]:
                masked = group_info(g, counters_differ)
                masked[b"pending"] = [[e[0], e[1], e[3]] for e in masked[b"pending"]]
                consumers = []
                for c in g[b"consumers"] if isinstance(g, dict) else fields(g)[b"consumers"]:
                    cf = without_times(c)
                    cf[b"pending"] = [[e[0], e[2]] for e in cf[b"pending"]]
                    consumers.append(like(c, cf))
                masked[b"consumers"] = consumers
                groups.append(like(g, masked))
            info = {**info, b"groups": groups}
        return like(reply, info)
    return reply


def run_workload(millrace_port: int, oracle_port: int, seed: int, steps: int, protocol: int) -> None:
    ours, theirs = RawConn(millrace_port), RawConn(oracle_port)
    try:
        for conn in (ours, theirs):
            conn.call("HELLO", str(protocol))
            assert conn.call("FLUSHALL") in (b"OK", "OK")
        workload = Workload(seed)
        history: list[list[str]] = []
        for _ in range(steps):
            argv = workload.command()
            history.append(argv)
            counters_differ = any(k in workload.entries_added_set for k in argv[1:4])
            (expected_wire, expected), (got_wire, got) = call_wire(theirs, argv), call_wire(ours, argv)
            if argv[0] == "DEL":
                workload.entries_added_set.difference_update(argv[1:])
            if masked(argv) and not isinstance(expected, tuple):
                differ = mask(argv, got, counters_differ) != mask(argv, expected, counters_differ)
            else:
                differ, expected, got = got_wire != expected_wire, expected_wire, got_wire
            if differ:
                tail = "\n".join(" ".join(a) for a in history[-15:])
                pytest.fail(f"{argv}\nredis:    {expected}\nmillrace: {got}\nlast commands:\n{tail}")
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
@pytest.mark.parametrize("seed", [1, 2])
def test_mixed_workload_matches_redis(server, oracle_server, seed, protocol):
    run_workload(server.port, oracle_server.port, seed, 600, protocol)


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
def test_a_key_named_twice_is_answered_twice(server, oracle_server, protocol):
    """XREAD/XREADGROUP serve each named stream in turn, repeats included; RESP3's map repeats the key too."""
    commands = [
        ["XADD", "s", "1-1", "a", "1"],
        ["XADD", "s", "1-2", "b", "2"],
        ["XADD", "s", "1-3", "c", "3"],
        ["XADD", "t", "1-1", "d", "4"],
        ["XREAD", "STREAMS", "s", "s", "0", "1-1"],
        ["XREAD", "COUNT", "1", "STREAMS", "s", "t", "s", "0", "0", "1-2"],
        ["XGROUP", "CREATE", "s", "g", "0"],
        ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", "s", ">", ">"],
        ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s", "0", ">"],
        ["XPENDING", "s", "g"],
    ]
    assert_same_wire(server.port, oracle_server.port, commands, protocol)


def test_createconsumer_arity_is_redis_s_for_clients(server, oracle_server):
    """XGROUP CREATECONSUMER takes exactly 5 arguments from clients, refused at queue time inside
    MULTI too; only loading/replica clients may add Millrace's effect-only SEENTIME/ACTIVETIME."""
    commands = [
        ["XADD", "s", "1-1", "f", "v"],
        ["XGROUP", "CREATE", "s", "g", "0"],
        ["XGROUP", "CREATECONSUMER", "s", "g", "c", "SEENTIME", "1", "ACTIVETIME", "2"],
        ["XGROUP", "CREATECONSUMER", "s", "g", "c", "x"],
        ["MULTI"],
        ["XGROUP", "CREATECONSUMER", "s", "g", "c", "SEENTIME", "1", "ACTIVETIME", "2"],
        ["EXEC"],
        ["COMMAND", "INFO", "xgroup|createconsumer"],
    ]
    assert_same_wire(server.port, oracle_server.port, commands)


def test_names_with_cr_lf_in_error_lines(server, oracle_server):
    """An error echoing a group, option or subcommand name turns its CR/LF into spaces (Redis's
    addReplyErrorFormat); sent raw they ended the error line early and desynchronised the client."""
    commands = [
        ["XADD", "s", "1-1", "f", "v"],
        ["XGROUP", "CREATE", "s", "g", "0"],
        ["XREADGROUP", "GROUP", "a\r\nb", "c", "STREAMS", "s", ">"],
        ["XPENDING", "s", "a\r\nb"],
        ["XGROUP", "SETID", "s", "a\nb", "0"],
        ["XCLAIM", "s", "g", "c", "0", "1-1", "BAD\r\nX"],
        ["XINFO", "X\r\nY"],
        ["XGROUP", "\r\nX\r\n"],
        ["PING"],
    ]
    assert_same_wire(server.port, oracle_server.port, commands)


def test_names_that_are_not_utf8_in_error_lines(server, oracle_server):
    """Error texts quote names byte for byte, as Redis does (no U+FFFD), cut at 128 bytes where Redis cuts."""
    commands = [
        [b"XADD", b"s\xff", b"1-1", b"f", b"v"],
        [b"XREADGROUP", b"GROUP", b"g\xfe", b"c", b"STREAMS", b"s\xff", b">"],
        [b"XPENDING", b"s\xff", b"\xc3"],
        [b"XGROUP", b"SETID", b"s\xff", b"\xe9t\xe9", b"0"],
        [b"XGROUP", b"CREATE", b"s\xff", b"g", b"0"],
        [b"XCLAIM", b"s\xff", b"g", b"c", b"0", b"1-1", b"\x80BAD"],
        [b"XGROUP", b"DESTROY", b"s\xff", "é".encode() * 100],
        [b"XGROUP", b"CREATE", "é".encode() * 100],
        [b"XINFO", b"STREAM", b"s\xff", b"FULL", b"COUNT", b"1", "é".encode() * 100],
    ]
    assert_same_wire(server.port, oracle_server.port, commands)
