"""Spark integration: the `millrace` PySpark data source and example jobs (a client only).

from pipeline import register
register(spark)
spark.read.format("millrace").option("streams", "sensors").load()
"""

from __future__ import annotations


def register(spark) -> None:
    """Make `format("millrace")` available in this Spark session.

    Spark runs the source in Python workers started with `PYSPARK_PYTHON`, or
    `python3` from PATH when it is unset, which usually lacks redis-py and
    pyarrow. When it is unset (and not under spark-submit, whose settings
    decide), the source's workers use this interpreter instead.
    """
    import os
    import sys

    from pipeline.source import MillraceDataSource

    context = spark.sparkContext
    if not os.environ.get("PYSPARK_PYTHON") and not os.environ.get("SPARK_ENV_LOADED") and context.pythonExec == "python3":
        os.environ["PYSPARK_PYTHON"] = context.pythonExec = sys.executable
    spark.dataSource.register(MillraceDataSource)
    from pipeline.save_modes import install

    install()
