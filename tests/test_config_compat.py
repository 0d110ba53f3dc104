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
import re
import signal
import subprocess
import sys

import pytest

from tests.rawclient import RawConn
from tests.servers import (
    ROOT,
    ServerProcess,
    free_port,
    millrace_and_redis,
    redis_server_path,
    require_redis,
    start_millrace,
)

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
    "maxmemory-clients": ["0%", "101%", "-1%", "1.5%", "0"],  # others: tests/test_diff_config_audit.py
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


# Numeric parameters: every one Redis 8.2.3 has, listeners and immutables aside (tls-port and the
# tls-* switches crash a redis-server built without TLS). Redis's own bounds are read from its
# error text, then each is tried below, at and above on both servers.
NOT_SET_AT_RUN_TIME = {
    "port",
    "tls-port",
    "databases",
    "tcp-backlog",
    "io-threads",
    "cluster-port",
    "socket-mark-id",
    "unixsocketperm",
    "maxmemory-clients",  # refused unless 0 (no client eviction): tests/test_diff_config_audit.py
}
EDGES = [
    "-9223372036854775808",
    "-1",
    "0",
    "1",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "1kb",
    "",
    "+1",
    "01",
]


def _config_map(conn: RawConn, pattern: str) -> dict[bytes, bytes]:
    flat = conn.call("CONFIG", "GET", pattern)
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _redis_bounds(conn: RawConn, name: str) -> set[str]:
    """The values around Redis's own bounds for `name`, read from its "between L and H" error."""
    values: set[str] = set()
    for probe in ("-9223372036854775808", "0", "18446744073709551615"):
        reply = str(conn.call("CONFIG", "SET", name, probe))
        if match := re.search(r"between (-?\d+) and (-?\d+) inclusive", reply):
            low, high = int(match[1]), int(match[2])
            values |= {str(low - 1), str(low), str(high), str(high + 1)}
    return values


def test_numeric_parameters_take_redis_bounds(pair):
    conns = [RawConn(proc.port) for proc in pair]
    defaults = _config_map(conns[1], "*")
    names = sorted(name.decode() for name, value in defaults.items() if re.fullmatch(rb"-?\d+", value))
    names = [name for name in names if name not in NOT_SET_AT_RUN_TIME]
    assert "active-expire-effort" in names and "set-max-listpack-entries" in names
    mismatches = []
    for name in names:
        default = defaults[name.encode()]
        values = _redis_bounds(conns[1], name)
        conns[1].call("CONFIG", "SET", name, default)
        for value in sorted(values | set(EDGES)):
            replies = [str(conn.call("CONFIG", "SET", name, value)) for conn in conns]
            shown = [conn.call("CONFIG", "GET", name) for conn in conns]
            if replies[0] != replies[1] or shown[0] != shown[1]:
                mismatches.append((name, value, replies, shown))
            for conn in conns:
                conn.call("CONFIG", "SET", name, default)
    assert mismatches == []
    for conn in conns:
        conn.close()


# Strings Redis checks: proc-title-template's variables, locale-collate's name (setlocale).
CHECKED_STRINGS = {
    "proc-title-template": [
        "",
        " ",
        "{title}",
        "{title} {server-mode}",
        "x",
        "{bogus}",
        "{",
        "{{",
        "}",
        "a}",
        "{{}",
        "{port}",
        "{tls-port}",
        "{unixsocket}",
        "{config-file}",
        "{listen-addr}",
        "{title",
        "{}",
        "{{title}}",
        "x{server-mode}",
        "{title} {listen-addr} {server-mode}",
    ],
    "locale-collate": ["C", "bogus", "POSIX", "", "xx_YY.UTF-8"],
    "set-max-listpack-value": ["1kb", "65"],
    "replica-full-sync-buffer-limit": ["1kb", "2gb", "-1", "0"],
    "hide-user-data-from-log": ["bogus", "no"],
    "cluster-slot-stats-enabled": ["yes", "no"],
    "cluster-announce-human-nodename": ["node 1", ""],
    "server-cpulist": ["0"],
    "bio-cpulist": ["0"],
    "aof-rewrite-cpulist": ["0"],
    "bgsave-cpulist": ["0"],
}
# Redis's two names of one setting: set through one, read through the other.
ALIASES = [
    ("hash-max-listpack-entries", "hash-max-ziplist-entries", "7"),
    ("hash-max-listpack-value", "hash-max-ziplist-value", "7"),
    ("zset-max-listpack-entries", "zset-max-ziplist-entries", "7"),
    ("zset-max-listpack-value", "zset-max-ziplist-value", "7"),
    ("list-max-listpack-size", "list-max-ziplist-size", "7"),
    ("min-replicas-max-lag", "min-slaves-max-lag", "7"),
    ("min-replicas-to-write", "min-slaves-to-write", "7"),
    ("repl-ping-replica-period", "repl-ping-slave-period", "7"),
    ("replica-announce-ip", "slave-announce-ip", "10.0.0.1"),
    ("replica-announce-port", "slave-announce-port", "7"),
    ("replica-priority", "slave-priority", "7"),
    ("replica-ignore-maxmemory", "slave-ignore-maxmemory", "no"),
    ("replica-lazy-flush", "slave-lazy-flush", "yes"),
    ("cluster-replica-no-failover", "cluster-slave-no-failover", "yes"),
    ("cluster-replica-validity-factor", "cluster-slave-validity-factor", "7"),
]


