"""Persistence (issue 18): snapshot save/load/size, XADD under the AOF, serving during a fork.

Each server runs with Redis's own persistence configuration (`save`,
`appendonly`, `appendfsync`, `dir`), in a temporary directory of its own.

- The dataset: 5,000,000 entries `f v` in 10 streams of 500,000 (pipelined
  XADD), each stream with group `g` that has been handed its first 50,000
  entries (XREADGROUP COUNT 1000) and acknowledged all but 500 of them
  (5,000 pending in all). Redis and Millrace are loaded one after the other
  and stay up together; only one is ever measured at a time.
- SAVE: the round trip of SAVE, best of `env.rounds` interleaved rounds.
  Snapshot size: the `dbfilename` file SAVE wrote.
- Load at start-up: the server is stopped (SIGTERM; `save ""`, so nothing is
  written on the way out) and started again on the same directory; the time
  from starting the process to its first PONG (a server still loading answers
  -LOADING), best of the rounds. An empty server's start-up time is in the
  note: for Millrace it is mostly the interpreter's and its imports' start.
  After each restart the dataset is checked (lengths, pending counts).
- XADD -c 50 -P 16 (redis-benchmark, the streams suite's command) on fresh
  servers with `appendonly no`, `appendonly yes` + `appendfsync everysec` and
  `appendfsync always` (automatic rewrites off, so every run measures the
  write path alone), best of the interleaved rounds. The ratio rows divide
  each server's AOF throughput by its own `appendonly no` throughput: Millrace
  must keep 0.7 of its own under everysec, and under always lose no more
  than Redis does.
- While BGSAVE, then BGREWRITEAOF (after `CONFIG SET appendonly yes` and its
  first rewrite), run on the dataset: one client sends unpipelined XADDs to
  another stream, paced (a short sleep between requests), and its p99 round
  trip over the child's lifetime is reported beside the same client's p99
  with no child (pooled over the rounds). Extra memory: the peak, sampled
  every 20 ms while the child lives, of the PSS of the server and its child
  (/proc/<pid>/smaps_rollup: shared pages counted once, so this is the memory
  the fork really added: copied-on-write pages and new allocations) less the
  server's PSS just before; the largest over the rounds. Redis's own
  rdb_last_cow_size / aof_last_cow_size are kept in the note.
"""

from __future__ import annotations

import contextlib
import os
import time

import hiredis

from .harness import Env, Row, Server, Target, load_pipelined, pack, percentile, start_server

SUITE = "persistence"
XADD_FIELDS = ("sensor-id", "1234", "temperature", "10.5")  # the streams suite's XADD
SAMPLE_EVERY = 0.02  # seconds between memory samples while a child runs
PACE = 0.0002  # seconds the concurrent XADD client sleeps between requests


def _label(count: int) -> str:
    return f"{count // 1_000_000}M" if count >= 1_000_000 and count % 1_000_000 == 0 else f"{count // 1000}k"


def run(env: Env) -> list[Row]:
    shape = Shape(streams=env.pick(10, 2), length=env.pick(500_000, 10_000), delivered=env.pick(50_000, 2_000), pending=env.pick(500, 100))
    label = _label(shape.streams * shape.length)
    names = [
        (f"SAVE, {label} entries", "s"),
        (f"load at start-up, {label} entries", "s"),
        (f"snapshot size, {label} entries", "MB"),
        *((name, unit) for name, unit, _ in AOF_ROWS),
        ("XADD p99 of a paced client, no child", "us"),
        *((f"{op} ({label}): {what}", unit) for op in ("BGSAVE", "BGREWRITEAOF") for what, unit in FORK_FIGURES),
    ]
    probes = [("LASTSAVE",), ("XGROUP", "HELP"), ("XREADGROUP",), ("XACK",)]
    if not env.millrace_supports(*probes):
        return env.unsupported(SUITE, names, "SAVE, BGSAVE, BGREWRITEAOF, consumer groups")
    kinds = env.kinds("redis", "millrace")
    save, load, size, *fork = dataset_rows(env, kinds, shape, label)
    return [save, load, size, *aof_rows(env, kinds), *fork]


# -- the 5M-entry dataset ------------------------------------------------------------


class Shape:
    """How big the dataset is: `streams` streams of `length` entries, `delivered` read by the group, `pending` unacked."""

    def __init__(self, streams: int, length: int, delivered: int, pending: int) -> None:
        self.streams, self.length, self.delivered, self.pending = streams, length, delivered, pending

    def keys(self) -> list[str]:
        return [f"bench:p:{index}" for index in range(self.streams)]


