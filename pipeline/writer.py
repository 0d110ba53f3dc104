"""Writes: every row becomes one XADD, pipelined in batches of `writeBatchSize`.

Columns: the target key is option `stream` or else a `stream` column; an `id`
column (when present and not null) gives an explicit entry ID, otherwise `*`; a
`fields` map column contributes its pairs; every other column becomes a field
named after it, its value written as text; nulls are left out. So a DataFrame
read with the default schema writes back the same entries.

Three column names are not written as fields, and no column is dropped without
being checked (the review-28 choice: a read -> write round trip stays exact, and
a user's data is never dropped silently, so the writer refuses rather than
guesses):
- `ts_ms` and `seq` are what a read derives from the entry ID. They are left
  out only together with an `id` column and only where they agree with that
  row's ID (so nothing is lost: the ID carries them). Without an `id` column,
  or disagreeing with it, they are user data that the writer would otherwise
  drop: the write fails, naming the column, with the fix (rename it to write it
  as a field, or include the `id` column).
- `stream` is the key (what a read puts there: the stream an entry came from).
  With option `stream` also given, the option wins and the column is not
  written: copying a read DataFrame to another stream then writes back the
  same entries (writing the column as a field would add one to every entry;
  refusing would make every such copy drop the column first). This is the one
  column left out unchecked, and the README says so. Options `maxlen` / `minid` (with
`approximate=true` for `~`) trim on every XADD.

Writes are exactly once where the server has idempotent XADD (IDMP: Redis 8.6,
Millrace): each row without an explicit `id` carries a producer and idempotent
ID derived from the write, batch, partition and row (pipeline/idempotence.py),
so a retried task or a restarted streaming query adds nothing twice within the
stream's IDMP-DURATION. Elsewhere, or with `exactlyOnce=false`, they are at
least once: a retried task adds its rows again.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import redis
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, MapType, StructType

from pipeline.client import SourceError, connect, ping
from pipeline.idempotence import RowIdentity, new_write_id, use_idmp
from pipeline.options import OptionError, SourceOptions
from pipeline.stream_ids import format_id

_ID_PARTS = ("ts_ms", "seq")


@dataclass
class WriteCount(WriterCommitMessage):
    rows: int


def _text(value) -> bytes | str | None:
    if value is None or isinstance(value, bytes | str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} as a stream field value")


def check_schema(schema: StructType, options: SourceOptions) -> None:
    names = schema.fieldNames()
    if not options.stream and "stream" not in names:
        raise OptionError("option 'stream' is required (or a 'stream' column naming each row's stream)")
    if "fields" in names and not isinstance(schema["fields"].dataType, MapType):
        raise OptionError("column 'fields' must be a map of field names to values")
    if not [n for n in names if n not in ("stream", "id", *_ID_PARTS)]:
        raise OptionError("nothing to write: a stream entry needs at least one field (a 'fields' map or other columns)")
    for field in schema.fields:
        if field.name != "fields" and isinstance(field.dataType, MapType | ArrayType | StructType):
            raise OptionError(_NESTED.format(name=field.name, kind=field.dataType.simpleString()))
    for name in _ID_PARTS:
        if name in names and "id" not in names:
            raise OptionError(_ID_PART_WITHOUT_ID.format(name=name))


_NESTED = (
    "column '{name}' has type {kind}, which is not a stream field value (text); only a map column called 'fields' "
    "becomes the entry's field/value pairs: rename it to 'fields' (df.withColumnRenamed('{name}', 'fields')), "
    "or write it as text with to_json('{name}')"
)
_ID_PART_WITHOUT_ID = (
    "column '{name}' is not written as a field: 'ts_ms' and 'seq' are the parts of an entry ID (what a read "
    "derives from it) and are left out only with the 'id' column they came from; rename the column to write it "
    "as a field (e.g. df.withColumnRenamed('{name}', 'event_{name}')), or include the 'id' column"
)


def _check_id_parts(parts: dict[str, list], ids: list | None, first_row: int, num_rows: int) -> None:
    """`ts_ms`/`seq` are left out only where they agree with the row's `id`: then the ID carries them."""
    for name, values in parts.items():
        if ids is None:
            raise SourceError(f"millrace: {_ID_PART_WITHOUT_ID.format(name=name)}")
        index = _ID_PARTS.index(name)
        for row in range(num_rows):
            if values[row] is None:
                continue
            try:
                agrees = ids[row] is not None and int(str(ids[row]).split("-")[index]) == int(values[row])
            except (ValueError, IndexError, TypeError):
                agrees = False
            if not agrees:
                raise SourceError(
                    f"millrace: row {first_row + row}: column '{name}' ({values[row]!r}) does not match the row's id "
                    f"({ids[row]!r}), so leaving it out would lose it; 'ts_ms' and 'seq' are written only as parts of "
                    f"the id: rename the column to write it as a field (e.g. 'event_{name}')"
                )


def _trim_args(options: SourceOptions) -> list:
    approx = ["~"] if options.approximate else []
    if options.maxlen is not None:
        return ["MAXLEN", *approx, options.maxlen]
    if options.minid is not None:
        return ["MINID", *approx, format_id(options.minid)]
    return []


def _arrow_columns(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[dict[str, list], int]]:
    for batch in batches:
        yield {name: batch.column(i).to_pylist() for i, name in enumerate(batch.schema.names)}, batch.num_rows


