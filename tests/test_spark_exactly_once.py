"""Exactly-once writes from Spark: the Python worker of a task is killed in the middle of its write.

The sink talks to Millrace through a TCP proxy that counts what each connection
sends; once a connection has sent `KILL_AFTER` bytes (a few dozen XADDs, part
of a partition's rows), the proxy finds the process owning the other end of
that socket (a PySpark worker running the writer) and kills it with SIGKILL.
Spark sees the task fail and runs it again (local[2,4]): the batch test kills
each partition's first attempt; the streaming test kills every attempt of the
first run, so the query dies, then restarts it from its checkpoint, which runs
the same micro-batch again. The stream must hold every row exactly once, and
`iids-duplicates` shows that rows really were sent twice. The same jobs with
`exactlyOnce=false` leave duplicates: the kills are real and IDMP is what
absorbs them. Against Redis 8.2.3 (no IDMP) the sink warns that it writes at
least once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pipeline.idempotence import use_idmp  # noqa: E402
from pipeline.jobs.common import spark_session  # noqa: E402
from tests.proxy import Proxy  # noqa: E402
from tests.servers import require_redis, start_millrace, start_redis  # noqa: E402

KILL_AFTER = 4000  # bytes a connection sends before its writer is killed (its first XADDs are through)


def socket_owner(port: int, peer_port: int) -> int | None:
    """The pid of the process whose TCP socket goes from local `port` to `peer_port` (from /proc, Linux).

    Both ends are matched: Linux lets connections to different peers share a local port, and
    matching the local port alone could find, and kill, the Spark JVM (a likely cause of one
    rehearsal in which the JVM died in this module)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote = (int(address.rsplit(":", 1)[1], 16) for address in fields[1:3])
            if (local, remote) == (port, peer_port):
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes and int(pid) != os.getpid():
                    return int(pid)
        except OSError:
            continue
    return None


class KillingProxy(Proxy):
    """A Proxy that SIGKILLs the client process of a connection once it has sent KILL_AFTER bytes, while armed."""

    def __init__(self, target_port: int, kills: int | None) -> None:
        self.kills_left = kills  # None: every connection that gets that far
        self.killed: list[int] = []
        self.sent: dict[socket.socket, int] = {}
        self.clients: set[socket.socket] = set()
        self.armed = threading.Event()
        self.armed.set()
        super().__init__(target_port)

    def _accept(self) -> None:
        super()._accept()
        with self.lock:  # the accepted end of each pair is the one on the proxy's port
            self.clients = {sock for sock in self.pairs if sock.getsockname()[1] == self.port}

    def _forward(self, sock: socket.socket) -> None:
        if sock in self.clients and self.armed.is_set() and self.kills_left != 0:
            try:
                waiting = len(sock.recv(1 << 16, socket.MSG_PEEK))
            except OSError:
                waiting = 0
            total = self.sent.get(sock, 0) + waiting
            self.sent[sock] = total
            if total >= KILL_AFTER:
                pid = socket_owner(sock.getpeername()[1], self.port)
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    self.killed.append(pid)
                    if self.kills_left is not None:
                        self.kills_left -= 1
                    self.clients.discard(sock)
                    self._close(sock)
                    return
        super()._forward(sock)


ROWS = 2000


@pytest.fixture(scope="module")
def spark():
    session = spark_session(
        "millrace-exactly-once",
        "local[2,4]",  # two cores, a failed task is tried up to 4 times
        {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
         "spark.task.maxFailures": "4"},
        log_level="ERROR",
    )  # fmt: skip
    yield session
    session.stop()


@pytest.fixture(scope="module")
def millrace():
    proc = start_millrace()
    yield proc
    proc.stop()


def _numbers(client, key: str) -> list[int]:
    return sorted(int(fields[b"n"]) for _id, fields in client.xrange(key))


def _duplicates(client, key: str) -> int:
    info = client.execute_command("XINFO", "STREAM", key)
    info = info if isinstance(info, dict) else dict(zip(info[0::2], info[1::2], strict=True))
    return {k if isinstance(k, str) else k.decode(): v for k, v in info.items()}["iids-duplicates"]


def _batch_write(spark, port: int, stream: str, **options) -> None:
    df = spark.range(0, ROWS, 1, 2).selectExpr("id AS n", "concat('v', id) AS v")
    writer = df.write.format("millrace").option("url", f"redis://127.0.0.1:{port}").option("stream", stream)
    writer = writer.option("writeBatchSize", "10")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save()


