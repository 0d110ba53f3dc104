"""Streaming job: per-sensor, per-minute aggregates of event time, written back to a results stream.

Reads the raw readings stream, assigns each reading to its one-minute window
of event time (watermark: readings more than 30 s late are dropped), and
appends count / mean / max temperature per sensor and window to a results
stream once a window closes. The checkpoint keeps the stream offsets, so a
stopped job restarted with the same --checkpoint continues where it stopped.

    python -m pipeline.jobs.sensor_aggregates --url redis://127.0.0.1:6379            # drain what is there, stop
    python -m pipeline.jobs.sensor_aggregates --url redis://127.0.0.1:6379 --follow   # keep running
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
import time

from pipeline.jobs.common import RAW_STREAM, RESULTS_STREAM, add_common_args, say, spark_session


def build_query(spark, url: str, source: str, sink: str, checkpoint: str, follow: bool, max_per_trigger: int, group: str | None):
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("millrace")
        .option("url", url)
        .option("streams", source)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", max_per_trigger)
        .schema("sensor string, site string, temperature double, event_ms long")
    )
    if group:
        reader = reader.option("group", group)
    readings = reader.load().withColumn("event_time", F.timestamp_millis("event_ms"))
    per_minute = (
        readings.withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "1 minute"), "sensor", "site")
        .agg(F.count("*").alias("readings"), F.avg("temperature").alias("mean"), F.max("temperature").alias("max"))
        .select(
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("minute"),
            "sensor",
            "site",
            "readings",
            F.round("mean", 2).alias("mean_temperature"),
            F.round("max", 2).alias("max_temperature"),
        )
    )
    writer = (
        per_minute.writeStream.format("millrace")
        .option("url", url)
        .option("stream", sink)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
    )
    writer = writer.trigger(processingTime="5 seconds") if follow else writer.trigger(availableNow=True)
    return writer.start()


class ProgressLog:
    """One line per batch that ran, each counted once.

    While idle, Spark reports progress every few seconds for the batch it will
    run next (0 rows, no addBatch), and the batch that later runs under that id
    has rows: so reports are told apart by batch id and timestamp, and idle ones
    are not printed. recentProgress keeps only the last hundred reports, so the
    totals are summed here as reports arrive.
    """

    def __init__(self, job: str, source: str) -> None:
        self.job, self.source = job, source
        self.reported: set[tuple[int, str]] = set()
        self.batches: set[int] = set()
        self.rows = 0

    def update(self, progress_list: list[dict]) -> None:
        for progress in progress_list:
            key = (progress["batchId"], progress["timestamp"])
            if key in self.reported:
                continue
            self.reported.add(key)
            if "addBatch" not in progress.get("durationMs", {}):
                continue  # an idle report: the batch it names has not run
            self.rows += progress["numInputRows"]
            self.batches.add(progress["batchId"])
            source_progress = progress["sources"][0]
            latest = json.loads(source_progress.get("latestOffset") or "{}").get(self.source, {})
            say(
                self.job,
                f"batch {progress['batchId']}: {progress['numInputRows']} readings in, "
                f"{progress['sink'].get('numOutputRows', -1)} windows out, lag {latest.get('lag', '?')}",
            )


def run(
    spark,
    url: str,
    checkpoint: str,
    follow: bool = False,
    source: str = RAW_STREAM,
    sink: str = RESULTS_STREAM,
    max_per_trigger: int = 20_000,
    group: str | None = "spark-aggregates",
) -> dict:
    import redis

    job = "sensor_aggregates"
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    client = redis.Redis.from_url(url, decode_responses=True)
    before = client.xlen(sink)
    query = build_query(spark, url, source, sink, checkpoint, follow, max_per_trigger, group)
    say(job, f"started: {source!r} -> {sink!r}, checkpoint {checkpoint}")
    started = time.perf_counter()
    progress_log = ProgressLog(job, source)
    stop = threading.Event()  # Ctrl-C asks the loop to stop the query, rather than interrupting a call into the JVM
    previous = signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        while query.isActive and not stop.is_set():
            query.awaitTermination(1)
            progress_log.update(query.recentProgress)
        if stop.is_set():
            say(job, "stopping (restart with the same --checkpoint to continue)")
            query.stop()
    finally:
        signal.signal(signal.SIGINT, previous)
    progress_log.update(query.recentProgress)
    if query.exception():
        raise query.exception()
    seen, rows_in = progress_log.batches, progress_log.rows
    after = client.xlen(sink)
    summary = {
        "batches": len(seen),
        "readings": rows_in,
        "windows_written": after - before,
        "seconds": time.perf_counter() - started,
    }
    say(
        job,
        f"done: {summary['batches']} batches, {rows_in} readings, {after - before} closed windows appended to {sink!r} "
        f"({after} in all) in {summary['seconds']:.1f}s",
    )
    if after:
        _, last = client.xrevrange(sink, count=1)[0]
        say(job, f"latest window: {last}")
    for info in client.xinfo_groups(source) if group else []:
        if info["name"] == group:
            say(
                job,
                f"consumer group {group!r} on {source!r}: last-delivered-id {info['last-delivered-id']}, "
                f"entries-read {info['entries-read']}, lag {info['lag']} (Spark commits one batch late)",
            )
    client.close()
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--source", default=RAW_STREAM)
    parser.add_argument("--sink", default=RESULTS_STREAM)
    parser.add_argument("--checkpoint", default="data/checkpoints/sensor_aggregates")
    parser.add_argument(
        "--follow", action="store_true", help="keep running (a micro-batch every 5 s) instead of draining and stopping"
    )
    parser.add_argument("--max-per-trigger", type=int, default=20_000)
    parser.add_argument(
        "--group", default="spark-aggregates", help="consumer group that mirrors the job's position ('' for none)"
    )
    args = parser.parse_args(argv)
    spark = spark_session("millrace-sensor-aggregates", args.master)
    try:
        run(spark, args.url, args.checkpoint, args.follow, args.source, args.sink, args.max_per_trigger, args.group or None)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
