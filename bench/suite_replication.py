"""Replication (issue 19): XADD with a replica attached, replication lag, full sync.

Every primary runs with `repl-diskless-sync-delay 0` (Redis's default of 5 s
would add 5 s of waiting to its full sync; Millrace starts the transfer at
once whatever the setting says); everything else is each server's default
(diskless sync on the primary, `repl-diskless-load disabled` on a Redis
replica, which writes the payload to disk and then loads it).

- XADD -c 50 -P 16 (redis-benchmark, the streams suite's command) on a
  primary with no replica and on one with a replica attached (started with
  `--replicaof`, link up before the first run), best of `env.rounds`
  interleaved rounds. The ratio row divides each server's throughput with the
  replica by its own without: Millrace's must be >= 0.7; Redis's is beside it.
  The note has each server's CPU share in the best round (1.0 = one core: on
  2 cores the primary, its replica and redis-benchmark compete) and how long
  after the load the replica had the probe's last entry. After each
  replicated run the bench waits for the replica's offset to reach the
  primary's and checks that its stream holds as many entries.
- Replication lag under that load: while redis-benchmark runs, a probe
  client in this process sends one unpipelined XADD to its own key on the
  primary every few ms and keeps an `XREAD BLOCK` for the entries after the
  last one seen pending on the replica, waiting on both sockets at once: a
  sample is the time from an XADD's reply to the XREAD reply carrying that
  entry (slightly negative when the replica's reply wins the race). Entries
  still on their way when the load ends are waited for. p50 and p99 pooled
  over the rounds. The same probe, reading from the primary itself, runs
  during the no-replica runs too (so both throughput runs carry the same
  extra load); its figures (local XREAD wake-up under the same load) are in
  the note. A replica that applies slower than its primary accepts falls
  further behind the longer the load runs, and then the lag says how much.
- Full sync: 5,000,000 entries (10 streams of 500,000 `f v`, pipelined XADD)
  on a primary; the time from starting the replica process with
  `--replicaof` until INFO says `master_link_status:up` and the replica's
  XLENs add up to the primary's, best of the rounds (each round a fresh
  replica in a new directory, so a full resync every time). The time an
  empty server of the same kind takes to answer its first PING is in the note.
"""

from __future__ import annotations

import contextlib
import select
import threading
import time

import hiredis

from .harness import Env, RawConnection, Row, Server, Target, load_pipelined, pack, percentile, start_server

SUITE = "replication"
XADD_FIELDS = ("sensor-id", "1234", "temperature", "10.5")  # the streams suite's XADD
PRIMARY_ARGS = ("--repl-diskless-sync-delay", "0")
PROBE_EVERY = 0.004  # seconds the lag probe sleeps between samples
POLL = 0.01  # seconds between looks at a syncing replica


def _label(count: int) -> str:
    return f"{count // 1_000_000}M" if count >= 1_000_000 and count % 1_000_000 == 0 else f"{count // 1000}k"


def run(env: Env) -> list[Row]:
    streams, length = env.pick(10, 2), env.pick(500_000, 10_000)
    label = _label(streams * length)
    names = [*((name, unit) for name, unit in LOAD_ROWS), (f"full sync, {label} entries: until the replica serves", "s")]
    if not env.millrace_supports(("REPLICAOF",), ("XADD",), ("XREAD",), ("REPLCONF",), ("PSYNC",)):
        return env.unsupported(SUITE, names, "REPLICAOF, REPLCONF, PSYNC")
    kinds = env.kinds("redis", "millrace")
    return [*load_rows(env, kinds), full_sync_row(env, kinds, streams, length, label)]


# -- waiting for replicas -----------------------------------------------------------


def info_fields(conn: RawConnection, section: str) -> dict[str, str]:
    reply = conn.call("INFO", section)
    if isinstance(reply, hiredis.ReplyError):
        return {}
    return dict(line.split(":", 1) for line in reply.decode().splitlines() if ":" in line)


def wait_link_up(primary: Server, replica: Server, timeout: float = 120.0) -> None:
    """Until the replica says its link is up and the primary calls it online."""
    deadline = time.monotonic() + timeout
    with primary.connect() as pconn, replica.connect() as rconn:
        while time.monotonic() < deadline:
            if info_fields(rconn, "replication").get("master_link_status") == "up" and "state=online" in info_fields(pconn, "replication").get("slave0", ""):
                return
            time.sleep(POLL)
    raise RuntimeError(f"{replica.kind}: the replica's link is not up after {timeout} s: {replica.read_log()}")


