"""The `millrace` data source: one class Spark instantiates per query, handing out readers and writers."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from pipeline.arrow_batches import DEFAULT_SCHEMA
from pipeline.options import OptionError


class MillraceDataSource(DataSource):
    """`spark.read.format("millrace")`, `readStream`, `write` and `writeStream` on Millrace (or Redis) streams."""

    @classmethod
    def name(cls) -> str:
        return "millrace"

    def schema(self) -> StructType:
        return DEFAULT_SCHEMA

    def reader(self, schema: StructType):
        from pipeline.batch_reader import BatchReader
        from pipeline.options import read_options

        return BatchReader(read_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType):
        from pipeline.options import read_options
        from pipeline.stream_reader import StreamReader

        return StreamReader(read_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool):
        from pipeline.options import write_options
        from pipeline.writer import BatchWriter, check_reachable

        if overwrite:
            raise OptionError(
                "millrace: save mode 'overwrite' is not supported: a stream is append-only and writing never removes "
                "entries. Use .mode('append') (to start the stream afresh, DEL the key first; to bound it, option 'maxlen' or 'minid')"
            )
        options = write_options(self.options)
        writer = BatchWriter(options, schema)
        check_reachable(options)
        return writer

    def streamWriter(self, schema: StructType, overwrite: bool):
        from pipeline.options import write_options
        from pipeline.writer import StreamWriter, check_reachable

        if overwrite:
            raise OptionError(
                "millrace: outputMode 'complete' is not supported: a stream is append-only and would get every "
                "result again on each trigger. Use outputMode('append') (with a watermark for aggregations)"
            )
        options = write_options(self.options)
        writer = StreamWriter(options, schema)
        check_reachable(options)
        return writer
