"""Keys, strings and expiry: INCR/MSET/EXPIRE/SET-with-options throughput, SCAN, active expiry.

- redis-benchmark rows (50 clients, -P 16) for commands beyond the
  foundation suite's GET/SET: INCR, MSET of 10 keys, SET EX, EXPIRE, EXISTS;
- a full SCAN iteration (COUNT 100) over a loaded keyspace: wall time, and
  the first step alone (Millrace snapshots the keys in hash order at SCAN 0);
- active expiry: keys given a short TTL and then left alone; the time until
  the server's own cron has removed them all (DBSIZE 0), nobody touching them.
"""

from __future__ import annotations

import contextlib
import time

from .harness import Env, Row, Target, load_pipelined, pack

SUITE = "keyspace"


def run(env: Env) -> list[Row]:
    rows: list[Row] = []
    keys = env.pick(200_000, 20_000)
    requests = env.pick(500_000, 40_000)
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        commands = [
            ("INCR", ("INCR", "counter:__rand_int__")),
            ("MSET (10 keys)", ("MSET", *[part for i in range(10) for part in (f"k{i}:__rand_int__", "v")])),
            ("SET key value EX 100", ("SET", "key:__rand_int__", "value", "EX", "100")),
            ("EXPIRE", ("EXPIRE", "key:__rand_int__", "100")),
            ("EXISTS", ("EXISTS", "key:__rand_int__")),
        ]
        for label, command in commands:
            row = Row(SUITE, f"{label} -c 50 -P 16", "req/s", target=Target("ratio_min", 0.3))
            env.benchmark_row(row, servers, command, pipeline=16, requests=requests, keyspace=100_000)
            rows.append(row)
        rows.extend(_scan_rows(env, servers, keys))
        rows.append(_expiry_row(env, servers, keys))
    return rows


def _load(server, count: int, ttl_ms: int | None = None) -> None:
    server.flushall()
    if ttl_ms is None:
        load_pipelined(server, (pack("SET", f"key:{i}", "v") for i in range(count)))
    else:
        load_pipelined(server, (pack("SET", f"key:{i}", "v", "PX", str(ttl_ms)) for i in range(count)))


def _scan_rows(env: Env, servers: dict, keys: int) -> list[Row]:
    full = Row(SUITE, f"SCAN COUNT 100, full iteration over {keys} keys", "s")
    first = Row(SUITE, f"SCAN 0 COUNT 100 (first step) over {keys} keys", "ms")
    for kind, server in servers.items():
        env.log(f"{SUITE}: SCAN on {kind}")
        _load(server, keys)
        with server.connect(timeout=300) as conn:
            started = time.perf_counter()
            cursor, found = conn.call("SCAN", "0", "COUNT", "100")
            setattr(first, kind, (time.perf_counter() - started) * 1000)
            seen = len(found)
            while cursor != b"0":
                cursor, found = conn.call("SCAN", cursor, "COUNT", "100")
                seen += len(found)
            setattr(full, kind, time.perf_counter() - started)
            full.extra[kind] = {"keys_returned": seen}
        server.flushall()
    full.note = "one client, one step at a time"
    first.note = "Millrace sorts the keys by hash at SCAN 0"
    return [full, first]


def _expiry_row(env: Env, servers: dict, keys: int) -> Row:
    row = Row(SUITE, f"active expiry of {keys} untouched keys", "s")
    for kind, server in servers.items():
        env.log(f"{SUITE}: active expiry on {kind}")
        _load(server, keys, ttl_ms=1000)
        loaded = time.perf_counter()
        time.sleep(1.0)
        with server.connect(timeout=60) as conn:
            deadline = loaded + 600
            while conn.call("DBSIZE") and time.perf_counter() < deadline:
                time.sleep(0.05)
            setattr(row, kind, time.perf_counter() - loaded - 1.0)
    row.note = "from the moment the TTLs ran out until DBSIZE is 0"
    return row
