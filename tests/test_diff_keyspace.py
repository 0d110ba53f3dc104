"""Differential tests: the same string/keyspace/transaction commands sent to Redis (`oracle`) and Millrace.

Every reply is compared, error texts included. Replies that depend on the
clock are compared within a tolerance (TTL, PTTL, EXPIRETIME after a
relative expiry); replies in hash order are compared sorted (KEYS) or as a
whole iteration (SCAN); RANDOMKEY by existence.
"""

from __future__ import annotations

import random

import pytest
import redis

from tests.test_glob import TABLE


class Side:
    """One connection with raw replies; an error reply comes back as (class name, text)."""

    def __init__(self, client: redis.Redis) -> None:
        self.conn = client.connection_pool.make_connection()

    def __call__(self, *args):
        self.conn.send_command(*args)
        try:
            return normalize(self.conn.read_response())
        except redis.ResponseError as exc:
            return normalize(exc)

    def close(self) -> None:
        self.conn.disconnect()


def normalize(reply):
    """Errors (also inside EXEC's array) as comparable (class name, text) pairs."""
    if isinstance(reply, redis.ResponseError):
        return (type(reply).__name__, str(reply))
    if isinstance(reply, list):
        return [normalize(item) for item in reply]
    return reply


TOLERANCE = {b"TTL": 2, b"PTTL": 2000, b"EXPIRETIME": 2, b"PEXPIRETIME": 2000}


class Differ:
    def __init__(self, oracle: redis.Redis, millrace: redis.Redis) -> None:
        self.redis = Side(oracle)
        self.millrace = Side(millrace)
        self.log: list[tuple] = []

    def __call__(self, *args, mode: str = "exact"):
        args = tuple(a if isinstance(a, bytes) else str(a).encode() for a in args)
        expected, got = self.redis(*args), self.millrace(*args)
        self.log.append((args, expected, got))
        name = args[0].upper()
        if mode == "sorted":
            ok = sorted(expected) == sorted(got) if isinstance(expected, list) else expected == got
        elif mode == "exists":
            ok = (expected is None) == (got is None)
        elif name in TOLERANCE and isinstance(expected, int) and isinstance(got, int) and expected >= 0:
            ok = abs(expected - got) <= TOLERANCE[name]
        else:
            ok = expected == got
        assert ok, f"{args!r}: redis {expected!r} != millrace {got!r}\nlast commands: {self.log[-8:]!r}"
        return expected

    def scan_all(self, side: Side, *options) -> list[bytes]:
        cursor, found = b"0", []
        while True:
            cursor, keys = side(b"SCAN", cursor, *options)
            found.extend(keys)
            if cursor == b"0":
                return sorted(set(found))

    def check_state(self) -> None:
        """The whole keyspace of the selected database: keys, values, types, TTL presence."""
        keys = self(b"KEYS", b"*", mode="sorted")
        # SCAN on both sides: it removes the expired keys it meets, which DBSIZE counts until then
        for side in (self.millrace, self.redis):
            assert self.scan_all(side) == sorted(keys)
            assert self.scan_all(side, b"COUNT", b"3", b"MATCH", b"k1*") == sorted(k for k in keys if k.startswith(b"k1"))
        for key in sorted(keys):
            self(b"TYPE", key)
            if self.redis(b"TYPE", key) == b"string":
                self(b"GET", key)
            self(b"PTTL", key)

    def close(self) -> None:
        self.redis.close()
        self.millrace.close()


@pytest.fixture
def diff(oracle, server):
    millrace = server.client(protocol=2)
    millrace.flushall()
    differ = Differ(oracle, millrace)
    yield differ
    differ.close()