def setup(server: Server, shape: Shape) -> None:
    """Load the streams, then make each group's read and acknowledged history."""
    for key in shape.keys():
        load_pipelined(server, (pack("XADD", key, "*", "f", "v") for _ in range(shape.length)))
        server.call("XGROUP", "CREATE", key, "g", "0")
        with server.connect(timeout=300) as conn:
            batches = range(0, shape.delivered, 1000)
            conn.send(b"".join(pack("XREADGROUP", "GROUP", "g", "reader", "COUNT", str(min(1000, shape.delivered - done)), "STREAMS", key, ">") for done in batches))
            ids = []
            for reply in conn.read_many(len(batches)):
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"{server.kind}: XREADGROUP: {reply}")
                ids.extend(entry[0] for entry in reply[0][1])
            acked = ids[: len(ids) - shape.pending]
            acks = [pack("XACK", key, "g", *acked[start : start + 1000]) for start in range(0, len(acked), 1000)]
            conn.send(b"".join(acks))
            for reply in conn.read_many(len(acks)):
                if isinstance(reply, hiredis.ReplyError):
                    raise RuntimeError(f"{server.kind}: XACK: {reply}")
    check(server, shape)


def check(server: Server, shape: Shape) -> None:
    """The dataset is all there: every stream's length and its group's pending count and entries-read."""
    for key in shape.keys():
        length = server.call("XLEN", key)
        groups = server.call("XINFO", "GROUPS", key)
        if isinstance(groups, hiredis.ReplyError) or len(groups) != 1:
            raise RuntimeError(f"{server.kind}: XINFO GROUPS {key}: {groups!r}")
        fields = dict(zip(groups[0][::2], groups[0][1::2], strict=True))
        if length != shape.length or fields[b"pending"] != shape.pending or fields[b"entries-read"] != shape.delivered:
            raise RuntimeError(f"{server.kind}: {key} has {length} entries, {fields[b'pending']} pending, {fields[b'entries-read']} read")


def dataset_rows(env: Env, kinds: list[str], shape: Shape, label: str) -> list[Row]:
    entries = shape.streams * shape.length
    save = Row(SUITE, f"SAVE, {label} entries", "s", target=Target("ratio_max", 3.0))
    load = Row(SUITE, f"load at start-up, {label} entries", "s", target=Target("ratio_max", 3.0))
    size = Row(SUITE, f"snapshot size, {label} entries", "MB", target=Target("ratio_max", 2.0))
    dataset = f"{shape.streams} streams x {shape.length}, group g: {shape.delivered} read, {shape.pending} pending per stream"
    save.note = f"{dataset}; round trip of SAVE"
    size.note = "the dbfilename file SAVE wrote"
    servers: dict[str, Server] = {}
    try:
        for kind in kinds:
            env.log(f"persistence: loading {entries} entries into {kind}")
            started = time.perf_counter()
            servers[kind] = start_server(kind, millrace_root=env.millrace_root)
            setup(servers[kind], shape)
            save.extra.setdefault(kind, {})["setup_seconds"] = round(time.perf_counter() - started, 1)

        for _ in range(env.rounds):
            for kind, server in servers.items():
                env.log(f"persistence: SAVE on {kind}")
                started = time.perf_counter()
                reply = server.call("SAVE")
                seconds = time.perf_counter() - started
                if reply != b"OK":
                    raise RuntimeError(f"{kind}: SAVE: {reply!r}")
                save.extra[kind].setdefault("seconds", []).append(round(seconds, 3))
                setattr(save, kind, min(save.extra[kind]["seconds"]))
        for kind, server in servers.items():
            dbfilename = server.call("CONFIG", "GET", "dbfilename")[1].decode()
            setattr(size, kind, os.path.getsize(os.path.join(server.dir, dbfilename)) / 1e6)
            size.extra[kind] = {"file": dbfilename}

        for _ in range(env.rounds):
            for kind in kinds:
                env.log(f"persistence: restart {kind} on its snapshot")
                workdir = servers[kind].dir
                servers[kind].stop(keep_dir=True)
                del servers[kind]
                servers[kind] = start_server(kind, millrace_root=env.millrace_root, workdir=workdir)
                check(servers[kind], shape)
                runs = load.extra.setdefault(kind, {"seconds": [], "empty_seconds": []})
                runs["seconds"].append(round(servers[kind].ready_seconds, 3))
                setattr(load, kind, min(runs["seconds"]))
                with env.server(kind) as empty:
                    runs["empty_seconds"].append(round(empty.ready_seconds, 3))
        load.note = "process start to first PONG on the saved directory; an empty server: " + ", ".join(
            f"{kind} {min(load.extra[kind]['empty_seconds']):.3f} s" for kind in kinds
        )

        fork = fork_rows(env, servers, shape, label)
    finally:
        for server in servers.values():
            server.stop()
    return [save, load, size, *fork]