@pytest.mark.parametrize(("exactly_once", "stream"), [("auto", "out"), ("false", "plain")])
def test_killed_tasks_are_retried_and_add_every_row_once(spark, millrace, exactly_once, stream):
    client = millrace.client()
    proxy = KillingProxy(millrace.port, kills=2)  # each partition's first attempt dies mid-write
    try:
        _batch_write(spark, proxy.port, stream, exactlyOnce=exactly_once)
    finally:
        proxy.close()
    assert len(proxy.killed) == 2
    numbers = _numbers(client, stream)
    assert sorted(set(numbers)) == list(range(ROWS))
    if exactly_once == "auto":
        assert numbers == list(range(ROWS))
        assert _duplicates(client, stream) > 0  # the retries did send rows already written
    else:
        assert len(numbers) > ROWS  # at least once: the killed attempts' rows are there twice


def _streaming_copy(spark, port: int, target: str, checkpoint: str, **options):
    url = f"redis://127.0.0.1:{port}"
    source = (
        spark.readStream.format("millrace").option("url", url).option("streams", "in").option("startingOffsets", "earliest")
        .schema("n long").load()
    )  # fmt: skip
    writer = (
        source.writeStream.format("millrace").option("url", url).option("stream", target).option("writeBatchSize", "10")
        .option("checkpointLocation", checkpoint)
    )  # fmt: skip
    for key, value in options.items():
        writer = writer.option(key, value)
    query = writer.trigger(availableNow=True).start()
    try:
        query.awaitTermination(300)
    except Exception as exc:  # the killed tasks end the query
        return exc
    return query.exception()


@pytest.mark.parametrize(("exactly_once", "target"), [("auto", "copy"), ("false", "copy-plain")])
def test_a_restarted_streaming_query_adds_nothing_twice(spark, millrace, tmp_path, exactly_once, target):
    client = millrace.client()
    if not client.exists("in"):
        pipe = client.pipeline(transaction=False)
        for n in range(ROWS):
            pipe.xadd("in", {"n": n})
        pipe.execute()
    checkpoint = str(tmp_path / "cp")
    proxy = KillingProxy(millrace.port, kills=None)  # every attempt dies: the query fails
    try:
        assert _streaming_copy(spark, proxy.port, target, checkpoint, exactlyOnce=exactly_once) is not None
        assert 0 < client.xlen(target) < ROWS  # it died in the middle of its batch
        proxy.armed.clear()  # the restarted query runs the same batch again, undisturbed
        assert _streaming_copy(spark, proxy.port, target, checkpoint, exactlyOnce=exactly_once) is None
    finally:
        proxy.close()
    numbers = _numbers(client, target)
    assert sorted(set(numbers)) == list(range(ROWS))
    if exactly_once == "auto":
        assert numbers == list(range(ROWS)) and _duplicates(client, target) > 0
    else:
        assert len(numbers) > ROWS


def test_a_server_without_idmp_is_at_least_once_and_says_so(spark, millrace, caplog):
    """Spark plans and writes in Python processes of its own: the warning is checked on the call they make."""
    require_redis()
    redis82 = start_redis()
    try:
        caplog.set_level(logging.WARNING, logger="millrace.spark")
        client = redis82.client()
        assert use_idmp(client, "auto", "here") is False
        assert "has no idempotent XADD (IDMP, Redis >= 8.6): writes are at-least-once" in caplog.text
        assert use_idmp(client, "false", "here") is False and use_idmp(millrace.client(), "auto", "there") is True
        df = spark.range(0, 20, 1, 1).selectExpr("id AS n")
        url = f"redis://127.0.0.1:{redis82.port}"
        df.write.format("millrace").option("url", url).option("stream", "out").mode("append").save()
        assert redis82.client().xlen("out") == 20
        with pytest.raises(Exception, match="does not support XADD IDMP"):
            df.write.format("millrace").option("url", url).option("stream", "out").option("exactlyOnce", "true").mode("append").save()
        with pytest.raises(Exception, match="exactlyOnce"):
            df.write.format("millrace").option("url", url).option("stream", "out").option("exactlyOnce", "maybe").mode("append").save()
    finally:
        redis82.stop()
