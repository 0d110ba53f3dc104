"""`make pipeline`: generator -> streaming job -> batch job against a running server.

Starts no server: point it at one (default $MILLRACE_URL or
redis://127.0.0.1:6379, e.g. `make run` in another terminal):

    python -m pipeline.jobs.run_all [--url redis://host:6379] [--minutes 10] [--sensors 20] [--workdir data/pipeline]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import redis

from pipeline.jobs import generator, report, sensor_aggregates
from pipeline.jobs.common import RAW_STREAM, add_common_args, say, spark_session


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of sensor event time to generate")
    parser.add_argument("--sensors", type=int, default=20)
    parser.add_argument("--workdir", default="data/pipeline", help="checkpoint and Parquet output go here")
    args = parser.parse_args(argv)
    try:
        redis.Redis.from_url(args.url, socket_connect_timeout=3).ping()
    except redis.RedisError as exc:
        print(
            f"run_all: no server at {args.url} ({exc}).\nStart one first (`make run`), or pass --url / set MILLRACE_URL.",
            file=sys.stderr,
        )
        return 2
    workdir = Path(args.workdir).resolve()
    started = time.perf_counter()
    say("run_all", f"server {args.url}; work directory {workdir}")
    generator.generate(args.url, RAW_STREAM, args.sensors, args.minutes, period_ms=2000)
    spark = spark_session("millrace-pipeline-demo", args.master or "local[*]")
    try:
        sensor_aggregates.run(spark, args.url, str(workdir / "checkpoints" / "sensor_aggregates"), max_per_trigger=2500)
        report.run(spark, args.url, str(workdir / "reports" / "sensors"))
    finally:
        spark.stop()
    say("run_all", f"all done in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
