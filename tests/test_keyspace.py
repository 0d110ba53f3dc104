"""Generic key commands through redis-py, RESP2 and RESP3: replies, error texts, TTL rules, SCAN."""

from __future__ import annotations

import time

import pytest
import redis


def error_of(r, *args) -> str:
    with pytest.raises(redis.ResponseError) as info:
        r.execute_command(*args)
    return str(info.value)


def test_del_unlink_exists(r):
    r.mset({"a": 1, "b": 2, "c": 3})
    assert r.exists("a", "a", "b", "nope") == 3  # repeats count
    assert r.delete("a", "a", "nope") == 1
    assert r.unlink("b", "c", "b") == 2
    assert r.exists("a", "b", "c") == 0
    assert error_of(r, "DEL") == "wrong number of arguments for 'del' command"


def test_type_and_dbsize(r):
    r.set("s", "v")
    assert r.type("s") == b"string"
    assert r.type("nope") == b"none"
    assert r.dbsize() == 1


def test_keys_patterns(r):
    r.mset({"user:1": 1, "user:2": 2, "user:10": 3, "other": 4, "": 5})
    assert sorted(r.keys("*")) == [b"", b"other", b"user:1", b"user:10", b"user:2"]
    assert sorted(r.keys("user:?")) == [b"user:1", b"user:2"]
    assert sorted(r.keys("user:[1]*")) == [b"user:1", b"user:10"]
    assert sorted(r.keys("*[^0-9]")) == [b"other"]
    assert sorted(r.keys("**")) == [b"other", b"user:1", b"user:10", b"user:2"]  # only "*" itself matches ""


def test_keys_skips_expired_keys(r):
    r.set("live", 1)
    r.set("dead", 1, px=1)
    time.sleep(0.01)
    assert r.keys("*") == [b"live"]


def test_randomkey(r):
    assert r.randomkey() is None
    r.mset({"a": 1, "b": 2})
    seen = {r.randomkey() for _ in range(50)}
    assert seen == {b"a", b"b"}
    r.set("gone", 1, px=1)
    r.delete("a", "b")
    time.sleep(0.01)
    assert r.randomkey() is None  # the expired key is removed, not returned


def test_rename(r):
    r.set("src", "v", ex=100)
    assert r.rename("src", "dst") is True
    assert r.get("dst") == b"v" and r.exists("src") == 0
    assert 99 <= r.ttl("dst") <= 100  # the TTL travels with the key
    r.set("plain", "p")
    r.set("dst2", "old", ex=100)
    r.rename("plain", "dst2")
    assert r.ttl("dst2") == -1  # the destination's own TTL goes with its old value
    assert r.rename("dst2", "dst2") is True  # onto itself: OK when it exists
    assert error_of(r, "RENAME", "nope", "x") == "no such key"
    assert error_of(r, "RENAME", "nope", "nope") == "no such key"


def test_renamenx(r):
    r.mset({"a": 1, "b": 2})
    assert r.renamenx("a", "b") is False
    assert r.renamenx("a", "a") is False
    assert r.renamenx("a", "c") is True
    assert r.mget("a", "b", "c") == [None, b"2", b"1"]
    assert error_of(r, "RENAMENX", "nope", "x") == "no such key"


def test_flushdb_flushall(r):
    r.set("a", 1)
    r.execute_command("SELECT", 1)
    r.set("b", 1)
    assert r.flushdb(asynchronous=True) is True
    assert r.dbsize() == 0
    r.execute_command("SELECT", 0)
    assert r.dbsize() == 1
    assert r.execute_command("FLUSHDB", "SYNC") in (b"OK", "OK", True)
    assert error_of(r, "FLUSHDB", "foo") == "syntax error"
    assert error_of(r, "FLUSHALL", "sync", "async") == "syntax error"
    r.set("c", 1)
    assert r.flushall() is True
    assert r.dbsize() == 0


