"""Configuration audit against Redis 8.2.3: no setting accepted and silently ignored, values and errors as Redis.

- active-expire-effort scales the active expire cycle as Redis's (keys per loop, time share, acceptable
  stale share); it was accepted and ignored.
- propagation-error-behavior panic stops an AOF load at a failing command, as Redis's panic; it was
  accepted and ignored (the load went on).
- cluster-enabled yes and maxmemory-clients other than 0 are refused (no cluster mode, no client
  eviction), as tls-port is; they were accepted and ignored.
- cluster-announce-hostname / cluster-announce-human-nodename take Redis's characters only.
- Redis 8's deprecated parameters (io-threads-do-reads, lua-replicate-commands, list-max-ziplist-*)
  load from a config file or command line with any one value, and CONFIG GET/SET do not know them.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import ROOT, ServerProcess, free_port, millrace_and_redis, redis_server_path


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def _replies(pair, *args):
    """Each server's reply to one command (an error as its text), on a fresh connection."""
    replies = []
    for proc in pair:
        conn = RawConn(proc.port)
        replies.append(_reply(conn, args))
        conn.close()
    return replies


def _reply(conn: RawConn, args: tuple):
    reply = conn.call(*args)
    return f"error: {reply}" if isinstance(reply, Exception) else reply


def test_cluster_announce_names_take_redis_characters(pair):
    values = ["", "host-1.example", "10%", "+5", " 5", "1 2", "a_b", "node:1", "x" * 255, "x" * 256, "caf\u00e9"]
    for name in ("cluster-announce-hostname", "cluster-announce-human-nodename"):
        for value in values:
            millrace, redis = _replies(pair, "CONFIG", "SET", name, value)
            assert millrace == redis, (name, value, millrace, redis)
            shown = _replies(pair, "CONFIG", "GET", name)
            assert shown[0] == shown[1], (name, value, shown)
        _replies(pair, "CONFIG", "SET", name, "")


def test_deprecated_parameters_are_unknown_to_config_get_and_set(pair):
    for name in ("io-threads-do-reads", "lua-replicate-commands", "list-max-ziplist-entries", "list-max-ziplist-value"):
        for args in (("CONFIG", "GET", name), ("CONFIG", "SET", name, "yes"), ("CONFIG", "SET", name, "5")):
            millrace, redis = _replies(pair, *args)
            assert millrace == redis, (args, millrace, redis)
    millrace, redis = _replies(pair, "CONFIG", "GET", "io-threads*")
    assert millrace == redis


def _starts(argv: list[str], port: int, workdir: str) -> bool:
    """Whether the server comes up (and answers PING); stopped again either way."""
    try:
        proc = ServerProcess(argv, port, workdir, "server", ready_timeout=20)
    except RuntimeError:
        return False
    proc.stop()
    return True


def _millrace_argv(port: int, workdir: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "server", "--port", str(port), "--dir", workdir, *args]


def _redis_argv(port: int, workdir: str, *args: str) -> list[str]:
    return [redis_server_path(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", workdir, *args]


DEPRECATED_LINES = ("--io-threads-do-reads", "bogus", "--lua-replicate-commands", "yes", "--list-max-ziplist-entries", "5", "--list-max-ziplist-value", "64")


@pytest.mark.parametrize("make_argv", [_millrace_argv, _redis_argv], ids=["millrace", "redis"])
def test_deprecated_parameters_load_from_the_command_line(pair, make_argv):
    workdir = tempfile.mkdtemp(prefix="config-audit-")
    port = free_port()
    assert _starts(make_argv(port, workdir, *DEPRECATED_LINES), port, workdir)


def test_cluster_enabled_yes_is_refused():
    """No cluster mode: `cluster-enabled yes` would be a node that answers as a standalone server."""
    argv = _millrace_argv(free_port(), str(ROOT / "tests"), "--cluster-enabled", "yes")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert done.returncode == 1
    assert "cluster mode is not supported by Millrace: cluster-enabled must be no" in done.stderr + done.stdout


def test_maxmemory_clients_is_refused_unless_0(pair):
    """No client eviction: Redis's checks and texts first, then any limit but 0 is refused (it was accepted)."""
    for value in ("101%", "-1%", "1.5%", "bogus", "0%", "0"):
        millrace, redis = _replies(pair, "CONFIG", "SET", "maxmemory-clients", value)
        assert millrace == redis, (value, millrace, redis)
    for value in ("10%", "100%", "5mb", "1"):
        millrace, _ = _replies(pair, "CONFIG", "SET", "maxmemory-clients", value)
        assert millrace == (
            "error: ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - client eviction is not supported "
            "by Millrace: maxmemory-clients must be 0 (client-output-buffer-limit and client-query-buffer-limit bound each client)"
        ), value
    assert _replies(pair, "CONFIG", "GET", "maxmemory-clients")[0] == [b"maxmemory-clients", b"0"]
    _replies(pair, "CONFIG", "SET", "maxmemory-clients", "0")


def test_active_expire_effort_scales_the_expire_cycle(pair):
    """1000 volatile keys, every 20th about to expire (5 %): at effort 1 a sample is not stale enough to
    repeat (10 %), at effort 10 (1 %, 65 keys a loop) the cycle goes on until all 50 are gone within a
    few ticks, on both servers. Ignored, Millrace took 20 keys a tick and ~1 expired key with them."""
    for proc in pair:
        conn = RawConn(proc.port)
        assert conn.call("SELECT", "9") == b"OK"
        assert conn.call("CONFIG", "SET", "active-expire-effort", "10") == b"OK"
        batch = b"".join(
            encode_command("SET", f"k{i}", "v", "PX", "300" if i % 20 == 0 else "1000000") for i in range(1000)
        )
        conn.send(batch)
        for _ in range(1000):
            assert conn.read() == b"OK"
        conn.close()
    time.sleep(1.5)
    sizes = []
    for proc in pair:
        conn = RawConn(proc.port)
        conn.call("SELECT", "9")
        sizes.append(conn.call("DBSIZE"))
        conn.call("FLUSHDB")
        conn.call("CONFIG", "SET", "active-expire-effort", "1")
        conn.close()
    assert sizes == [950, 950]


def _aof_with_a_failing_command(argv: list[str], port: int, workdir: str) -> None:
    """An AOF whose last command fails when replayed (INCR of a string)."""
    proc = ServerProcess(argv, port, workdir, "writer")
    conn = RawConn(port)
    assert conn.call("SET", "k", "a") == b"OK"
    conn.close()
    proc.stop()
    (incr,) = glob.glob(os.path.join(workdir, "appendonlydir", "*.incr.aof"))
    with open(incr, "ab") as handle:
        handle.write(encode_command("INCR", "k"))


@pytest.mark.parametrize("make_argv", [_millrace_argv, _redis_argv], ids=["millrace", "redis"])
def test_propagation_error_behavior_panic_stops_an_aof_load(pair, make_argv):
    workdir = tempfile.mkdtemp(prefix="config-audit-")
    port = free_port()
    _aof_with_a_failing_command(make_argv(port, workdir, "--appendonly", "yes"), port, workdir)
    assert _starts(make_argv(port, workdir, "--appendonly", "yes", "--propagation-error-behavior", "panic-on-replicas"), port, workdir)
    assert not _starts(make_argv(port, workdir, "--appendonly", "yes", "--propagation-error-behavior", "panic"), port, workdir)
