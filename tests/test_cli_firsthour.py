"""What a newcomer meets on the command line (issue 26): --help, a mistyped flag, a
missing `dir`, `daemonize yes` with `pidfile`, the log at each level and the
start-up warnings. Redis 8.2.3 is the oracle where it prints the same thing."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import redis

from server import __version__
from server.cli_help import GROUPS, OLDER_NAMES
from server.config import PARAMS, Config
from tests.servers import ROOT, ServerProcess, free_port, redis_server_path, require_redis


def run_server(*args: str, timeout: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "server", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_parameter_with_its_default_in_redis_conf_order():
    result = run_server("--help")
    assert result.returncode == 0
    out = result.stdout
    assert "`" not in out  # no markdown
    assert re.search(r"^Usage: millrace \[/path/to/millrace\.conf\] \[--name value \.\.\.\]", out, re.M)
    defaults = Config()
    listed = re.findall(r"^  --(\S+) (.*?)(?:  \(the same setting as --\S+\))?$", out, re.M)
    names = [name for name, _ in listed]
    assert sorted(names) == sorted(PARAMS)  # every parameter, each once
    for name, shown in listed:
        expected = defaults.format(name)
        assert shown == (expected if expected else '""'), name
    # the groups come in redis.conf's order, each parameter under its own
    positions = [out.index(f"\n{title}\n") for title in GROUPS]
    assert positions == sorted(positions)
    network, general = out.index("\nNETWORK\n"), out.index("\nGENERAL\n")
    assert network < out.index("  --port 6379\n") < general
    assert out.index("\nAPPEND ONLY MODE\n") < out.index("  --appendfsync everysec\n") < out.index("\nSHUTDOWN\n")
    older = out[out.index("\nOLDER NAMES"):]
    assert set(re.findall(r"^  --(\S+)", older, re.M)) == set(OLDER_NAMES) & set(PARAMS)  # only old spellings there


@pytest.mark.parametrize(("flag", "closest"), [("--prot", "port"), ("--protected_mode", "protected-mode"), ("--appendonlyy", "appendonly")])
def test_unknown_flag_names_the_closest_parameter(flag, closest):
    result = run_server(flag, "yes")
    assert result.returncode == 1
    assert result.stderr.startswith(f"\n*** FATAL CONFIG FILE ERROR (Millrace {__version__}) ***\n")
    assert "Bad directive or wrong number of arguments\n" in result.stderr
    assert f"Did you mean '{closest}'?" in result.stderr


def test_unknown_flag_far_from_everything_gets_no_guess():
    result = run_server("--zzzzqqqq", "1")
    assert result.returncode == 1 and "Did you mean" not in result.stderr


def _after_banner(text: str) -> str:
    return text.split("***\n", 1)[1]


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_missing_dir_stops_start_up_as_redis(tmp_path, kind):
    require_redis()
    target = tmp_path / "nope"
    if kind == "file":
        target.write_text("x")
    args = ("--port", str(free_port()), "--dir", str(target))
    ours = run_server(*args)
    theirs = subprocess.run([redis_server_path(), *args], capture_output=True, text=True, timeout=20)
    assert ours.returncode == theirs.returncode == 1
    assert ours.stderr.startswith(f"\n*** FATAL CONFIG FILE ERROR (Millrace {__version__}) ***\n")
    assert _after_banner(ours.stderr) == _after_banner(theirs.stderr)
    assert not (kind == "missing" and target.exists())  # nothing is created


def test_daemonize_with_pidfile(tmp_path):
    port = free_port()
    pidfile = tmp_path / "millrace.pid"
    logfile = tmp_path / "millrace.log"
    started = time.monotonic()
    result = run_server("--port", str(port), "--dir", str(tmp_path), "--daemonize", "yes", "--pidfile", str(pidfile), "--logfile", str(logfile))
    assert result.returncode == 0 and result.stdout == ""  # the foreground process returns at once
    assert time.monotonic() - started < 15
    client = redis.Redis(port=port, socket_timeout=5)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline, logfile.read_text() if logfile.exists() else "no log"
            time.sleep(0.05)
    pid = int(pidfile.read_text())
    try:
        assert client.info("server")["process_id"] == pid
        assert os.getsid(pid) != os.getsid(0)  # detached: a session of its own, away from ours
        assert client.config_get("daemonize") == {"daemonize": "yes"}
    finally:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pidfile.exists()  # removed on the way out, as Redis does
    assert "Removing the pid file." in logfile.read_text()


def test_pidfile_without_daemonize(tmp_path):
    pidfile = tmp_path / "p.pid"
    port = free_port()
    proc = ServerProcess([sys.executable, "-m", "server", "--port", str(port), "--dir", str(tmp_path), "--pidfile", str(pidfile)],
                         port, str(tmp_path), "millrace")
    try:
        assert int(pidfile.read_text()) == proc.proc.pid
    finally:
        proc.stop()
    assert not pidfile.exists()


def start(tmp_path, *args: str) -> ServerProcess:
    port = free_port()
    return ServerProcess([sys.executable, "-m", "server", "--port", str(port), "--dir", str(tmp_path), *args], port, str(tmp_path), "millrace")


def _wait_for(proc: ServerProcess, pattern: str, timeout: float = 15) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = proc.read_log()
        if re.search(pattern, text, re.M):
            return text
        time.sleep(0.1)
    raise AssertionError(f"{pattern!r} not in log:\n{proc.read_log()}")


def test_verbose_logs_connections_and_the_keyspace(tmp_path):
    proc = start(tmp_path, "--loglevel", "verbose")
    try:
        with proc.client() as client:
            client.set("a", "1")
            client.set("b", "2", ex=100)
        text = _wait_for(proc, r"^\d+:M .* - Client closed connection id=\d+ addr=127\.0\.0\.1:\d+ laddr=")
        assert re.search(r"^\d+:M \d\d \w{3} \d{4} [\d:.]+ - Accepted 127\.0\.0\.1:\d+$", text, re.M)
        text = _wait_for(proc, r"^\d+:M .* - DB 0: 2 keys \(1 volatile\) in 4 slots HT\.$", timeout=12)
        assert " . " not in text  # no debug lines at verbose
    finally:
        proc.stop()


def test_debug_logs_clients_and_notice_logs_neither(tmp_path):
    proc = start(tmp_path, "--loglevel", "debug")
    try:
        with proc.client() as client:
            client.ping()
        _wait_for(proc, r"^\d+:M .* \. \d+ clients connected \(0 replicas\), \d+ bytes in use$", timeout=12)
    finally:
        proc.stop()
    quiet_dir = tmp_path / "quiet"
    quiet_dir.mkdir()
    proc = start(quiet_dir)
    try:
        with proc.client() as client:
            client.ping()
        time.sleep(0.3)
        text = proc.read_log()
        assert "Accepted" not in text and "Client closed connection" not in text
    finally:
        proc.stop()


WARNINGS = {
    "no persistence": "WARNING no persistence is configured",
    "fsync": "WARNING appendfsync no leaves fsync to the kernel",
    "open": "WARNING protected-mode is no and no password is set",
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), set()),  # Redis's defaults: the save schedule
        (("--appendonly", "yes", "--appendfsync", "everysec"), set()),  # make run
        (("--save", ""), {"no persistence"}),
        (("--appendonly", "yes", "--appendfsync", "no"), {"fsync"}),
        (("--protected-mode", "no", "--bind", "0.0.0.0"), {"open"}),
        (("--protected-mode", "no", "--bind", "0.0.0.0", "--requirepass", "s3cret"), set()),
        (("--protected-mode", "no", "--bind", "127.0.0.1"), set()),
    ],
)
def test_start_up_warnings(tmp_path, args, expected):
    proc = start(tmp_path, *args)
    try:
        text = _wait_for(proc, r"ready to accept connections")
        time.sleep(0.1)
        text = proc.read_log()
        shown = {key for key, line in WARNINGS.items() if re.search(rf"^\d+:M .* # {re.escape(line)}", text, re.M)}
        assert shown == expected, text
    finally:
        proc.stop()
