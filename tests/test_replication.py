"""Replication end to end: real primary and replica processes hold exactly the same state.

Random workloads over every kind of state (tests/persist_workload.py) run on
the primary; the replica's full picture (every entry, counter, group with
entries-read and lag, PEL entry with owner, delivery time and count, consumer
with its times, TTL) must equal the primary's once its offset has caught up,
also after the replica restarts (partial resync), the link is cut or stalled
with writes in flight (a TCP proxy), the backlog is too small (full resync),
a replica is promoted and the other follows it (partial resync via replid2),
and the primary restarts from its AOF.
"""

from __future__ import annotations

import signal
import time

import pytest
import redis

from tests.persist_workload import Workload, state
from tests.proxy import Proxy
from tests.servers import free_port, require_redis, start_millrace, start_redis
from tests.test_persistence import kill9, wait_for


def start(tmp_path, name: str, *args: str, port: int | None = None):
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    return start_millrace(*args, workdir=str(directory), port=port)


def replica_of(tmp_path, name: str, port: int, *args: str):
    return start(tmp_path, name, "--replicaof", "127.0.0.1", str(port), *args)


def info(client, section: str = "replication") -> dict:
    return client.info(section)


def caught_up(primary, *replicas) -> None:
    """Wait until each replica's link is up and its offset is the primary's."""

    def done() -> bool:
        target = info(primary)["master_repl_offset"]
        for replica in replicas:
            fields = info(replica)
            if fields.get("master_link_status") != "up" or fields["slave_repl_offset"] != target:
                return False
        return True

    wait_for(done, timeout=30)


def same_state(primary, replica) -> None:
    caught_up(primary, replica)
    assert state(replica) == state(primary)


def run_workload(client, seed: int, steps: int = 300) -> None:
    Workload(client, seed).steps(steps)
    client.execute_command("SELECT", 0)


@pytest.fixture
def pair(tmp_path):
    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port)
    yield primary, replica
    replica.stop()
    primary.stop()


def test_replica_holds_exactly_the_primarys_state(pair):
    primary, replica = pair
    p, r = primary.client(), replica.client()
    run_workload(p, 31)
    same_state(p, r)
    run_workload(p, 32)  # and keeps holding it as the stream goes on
    same_state(p, r)
    fields = info(r)
    assert fields["role"] == "slave" and fields["master_link_status"] == "up" and fields["master_port"] == primary.port
    assert info(p)["connected_slaves"] == 1


def test_the_sequence_redis_got_wrong_keeps_entries_read_on_the_replica(pair):
    """Redis's replicas showed a nil entries-read after this until XREADGROUP propagated SETID ... ENTRIESREAD."""
    primary, replica = pair
    p, r = primary.client(), replica.client()
    p.xadd("s", {"f": "1"}, id="1-0")
    p.xgroup_create("s", "g", id="$")
    p.xreadgroup("g", "c", {"s": ">"})
    p.xadd("s", {"f": "2"}, id="2-0")
    p.xadd("s", {"f": "3"}, id="3-0")
    p.xreadgroup("g", "c", {"s": ">"}, count=1)
    p.xreadgroup("g", "c", {"s": ">"}, count=1)
    caught_up(p, r)
    mine = r.xinfo_groups("s")
    assert mine == p.xinfo_groups("s")
    assert mine[0]["entries-read"] == 3 and mine[0]["lag"] == 0


