"""Redis parameters Millrace accepts for compatibility are validated as Redis validates them, and
none that changes what happens is accepted and ignored.

The enum parameters Millrace does not act on take Redis's choices (they were free strings, or
yes/no where Redis has more words), and the few others Redis checks (maxmemory-clients,
oom-score-adj-values, the immutable ones), compared with Redis 8.2.3 value by value; `supervised` other
than `no` stops the start-up (no sd_notify: a systemd unit waiting for READY=1 would time out);
`shutdown-on-sigterm` / `shutdown-on-sigint` are Redis's flags and SIGTERM / SIGINT follow them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tests.rawclient import RawConn
from tests.servers import ROOT, free_port, millrace_and_redis, start_millrace

ENUMS = {
    "acl-pubsub-default": ["allchannels", "resetchannels", "RESETCHANNELS"],
    "cluster-preferred-endpoint-type": ["hostname", "unknown-endpoint", "ip"],
    "oom-score-adj": ["relative", "absolute", "yes", "no"],
    "propagation-error-behavior": ["panic-on-replicas", "ignore"],
    "repl-diskless-load": ["swapdb", "on-empty-db", "disabled"],
    "sanitize-dump-payload": ["clients", "yes", "no"],
    "tls-auth-clients": ["optional", "no", "yes"],
    "shutdown-on-sigint": ["now nosave", "default save", "force", "save save", "NOSAVE", "save nosave", "default"],
    "shutdown-on-sigterm": ["nosave now force", "save", "now default", "default"],
    # not enums, but validated as Redis too: a percentage or memory; three bounded numbers; immutables
    "maxmemory-clients": ["10%", "0%", "101%", "100%", "5mb", "-1%", "1.5%", "0"],
    "oom-score-adj-values": ["0 200", "a b c", "-2001 0 0", "100 50 800", "0 200 800"],
    "server_cpulist": ["0-1"], "bio_cpulist": ["0"], "aof_rewrite_cpulist": ["0"], "bgsave_cpulist": ["0"],
    "rdbchecksum": ["no"], "socket-mark-id": ["1"],
}


@pytest.fixture(scope="module")
def pair():
    yield from millrace_and_redis()


def test_enum_parameters_answer_as_redis(pair):
    conns = [RawConn(proc.port) for proc in pair]
    for name, values in ENUMS.items():
        for value in ["bogus", "", "yes no", *values]:
            replies = [str(conn.call("CONFIG", "SET", name, value)) for conn in conns]
            shown = [conn.call("CONFIG", "GET", name) for conn in conns]
            assert replies[0] == replies[1] and shown[0] == shown[1], (name, value, replies, shown)
    for conn in conns:
        conn.close()


def _start(*args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "server", "--port", str(free_port()), "--dir", str(ROOT / "tests"), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)


@pytest.mark.parametrize(("value", "reason"), [
    ("systemd", "supervision is not supported by Millrace: supervised must be no (under systemd, a unit of Type=simple, or Type=forking with daemonize yes)"),
    ("auto", "supervision is not supported by Millrace: supervised must be no (under systemd, a unit of Type=simple, or Type=forking with daemonize yes)"),
    ("bogus", "argument(s) must be one of the following: upstart, systemd, auto, no"),
])
def test_supervised_other_than_no_stops_the_start_up(value, reason):
    done = _start("--supervised", value)
    assert done.returncode == 1 and "*** FATAL CONFIG FILE ERROR" in done.stderr
    assert done.stderr.splitlines()[-1] == reason


@pytest.mark.parametrize(("sig", "name", "flags", "save", "saved"), [
    (signal.SIGTERM, "shutdown-on-sigterm", "nosave", "3600 1", False),  # save points set, yet no final save
    (signal.SIGTERM, "shutdown-on-sigterm", "save now", "", True),  # no save points, yet a final save
    (signal.SIGINT, "shutdown-on-sigint", "nosave", "3600 1", False),
    (signal.SIGTERM, "shutdown-on-sigterm", "default", "3600 1", True),
])
def test_a_signal_shuts_down_with_its_flags(tmp_path, sig, name, flags, save, saved):
    proc = start_millrace("--save", save, "--appendonly", "no", f"--{name}", flags, workdir=str(tmp_path))
    with proc.client() as client:
        assert client.config_get(name) == {name: flags}
        client.set("k", "v")
    proc.proc.send_signal(sig)
    assert proc.proc.wait(20) == 0
    proc.stop()
    assert os.path.exists(tmp_path / "dump.mpk") == saved, proc.read_log()
