"""pipeline/writer.py in-process (no Spark session, no server process): write_batches on a
redis-py client whose commands, pipelined ones too, are answered by a Server in this
process; random seeded rows against a model of the entries they must become (stream
from the option or the column, explicit IDs, the fields map, other columns as text,
nulls left out), IDMP repeats adding nothing, trimming, the flushes, the errors."""

from __future__ import annotations

import datetime
import decimal
import random

import pyarrow as pa
import pytest
import redis
from pyspark.sql import Row
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType

from pipeline import writer
from pipeline.client import SourceError, _identity
from pipeline.options import OptionError, write_options
from pipeline.writer import (
    BatchWriter,
    StreamWriter,
    WriteCount,
    _arrow_columns,
    _row_columns,
    _small,
    _text,
    _trim_args,
    check_reachable,
    check_schema,
    write_batches,
)
from tests.test_backlog_inprocess import InProcessRedis


class FakePipe:
    def __init__(self, client):
        self.client, self.queued, self.flushes = client, [], client.flushes

    def execute_command(self, *args):
        self.queued.append(args)

    def __len__(self):
        return len(self.queued)

    def execute(self, raise_on_error=True):
        assert raise_on_error is False
        replies = []
        for args in self.queued:
            try:
                replies.append(self.client.execute_command(*args))
            except redis.ResponseError as exc:
                replies.append(exc)
        self.flushes.append(len(self.queued))
        self.queued = []
        return replies


class Client(InProcessRedis):
    def __init__(self):
        super().__init__()
        self.flushes, self.closed = [], 0
        for name in ("XRANGE", "XREVRANGE", "XINFO STREAM", "XINFO GROUPS", "XADD"):  # as pipeline.client.connect does
            self.set_response_callback(name, _identity)

    def pipeline(self, transaction=True):
        assert transaction is False
        return FakePipe(self)

    def close(self):
        self.closed += 1


@pytest.fixture
def client(monkeypatch):
    c = Client()

    def connect(conn):
        assert conn == c.expected_connection
        return c

    c.expected_connection = write_options({}).connection
    monkeypatch.setattr(writer, "connect", connect)
    return c


class OldServer(Client):
    """A server that reports a Redis version without IDMP, or cannot be reached."""

    def __init__(self, reachable=True):
        super().__init__()
        self.reachable = reachable

    def info(self, section=None, *args, **kwargs):
        return {"redis_version": "7.4.2"}

    def ping(self, **kwargs):
        if not self.reachable:
            raise redis.ConnectionError("refused")
        return True


def test_unreachable_or_old_servers_are_named(monkeypatch, caplog):
    options = write_options({"stream": "s", "host": "h9", "port": "7", "exactlyonce": "true"})
    for reachable in (False, True):
        server = OldServer(reachable)
        monkeypatch.setattr(writer, "connect", lambda conn, s=server: s if conn == options.connection else pytest.fail("wrong connection"))
        want = ("millrace: cannot connect to the server at redis://h9:7/0 (option 'url' or 'host'/'port'): refused" if not reachable
                else "millrace: the server at redis://h9:7/0 does not support XADD IDMP")
        for call in (lambda: check_reachable(options), lambda: write_batches(options, iter([({"v": ["1"]}, 1)]))):
            with pytest.raises(SourceError) as excinfo:
                call()
            assert str(excinfo.value).startswith(want)
        assert server.closed == 2  # check_reachable's and write_batches', though both failed
    quiet = write_options({"stream": "s", "exactlyonce": "false"})
    caplog.set_level("WARNING", logger="millrace.spark")
    server = OldServer()
    monkeypatch.setattr(writer, "connect", lambda conn: server)
    check_reachable(quiet)
    assert write_batches(quiet, iter([({"v": ["1"]}, 1)])) == WriteCount(1)
    assert caplog.records == []
    check_reachable(write_options({"stream": "s", "host": "h8"}))
    assert [r.getMessage()[:48] for r in caplog.records] == ["millrace: the server at redis://h8:6379/0 has no"]


def test_idmp_chunks_follow_the_stream_maxsize(client):
    client.execute_command("XADD", "s", "1-1", "seed", "x")
    client.execute_command("XCFGSET", "s", "IDMP-DURATION", "100", "IDMP-MAXSIZE", "2")
    options = write_options({"stream": "s", "writeid": "w"})
    rows = [({"v": list("abcde")}, 5)]
    write_batches(options, iter([(dict(c), n) for c, n in rows]))
    assert write_batches(options, iter([(dict(c), n) for c, n in rows])) == WriteCount(5)
    assert len(_entries(client, "s")) == 6  # three producers of two iids each: the repeat adds nothing


