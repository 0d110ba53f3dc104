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


def wait_link(conn: RawConn, status: bytes = b"up") -> None:
    deadline = time.monotonic() + 10
    while b"master_link_status:" + status not in conn.call("INFO", "replication"):
        assert time.monotonic() < deadline, f"the replica's link never went {status!r}"
        time.sleep(0.05)


def master_client_seen(primary_port: int, replica_port: int) -> dict:
    """What a replica shows of its own link to its primary: Redis's server.master is a client."""
    admin, primary = RawConn(replica_port), RawConn(primary_port)
    seen: dict = {}
    try:
        admin.call("REPLICAOF", "127.0.0.1", str(primary_port))
        wait_link(admin)
        primary.call("SET", "k", "v")
        deadline = time.monotonic() + 5
        while admin.call("GET", "k") != b"v" and time.monotonic() < deadline:
            time.sleep(0.05)
        line = admin.call("CLIENT", "LIST", "TYPE", "master")
        fields = dict(re.findall(rb"(\S+?)=(\S*)", line))
        master_id = fields[b"id"]
        seen["one master line"] = line.count(b"\n") == 1
        seen["fields"] = {name: fields[name] for name in (b"flags", b"user", b"db", b"name")}
        seen["addr is the primary"] = fields[b"addr"].endswith(b":%d" % primary_port)
        seen["in CLIENT LIST"] = re.findall(rb"flags=(\S+)", admin.call("CLIENT", "LIST"))
        seen["connected_clients"] = re.findall(rb"connected_clients:(\d+)", admin.call("INFO", "clients"))
        seen["kill normal, user default"] = [admin.call("CLIENT", "KILL", "TYPE", "normal"), admin.call("CLIENT", "KILL", "USER", "default")]
        seen["kill master"] = admin.call("CLIENT", "KILL", "TYPE", "master")
        seen["gone at once"] = admin.call("CLIENT", "LIST", "TYPE", "master")
        wait_link(admin)
        again = dict(re.findall(rb"(\S+?)=(\S*)", admin.call("CLIENT", "LIST", "TYPE", "master")))
        seen["same client after a partial resync"] = again[b"id"] == master_id
        seen["partial syncs"] = re.findall(rb"sync_partial_ok:(\d+)", primary.call("INFO", "stats"))
        # `timeout` never closes the link to our primary, however long it has been quiet
        admin.call("CONFIG", "SET", "timeout", "1")
        for _ in range(25):
            admin.call("PING")
            time.sleep(0.1)
        seen["idle link kept"] = re.findall(rb"sync_partial_ok:(\d+)", primary.call("INFO", "stats"))
        admin.call("CONFIG", "SET", "timeout", "0")
        admin.call("REPLICAOF", "NO", "ONE")
        seen["after REPLICAOF NO ONE"] = admin.call("CLIENT", "LIST", "TYPE", "master")
        return seen
    finally:
        admin.close()
        primary.close()


def test_a_replicas_link_to_its_primary_is_a_master_client(pair):
    """CLIENT LIST TYPE master, flags=M, user=(superuser), counted in connected_clients; CLIENT KILL TYPE
    master closes it and a partial resync brings the same client back; `timeout` leaves it be."""
    from tests.servers import start_millrace, start_redis

    seen = []
    for primary, start in zip(pair, (start_millrace, start_redis), strict=True):
        replica = start()
        try:
            seen.append(master_client_seen(primary.port, replica.port))
        finally:
            replica.stop()
    millrace, redis = seen
    assert millrace == redis
    assert millrace["fields"][b"flags"] == b"M" and millrace["kill master"] == 1 and millrace["same client after a partial resync"]


def master_client_after_primary_goes(start) -> list:
    primary = start()
    replica = start("--replicaof", "127.0.0.1", str(primary.port))
    admin = RawConn(replica.port)
    try:
        wait_link(admin)
        up = admin.call("CLIENT", "LIST", "TYPE", "master").count(b"\n")
        primary.stop()
        wait_link(admin, b"down")
        return [up, admin.call("CLIENT", "LIST", "TYPE", "master"), re.findall(rb"connected_clients:(\d+)", admin.call("INFO", "clients"))]
    finally:
        admin.close()
        replica.stop()
        primary.stop()


def test_a_lost_link_leaves_the_client_table(pair):
    """The primary gone, its client is gone from CLIENT LIST and connected_clients (Redis caches it apart)."""
    from tests.servers import start_millrace, start_redis

    millrace, redis = master_client_after_primary_goes(start_millrace), master_client_after_primary_goes(start_redis)
    assert millrace == redis == [1, b"", [b"1"]]
