"""redis-cli against Millrace: one-shot commands, RESP3, --pipe mass insertion,
INFO, and the interactive hints it builds from COMMAND DOCS."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import termios
import time

import pytest

from server import REDIS_VERSION

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")


def cli(server, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["redis-cli", "-p", str(server.port), *args], input=stdin, capture_output=True, timeout=60)


def test_one_shot_commands(server):
    assert cli(server, "PING").stdout == b"PONG\n"
    assert cli(server, "ECHO", "hello world").stdout == b"hello world\n"
    assert cli(server, "SET", "cli-key", "v").stdout == b"OK\n"
    assert cli(server, "GET", "cli-key").stdout == b"v\n"
    assert cli(server, "--no-raw", "CLIENT", "GETNAME").stdout == b"(nil)\n"
    assert cli(server, "-n", "3", "PING").stdout == b"PONG\n"
    result = cli(server, "-n", "99", "PING")
    assert b"SELECT 99 failed: ERR DB index is out of range" in result.stdout + result.stderr
    assert cli(server, "NOSUCH", "x").stdout == b"ERR unknown command 'NOSUCH', with args beginning with: 'x' \n\n"


def test_resp3_and_json(server):
    lines = cli(server, "-3", "HELLO", "3").stdout.decode().splitlines()
    assert lines[:3] == ["server redis", f"version {REDIS_VERSION}", "proto 3"]
    assert cli(server, "--json", "CONFIG", "GET", "port").stdout == f'{{"port":"{server.port}"}}\n'.encode()


def test_info(server):
    out = cli(server, "INFO", "server").stdout.decode()
    assert out.startswith("# Server\r\n")
    assert f"redis_version:{REDIS_VERSION}\r\n" in out
    assert f"tcp_port:{server.port}\r\n" in out
    keyspace = cli(server, "INFO", "keyspace").stdout.decode()
    assert keyspace.startswith("# Keyspace")


def test_pipe_mass_insertion(server):
    count = 20_000
    payload = b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nmass:%d\r\n$1\r\nx\r\n" % (len(b"mass:%d" % i), i) for i in range(count))
    result = cli(server, "--pipe", stdin=payload)
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[-1] == f"errors: 0, replies: {count}"
    assert cli(server, "EXISTS", "mass:0", f"mass:{count - 1}").stdout == b"2\n"


def test_pipe_inline_and_errors(server):
    result = cli(server, "--pipe", stdin=b"SET pipe:a 1\r\nSET pipe:b 2\r\nNOPE\r\n")
    assert result.returncode == 1
    assert result.stderr.decode() == "ERR unknown command 'NOPE', with args beginning with: \n"
    assert result.stdout.decode().splitlines()[-1] == "errors: 1, replies: 3"


def _interactive(server, keys: bytes, wait_for: bytes, timeout: float = 30.0) -> bytes:
    """Type into an interactive redis-cli on a pseudo-terminal and collect the screen bytes."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ["TERM"] = "xterm"
        os.execvp("redis-cli", ["redis-cli", "-p", str(server.port)])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))
    out = b""
    try:
        deadline = time.monotonic() + timeout
        sent = False
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                out += chunk
                if b"\x1b[6n" in chunk:  # linenoise asks where the cursor is
                    os.write(fd, b"\x1b[1;1R")
            if not sent and b">" in out:
                os.write(fd, keys)
                sent = True
            if sent and wait_for in _plain(out):
                break
    finally:
        os.write(fd, b"\x03")  # ^C leaves the prompt line
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    return _plain(out)


def _plain(screen: bytes) -> bytes:
    """The screen bytes without terminal escape sequences."""
    return re.sub(rb"\x1b\[[0-9;]*[A-Za-z]", b"", screen)


def test_interactive_hints_from_command_docs(server):
    """redis-cli 7 builds its hints from COMMAND DOCS arguments: typing `CONFIG SET ` shows them."""
    screen = _interactive(server, b"CONFIG SET ", b"parameter value")
    assert b"parameter value [parameter value ...]" in screen
    screen = _interactive(server, b"PING ", b"[message]")
    assert b"[message]" in screen


def test_interactive_help(server):
    screen = _interactive(server, b"HELP CONFIG GET\r", b"group: server")
    text = screen.decode(errors="replace")
    assert "CONFIG GET parameter [parameter ...]" in text
    assert "summary: Returns the effective values of configuration parameters." in text
    assert "since: 2.0.0" in text
    assert "group: server" in text