# -- serving while a child saves ---------------------------------------------------------

FORK_FIGURES = (("XADD p99 of a paced client", "us"), ("extra memory (PSS growth)", "MB"), ("child's time", "s"))


def pss_bytes(pid: int) -> int:
    """Proportional set size: private pages plus a share of each page shared with a fork."""
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no Pss")


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(word) for word in handle.read().split()]
    except OSError:
        return []


def family_pss(pid: int) -> int:
    """PSS of the server and its children: every physical page the family holds, counted once."""
    total = pss_bytes(pid)
    for child in children(pid):
        with contextlib.suppress(OSError, RuntimeError):  # the child may just have exited
            total += pss_bytes(child)
    return total


def paced_xadds(conn, seconds: float | None, until=None) -> list[float]:
    """Round trips of XADD on `conn`, one after another with a short sleep, for `seconds` or until `until()` is true."""
    request = pack("XADD", "bench:p:live", "*", *XADD_FIELDS)
    latencies = []
    clock = time.perf_counter
    end = clock() + seconds if seconds is not None else None
    next_check = clock()
    while True:
        started = clock()
        conn.send(request)
        reply = conn.read()
        latencies.append(clock() - started)
        if not isinstance(reply, bytes):
            raise RuntimeError(f"XADD during the fork test: {reply!r}")
        now = clock()
        if end is not None and now >= end:
            return latencies
        if until is not None and now >= next_check:
            next_check = now + SAMPLE_EVERY
            if until():
                return latencies
        time.sleep(PACE)


def while_child(server: Server, command: str, progress: str) -> tuple[list[float], int, int, float, dict[str, str]]:
    """Start `command`, then XADD and sample memory until INFO's `progress` field is 0 again.

    Returns the XADD round trips, the server's PSS before, the peak family
    PSS growth, the child's lifetime as seen from here, and INFO persistence
    afterwards.
    """
    peak = [0]
    with server.connect() as control, server.connect() as conn:
        before = pss_bytes(server.pid)
        started = time.perf_counter()
        reply = control.call(command)
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"{server.kind}: {command}: {reply}")

        def done() -> bool:
            peak[0] = max(peak[0], family_pss(server.pid) - before)
            info = control.call("INFO", "persistence").decode()
            fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
            return fields.get(progress) == "0" and fields.get("aof_rewrite_scheduled", "0") == "0"

        latencies = paced_xadds(conn, None, done)
        seconds = time.perf_counter() - started
    return latencies, before, peak[0], seconds, server.info("persistence")


