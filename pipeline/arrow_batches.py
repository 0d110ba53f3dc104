"""Turn raw XRANGE pages into Arrow record batches of the read schema.

The default schema is the entry itself (`stream`, `id`, `ts_ms`, `seq`,
`fields`); a user schema may instead pick entry fields by name and give them a
type, e.g. `"sensor string, temperature double, ts_ms long"`: those columns are
read from the fields of each entry (null when absent) and cast from text.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate, chain

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pipeline.options import OptionError

DEFAULT_SCHEMA = StructType(
    [
        StructField("stream", StringType(), True),
        StructField("id", StringType(), True),
        StructField("ts_ms", LongType(), True),
        StructField("seq", LongType(), True),
        StructField("fields", MapType(StringType(), StringType(), True), True),
    ]
)

_METADATA_TYPES: dict[str, tuple[type[DataType], ...]] = {
    "stream": (StringType,),
    "id": (StringType,),
    "ts_ms": (LongType,),
    "seq": (LongType,),
}
_FIELD_TYPES = (
    StringType,
    BinaryType,
    BooleanType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DecimalType,
    DateType,
    TimestampType,
    TimestampNTZType,
)


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # "stream", "id", "ts_ms", "seq", "fields" or "field"
    arrow_type: pa.DataType


@dataclass(frozen=True)
class BatchPlan:
    """How to build each column of the schema; picklable, made on the driver."""

    columns: tuple[Column, ...]
    arrow_schema: pa.Schema

    @property
    def needs_field_dicts(self) -> bool:
        return any(c.kind == "field" for c in self.columns)


def plan_for(schema: StructType) -> BatchPlan:
    """Check a (user) schema and decide where each column comes from; errors name the column."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    columns = []
    for spark_field, arrow_field in zip(schema.fields, arrow_schema, strict=True):
        name, dtype = spark_field.name, spark_field.dataType
        if name in _METADATA_TYPES:
            if not isinstance(dtype, _METADATA_TYPES[name]):
                wanted = "string" if _METADATA_TYPES[name] == (StringType,) else "bigint"
                raise OptionError(
                    f"schema: column '{name}' is the entry's {name} and must be {wanted}, not {dtype.simpleString()}"
                )
            columns.append(Column(name, name, arrow_field.type))
        elif name == "fields" and isinstance(dtype, MapType):
            if not isinstance(dtype.keyType, StringType) or not isinstance(dtype.valueType, StringType | BinaryType):
                raise OptionError(
                    f"schema: column 'fields' must be map<string,string> or map<string,binary>, not {dtype.simpleString()}"
                )
            columns.append(Column(name, "fields", arrow_field.type))
        elif isinstance(dtype, _FIELD_TYPES):
            columns.append(Column(name, "field", arrow_field.type))
        else:
            raise OptionError(
                f"schema: column '{name}' has type {dtype.simpleString()}; entry fields can be read as "
                "string, binary, boolean, integral, floating, decimal, date or timestamp"
            )
    return BatchPlan(tuple(columns), arrow_schema)