def test_swapdb(r):
    r.set("zero", 0, ex=100)
    assert r.swapdb(0, 1) is True
    assert r.dbsize() == 0
    r.execute_command("SELECT", 1)
    assert r.get("zero") == b"0" and r.ttl("zero") > 0
    r.execute_command("SELECT", 0)
    assert r.swapdb(1, 1) is True
    assert error_of(r, "SWAPDB", "0", "foo") == "invalid second DB index"
    assert error_of(r, "SWAPDB", "foo", "0") == "invalid first DB index"
    assert error_of(r, "SWAPDB", "0", "99") == "DB index is out of range"
    assert error_of(r, "SWAPDB", "-1", "0") == "DB index is out of range"
    r.swapdb(1, 0)
    assert r.get("zero") == b"0"


def test_expire_family_and_ttl(r):
    r.set("k", "v")
    assert r.ttl("k") == -1 and r.pttl("k") == -1
    assert r.ttl("nope") == -2 and r.pttl("nope") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert 99_000 < r.pttl("k") <= 100_000
    assert r.pexpire("k", 50_000) is True
    assert 49 <= r.ttl("k") <= 50
    at = int(time.time()) + 1000
    assert r.expireat("k", at) is True
    assert r.expiretime("k") == at
    assert r.pexpiretime("k") == at * 1000
    assert r.pexpireat("k", at * 1000 + 123) is True
    assert r.pexpiretime("k") == at * 1000 + 123
    assert r.expiretime("k") == at  # rounded
    assert r.expiretime("nope") == -2
    r.set("p", 1)
    assert r.expiretime("p") == -1 and r.pexpiretime("p") == -1
    assert r.expire("nope", 10) is False


def test_expire_in_the_past_deletes(r):
    r.mset({"a": 1, "b": 1, "c": 1, "d": 1})
    assert r.expire("a", -1) is True
    assert r.pexpire("b", 0) is True
    assert r.expireat("c", 1) is True
    assert r.pexpireat("d", int(time.time() * 1000) - 10) is True
    assert r.exists("a", "b", "c", "d") == 0


def test_expire_options(r):
    r.set("k", 1)
    assert r.expire("k", 100, gt=True) is False  # no TTL counts as infinite for GT
    assert r.expire("k", 100, xx=True) is False
    assert r.expire("k", 100, lt=True) is True  # ... and LT may set one
    assert r.expire("k", 100, nx=True) is False
    assert r.expire("k", 50, gt=True) is False
    assert r.expire("k", 200, gt=True) is True
    assert r.expire("k", 300, lt=True) is False
    assert r.expire("k", 20, lt=True) is True
    assert r.expire("k", 30, xx=True) is True
    assert 29 <= r.ttl("k") <= 30
    assert r.persist("k") is True
    assert r.expire("k", 10, nx=True) is True
    assert error_of(r, "EXPIRE", "k", "10", "NX", "XX") == "NX and XX, GT or LT options at the same time are not compatible"
    assert error_of(r, "EXPIRE", "k", "10", "NX", "GT") == "NX and XX, GT or LT options at the same time are not compatible"
    assert error_of(r, "EXPIRE", "k", "10", "GT", "LT") == "GT and LT options at the same time are not compatible"
    assert error_of(r, "EXPIRE", "k", "10", "XX", "GT", "LT") == "GT and LT options at the same time are not compatible"
    assert error_of(r, "EXPIRE", "k", "10", "FOO") == "Unsupported option FOO"
    assert error_of(r, "PEXPIRE", "k", "10", "nX", "bar") == "Unsupported option bar"
    assert error_of(r, "EXPIRE", "k", "1.5") == "value is not an integer or out of range"
    assert error_of(r, "EXPIRE", "k", "10", "FOO") == "Unsupported option FOO"


def test_expire_invalid_times(r):
    r.set("k", 1)
    assert error_of(r, "EXPIRE", "k", "9223372036854775") == "invalid expire time in 'expire' command"
    assert error_of(r, "PEXPIRE", "k", "9223372036854775807") == "invalid expire time in 'pexpire' command"
    assert error_of(r, "EXPIREAT", "k", "9223372036854776") == "invalid expire time in 'expireat' command"
    assert error_of(r, "EXPIRE", "k", "-9223372036854776") == "invalid expire time in 'expire' command"
    assert error_of(r, "EXPIRE", "k", "99999999999999999999") == "value is not an integer or out of range"
    assert r.pexpireat("k", 9223372036854775807) is True
    assert r.pexpiretime("k") == 9223372036854775807


