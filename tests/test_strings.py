"""String commands through redis-py, RESP2 and RESP3: SET options, counters, WRONGTYPE, errors."""

from __future__ import annotations

import time

import pytest
import redis

WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def raw(r, *args):
    """The reply as parsed by redis-py without its per-command callbacks."""
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def error_of(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as info:
        r.execute_command(*args)
    return str(info.value)


@pytest.fixture
def stream_key(r):
    """A key holding a non-string value."""
    r.execute_command("XADD", "notstring", "1-1", "f", "v")
    return "notstring"


def test_get_set(r):
    assert r.get("k") is None
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.set("k", b"\x00\xff" * 1000) is True
    assert r.get("k") == b"\x00\xff" * 1000
    assert r.set("", "") is True and r.get("") == b""


def test_set_drops_ttl_unless_keepttl(r):
    r.set("k", "v", ex=100)
    r.set("k", "w")
    assert r.ttl("k") == -1
    r.set("k", "v", ex=100)
    r.set("k", "w", keepttl=True)
    assert 99 <= r.ttl("k") <= 100
    assert r.get("k") == b"w"


def test_set_expiry_options(r):
    r.set("ex", 1, ex=10)
    assert 9 <= r.ttl("ex") <= 10
    r.set("px", 1, px=10_000)
    assert 9_000 < r.pttl("px") <= 10_000
    at = int(time.time()) + 100
    r.set("exat", 1, exat=at)
    assert r.expiretime("exat") == at
    r.set("pxat", 1, pxat=at * 1000 + 5)
    assert r.pexpiretime("pxat") == at * 1000 + 5
    r.set("past", 1, exat=1)
    assert r.get("past") is None  # set, then already expired


def test_set_nx_xx_get(r):
    assert r.set("k", 1, nx=True) is True
    assert r.set("k", 2, nx=True) is None
    assert r.set("missing", 1, xx=True) is None
    assert r.set("k", 3, xx=True) is True
    assert r.set("k", 4, get=True) == b"3"
    assert r.set("new", 1, get=True) is None and r.get("new") == b"1"
    assert r.set("k", 5, nx=True, get=True) == b"4"  # not set, old value returned
    assert r.get("k") == b"4"
    assert r.set("none", 5, xx=True, get=True) is None and r.exists("none") == 0
    assert raw(r, "SET", "k", "6", "GET", "GET") == b"4"
    assert raw(r, "SET", "k", "7", "nx", "NX") is None


def test_set_syntax_errors(r):
    cases = [
        ("SET", "k", "v", "NX", "XX"),
        ("SET", "k", "v", "XX", "NX"),
        ("SET", "k", "v", "EX"),
        ("SET", "k", "v", "EX", "10", "PX", "10"),
        ("SET", "k", "v", "KEEPTTL", "EX", "10"),
        ("SET", "k", "v", "EX", "10", "KEEPTTL"),
        ("SET", "k", "v", "PXAT", "10", "EXAT", "10"),
        ("SET", "k", "v", "FOO"),
        ("SET", "k", "v", "PERSIST"),
        ("SET", "k", "v", "10"),
    ]
    for args in cases:
        assert error_of(r, *args) == "syntax error", args
    assert raw(r, "SET", "k", "v", "EX", "10", "EX", "20") == b"OK"
    assert 19 <= r.ttl("k") <= 20


def test_set_expire_errors(r):
    for option in ("EX", "PX", "EXAT", "PXAT"):
        assert error_of(r, "SET", "k", "v", option, "0") == "invalid expire time in 'set' command"
        assert error_of(r, "SET", "k", "v", option, "-5") == "invalid expire time in 'set' command"
        assert error_of(r, "SET", "k", "v", option, "x") == "value is not an integer or out of range"
    assert error_of(r, "SET", "k", "v", "EX", "9223372036854776") == "invalid expire time in 'set' command"
    assert error_of(r, "SET", "k", "v", "PX", "9223372036854775807") == "invalid expire time in 'set' command"
    assert error_of(r, "SET", "k", "v", "EX", "1.5") == "value is not an integer or out of range"
    assert r.exists("k") == 0


def test_wrongtype(r, stream_key):
    for args in (("GET", stream_key), ("APPEND", stream_key, "x"), ("STRLEN", stream_key), ("GETDEL", stream_key),
                 ("INCR", stream_key), ("DECRBY", stream_key, "2"), ("SET", stream_key, "v", "GET")):
        assert error_of(r, *args) == WRONGTYPE, args
    assert r.mget(stream_key, "nope") == [None, None]
    assert r.set(stream_key, "now a string") is True
    assert r.get(stream_key) == b"now a string"


def test_mget_mset(r):
    assert r.mset({"a": 1, "b": 2}) is True
    assert r.mget("a", "b", "c", "a") == [b"1", b"2", None, b"1"]
    r.set("t", 1, ex=100)
    r.mset({"t": 2})
    assert r.ttl("t") == -1
    assert error_of(r, "MSET", "a", "1", "b") == "wrong number of arguments for 'mset' command"
    assert error_of(r, "MSET", "a") == "wrong number of arguments for 'mset' command"
    assert error_of(r, "MGET") == "wrong number of arguments for 'mget' command"


def test_incr_family(r):
    assert r.incr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decr("n") == 10
    assert r.decrby("n", 15) == -5
    assert r.get("n") == b"-5"
    assert r.incrby("n", -5) == -10
    r.set("t", 5, ex=100)
    assert r.incr("t") == 6
    assert 99 <= r.ttl("t") <= 100  # counters keep their TTL


def test_incr_errors(r):
    r.set("max", 9223372036854775807)
    assert error_of(r, "INCR", "max") == "increment or decrement would overflow"
    r.set("min", -9223372036854775808)
    assert error_of(r, "DECR", "min") == "increment or decrement would overflow"
    assert error_of(r, "INCRBY", "min", "-1") == "increment or decrement would overflow"
    assert error_of(r, "DECRBY", "x", "-9223372036854775808") == "decrement would overflow"
    assert r.decrby("x", "9223372036854775807") == -9223372036854775807
    for bad in ("abc", "1.5", " 1", "1 ", "01", "-0", "+1", "", "9223372036854775808", "1_0"):
        r.set("bad", bad)
        assert error_of(r, "INCR", "bad") == "value is not an integer or out of range", bad
        assert error_of(r, "INCRBY", "n", bad) == "value is not an integer or out of range", bad
    assert r.get("n") is None


def test_append_strlen_getdel(r):
    assert r.append("s", "abc") == 3
    assert r.append("s", "de") == 5
    assert r.get("s") == b"abcde"
    assert r.strlen("s") == 5 and r.strlen("nope") == 0
    r.expire("s", 100)
    r.append("s", "f")
    assert r.ttl("s") > 0  # APPEND keeps the TTL
    assert r.getdel("s") == b"abcdef"
    assert r.getdel("s") is None
    assert r.exists("s") == 0


def test_arity(r):
    for args in (("GET",), ("GET", "a", "b"), ("SET", "a"), ("INCR",), ("INCRBY", "a"), ("APPEND", "a"), ("STRLEN",), ("GETDEL",)):
        assert error_of(r, *args) == f"wrong number of arguments for '{args[0].lower()}' command"


def test_setnx_setex_psetex_getset(r):
    assert r.setnx("a", 1) is True
    assert r.setnx("a", 2) is False
    assert raw(r, "SETEX", "b", "100", "x") == b"OK"
    assert 99 <= r.ttl("b") <= 100
    assert r.psetex("b", 5000, "y") is True
    assert 4000 < r.pttl("b") <= 5000
    assert error_of(r, "SETEX", "b", "0", "x") == "invalid expire time in 'setex' command"
    assert error_of(r, "PSETEX", "b", "-1", "x") == "invalid expire time in 'psetex' command"
    assert error_of(r, "SETEX", "b", "x", "x") == "value is not an integer or out of range"
    assert r.getset("b", "z") == b"y"
    assert r.ttl("b") == -1  # GETSET drops the TTL like SET
    assert r.getset("new", "v") is None and r.get("new") == b"v"


def test_msetnx(r):
    assert r.msetnx({"a": 1, "b": 2}) is True
    assert r.msetnx({"b": 3, "c": 4}) is False
    assert r.mget("a", "b", "c") == [b"1", b"2", None]
    assert error_of(r, "MSETNX", "a", "1", "b") == "wrong number of arguments for 'msetnx' command"


def test_getex(r):
    assert r.getex("nope", ex=10) is None
    r.set("k", "v")
    assert r.getex("k", ex=100) == b"v"
    assert 99 <= r.ttl("k") <= 100
    assert r.getex("k", persist=True) == b"v"
    assert r.ttl("k") == -1
    assert r.getex("k", px=5000) == b"v" and r.pttl("k") > 4000
    assert r.getex("k") == b"v" and r.pttl("k") > 4000
    assert raw(r, "GETEX", "k", "EX", "10", "EX", "20") == b"v"
    for args in (("PX", "1", "EX", "1"), ("PERSIST", "EX", "1"), ("EX", "1", "PERSIST"), ("NX",), ("KEEPTTL",), ("EX",)):
        assert error_of(r, "GETEX", "k", *args) == "syntax error", args
    assert error_of(r, "GETEX", "k", "EX", "0") == "invalid expire time in 'getex' command"
    assert r.getex("k", exat=1) == b"v"
    assert r.exists("k") == 0  # an expiry in the past deletes


def test_getrange_setrange(r):
    r.set("s", "Hello World")
    cases = {(0, 4): b"Hello", (-5, -1): b"World", (-1, -5): b"", (5, 2): b"", (0, -100): b"H", (-100, 3): b"Hell",
             (0, 1000): b"Hello World"}
    for (start, end), expected in cases.items():
        assert r.getrange("s", start, end) == expected, (start, end)
    assert r.getrange("nope", 0, -1) == b""
    assert r.substr("s", 1, 3) == b"ell"
    assert r.setrange("s", 6, "Redis") == 11 and r.get("s") == b"Hello Redis"
    assert r.setrange("s", 13, "!") == 14 and r.get("s") == b"Hello Redis\x00\x00!"
    assert r.setrange("n", 0, "") == 0 and r.exists("n") == 0
    assert r.setrange("n", 2, "ab") == 4 and r.get("n") == b"\x00\x00ab"
    assert error_of(r, "SETRANGE", "n", "-1", "x") == "offset is out of range"
    assert error_of(r, "SETRANGE", "n", "536870911", "ab") == "string exceeds maximum allowed size (proto-max-bulk-len)"
    assert error_of(r, "GETRANGE", "s", "x", "1") == "value is not an integer or out of range"


def test_incrbyfloat_long_double_arithmetic(r):
    """Redis adds in x87 long double and prints %.17Lf: 0.1 + 0.2 is 0.3 here, not 0.30000000000000004."""
    assert r.incrbyfloat("f", 0.1) == 0.1
    assert r.incrbyfloat("f", 0.2) == 0.3
    assert r.get("f") == b"0.3"
    assert raw(r, "INCRBYFLOAT", "f", "1e3") == b"1000.29999999999999999"
    assert raw(r, "INCRBYFLOAT", "f", "-1000.3") == b"0"
    assert raw(r, "INCRBYFLOAT", "g", "123456789.123456789") == b"123456789.12345678899873747"
    assert raw(r, "INCRBYFLOAT", "h", "0x1.8p1") == b"3"
    assert raw(r, "INCRBYFLOAT", "i", "18446744073709551617") == b"18446744073709551616"
    r.set("t", "1.5", ex=100)
    r.incrbyfloat("t", 1)
    assert r.get("t") == b"2.5" and r.ttl("t") > 0  # the TTL stays


def test_incrbyfloat_errors(r):
    for bad in ("abc", " 1", "1 ", "", ".", "1e", "nan", "1e5000", "1e-5000", "0x"):
        assert error_of(r, "INCRBYFLOAT", "f", bad) == "value is not a valid float", bad
    assert error_of(r, "INCRBYFLOAT", "f", "inf") == "increment would produce NaN or Infinity"
    r.set("big", "1.1e4932")
    assert error_of(r, "INCRBYFLOAT", "big", "1e4932") == "increment would produce NaN or Infinity"
    r.set("s", "abc")
    assert error_of(r, "INCRBYFLOAT", "s", "1") == "value is not a valid float"


def test_lcs(r):
    r.mset({"key1": "ohmytext", "key2": "mynewtext"})
    assert r.lcs("key1", "key2") == b"mytext"
    assert r.lcs("key1", "key2", len=True) == 6
    reply = raw(r, "LCS", "key1", "key2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN")
    if isinstance(reply, dict):  # RESP3: a map
        assert reply == {b"matches": [[[4, 7], [5, 8], 4]], b"len": 6}
    else:
        assert reply == [b"matches", [[[4, 7], [5, 8], 4]], b"len", 6]
    assert r.lcs("key1", "nokey") == b""
    assert error_of(r, "LCS", "key1", "key2", "IDX", "LEN") == "If you want both the length and indexes, please just use IDX."
    assert error_of(r, "LCS", "key1", "key2", "FOO") == "syntax error"
