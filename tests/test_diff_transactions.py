"""Differential: transactions against conditions that arise after queueing, and WATCH of expired keys.

Redis judges EXEC by the flags of what it queued (a write, a command that
may grow memory, one a stale replica may not run): a READONLY, NOREPLICAS,
MASTERDOWN or OOM condition that began after the commands were queued
refuses the EXEC (EXECABORT, counted as a rejected call). WATCH notes a key
already past its TTL instead of removing it, and that key's later removal is
no change. SET over a key past its TTL removes it first (an `expired` event,
expired_keys), as Redis's lookupKeyWrite.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.rawclient import RawConn
from tests.servers import require_redis, start_millrace, start_redis


@pytest.fixture(scope="module")
def pair():
    require_redis()
    millrace = start_millrace("--enable-debug-command", "yes")
    try:
        redis = start_redis("--enable-debug-command", "yes")
    except Exception:
        millrace.stop()
        raise
    yield millrace, redis
    millrace.stop()
    redis.stop()


def rejected_exec(port: int) -> list:
    """Each condition set by another client after MULTI ...: EXEC's reply, then exec's commandstats."""
    n, admin = RawConn(port), RawConn(port)
    admin.call("FLUSHALL")
    admin.call("CONFIG", "RESETSTAT")
    seen = []
    cases = [
        ((("SET", "a", "1"), ("XADD", "s", "1-1", "f", "v")), ("REPLICAOF", "127.0.0.1", "1"), ("REPLICAOF", "NO", "ONE")),
        ((("SET", "a", "1"),), ("CONFIG", "SET", "min-replicas-to-write", "1"), ("CONFIG", "SET", "min-replicas-to-write", "0")),
        ((("XADD", "s", "1-1", "f", "v"), ("GET", "a")), ("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),
        ((("GET", "a"), ("PING",)), ("CONFIG", "SET", "maxmemory", "1"), ("CONFIG", "SET", "maxmemory", "0")),  # no denyoom: runs
    ]
    for queued, condition, undo in cases:
        n.call("MULTI")
        for argv in queued:
            n.call(*argv)
        admin.call(*condition)
        try:
            seen.append(str(n.call("EXEC")))
        finally:
            admin.call(*undo)
    admin.call("CONFIG", "SET", "replica-serve-stale-data", "no")
    n.call("MULTI")
    n.call("GET", "a")
    n.call("XLEN", "s")
    admin.call("REPLICAOF", "127.0.0.1", "1")  # a primary that never answers: the link stays down
    try:
        seen.append(str(n.call("EXEC")))
    finally:
        admin.call("REPLICAOF", "NO", "ONE")
        admin.call("CONFIG", "SET", "replica-serve-stale-data", "yes")
    seen.append(admin.call("EXISTS", "a", "s"))
    stats = admin.call("INFO", "commandstats").decode()
    seen.append(re.search(r"cmdstat_exec:calls=(\d+),.*rejected_calls=(\d+),failed_calls=(\d+)", stats).groups())
    n.close()
    admin.close()
    return seen


def test_exec_is_refused_for_what_it_queued(pair):
    millrace, redis = pair
    ours, theirs = rejected_exec(millrace.port), rejected_exec(redis.port)
    assert ours == theirs
    assert theirs[0].startswith("EXECABORT Transaction discarded because of: READONLY")
    assert theirs[-2:] == [0, ("1", "4", "0")]


def watch_expired(port: int) -> list:
    conn, other = RawConn(port), RawConn(port)
    conn.call("FLUSHALL")
    conn.call("CONFIG", "RESETSTAT")
    conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    seen = []
    try:
        conn.call("SET", "k", "1", "PX", "1")
        conn.call("SET", "j", "1", "PX", "1")
        time.sleep(0.05)
        conn.call("WATCH", "k", "j")  # both past their TTL: noted, not removed
        seen.append(conn.call("DBSIZE"))
        seen.append(re.search(r"expired_keys:(\d+)", conn.call("INFO", "stats").decode()).group(1))
        other.call("GET", "k")  # the lazy removal of a key expired when watched is no change
        conn.call("MULTI")
        conn.call("PING")
        seen.append(conn.call("EXEC"))
        conn.call("WATCH", "j")
        other.call("SET", "j", "2")  # a key expired when watched, then written (SET removes it first)
        conn.call("MULTI")
        conn.call("PING")
        seen.append(conn.call("EXEC"))
        seen.append(re.search(r"expired_keys:(\d+)", conn.call("INFO", "stats").decode()).group(1))
    finally:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        conn.close()
        other.close()
    return seen


def test_watch_notes_an_expired_key_and_its_removal_is_no_change(pair):
    millrace, redis = pair
    ours, theirs = watch_expired(millrace.port), watch_expired(redis.port)
    assert ours == theirs
    assert theirs == [2, "0", [b"PONG"], None, "2"]  # a written one is a change


def set_over_expired(port: int) -> list:
    """SET (each fast form and one with options) and MSET over a key past its TTL: expired_keys counts each removal."""
    conn = RawConn(port)
    conn.call("FLUSHALL")
    conn.call("CONFIG", "RESETSTAT")
    conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    seen = []
    try:
        forms = (("SET", "x", "2"), ("SET", "x", "3", "EX", "100"), ("SET", "x", "4", "PXAT", "99999999999999"), ("SET", "x", "5", "KEEPTTL"), ("MSET", "x", "6", "y", "1"))
        for form in forms:
            conn.call("SET", "x", "1", "PX", "1")
            time.sleep(0.02)
            conn.call(*form)
            seen.append((conn.call("GET", "x"), conn.call("PTTL", "x") > 0))
        seen.append(re.search(r"expired_keys:(\d+)", conn.call("INFO", "stats").decode()).group(1))
    finally:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        conn.close()
    return seen


def test_set_over_an_expired_key_removes_it_first(pair):
    millrace, redis = pair
    ours, theirs = set_over_expired(millrace.port), set_over_expired(redis.port)
    assert ours == theirs
    assert theirs[-1] == "5"


def aof_after(proc, *transaction: tuple) -> bytes:
    """The AOF increments' bytes once `transaction` ran (AOF turned on at run time, its rewrite done)."""
    conn = RawConn(proc.port)
    conn.call("MULTI")
    for argv in transaction:
        conn.call(*argv)
    conn.call("EXEC")
    conn.close()
    directory = __import__("pathlib").Path(proc.dir) / "appendonlydir"
    return b"".join(path.read_bytes() for path in sorted(directory.glob("*.incr.aof")))