def wait_caught_up(primary: Server, replica: Server, timeout: float = 300.0) -> float:
    """Seconds until the replica's offset reaches the primary's offset as it is now."""
    started = time.perf_counter()
    target = int(primary.info("replication")["master_repl_offset"])
    deadline = time.monotonic() + timeout
    with replica.connect() as conn:
        while time.monotonic() < deadline:
            if int(info_fields(conn, "replication").get("slave_repl_offset", -1)) >= target:
                return time.perf_counter() - started
            time.sleep(POLL)
    raise RuntimeError(f"{replica.kind}: the replica is not at offset {target} after {timeout} s")


# -- XADD with a replica, and the lag ------------------------------------------------------

LOAD_ROWS = (
    ("XADD -c 50 -P 16, no replica", "req/s"),
    ("XADD -c 50 -P 16, one replica", "req/s"),
    ("XADD -P 16 one replica / none (own)", "x"),
    ("replication lag under XADD -P 16, p50", "ms"),
    ("replication lag under XADD -P 16, p99", "ms"),
)


class Probe:
    """Timed XADDs on `writer` read back through XREAD BLOCK on `reader` (another server, or the same one).

    One loop waits on both sockets: an XADD goes out every `PROBE_EVERY`
    seconds (once the previous one's reply is in), and an XREAD BLOCK for
    whatever follows the last entry seen is always pending on `reader`, so a
    replica that falls behind delays the samples' arrival, not their sending.
    """

    def __init__(self, writer: Server, reader: Server, key: str) -> None:
        self.writer, self.reader, self.key = writer, reader, key
        self.replied: dict[bytes, float] = {}  # entry ID -> when its XADD reply arrived
        self.seen: dict[bytes, float] = {}  # entry ID -> when an XREAD reply carried it
        self.drain_seconds = 0.0  # from the end of the load until `reader` had the last probe entry

    @property
    def samples(self) -> list[float]:
        return [self.seen[entry] - replied for entry, replied in self.replied.items()]

    def run(self, stop: threading.Event, drain_timeout: float = 300.0) -> None:
        clock = time.perf_counter
        xadd = pack("XADD", self.key, "*", "f", "v")
        with self.writer.connect(timeout=30) as wconn, self.reader.connect(timeout=30) as rconn:
            rconn.send(pack("XREAD", "BLOCK", "0", "STREAMS", self.key, "0-0"))
            adding = False
            next_add = clock()
            deadline = None
            while True:
                now = clock()
                if stop.is_set() and deadline is None:
                    deadline = now + drain_timeout
                if deadline is not None and not adding and self.seen.keys() >= self.replied.keys():
                    self.drain_seconds = now - (deadline - drain_timeout)
                    return
                if deadline is not None and now > deadline:
                    raise RuntimeError(f"lag probe: {len(self.replied.keys() - self.seen.keys())} entries not on {self.reader.kind}'s replica after {drain_timeout} s")
                if not adding and deadline is None and now >= next_add:
                    wconn.send(xadd)
                    adding, next_add = True, now + PROBE_EVERY
                wait = 1.0 if adding or deadline is not None else max(0.0, next_add - now)
                readable, _, _ = select.select([wconn.sock, rconn.sock], [], [], min(wait, 0.1))
                if wconn.sock in readable:
                    for reply in receive(wconn):
                        if not isinstance(reply, bytes):
                            raise RuntimeError(f"lag probe: XADD {reply!r}")
                        self.replied[reply] = clock()
                        adding = False
                if rconn.sock in readable:
                    for reply in receive(rconn):
                        if not isinstance(reply, list):
                            raise RuntimeError(f"lag probe: XREAD {reply!r}")
                        when = clock()
                        entries = reply[0][1]
                        for entry in entries:
                            self.seen[entry[0]] = when
                        rconn.send(pack("XREAD", "BLOCK", "0", "STREAMS", self.key, entries[-1][0]))


def receive(conn: RawConnection) -> list[object]:
    """The replies one recv() completes on a readable socket."""
    chunk = conn.sock.recv(1 << 20)
    if not chunk:
        raise ConnectionError("lag probe: a server closed the connection")
    conn.reader.feed(chunk)
    replies = []
    reply = conn.reader.gets()
    while reply is not False:
        replies.append(reply)
        reply = conn.reader.gets()
    return replies


