"""Latency tracking (issue 26): what per-command latency histograms cost Millrace's hot path.

Millrace with `latency-tracking yes` (the default, as in Redis) beside Redis, and,
in the third column where the other suites show the thin server, the same Millrace
with `latency-tracking no`: so M/thin is the throughput kept with tracking on,
and the CPU rows give the server time per request with and without it. PING (the
cheapest command, where a fixed cost shows most) and XADD, 50 clients, -P 16,
in interleaved rounds (best of them) as every throughput row.
"""

from __future__ import annotations

import contextlib

from .harness import Env, Row, Target, cpu_row

SUITE = "latency"
NOTE = "thin column: Millrace with latency-tracking no; M/thin = share kept with tracking on"


def run(env: Env) -> list[Row]:
    requests = env.pick(600_000, 40_000)
    rows = []
    with contextlib.ExitStack() as stack:
        servers = {}
        if env.redis_available:
            servers["redis"] = stack.enter_context(env.server("redis"))
        servers["millrace"] = stack.enter_context(env.server("millrace"))
        servers["thin"] = stack.enter_context(env.server("millrace", "--latency-tracking", "no"))
        for label, command, test, result_name in (
            ("PING", (), "ping_mbulk", "PING_MBULK"),
            ("XADD", ("XADD", "bench:latency", "*", "sensor", "s1", "temperature", "21.5"), None, None),
        ):
            row = Row(SUITE, f"{label} -c 50 -P 16, latency-tracking yes", "req/s", target=Target("ratio_min", 0.3), note=NOTE)
            env.benchmark_row(row, servers, command, tests=test, result_name=result_name, pipeline=16, requests=requests)
            rows.append(row)
            cpu = cpu_row(row)
            cpu.note = "thin column: Millrace with latency-tracking no"
            rows.append(cpu)
    return rows