def test_replicas_are_read_only_and_reads_block_for_replicated_entries(pair):
    primary, replica = pair
    p, r = primary.client(), replica.client()
    p.xadd("s", {"a": "1"}, id="1-0")
    p.xgroup_create("s", "g", id="0")
    caught_up(p, r)
    for command in (("SET", "k", "v"), ("XADD", "s", "*", "a", "1"), ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"), ("DEL", "s")):
        with pytest.raises(redis.ReadOnlyError, match="You can't write against a read only replica."):
            r.execute_command(*command)
    assert r.xrange("s") == [(b"1-0", {b"a": b"1"})]
    blocked = replica.client()
    import threading

    got = []
    reader = threading.Thread(target=lambda: got.append(blocked.xread({"s": "$"}, block=10_000)))
    reader.start()
    wait_for(lambda: r.info("clients")["blocked_clients"] == 1)
    p.xadd("s", {"b": "2"}, id="2-0")
    reader.join(10)
    assert got == [[[b"s", [(b"2-0", {b"b": b"2"})]]]]


def test_wait_and_waitaof_count_the_replicas_that_have_the_writes(tmp_path):
    primary = start(tmp_path, "primary", "--appendonly", "yes")
    replica = replica_of(tmp_path, "replica", primary.port, "--appendonly", "yes", "--appendfsync", "always")
    try:
        p = primary.client()
        caught_up(p, replica.client())
        p.set("k", "v")
        assert p.execute_command("WAIT", 1, 5000) == 1
        assert p.execute_command("WAIT", 2, 300) == 1  # only one replica: the timeout answers the count
        p.set("k2", "v")
        assert p.execute_command("WAITAOF", 1, 1, 5000) == [1, 1]
        with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica instances"):
            replica.client().execute_command("WAIT", 0, 0)
    finally:
        replica.stop()
        primary.stop()


def test_a_restarted_replica_resyncs_partially(tmp_path):
    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port)
    p = primary.client()
    run_workload(p, 33)
    caught_up(p, replica.client())
    replica.proc.send_signal(signal.SIGTERM)  # saves its snapshot with the replication ID and offset
    assert replica.proc.wait(10) == 0
    replica.log.close()
    run_workload(p, 34, 100)  # writes while it is away stay in the backlog
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        same_state(p, replica.client())
        stats = info(p, "stats")
        assert stats["sync_partial_ok"] == 1 and stats["sync_full"] == 1
    finally:
        replica.stop()
        primary.stop()


def test_a_link_cut_before_the_first_write_continues_partially(tmp_path):
    """A replica that synced at offset 0 has a history: Redis's replica caches its master and asks
    PSYNC <replid> 1. Millrace's asked `? -1` whenever its offset was 0, so a link cut before the
    primary's first write (or first ping) cost a second full sync."""
    for kind in ("millrace", "redis"):
        if kind == "redis":
            require_redis()
            primary = start_redis("--repl-diskless-sync-delay", "0")
            replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        else:
            primary = start(tmp_path, "primary")
            replica = replica_of(tmp_path, "replica", primary.port)
        try:
            p, r = primary.client(), replica.client()
            wait_for(lambda: info(r)["master_link_status"] == "up" and info(p)["connected_slaves"] == 1)  # noqa: B023
            assert info(p)["master_repl_offset"] == 0, kind
            assert r.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
            wait_for(lambda: info(p, "stats")["sync_partial_ok"] == 1, timeout=10)  # noqa: B023
            assert info(p, "stats")["sync_full"] == 1, kind
        finally:
            replica.stop()
            primary.stop()


def test_bind_source_addr_is_the_links_address(tmp_path):
    """bind-source-addr: the replica's link to its primary leaves from that address (the primary's INFO
    shows it), in Redis and Millrace; Millrace accepted it and connected from 127.0.0.1."""
    require_redis()
    seen = {}
    for kind in ("millrace", "redis"):
        if kind == "redis":
            primary = start_redis("--repl-diskless-sync-delay", "0")
            replica = start_redis("--bind-source-addr", "127.0.0.2", "--replicaof", "127.0.0.1", str(primary.port))
        else:
            primary = start(tmp_path, "primary")
            replica = replica_of(tmp_path, "replica", primary.port, "--bind-source-addr", "127.0.0.2")
        try:
            p = primary.client()
            wait_for(lambda: info(p).get("slave0", {}).get("state") == "online")  # noqa: B023
            seen[kind] = info(p)["slave0"]["ip"]
        finally:
            replica.stop()
            primary.stop()
    assert seen == {"millrace": "127.0.0.2", "redis": "127.0.0.2"}