def benchmark_with_probe(env: Env, primary: Server, reader: Server, key: str, requests: int, runs: dict) -> list[float]:
    """redis-benchmark XADD -P 16 on `primary` while a `Probe` samples; its figures go to `runs`, the samples are returned.

    `runs` also gets the CPU share (1.0 = one core) of the primary and, when
    `reader` is another server, of the replica: on 2 cores a replica, the
    primary and redis-benchmark compete, and these say who was the limit.
    """
    outcome: dict[str, object] = {}
    stop = threading.Event()
    probe = Probe(primary, reader, key)

    def bench() -> None:
        try:
            outcome["result"] = next(iter(env.redis_benchmark(primary, ["XADD", "bench:repl", "*", *XADD_FIELDS], pipeline=16, requests=requests).values()))
        except Exception as exc:  # raised again in the caller's thread
            outcome["error"] = exc
        finally:
            stop.set()

    servers = {"primary": primary} if reader is primary else {"primary": primary, "replica": reader}
    cpu_before = {role: server.cpu_seconds() for role, server in servers.items()}
    started = time.perf_counter()
    thread = threading.Thread(target=bench, name="redis-benchmark")
    thread.start()
    try:
        probe.run(stop)
    finally:
        stop.set()
        thread.join()
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    elapsed = time.perf_counter() - started
    result = outcome["result"]
    runs.setdefault("rps", []).append(result.rps)  # type: ignore[attr-defined]
    runs.setdefault("p99_ms", []).append(result.p99_ms)  # type: ignore[attr-defined]
    for role, server in servers.items():
        runs.setdefault(f"{role}_cpu", []).append(round((server.cpu_seconds() - cpu_before[role]) / elapsed, 2))
    if reader is not primary:
        runs.setdefault("catch_up_s", []).append(round(probe.drain_seconds, 3))
    return probe.samples


def load_rows(env: Env, kinds: list[str]) -> list[Row]:
    requests = env.pick(400_000, 20_000)
    alone, replicated, ratio, lag50, lag99 = (Row(SUITE, name, unit) for name, unit in LOAD_ROWS)
    lags: dict[str, list[float]] = {kind: [] for kind in kinds}
    locals_: dict[str, list[float]] = {kind: [] for kind in kinds}
    with contextlib.ExitStack() as stack:
        single, primaries, replicas = {}, {}, {}
        for kind in kinds:
            single[kind] = stack.enter_context(env.server(kind, *PRIMARY_ARGS))
            primaries[kind] = stack.enter_context(env.server(kind, *PRIMARY_ARGS))
            replicas[kind] = stack.enter_context(env.server(kind, "--replicaof", "127.0.0.1", str(primaries[kind].port)))
            wait_link_up(primaries[kind], replicas[kind])
        for round_ in range(env.rounds):
            for kind in kinds:
                env.log(f"replication: XADD -P 16 on {kind}, no replica")
                locals_[kind].extend(benchmark_with_probe(env, single[kind], single[kind], f"bench:probe:{round_}", requests, alone.extra.setdefault(kind, {})))

                env.log(f"replication: XADD -P 16 on {kind}, one replica")
                primary, replica = primaries[kind], replicas[kind]
                runs = replicated.extra.setdefault(kind, {})
                lags[kind].extend(benchmark_with_probe(env, primary, replica, f"bench:probe:{round_}", requests, runs))
                wait_caught_up(primary, replica)
                expected, got = primary.call("XLEN", "bench:repl"), replica.call("XLEN", "bench:repl")
                if expected != got:
                    raise RuntimeError(f"{kind}: the replica has {got!r} entries, the primary {expected!r}")
        for kind in kinds:
            setattr(alone, kind, max(alone.extra[kind]["rps"]))
            setattr(replicated, kind, max(replicated.extra[kind]["rps"]))
            setattr(ratio, kind, getattr(replicated, kind) / getattr(alone, kind))
            samples, local = lags[kind], locals_[kind]
            lag50.extra[kind] = {"samples": len(samples), "max_ms": round(max(samples) * 1e3, 2), "negative": sum(sample < 0 for sample in samples)}
            lag50.extra[kind]["local_p50_ms"] = round(percentile(local, 0.50) * 1e3, 3)
            lag50.extra[kind]["local_p99_ms"] = round(percentile(local, 0.99) * 1e3, 3)
            setattr(lag50, kind, percentile(samples, 0.50) * 1e3)
            setattr(lag99, kind, percentile(samples, 0.99) * 1e3)
    alone.note = "redis-benchmark -c 50 -P 16, best of the interleaved rounds; a lag probe (a few hundred XADD/s) runs alongside in every run; server CPU " + _cpu(alone, kinds)
    replicated.note = "server CPU " + _cpu(replicated, kinds) + "; after the load, the replica had the last probe entry (max of the rounds) after " + ", ".join(
        f"{kind} {max(replicated.extra[kind]['catch_up_s']):.2f} s" for kind in kinds
    )
    ratio.target = Target("min", 0.7)
    ratio.note = "each server's throughput with a replica over its own without; Millrace's must be >= 0.7"
    lag50.note = "probe XADD reply on the primary -> its XREAD BLOCK reply from the replica, pooled over the rounds; samples " + ", ".join(
        f"{kind} {lag50.extra[kind]['samples']}" for kind in kinds
    )
    lag99.note = "max " + ", ".join(f"{kind} {lag50.extra[kind]['max_ms']:.1f} ms" for kind in kinds) + "; the same probe reading from the primary it writes to (no-replica runs), p50/p99: " + ", ".join(
        f"{kind} {lag50.extra[kind]['local_p50_ms']:.3f}/{lag50.extra[kind]['local_p99_ms']:.3f} ms" for kind in kinds
    )
    return [alone, replicated, ratio, lag50, lag99]


