"""Differential: INFO stats keyspace_hits/keyspace_misses after each command, Redis vs Millrace.

Redis counts a hit or a miss for each read lookup (lookupKeyRead*), never for
write lookups: GET counts, INCR does not; SET ... GET counts, SET ... NX does not.
Stream commands are compared in tests/test_streams_stats_diff.py.
"""

from __future__ import annotations

import time

from tests.rawclient import hits_and_misses
from tests.servers import require_redis, start_millrace, start_redis

COMMANDS = [
    ("GET", "a"), ("GET", "nope"), ("MGET", "a", "nope", "b", "s"), ("EXISTS", "a", "nope", "a"), ("TYPE", "a"),
    ("TYPE", "nope"), ("STRLEN", "a"), ("STRLEN", "nope"), ("GETRANGE", "a", "0", "1"), ("GETRANGE", "nope", "0", "1"),
    ("GETRANGE", "a", "x", "1"), ("SUBSTR", "nope", "0", "1"), ("TTL", "a"), ("TTL", "nope"), ("PTTL", "a"),
    ("EXPIRETIME", "nope"), ("PEXPIRETIME", "a"), ("INCR", "c"), ("INCR", "a"), ("INCRBYFLOAT", "f", "1"),
    ("APPEND", "a", "x"), ("APPEND", "z", "x"), ("SETRANGE", "a", "0", "y"), ("GETDEL", "nope"), ("GETDEL", "z"),
    ("GETEX", "a"), ("GETEX", "nope"), ("GETEX", "a", "EX", "0"), ("GETSET", "a", "v"), ("GETSET", "n2", "v"),
    ("SET", "a", "v", "GET"), ("SET", "n3", "v", "GET"), ("SET", "a", "v", "NX"), ("SET", "a", "v", "XX"),
    ("SETNX", "a", "v"), ("MSETNX", "a", "1"), ("LCS", "a", "b"), ("LCS", "a", "nope"), ("COPY", "a", "cp"),
    ("COPY", "nope", "cp2"), ("COPY", "a", "cp", "DB", "1"), ("RENAME", "a", "a2"), ("RENAME", "a2", "a"),
    ("RENAMENX", "nope", "x"), ("MOVE", "a", "1"), ("MOVE", "nope", "1"), ("OBJECT", "ENCODING", "b"),
    ("OBJECT", "ENCODING", "nope"), ("OBJECT", "REFCOUNT", "b"), ("OBJECT", "IDLETIME", "nope"),
    ("MEMORY", "USAGE", "b"), ("MEMORY", "USAGE", "nope"), ("TOUCH", "b", "nope"), ("DEL", "b", "nope"),
    ("UNLINK", "cp"), ("PERSIST", "a"), ("PERSIST", "nope"), ("EXPIRE", "a", "100"), ("EXPIRE", "nope", "100"),
    ("KEYS", "*"), ("SCAN", "0"), ("RANDOMKEY",), ("DBSIZE",), ("WATCH", "a", "nope"), ("UNWATCH",),
    ("GET", "s"), ("STRLEN", "s"), ("GETDEL", "s"), ("SET", "s", "v", "GET"), ("TYPE", "s"), ("LCS", "s", "a"),
    ("DECRBY", "s", "1"), ("MSET", "a", "1"), ("SET", "a", "2"),
]  # fmt: skip


# The GETs: a hit and a miss that RESETSTAT must clear.
SETUP = [("MSET", "a", "1", "b", "2"), ("XADD", "s", "1-1", "f", "v"), ("GET", "a"), ("GET", "nope")]


def test_keyspace_hits_and_misses_match_redis(server, oracle_server):
    ours, theirs = hits_and_misses(server.port, SETUP, COMMANDS), hits_and_misses(oracle_server.port, SETUP, COMMANDS)
    for args, got, want in zip(COMMANDS, ours, theirs, strict=True):
        assert got == want, f"after {args}: millrace (hits, misses) {got} != redis {want}"


def expire_cycle_stats(proc) -> list:
    client = proc.client(protocol=2)
    try:
        client.config_resetstat()
        idle = client.info("stats")
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")  # the keys all expire before any cycle runs
        pipe = client.pipeline(transaction=False)
        for i in range(60_000):
            pipe.set(f"cycle{i}", "v", px=1)
        pipe.execute()
        time.sleep(0.05)
        client.config_set("hz", "100")  # a cycle's time cap is 2.5 ms: 60,000 stale keys outlast it, however fast the machine
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        time.sleep(1.0)  # several cycles, the first ones over their time cap: every sample is stale
        busy = client.info("stats")
        client.config_resetstat()
        reset = client.info("stats")
        names = ("expired_stale_perc", "expired_time_cap_reached_count", "expire_cycle_cpu_milliseconds")
        return [[idle[name] for name in names], [busy[name] > 0 for name in names], [reset[name] for name in names]]
    finally:
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        client.close()


def test_active_expiry_statistics_as_redis():
    """INFO expired_stale_perc (a moving average of the expired share of sampled keys), the cycles that hit
    their time cap and their CPU time: they were constants (0.00, 0, 0)."""
    require_redis()
    millrace, redis = start_millrace("--enable-debug-command", "yes"), start_redis("--enable-debug-command", "yes")
    try:
        ours, theirs = expire_cycle_stats(millrace), expire_cycle_stats(redis)
    finally:
        millrace.stop()
        redis.stop()
    assert ours == theirs == [[0, 0, 0], [True, True, True], [0, 0, 0]]
