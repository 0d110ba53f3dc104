"""A Spark streaming query through Sentinel survives a failover, exactly once by its offsets.

The query reads the stream with the source's `sentinel` / `sentinelMaster`
options, in availableNow runs that share a checkpoint. Between two runs the
primary is killed (-9) and Sentinel promotes a replica; more entries are
written on the new primary. The second run must deliver exactly the new
entries: none lost, none repeated.
"""

from __future__ import annotations

import pytest
import redis
import redis.sentinel

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pipeline.jobs.common import spark_session  # noqa: E402
from tests.test_persistence import kill9, wait_for  # noqa: E402
from tests.test_replication import caught_up, replica_of, start  # noqa: E402
from tests.test_sentinel import SENTINEL, Sentinels  # noqa: E402

pytestmark = pytest.mark.skipif(SENTINEL is None, reason="redis-sentinel is not installed")


def run_query(spark, sentinels: Sentinels, checkpoint) -> list[str]:
    """One availableNow run of the streaming source; the IDs it delivered, in order."""
    delivered: list[str] = []

    def sink(df, batch_id):
        delivered.extend(row.id for row in df.select("id").collect())

    query = (
        spark.readStream.format("millrace")
        .option("sentinel", ",".join(f"127.0.0.1:{port}" for port in sentinels.ports))
        .option("sentinelMaster", "mymaster")
        .option("timeout", "5")
        .option("streams", "events")
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", 40)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    if query.exception():
        raise query.exception()
    return delivered


def write(client: redis.Redis, n: int, replicas: int) -> list[str]:
    ids = [client.xadd("events", {"n": i}).decode() for i in range(n)]
    assert client.execute_command("WAIT", replicas, 5000) == replicas  # on the replicas before anything fails
    return ids


def promoted(sentinels: Sentinels, old_port: int) -> bool:
    try:
        _, port = sentinels.client.discover_master("mymaster")
        return port != old_port and redis.Redis(port=port, socket_timeout=2).execute_command("ROLE")[0] == b"master"
    except (redis.ConnectionError, redis.TimeoutError, redis.sentinel.MasterNotFoundError):
        return False


def test_streaming_query_through_sentinel_survives_a_failover(tmp_path):
    from pipeline import register

    primary = start(tmp_path, "primary")
    one = replica_of(tmp_path, "one", primary.port)
    two = replica_of(tmp_path, "two", primary.port)
    sentinels = Sentinels(tmp_path, primary.port)
    spark = spark_session("millrace-sentinel-test", "local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}, log_level="ERROR")
    register(spark)
    try:
        caught_up(primary.client(), one.client(), two.client())
        wait_for(lambda: sentinels.replicas_known(2), timeout=40)
        first = write(primary.client(), 100, 2)
        assert run_query(spark, sentinels, tmp_path / "cp") == first
        kill9(primary)
        wait_for(lambda: promoted(sentinels, primary.port), timeout=60)
        _, port = sentinels.client.discover_master("mymaster")
        other = two if port == one.port else one
        wait_for(lambda: redis.Redis(port=other.port).info("replication").get("master_port") == port, timeout=30)
        second = write(redis.Redis(port=port), 70, 1)
        assert run_query(spark, sentinels, tmp_path / "cp") == second  # exactly the new entries, none again
    finally:
        spark.stop()
        sentinels.stop()
        for proc in (two, one, primary):
            if proc.proc.poll() is None:
                proc.stop()