def test_persist(r):
    assert r.persist("nope") is False
    r.set("k", 1)
    assert r.persist("k") is False
    r.expire("k", 100)
    assert r.persist("k") is True
    assert r.ttl("k") == -1


def test_lazy_expiry(r):
    r.set("k", 1, px=100_000)  # long enough to be there on any machine
    assert r.exists("k") == 1
    r.pexpire("k", 20)
    time.sleep(0.05)  # at least 50 ms: past the 20 ms, however slow the machine
    assert r.exists("k") == 0
    assert r.get("k") is None
    assert r.ttl("k") == -2
    assert r.dbsize() == 0


def test_active_expiry(r):
    r.mset({f"k{i}": i for i in range(300)})
    for i in range(300):
        r.pexpire(f"k{i}", 20)
    r.set("stay", 1)
    deadline = time.monotonic() + 5
    while r.dbsize() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 1  # removed without being touched


def scan_all(r, **kw) -> list[bytes]:
    cursor, found = 0, []
    while True:
        cursor, keys = r.scan(cursor, **kw)
        found.extend(keys)
        if cursor == 0:
            return found


def test_scan_full_iteration(r):
    r.mset({f"key:{i}": i for i in range(1000)})
    found = scan_all(r)
    assert sorted(found) == sorted(f"key:{i}".encode() for i in range(1000))
    assert len(found) == 1000
    assert sorted(scan_all(r, count=1000 * 3)) == sorted(found)


def test_scan_match_count_type(r):
    r.mset({f"a:{i}": i for i in range(50)})
    r.mset({f"b:{i}": i for i in range(50)})
    assert sorted(scan_all(r, match="a:*", count=7)) == sorted(f"a:{i}".encode() for i in range(50))
    assert sorted(scan_all(r, match="*", count=7)) == sorted(scan_all(r))
    assert len(scan_all(r, _type="string")) == 100
    assert scan_all(r, _type="STRING") != [] and scan_all(r, _type="hash") == []
    assert r.execute_command("SCAN", "0", "TYPE", "nosuchtype")[1] == []


def test_scan_guarantee_under_concurrent_writes(r, r2):
    """Keys present for the whole iteration are all returned while others are added and removed."""
    r.mset({f"stable:{i}": i for i in range(500)})
    r.mset({f"churn:{i}": i for i in range(500)})
    cursor, found, step = 0, set(), 0
    while True:
        cursor, keys = r.scan(cursor, count=20)
        found.update(keys)
        step += 1
        r2.delete(f"churn:{step}", f"churn:{step + 250}")
        r2.set(f"new:{step}", 1)
        if step % 7 == 0:  # another client's iteration takes new snapshots meanwhile
            r2.scan(0, count=5)
        if cursor == 0:
            break
    assert {f"stable:{i}".encode() for i in range(500)} <= found


def test_scan_errors(r):
    assert error_of(r, "SCAN", "x") == "invalid cursor"
    assert error_of(r, "SCAN", "-1") == "invalid cursor"  # Redis 8's string2ull; 7.x's strtoul wrapped it
    assert error_of(r, "SCAN", "18446744073709551616") == "invalid cursor"
    assert error_of(r, "SCAN", "0", "COUNT", "0") == "syntax error"
    assert error_of(r, "SCAN", "0", "COUNT", "x") == "value is not an integer or out of range"
    assert error_of(r, "SCAN", "0", "MATCH") == "syntax error"
    assert error_of(r, "SCAN", "0", "FOO", "bar") == "syntax error"
    assert r.execute_command("SCAN", "18446744073709551615")[0] in (b"0", 0)
    assert r.execute_command("SCAN", " 5")[0] in (b"0", 0)  # Redis 8 reads it with strtoull, as 7.x did not


