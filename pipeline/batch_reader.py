"""Batch reads: resolve each stream's ID range once on the driver, read partitions with paged XRANGE."""

from __future__ import annotations

from collections.abc import Iterator

import redis
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pipeline.arrow_batches import plan_for, record_batches
from pipeline.client import SourceError, StreamInfo, connect, ping, scan_range, stream_info
from pipeline.options import Position, SourceOptions
from pipeline.partitioning import Span, StreamRange, plan
from pipeline.stream_ids import make_id


def start_after(position: Position, info: StreamInfo, starting_timestamp: int | None) -> int:
    """The exclusive lower bound of a read: entries strictly after this ID are read."""
    if starting_timestamp is not None:
        return max(0, make_id(starting_timestamp, 0) - 1)
    if position.kind == "earliest":
        return 0
    if position.kind == "latest":
        return info.last_generated_id
    return position.id


def end_upto(position: Position, info: StreamInfo) -> int:
    """The inclusive upper bound of a batch read."""
    if position.kind == "latest":
        return info.last_generated_id
    if position.kind == "earliest":
        return 0
    return position.id


def read_range(options: SourceOptions, plan_, part: StreamRange) -> Iterator:
    """Arrow batches of one partition, read on an executor."""
    client = connect(options.connection)
    try:
        yield from record_batches(part.stream, scan_range(client, part.stream, part.after, part.upto, options.read_count), plan_)
    except redis.ConnectionError as exc:
        raise SourceError(f"millrace: lost the server at {options.connection.describe()} while reading {part.stream!r}: {exc}")
    except redis.ResponseError as exc:
        if str(exc).startswith("WRONGTYPE"):
            raise SourceError(f"millrace: key {part.stream!r} no longer holds a stream (option 'streams')")
        raise
    finally:
        client.close()


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        self.options = options
        self.plan = plan_for(schema)

    def partitions(self) -> list[InputPartition]:
        options = self.options
        client = connect(options.connection)
        try:
            ping(client, options.connection)
            spans = []
            for key in options.streams:
                info = stream_info(client, key)
                after = start_after(options.starting[key], info, options.starting_timestamp)
                upto = end_upto(options.ending[key], info)
                spans.append(Span(key, after, upto, info.first_entry_id, info.last_entry_id, info.length))
        finally:
            client.close()
        return plan(spans, options.num_partitions) or [StreamRange("", 0, 0)]

    def read(self, partition: InputPartition) -> Iterator:
        if not isinstance(partition, StreamRange) or partition.upto <= partition.after:
            return iter(())
        return read_range(self.options, self.plan, partition)
