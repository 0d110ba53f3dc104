"""A multi-process XREADGROUP + XACK load generator (redis-benchmark cannot ack what it read).

How it works: `processes` worker processes (`python -m bench.loadgen ...`) share
`clients` connections between them. Every connection is one consumer of the
group and loops, unpipelined, on

    XREADGROUP GROUP <group> <consumer> COUNT <count> STREAMS <key> >
    XACK <key> <group> <the IDs just delivered>

each request waiting for its reply (like redis-benchmark without -P). Each
worker is one uvloop event loop with a bare asyncio Protocol per connection: a
hiredis reader parses replies and the XACK request is packed by
hiredis.pack_command, so the generator's work per operation is the same few
C calls whatever server answers. All workers connect first, say "ready",
then start together on the parent's "go" line and count the read+ack pairs they complete in the
window; a connection stops early if the group runs out of entries
(`exhausted`).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import hiredis

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class LoadResult:
    pairs: int  # XREADGROUP + XACK round trips completed in the window
    entries: int  # entries delivered (and acknowledged)
    seconds: float
    exhausted: bool  # some consumer found no new entries before the window ended

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.reader = hiredis.Reader()
        self.transport = None
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        reply = self.reader.gets()
        if reply is not False and self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(reply)

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"connection lost: {exc}"))

    async def call(self, request: bytes):
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        reply = await self.waiter
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"error reply: {reply}")
        return reply


async def _consume(conn: _Connection, key: bytes, group: bytes, consumer: bytes, count: int, deadline: float, tally: list) -> None:
    read = hiredis.pack_command((b"XREADGROUP", b"GROUP", group, consumer, b"COUNT", str(count).encode(), b"STREAMS", key, b">"))
    clock = time.perf_counter
    while clock() < deadline:
        reply = await conn.call(read)
        if not reply or not reply[0][1]:
            tally[2] = 1
            return
        ids = [entry[0] for entry in reply[0][1]]
        acked = await conn.call(hiredis.pack_command((b"XACK", key, group, *ids)))
        now = clock()
        if now <= deadline:
            tally[0] += 1
            tally[1] += acked
            tally[3] = max(tally[3], now)


async def _worker_main(port: int, key: str, group: str, connections: int, count: int, seconds: float, worker: int) -> tuple:
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(connections):
        _, conn = await loop.create_connection(_Connection, "127.0.0.1", port)
        conns.append(conn)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # the parent's "go": all workers start together
    started = time.perf_counter()
    tally = [0, 0, 0, started]  # pairs, entries, exhausted, time of the last pair counted
    deadline = started + seconds
    await asyncio.gather(
        *(_consume(conn, key.encode(), group.encode(), f"c{worker}-{index}".encode(), count, deadline, tally) for index, conn in enumerate(conns))
    )
    for conn in conns:
        conn.transport.close()
    tally[3] -= started
    return tuple(tally)


def run_load(port: int, key: str, group: str, *, clients: int = 50, processes: int = 2, count: int = 10, seconds: float = 5.0) -> LoadResult:
    """Drive `clients` consumers of `group` on `key` for `seconds`; see the module docstring."""
    shares = [clients // processes + (index < clients % processes) for index in range(processes)]
    workers = []
    try:
        for index, share in enumerate(shares):
            argv = [sys.executable, "-m", "bench.loadgen", str(port), key, group, str(share), str(count), str(seconds), str(index)]
            workers.append(subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT))
        for proc in workers:
            line = proc.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"load generator worker did not start: {line}{proc.stdout.read()}")
        for proc in workers:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outcomes = []
        for proc in workers:
            line = proc.stdout.readline()
            proc.wait(30)
            if not line.startswith("{"):
                raise RuntimeError(f"load generator worker failed: {line}")
            outcomes.append(json.loads(line))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    pairs = sum(out["pairs"] for out in outcomes)
    entries = sum(out["entries"] for out in outcomes)
    exhausted = any(out["exhausted"] for out in outcomes)
    if exhausted:  # the rate is over the time the entries lasted
        seconds = max(out["last"] for out in outcomes) or seconds
    return LoadResult(pairs, entries, seconds, exhausted)


def _worker_cli(args: list[str]) -> None:
    """`python -m bench.loadgen port key group connections count seconds worker` (one worker)."""
    import uvloop

    port, key, group, connections, count, seconds, worker = args
    try:
        tally = uvloop.run(_worker_main(int(port), key, group, int(connections), int(count), float(seconds), int(worker)))
        print(json.dumps(dict(zip(("pairs", "entries", "exhausted", "last"), tally, strict=True))), flush=True)
    except Exception as exc:  # the parent shows it
        print(f"error: {exc!r}", flush=True)


if __name__ == "__main__":
    _worker_cli(sys.argv[1:])