def test_a_transaction_of_one_write_is_propagated_alone(pair):
    """Redis 7+ wraps an EXEC's propagation in MULTI/EXEC only when it has more than one command."""
    for proc in pair:
        conn = RawConn(proc.port)
        conn.call("FLUSHALL")
        conn.call("CONFIG", "SET", "appendfsync", "always")
        conn.call("CONFIG", "SET", "appendonly", "yes")
        deadline = time.monotonic() + 20
        while not re.search(r"aof_enabled:1\r\n.*aof_rewrite_in_progress:0\r\n.*aof_rewrite_scheduled:0", conn.call("INFO", "persistence").decode(), re.S):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        try:
            one = aof_after(proc, ("SET", "a", "1"), ("GET", "a"))
            assert b"SET" in one and b"MULTI" not in one, proc.name
            two = aof_after(proc, ("SET", "b", "1"), ("SET", "c", "1"))
            assert b"MULTI" in two, proc.name
        finally:
            conn.call("CONFIG", "SET", "appendonly", "no")
            conn.close()


def test_each_exec_reply_is_in_the_protocol_it_was_made_in(pair):
    """A HELLO queued in MULTI switches the protocol midway: the replies before it are RESP2, those after
    (HELLO's own included) RESP3, as Redis writes each reply as it runs."""
    for proc in pair:
        conn = RawConn(proc.port)
        conn.call("DEL", "nokey")
        conn.send(b"MULTI\r\nGET nokey\r\nCONFIG GET maxclients\r\nHELLO 3\r\nGET nokey\r\nCONFIG GET maxclients\r\nEXEC\r\n")
        out = conn.read_raw(until=b"%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n")
        conn.close()
        body = out.split(b"+QUEUED\r\n")[-1]
        assert body.startswith(b"*5\r\n$-1\r\n*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n%7\r\n"), proc.name
        assert body.endswith(b"_\r\n%1\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"), proc.name


