"""pipeline/arrow_batches.py in-process (no Spark session): raw XRANGE entries, random
and seeded, turned into record batches and compared with a plain-Python model of each
column (metadata from the ID, the fields map, typed field columns with nulls for absent
fields, undecodable bytes replaced); plan_for's errors; record_batches' grouping."""

from __future__ import annotations

import datetime
import decimal
import random

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
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

from pipeline.arrow_batches import DEFAULT_SCHEMA, BatchPlan, plan_for, record_batches, to_record_batch
from pipeline.options import OptionError

TEXT = [b"", b"a", b"hello", "h\u00e9".encode(), b"\xff\xfe", b"x\x00y"]
NUMS = [b"0", b"1", b"-7", b"123456789012", b"42"]
BOOLS = [b"true", b"false", b"True", b"FALSE", b"1", b"0"]


class NotUtf8(Exception):
    pass


def _text(value: bytes | None) -> str | None:
    try:
        return None if value is None else value.decode("utf-8")
    except UnicodeDecodeError:
        raise NotUtf8 from None


def _entries(rng: random.Random, n: int):
    entries, ms, seq = [], rng.choice([0, 1, 2**40]), 0
    for _ in range(n):
        if rng.random() < 0.5:
            ms, seq = ms + rng.randint(1, 5), rng.choice([0, 1])
        else:
            seq += rng.choice([1, 2**33])
        fields = []
        for name in rng.sample([b"s", b"b", b"n", b"q", b"ok", b"x", "\u00e9".encode()], rng.randint(0, 5)):
            pool = NUMS if name in (b"n", b"q") else BOOLS if name == b"ok" else TEXT
            fields += [name, rng.choice(pool)]
        entries.append([f"{ms}-{seq}".encode(), fields])
    return entries


@pytest.mark.parametrize("seed", range(4))
def test_default_schema_against_the_model(seed):
    rng = random.Random(seed)
    plan = plan_for(DEFAULT_SCHEMA)
    assert [c.kind for c in plan.columns] == ["stream", "id", "ts_ms", "seq", "fields"]
    assert not plan.needs_field_dicts
    for _ in range(40):
        entries = _entries(rng, rng.choice([0, 1, 2, 7]))
        want = []
        try:
            for raw_id, fields in entries:
                ms, seq = map(int, raw_id.split(b"-"))
                pairs = [(_text(fields[i]), _text(fields[i + 1])) for i in range(0, len(fields), 2)]
                want.append({"stream": "st", "id": raw_id.decode(), "ts_ms": ms, "seq": seq, "fields": pairs})
        except NotUtf8:
            with pytest.raises(ValueError, match=r"^millrace: field .* in stream 'st' is not valid UTF-8 text"):
                to_record_batch("st", entries, plan)
            continue
        batch = to_record_batch("st", entries, plan)
        assert batch.schema == plan.arrow_schema and batch.num_rows == len(entries)
        assert batch.to_pylist() == want


def test_binary_fields_map_and_column_order():
    schema = StructType([StructField("fields", MapType(StringType(), BinaryType())), StructField("id", StringType()),
                         StructField("seq", LongType()), StructField("stream", StringType())])
    plan = plan_for(schema)
    entries = [[b"5-1", [b"k", b"\xff", "\u00e9".encode(), b""]], [b"6-0", []]]
    assert to_record_batch("z", entries, plan).to_pylist() == [
        {"fields": [("k", b"\xff"), ("\u00e9", b"")], "id": "5-1", "seq": 1, "stream": "z"},
        {"fields": [], "id": "6-0", "seq": 0, "stream": "z"},
    ]


