"""Consumption-based retention (issue 24): its cost to a consuming pipeline, and memory held within MAX.

- XADD + XREADGROUP + XACK through one stream, with a CONSUMPTION policy
  (the group an AUTO subscriber, MIN-LEN 1000, MAX-LEN 1M) and without one:
  two Millrace servers, rounds alternating between them. A client pipelines
  a batch of 100 XADDs with the XACK of the previous batch, then reads the
  batch with XREADGROUP COUNT 100; retention runs after every one of those
  writes and trims what was acknowledged. Figures: entries per second of
  wall time and entries per second of server CPU time (the client is Python
  too, so the CPU figure is the fairer one); the ratio row (target >= 0.8)
  is the CPU one, best round each.
- Memory while the consumer is stopped: a stream with MAX-BYTES 1 MB whose
  AUTO subscriber reads nothing gets 8x that in entries (2x under --quick);
  MEMORY USAGE is sampled every 1000 entries and the row is the highest
  sample over the limit (target <= 1.0), with XLEN at the end and the
  entries the subscriber lost.
Redis has no such policy: the rows are Millrace's own figures.
"""

from __future__ import annotations

import contextlib
import time

import hiredis

from .harness import Env, Row, Target, pack

SUITE = "retention"
FIELDS = ("sensor-id", "1234", "temperature", "10.5")
BATCH = 100


def run(env: Env) -> list[Row]:
    if not env.millrace_supports(("XRETENTION", "HELP")):
        return env.unsupported(SUITE, [("XADD+XREADGROUP+XACK with policy / without (server CPU)", "x")], "XRETENTION")
    return pipeline_rows(env) + memory_rows(env)


def _check(replies: list) -> None:
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"retention bench: {reply}")


def _consume(server, key: str, entries: int) -> tuple[float, float]:
    """Push `entries` through XADD, XREADGROUP and XACK in batches; (wall seconds, server CPU seconds)."""
    xadd = pack("XADD", key, "*", *FIELDS)
    read = pack("XREADGROUP", "GROUP", "g", "c", "COUNT", str(BATCH), "STREAMS", key, ">")
    acks: list[bytes] = []
    cpu0 = server.cpu_seconds()
    began = time.perf_counter()
    with server.connect() as conn:
        for _ in range(entries // BATCH):
            extra = [pack("XACK", key, "g", *acks)] if acks else []
            conn.send(xadd * BATCH + b"".join(extra) + read)
            replies = conn.read_many(BATCH + len(extra) + 1)
            _check(replies)
            acks = [entry[0] for entry in replies[-1][0][1]]
        if acks:
            _check([conn.call("XACK", key, "g", *acks)])
    return time.perf_counter() - began, server.cpu_seconds() - cpu0


def pipeline_rows(env: Env) -> list[Row]:
    entries = env.pick(200_000, 20_000)
    names = {"with": "CONSUMPTION policy (AUTO subscriber)", "without": "no policy"}
    wall = {v: Row(SUITE, f"XADD+XREADGROUP+XACK, {names[v]}", "entries/s") for v in names}
    cpu = {v: Row(SUITE, f"XADD+XREADGROUP+XACK per server CPU second, {names[v]}", "entries/s") for v in names}
    ratio = Row(SUITE, "XADD+XREADGROUP+XACK with policy / without (server CPU)", "x", target=Target("min", 0.8))
    best_wall = dict.fromkeys(names, 0.0)
    best_cpu = dict.fromkeys(names, 0.0)
    kept = 0
    with contextlib.ExitStack() as stack:
        servers = {v: stack.enter_context(env.server("millrace")) for v in names}
        for round_index in range(env.rounds):
            for variant, server in servers.items():
                key = f"bench:retention:{round_index}"
                server.call("XGROUP", "CREATE", key, "g", "$", "MKSTREAM")
                if variant == "with":
                    _check([server.call("XGROUP", "SETCONFIG", key, "g", "SUBSCRIBER", "AUTO")])
                    _check([server.call("XRETENTION", "SET", key, "CONSUMPTION", "MIN-LEN", "1000", "MAX-LEN", "1000000")])
                env.log(f"retention: {entries} entries through XADD/XREADGROUP/XACK, {names[variant]} (round {round_index + 1})")
                seconds, cpu_seconds = _consume(server, key, entries)
                best_wall[variant] = max(best_wall[variant], entries / seconds)
                best_cpu[variant] = max(best_cpu[variant], entries / cpu_seconds if cpu_seconds else 0.0)
                if variant == "with":
                    kept = server.call("XLEN", key)
                server.call("DEL", key)
    for variant in names:
        wall[variant].millrace, cpu[variant].millrace = best_wall[variant], best_cpu[variant]
    wall["with"].note = f"the stream held {kept} entries at the end (MIN-LEN 1000)"
    ratio.millrace = best_cpu["with"] / best_cpu["without"] if best_cpu["without"] else None
    ratio.note = f"best of {env.rounds} alternating rounds, {entries} entries each; noisy on this shared machine"
    return [wall["without"], wall["with"], cpu["without"], cpu["with"], ratio]


def memory_rows(env: Env) -> list[Row]:
    limit = 1 << 20
    factor = env.pick(8, 2)  # entries worth this many times the limit
    peak = Row(SUITE, "MEMORY USAGE peak / MAX-BYTES 1 MB, subscriber stopped", "x", target=Target("max", 1.0))
    length = Row(SUITE, "XLEN at the end under MAX-BYTES 1 MB", "entries")
    lost = Row(SUITE, "entries lost by the stopped subscriber", "entries")
    with env.server("millrace") as server:
        key = "bench:retention:stopped"
        probe = "bench:retention:probe"  # the same entries without a policy: what one entry costs
        xadd = pack("XADD", key, "*", *FIELDS)
        with server.connect() as conn:
            conn.send(pack("XADD", probe, "*", *FIELDS) * 5000)
            _check(conn.read_many(5000))
            per_entry = conn.call("MEMORY", "USAGE", probe) / 5000
            conn.call("DEL", probe)
            entries = int(factor * limit / per_entry)
            conn.call("XGROUP", "CREATE", key, "g", "$", "MKSTREAM")
            _check([conn.call("XGROUP", "SETCONFIG", key, "g", "SUBSCRIBER", "AUTO")])
            _check([conn.call("XRETENTION", "SET", key, "CONSUMPTION", "MAX-BYTES", str(limit))])
            env.log(f"retention: {entries} entries ({factor}x MAX-BYTES {limit}) into a stream nobody reads")
            samples = []
            for _ in range(0, entries, 1000):
                conn.send(xadd * 1000)
                _check(conn.read_many(1000))
                samples.append(conn.call("MEMORY", "USAGE", key))
            fields = conn.call("XRETENTION", "GET", key)
            info = dict(zip(fields[0::2], fields[1::2], strict=True))
            length.millrace = conn.call("XLEN", key)
            lost.millrace = info[b"entries-lost"]
    peak.millrace = max(samples) / limit
    peak.extra["samples"] = samples
    peak.note = f"{entries} entries written (~{per_entry:.0f} bytes each); MEMORY USAGE sampled every 1000"
    return [peak, length, lost]
