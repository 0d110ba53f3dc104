"""Key-ordered delivery (issue 22): a KEYSHARED group's XREADGROUP + XACK throughput, and what draining costs.

- XREADGROUP COUNT 10 `>` then XACK, 50 consumers, unpipelined (bench/loadgen.py,
  with `empty_ok`: a KEYSHARED consumer whose keys are not there yet gets nil and
  asks again, counted in the JSON as `empty`), on `bench:ks`: entries with a
  `key` field over 1,000 keys. Each round creates a fresh plain group and a
  fresh KEYSHARED group at 0 and runs the same load on each, in turn; best of
  `env.rounds`. Rows: Redis's plain group (what Redis can do at all), Millrace's
  plain and KEYSHARED groups, and KEYSHARED / plain on Millrace (the issue's
  target: >= 0.7), with each round's own ratio in the JSON (`per_round`: the
  KEYSHARED run against the plain run just before it).
- Memory per draining hash: `bench:drain` gets one entry per key for 50,000
  keys; a plain group and a KEYSHARED group each have everything delivered to
  one consumer `A` (unacknowledged); then `B` joins the KEYSHARED group, and the
  hashes the ring moves to B drain at A. The KEYSHARED group's extra memory
  (Millrace's RSS growth for its read, less the plain group's for the same
  read, both after an unmeasured NOACK read of the same size so that the
  reply's transient memory is in RSS already) is divided by the draining hashes XINFO KEYSHARED reports, and by the
  pending hashes. Draining is derived from the PEL index here, so B's join
  itself allocates nothing per hash; PIP-379 estimates 52-80 bytes per
  draining hash in Pulsar. RSS figures are noisy at this size.
"""

from __future__ import annotations

from statistics import median

import hiredis

from .harness import Env, Row, Server, Target, load_pipelined, pack
from .loadgen import run_load

SUITE = "keyshared"


def run(env: Env) -> list[Row]:
    stream_len = env.pick(1_000_000, 50_000)
    keys = 1000
    drain_keys = env.pick(50_000, 5_000)
    seconds = env.pick(4.0, 1.0)
    names = [
        ("XREADGROUP COUNT 10 > + XACK, plain group, -c 50", "pairs/s"),
        ("XREADGROUP COUNT 10 > + XACK, KEYSHARED group, -c 50", "pairs/s"),
        ("KEYSHARED / plain group (Millrace)", "x"),
        ("KEYSHARED index memory per draining hash", "bytes"),
        ("KEYSHARED index memory per pending hash", "bytes"),
    ]
    if not env.millrace_supports(("XINFO", "KEYSHARED", "bench:none", "g")):
        return env.unsupported(SUITE, names, "KEYSHARED groups (XINFO KEYSHARED)")
    rows = [Row(SUITE, name, unit) for name, unit in names]
    plain_row, ks_row, share_row, per_draining, per_pending = rows
    plain_row.target = Target("ratio_min", 0.3)
    plain_row.note = f"{stream_len} entries over {keys} keys; the groups suite's load on a keyed stream"
    ks_row.note = "Redis has no KEYSHARED groups; see the next row for the comparison"
    share_row.target = Target("min", 0.7)
    share_row.note = "same load, same server, fresh groups each round (best of rounds each)"
    per_draining.note = "(RSS growth of the KEYSHARED read - the plain read's) / draining hashes; Pulsar's estimate: 52-80 B"
    per_pending.note = "the same extra memory / hashes with pending entries"
    for kind in env.kinds("redis", "millrace"):
        with env.server(kind) as server:
            env.log(f"keyshared: loading {stream_len} keyed entries into {kind}")
            load_pipelined(server, (pack("XADD", "bench:ks", "*", "key", f"k{i % keys}", "temperature", "10.5") for i in range(stream_len)))
            best: dict[str, object] = {}
            runs: dict[str, list] = {"plain": [], "keyshared": []}
            modes = ["plain", "keyshared"] if kind == "millrace" else ["plain"]
            for index in range(env.rounds):
                for mode in modes:
                    group = f"{mode}{index}"
                    extra = ("KEYSHARED", "key") if mode == "keyshared" else ()
                    server.call("XGROUP", "CREATE", "bench:ks", group, "0", *extra)
                    env.log(f"keyshared: {mode} load on {kind} (run {index + 1})")
                    result = run_load(server.port, "bench:ks", group, clients=50, processes=2, count=10, seconds=seconds, empty_ok=True)
                    runs[mode].append(result)
                    server.call("XGROUP", "DESTROY", "bench:ks", group)
            for mode in modes:
                best[mode] = max(runs[mode], key=lambda result: result.pairs_per_second)
            setattr(plain_row, kind, best["plain"].pairs_per_second)
            plain_row.extra[kind] = {"pairs_per_second": [round(r.pairs_per_second) for r in runs["plain"]]}
            if kind == "millrace":
                ks_row.millrace = best["keyshared"].pairs_per_second
                ks_row.extra["millrace"] = {
                    "pairs_per_second": [round(r.pairs_per_second) for r in runs["keyshared"]],
                    "empty_reads": [r.empty for r in runs["keyshared"]],
                    "exhausted": any(r.exhausted for r in runs["keyshared"]),
                }
                share_row.millrace = ks_row.millrace / plain_row.millrace
                # each round's KEYSHARED run against the plain run just before it (the machine's drift cancels)
                paired = [k.pairs_per_second / p.pairs_per_second for p, k in zip(runs["plain"], runs["keyshared"], strict=True)]
                share_row.extra["millrace"] = {"per_round": [round(r, 3) for r in paired], "median_per_round": round(median(paired), 3)}
                draining, pending_hashes, extra_bytes = drain_memory(server, drain_keys, env)
                per_draining.millrace = extra_bytes / draining if draining else None
                per_pending.millrace = extra_bytes / pending_hashes if pending_hashes else None
                per_draining.extra["millrace"] = {"draining": draining, "pending_hashes": pending_hashes, "extra_bytes": extra_bytes}
    return rows