def _entries(c, key):
    return [(i.decode(), dict(zip(f[0::2], f[1::2], strict=True))) for i, f in c.execute_command("XRANGE", key, "-", "+")]


def test_text():
    assert [_text(v) for v in (None, b"b", "s", True, False, 1.5, 0.1, 7, -3, decimal.Decimal("1.10"))] == [
        None, b"b", "s", "true", "false", "1.5", "0.1", "7", "-3", "1.10"]
    assert _text(datetime.date(2024, 2, 29)) == "2024-02-29"
    assert _text(datetime.datetime(2024, 2, 29, 1, 2, 3)) == "2024-02-29T01:02:03"
    assert _text(datetime.time(4, 5)) == "04:05:00"
    with pytest.raises(TypeError, match="^cannot write a list as a stream field value$"):
        _text([1])


def test_trim_args_and_schema_checks():
    assert _trim_args(write_options({})) == []
    assert _trim_args(write_options({"maxlen": "0"})) == ["MAXLEN", 0]
    assert _trim_args(write_options({"maxlen": "5", "approximate": "true"})) == ["MAXLEN", "~", 5]
    assert _trim_args(write_options({"minid": "5-1"})) == ["MINID", "5-1"]
    assert _trim_args(write_options({"minid": "5", "approximate": "true"})) == ["MINID", "~", "5-0"]
    opts, named = write_options({}), write_options({"stream": "s"})
    schema = StructType
    ok = [schema([StructField("stream", StringType()), StructField("v", StringType())]),
          schema([StructField("fields", MapType(StringType(), StringType()))])]
    check_schema(ok[0], opts)
    check_schema(ok[1], named)
    with pytest.raises(OptionError, match=r"^option 'stream' is required \(or a 'stream' column naming each row's stream\)$"):
        check_schema(ok[1], opts)
    with pytest.raises(OptionError, match="^column 'fields' must be a map of field names to values$"):
        check_schema(schema([StructField("fields", StringType())]), named)
    for names in (["stream"], ["id", "ts_ms", "seq"], []):
        with pytest.raises(OptionError, match=r"^nothing to write: a stream entry needs at least one field"):
            check_schema(schema([StructField(n, StringType()) for n in names]), named)
    with pytest.raises(OptionError, match="^option 'stream' is required"):
        BatchWriter(opts, ok[1])
    with pytest.raises(OptionError, match="^option 'stream' is required"):
        StreamWriter(opts, ok[1])


@pytest.mark.parametrize("seed", range(4))
def test_write_batches_against_the_model(seed, client):
    rng = random.Random(seed)
    model: dict[str, list] = {}
    written_rows = 0
    for round_ in range(6):
        named = rng.random() < 0.4
        options = write_options({"stream": "named"} if named else {} | {"writebatchsize": str(rng.choice([1, 2, 3, 100]))}
                                | {"exactlyonce": rng.choice(["auto", "false"])})
        batches, want_rows = [], 0
        for _ in range(rng.randint(0, 3)):
            n = rng.randint(0, 4)
            columns: dict[str, list] = {}
            if not named or rng.random() < 0.5:
                columns["stream"] = [rng.choice(["a", "b"]) for _ in range(n)]
            explicit = rng.random() < 0.3
            if explicit:
                columns["id"] = [None] * n
            if rng.random() < 0.7:
                columns["fields"] = [rng.choice([None, {}, {"f": "1", "g": None}, [("h", b"\xff"), ("f", 2)]]) for _ in range(n)]
            columns["v"] = [rng.choice([None, "x", 3, True]) for _ in range(n)]
            for row in range(n):  # every row needs one non-null field: give it v when it has none
                fields = columns.get("fields", [None] * n)[row]
                pairs = list(fields.items()) if isinstance(fields, dict) else fields or []
                if not any(v is not None for _, v in pairs) and columns["v"][row] is None:
                    columns["v"][row] = "filled"
            expect = []
            for row in range(n):
                key = "named" if named else columns["stream"][row]
                fields = columns.get("fields", [None] * n)[row]
                pairs = list(fields.items()) if isinstance(fields, dict) else fields or []
                entry = {}
                for f, v in [*pairs, ("v", columns["v"][row])]:
                    if v is not None:
                        entry[f.encode()] = v if isinstance(v, bytes) else _text(v).encode()
                if explicit and rng.random() < 0.5:
                    last = model.get(key, [("0-0", {})])[-1][0]
                    ms = int(last.split("-")[0]) + 10**13
                    columns["id"][row] = f"{ms}-{row}"
                expect.append((key, columns["id"][row] if explicit else None, entry))
            if explicit:  # as a read gives them: the parts of the row's id (left out: the id carries them)
                columns["ts_ms"] = [None if i is None else int(i.split("-")[0]) for i in columns["id"]]
                columns["seq"] = [None if i is None else int(i.split("-")[1]) for i in columns["id"]]
            batches.append((columns, n, expect))
            want_rows += n
        flushes_before = len(client.flushes)
        count = write_batches(options, iter([(dict(c), n) for c, n, _ in batches]), write_id=f"w{seed}-{round_}")
        assert count == WriteCount(want_rows) and client.closed == round_ + 1
        queued, expected_flushes = 0, []
        for _, n, _ in batches:
            queued += n
            if queued >= options.write_batch_size and queued:
                expected_flushes.append(queued)
                queued = 0
        if queued:
            expected_flushes.append(queued)
        assert client.flushes[flushes_before:] == expected_flushes
        for _, _, expect in batches:
            for key, entry_id, entry in expect:
                model.setdefault(key, [])
                got_id = _entries(client, key)[len(model[key])][0]
                if entry_id is not None:
                    assert got_id == entry_id
                model[key].append((got_id, entry))
        for key in model:
            assert _entries(client, key) == model[key]
        written_rows += want_rows