SCRIPT = """
SET a 1
SET b x EX 100
TTL b
PTTL a
SET b y KEEPTTL
TTL b
SET b y GET
TTL b
SET c 1 NX GET
SET c 2 NX GET
SET d 1 XX
SET a 1 EX 0
SET a 1 EX foo
SET a 1 NX XX
SET a 1 KEEPTTL EX 5
SET a 1 EX 5 EX 6
SET a 1 PX 9223372036854775807
SET a 1 EX
SET a 1 GET GET
SET a 1 EXAT 1
GET a
EXISTS a a b nope
INCR a
INCR b
SET n 9223372036854775807
INCR n
DECRBY n -9223372036854775808
DECRBY n 9223372036854775807
DECRBY n 1
INCRBY n 01
APPEND q abc
APPEND q def
STRLEN q
STRLEN none
GETDEL q
GETDEL q
MSET x 1 y
MSET x 1 y 2
MGET x y z
EXPIRE a 10 NX XX
EXPIRE a 10 GT LT
EXPIRE a 10 FOO
EXPIRE a foo
EXPIRE a 9999999999999999999
EXPIRE a 9223372036854775
EXPIRE x 100 GT
EXPIRE x 100 LT
TTL x
EXPIRE x 50 GT
EXPIRE x 500 GT
EXPIRE x 50 NX
EXPIRE x 50 XX
TTL x
PERSIST x
PERSIST x
EXPIRE nope 10
EXPIRE x -1
EXISTS x
EXPIREAT y 1
EXISTS y
RENAME nope x
RENAMENX nope x
SET r1 v EX 1000
RENAME r1 r1
RENAMENX r1 r1
RENAME r1 r2
TTL r2
SET r3 x
RENAMENX r2 r3
RENAME r2 r3
TTL r3
TYPE r3
TYPE nope
DBSIZE
SWAPDB 0 foo
SWAPDB foo 0
SWAPDB 0 99
SWAPDB 0 1
DBSIZE
SWAPDB 1 0
FLUSHDB foo
EXPIRETIME nope
PEXPIRETIME b
EXPIREAT r3 4000000000
EXPIRETIME r3
PEXPIREAT r3 4000000000123
PEXPIRETIME r3
EXPIRETIME r3
KEYS r*
KEYS [
SCAN 0 TYPE foo
SCAN 0 COUNT 0
SCAN 18446744073709551616
SCAN 0 MATCH
SCAN 0 COUNT x
SCAN 0 FOO bar
SCAN x
MULTI
MULTI
WATCH x
SET a b
INCR a
EXEC
EXEC
DISCARD
MULTI
SET a
SET b c
EXEC
MULTI
FOO bar
EXEC
MULTI
UNWATCH
EXEC
MULTI
EXEC foo
EXEC
DEL r3 r3 nope
UNLINK b c
SETNX a 1
SETNX a 2
SETEX b 100 x
TTL b
SETEX b 0 x
SETEX b -1 x
SETEX b foo x
PSETEX b 0 x
PSETEX b 5000 y
SETEX b 9223372036854776 x
GETSET b z
TTL b
GETSET nope v
MSETNX a 1 c 2
MSETNX c 1 d 2
MSETNX c 1 d
MGET c d
GETEX reallymissing EX 0
GETEX a EX 0
GETEX a EX 100
TTL a
GETEX a PERSIST
TTL a
GETEX a PX 100 EX 100
GETEX a EX 100 EX 200
TTL a
GETEX a PERSIST EX 10
GETEX a NX
GETEX a KEEPTTL
GETEX a EXAT 1
EXISTS a
SET s "Hello World"
GETRANGE s 0 4
GETRANGE s -5 -1
GETRANGE s -1 -5
GETRANGE s 5 2
GETRANGE s 0 -100
GETRANGE s -100 3
GETRANGE s 0 1000
GETRANGE s x 1
GETRANGE reallymissing 0 1
SUBSTR s 1 3
SET e ""
GETRANGE e 0 -1
SETRANGE s 6 Redis
SETRANGE s 20 X
GET s
SETRANGE n 0 ""
EXISTS n
SETRANGE n 3 ab
GET n
SETRANGE n -1 x
SETRANGE n 536870911 ab
SETRANGE s 2 ""
SET a 1
EXPIRE a 100
TOUCH a a nope
MOVE a 0
MOVE a x
MOVE a 99
MOVE a -1
MOVE nope 1
MOVE a 1
EXISTS a
SELECT 1
TTL a
MOVE a 0
SELECT 0
SET a 5
SELECT 1
SET a 6
MOVE a 0
SELECT 0
COPY a a
COPY a a DB 0
COPY a a DB 1
COPY a a DB 1 REPLACE
COPY a c
COPY a c
COPY a c REPLACE
COPY nope x
COPY a d FOO
COPY a d DB
COPY a d DB x
COPY a d DB 100
INCRBYFLOAT f 0.1
INCRBYFLOAT f 0.2
INCRBYFLOAT f 1e3
INCRBYFLOAT f -1000.3
INCRBYFLOAT f 3.0e-17
INCRBYFLOAT f 1.5e300
INCRBYFLOAT f -1.5e300
INCRBYFLOAT f 1e5000
INCRBYFLOAT f 1e-5000
INCRBYFLOAT f inf
INCRBYFLOAT f -INFINITY
INCRBYFLOAT f nan
INCRBYFLOAT f " 1"
INCRBYFLOAT f "1 "
INCRBYFLOAT f ""
INCRBYFLOAT f .5
INCRBYFLOAT f 5.
INCRBYFLOAT f .
INCRBYFLOAT f +2
INCRBYFLOAT f 1e
INCRBYFLOAT f 0x10
INCRBYFLOAT f 0x1.8p1
INCRBYFLOAT f 0x
INCRBYFLOAT f -0x1p-2
SET g 1.1e4931
INCRBYFLOAT g 1e4931
INCRBYFLOAT g 1
INCRBYFLOAT g 1e4932
INCRBYFLOAT g -1e4932
INCRBYFLOAT g 1e99999999999999999999999999
INCRBYFLOAT g 0e99999999999999999999999999
INCRBYFLOAT i -0.0000000000000000001
INCRBYFLOAT i 1.23456789012345678901234
INCRBYFLOAT i 3.14159265358979323846
INCRBYFLOAT j 123456789.123456789
INCRBYFLOAT k 5e20
INCRBYFLOAT k 0.000000000000000015
INCRBYFLOAT l 1.7976931348623157e308
INCRBYFLOAT l 1.7976931348623157e308
INCRBYFLOAT n 4e-4951
INCRBYFLOAT n2 1e-4951
INCRBYFLOAT o 18446744073709551617
INCRBYFLOAT p 9007199254740993
INCRBYFLOAT q 1.18973149535723176502e+4932
INCRBYFLOAT q2 1.18973149535723176508e+4932
SET h abc
INCRBYFLOAT h 1
INCRBYFLOAT nokey abc
OBJECT HELP
OBJECT ENCODING nokey
OBJECT FOO
OBJECT
OBJECT ENCODING
OBJECT HELP x
SET a 123
OBJECT ENCODING a
OBJECT REFCOUNT a
SET b 12345
OBJECT REFCOUNT b
OBJECT ENCODING b
SET c abc
OBJECT ENCODING c
SET d 0123
OBJECT ENCODING d
SET e -9223372036854775808
OBJECT ENCODING e
SET f 123456789012345678901234567890123456789012345
OBJECT ENCODING f
SET g 12345678901234567890123456789012345678901234
OBJECT ENCODING g
SET g xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
OBJECT ENCODING g
SET g xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
OBJECT ENCODING g
SET gg xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
OBJECT ENCODING gg
SET g xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx EX 1000
OBJECT ENCODING g
SET g xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx EX 1000
OBJECT ENCODING g
OBJECT FREQ a
OBJECT FREQ nokey
OBJECT IDLETIME nokey
INCR a
OBJECT REFCOUNT a
MSET key1 ohmytext key2 mynewtext
LCS key1 key2
LCS key1 key2 LEN
LCS key1 key2 IDX
LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN
LCS key1 key2 IDX WITHMATCHLEN
LCS key1 key2 IDX LEN
LCS key1 key2 FOO
LCS key1 key2 MINMATCHLEN
LCS key1 key2 MINMATCHLEN x
LCS key1 nokey
LCS nokey nokey2 IDX
MSET a abcabcabcabc b cbacbacba
LCS a b IDX WITHMATCHLEN
LCS b a IDX WITHMATCHLEN MINMATCHLEN -5
MSET c xaxbxcxdxe d aaabbbcccddd
LCS c d IDX WITHMATCHLEN
LCS d c IDX
LCS c c IDX
"""