class _NotUtf8(ValueError):
    """Raised by _text: the value at `index` is bytes that are not valid UTF-8."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def _text(values: list, arrow_type: pa.DataType) -> pa.Array:
    """bytes -> string array (via binary: several times faster). Bytes that are not valid UTF-8 are
    never replaced (that would change the data silently): _NotUtf8 names the first one, and the
    caller turns it into an error naming the stream, entry and field."""
    try:
        return pa.array(values, pa.binary()).cast(arrow_type)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        for index, value in enumerate(values):
            if isinstance(value, bytes):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    raise _NotUtf8(index) from None
        raise


def _not_utf8(stream: str, entry_id: bytes, field: bytes | str, column: str) -> ValueError:
    field_name = field.decode("utf-8", "backslashreplace") if isinstance(field, bytes) else field
    fix = (
        "read such values as bytes: .schema(\"stream string, id string, ts_ms long, seq long, fields map<string,binary>\")"
        if column == "fields"
        else f"read such values as bytes: a binary column ('{column} binary')"
    )
    return ValueError(
        f"millrace: field {field_name!r} of entry {entry_id.decode()} in stream {stream!r} is not valid UTF-8 text, "
        f"so it cannot be read as a string without changing it; {fix}"
    )


def _field_column(values: list, column: Column, stream: str, ids: list) -> pa.Array:
    if pa.types.is_binary(column.arrow_type):
        return pa.array(values, pa.binary())
    try:
        text = _text(values, pa.string())
    except _NotUtf8 as bad:
        raise _not_utf8(stream, ids[bad.index], column.name, column.name) from None
    if pa.types.is_string(column.arrow_type):
        return text
    try:
        if pa.types.is_boolean(column.arrow_type):
            text = pc.utf8_lower(text)
        return pc.cast(text, column.arrow_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"millrace: field '{column.name}' of stream {stream!r} cannot be read as {column.arrow_type}: {exc}")


def _fields_map(pairs: list, column: Column, stream: str, ids: list) -> pa.Array:
    """map<string, string|binary> from `[[field, value, ...], ...]`, built from flat key and value arrays."""
    flat = list(chain.from_iterable(pairs))
    counts = list(accumulate(map(len, pairs), initial=0))
    offsets = pc.shift_right(pa.array(counts, pa.int32()), 1)  # 2 items a pair
    value_type = column.arrow_type.item_type
    values = flat[1::2]

    def entry_of(pair: int) -> int:  # the entry holding the pair-th pair of `flat`
        return bisect_right(counts, 2 * pair) - 1

    try:
        value_array = pa.array(values, pa.binary()) if pa.types.is_binary(value_type) else _text(values, pa.string())
    except _NotUtf8 as bad:
        raise _not_utf8(stream, ids[entry_of(bad.index)], flat[2 * bad.index], "fields") from None
    try:
        key_array = _text(flat[0::2], pa.string())
    except _NotUtf8 as bad:
        raise ValueError(
            f"millrace: a field name of entry {ids[entry_of(bad.index)].decode()} in stream {stream!r} is not valid UTF-8 "
            f"({flat[2 * bad.index]!r}); Spark map keys and column names are strings, so this source cannot read it "
            "without changing it"
        ) from None
    return pa.MapArray.from_arrays(offsets, key_array, value_array).cast(column.arrow_type)


def to_record_batch(stream: str, entries: list, plan: BatchPlan) -> pa.RecordBatch:
    """One record batch from raw entries `[[id, [field, value, ...]], ...]` of one stream."""
    n = len(entries)
    raw_ids = [e[0] for e in entries]
    ids = None
    ms_seq = None
    dicts = None
    arrays = []
    for column in plan.columns:
        kind = column.kind
        if kind == "stream":
            arrays.append(pa.repeat(pa.scalar(stream, pa.string()), n) if n else pa.array([], pa.string()))
            continue
        if kind in ("id", "ts_ms", "seq"):
            if ids is None:
                ids = _text(raw_ids, pa.string())
            if kind == "id":
                arrays.append(ids)
                continue
            if ms_seq is None:
                parts = pc.split_pattern(ids, "-")
                ms_seq = (pc.cast(pc.list_element(parts, 0), pa.int64()), pc.cast(pc.list_element(parts, 1), pa.int64()))
            arrays.append(ms_seq[0] if kind == "ts_ms" else ms_seq[1])
        elif kind == "fields":
            arrays.append(_fields_map([e[1] for e in entries], column, stream, raw_ids))
        else:
            if dicts is None:
                dicts = [dict(zip(e[1][0::2], e[1][1::2], strict=True)) for e in entries]
            key = column.name.encode()
            arrays.append(_field_column([d.get(key) for d in dicts], column, stream, raw_ids))
    return pa.RecordBatch.from_arrays(arrays, schema=plan.arrow_schema)


def record_batches(stream: str, pages, plan: BatchPlan, rows_per_batch: int = 8192):
    """Group XRANGE pages into record batches of about `rows_per_batch` rows."""
    pending: list = []
    for page in pages:
        pending.extend(page)
        if len(pending) >= rows_per_batch:
            yield to_record_batch(stream, pending, plan)
            pending = []
    if pending:
        yield to_record_batch(stream, pending, plan)
