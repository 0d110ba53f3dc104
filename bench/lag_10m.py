"""XGROUPLAG at issue 23's own size: a 10M-entry stream with 100k tombstones (about 3 minutes).

Not in `make bench` (10M entries take over a minute to build on 2 cores; the lag
suite uses 2M): `python -m bench.lag_10m`. Prints the round-trip p50/p99/max of
2,000 XGROUPLAG calls over two groups, with an XDEL and an XADD every tenth call,
and the command's own time from INFO commandstats.
"""

from __future__ import annotations

import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import hiredis

from bench.harness import free_port

ROOT = Path(__file__).resolve().parent.parent
ENTRIES = 10_000_000
TOMBSTONES = 100_000
BATCH = 20_000


class Pipe:
    """One raw connection: send a batch, read as many replies."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = hiredis.Reader()

    def call(self, commands: list[tuple]) -> list:
        self.sock.sendall(b"".join(hiredis.pack_command(c) for c in commands))
        replies: list = []
        while len(replies) < len(commands):
            reply = self.reader.gets()
            while reply is False:
                self.reader.feed(self.sock.recv(1 << 20))
                reply = self.reader.gets()
            replies.append(reply)
        return replies


def main() -> None:
    port = free_port()
    argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", tempfile.mkdtemp(), "--save", "", "--bind", "127.0.0.1"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2)
        pipe = Pipe(port)
        start = time.time()
        for i in range(0, ENTRIES, BATCH):
            pipe.call([("XADD", "s", f"{j + 1}-1", "k", "v") for j in range(i, i + BATCH)])
        print(f"built {ENTRIES:,} entries in {time.time() - start:.0f} s", flush=True)
        rng = random.Random(1)
        doomed = rng.sample(range(1, ENTRIES + 1), TOMBSTONES)
        for i in range(0, TOMBSTONES, BATCH):
            pipe.call([("XDEL", "s", f"{j}-1") for j in doomed[i : i + BATCH]])
        pipe.call([("XGROUP", "CREATE", "s", "g", f"{ENTRIES // 3}-1"), ("XGROUP", "CREATE", "s", "h", f"{ENTRIES // 2}-1")])
        pipe.call([("XGROUPLAG", "s")])  # the first call builds the rank structure
        times = []
        for k in range(2000):
            if k % 10 == 0:
                pipe.call([("XDEL", "s", f"{rng.randrange(1, ENTRIES)}-1"), ("XADD", "s", "*", "k", "v")])
            began = time.perf_counter()
            pipe.call([("XGROUPLAG", "s", "g", "h")])
            times.append(time.perf_counter() - began)
        times.sort()
        print(f"XGROUPLAG round trip: p50 {times[1000] * 1e3:.3f} ms, p99 {times[1980] * 1e3:.3f} ms, max {times[-1] * 1e3:.3f} ms")
        stats = pipe.call([("INFO", "commandstats")])[0].decode()
        print(*[line for line in stats.splitlines() if line.startswith("cmdstat_xgrouplag")])
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