def test_scripted_sequence(diff):
    import shlex

    for line in SCRIPT.strip().splitlines():
        diff(*shlex.split(line))
    diff.check_state()


SCAN_CURSORS = [" 5", "\t5", "5 ", "+5", "-1", "-0", "05", "-05", " -1", "", " ", "+", "-", "- 5", "1 2", "0x5",
                "18446744073709551615", "18446744073709551616", "-18446744073709551615", "9223372036854775808",
                "-9223372036854775808", "-9223372036854775809", "5\x00x", "\x005", "1" * 5000, "0" * 5000 + "7", " " + "0" * 5000]  # fmt: skip


@pytest.mark.parametrize("cursor", SCAN_CURSORS)
def test_scan_cursor_read_as_redis(diff, cursor):
    """Which cursors Redis 8 refuses (string2ull: a strict integer not below 0, or whatever strtoull reads
    whole). On an empty database every accepted cursor ends the iteration, so the replies compare exactly."""
    diff(b"FLUSHDB")
    diff(b"SCAN", cursor.encode())


def test_glob_table_through_keys(diff):
    """The glob table's quirks are Redis's: KEYS on both servers agrees with it."""
    for pattern, subject, expected in TABLE:
        if not subject or pattern == b"*":
            continue  # KEYS special-cases "*"; empty keys are covered in test_keyspace
        diff(b"FLUSHDB")
        diff(b"SET", subject, b"1")
        assert diff(b"KEYS", pattern) == ([subject] if expected else []), (pattern, subject)