def wait_idle(server: Server, timeout: float = 600.0) -> None:
    """Until no child runs or is scheduled (e.g. the rewrite `CONFIG SET appendonly yes` starts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = server.info("persistence")
        if all(info.get(name, "0") == "0" for name in ("rdb_bgsave_in_progress", "aof_rewrite_in_progress", "aof_rewrite_scheduled")):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{server.kind}: a background save still runs after {timeout} s")


def fork_rows(env: Env, servers: dict[str, Server], shape: Shape, label: str) -> list[Row]:
    baseline = Row(SUITE, "XADD p99 of a paced client, no child", "us", note=f"unpipelined XADD with a {PACE * 1e6:.0f} us sleep between requests, to another stream")
    rows = [baseline]
    quiet = env.pick(2.0, 0.3)
    plans = (("BGSAVE", "rdb_bgsave_in_progress", "rdb_last_cow_size"), ("BGREWRITEAOF", "aof_rewrite_in_progress", "aof_last_cow_size"))
    for command, progress, cow_field in plans:
        latency, memory, lifetime = (Row(SUITE, f"{command} ({label}): {what}", unit) for what, unit in FORK_FIGURES)
        rows += [latency, memory, lifetime]
        if command == "BGREWRITEAOF":
            for kind, server in servers.items():
                env.log(f"persistence: CONFIG SET appendonly yes on {kind} (its first rewrite)")
                wait_idle(server)
                server.call("CONFIG", "SET", "appendonly", "yes")
                time.sleep(0.2)
                wait_idle(server)
        pooled: dict[str, list[float]] = {kind: [] for kind in servers}
        for _ in range(env.rounds):
            for kind, server in servers.items():
                wait_idle(server)
                env.log(f"persistence: XADD while {command} on {kind}")
                if command == "BGSAVE":
                    with server.connect() as conn:
                        quiet_latencies = paced_xadds(conn, quiet)
                    baseline.extra.setdefault(kind, []).extend(quiet_latencies)
                latencies, before, peak, seconds, info = while_child(server, command, progress)
                pooled[kind].extend(latencies)
                runs = memory.extra.setdefault(kind, {"peak_mb": [], "pss_before_mb": [], "child_seconds": [], cow_field: []})
                runs["peak_mb"].append(round(peak / 1e6, 1))
                runs["pss_before_mb"].append(round(before / 1e6, 1))
                runs["child_seconds"].append(round(seconds, 3))
                runs[cow_field].append(int(info.get(cow_field, 0)))
                status = info.get("rdb_last_bgsave_status" if command == "BGSAVE" else "aof_last_bgrewrite_status")
                if status != "ok":
                    raise RuntimeError(f"{kind}: {command} failed: {status}")
        for kind in servers:
            runs = memory.extra[kind]
            setattr(latency, kind, percentile(pooled[kind], 0.99) * 1e6)
            setattr(memory, kind, max(runs["peak_mb"]))
            setattr(lifetime, kind, min(runs["child_seconds"]))
            latency.extra[kind] = {"samples": len(pooled[kind]), "p50_us": round(percentile(pooled[kind], 0.5) * 1e6, 1)}
        latency.note = "pooled over the rounds, while the child lives; p50 " + ", ".join(f"{kind} {latency.extra[kind]['p50_us']:.0f} us" for kind in servers)
        memory.note = "peak PSS of server + child less the server's before (" + ", ".join(
            f"{kind} {max(memory.extra[kind]['pss_before_mb']):.0f} MB" for kind in servers
        ) + f"); Redis's own {cow_field} " + ", ".join(f"{max(memory.extra[kind][cow_field]) / 1e6:.1f} MB" for kind in servers if kind == "redis")
        lifetime.note = "from the command to INFO saying it is done (both reap children in their 10 Hz cron)"
    for kind in servers:
        samples = baseline.extra.pop(kind)
        setattr(baseline, kind, percentile(samples, 0.99) * 1e6)
        baseline.extra[kind] = {"samples": len(samples), "p50_us": round(percentile(samples, 0.5) * 1e6, 1)}
    return rows


# -- XADD under the AOF ------------------------------------------------------------------

AOF_ROWS = (
    ("XADD -c 50 -P 16, appendonly no", "req/s", ("--appendonly", "no")),
    ("XADD -c 50 -P 16, appendfsync everysec", "req/s", ("--appendonly", "yes", "--appendfsync", "everysec")),
    ("XADD -c 50 -P 16, appendfsync always", "req/s", ("--appendonly", "yes", "--appendfsync", "always")),
    ("XADD -P 16 everysec / appendonly no (own)", "x", ()),
    ("XADD -P 16 always / appendonly no (own)", "x", ()),
)


def aof_rows(env: Env, kinds: list[str]) -> list[Row]:
    requests = env.pick(400_000, 20_000)
    plain, everysec, always, everysec_ratio, always_ratio = (Row(SUITE, name, unit) for name, unit, _ in AOF_ROWS)
    configs = [(plain, AOF_ROWS[0][2]), (everysec, AOF_ROWS[1][2]), (always, AOF_ROWS[2][2])]
    command = ["XADD", "bench:aof", "*", *XADD_FIELDS]
    with contextlib.ExitStack() as stack:
        servers = {
            (id(row), kind): stack.enter_context(env.server(kind, *options, "--auto-aof-rewrite-percentage", "0")) for row, options in configs for kind in kinds
        }
        for _ in range(env.rounds):
            for row, _options in configs:
                for kind in kinds:
                    server = servers[id(row), kind]
                    env.log(f"persistence: {row.name} on {kind}")
                    result = next(iter(env.redis_benchmark(server, command, pipeline=16, requests=requests).values()))
                    runs = row.extra.setdefault(kind, {"rps": [], "p99_ms": []})
                    runs["rps"].append(result.rps)
                    runs["p99_ms"].append(result.p99_ms)
                    setattr(row, kind, max(runs["rps"]))
    for ratio, row in ((everysec_ratio, everysec), (always_ratio, always)):
        for kind in kinds:
            setattr(ratio, kind, getattr(row, kind) / getattr(plain, kind))
    everysec_ratio.target = Target("min", 0.7)
    everysec_ratio.note = "each server's everysec throughput over its own without the AOF; Millrace's must be >= 0.7"
    always_ratio.target = Target("ratio_min", 1.0)
    always_ratio.note = "each server's always throughput over its own without the AOF; Millrace's must be >= Redis's"
    plain.note = "redis-benchmark, fresh servers, auto-aof-rewrite-percentage 0; best of the interleaved rounds"
    return [plain, everysec, always, everysec_ratio, always_ratio]
