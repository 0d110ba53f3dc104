"""Spark integration: the `millrace` PySpark data source and example jobs (a client only)."""
