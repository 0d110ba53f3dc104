"""The benchmark harness: servers, rows, targets, and the measuring helpers suites share.

The suite interface (every `bench/suite_<name>.py`)::

    def run(env: Env) -> list[Row]

A suite starts the servers it needs through `env.server(kind)` ("redis",
"millrace" or "thin"), measures them one after another (never two under load
at the same time: the machine has 2 cores), and returns one `Row` per figure.
A row carries each server's value, the issue's target, and a note; the harness
turns it into a ratio against Redis and PASS/MISS. A figure Millrace cannot
produce yet because it lacks a command is `Row(..., skipped=NOT_SUPPORTED)`
(see `Env.unsupported`), never an exception. Sizes come from
`env.pick(default, quick)` so `--quick` shrinks every suite the same way.

Helpers for suites: `env.redis_benchmark(server, ...)` (runs Debian's
redis-benchmark with identical settings for every server), `cpu_row` (the
server CPU time per request behind a `env.benchmark_row`), `RawConnection`
(a blocking socket + hiredis reader, so the client side costs the same for
every server), `load_pipelined` (bulk loading with pipelined raw writes),
`Server.rss_bytes()` / `Server.used_memory()` for memory, `percentile`.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import hiredis

ROOT = Path(__file__).resolve().parent.parent
NOT_SUPPORTED = "n/a (not supported yet)"
SERVER_KINDS = ("redis", "millrace", "thin")


# -- rows and targets ---------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A goal from the issues. `kind`:

    - "ratio_min": Millrace / Redis must be >= value (throughput);
    - "ratio_max": Millrace / Redis must be <= value (memory);
    - "max": Millrace's own figure must be <= value (e.g. a growth factor);
    - "min": Millrace's own figure must be >= value (e.g. a share of its own throughput).
    """

    kind: str
    value: float

    def label(self) -> str:
        return {"ratio_min": f">= {self.value:g}x", "ratio_max": f"<= {self.value:g}x", "max": f"<= {self.value:g}", "min": f">= {self.value:g}"}[self.kind]


@dataclass
class Row:
    """One measured figure for each server (None: not measured / not available)."""

    suite: str
    name: str
    unit: str
    redis: float | None = None
    millrace: float | None = None
    thin: float | None = None
    target: Target | None = None
    note: str = ""
    skipped: str | None = None  # e.g. NOT_SUPPORTED: shown instead of a status
    extra: dict = field(default_factory=dict)  # anything else worth keeping in the JSON

    @property
    def ratio(self) -> float | None:
        """Millrace / Redis."""
        if self.redis and self.millrace is not None:
            return self.millrace / self.redis
        return None

    @property
    def thin_ratio(self) -> float | None:
        """Millrace / thin Python server (how close to the Python ceiling)."""
        if self.thin and self.millrace is not None:
            return self.millrace / self.thin
        return None

    @property
    def status(self) -> str:
        if self.skipped:
            return self.skipped
        if self.target is None:
            return "info"
        if self.target.kind in ("max", "min"):
            value = self.millrace
            if value is None:
                return "n/a"
            if self.target.kind == "max":
                return "PASS" if value <= self.target.value else "MISS"
            return "PASS" if value >= self.target.value else "MISS"
        ratio = self.ratio
        if ratio is None:
            return "n/a"
        if self.target.kind == "ratio_min":
            return "PASS" if ratio >= self.target.value else "MISS"
        return "PASS" if ratio <= self.target.value else "MISS"

    def to_json(self) -> dict:
        data = asdict(self)
        data["target"] = self.target.label() if self.target else None
        data["ratio"] = self.ratio
        data["thin_ratio"] = self.thin_ratio
        data["status"] = self.status
        return data


# -- servers ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn_ready(argv: list[str], log, cwd: Path, wait_ready: Callable[[subprocess.Popen], None]) -> subprocess.Popen:
    """argv started with its output in log, returned once wait_ready(process) returns.

    If wait_ready raises, the process is killed and reaped and log closed before the error goes on:
    the caller never got a handle, so the process must not outlive the failure (the benchmarks' and
    the tests' harnesses both start servers this way)."""
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd)
    try:
        wait_ready(proc)
    except BaseException:
        proc.kill()
        proc.wait()
        log.close()
        raise
    return proc


