"""Start-up limits as Redis 8.2.3 sets them: open files, bind addresses, file names.

- The open-files limit is raised toward maxclients + 32; where the hard limit forbids, maxclients
  is lowered to fit, with Redis's warnings, and clients past it get `-ERR max number of clients
  reached` (with soft 1024, 1,990 of 3,000 connections were closed with no reply and no log line).
- A bind address that cannot be bound ends the start-up with Redis's two lines (Millrace served
  [::1] alone, so IPv4 clients silently reached whatever else held the port).
- dbfilename, appendfilename and appenddirname are names in `dir`, never paths.

Each case runs Millrace and Redis the same way (under `prlimit` where the limit matters) and
compares exit codes, log lines (without pid and time) and replies.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from tests.servers import ROOT, ServerProcess, free_port, redis_server_path, require_redis

pytestmark = pytest.mark.skipif(shutil.which("prlimit") is None, reason="prlimit (util-linux) is needed")
_PREFIX = re.compile(r"^\d+:[A-Z] \d+ \w+ \d+ [\d:.]+ [.\-*#] ", re.M)
MAX_CLIENTS_REACHED = b"-ERR max number of clients reached\r\n"


def _argv(name: str, port: int, workdir: str, *args: str, nofile: str | None = None) -> list[str]:
    binary = [sys.executable, "-m", "server"] if name == "millrace" else [redis_server_path()]
    argv = [*binary, "--port", str(port), "--bind", "127.0.0.1 -::1", "--dir", workdir, "--save", "", *args]
    return ["prlimit", f"--nofile={nofile}", *argv] if nofile else argv


def _start(name: str, *args: str, nofile: str | None = None) -> ServerProcess:
    workdir = tempfile.mkdtemp(prefix=f"{name}-limits-")
    port = free_port()
    return ServerProcess(_argv(name, port, workdir, *args, nofile=nofile), port, workdir, name)


def _lines(text: str, *needles: str) -> list[str]:
    """Log lines holding any of needles, without Redis's `pid:role date time level ` prefix."""
    return [_PREFIX.sub("", line) for line in text.splitlines() if any(n in line for n in needles)]


def _run(name: str, *args: str, nofile: str | None = None, port: int | None = None) -> tuple[int, str]:
    """A start-up expected to fail: exit code and output."""
    workdir = tempfile.mkdtemp(prefix=f"{name}-limits-")
    argv = _argv(name, port or free_port(), workdir, *args, nofile=nofile)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)
    return done.returncode, done.stdout + done.stderr


@pytest.fixture(scope="module", autouse=True)
def _redis():
    require_redis()


FD_LINES = ("max file descriptors", "open files", "ulimit")


def test_a_low_hard_limit_lowers_maxclients_and_refuses_the_clients_past_it():
    outcomes = []
    for name in ("millrace", "redis"):
        proc = _start(name, nofile="256:256")
        try:
            with proc.client() as client:
                maxclients = client.config_get("maxclients")["maxclients"]
            sockets, replies = [], []
            try:
                for _ in range(240):
                    sock = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
                    sockets.append(sock)
                    sock.sendall(b"PING\r\n")
                    replies.append(sock.recv(100))
            finally:
                for sock in sockets:
                    sock.close()
            outcomes.append((maxclients, replies.count(b"+PONG\r\n"), replies.count(MAX_CLIENTS_REACHED), _lines(proc.read_log(), *FD_LINES)))
        finally:
            proc.stop()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][:3] == ("224", 224, 16)
    assert outcomes[0][3] == [
        "You requested maxclients of 10000 requiring at least 10032 max file descriptors.",
        "Server can't set maximum open files to 10032 because of OS error: Operation not permitted.",
        "Current maximum open files is 256. maxclients has been reduced to 224 to compensate for low ulimit. "
        "If you need higher maxclients increase 'ulimit -n'.",
    ]


def test_the_soft_limit_is_raised_when_the_hard_limit_allows():
    for name in ("millrace", "redis"):
        proc = _start(name, "--maxclients", "2000", nofile="1024:4096")
        try:
            with proc.client() as client:
                assert client.config_get("maxclients")["maxclients"] == "2000", name
            assert _lines(proc.read_log(), *FD_LINES) == [
                "Increased maximum number of open files to 2032 (it was originally set to 1024)."], name
        finally:
            proc.stop()


def test_too_few_descriptors_to_start():
    for name in ("millrace", "redis"):
        code, output = _run(name, nofile="24:24")
        assert code == 1, name
        assert _lines(output, "ulimit") == [
            "Your current 'ulimit -n' of 24 is not enough for the server to start. Please increase your open file limit to at least 10032. Exiting."], name


def test_a_bind_address_in_use_ends_the_start_up():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        for name in ("millrace", "redis"):
            code, output = _run(name, port=port)
            assert code == 1, name
            assert _lines(output, "listening") == [
                f"Warning: Could not create server TCP listening socket 127.0.0.1:{port}: bind: Address already in use",
                f"Failed listening on port {port} (tcp), aborting.",
            ], name
    finally:
        holder.close()


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("dbfilename", "a/b", "dbfilename can't be a path, just a filename"),
    ("dbfilename", "../dump.rdb", "dbfilename can't be a path, just a filename"),
    ("dbfilename", "a\\b", "dbfilename can't be a path, just a filename"),
    ("appendfilename", "x/appendonly.aof", "appendfilename can't be a path, just a filename"),
    ("appenddirname", "/tmp/aof", "appenddirname can't be a path, just a dirname"),
])
def test_file_names_cannot_be_paths(name, value, reason):
    """At start-up Redis's fatal config error; by CONFIG SET (where the parameter is mutable) its reply."""
    for server in ("millrace", "redis"):
        code, output = _run(server, f"--{name}", value)
        assert code == 1, server
        assert output.splitlines()[-1] == reason, server
        assert f">>> '{name} \"{value.replace(chr(92), chr(92) * 2)}\"'" in output, server
    if name != "dbfilename":
        return
    answers = []
    for server in ("millrace", "redis"):
        proc = _start(server, "--enable-protected-configs", "yes")
        try:
            with proc.client() as client:
                try:
                    client.config_set(name, value)
                    answers.append("OK")
                except Exception as exc:  # noqa: BLE001 - the error text is compared
                    answers.append(str(exc))
                answers.append(client.config_get(name)[name])
        finally:
            proc.stop()
    assert answers[0] == answers[2] == f"CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    assert answers[1] == "dump.mpk" and answers[3] == "dump.rdb"  # unchanged (each server's own default)