def test_redis_8_parameters_are_known_with_redis_defaults(pair):
    conns = [RawConn(proc.port) for proc in pair]
    ours, theirs = (_config_map(conn, "*") for conn in conns)
    # vset-*: the vector-set module Redis 8 loads; module parameters are not Millrace's
    assert {name.decode() for name in set(theirs) - set(ours)} == {"vset-force-single-threaded-execution"}
    for name in set(ours) & set(theirs):
        if name not in (b"bind", b"dbfilename", b"dir", b"port", b"save"):  # the test servers' own
            assert ours[name] == theirs[name], name
    for name, values in CHECKED_STRINGS.items():
        default = theirs[name.encode()]
        for value in values:
            replies = [str(conn.call("CONFIG", "SET", name, value)) for conn in conns]
            shown = [conn.call("CONFIG", "GET", name) for conn in conns]
            assert replies[0] == replies[1] and shown[0] == shown[1], (name, value, replies, shown)
        for conn in conns:
            conn.call("CONFIG", "SET", name, default)
    for name, alias, value in ALIASES:
        for first, second in ((name, alias), (alias, name)):
            default = theirs[first.encode()]
            replies = [str(conn.call("CONFIG", "SET", first, value)) for conn in conns]
            shown = [conn.call("CONFIG", "GET", second) for conn in conns]
            both = [str(conn.call("CONFIG", "SET", first, default, second, value)) for conn in conns]  # not a duplicate
            last = [conn.call("CONFIG", "GET", first) for conn in conns]
            assert replies[0] == replies[1] == "b'OK'" and shown[0] == shown[1] == [second.encode(), value.encode()], (
                first,
                shown,
            )
            assert both[0] == both[1] and last[0] == last[1], (first, both, last)
            for conn in conns:
                conn.call("CONFIG", "SET", first, default)
    for conn in conns:
        conn.close()


NEW_IN_REDIS_8 = """\
set-max-listpack-entries 128
set-max-listpack-value 64
locale-collate ""
max-new-connections-per-cycle 10
max-new-tls-connections-per-cycle 1
replica-full-sync-buffer-limit 0
hide-user-data-from-log no
cluster-slot-stats-enabled no
cluster-compatibility-sample-ratio 0
cluster-announce-human-nodename ""
server-cpulist 0
bio_cpulist 0
"""
NON_DEFAULTS = (
    "set-max-listpack-entries 5\nmax-new-connections-per-cycle 1000\nreplica-full-sync-buffer-limit 1mb\nlocale-collate C\n"
)


def test_a_config_file_with_redis_8_parameters_loads(tmp_path):
    require_redis()
    conf = tmp_path / "redis8.conf"
    conf.write_text(NEW_IN_REDIS_8 + NON_DEFAULTS)
    names = [line.split()[0] for line in (NEW_IN_REDIS_8 + NON_DEFAULTS).splitlines()]
    shown = []
    for argv, name in (([sys.executable, "-m", "server"], "millrace"), ([redis_server_path()], "redis")):
        port = free_port()
        proc = ServerProcess([*argv, str(conf), "--port", str(port), "--dir", str(tmp_path)], port, str(tmp_path), name)
        try:
            with proc.client() as client:
                shown.append({name: client.config_get(name) for name in names})
        finally:
            proc.stop()
    assert shown[0] == shown[1]
    shown = shown[0]
    assert shown["set-max-listpack-entries"] == {"set-max-listpack-entries": "5"} and shown["bio_cpulist"] == {"bio_cpulist": "0"}


@pytest.mark.parametrize(
    "line",
    [
        "active-expire-effort 0",
        "repl-timeout 0",
        "hash-max-listpack-entries -1",
        "replica-announce-port 99999999999999999",
        'proc-title-template ""',
        "proc-title-template {bogus}",
        "set-max-listpack-entries -1",
        "max-new-connections-per-cycle 1001",
        "cluster-compatibility-sample-ratio 101",
        "list-max-listpack-size 2147483648",
        "cluster-port 65536",
        "socket-mark-id -1",
        "unixsocketperm 1000",
        "unixsocketperm 778",
        "maxclients -1",
        "active-defrag-ignore-bytes 0",
    ],
)
def test_an_out_of_range_value_stops_the_start_up_as_redis(tmp_path, line):
    require_redis()
    conf = tmp_path / "bad.conf"
    conf.write_text(f"hz 10\n{line}\n")
    where = ["--port", str(free_port()), "--dir", str(tmp_path)]  # lines 3 and 4: should the server start, not on 6379
    ours = subprocess.run(
        [sys.executable, "-m", "server", str(conf), *where], capture_output=True, text=True, timeout=30, cwd=ROOT
    )
    theirs = subprocess.run([redis_server_path(), str(conf), *where], capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert ours.returncode == theirs.returncode == 1
    assert "*** FATAL CONFIG FILE ERROR" in ours.stderr
    assert ours.stderr.split("***\n", 1)[1] == theirs.stderr.split("***\n", 1)[1]  # the line and Redis's reason


def test_hiding_user_data_from_the_log_is_refused():
    """Millrace logs a failed command from the primary with its key; `yes` would not hide it."""
    done = _start("--hide-user-data-from-log", "yes")
    assert done.returncode == 1 and "*** FATAL CONFIG FILE ERROR" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("hiding user data from the log is not supported by Millrace")
