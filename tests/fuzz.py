"""`make fuzz`: a long run of mutated requests against a real Millrace (issue 25); not part of `make test`.

Connections send pipelines of valid requests (reads and writes of strings, streams and groups,
CONFIG GET, CLIENT, MULTI/EXEC...) with one to three bytes flipped, inserted or deleted from
RESP's alphabet, each pipeline split at random points across one to four writes; a connection the
server closes is replaced. Meanwhile another client sends a PING every 10 ms. At the end:

- the server is still running and its log holds no traceback or unhandled exception;
- no PING waited more than 50 ms (the worst is printed; the machine's own hiccups count too);
- memory does not grow: RSS after a FLUSHALL at the end against RSS after a FLUSHALL once the
  first tenth of the requests had run (warm caches, allocator arenas in use).

`python -m tests.fuzz --requests 1000000 --connections 8 --seed 1`; exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import random
import socket
import sys
import threading
import time

from tests.servers import start_millrace

ALPHABET = b"\r\n*$+-:~>|%_,#(=!0123456789 a\x00"
STALL_LIMIT = 0.050
GROWTH_LIMIT = 16 << 20  # bytes of RSS growth between the two FLUSHALLs that count as a leak


def pack(*args: bytes) -> bytes:
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in args)


BASE = [
    pack(b"PING"), pack(b"ECHO", b"hello"), pack(b"SET", b"k", b"v"), pack(b"GET", b"k"), pack(b"DEL", b"k", b"s"),
    pack(b"XADD", b"s", b"*", b"f", b"v"), pack(b"XADD", b"s", b"MAXLEN", b"~", b"100", b"*", b"a", b"b", b"c", b"d"),
    pack(b"XRANGE", b"s", b"-", b"+", b"COUNT", b"10"), pack(b"XREVRANGE", b"s", b"+", b"-"), pack(b"XLEN", b"s"),
    pack(b"XGROUP", b"CREATE", b"s", b"g", b"$", b"MKSTREAM"), pack(b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"5", b"STREAMS", b"s", b">"),
    pack(b"XACK", b"s", b"g", b"0-1"), pack(b"XPENDING", b"s", b"g"), pack(b"XINFO", b"STREAM", b"s"), pack(b"XTRIM", b"s", b"MAXLEN", b"50"),
    pack(b"MULTI"), pack(b"EXEC"), pack(b"CONFIG", b"GET", b"maxclients"), pack(b"CLIENT", b"INFO"), pack(b"HELLO", b"3"), pack(b"HELLO", b"2"),
    pack(b"INFO", b"stats"), pack(b"EXPIRE", b"k", b"100"), pack(b"TYPE", b"s"), pack(b"SCAN", b"0"), b"PING\r\n", b"ECHO inline\r\n",
]


def mutate(rng: random.Random, data: bytearray) -> None:
    """One to three bytes of RESP's alphabet flipped, inserted or deleted, in place."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randrange(len(data) + 1)
        roll = rng.random()
        if roll < 0.4 and at < len(data):
            data[at] = rng.choice(ALPHABET)
        elif roll < 0.7:
            data[at:at] = bytes([rng.choice(ALPHABET)])
        elif at < len(data):
            del data[at]


def mutated(rng: random.Random, requests: int) -> list[bytes]:
    data = bytearray(b"".join(rng.choice(BASE) for _ in range(requests)))
    mutate(rng, data)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 3))))
    return [bytes(data[a:b]) for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


class Pinger(threading.Thread):
    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port, self.worst, self.over, self.count = port, 0.0, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        while not self.done.is_set():
            start = time.perf_counter()
            sock.sendall(b"PING\r\n")
            reply = b""
            while not reply.endswith(b"\r\n"):
                reply += sock.recv(64)
            elapsed = time.perf_counter() - start
            self.count += 1
            self.worst = max(self.worst, elapsed)
            self.over += elapsed > STALL_LIMIT
            time.sleep(0.01)
        sock.close()


def worker(port: int, seed: int, quota: int, sent: list[int], index: int) -> None:
    rng = random.Random(seed)
    sock = None
    while sent[index] < quota:
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        requests = rng.randint(1, 20)
        try:
            for chunk in mutated(rng, requests):
                sock.sendall(chunk)
            sock.settimeout(0.005)
            while True:
                if not sock.recv(1 << 16):
                    raise ConnectionError
        except TimeoutError:
            pass  # quiet: the server answered what it could and waits for more
        except OSError:
            sock.close()
            sock = None
        sent[index] += requests
        if rng.random() < 0.02 and sock is not None:  # now and then a fresh connection anyway
            sock.close()
            sock = None
    if sock is not None:
        sock.close()


def flush_rss(proc) -> int:
    with proc.client() as client:
        client.flushall()
    time.sleep(0.5)
    with open(f"/proc/{proc.proc.pid}/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:"))


def run_phase(port: int, seed: int, total: int, connections: int) -> None:
    sent = [0] * connections
    threads = [threading.Thread(target=worker, args=(port, seed * 1000 + i, total // connections, sent, i)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    proc = start_millrace()
    try:
        pinger = Pinger(proc.port)
        pinger.start()
        started = time.monotonic()
        run_phase(proc.port, args.seed, args.requests // 10, args.connections)
        baseline = flush_rss(proc)
        run_phase(proc.port, args.seed + 1, args.requests - args.requests // 10, args.connections)
        seconds = time.monotonic() - started
        final = flush_rss(proc)
        pinger.done.set()
        pinger.join()
        alive = proc.proc.poll() is None
        log = proc.read_log()
        crashes = [line for line in log.splitlines() if "Traceback" in line or "Exception" in line or "Error" in line and " # " in line]
        print(f"requests: {args.requests:,} mutated, {args.connections} connections, seed {args.seed}, {seconds:.0f} s")
        print(f"server alive: {alive}; traceback/exception lines in its log: {len(crashes)}")
        print(f"concurrent PING: {pinger.count} sent, worst {pinger.worst * 1000:.1f} ms, {pinger.over} over {STALL_LIMIT * 1000:.0f} ms")
        print(f"RSS after FLUSHALL: {baseline / 1e6:.1f} MB after the first tenth, {final / 1e6:.1f} MB at the end ({(final - baseline) / 1e6:+.1f} MB)")
        for line in crashes[:10]:
            print("  log:", line)
        ok = alive and not crashes and pinger.over == 0 and final - baseline <= GROWTH_LIMIT
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        proc.stop()


if __name__ == "__main__":
    sys.exit(main())