class Server:
    """A server process the benchmark started on a free loopback port."""

    def __init__(self, kind: str, argv: list[str], port: int, workdir: str, cwd: Path = ROOT, ready_timeout: float = 120.0) -> None:
        self.kind = kind
        self.port = port
        self.dir = workdir
        self.log_path = os.path.join(workdir, f"{kind}.log")
        self._log = open(self.log_path, "wb")
        started = time.perf_counter()
        self.proc = spawn_ready(argv, self._log, cwd, lambda proc: self._wait_ready(proc, ready_timeout))
        self.pid = self.proc.pid
        self.ready_seconds = time.perf_counter() - started  # start until the first PONG (data loading included)

    def _wait_ready(self, proc: subprocess.Popen, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited at start: {self.read_log()}")
            try:
                with RawConnection(self.port, timeout=5) as conn:
                    if conn.call("PING") == b"PONG":  # a server still loading answers -LOADING
                        return
            except OSError:
                pass
            time.sleep(0.005)
        raise RuntimeError(f"{self.kind} did not start: {self.read_log()}")

    def read_log(self) -> str:
        self._log.flush()
        return Path(self.log_path).read_text(errors="replace")[-4000:]

    def connect(self, timeout: float = 60.0) -> RawConnection:
        return RawConnection(self.port, timeout=timeout)

    def call(self, *args) -> object:
        """One command on a fresh connection; errors come back as hiredis.ReplyError values."""
        with self.connect() as conn:
            return conn.call(*args)

    def supports(self, *args) -> bool:
        """True unless the server answers `args` with an unknown (sub)command error."""
        reply = self.call(*args)
        if isinstance(reply, hiredis.ReplyError):
            text = str(reply).lower()
            return "unknown command" not in text and "unknown subcommand" not in text
        return True

    def rss_bytes(self) -> int:
        """Resident set size of the process, from /proc (what the OS really gave it)."""
        with open(f"/proc/{self.pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU time the process has used (to tell a saturated server from a starved one)."""
        with open(f"/proc/{self.pid}/stat") as handle:
            fields = handle.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def info(self, section: str = "") -> dict[str, str]:
        reply = self.call("INFO", section) if section else self.call("INFO")
        if isinstance(reply, hiredis.ReplyError):
            return {}
        fields = {}
        for line in reply.decode().splitlines():
            if ":" in line and not line.startswith("#"):
                name, _, value = line.partition(":")
                fields[name] = value
        return fields

    def used_memory(self) -> int:
        """Redis's own accounting (INFO memory used_memory)."""
        return int(self.info("memory")["used_memory"])

    def flushall(self) -> None:
        self.call("FLUSHALL")

    def stop(self, keep_dir: bool = False) -> None:
        """Terminate the server (SIGTERM, as a user would) and remove its directory unless `keep_dir`."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def start_server(kind: str, *args: str, millrace_root: Path | None = None, workdir: str | None = None) -> Server:
    """Start one server of `kind` ("redis", "millrace", "thin") on a free port.

    `millrace_root` runs Millrace from another checkout (to compare branches);
    `workdir` starts it on an existing directory (to load the files a stopped
    server left there), else a new temporary one is made. Persistence is off
    (`save ""`, `appendonly no`) unless `args` say otherwise (later wins).
    """
    port = free_port()
    workdir = workdir or tempfile.mkdtemp(prefix=f"bench-{kind}-")
    if kind == "redis":
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir, *args]
    elif kind == "millrace":
        argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, "--save", "", "--appendonly", "no", *args]
        return Server(kind, argv, port, workdir, cwd=millrace_root or ROOT)
    elif kind == "thin":
        argv = [sys.executable, "-m", "bench.thin_server", "--port", str(port), *args]
    else:
        raise ValueError(kind)
    return Server(kind, argv, port, workdir)


# -- raw client ---------------------------------------------------------------


class RawConnection:
    """A blocking socket with a hiredis reader: the same cheap client for every server."""

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> object:
        """One reply (a hiredis.ReplyError value for an error reply)."""
        reader = self.reader
        reply = reader.gets()
        while reply is False:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            reader.feed(chunk)
            reply = reader.gets()
        return reply

    def call(self, *args) -> object:
        self.sock.sendall(hiredis.pack_command(args))
        return self.read()

    def read_many(self, count: int) -> list:
        return [self.read() for _ in range(count)]


def pack(*args) -> bytes:
    return hiredis.pack_command(args)


def load_pipelined(server: Server, commands: Iterable[bytes], window: int = 1000) -> int:
    """Send encoded commands with up to `window` in flight; raise on the first error reply.

    Returns how many commands were sent. `commands` yields already-encoded
    requests (see `pack`), so the loader itself costs almost nothing.
    """
    sent = 0
    with server.connect(timeout=300) as conn:
        batch: list[bytes] = []
        for request in commands:
            batch.append(request)
            if len(batch) == window:
                conn.send(b"".join(batch))
                _check(conn.read_many(len(batch)))
                sent += len(batch)
                batch.clear()
        if batch:
            conn.send(b"".join(batch))
            _check(conn.read_many(len(batch)))
            sent += len(batch)
    return sent


def _check(replies: list) -> None:
    for reply in replies:
        if isinstance(reply, hiredis.ReplyError):
            raise RuntimeError(f"load failed: {reply}")


def percentile(samples: Sequence[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


# -- redis-benchmark ----------------------------------------------------------


@dataclass
class BenchResult:
    rps: float
    avg_ms: float
    p50_ms: float
    p99_ms: float


# -- the environment suites receive ---------------------------------------------


class Env:
    """What a suite gets: the run's options, server start-up, and measuring helpers."""

    def __init__(self, quick: bool = False, verbose: bool = True, millrace_root: Path | None = None) -> None:
        self.quick = quick
        self.rounds = 1 if quick else 3
        self.millrace_root = millrace_root
        self.verbose = verbose
        self.redis_available = shutil.which("redis-server") is not None
        self.redis_benchmark_path = shutil.which("redis-benchmark")
        self._support_cache: dict[tuple, bool] = {}

    def pick(self, default, quick):
        """A size for this run: `quick` under --quick, else `default`."""
        return quick if self.quick else default

    def log(self, message: str) -> None:
        if self.verbose:
            print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    @contextlib.contextmanager
    def server(self, kind: str, *args: str) -> Iterator[Server]:
        """A fresh server of `kind` for the duration of the block."""
        proc = start_server(kind, *args, millrace_root=self.millrace_root)
        try:
            yield proc
        finally:
            proc.stop()

    def kinds(self, *wanted: str) -> list[str]:
        """The server kinds among `wanted` this machine can run (Redis may be absent)."""
        return [kind for kind in wanted if kind != "redis" or self.redis_available]

    def millrace_supports(self, *probes: Sequence[str]) -> bool:
        """Whether Millrace knows every probed command, e.g. ("XADD",), ("XINFO", "GROUPS", "k").

        A probe is a command line; the answer is "no" only for an unknown
        (sub)command error, so argument errors still count as supported.
        Cached per run; starts a short-lived Millrace to ask.
        """
        missing = [probe for probe in probes if tuple(probe) not in self._support_cache]
        if missing:
            with self.server("millrace") as proc:
                for probe in missing:
                    self._support_cache[tuple(probe)] = proc.supports(*probe)
        return all(self._support_cache[tuple(probe)] for probe in probes)

    def unsupported(self, suite: str, names: Iterable[tuple[str, str]], what: str) -> list[Row]:
        """Rows standing in for figures Millrace cannot produce yet (`what` names the commands)."""
        return [Row(suite, name, unit, skipped=NOT_SUPPORTED, note=f"needs {what}") for name, unit in names]

    def redis_benchmark(
        self,
        server: Server,
        command: Sequence[str] = (),
        *,
        tests: str | None = None,
        clients: int = 50,
        pipeline: int = 1,
        requests: int = 100_000,
        keyspace: int | None = None,
        extra: Sequence[str] = (),
        timeout: float = 300.0,
    ) -> dict[str, BenchResult]:
        """Run redis-benchmark against `server`; results per test name (upper case)."""
        if self.redis_benchmark_path is None:
            raise RuntimeError("redis-benchmark is not installed (it comes with Debian's redis-tools)")
        argv = [self.redis_benchmark_path, "-h", "127.0.0.1", "-p", str(server.port), "-c", str(clients), "-n", str(requests), "-P", str(pipeline), "--csv"]
        if keyspace:
            argv += ["-r", str(keyspace)]
        if tests:
            argv += ["-t", tests]
        argv += list(extra)
        argv += list(command)
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            bench = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
            deadline = time.monotonic() + timeout
            while bench.poll() is None:
                # redis-benchmark retries a dead server forever: watch the server too
                if server.proc.poll() is not None or time.monotonic() > deadline:
                    bench.kill()
                    bench.wait()
                    if server.proc.poll() is not None:
                        raise RuntimeError(f"{server.kind} died during redis-benchmark: {server.read_log()}")
                    raise RuntimeError(f"redis-benchmark on {server.kind} took over {timeout} s: {' '.join(argv)}")
                time.sleep(0.05)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read(), err.read()
        results = parse_benchmark_csv(stdout)
        if not results:
            raise RuntimeError(f"redis-benchmark gave no results (rc={bench.returncode}): {stderr[-2000:]} {stdout[-2000:]}")
        return results


    def benchmark_row(
        self,
        row: Row,
        servers: dict[str, Server],
        command: Sequence[str] = (),
        *,
        tests: str | None = None,
        result_name: str | None = None,
        requests: int = 100_000,
        **options,
    ) -> Row:
        """Fill `row` with each server's best req/s over `self.rounds` interleaved rounds.

        Round after round the servers run one after another with the same
        redis-benchmark settings, so a neighbour's load on this shared machine
        spreads over all of them; the best round is the least disturbed one.
        All rounds' figures stay in `row.extra`, with the server's CPU share
        during each run (1.0 = one core busy: the server was the limit) and
        its CPU time per request (see `cpu_row`).
        """
        for _ in range(self.rounds):
            for kind, server in servers.items():
                self.log(f"{row.suite}: {row.name} on {kind}")
                cpu_before, started = server.cpu_seconds(), time.perf_counter()
                results = self.redis_benchmark(server, command, tests=tests, requests=requests, **options)
                cpu_used = server.cpu_seconds() - cpu_before
                cpu_share = cpu_used / (time.perf_counter() - started)
                result = results[result_name] if result_name else next(iter(results.values()))
                runs = row.extra.setdefault(kind, {"rps": [], "p50_ms": [], "p99_ms": [], "server_cpu": [], "cpu_us_per_request": []})
                runs["rps"].append(result.rps)
                runs["server_cpu"].append(round(cpu_share, 2))
                runs["cpu_us_per_request"].append(round(cpu_used / requests * 1e6, 2))
                runs["p50_ms"].append(result.p50_ms)
                runs["p99_ms"].append(result.p99_ms)
                setattr(row, kind, max(runs["rps"]))
        return row


def cpu_row(row: Row) -> Row:
    """The server CPU time per request behind a `benchmark_row` (its lowest round), as an info row.

    Unpipelined, redis-benchmark itself may be the bottleneck, and then
    every server shows the client's rate: how close the ratio is to 1 says
    how fast this machine's client is as much as how fast the server is.
    CPU time per request says what each server spends whatever the client's
    speed (to /proc's 10 ms clock ticks, about 2% of a run here).
    """
    cpu = Row(row.suite, f"server CPU per request, {row.name}", "us")
    for kind, runs in row.extra.items():
        setattr(cpu, kind, min(runs["cpu_us_per_request"]))
    return cpu


def parse_benchmark_csv(text: str) -> dict[str, BenchResult]:
    """redis-benchmark --csv: a header line, then one line per test."""
    results: dict[str, BenchResult] = {}
    lines = [line for line in text.splitlines() if line.startswith('"')]
    for record in csv.DictReader(io.StringIO("\n".join(lines))):
        name = record.get("test")
        if not name or name == "test":
            continue
        results[name.upper()] = BenchResult(
            rps=float(record["rps"]),
            avg_ms=float(record.get("avg_latency_ms") or 0),
            p50_ms=float(record.get("p50_latency_ms") or 0),
            p99_ms=float(record.get("p99_latency_ms") or 0),
        )
    return results
