"""A multi-process XREADGROUP + XACK load generator (redis-benchmark cannot ack what it read).

How it works: `processes` worker processes (`python -m bench.loadgen ...`) share
`clients` connections between them. Every connection is one consumer of the
group and loops, unpipelined, on

    XREADGROUP GROUP <group> <consumer> COUNT <count> STREAMS <key> >
    XACK <key> <group> <the IDs just delivered>

each request waiting for its reply (like redis-benchmark without -P). Each
worker is one uvloop event loop with a bare asyncio Protocol per connection: a
hiredis reader parses replies, the XACK request is packed by
hiredis.pack_command, and each reply's callback writes the next request (no
coroutine per request), so the generator's work per operation is the same
few calls whatever server answers. All workers connect first, say "ready",
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
    empty: int = 0  # reads answered with nothing and retried (empty_ok: a KEYSHARED consumer whose keys are elsewhere)

    @property
    def pairs_per_second(self) -> float:
        return self.pairs / self.seconds


class _Consumer(asyncio.Protocol):
    """One consumer connection as a callback state machine: each reply sends the next request.

    No coroutine or future per request: the generator's Python work per
    command is a feed, a gets and a write.
    """

    def __init__(self, key: bytes, group: bytes, consumer: bytes, count: int, tally: list, done: asyncio.Future, empty_ok: bool = False) -> None:
        self.reader = hiredis.Reader()
        self.transport = None
        self.key, self.group = key, group
        self.read_request = hiredis.pack_command((b"XREADGROUP", b"GROUP", group, consumer, b"COUNT", str(count).encode(), b"STREAMS", key, b">"))
        self.tally = tally  # shared by the worker's connections: pairs, entries, exhausted, time of the last pair
        self.done = done
        self.deadline = 0.0
        self.acking = False
        self.finished = False
        self.empty_ok = empty_ok

    def connection_made(self, transport) -> None:
        self.transport = transport

    def start(self, deadline: float) -> None:
        self.deadline = deadline
        self.transport.write(self.read_request)

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        reply = self.reader.gets()
        while reply is not False:
            self.on_reply(reply)
            reply = self.reader.gets()

    def on_reply(self, reply) -> None:
        if isinstance(reply, hiredis.ReplyError):
            self.finish(RuntimeError(f"error reply: {reply}"))
            return
        if not self.acking:
            if not reply or not reply[0][1]:
                if self.empty_ok and time.perf_counter() <= self.deadline:
                    self.tally[4] += 1  # nothing for this consumer now (KEYSHARED): ask again
                    self.transport.write(self.read_request)
                    return
                self.tally[2] = 1
                self.finish()
                return
            self.acking = True
            self.transport.write(hiredis.pack_command((b"XACK", self.key, self.group, *[entry[0] for entry in reply[0][1]])))
            return
        self.acking = False
        now = time.perf_counter()
        if now > self.deadline:
            self.finish()
            return
        tally = self.tally
        tally[0] += 1
        tally[1] += reply
        tally[3] = now
        self.transport.write(self.read_request)

    def finish(self, error: Exception | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        self.done[0] -= 1
        if error is not None and not self.done[1].done():
            self.done[1].set_exception(error)
        elif self.done[0] == 0 and not self.done[1].done():
            self.done[1].set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.finished:
            self.finish(ConnectionError(f"connection lost: {exc}"))


async def _worker_main(port: int, key: str, group: str, connections: int, count: int, seconds: float, worker: int, empty_ok: bool = False) -> tuple:
    loop = asyncio.get_running_loop()
    tally = [0, 0, 0, 0.0, 0]  # pairs, entries, exhausted, time of the last pair counted, empty reads retried
    done = [connections, loop.create_future()]  # connections still running, all finished
    conns = []
    for index in range(connections):
        consumer = f"c{worker}-{index}".encode()
        _, conn = await loop.create_connection(lambda consumer=consumer: _Consumer(key.encode(), group.encode(), consumer, count, tally, done, empty_ok), "127.0.0.1", port)
        conns.append(conn)
    print("ready", flush=True)
    await loop.run_in_executor(None, sys.stdin.readline)  # the parent's "go": all workers start together
    started = time.perf_counter()
    tally[3] = started
    for conn in conns:
        conn.start(started + seconds)
    await done[1]
    for conn in conns:
        conn.transport.close()
    tally[3] -= started
    return tuple(tally)


def run_load(port: int, key: str, group: str, *, clients: int = 50, processes: int = 2, count: int = 10, seconds: float = 5.0, empty_ok: bool = False) -> LoadResult:
    """Drive `clients` consumers of `group` on `key` for `seconds`; see the module docstring.

    empty_ok: an empty read is asked again instead of ending the consumer (a KEYSHARED
    group answers nothing to a consumer whose keys are not there yet)."""
    shares = [clients // processes + (index < clients % processes) for index in range(processes)]
    workers = []
    try:
        for index, share in enumerate(shares):
            argv = [sys.executable, "-m", "bench.loadgen", str(port), key, group, str(share), str(count), str(seconds), str(index)]
            if empty_ok:
                argv.append("empty-ok")
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
    return LoadResult(pairs, entries, seconds, exhausted, sum(out.get("empty", 0) for out in outcomes))


def _worker_cli(args: list[str]) -> None:
    """`python -m bench.loadgen port key group connections count seconds worker [empty-ok]` (one worker)."""
    import uvloop

    port, key, group, connections, count, seconds, worker, *flags = args
    try:
        tally = uvloop.run(_worker_main(int(port), key, group, int(connections), int(count), float(seconds), int(worker), "empty-ok" in flags))
        print(json.dumps(dict(zip(("pairs", "entries", "exhausted", "last", "empty"), tally, strict=True))), flush=True)
    except Exception as exc:  # the parent shows it
        print(f"error: {exc!r}", flush=True)


if __name__ == "__main__":
    _worker_cli(sys.argv[1:])