def test_a_cut_or_stalled_link_with_writes_in_flight(tmp_path):
    primary = start(tmp_path, "primary")
    proxy = Proxy(primary.port)
    replica = replica_of(tmp_path, "replica", proxy.port)
    try:
        p, r = primary.client(), replica.client()
        caught_up(p, r)
        work = Workload(p, 35)
        for round_ in range(4):
            wait_for(lambda: info(r)["master_link_status"] == "up")
            work.steps(60)
            if round_ % 2:
                proxy.stall()
                work.steps(60)
                proxy.stall(False)
            proxy.cut()
            work.steps(60)
        p.execute_command("SELECT", 0)
        same_state(p, r)
        stats = info(p, "stats")
        assert stats["sync_full"] == 1 and stats["sync_partial_ok"] == 4  # every cut continued from the backlog
    finally:
        proxy.close()
        replica.stop()
        primary.stop()


def test_a_backlog_too_small_means_a_full_resync(tmp_path):
    primary = start(tmp_path, "primary", "--repl-backlog-size", "16384")
    replica = replica_of(tmp_path, "replica", primary.port)
    p = primary.client()
    caught_up(p, replica.client())
    kill9(replica)
    for i in range(200):
        p.xadd("s", {"pad": "x" * 500, "i": i})  # ~100 KB: far past the backlog
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        same_state(p, replica.client())
        stats = info(p, "stats")
        assert stats["sync_full"] == 2 and stats["sync_partial_ok"] == 0
    finally:
        replica.stop()
        primary.stop()


def test_a_promoted_replica_is_followed_by_partial_resync(tmp_path):
    primary = start(tmp_path, "primary")
    one = replica_of(tmp_path, "one", primary.port)
    two = replica_of(tmp_path, "two", primary.port)
    try:
        p = primary.client()
        run_workload(p, 36)
        caught_up(p, one.client(), two.client())
        old_id = info(p)["master_replid"]
        kill9(primary)
        a, b = one.client(), two.client()
        assert a.execute_command("REPLICAOF", "NO", "ONE") == b"OK"
        fields = info(a)
        assert fields["role"] == "master" and fields["master_replid2"] == old_id and fields["master_replid"] != old_id
        assert b.execute_command("REPLICAOF", "127.0.0.1", one.port) == b"OK"
        run_workload(a, 37, 100)  # the promoted replica takes writes
        same_state(a, b)
        stats = info(a, "stats")
        assert stats["sync_partial_ok"] == 1 and stats["sync_full"] == 0  # continued through replid2
        assert info(b)["master_replid"] == info(a)["master_replid"]
    finally:
        two.stop()
        one.stop()
        if primary.proc.poll() is None:
            primary.stop()


def test_chained_replicas_share_the_primarys_history(tmp_path):
    primary = start(tmp_path, "primary")
    middle = replica_of(tmp_path, "middle", primary.port)
    leaf = replica_of(tmp_path, "leaf", middle.port)
    try:
        p = primary.client()
        run_workload(p, 38)
        same_state(p, middle.client())
        same_state(p, leaf.client())
        assert info(leaf.client())["master_replid"] == info(p)["master_replid"]
    finally:
        leaf.stop()
        middle.stop()
        primary.stop()


def test_the_primary_restarted_from_its_aof_is_followed_again(tmp_path):
    args = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
    primary = start(tmp_path, "primary", *args)
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        p = primary.client()
        run_workload(p, 39)
        caught_up(p, replica.client())
        kill9(primary)
        primary = start(tmp_path, "primary", *args, port=primary.port)
        p = primary.client()
        run_workload(p, 40, 100)
        same_state(p, replica.client())
    finally:
        replica.stop()
        primary.stop()