def test_bytes_that_are_not_utf8_fail_a_string_read_by_name():
    """Review 28 finding 3: never replaced by U+FFFD; the error names the stream, entry, field and the fix."""
    entries = [[b"1-0", [b"ok", b"caf\xc3\xa9"]], [b"2-0", []], [b"3-5", [b"utf8", b"x", b"png", b"\x89PNG\r\n"]]]
    with pytest.raises(ValueError) as excinfo:
        to_record_batch("imgs", entries, plan_for(DEFAULT_SCHEMA))
    assert str(excinfo.value) == (
        "millrace: field 'png' of entry 3-5 in stream 'imgs' is not valid UTF-8 text, so it cannot be read as a string "
        "without changing it; read such values as bytes: "
        '.schema("stream string, id string, ts_ms long, seq long, fields map<string,binary>")'
    )
    with pytest.raises(ValueError, match=r"^millrace: field 'png' of entry 3-5 in stream 'imgs' is not valid UTF-8 text, .*"
                                         r"read such values as bytes: a binary column \('png binary'\)$"):
        to_record_batch("imgs", entries, plan_for(StructType([StructField("png", StringType())])))
    with pytest.raises(ValueError, match=r"^millrace: a field name of entry 2-0 in stream 'k' is not valid UTF-8"):
        to_record_batch("k", [[b"1-0", [b"a", b"b"]], [b"2-0", [b"\xff", b"v"]]], plan_for(DEFAULT_SCHEMA))
    binary = StructType([StructField("fields", MapType(StringType(), BinaryType())), StructField("png", BinaryType())])
    assert to_record_batch("imgs", entries, plan_for(binary)).to_pylist()[2] == {
        "fields": [("utf8", b"x"), ("png", b"\x89PNG\r\n")], "png": b"\x89PNG\r\n"}


@pytest.mark.parametrize("seed", range(4))
def test_user_schema_against_the_model(seed):
    rng = random.Random(seed)
    columns = {
        "s": (StringType(), _text),
        "b": (BinaryType(), lambda v: v),
        "n": (LongType(), lambda v: None if v is None else int(v)),
        "q": (DoubleType(), lambda v: None if v is None else float(v)),
        "ok": (BooleanType(), lambda v: None if v is None else v.lower() in (b"true", b"1")),
        "x": (StringType(), _text),
        "\u00e9": (BinaryType(), lambda v: v),
        "ts_ms": (LongType(), None),
        "id": (StringType(), None),
    }
    for _ in range(40):
        names = rng.sample(list(columns), rng.randint(1, len(columns)))
        plan = plan_for(StructType([StructField(n, columns[n][0]) for n in names]))
        assert plan.needs_field_dicts == any(columns[n][1] is not None for n in names)
        entries = _entries(rng, rng.choice([0, 1, 3, 6]))
        try:
            want = _user_rows(entries, names, columns)
        except NotUtf8:
            with pytest.raises(ValueError, match=r"^millrace: field '[sx]' of entry .* in stream 'u' is not valid UTF-8"):
                to_record_batch("u", entries, plan)
            continue
        assert to_record_batch("u", entries, plan).to_pylist() == want


def _user_rows(entries, names, columns):
    want = []
    for raw_id, fields in entries:
        values = dict(zip(fields[0::2], fields[1::2], strict=True))
        row = {}
        for name in names:
            convert = columns[name][1]
            if name == "ts_ms":
                row[name] = int(raw_id.split(b"-")[0])
            elif name == "id":
                row[name] = raw_id.decode()
            else:
                row[name] = convert(values.get(name.encode()))
        want.append(row)
    return want


def test_other_field_types():
    schema = StructType([StructField(n, t) for n, t in (("i", IntegerType()), ("h", ShortType()), ("f", FloatType()),
                                                        ("d", DecimalType(10, 2)), ("day", DateType()))])
    plan = plan_for(schema)
    got = to_record_batch("s", [[b"1-0", [b"i", b"7", b"h", b"-3", b"f", b"0.5", b"d", b"12.25", b"day", b"2024-02-29"]],
                                [b"2-0", []]], plan).to_pylist()
    assert got == [{"i": 7, "h": -3, "f": 0.5, "d": decimal.Decimal("12.25"), "day": datetime.date(2024, 2, 29)},
                   {"i": None, "h": None, "f": None, "d": None, "day": None}]


def test_timestamps_are_utc():
    plan = plan_for(StructType([StructField("t", TimestampType()), StructField("n", TimestampNTZType())]))
    assert plan.arrow_schema.field("t").type == pa.timestamp("us", tz="UTC")
    assert plan.arrow_schema.field("n").type == pa.timestamp("us")
    got = to_record_batch("s", [[b"1-0", [b"t", b"2024-02-29T01:02:03+01:00", b"n", b"2024-02-29 01:02:03"]]], plan).to_pylist()
    assert got == [{"t": datetime.datetime(2024, 2, 29, 0, 2, 3, tzinfo=datetime.UTC),
                    "n": datetime.datetime(2024, 2, 29, 1, 2, 3)}]


