"""Differential tests against Redis 8.2.3: parameters that must act, not only answer CONFIG GET.

- tcp-keepalive: each accepted TCP socket gets keepalive probes (it was accepted and ignored, so a
  peer that vanished without closing kept its client and any blocked read for ever while `timeout` is 0);
  read from /proc/net/tcp (the timer column: 2 is the keepalive timer), no tool needed.
- CONFIG SET maxclients raises the open-files limit, or is refused with Redis's "try with N" (clients
  past the old limit were dropped without a reply).
"""

from __future__ import annotations

import resource
import time

import pytest
import redis as redis_py

from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def keepalive_timers(port: int) -> list[bool]:
    """For each established server-side socket on port: whether its keepalive timer runs."""
    timers = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as lines:
                rows = lines.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, timer = fields[1], fields[3], fields[5]
            if int(local.rsplit(":", 1)[1], 16) == port and state == "01":
                timers.append(timer.split(":")[0] == "02")
    return timers


def keepalive_seen(proc) -> list:
    seen = []
    for interval in ("300", "0", "300"):
        admin = proc.client(protocol=2)
        admin.config_set("tcp-keepalive", interval)
        admin.close()
        client = proc.client(protocol=2)
        client.ping()  # a connection accepted under this setting
        time.sleep(0.1)
        seen.append(keepalive_timers(proc.port))
        client.close()
        time.sleep(0.1)
    return seen


def test_tcp_keepalive_sets_keepalive_on_accepted_sockets(pair):
    millrace, redis = (keepalive_seen(proc) for proc in pair)
    assert millrace == redis == [[True], [False], [True]]


def maxclients_seen(proc) -> list:
    pid = proc.proc.pid
    client = proc.client(protocol=2)
    seen = []
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (120, 2000))
        seen.append(client.config_set("maxclients", 300))
        seen.append(resource.prlimit(pid, resource.RLIMIT_NOFILE)[0] >= 332)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (120, 150))
        with pytest.raises(redis_py.ResponseError) as refused:
            client.config_set("maxclients", 500)
        seen.append(str(refused.value))
        seen.append(client.config_get("maxclients"))
    finally:  # (the module's servers keep the lowered limits: this is the last test to use them)
        client.close()
    return seen


def test_config_set_maxclients_raises_the_open_files_limit(pair):
    """A refused CONFIG SET keeps the old value here (its all-or-nothing promise); Redis 8.2.3 is left at
    the count it offers (adjustOpenFilesLimit lowered it before the refusal)."""
    millrace, redis = (maxclients_seen(proc) for proc in pair)
    assert millrace[:3] == redis[:3]
    assert millrace[0] is True and millrace[1] is True and "try with 116" in millrace[2]
    assert millrace[3] == {"maxclients": "300"} and redis[3] == {"maxclients": "116"}
