"""Example Spark jobs on Millrace streams: a sensor generator, a streaming aggregation, a batch report."""