def test_a_field_that_does_not_convert_names_itself():
    plan = plan_for(StructType([StructField("n", LongType())]))
    with pytest.raises(ValueError) as excinfo:
        to_record_batch("s1", [[b"1-0", [b"n", b"12"]], [b"1-1", [b"n", b"twelve"]]], plan)
    assert str(excinfo.value).startswith("millrace: field 'n' of stream 's1' cannot be read as int64: ")
    plan = plan_for(StructType([StructField("ok", BooleanType())]))
    with pytest.raises(ValueError, match=r"^millrace: field 'ok' of stream 's2' cannot be read as bool: "):
        to_record_batch("s2", [[b"1-0", [b"ok", b"maybe"]]], plan)


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (StructField("id", LongType()), "schema: column 'id' is the entry's id and must be string, not bigint"),
        (StructField("stream", BinaryType()), "schema: column 'stream' is the entry's stream and must be string, not binary"),
        (StructField("ts_ms", StringType()), "schema: column 'ts_ms' is the entry's ts_ms and must be bigint, not string"),
        (StructField("seq", IntegerType()), "schema: column 'seq' is the entry's seq and must be bigint, not int"),
        (StructField("fields", MapType(StringType(), LongType())),
         "schema: column 'fields' must be map<string,string> or map<string,binary>, not map<string,bigint>"),
        (StructField("fields", MapType(BinaryType(), StringType())),
         "schema: column 'fields' must be map<string,string> or map<string,binary>, not map<binary,string>"),
        (StructField("tags", ArrayType(StringType())),
         "schema: column 'tags' has type array<string>; entry fields can be read as "
         "string, binary, boolean, integral, floating, decimal, date or timestamp"),
        (StructField("m", MapType(StringType(), StringType())),
         "schema: column 'm' has type map<string,string>; entry fields can be read as "
         "string, binary, boolean, integral, floating, decimal, date or timestamp"),
    ],
)
def test_plan_for_errors(field, message):
    with pytest.raises(OptionError) as excinfo:
        plan_for(StructType([StructField("x", StringType()), field]))
    assert str(excinfo.value) == message


def test_fields_as_a_string_column_is_a_field():
    plan = plan_for(StructType([StructField("fields", StringType())]))
    assert [(c.name, c.kind) for c in plan.columns] == [("fields", "field")]
    assert to_record_batch("s", [[b"1-0", [b"fields", b"v"]]], plan).to_pylist() == [{"fields": "v"}]


@pytest.mark.parametrize("seed", range(3))
def test_record_batches_groups_pages(seed):
    rng = random.Random(seed)
    plan = plan_for(DEFAULT_SCHEMA)
    for _ in range(60):
        pages = [[[f"{i}-0".encode(), []] for i in range(rng.randint(0, 5))] for _ in range(rng.randint(0, 6))]
        size = rng.randint(1, 8)
        want, pending = [], 0
        for page in pages:
            pending += len(page)
            if pending >= size:
                want.append(pending)
                pending = 0
        if pending:
            want.append(pending)
        batches = list(record_batches("s", iter(pages), plan, size))
        assert [b.num_rows for b in batches] == want
        rows = [(row["stream"], row["id"]) for b in batches for row in b.to_pylist()]
        assert rows == [("s", e[0].decode()) for page in pages for e in page]
    many = [[[f"{i}-0".encode(), []] for i in range(5000)], [[b"9-9", []] for _ in range(3200)]]
    assert [b.num_rows for b in record_batches("s", iter(many), plan)] == [8200]
    assert [b.num_rows for b in record_batches("s", iter(many * 2), plan)] == [8200, 8200]
    exact = [[[b"1-1", []]] * 8192, [[b"2-2", []]]]
    assert [b.num_rows for b in record_batches("s", iter(exact), plan)] == [8192, 1]  # 8192 rows a batch by default
    assert isinstance(plan, BatchPlan) and pa.types.is_map(plan.arrow_schema.field("fields").type)
