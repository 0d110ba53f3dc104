"""Idempotent production (issue 21, Redis 8.6), Millrace beside itself: the oracle (Redis 8.2.3) has no IDMP.

redis-benchmark, 50 clients, -P 16, on one key,
`XADD key IDMPAUTO <pid> * sensor-id __rand_int__ temperature 10.5` (-r 10^9:
entries almost always new, so each one is hashed, looked up, recorded, and
past 100 per producer evicts the oldest: the steady state) against the same
XADD without IDMPAUTO, and `IDMP <pid> __rand_int__` with an explicit iid.
Redis 8.2.3 has no IDMP, so the figure is Millrace's IDMPAUTO rate over its own
plain XADD rate (target >= 0.8), best of `env.rounds` interleaved rounds. The
pairs of rows share each round's load on this shared machine; the ratio is
noisy by a few percent from run to run.
"""

from __future__ import annotations

from .harness import Env, Row, Target


def idmp_rows(env: Env, suite: str) -> list[Row]:
    names = [
        ("XADD -c 50 -P 16 (plain, random values)", "req/s"),
        ("XADD IDMPAUTO -c 50 -P 16", "req/s"),
        ("XADD IDMP pid iid -c 50 -P 16", "req/s"),
        ("XADD IDMPAUTO / plain XADD (Millrace)", "x"),
    ]
    if not env.millrace_supports(("XCFGSET", "k", "IDMP-DURATION", "1")):
        return env.unsupported(suite, names, "XADD IDMP/IDMPAUTO")
    requests = env.pick(300_000, 30_000)
    fields = ["sensor-id", "__rand_int__", "temperature", "10.5"]
    commands = [
        ["XADD", "bench:plain", "*", *fields],
        ["XADD", "bench:auto", "IDMPAUTO", "producer-1", "*", *fields],
        ["XADD", "bench:idmp", "IDMP", "producer-1", "__rand_int__", "*", *fields],
    ]
    rows = [Row(suite, name, unit) for name, unit in names[:3]]
    with env.server("millrace") as server:
        servers = {"millrace": server}
        for _ in range(env.rounds):  # the three interleaved per round, so a neighbour's load hits them alike
            for row, command in zip(rows, commands, strict=True):
                env.rounds, saved = 1, env.rounds
                try:
                    env.benchmark_row(row, servers, command, pipeline=16, requests=requests, keyspace=1_000_000_000)
                finally:
                    env.rounds = saved
        info = server.call("XINFO", "STREAM", "bench:auto")
        fields_info = dict(zip(info[0::2], info[1::2], strict=True))
    plain, auto, _explicit = rows
    ratio = Row(
        suite, names[3][0], "x", target=Target("min", 0.8),
        note=f"best rounds; IDMPAUTO stream: iids-added {fields_info.get(b'iids-added')}, duplicates {fields_info.get(b'iids-duplicates')}",
    )  # fmt: skip
    if plain.millrace and auto.millrace:
        ratio.millrace = auto.millrace / plain.millrace
    return [*rows, ratio]
