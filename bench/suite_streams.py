"""Streams (issue 3): XADD and XRANGE throughput, memory per entry, XREAD BLOCK wake-up.

- XADD: redis-benchmark, 50 clients, `XADD <key> * sensor-id 1234 temperature
  10.5` on one key, unpipelined and -P 16 (the thin Python server too).
- XRANGE: `XRANGE <key> - + COUNT 10` on a 100,000-entry stream, 50 clients,
  unpipelined and -P 16.
- Each unpipelined row is followed by each server's CPU time per request
  (`harness.cpu_row`).
- Memory: 1,000,000 entries of `sensor-id 1234 temperature 10.5`, loaded with
  pipelined XADD into a fresh server. Redis: the INFO `used_memory` delta
  (Redis's own accounting). Millrace: the process's RSS delta from
  /proc/<pid>/status (everything the interpreter really holds, allocator slack
  included: the honest number). Shown as bytes per entry.
- XREAD BLOCK wake-up: one client blocks in `XREAD BLOCK 10000 STREAMS key
  <last-id>`; once it waits, another client sends one XADD; the sample is the
  time from sending the XADD to the blocked client receiving its reply
  (both clients are blocking sockets in this process: equal cost for both
  servers). p50 and p99 over many samples, beside a PING round trip sampled
  in turn (the loopback + scheduler part, which on this shared 2-core machine
  moves by tens of microseconds with where the processes run).

Memory is measured on fresh servers, one after another. The throughput rows
start Redis, Millrace and the thin server together and run each row on the
three back to back, best of `env.rounds` interleaved rounds (only one
server is ever under load).
"""

from __future__ import annotations

import contextlib
import time

from .harness import Env, Row, Server, Target, cpu_row, load_pipelined, pack, percentile

SUITE = "streams"
FIELDS = ("sensor-id", "1234", "temperature", "10.5")


def run(env: Env) -> list[Row]:
    if not env.millrace_supports(("XADD",), ("XRANGE",), ("XREAD",)):
        return env.unsupported(
            SUITE,
            [
                ("XADD -c 50 -P 16", "req/s"),
                ("XADD -c 50 -P 1", "req/s"),
                ("server CPU per request, XADD -c 50 -P 1", "us"),
                ("XRANGE - + COUNT 10 (100k) -c 50 -P 16", "req/s"),
                ("XRANGE - + COUNT 10 (100k) -c 50 -P 1", "req/s"),
                ("server CPU per request, XRANGE - + COUNT 10 (100k) -c 50 -P 1", "us"),
                ("memory, 1M entries", "B/entry"),
                ("XREAD BLOCK wake-up p50", "us"),
                ("XREAD BLOCK wake-up p99", "us"),
            ],
            "XADD, XRANGE, XREAD",
        )
    rows = throughput_rows(env)
    rows += memory_rows(env)
    return rows


