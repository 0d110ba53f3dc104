"""Hostile input (issue 25): fairness under one client's big read, and big arguments.

- fairness: client A sends one 256 KB write of `XRANGE s - +` over a 10,000-entry stream and
  reads every reply; meanwhile client B sends a PING every 10 ms and waits for each. Figures: B's
  worst and median PING latency, the server's peak RSS during the run, and how long A took.
  (The issue: Millrace delayed the PING 30-35 s with a 5.7 GB peak; Redis 3-6.5 s, 2.6 GB.)
(The big-argument rows, a 64 MB SET and a 1,000,000-field XADD, are the `bigargs` suite.)

RSS is sampled every 20 ms from /proc (a peak between samples can be missed), and the machine is
shared: the figures are noisy, compare them within one run.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import threading
import time

from .harness import Env, Row, Target, load_pipelined, pack

SUITE = "hardening"


class Sampler:
    """A server's RSS, sampled in a thread until stopped: the peak and the value at start."""

    def __init__(self, server, interval: float = 0.02) -> None:
        self.server, self.interval = server, interval
        self.start = self.peak = server.rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError, RuntimeError):
                self.peak = max(self.peak, self.server.rss_bytes())
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


class Pinger:
    """Another client: a PING every `interval` seconds, each latency recorded."""

    def __init__(self, port: int, interval: float = 0.01) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=300)
        self.interval = interval
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            self.sock.sendall(b"PING\r\n")
            data = b""
            while not data.endswith(b"\r\n"):
                chunk = self.sock.recv(64)
                if not chunk:
                    return
                data += chunk
            self.latencies.append(time.perf_counter() - start)
            time.sleep(self.interval)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join()
        self.sock.close()
        return self.latencies


def _read_all(sock: socket.socket, expected: int) -> int:
    """Read until `expected` bytes have come (the replies' size is known in advance)."""
    got = 0
    while got < expected:
        chunk = sock.recv(4 << 20)
        if not chunk:
            break
        got += len(chunk)
    return got


def fairness(env: Env, servers: dict) -> list[Row]:
    entries, write_bytes = env.pick(10_000, 1_000), env.pick(256 * 1024, 32 * 1024)
    request = pack("XRANGE", "s", "-", "+")
    count = write_bytes // len(request)
    delay = Row(SUITE, f"PING max delay during {write_bytes // 1024} KB of XRANGE over {entries} entries", "ms",
                target=Target("ratio_max", 1.0))
    median = Row(SUITE, "PING median delay during it", "ms")
    peak = Row(SUITE, "peak RSS during it", "MB", target=Target("ratio_max", 1.0))
    took = Row(SUITE, "the big client's whole pipeline", "s")
    for kind, server in servers.items():
        server.flushall()
        load_pipelined(server, (pack("XADD", "s", f"{i + 1}-0", "field", f"value-{i:08d}") for i in range(entries)))
        reply_size = len(_xrange_reply(server))
        sampler, pinger = Sampler(server), Pinger(server.port)
        time.sleep(0.1)
        start = time.perf_counter()
        with socket.create_connection(("127.0.0.1", server.port), timeout=600) as big:
            big.sendall(request * count)
            got = _read_all(big, reply_size * count)
        elapsed = time.perf_counter() - start
        latencies = pinger.stop()
        top = sampler.stop()
        env.log(f"{kind}: {count} XRANGE, {got / 1e9:.2f} GB of replies in {elapsed:.1f} s, {len(latencies)} PINGs")
        setattr(delay, kind, max(latencies) * 1000)
        setattr(median, kind, statistics.median(latencies) * 1000)
        setattr(peak, kind, top / 1e6)
        setattr(took, kind, elapsed)
        server.flushall()
    return [delay, median, peak, took]


def _xrange_reply(server) -> bytes:
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.sendall(pack("XRANGE", "s", "-", "+"))
        data = b""
        sock.settimeout(5)
        with contextlib.suppress(TimeoutError):
            while True:
                sock.settimeout(0.3 if data else 5)
                chunk = sock.recv(1 << 20)
                if not chunk:
                    break
                data += chunk
        return data


def run(env: Env) -> list[Row]:
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        for part in (fairness,):
            rows += part(env, servers)
    return rows
