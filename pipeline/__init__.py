"""Spark integration: the `millrace` PySpark data source and example jobs (a client only).

from pipeline import register
register(spark)
spark.read.format("millrace").option("streams", "sensors").load()
"""

from __future__ import annotations


def register(spark) -> None:
    """Make `format("millrace")` available in this Spark session."""
    from pipeline.source import MillraceDataSource

    spark.dataSource.register(MillraceDataSource)
