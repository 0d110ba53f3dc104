"""What every job shares: the server URL, the Spark session, a progress line."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

DEFAULT_URL = os.environ.get("MILLRACE_URL", "redis://127.0.0.1:6379")
RAW_STREAM = "sensors:raw"
RESULTS_STREAM = "sensors:minute"
ROOT = Path(__file__).resolve().parents[2]


def add_common_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=DEFAULT_URL, help="server URL (default $MILLRACE_URL or %(default)s)")
    parser.add_argument("--master", default=None, help="Spark master, e.g. local[*] or spark://host:7077 (spark-submit sets it)")


def spark_session(app: str, master: str | None = None, conf: dict[str, str] | None = None, log_level: str = "WARN"):
    """A Spark session with the `millrace` format registered (jobs, tests and the bench use it).

    Run directly with python, Spark's Python workers must use this interpreter
    and find this repository; under spark-submit (SPARK_ENV_LOADED is set)
    the cluster's settings and --py-files decide instead.
    """
    if not os.environ.get("SPARK_ENV_LOADED"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    settings = {"spark.sql.shuffle.partitions": "4", "spark.ui.showConsoleProgress": "false", **(conf or {})}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    from pipeline import register

    register(spark)
    return spark


def say(job: str, message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {job}: {message}", flush=True)