def test_replica_serve_stale_data_no_refuses_while_the_link_is_down(tmp_path):
    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port, "--replica-serve-stale-data", "no")
    try:
        r = replica.client()
        caught_up(primary.client(), r)
        kill9(primary)
        wait_for(lambda: info(r)["master_link_status"] == "down")
        assert info(r)["master_link_down_since_seconds"] >= 0  # INFO is allowed (stale)
        with pytest.raises(redis.exceptions.MasterDownError, match="^Link with MASTER is down and replica-serve-stale-data is set to 'no'.$"):
            r.get("k")
        with pytest.raises(redis.exceptions.MasterDownError):
            r.ping()  # as Redis: PING has no `stale` flag
        assert r.execute_command("REPLICAOF", "NO", "ONE") == b"OK"  # REPLICAOF is allowed
        assert r.get("k") is None
    finally:
        replica.stop()


def test_a_replica_with_stale_data_off_starts_before_its_primary(tmp_path):
    """Started before its primary, such a replica answers MASTERDOWN at once, then serves once linked."""
    port = free_port()
    replica = replica_of(tmp_path, "replica", port, "--replica-serve-stale-data", "no")
    try:
        r = replica.client()
        with pytest.raises(redis.exceptions.MasterDownError):
            r.ping()
        primary = start(tmp_path, "primary", port=port)
        try:
            primary.client().xadd("s", {"f": "v"}, id="1-1")
            caught_up(primary.client(), r)
            assert r.xrange("s") == [(b"1-1", {b"f": b"v"})]
        finally:
            primary.stop()
    finally:
        replica.stop()


def test_min_replicas_to_write(tmp_path):
    primary = start(tmp_path, "primary", "--min-replicas-to-write", "1", "--min-replicas-max-lag", "10")
    try:
        p = primary.client()
        with pytest.raises(redis.ResponseError, match="NOREPLICAS Not enough good replicas to write."):
            p.set("k", "v")
        replica = replica_of(tmp_path, "replica", primary.port)
        try:
            wait_for(lambda: info(p).get("min_slaves_good_slaves") == 1)
            assert p.set("k", "v") is True
            time.sleep(0.1)
        finally:
            replica.stop()
    finally:
        primary.stop()


def test_a_replica_of_a_replica_applies_the_stream_in_the_db_it_had_selected(tmp_path):
    """The stream a replica passes on has no SELECT until the db changes: its snapshot names the db (repl_stream_db)."""
    primary = start(tmp_path, "primary")
    middle = replica_of(tmp_path, "middle", primary.port)
    p = primary.client(db=2)
    p.set("a", "1")
    caught_up(p, middle.client())
    leaf = replica_of(tmp_path, "leaf", middle.port)
    try:
        caught_up(p, leaf.client())
        p.set("b", "2")  # the stream says nothing of db 2 again
        caught_up(p, middle.client(), leaf.client())
        assert leaf.client(db=2).mget("a", "b") == [b"1", b"2"]
        assert leaf.client(db=0).dbsize() == 0
    finally:
        leaf.stop()
        middle.stop()
        primary.stop()


def test_replica_announce_ip_and_port_are_what_the_primary_reports(tmp_path):
    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port, "--replica-announce-ip", "10.1.2.3", "--replica-announce-port", "6390")
    try:
        p = primary.client()
        caught_up(p, replica.client())
        assert info(p)["slave0"]["ip"] == "10.1.2.3" and info(p)["slave0"]["port"] == 6390
        wait_for(lambda: [entry[:2] for entry in p.execute_command("ROLE")[2]] == [[b"10.1.2.3", b"6390"]])  # the offset moves on
    finally:
        replica.stop()
        primary.stop()