def _cpu(row: Row, kinds: list[str]) -> str:
    """The CPU shares behind the best round of `row`, e.g. "millrace primary 1.00 replica 0.95"."""
    parts = []
    for kind in kinds:
        runs = row.extra[kind]
        best = runs["rps"].index(max(runs["rps"]))
        roles = " ".join(f"{role} {runs[f'{role}_cpu'][best]:.2f}" for role in ("primary", "replica") if f"{role}_cpu" in runs)
        parts.append(f"{kind} {roles}")
    return ", ".join(parts)


# -- full sync -----------------------------------------------------------------------------


def wait_serving(replica: Server, keys: list[str], total: int, timeout: float = 1200.0) -> None:
    """Until the replica's link is up and its streams hold `total` entries."""
    deadline = time.monotonic() + timeout
    request = pack("INFO", "replication") + b"".join(pack("XLEN", key) for key in keys)
    with replica.connect(timeout=timeout) as conn:
        while time.monotonic() < deadline:
            conn.send(request)
            info, *lengths = conn.read_many(1 + len(keys))
            up = isinstance(info, bytes) and b"master_link_status:up" in info
            if up and sum(length for length in lengths if isinstance(length, int)) == total:
                return
            time.sleep(POLL)
    raise RuntimeError(f"{replica.kind}: the replica does not serve {total} entries after {timeout} s: {replica.read_log()}")


def full_sync_row(env: Env, kinds: list[str], streams: int, length: int, label: str) -> Row:
    row = Row(SUITE, f"full sync, {label} entries: until the replica serves", "s")
    keys = [f"bench:sync:{index}" for index in range(streams)]
    total = streams * length
    with contextlib.ExitStack() as stack:
        primaries = {}
        for kind in kinds:
            env.log(f"replication: loading {total} entries into a {kind} primary")
            primaries[kind] = stack.enter_context(env.server(kind, *PRIMARY_ARGS))
            started = time.perf_counter()
            for key in keys:
                load_pipelined(primaries[kind], (pack("XADD", key, "*", "f", "v") for _ in range(length)))
            row.extra[kind] = {"load_seconds": round(time.perf_counter() - started, 1), "seconds": [], "replica_first_pong": []}
        for _ in range(env.rounds):
            for kind, primary in primaries.items():
                env.log(f"replication: full sync of a {kind} replica")
                started = time.perf_counter()
                replica = start_server(kind, "--replicaof", "127.0.0.1", str(primary.port), millrace_root=env.millrace_root)
                try:
                    wait_serving(replica, keys, total)
                    seconds = time.perf_counter() - started
                finally:
                    replica.stop()
                row.extra[kind]["seconds"].append(round(seconds, 3))
                row.extra[kind]["replica_first_pong"].append(round(replica.ready_seconds, 3))
                setattr(row, kind, min(row.extra[kind]["seconds"]))
    empty = {}
    for kind in kinds:
        with env.server(kind) as server:
            empty[kind] = server.ready_seconds
    row.note = f"{streams} streams x {length}; replica process start -> link up and every XLEN as the primary's; an empty server's first PONG: " + ", ".join(
        f"{kind} {seconds:.2f} s" for kind, seconds in empty.items()
    )
    return row