def _flat_map(reply) -> dict:
    return dict(zip(reply[::2], reply[1::2], strict=True)) if isinstance(reply, list) else reply


def drain_memory(server: Server, keys: int, env: Env) -> tuple[int, int, int]:
    """(draining hashes, pending hashes, extra bytes of the KEYSHARED group's read over the plain group's)."""
    load_pipelined(server, (pack("XADD", "bench:drain", "*", "key", f"user-{i}", "v", "1") for i in range(keys)))
    server.call("XGROUP", "CREATE", "bench:drain", "warm", "0")
    server.call("XGROUP", "CREATE", "bench:drain", "plain", "0")
    server.call("XGROUP", "CREATE", "bench:drain", "ks", "0", "KEYSHARED", "key")
    # A first read of the same size, unmeasured: the reply's transient memory is in RSS before either
    # measured read (else the plain read's growth includes it and the KEYSHARED read reuses it)
    reply = server.call("XREADGROUP", "GROUP", "warm", "W", "NOACK", "STREAMS", "bench:drain", ">")
    del reply
    before = server.rss_bytes()
    reply = server.call("XREADGROUP", "GROUP", "plain", "A", "STREAMS", "bench:drain", ">")
    del reply
    middle = server.rss_bytes()
    reply = server.call("XREADGROUP", "GROUP", "ks", "A", "STREAMS", "bench:drain", ">")
    del reply
    after = server.rss_bytes()
    server.call("XREADGROUP", "GROUP", "ks", "B", "STREAMS", "bench:drain", ">")  # B joins: hashes move and drain at A
    info = _flat_map(server.call("XINFO", "KEYSHARED", "bench:drain", "ks"))
    if isinstance(info, hiredis.ReplyError):
        raise RuntimeError(f"XINFO KEYSHARED: {info}")
    draining, pending_hashes = info[b"draining-hashes"], info[b"pending-hashes"]
    extra = max((after - middle) - (middle - before), 0)
    env.log(f"keyshared: {draining} draining hashes, {pending_hashes} pending hashes, {extra} extra bytes")
    return draining, pending_hashes, extra