def test_failover_swaps_roles_with_nothing_lost(tmp_path):
    """FAILOVER: writes pause, the replica catches up and takes over, the old primary follows it."""
    primary = start(tmp_path, "primary")
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        p, r = primary.client(), replica.client()
        run_workload(p, 41, 200)
        caught_up(p, r)
        with pytest.raises(redis.ResponseError, match="FAILOVER target HOST and PORT is not a replica."):
            p.execute_command("FAILOVER", "TO", "127.0.0.1", 1)
        with pytest.raises(redis.ResponseError, match="No failover in progress."):
            p.execute_command("FAILOVER", "ABORT")
        assert p.execute_command("FAILOVER", "TO", "127.0.0.1", replica.port, "TIMEOUT", 5000) == b"OK"
        wait_for(lambda: info(r)["role"] == "master" and info(p).get("master_link_status") == "up")
        assert info(p)["master_failover_state"] == "no-failover" and info(p)["master_port"] == replica.port
        assert info(r)["master_replid2"] == info(p)["master_replid2"] or info(r)["master_replid"] == info(p)["master_replid"]
        with pytest.raises(redis.ReadOnlyError):
            p.set("k", "v")
        run_workload(r, 42, 100)  # the new primary takes writes, the old one follows it
        same_state(r, p)
        assert info(r, "stats")["sync_partial_ok"] == 1 and info(r, "stats")["sync_full"] == 0
        with pytest.raises(redis.ResponseError, match="FAILOVER is not valid when server is a replica."):
            p.execute_command("FAILOVER")
    finally:
        replica.stop()
        primary.stop()


def test_a_replicas_info_fields_are_redis_8s(tmp_path):
    """INFO replication on a replica that never reached its primary and on one whose link is up: the
    same fields, in the same order, as Redis 8.2.3's replica, and the values that do not depend on timing."""
    from tests.servers import require_redis, start_redis

    require_redis()
    seen = {}
    for kind in ("millrace", "redis"):
        if kind == "millrace":
            primary = start(tmp_path, "primary")
            linked = replica_of(tmp_path, "linked", primary.port)
            lost = replica_of(tmp_path, "lost", free_port())
        else:
            primary = start_redis("--repl-diskless-sync-delay", "0")
            linked = start_redis("--replicaof", "127.0.0.1", str(primary.port))
            lost = start_redis("--replicaof", "127.0.0.1", str(free_port()))
        try:
            wait_for(lambda r=linked: info(r.client())["master_link_status"] == "up")
            wait_for(lambda r=lost: info(r.client())["master_total_sync_attempts"] >= 1)
            up, down = info(linked.client()), info(lost.client())
            seen[kind] = (
                [name for name in up if not name.startswith("master_repl")],
                [name for name in down if not name.startswith("master_repl")],
                down["master_link_down_since_seconds"], down["total_disconnect_time_sec"], up["total_disconnect_time_sec"],
                up["master_current_sync_attempts"], up["master_total_sync_attempts"],
            )
        finally:
            for proc in (lost, linked, primary):
                proc.stop()
    assert seen["millrace"] == seen["redis"]


def test_a_lost_link_counts_its_sync_attempts_and_time_as_redis(tmp_path):
    """After an outage: master_current_sync_attempts counts only the attempts since the link was last
    up (the first sync is in the total alone) and total_disconnect_time_sec the time it was down."""
    from tests.servers import require_redis, start_redis

    require_redis()
    for kind in ("millrace", "redis"):
        primary = start(tmp_path, f"p-{kind}") if kind == "millrace" else start_redis("--repl-diskless-sync-delay", "0")
        proxy = Proxy(primary.port)
        args = ("--replicaof", "127.0.0.1", str(proxy.port), "--repl-timeout", "1")
        replica = start(tmp_path, f"r-{kind}", *args) if kind == "millrace" else start_redis(*args)
        try:
            r = replica.client()
            wait_for(lambda r=r: info(r)["master_link_status"] == "up")
            proxy.stall()
            proxy.cut()
            wait_for(lambda r=r: info(r)["master_link_status"] == "down")
            time.sleep(2.5)
            proxy.stall(False)
            wait_for(lambda r=r: info(r)["master_link_status"] == "up")
            now = info(r)
            assert now["master_total_sync_attempts"] == now["master_current_sync_attempts"] + 1, (kind, now)
            assert now["total_disconnect_time_sec"] >= 2, (kind, now)
        finally:
            proxy.close()
            replica.stop()
            primary.stop()