KEYS = [f"k{i}" for i in range(10)] + ["other", "k1x"]


def random_command(rng: random.Random, now_s: int) -> tuple[list, str]:
    """One random command over a small key pool, and how to compare its reply.

    No TTL is short enough to run out during the test, and no two relative
    expiry times are equal: the two servers' clocks differ by a millisecond
    or so, which must never decide a reply (GT/LT, expired or not).
    """
    key = rng.choice(KEYS)
    value = rng.choice(["0", "1", "-7", "42", "abc", "", "9223372036854775807", "-9223372036854775808", "3.5", "007"])
    kind = rng.randrange(40)
    if kind < 4:
        args = ["SET", key, value]
        options = rng.sample(["NX", "XX", "GET", "KEEPTTL", "EX", "PX", "EXAT", "PXAT", "BAD"], rng.choice([0, 0, 1, 1, 2, 3]))
        for option in options:
            args.append(option)
            if option == "EX":  # relative times all differ, so GT/LT never race the clock
                args.append(rng.choice(["107", "0", "-1", "x"]))
            elif option == "PX":
                args.append(rng.choice(["5000003", "0", "-1", "x"]))
            elif option == "EXAT":
                args.append(rng.choice([str(now_s + 500), "1", "0"]))
            elif option == "PXAT":
                args.append(rng.choice([str((now_s + 500) * 1000 + 7), "1"]))
        return args, "exact"
    if kind < 6:
        return ["GET", key], "exact"
    if kind == 6:
        return ["MGET", *rng.sample(KEYS, 3)], "exact"
    if kind == 7:
        pairs = rng.sample(KEYS, 2)
        return ["MSET", pairs[0], value, pairs[1], "v"] + (["odd"] if rng.random() < 0.1 else []), "exact"
    if kind == 8:
        return [rng.choice(["INCR", "DECR"]), key], "exact"
    if kind == 9:
        return [rng.choice(["INCRBY", "DECRBY"]), key, rng.choice(["1", "-3", "100", "x", "9223372036854775807", "-9223372036854775808"])], "exact"
    if kind == 10:
        return ["APPEND", key, rng.choice(["x", "12", ""])], "exact"
    if kind == 11:
        return [rng.choice(["STRLEN", "TYPE", "GETDEL"]), key], "exact"
    if kind == 12:
        return [rng.choice(["DEL", "UNLINK", "EXISTS"]), *rng.choices(KEYS, k=rng.randint(1, 3))], "exact"
    if kind == 13:
        return [rng.choice(["RENAME", "RENAMENX"]), key, rng.choice(KEYS)], "exact"
    if kind < 18:
        name = rng.choice(["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"])
        if name == "EXPIRE":
            when = rng.choice(["100", "200", "-1", "0", "x", "9223372036854775"])
        elif name == "PEXPIRE":
            when = rng.choice(["150000", "250001", "-5", "0"])
        elif name == "EXPIREAT":
            when = rng.choice([str(now_s + 300), str(now_s + 600), "1", "0"])
        else:
            when = rng.choice([str((now_s + 400) * 1000 + 1), str((now_s + 700) * 1000), "1"])
        flags = rng.sample(["NX", "XX", "GT", "LT"], rng.choice([0, 0, 1, 1, 2]))
        return [name, key, when, *flags], "exact"
    if kind < 21:
        return [rng.choice(["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"]), key], "exact"
    if kind == 21:
        return ["PERSIST", key], "exact"
    if kind == 22:
        return ["DBSIZE"], "exact"
    if kind == 23:
        return ["KEYS", rng.choice(["*", "k1*", "k?", "[ko]*", "*[^0-9]", "other"])], "sorted"
    if kind == 24:
        return ["RANDOMKEY"], "exists"
    if kind == 25:
        return ["SELECT", rng.choice(["0", "0", "1"])], "exact"
    if kind == 26:
        return ["SWAPDB", "0", "1"] if rng.random() < 0.7 else ["FLUSHDB"], "exact"
    if kind == 27:
        return ["INCRBYFLOAT", key, rng.choice(["0.1", "-2.5", "1e3", "x", "3.0e-17", "0x1p-3"])], "exact"
    if kind == 28:
        return [rng.choice(["SETNX", "GETSET"]), key, value], "exact"
    if kind == 29:
        if rng.random() < 0.5:
            return ["SETEX", key, rng.choice(["113", "0", "x"]), value], "exact"
        return ["PSETEX", key, rng.choice(["200017", "0", "x"]), value], "exact"
    if kind == 30:
        option = rng.choice([[], ["PERSIST"], ["EX", "131"], ["PX", "0"], ["EXAT", "1"], ["PXAT", str((now_s + 900) * 1000)], ["NX"]])
        return ["GETEX", key, *option], "exact"
    if kind == 31:
        return ["GETRANGE", key, rng.choice(["0", "-1", "2", "-100"]), rng.choice(["0", "-1", "3", "100", "-3"])], "exact"
    if kind == 32:
        return ["SETRANGE", key, rng.choice(["0", "2", "5", "-1"]), rng.choice(["ab", "", "xyz"])], "exact"
    if kind == 33:
        pairs = rng.sample(KEYS, 2)
        return ["MSETNX", pairs[0], value, pairs[1], "v"], "exact"
    if kind == 34:
        return ["TOUCH", *rng.choices(KEYS, k=2)], "exact"
    if kind == 35:
        return ["MOVE", key, rng.choice(["0", "1", "1", "2"])], "exact"
    if kind == 36:
        options = rng.choice([[], ["REPLACE"], ["DB", "1"], ["DB", "0", "REPLACE"], ["DB", "1", "REPLACE"]])
        return ["COPY", key, rng.choice(KEYS), *options], "exact"
    if kind == 37:
        return ["LCS", key, rng.choice(KEYS), *rng.choice([[], ["LEN"], ["IDX"], ["IDX", "WITHMATCHLEN", "MINMATCHLEN", "2"]])], "exact"
    return [rng.choice(["GET", "TTL", "EXISTS"]), key], "exact"


