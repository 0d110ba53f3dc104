"""oom-score-adj, oom-score-adj-values and server-cpulist as Redis 8.2.3 applies them: the kernel's view
of the process (/proc/<pid>/oom_score_adj, Cpus_allowed_list) after start-up, CONFIG SET and role
changes. Millrace accepted these settings and ignored them."""

from __future__ import annotations

import os
import time

import pytest

from server.process import parse_cpulist
from tests.rawclient import RawConn
from tests.servers import free_port, require_redis, start_millrace, start_redis


def _oom(proc) -> int:
    with open(f"/proc/{proc.proc.pid}/oom_score_adj") as handle:
        return int(handle.read())


def _cpus(proc) -> str:
    with open(f"/proc/{proc.proc.pid}/status") as handle:
        return next(line.split()[1] for line in handle if line.startswith("Cpus_allowed_list:"))


def _oom_story(proc) -> list:
    """The score through a CONFIG SET, a turn as a replica and back, and `no` (the original back)."""
    conn = RawConn(proc.port)
    try:
        seen = [_oom(proc)]
        seen.append((conn.call("CONFIG", "SET", "oom-score-adj-values", "20 300 900"), _oom(proc)))
        seen.append((conn.call("REPLICAOF", "127.0.0.1", str(free_port())), _oom(proc)))
        seen.append((conn.call("REPLICAOF", "NO", "ONE"), _oom(proc)))
        seen.append((conn.call("CONFIG", "SET", "oom-score-adj", "yes"), _oom(proc)))  # relative to the original
        seen.append((conn.call("CONFIG", "SET", "oom-score-adj", "no"), _oom(proc)))
        return seen
    finally:
        conn.close()


def test_oom_score_adj_follows_the_setting_and_the_role():
    require_redis()
    if os.geteuid() != 0:
        pytest.skip("a score below the inherited one needs CAP_SYS_RESOURCE")
    args = ("--oom-score-adj", "absolute", "--oom-score-adj-values", "10 200 800")
    stories = {}
    for kind, start in (("millrace", start_millrace), ("redis", start_redis)):
        proc = start(*args)
        try:
            base = int(open("/proc/self/oom_score_adj").read())
            stories[kind] = _oom_story(proc), base
        finally:
            proc.stop()
    assert stories["millrace"] == stories["redis"]
    story, base = stories["redis"]
    assert story == [10, (b"OK", 20), (b"OK", 300), (b"OK", 20), (b"OK", base + 20), (b"OK", base)]


def _relative_story(proc) -> list:
    """Started with `no`; its score set to 100 from outside; then `yes` (relative: 100 + 10) and `no`
    (the 100 it found back)."""
    with open(f"/proc/{proc.proc.pid}/oom_score_adj", "w") as handle:
        handle.write("100\n")
    conn = RawConn(proc.port)
    try:
        return [(conn.call("CONFIG", "SET", "oom-score-adj", value), _oom(proc)) for value in ("yes", "no")]
    finally:
        conn.close()


def test_relative_oom_score_adj_adds_to_the_score_found():
    require_redis()
    if os.geteuid() != 0:
        pytest.skip("writing another process's score needs CAP_SYS_RESOURCE")
    stories = {}
    for kind, start in (("millrace", start_millrace), ("redis", start_redis)):
        proc = start("--oom-score-adj-values", "10 200 800")
        try:
            stories[kind] = _relative_story(proc)
        finally:
            proc.stop()
    assert stories["millrace"] == stories["redis"] == [(b"OK", 110), (b"OK", 100)]


def test_server_cpulist_binds_the_server():
    require_redis()
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: nothing to narrow")
    cpu = str(min(os.sched_getaffinity(0)))
    seen = {}
    for kind, start in (("millrace", start_millrace), ("redis", start_redis)):
        proc = start("--server-cpulist", cpu)
        try:
            time.sleep(0.1)
            seen[kind] = _cpus(proc)
        finally:
            proc.stop()
    assert seen == {"millrace": cpu, "redis": cpu}


def test_cpulists_parse_as_redis():
    assert parse_cpulist("0,2,3") == {0, 2, 3}
    assert parse_cpulist("0,2-3") == {0, 2, 3}
    assert parse_cpulist("0-20:2") == set(range(0, 21, 2))
    assert parse_cpulist("0-5000") == set(range(1024))  # as Redis's cpu_set_t: no CPU past 1023
    assert parse_cpulist("3-1") is None and parse_cpulist("a") is None and parse_cpulist("1-2:0") is None