def _row_columns(rows: Iterator, size: int) -> Iterator[tuple[dict[str, list], int]]:
    """Rows (PySpark before 4.1 hands stream writers Rows, not Arrow) as column lists, `size` rows at a time."""
    chunk: list = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == size:
            yield {name: [r[i] for r in chunk] for i, name in enumerate(chunk[0].__fields__)}, len(chunk)
            chunk = []
    if chunk:
        yield {name: [r[i] for r in chunk] for i, name in enumerate(chunk[0].__fields__)}, len(chunk)


def write_batches(options: SourceOptions, batches: Iterator[tuple[dict[str, list], int]], write_id: str | None = None) -> WriteCount:
    """XADD every row, pipelined; with IDMP (when in use) for rows without an explicit ID.

    write_id: the identity of a `df.write` (a streaming write's comes from its query, see RowIdentity).
    """
    client = connect(options.connection)
    try:
        return _write(client, options, batches, write_id)
    finally:
        client.close()  # also when the first PING or the exactlyOnce check fails


def _write(client: redis.Redis, options: SourceOptions, batches: Iterator[tuple[dict[str, list], int]], write_id: str | None) -> WriteCount:
    ping(client, options.connection)
    identity = None
    if use_idmp(client, options.exactly_once, options.connection.describe()):
        identity = RowIdentity.for_task(client, options.write_id or write_id)
    trim = _trim_args(options)
    written = 0
    pipe = client.pipeline(transaction=False)
    queued: list = []  # the key of each queued XADD, for errors naming it
    try:
        for columns, num_rows in batches:
            keys = columns.pop("stream", None)
            ids = columns.pop("id", None)
            maps = columns.pop("fields", None)
            parts = {name: columns.pop(name) for name in _ID_PARTS if name in columns}
            _check_id_parts(parts, ids, written, num_rows)
            for row in range(num_rows):
                key = options.stream or (keys[row] if keys else None)
                if not key:
                    raise SourceError(
                        f"millrace: row {written + row} has no stream (null 'stream' column and no option 'stream')"
                    )
                entry_id = ids[row] if ids and ids[row] is not None else "*"
                args: list = ["XADD", key]
                if identity is not None and entry_id == "*":
                    args += identity.idmp(key, written + row)
                args += [*trim, entry_id]
                empty = len(args)
                if maps and maps[row]:
                    pairs = maps[row].items() if isinstance(maps[row], dict) else maps[row]
                    for field, value in pairs:
                        if value is not None:
                            args += [field, _column_text("fields", value)]
                for name, values in columns.items():
                    if values[row] is not None:
                        args += [name, _column_text(name, values[row])]
                if len(args) == empty:
                    raise SourceError(f"millrace: row {written + row} for stream {key!r} has no non-null field to write")
                pipe.execute_command(*args)
                queued.append(key)
            written += num_rows
            if len(pipe) >= options.write_batch_size:
                _flush(client, pipe, queued)
        _flush(client, pipe, queued)
    except redis.ConnectionError as exc:
        raise SourceError(f"millrace: lost the server at {options.connection.describe()} while writing: {exc}")
    return WriteCount(written)


def _column_text(name: str, value) -> bytes | str:
    try:
        return _text(value)
    except TypeError:
        kind = "map" if isinstance(value, dict) or (isinstance(value, list) and value and isinstance(value[0], tuple)) else (
            "array" if isinstance(value, list | tuple) else type(value).__name__
        )
        if name == "fields":
            raise SourceError(f"millrace: a value in the 'fields' map is a {kind}, not text; write it as text with to_json") from None
        raise SourceError("millrace: " + _NESTED.format(name=name, kind=kind)) from None


def _flush(client: redis.Redis, pipe, queued: list) -> None:
    if not len(pipe):
        return
    keys = list(queued)
    queued.clear()
    for key, reply in zip(keys, pipe.execute(raise_on_error=False), strict=True):
        if isinstance(reply, Exception):
            if str(reply).startswith("WRONGTYPE"):
                kind = client.type(key)
                kind = kind.decode() if isinstance(kind, bytes) else kind
                raise SourceError(
                    f"millrace: key {key!r} holds a {kind}, not a stream (option 'stream' or the 'stream' column); "
                    "write to another key, or DEL this one first"
                )
            raise SourceError(f"millrace: XADD to stream {key!r} failed: {reply}")


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options
        self.write_id = options.write_id or new_write_id()  # on the driver: every task and retry of this write share it

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCount:
        return write_batches(self.options, _arrow_columns(_small(iterator, self.options.write_batch_size)), self.write_id)


class _StreamWriterBase:
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_schema(schema, options)
        self.options = options

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass


try:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter

    class StreamWriter(_StreamWriterBase, DataSourceStreamArrowWriter):
        def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteCount:
            return write_batches(self.options, _arrow_columns(_small(iterator, self.options.write_batch_size)))

except ImportError:  # PySpark 4.0: stream writers get Rows

    class StreamWriter(_StreamWriterBase, DataSourceStreamWriter):
        def write(self, iterator) -> WriteCount:
            return write_batches(self.options, _row_columns(iterator, self.options.write_batch_size))


def _small(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """Slices of at most `rows` rows, so the pipeline is flushed every `writeBatchSize` entries."""
    for batch in batches:
        for offset in range(0, batch.num_rows, rows):
            yield batch.slice(offset, rows)


def check_reachable(options: SourceOptions) -> None:
    """Called on the driver when the write is planned, so a bad address fails before any task runs
    (and a server without IDMP is reported there: refused with exactlyOnce=true, a warning with auto)."""
    client = connect(options.connection)
    try:
        ping(client, options.connection)
        use_idmp(client, options.exactly_once, options.connection.describe())
    finally:
        client.close()