def test_random_sequence(diff):
    """A seeded mix of a few thousand string/keyspace commands, with transactions, compared reply by reply."""
    import time

    rng = random.Random(20240601)
    now_s = int(time.time())
    in_multi = False
    for step in range(3000):
        roll = rng.random()
        if roll < 0.02 and not in_multi:
            diff("MULTI")
            in_multi = True
            continue
        if in_multi and roll < 0.12:
            diff("EXEC" if rng.random() < 0.8 else "DISCARD", mode="exact")
            in_multi = False
            continue
        if roll < 0.015 and not in_multi:
            diff("WATCH", rng.choice(KEYS))
            continue
        args, mode = random_command(rng, now_s)
        if in_multi and args[0] in ("KEYS", "RANDOMKEY", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"):
            continue  # their replies inside EXEC's array cannot be compared loosely
        diff(*args, mode=mode)
        if step % 500 == 499 and not in_multi:
            diff.check_state()
    if in_multi:
        diff("EXEC")
    for db in ("0", "1", "2"):
        diff("SELECT", db)
        diff.check_state()


def test_glob_star_limit_through_keys(diff):
    diff(b"SET", b"x" * 1001, b"1")
    diff(b"SET", b"x" * 1000, b"1")
    for pattern in (b"*x" * 1001, b"*x" * 1000, b"x*" * 1001, b"*x" * 999 + b"*"):
        diff(b"KEYS", pattern, mode="sorted")
