"""Spark (issue 5): batch read of a 1,000,000-entry stream through the `millrace` data source.

Both servers are loaded with the same 1,000,000 entries (`sensor-id 1234
temperature 10.5`, pipelined XADD). One local Spark session (`local[2]`, the
JVM started before any timing) then reads the whole stream with
`numPartitions=2` into Spark's `noop` sink, which materialises every row
(all five columns) and keeps nothing. The figure is entries per second of
that read; best of `env.rounds` interleaved rounds, Redis and Millrace back
to back (only one server is under load at a time). Target: Millrace >= 0.5x
Redis. The client side (redis-py + hiredis + Arrow in Spark's Python
workers) is the same for both servers.
"""

from __future__ import annotations

import contextlib
import time

from .harness import Env, Row, Server, Target, load_pipelined, pack

SUITE = "spark"
FIELDS = ("sensor-id", "1234", "temperature", "10.5")
KEY = "bench:spark"
WARM_KEY = "bench:spark:warm"
WARM_ENTRIES = 20_000
NAME = "batch read, 2 partitions"


def run(env: Env) -> list[Row]:
    entries = env.pick(1_000_000, 50_000)
    name = f"{NAME} ({entries // 1000}k entries)"
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        return [Row(SUITE, name, "entries/s", skipped="n/a (pyspark not installed)", note=str(exc))]
    if not env.millrace_supports(("XADD",), ("XRANGE",), ("XINFO", "STREAM", "k")):
        return env.unsupported(SUITE, [(name, "entries/s")], "XADD, XRANGE, XINFO STREAM")

    row = Row(SUITE, name, "entries/s", target=Target("ratio_min", 0.5))
    with contextlib.ExitStack() as stack:
        servers = {kind: stack.enter_context(env.server(kind)) for kind in env.kinds("redis", "millrace")}
        for kind, server in servers.items():
            env.log(f"loading {entries} entries into {kind}")
            load_pipelined(server, (pack("XADD", KEY, "*", *FIELDS) for _ in range(entries)))
            load_pipelined(server, (pack("XADD", WARM_KEY, "*", *FIELDS) for _ in range(WARM_ENTRIES)))
        spark = stack.enter_context(_spark_session())
        for server in servers.values():  # the first reads pay for JVM and worker warm-up: keep them out
            read_seconds(spark, server, WARM_KEY, WARM_ENTRIES)
            read_seconds(spark, server, WARM_KEY, WARM_ENTRIES)
        best: dict[str, float] = {}
        cpu: dict[str, float] = {}
        rounds: dict[str, list[float]] = {kind: [] for kind in servers}
        for index in range(env.rounds):
            for kind, server in servers.items():
                seconds, server_cpu = read_seconds(spark, server, KEY, entries)
                used = server_cpu / entries * 1e6
                rounds[kind].append(round(entries / seconds))
                best[kind] = max(best.get(kind, 0.0), entries / seconds)
                cpu[kind] = min(cpu.get(kind, float("inf")), used)
                env.log(
                    f"round {index + 1}: {kind} {entries / seconds:,.0f} entries/s ({seconds:.2f} s), server CPU {used:.2f} us/entry"
                )
        row.redis = best.get("redis")
        row.millrace = best.get("millrace")
        row.extra = {"rounds": rounds, "entries": entries}
        row.note = f"best of {env.rounds}; local[2], numPartitions=2, readCount=1000, noop sink"
    cpu_row = Row(SUITE, "server CPU per entry read", "us", redis=cpu.get("redis"), millrace=cpu.get("millrace"))
    cpu_row.note = "user+sys CPU of the server process during the read / entries (lowest round): the load-independent cost"
    return [row, cpu_row]


def read_seconds(spark, server: Server, key: str, entries: int) -> tuple[float, float]:
    """Wall time and server CPU time of one full batch read of the stream; check it saw every entry."""
    reader = (
        spark.read.format("millrace")
        .option("url", f"redis://127.0.0.1:{server.port}")
        .option("streams", key)
        .option("numPartitions", 2)
    )
    df = reader.load()
    cpu_before = server.cpu_seconds()
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - started
    server_cpu = server.cpu_seconds() - cpu_before
    count = reader.load().selectExpr("count(*)").first()[0]
    if count != entries:
        raise RuntimeError(f"{server.kind}: the read saw {count} entries, expected {entries}")
    return seconds, server_cpu


@contextlib.contextmanager
def _spark_session():
    from pipeline.jobs.common import spark_session

    spark = spark_session("millrace-bench", "local[2]", {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}, "ERROR")
    # warm up the Python workers and the data source outside the timing
    spark.range(2).repartition(2).rdd.map(lambda x: x).count()
    try:
        yield spark
    finally:
        spark.stop()
