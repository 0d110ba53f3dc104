"""Hostile input (issue 25): fairness under one client's big read, and big arguments.

- fairness: client A sends one 256 KB write of `XRANGE s - +` over a 10,000-entry stream and
  reads every reply; meanwhile client B sends a PING every 10 ms and waits for each. Figures: B's
  worst and median PING latency, the server's peak RSS during the run, and how long A took.
  (The issue: Millrace delayed the PING 30-35 s with a 5.7 GB peak; Redis 3-6.5 s, 2.6 GB.)
- large argument: one SET of a 64 MB value (the issue's 512 MB scaled down): peak RSS growth over
  the argument (target <= 1.3), and the worst PING latency of another client meanwhile.
- wide XADD: one XADD with 1,000,000 field-value pairs: time to the reply (target <= 4x Redis) and
  peak RSS growth (target <= 2x Redis).

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


def large_argument(env: Env, servers: dict) -> list[Row]:
    size = env.pick(64, 16) << 20
    growth = Row(SUITE, f"SET of {size >> 20} MB: peak RSS growth / argument", "x", target=Target("max", 1.3))
    stall = Row(SUITE, f"PING max delay during the {size >> 20} MB SET", "ms")
    value = b"v" * size
    for kind, server in servers.items():
        server.flushall()
        sampler, pinger = Sampler(server, 0.005), Pinger(server.port, 0.002)
        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", server.port), timeout=120) as sock:
            sock.sendall(pack("SET", "big", value))
            assert sock.recv(16) == b"+OK\r\n"
        time.sleep(0.1)
        latencies = pinger.stop()
        top = sampler.stop()
        setattr(growth, kind, (top - sampler.start) / size)
        setattr(stall, kind, max(latencies) * 1000)
        server.flushall()
    return [growth, stall]


def wide_xadd(env: Env, servers: dict) -> list[Row]:
    fields = env.pick(1_000_000, 100_000)
    took = Row(SUITE, f"XADD with {fields} fields", "s", target=Target("ratio_max", 4.0))
    growth = Row(SUITE, f"peak RSS growth during the {fields}-field XADD", "MB", target=Target("ratio_max", 2.0))
    args = ["XADD", "wide", "*"]
    for i in range(fields):
        args += [f"f{i}", f"v{i}"]
    request = pack(*args)
    for kind, server in servers.items():
        server.flushall()
        sampler = Sampler(server, 0.005)
        with socket.create_connection(("127.0.0.1", server.port), timeout=600) as sock:
            start = time.perf_counter()
            sock.sendall(request)
            reply = sock.recv(64)
            elapsed = time.perf_counter() - start
        assert reply.startswith(b"$"), reply
        top = sampler.stop()
        setattr(took, kind, elapsed)
        setattr(growth, kind, (top - sampler.start) / 1e6)
        server.flushall()
    return [took, growth]


def run(env: Env) -> list[Row]:
    rows: list[Row] = []
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        for part in (fairness, large_argument, wide_xadd):
            rows += part(env, servers)
    return rows
