"""Foundation (issue 2): PING, SET and GET with redis-benchmark, 50 clients.

Unpipelined and with -P 16, against Redis, Millrace and the thin Python server
(bench/thin_server.py, the Python ceiling). All three servers are started
first; each row then runs redis-benchmark on Redis, Millrace and the thin
server back to back with identical settings, so a load change on the shared
machine hits the three figures of one row alike. Only one server is ever
under load at a time (the idle ones do nothing).
"""

from __future__ import annotations

import contextlib

from .harness import Env, Row, Target

SUITE = "foundation"
TESTS = (("PING", "ping_mbulk", "PING_MBULK"), ("SET", "set", "SET"), ("GET", "get", "GET"))


def run(env: Env) -> list[Row]:
    modes = [
        (1, env.pick(200_000, 4_000), Target("ratio_min", 0.9)),
        (16, env.pick(2_000_000, 40_000), Target("ratio_min", 0.3)),
    ]
    rows = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace", "thin")}
        for pipeline, requests, target in modes:
            for label, test, result_name in TESTS:
                row = Row(SUITE, f"{label} -c 50 -P {pipeline}", "req/s", target=target)
                for kind, server in servers.items():
                    env.log(f"{row.name} on {kind}")
                    result = env.redis_benchmark(server, tests=test, pipeline=pipeline, requests=requests, keyspace=100_000)[result_name]
                    setattr(row, kind, result.rps)
                    row.extra[kind] = {"p50_ms": result.p50_ms, "p99_ms": result.p99_ms}
                rows.append(row)
    return rows