def throughput_rows(env: Env) -> list[Row]:
    range_len = env.pick(100_000, 10_000)
    plans = [
        ("XADD -c 50 -P 16", 16, env.pick(400_000, 40_000), Target("ratio_min", 0.25), "xadd", True),
        ("XADD -c 50 -P 1", 1, env.pick(60_000, 4_000), Target("ratio_min", 0.85), "xadd", True),
        (f"XRANGE - + COUNT 10 ({range_len // 1000}k) -c 50 -P 16", 16, env.pick(100_000, 20_000), Target("ratio_min", 0.2), "xrange", False),
        (f"XRANGE - + COUNT 10 ({range_len // 1000}k) -c 50 -P 1", 1, env.pick(40_000, 4_000), Target("ratio_min", 0.2), "xrange", False),
    ]
    samples = env.pick(2_000, 100)
    rows = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace", "thin")}
        for kind in ("redis", "millrace"):
            if kind in servers:
                env.log(f"loading a {range_len}-entry stream into {kind}")
                load_stream(servers[kind], "bench:range", range_len)
        for index, (name, pipeline, requests, target, what, with_thin) in enumerate(plans):
            row = Row(SUITE, name, "req/s", target=target)
            if what == "xadd":
                command = ["XADD", f"bench:xadd:{index}", "*", *FIELDS]
            else:
                command = ["XRANGE", "bench:range", "-", "+", "COUNT", "10"]
            chosen = {kind: server for kind, server in servers.items() if with_thin or kind != "thin"}
            rows.append(env.benchmark_row(row, chosen, command, pipeline=pipeline, requests=requests))
            if pipeline == 1:
                rows.append(cpu_row(rows[-1]))

        p50 = Row(SUITE, "XREAD BLOCK wake-up p50", "us", note=f"{samples} samples: XADD sent -> blocked reader has its reply")
        p99 = Row(SUITE, "XREAD BLOCK wake-up p99", "us")
        ping = Row(SUITE, "PING p50 (round-trip baseline)", "us", note="sampled in turn with the wake-ups: the loopback + scheduler part")
        for kind in ("redis", "millrace"):
            if kind in servers:
                env.log(f"XREAD BLOCK wake-up on {kind}")
                latencies, pings = wakeup_latencies(servers[kind], samples)
                setattr(p50, kind, percentile(latencies, 0.50) * 1e6)
                setattr(p99, kind, percentile(latencies, 0.99) * 1e6)
                setattr(ping, kind, percentile(pings, 0.50) * 1e6)
        rows += [p50, p99, ping]
    return rows


def load_stream(server: Server, key: str, count: int) -> None:
    request = pack("XADD", key, "*", *FIELDS)
    load_pipelined(server, (request for _ in range(count)))


def wakeup_latencies(server: Server, samples: int) -> tuple[list[float], list[float]]:
    """Seconds from sending XADD until the client blocked in XREAD has its reply; PING round trips."""
    key = "bench:wake"
    latencies, pings = [], []
    ping = pack("PING")
    with server.connect(timeout=20) as waiter, server.connect(timeout=20) as writer:
        last_id = writer.call("XADD", key, "*", *FIELDS)
        xadd = pack("XADD", key, "*", *FIELDS)
        for _ in range(samples):
            waiter.send(pack("XREAD", "BLOCK", "10000", "STREAMS", key, last_id))
            time.sleep(0.001)  # let the server park the reader (an explicit ID keeps it correct regardless)
            started = time.perf_counter()
            writer.send(xadd)
            reply = waiter.read()
            latencies.append(time.perf_counter() - started)
            last_id = writer.read()
            if not isinstance(reply, list) or not isinstance(last_id, bytes):
                raise RuntimeError(f"unexpected XREAD/XADD reply on {server.kind}: {reply!r} {last_id!r}")
            started = time.perf_counter()
            writer.send(ping)
            writer.read()
            pings.append(time.perf_counter() - started)
    return latencies, pings


def memory_rows(env: Env) -> list[Row]:
    entries = env.pick(1_000_000, 50_000)
    label = f"{entries // 1000}k" if entries < 1_000_000 else f"{entries // 1_000_000}M"
    row = Row(SUITE, f"memory, {label} entries", "B/entry", target=Target("ratio_max", 3.0))
    for kind in env.kinds("redis", "millrace"):
        with env.server(kind) as server:
            env.log(f"memory: {entries} XADD into {kind}")
            time.sleep(0.2)
            rss_before = server.rss_bytes()
            used_before = server.used_memory() if kind == "redis" else None
            started = time.perf_counter()
            load_stream(server, "bench:mem", entries)
            load_seconds = time.perf_counter() - started
            time.sleep(0.2)
            if server.call("XLEN", "bench:mem") != entries:
                raise RuntimeError(f"{kind}: XLEN is not {entries} after loading")
            rss_delta = server.rss_bytes() - rss_before
            delta = server.used_memory() - used_before if kind == "redis" else rss_delta
            setattr(row, kind, delta / entries)
            row.extra[kind] = {"bytes": delta, "rss_delta": rss_delta, "load_seconds": round(load_seconds, 2)}
    if row.redis and row.millrace:
        row.note = f"Redis used_memory delta {row.extra['redis']['bytes'] / 1e6:.1f} MB; Millrace RSS delta {row.extra['millrace']['bytes'] / 1e6:.1f} MB"
    return [row]
