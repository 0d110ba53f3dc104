"""Start real server processes on free loopback ports: Millrace and, as the oracle, Redis."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A server started as a child process; stopped on `stop()`."""

    def __init__(self, argv: list[str], port: int, workdir: str, name: str) -> None:
        self.port = port
        self.dir = workdir
        self.name = name
        self.log = open(os.path.join(workdir, f"{name}.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.read_log()}")
            try:
                with redis.Redis(port=self.port, socket_timeout=1) as client:
                    client.ping()
                return
            except redis.AuthenticationError:
                return
            except redis.ResponseError as exc:
                if "NOAUTH" in str(exc):
                    return
                raise
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start: {self.read_log()}")

    def read_log(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def client(self, **kw) -> redis.Redis:
        kw.setdefault("socket_timeout", 30)
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


def start_millrace(*args: str, workdir: str | None = None) -> ServerProcess:
    workdir = workdir or tempfile.mkdtemp(prefix="millrace-")
    port = free_port()
    argv = [sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "millrace")


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


def start_redis(*args: str) -> ServerProcess:
    workdir = tempfile.mkdtemp(prefix="redis-oracle-")
    port = free_port()
    argv = [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir, *args]
    return ServerProcess(argv, port, workdir, "redis")
