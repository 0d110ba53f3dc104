"""Features together: what counting a KEYSHARED group's live deferred entries costs XGROUPLAG and XINFO GROUPS.

Lag, entries-read, `deferred` and oldest-undelivered-ms count only live
deferred entries. Stream.delete() takes deleted entries out of the deferred
set, so the count is a pass over the set comparing with first-id (plain head
trims leave dead ones only below it). `bench:ks` gets `n` entries over 1,000
keys; members A and B join a KEYSHARED group with LOOKAHEAD 20000 and A reads
everything, so B's half waits in the deferred set. Rows (Millrace only: Redis
has no KEYSHARED groups): XGROUPLAG and XINFO GROUPS round-trip p50 with that
deferred set, then again after an XDEL of the newest entry (a first version
looked every deferred entry below max-deleted-entry-id up: 84 ms per
XGROUPLAG at 20,000), and XGROUPLAG on a plain group of the same stream.
"""

from __future__ import annotations

import time

from .harness import Env, Row, load_pipelined, pack, percentile

SUITE = "integrate"


def _p50_ms(server, calls: int, *command) -> float:
    samples = []
    with server.connect() as conn:
        for _ in range(calls):
            start = time.perf_counter()
            conn.call(*command)
            samples.append((time.perf_counter() - start) * 1000)
    return percentile(samples, 0.5)


def run(env: Env) -> list[Row]:
    entries = env.pick(40_000, 4_000)
    calls = env.pick(300, 30)
    names = [
        ("XGROUPLAG, plain group (p50)", "ms"),
        ("XGROUPLAG, KEYSHARED group, deferred entries all live (p50)", "ms"),
        ("XINFO GROUPS, KEYSHARED group, deferred entries all live (p50)", "ms"),
        ("XGROUPLAG, KEYSHARED group, after an XDEL (p50)", "ms"),
        ("XINFO GROUPS, KEYSHARED group, after an XDEL (p50)", "ms"),
    ]
    if not env.millrace_supports(("XINFO", "KEYSHARED", "bench:none", "g"), ("XGROUPLAG", "bench:none")):
        return env.unsupported(SUITE, names, "KEYSHARED groups and XGROUPLAG")
    rows = [Row(SUITE, name, unit) for name, unit in names]
    with env.server("millrace") as server:
        server.call("XGROUP", "CREATE", "bench:ks", "plain", "$", "MKSTREAM")
        server.call("XGROUP", "CREATE", "bench:ks", "ks", "$", "KEYSHARED", "key")
        server.call("XGROUP", "SETCONFIG", "bench:ks", "ks", "LOOKAHEAD", "20000")
        for member in ("A", "B"):
            server.call("XREADGROUP", "GROUP", "ks", member, "STREAMS", "bench:ks", ">")
        env.log(f"integrate: {entries} keyed entries, A reads them all")
        load_pipelined(server, (pack("XADD", "bench:ks", "*", "key", f"k{i % 1000}") for i in range(entries)))
        server.call("XREADGROUP", "GROUP", "plain", "x", "COUNT", str(entries // 2), "STREAMS", "bench:ks", ">")
        while server.call("XREADGROUP", "GROUP", "ks", "A", "COUNT", "1000", "STREAMS", "bench:ks", ">"):
            pass
        groups = [dict(zip(g[0::2], g[1::2], strict=True)) for g in server.call("XINFO", "GROUPS", "bench:ks")]
        deferred = next(g[b"deferred"] for g in groups if g[b"name"] == b"ks")
        rows[0].millrace = _p50_ms(server, calls, "XGROUPLAG", "bench:ks", "plain")
        rows[1].millrace = _p50_ms(server, calls, "XGROUPLAG", "bench:ks", "ks")
        rows[2].millrace = _p50_ms(server, calls, "XINFO", "GROUPS", "bench:ks")
        newest = server.call("XREVRANGE", "bench:ks", "+", "-", "COUNT", "1")[0][0]
        server.call("XDEL", "bench:ks", newest)
        rows[3].millrace = _p50_ms(server, calls, "XGROUPLAG", "bench:ks", "ks")
        rows[4].millrace = _p50_ms(server, calls, "XINFO", "GROUPS", "bench:ks")
    for row in rows:
        row.note = f"{entries} entries, {deferred} deferred; {calls} calls, round trip"
    return rows