def watch_across_reload(port: int) -> list:
    conn, other = RawConn(port), RawConn(port)
    conn.call("FLUSHALL")
    conn.call("SET", "k", "1")
    seen = []
    for watched, reload in (("k", ("DEBUG", "RELOAD")), ("missing", ("DEBUG", "RELOAD")), ("k", ("DEBUG", "RELOAD", "NOSAVE"))):
        conn.call("WATCH", watched)
        other.call(*reload)
        conn.call("MULTI")
        conn.call("PING")
        seen.append(conn.call("EXEC"))
    conn.close()
    other.close()
    return seen


def test_a_reloaded_dataset_invalidates_the_watches_on_keys_it_held(pair):
    """DEBUG RELOAD (and a replica's full sync, the same path) replaces the data: as Redis's emptyData,
    each WATCHed key that existed is touched; one that did not stays untouched."""
    millrace, redis = pair
    ours, theirs = watch_across_reload(millrace.port), watch_across_reload(redis.port)
    assert ours == theirs == [None, [b"PONG"], None]


def watch_expired_then_flush(port: int) -> list:
    """A key past its TTL when WATCHed, then its database emptied or replaced: no change (touchAllWatchedKeysInDb)."""
    conn, other = RawConn(port), RawConn(port)
    seen = []
    conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for flush in (("FLUSHALL",), ("FLUSHDB",), ("SWAPDB", "0", "1"), ("DEBUG", "RELOAD")):
            conn.call("FLUSHALL")
            conn.call("SET", "k", "v", "PX", "1")
            time.sleep(0.02)
            conn.call("WATCH", "k")
            other.call(*flush)
            conn.call("MULTI")
            conn.call("PING")
            seen.append(conn.call("EXEC"))
    finally:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        conn.close()
        other.close()
    return seen


def test_an_expired_watched_key_flushed_away_is_no_change(pair):
    millrace, redis = pair
    ours, theirs = watch_expired_then_flush(millrace.port), watch_expired_then_flush(redis.port)
    assert ours == theirs == [[b"PONG"]] * 4


def swapped_in_dead_key(port: int) -> list:
    """WATCH of an absent key, then SWAPDB brings in that key already past its TTL: no change yet (Redis
    notes it expired); its later removal is none either, but a write to it is."""
    conn, other = RawConn(port), RawConn(port)
    seen = []
    conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        for then in (("GET", "k"), ("SET", "k", "2")):
            conn.call("FLUSHALL")
            conn.call("SELECT", "1")
            conn.call("SET", "k", "v", "PX", "1")
            conn.call("SELECT", "0")
            time.sleep(0.02)
            conn.call("WATCH", "k")
            other.call("SWAPDB", "0", "1")
            other.call(*then)
            conn.call("MULTI")
            conn.call("PING")
            seen.append(conn.call("EXEC"))
    finally:
        conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        conn.close()
        other.close()
    return seen


def test_a_dead_key_swapped_in_under_a_watch_is_no_change(pair):
    millrace, redis = pair
    ours, theirs = swapped_in_dead_key(millrace.port), swapped_in_dead_key(redis.port)
    assert ours == theirs == [[b"PONG"], None]
