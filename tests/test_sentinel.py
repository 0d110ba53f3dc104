"""Debian's real redis-sentinel fails over a Millrace deployment.

One primary, two replicas and three sentinels (quorum 2) on loopback. A
writer through redis-py's Sentinel client adds entries and confirms each with
WAIT 1; a consumer-group reader uses the same client. The primary is killed
(-9): Sentinel promotes a replica, the other follows it, the writer and the
reader carry on through Sentinel, and the old primary, restarted, becomes a
replica of the new one. Then every entry WAIT confirmed is on the new
primary, and all three servers hold the same state.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest
import redis
from redis.sentinel import Sentinel

from pipeline.client import connect, stream_info
from pipeline.options import connection_from
from tests.persist_workload import state
from tests.servers import free_port
from tests.test_persistence import kill9, wait_for
from tests.test_replication import caught_up, info, replica_of, start


def master_port(server):
    """The primary a server follows (INFO's master_port), or None. Sentinel's reconfiguration ends with
    CLIENT KILL TYPE normal, which may close the connection asking: it asks again."""
    try:
        return info(server.client()).get("master_port")
    except (redis.ConnectionError, ConnectionError):  # (redis-py's, or the socket's own reset)
        return None

SENTINEL = shutil.which("redis-sentinel")
pytestmark = pytest.mark.skipif(SENTINEL is None and os.environ.get("CI") != "true", reason="redis-sentinel is not installed")


class Sentinels:
    def __init__(self, tmp_path, primary_port: int, count: int = 3) -> None:
        self.directory = tmp_path
        self.ports = [free_port() for _ in range(count)]
        self.procs = []
        for index, port in enumerate(self.ports):
            directory = tmp_path / f"sentinel{index}"
            directory.mkdir()
            conf = directory / "sentinel.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor mymaster 127.0.0.1 {primary_port} 2\n"
                "sentinel down-after-milliseconds mymaster 2000\n"  # 1 s saw a second failover at load 5
                "sentinel failover-timeout mymaster 6000\n"
                "sentinel parallel-syncs mymaster 2\n"
            )
            log = open(directory / "sentinel.log", "wb")
            self.procs.append(subprocess.Popen([SENTINEL, str(conf)], stdout=log, stderr=subprocess.STDOUT))
        self.client = Sentinel([("127.0.0.1", port) for port in self.ports], socket_timeout=2)
        for port in self.ports:
            wait_for(lambda port=port: _ping(port))

    def replicas_known(self, count: int) -> bool:
        return all(len(redis.Redis(port=port).sentinel_slaves("mymaster")) == count for port in self.ports)

    def events(self) -> str:
        """Each sentinel's notable events, for a failure message: why it did not act (e.g. +tilt)."""
        wanted = ("tilt", "convert-to-slave", "sdown", "switch-master", "failover", "promoted")
        lines = []
        for index in range(len(self.procs)):
            log = self.directory / f"sentinel{index}" / "sentinel.log"
            lines += [f"sentinel{index}: {line}" for line in log.read_text(errors="replace").splitlines() if any(w in line for w in wanted)]
        return "\n".join(lines[-60:])

    def wait_for(self, predicate, timeout: float) -> None:
        """wait_for, with the sentinels' events in the failure message."""
        try:
            wait_for(predicate, timeout=timeout)
        except AssertionError:
            raise AssertionError(f"timed out after {timeout} s; sentinel events:\n{self.events()}") from None

    def stop(self) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def spark_source_client(sentinels: Sentinels) -> redis.Redis:
    options = {"sentinel": ",".join(f"127.0.0.1:{port}" for port in sentinels.ports), "sentinelMaster": "mymaster", "timeout": "2"}
    return connect(connection_from({k.lower(): v for k, v in options.items()}))


def say(text: str) -> None:
    """What happens, for `make ha-demo` (pytest -s shows it)."""
    print(f"[ha] {text}", flush=True)


def _ping(port: int) -> bool:
    try:
        return redis.Redis(port=port, socket_timeout=1).ping()
    except redis.ConnectionError:
        return False


def test_sentinel_fails_over_and_nothing_confirmed_is_lost(tmp_path):
    primary = start(tmp_path, "primary")
    one = replica_of(tmp_path, "one", primary.port)
    two = replica_of(tmp_path, "two", primary.port)
    servers = {primary.port: primary, one.port: one, two.port: two}
    sentinels = Sentinels(tmp_path, primary.port)
    say(f"primary :{primary.port}, replicas :{one.port} :{two.port}, sentinels {sentinels.ports} (quorum 2)")
    try:
        caught_up(primary.client(), one.client(), two.client())
        wait_for(lambda: sentinels.replicas_known(2) and len(redis.Redis(port=sentinels.ports[0]).sentinel_sentinels("mymaster")) == 2, timeout=40)
        writer = sentinels.client.master_for("mymaster", socket_timeout=2)
        reader = sentinels.client.master_for("mymaster", socket_timeout=2)
        writer.xgroup_create("events", "workers", id="0", mkstream=True)
        confirmed: list[bytes] = []
        seen: list[bytes] = []

        def write(n: int) -> None:
            entry_id = writer.xadd("events", {"n": n})
            if writer.execute_command("WAIT", 1, 1000) >= 1:
                confirmed.append(entry_id)

        def read(start: str = ">") -> None:
            for _, entries in reader.xreadgroup("workers", "reader", {"events": start}, count=10) or []:
                for entry_id, _ in entries:
                    if entry_id not in seen:
                        seen.append(entry_id)
                    reader.xack("events", "workers", entry_id)

        for n in range(50):
            write(n)
            read()
        say(f"50 entries written through Sentinel, {len(confirmed)} confirmed by WAIT 1; {len(seen)} read by the group")
        source = spark_source_client(sentinels)  # the Spark data source's client, option 'sentinel'
        assert stream_info(source, "events").length == 50
        old_port = primary.port
        say(f"kill -9 of the primary :{old_port}")
        kill9(primary)
        deadline = time.monotonic() + 60
        n = 50
        while time.monotonic() < deadline and n < 100:  # the clients find the new primary through Sentinel
            try:
                write(n)
                read()
                n += 1
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
                time.sleep(0.2)
        assert n == 100, "the writer did not get through after the failover"
        read("0")  # an entry delivered before the kill whose XACK was lost is still pending: at least once
        host, port = sentinels.client.discover_master("mymaster")
        say(f"Sentinel promoted :{port}; the writer and the reader carried on: 50 more entries")
        assert port != old_port and port in servers
        new_primary = servers[port]
        other = two if new_primary is one else one
        # A sentinel starved of CPU for over 2 s enters TILT and takes no action for 30 s, so on a
        # loaded machine a step can take 30 s longer than usual; the waits allow for one TILT.
        sentinels.wait_for(lambda: master_port(other) == port, timeout=60)
        # the old primary comes back and Sentinel makes it a replica of the new one
        restarted = start(tmp_path, "primary", port=old_port)
        servers[old_port] = restarted
        sentinels.wait_for(lambda: master_port(restarted) == port, timeout=90)
        say(f"the old primary, restarted, is now a replica of :{port}")
        p = new_primary.client()
        present = {entry_id for entry_id, _ in p.xrange("events")}
        assert set(confirmed) <= present, f"{len(set(confirmed) - present)} confirmed entries lost"
        assert len(confirmed) >= 90
        group = p.xinfo_groups("events")[0]
        assert group["pending"] == 0 and group["lag"] == 0 and group["entries-read"] == p.xinfo_stream("events")["entries-added"]
        assert seen == sorted(set(seen), key=lambda i: tuple(map(int, i.split(b"-"))))
        for _ in range(20):  # its first call after the failover may meet the closed link
            try:
                assert stream_info(source, "events").length == p.xlen("events")
                break
            except redis.ConnectionError:
                time.sleep(0.2)
        else:
            raise AssertionError("the Spark source's client did not find the new primary")
        caught_up(p, other.client(), restarted.client())
        picture = state(p)
        assert state(other.client()) == picture
        assert state(restarted.client()) == picture
        say(f"{len(confirmed)} confirmed entries all present; the three servers hold the same state")
    finally:
        sentinels.stop()
        for proc in servers.values():
            if proc.proc.poll() is None:
                proc.stop()