def test_scan_skips_expired(r):
    r.set("live", 1)
    r.set("dead", 1, px=1)
    time.sleep(0.01)
    assert scan_all(r) == [b"live"]
    assert r.dbsize() == 1  # SCAN removed it on the way


def test_arity_errors(r):
    for args in (("EXISTS",), ("TYPE",), ("KEYS",), ("RENAME", "a"), ("EXPIRE", "a"), ("TTL",), ("PERSIST",), ("SWAPDB", "0")):
        assert error_of(r, *args) == f"wrong number of arguments for '{args[0].lower()}' command"


def test_touch(r):
    r.mset({"a": 1, "b": 2})
    assert r.touch("a", "a", "b", "nope") == 3


def test_move(r):
    r.set("a", 1, ex=100)
    assert r.move("a", 1) is True
    assert r.exists("a") == 0
    assert error_of(r, "MOVE", "a", "0") == "source and destination objects are the same"
    assert error_of(r, "MOVE", "a", "x") == "value is not an integer or out of range"
    assert error_of(r, "MOVE", "a", "99") == "DB index is out of range"
    assert r.move("nope", 1) is False
    r.execute_command("SELECT", 1)
    assert r.get("a") == b"1" and r.ttl("a") > 0  # the TTL moves along
    r.execute_command("SELECT", 0)
    r.set("a", 2)
    assert r.move("a", 1) is False  # present in the target: nothing moves
    assert r.get("a") == b"2"


def test_copy(r):
    r.set("a", 1, ex=100)
    assert r.copy("a", "b") is True
    assert r.get("b") == b"1" and r.ttl("b") > 0
    assert r.copy("a", "b") is False
    r.set("a", 2)
    assert r.copy("a", "b", replace=True) is True and r.get("b") == b"2" and r.ttl("b") == -1
    assert r.copy("a", "a", destination_db=1) is True
    assert r.copy("nope", "x") is False
    assert error_of(r, "COPY", "a", "a") == "source and destination objects are the same"
    assert error_of(r, "COPY", "a", "a", "DB", "0") == "source and destination objects are the same"
    assert error_of(r, "COPY", "a", "d", "FOO") == "syntax error"
    assert error_of(r, "COPY", "a", "d", "DB") == "syntax error"
    assert error_of(r, "COPY", "a", "d", "DB", "100") == "DB index is out of range"
    r.execute_command("SELECT", 1)
    assert r.get("a") == b"2"


def test_copy_stream_is_independent(r):
    r.xadd("s", {"f": "v"}, id="1-1")
    assert r.copy("s", "s2") is True
    r.xadd("s", {"f": "w"}, id="2-1")
    assert r.xlen("s2") == 1 and r.xlen("s") == 2


def test_object(r):
    r.mset({"small": 123, "big": 12345, "text": "abc", "long": "x" * 45, "neg": -5})
    assert r.object("encoding", "small") == b"int"
    assert r.object("refcount", "small") == 1  # Redis 8 no longer shares 0..9999 as a key's value (7.x: INT_MAX)
    assert r.object("refcount", "big") == 1
    assert r.object("encoding", "text") == b"embstr"
    assert r.object("encoding", "long") == b"raw"
    assert r.object("encoding", "neg") == b"int"
    assert r.object("encoding", "nope") is None
    assert r.object("idletime", "text") == 0
    assert error_of(r, "OBJECT", "FREQ", "text").startswith("An LFU maxmemory policy is not selected")
    assert error_of(r, "OBJECT", "FOO", "x") == "unknown subcommand 'FOO'. Try OBJECT HELP."
    assert r.execute_command("OBJECT", "HELP")[0] in (b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                                                      "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")


def test_scan_cursor_edge_forms(r):
    r.set("k", 1)
    assert error_of(r, "SCAN", "1" * 5000) == "invalid cursor"  # out of range, not a dropped connection
    assert r.scan("0" * 5000 + "0") == (0, [b"k"])  # leading zeros are fine for strtoul
    assert r.ping()
