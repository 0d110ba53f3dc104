"""Differential tests against Redis 8.2.3 for what Sentinel and its users see of a replica set:
min-replicas-to-write counting a replica gone the moment its link closes, `replica-announced`,
and the config file CONFIG REWRITE leaves after Sentinel's promotion transaction."""

from __future__ import annotations

import os
import sys
import time

import pytest
import redis

from tests.servers import ServerProcess, free_port, redis_server_path, require_redis, start_millrace, start_redis


def start(kind: str, *args: str) -> ServerProcess:
    return start_millrace(*args) if kind == "millrace" else start_redis(*args)


def info_field(client: redis.Redis, field: str) -> str:
    return str(client.info("replication").get(field))


def wait_for(check, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", ["millrace", "redis"])
def test_min_replicas_refuses_writes_once_the_last_replica_is_gone(kind):
    """Redis's refreshGoodSlavesCount runs when a replica is freed: the next write is refused at once,
    not after the cron's next look (Millrace took 255-451 writes in that window)."""
    require_redis()
    primary = start(kind)
    replica = start(kind, "--replicaof", "127.0.0.1", str(primary.port))
    try:
        client = primary.client(protocol=2)
        wait_for(lambda: client.info("replication").get("slave0", {}).get("state") == "online")
        client.config_set("min-replicas-to-write", "1")
        wait_for(lambda: info_field(client, "min_slaves_good_slaves") == "1")
        assert client.set("k", "v")
        replica.proc.kill()
        wait_for(lambda: info_field(client, "connected_slaves") == "0")
        assert info_field(client, "min_slaves_good_slaves") == "0"
        with pytest.raises(redis.ResponseError, match="^NOREPLICAS Not enough good replicas to write.$"):
            client.set("k", "w")
    finally:
        replica.stop()
        primary.stop()


def test_replica_announced_is_reported_to_sentinel():
    require_redis()
    seen = {}
    for kind in ("millrace", "redis"):
        primary = start(kind)
        replica = start(kind, "--replicaof", "127.0.0.1", str(primary.port))
        try:
            client = replica.client(protocol=2)
            before = info_field(client, "replica_announced")
            client.config_set("replica-announced", "no")
            seen[kind] = (before, info_field(client, "replica_announced"), client.config_get("replica-announced"))
        finally:
            replica.stop()
            primary.stop()
    assert seen["millrace"] == seen["redis"] == ("1", "0", {"replica-announced": "no"})


def node_from_file(kind: str, conf: str, port: int) -> ServerProcess:
    argv = [redis_server_path(), conf] if kind == "redis" else [sys.executable, "-m", "server", conf]
    return ServerProcess(argv, port, os.path.dirname(conf), kind)


def test_config_rewrite_after_promotion_removes_replicaof(tmp_path):
    """Sentinel's promotion: MULTI, REPLICAOF NO ONE, CONFIG REWRITE, CLIENT KILL ..., EXEC. Redis drops the
    `replicaof` line; Millrace wrote `replicaof ""`, a line redis-server refuses to start from."""
    require_redis()
    files = {}
    primary = start_redis()
    try:
        for kind in ("millrace", "redis"):
            workdir = tmp_path / kind
            workdir.mkdir()
            port = free_port()
            conf = workdir / "node.conf"
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {workdir}\nsave \"\"\nappendonly no\nreplicaof 127.0.0.1 {primary.port}\n")
            node = node_from_file(kind, str(conf), port)
            try:
                with node.client(protocol=2) as client:
                    pipe = client.pipeline(transaction=True)
                    pipe.execute_command("REPLICAOF", "NO", "ONE")
                    pipe.execute_command("CONFIG", "REWRITE")
                    pipe.execute_command("CLIENT", "KILL", "TYPE", "normal")
                    assert pipe.execute()[:2] == [b"OK", b"OK"]
            finally:
                node.stop()
            files[kind] = [line.split()[0] for line in conf.read_text().splitlines() if line and not line.startswith("#")]
            restarted = node_from_file("redis", str(conf), port)  # Redis reads the file Millrace wrote
            try:
                assert restarted.client(protocol=2).execute_command("ROLE")[0] == b"master"
            finally:
                restarted.stop()
    finally:
        primary.stop()
    assert "replicaof" not in files["millrace"] and "replicaof" not in files["redis"]
    assert "user" in files["millrace"] and "user" in files["redis"]
