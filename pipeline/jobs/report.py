"""Batch job: a report over a historical ID range of the raw readings, written to Parquet.

Reads the entries between two stream IDs (or millisecond times) with a
partitioned batch read, summarises every sensor (readings, min / mean / max
temperature, readings above an alert threshold, last battery level) and writes
the table to Parquet:

    python -m pipeline.jobs.report --url redis://127.0.0.1:6379 --out data/reports/sensors \\
        [--from 1700000000000-0] [--to 1700003600000-0] [--alert 30]
"""

from __future__ import annotations

import argparse
import json
import time

from pipeline.jobs.common import RAW_STREAM, add_common_args, say, spark_session


def run(
    spark,
    url: str,
    out: str,
    source: str = RAW_STREAM,
    start: str | None = None,
    end: str | None = None,
    alert: float = 30.0,
    partitions: int = 4,
) -> dict:
    from pyspark.sql import functions as F

    job = "report"
    started = time.perf_counter()
    reader = (
        spark.read.format("millrace")
        .option("url", url)
        .option("streams", source)
        .option("numPartitions", partitions)
        .schema("id string, ts_ms long, sensor string, site string, temperature double, battery double, event_ms long")
    )
    if start:
        reader = reader.option("startingOffsets", json.dumps({source: start}))
    if end:
        reader = reader.option("endingOffsets", json.dumps({source: end}))
    readings = reader.load().cache()
    total = readings.count()
    if total == 0:
        say(job, f"no entries in {source!r} between {start or 'the start'} and {end or 'the end'}")
        return {"readings": 0, "sensors": 0}
    report = (
        readings.groupBy("site", "sensor")
        .agg(
            F.count("*").alias("readings"),
            F.round(F.min("temperature"), 2).alias("min_temperature"),
            F.round(F.avg("temperature"), 2).alias("mean_temperature"),
            F.round(F.max("temperature"), 2).alias("max_temperature"),
            F.sum(F.when(F.col("temperature") > alert, 1).otherwise(0)).alias("alerts"),
            F.max_by("battery", "event_ms").alias("battery"),
            F.min("id").alias("first_id"),
            F.max("ts_ms").alias("last_ts_ms"),
        )
        .orderBy("site", "sensor")
    )
    report.write.mode("overwrite").parquet(out)
    rows = spark.read.parquet(out).orderBy(F.desc("alerts"), F.desc("max_temperature")).collect()
    span = readings.agg(F.min("id"), F.max("id")).first()
    readings.unpersist()
    elapsed = time.perf_counter() - started
    say(job, f"{total} readings ({span[0]} .. {span[1]}) from {len(rows)} sensors -> {out} in {elapsed:.1f}s")
    for row in rows[:5]:
        say(
            job,
            f"  {row.site:8} {row.sensor}: {row.readings} readings, {row.min_temperature}..{row.max_temperature} °C "
            f"(mean {row.mean_temperature}), {row.alerts} above {alert} °C, battery {row.battery}%",
        )
    return {"readings": total, "sensors": len(rows), "alerts": sum(r.alerts for r in rows)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--source", default=RAW_STREAM)
    parser.add_argument("--out", default="data/reports/sensors")
    parser.add_argument("--from", dest="start", default=None, help="read entries after this ID (exclusive)")
    parser.add_argument("--to", dest="end", default=None, help="read entries up to this ID (inclusive)")
    parser.add_argument("--alert", type=float, default=30.0, help="temperature alert threshold")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args(argv)
    spark = spark_session("millrace-sensor-report", args.master)
    try:
        run(spark, args.url, args.out, args.source, args.start, args.end, args.alert, args.partitions)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
