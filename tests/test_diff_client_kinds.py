"""Differential tests against Redis 8.2.3: what kind of client a connection is (a replica link is
`slave`/`replica`, never `normal`), CLIENT KILL's repeated filters, and ACL CAT's container commands.

Sentinel's failover transaction sends CLIENT KILL TYPE normal: a replica link counted as normal
was dropped by it and had to resync."""

from __future__ import annotations

import re
import time

import pytest

from tests.rawclient import RawConn
from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3, in that order."""
    yield from millrace_and_redis()


def become_replica(port: int) -> RawConn:
    """A raw connection that asked for a full sync, as a replica does; its snapshot is read and dropped."""
    link = RawConn(port)
    assert link.call("REPLCONF", "listening-port", "6999") == b"OK"
    link.send(b"PSYNC ? -1\r\n")
    assert link.read_raw(timeout=3).startswith(b"+FULLRESYNC")
    time.sleep(0.5)
    link.read_raw(timeout=0.3)
    return link


def kinds_seen(port: int) -> dict:
    admin = RawConn(port)
    link = become_replica(port)
    try:
        seen = {}
        for kind in ("replica", "slave", "normal", "master", "pubsub"):
            listing = admin.call("CLIENT", "LIST", "TYPE", kind)
            seen[kind] = sorted(re.findall(rb"flags=(\S+)", listing))
        seen["connected_clients"] = re.findall(rb"connected_clients:(\d+)", admin.call("INFO", "clients"))
        seen["kill normal"] = admin.call("CLIENT", "KILL", "TYPE", "normal")
        seen["link alive after kill normal"] = not link.is_closed(timeout=0.3)
        seen["kill replica"] = admin.call("CLIENT", "KILL", "TYPE", "replica")
        seen["link closed after kill replica"] = link.is_closed(timeout=3)
        return seen
    finally:
        link.close()
        admin.close()


def test_a_replica_link_is_a_replica_not_a_normal_client(pair):
    millrace, redis = (kinds_seen(proc.port) for proc in pair)
    assert millrace == redis
    assert millrace["replica"] == [b"S"] and millrace["link alive after kill normal"]


def kill_with_repeated_filters(port: int) -> list:
    admin, a, b = RawConn(port), RawConn(port), RawConn(port)
    try:
        a_id, b_id = a.call("CLIENT", "ID"), b.call("CLIENT", "ID")
        out = [admin.call("CLIENT", "KILL", "ID", str(a_id), "ID", str(b_id)), a.is_closed(timeout=0.3), b.is_closed(timeout=3)]
        c = RawConn(port)
        c_id = c.call("CLIENT", "ID")
        out += [admin.call("CLIENT", "KILL", "TYPE", "pubsub", "TYPE", "normal", "ID", str(c_id)), c.is_closed(timeout=3)]
        out += [a.call("PING")]
        return out
    finally:
        for conn in (admin, a, b):
            conn.close()


def test_a_repeated_client_kill_filter_takes_its_last_value(pair):
    millrace, redis = (kill_with_repeated_filters(proc.port) for proc in pair)
    assert millrace == redis == [1, False, True, 1, True, b"PONG"]


def test_acl_cat_lists_container_commands(pair):
    listed = []
    for proc in pair:
        conn = RawConn(proc.port)
        try:
            listed.append({name for name in conn.call("ACL", "CAT", "slow") if b"|" not in name})
        finally:
            conn.close()
    millrace, redis = listed
    both = {b"client", b"config", b"xgroup", b"xinfo", b"object", b"slowlog", b"acl", b"pubsub", b"latency", b"memory"}
    assert both <= redis and both <= millrace
