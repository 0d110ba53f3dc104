"""Idempotent production (issue 21, Redis 8.6), Millrace beside itself: the oracle (Redis 8.2.3) has no IDMP.

redis-benchmark, 50 clients, -P 16, on one key,
`XADD key IDMPAUTO <pid> * sensor-id __rand_int__ temperature 10.5` (-r 10^9:
entries almost always new, so each one is hashed, looked up, recorded, and
past 100 per producer evicts the oldest: the steady state) against the same
XADD without IDMPAUTO, and `IDMP <pid> __rand_int__` with an explicit iid.
Redis 8.2.3 has no IDMP, so the figure is Millrace against itself (target
>= 0.8): the server's CPU time per request of plain XADD over IDMPAUTO's (the
lowest of `env.rounds` interleaved rounds, the three commands in reverse order
every other round, so what drifts within a round, the heap's growth or a
neighbour's load, falls on each alike), and the same for the best rounds' req/s
(info: the client and the load are in it). On this shared machine the CPU time
per request itself moves with the load, by more than the IDMP path's changes,
so the suite also counts instructions per request with callgrind
(bench/idmp_instructions.py: the same commands, the whole request path in
process; info rows, left out without valgrind).
"""

from __future__ import annotations

from .harness import ROOT, Env, Row, Target
from .idmp_instructions import instructions_per_request


def idmp_rows(env: Env, suite: str) -> list[Row]:
    names = [
        ("XADD -c 50 -P 16 (plain, random values)", "req/s"),
        ("XADD IDMPAUTO -c 50 -P 16", "req/s"),
        ("XADD IDMP pid iid -c 50 -P 16", "req/s"),
        ("XADD IDMPAUTO / plain XADD (Millrace, server CPU per request)", "x"),
        ("XADD IDMPAUTO / plain XADD (Millrace, req/s)", "x"),
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
        for round_ in range(env.rounds):  # the three interleaved per round, so a neighbour's load hits them alike
            pairs = list(zip(rows, commands, strict=True))
            for row, command in pairs if round_ % 2 == 0 else pairs[::-1]:
                env.rounds, saved = 1, env.rounds
                try:
                    env.benchmark_row(row, servers, command, pipeline=16, requests=requests, keyspace=1_000_000_000)
                finally:
                    env.rounds = saved
        info = server.call("XINFO", "STREAM", "bench:auto")
        fields_info = dict(zip(info[0::2], info[1::2], strict=True))
    plain, auto, _explicit = rows
    note = f"IDMPAUTO stream: iids-added {fields_info.get(b'iids-added')}, duplicates {fields_info.get(b'iids-duplicates')}"
    by_cpu = Row(suite, names[3][0], "x", target=Target("min", 0.8), note=f"plain's lowest CPU us/request over IDMPAUTO's; {note}")
    cpu_plain = min(plain.extra["millrace"]["cpu_us_per_request"])
    cpu_auto = min(auto.extra["millrace"]["cpu_us_per_request"])
    if cpu_auto:
        by_cpu.millrace = cpu_plain / cpu_auto
        by_cpu.extra = {"cpu_us_per_request": {"plain": cpu_plain, "idmpauto": cpu_auto}}
    by_rps = Row(suite, names[4][0], "x", note="best rounds' req/s: the client and the machine's load are in it")
    if plain.millrace and auto.millrace:
        by_rps.millrace = auto.millrace / plain.millrace
    return [*rows, by_cpu, by_rps, *instruction_rows(env, suite)]


def instruction_rows(env: Env, suite: str) -> list[Row]:
    """Instructions per request, plain XADD and IDMPAUTO, and their ratio (plain's over IDMPAUTO's, as the CPU row)."""
    names = {
        "plain": "XADD instructions per request (plain, in process, callgrind)",
        "auto": "XADD IDMPAUTO instructions per request (in process, callgrind)",
    }
    warm, reads = env.pick((200, 300), (50, 50))
    rows = {kind: Row(suite, name, "instr") for kind, name in names.items()}
    ratio = Row(suite, "XADD IDMPAUTO / plain XADD (Millrace, instructions per request)", "x")
    ratio.note = "plain's instructions per request over IDMPAUTO's (callgrind, 16 requests per read)"
    for kind, row in rows.items():
        env.log(f"{suite}: {row.name}")
        row.millrace = instructions_per_request(env.millrace_root or ROOT, kind, warm, reads)
        if row.millrace is None:
            row.skipped = "n/a (no valgrind)"
    if rows["plain"].millrace and rows["auto"].millrace:
        ratio.millrace = rows["plain"].millrace / rows["auto"].millrace
    else:
        ratio.skipped = "n/a (no valgrind)"
    return [*rows.values(), ratio]
