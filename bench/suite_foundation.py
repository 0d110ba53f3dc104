"""Foundation (issue 2): PING, SET and GET with redis-benchmark, 50 clients.

Unpipelined and with -P 16, against Redis, Millrace and the thin Python server
(bench/thin_server.py, the Python ceiling). All three servers are started
first; each row then runs redis-benchmark on Redis, Millrace and the thin
server back to back with identical settings, in `env.rounds` interleaved rounds
(best of them), so a load change on the shared machine hits the three
figures of one row alike. Only one server is ever
under load at a time (the idle ones do nothing). The unpipelined rows are
followed by each server's CPU time per request (`harness.cpu_row`), the figure
that does not depend on how fast redis-benchmark runs on this machine.
"""

from __future__ import annotations

import contextlib

from .harness import Env, Row, Target, cpu_row

SUITE = "foundation"
TESTS = (("PING", "ping_mbulk", "PING_MBULK"), ("SET", "set", "SET"), ("GET", "get", "GET"))


def run(env: Env) -> list[Row]:
    modes = [
        (1, env.pick(60_000, 4_000), Target("ratio_min", 0.9)),
        (16, env.pick(600_000, 40_000), Target("ratio_min", 0.3)),
    ]
    rows = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace", "thin")}
        for pipeline, requests, target in modes:
            for label, test, result_name in TESTS:
                row = Row(SUITE, f"{label} -c 50 -P {pipeline}", "req/s", target=target)
                env.benchmark_row(row, servers, tests=test, result_name=result_name, pipeline=pipeline, requests=requests, keyspace=100_000)
                rows.append(row)
        rows += [cpu_row(row) for row in rows if row.name.endswith("-P 1")]
    return rows