def test_idmp_repeats_add_nothing_and_need_no_ids(client):
    options = write_options({"stream": "s", "writeid": "fixed"})
    rows = [({"v": ["a", "b", "c"]}, 3)]
    assert write_batches(options, iter([(dict(c), n) for c, n in rows])) == WriteCount(3)
    first = _entries(client, "s")
    assert write_batches(options, iter([(dict(c), n) for c, n in rows])) == WriteCount(3)
    assert _entries(client, "s") == first and len(first) == 3
    plain = write_options({"stream": "s", "writeid": "fixed", "exactlyonce": "false"})
    write_batches(plain, iter([({"v": ["a"]}, 1)]))
    assert len(_entries(client, "s")) == 4
    other = write_options({"stream": "s"})
    write_batches(other, iter([({"v": ["a"]}, 1)]), write_id="one")
    write_batches(other, iter([({"v": ["a"]}, 1)]), write_id="one")
    write_batches(other, iter([({"v": ["a"]}, 1)]), write_id="two")
    assert len(_entries(client, "s")) == 6


def test_trimming_on_every_xadd(client):
    write_batches(write_options({"stream": "s", "maxlen": "2"}), iter([({"v": list("abcde")}, 5)]))
    assert [e[1][b"v"] for e in _entries(client, "s")] == [b"d", b"e"]
    write_batches(write_options({"stream": "t", "minid": "0-0"}), iter([({"id": ["1-1", "2-2"], "v": ["a", "b"]}, 2)]))
    assert [e[0] for e in _entries(client, "t")] == ["1-1", "2-2"]
    write_batches(write_options({"stream": "t", "minid": "2-2"}), iter([({"id": ["3-0"], "v": ["c"]}, 1)]))
    assert [e[0] for e in _entries(client, "t")] == ["2-2", "3-0"]


def test_write_errors(client):
    opts = write_options({})
    with pytest.raises(SourceError, match=r"^millrace: row 3 has no stream \(null 'stream' column and no option 'stream'\)$"):
        write_batches(opts, iter([({"stream": ["a", "a"], "v": ["1", "2"]}, 2), ({"stream": ["a", None], "v": ["1", "2"]}, 2)]))
    with pytest.raises(SourceError, match=r"^millrace: row 0 has no stream"):
        write_batches(opts, iter([({"v": ["1"]}, 1)]))
    with pytest.raises(SourceError, match=r"^millrace: row 1 for stream 'k' has no non-null field to write$"):
        write_batches(opts, iter([({"stream": ["k", "k"], "fields": [{"a": "1"}, {"a": None}], "v": [None, None]}, 2)]))
    with pytest.raises(SourceError, match=r"^millrace: XADD to stream 'k' failed: .*equal or smaller"):
        write_batches(opts, iter([({"stream": ["k", "k"], "id": ["5-0", "4-0"], "v": ["1", "2"]}, 2)]))
    assert client.closed == 4

    def lost():
        yield {"stream": ["k"], "v": ["1"]}, 1
        raise redis.ConnectionError("reset")

    with pytest.raises(SourceError, match=r"^millrace: lost the server at redis://127.0.0.1:6379/0 while writing: reset$"):
        write_batches(opts, lost())
    assert client.closed == 5


def test_ts_ms_seq_and_stream_columns_are_never_dropped_silently(client):
    """Review 28 finding 4: ts_ms/seq are left out only with the id they agree with; else the write fails."""
    rows = {"id": ["1700000000123-42"], "ts_ms": [1700000000123], "seq": [42], "v": ["x"]}
    write_batches(write_options({"stream": "s"}), iter([(dict(rows), 1)]))
    assert _entries(client, "s") == [("1700000000123-42", {b"v": b"x"})]  # the round trip is exact
    with pytest.raises(SourceError, match=r"^millrace: column 'ts_ms' is not written as a field: .*rename the column"):
        write_batches(write_options({"stream": "s"}), iter([({"sensor": ["a"], "ts_ms": [1], "seq": [2]}, 1)]))
    with pytest.raises(SourceError, match=r"^millrace: row 0: column 'seq' \(7\) does not match the row's id \('9-1'\)"):
        write_batches(write_options({"stream": "s"}), iter([({"id": ["9-1"], "seq": [7], "v": ["x"]}, 1)]))
    assert len(_entries(client, "s")) == 1
    schema = StructType([StructField("sensor", StringType()), StructField("ts_ms", LongType())])
    with pytest.raises(OptionError, match=r"^column 'ts_ms' is not written as a field: .*withColumnRenamed\('ts_ms', 'event_ts_ms'\)"):
        check_schema(schema, write_options({"stream": "s"}))
    check_schema(StructType([*schema.fields, StructField("id", StringType())]), write_options({"stream": "s"}))


def test_write_errors_name_the_key_and_the_column(client):
    """Review 28 finding 5: WRONGTYPE names the key; a map column not called `fields` is named, with the fix."""
    client.execute_command("SET", "astring", "v")
    with pytest.raises(SourceError, match=r"^millrace: key 'astring' holds a string, not a stream \(option 'stream'"):
        write_batches(write_options({"stream": "astring"}), iter([({"v": ["1"]}, 1)]))
    with pytest.raises(SourceError, match=r"^millrace: column 'tags' has type map, .*rename it to 'fields' .*to_json\('tags'\)"):
        write_batches(write_options({"stream": "s"}), iter([({"tags": [[("a", "1")]]}, 1)]))
    with pytest.raises(SourceError, match=r"^millrace: column 'xs' has type array, "):
        write_batches(write_options({"stream": "s"}), iter([({"xs": [[1, 2]]}, 1)]))
    with pytest.raises(OptionError, match=r"^column 'tags' has type map<string,string>, .*withColumnRenamed\('tags', 'fields'\)"):
        check_schema(StructType([StructField("tags", MapType(StringType(), StringType()))]), write_options({"stream": "s"}))


def test_column_helpers():
    batch = pa.RecordBatch.from_pydict({"stream": ["a", "b", "c"], "v": [1, None, 3]})
    assert list(_arrow_columns(iter([batch]))) == [({"stream": ["a", "b", "c"], "v": [1, None, 3]}, 3)]
    assert [b.num_rows for b in _small(iter([batch, batch.slice(0, 1)]), 2)] == [2, 1, 1]
    assert [b.to_pydict()["stream"] for b in _small(iter([batch]), 1)] == [["a"], ["b"], ["c"]]
    R = Row("stream", "v")  # noqa: N806
    rows = [R("a", 1), R("b", 2), R("c", 3)]
    assert list(_row_columns(iter(rows), 2)) == [({"stream": ["a", "b"], "v": [1, 2]}, 2), ({"stream": ["c"], "v": [3]}, 1)]
    assert list(_row_columns(iter(rows), 3)) == [({"stream": ["a", "b", "c"], "v": [1, 2, 3]}, 3)]
    assert list(_row_columns(iter([]), 3)) == []
    assert [n for _, n in _row_columns(iter(rows), 1)] == [1, 1, 1]


def test_writers_and_check_reachable(client):
    schema = StructType([StructField("v", LongType())])
    options = write_options({"stream": "w", "writebatchsize": "2"})
    bw = BatchWriter(options, schema)
    assert len(bw.write_id) == 32 and BatchWriter(write_options({"stream": "w", "writeid": "x"}), schema).write_id == "x"
    batch = pa.RecordBatch.from_pydict({"v": [1, 2, 3]}, schema=pa.schema([("v", pa.int64())]))
    assert bw.write(iter([batch])) == WriteCount(3)
    assert client.flushes[-2:] == [2, 1]
    assert bw.write(iter([batch])) == WriteCount(3)  # the same write retried: IDMP adds nothing
    assert [e[1] for e in _entries(client, "w")] == [{b"v": b"1"}, {b"v": b"2"}, {b"v": b"3"}]
    sw = StreamWriter(options, schema)
    assert sw.commit([], 0) is None and sw.abort([], 0) is None and sw.options is options
    assert sw.write(iter([batch.slice(0, 1)])) == WriteCount(1)
    assert len(_entries(client, "w")) == 4
    closed = client.closed
    check_reachable(options)
    assert client.closed == closed + 1
