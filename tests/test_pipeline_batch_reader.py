"""pipeline/batch_reader.py in-process (no server, no Spark session): the bounds of a
read against their definition, partitions() over random streams against plan() of the
spans it should build, and read() of each partition against the model stream, with
redis-py's connection replaced by a fake whose XRANGE pages come from the model."""

from __future__ import annotations

import json
import random

import pytest
import redis

from pipeline import batch_reader
from pipeline.arrow_batches import DEFAULT_SCHEMA
from pipeline.batch_reader import BatchReader, end_upto, read_range, start_after
from pipeline.client import SourceError, StreamInfo
from pipeline.options import read_options
from pipeline.partitioning import Span, StreamRange, plan
from pipeline.stream_ids import format_id, make_id


def _info(key="s", length=0, last_generated=0, first=0, last=0):
    return StreamInfo(key, length, last_generated, length, 0, first, last)


@pytest.mark.parametrize("seed", range(2))
def test_bounds_against_their_definition(seed):
    rng = random.Random(seed)
    from pipeline.options import Position

    for _ in range(500):
        lg = rng.choice([0, 1, make_id(5, 0), make_id(5, 3), make_id(2**40, 7)])
        info = _info(last_generated=lg)
        kind = rng.choice(["earliest", "latest", "id"])
        position = Position(kind, rng.choice([0, 1, make_id(3, 2)]) if kind == "id" else 0)
        ts = rng.choice([None, None, 0, 1, 5, 2**40])
        want_after = (max(0, ts * 2**64 - 1) if ts is not None
                      else 0 if kind == "earliest" else lg if kind == "latest" else position.id)
        assert start_after(position, info, ts) == want_after
        assert end_upto(position, info) == (lg if kind == "latest" else 0 if kind == "earliest" else position.id)
    assert start_after(Position("latest"), _info(last_generated=9), 0) == 0
    assert start_after(Position("latest"), _info(last_generated=9), 1) == 2**64 - 1


class FakeClient:
    def __init__(self, streams):
        self.streams, self.closed, self.pings = streams, 0, 0

    def close(self):
        self.closed += 1


def _model(rng):
    """Streams of 0-6 entries, gaps in ms and seq, as (id, [field, value]) with bytes like XRANGE's."""
    streams = {}
    for name in rng.sample(["a", "b", "c", "d"], rng.randint(1, 4)):
        ids, ms = [], rng.randint(0, 3)
        for _ in range(rng.randint(0, 6)):
            ms += rng.choice([0, 1, 2])
            seq = (ids[-1] & (2**64 - 1)) + 1 if ids and ids[-1] >> 64 == ms else rng.randint(0, 2)
            ids.append(make_id(ms, seq))
        streams[name] = [(i, [b"f", str(i % 97).encode()]) for i in ids]
    return streams


@pytest.mark.parametrize("seed", range(4))
def test_partitions_and_reads_against_the_model(seed, monkeypatch):
    rng = random.Random(seed)
    made = []

    def connect(conn):
        assert conn is options.connection
        made.append(FakeClient(model))
        return made[-1]

    def stream_info(client, key):
        assert client is made[-1]
        entries = model[key]
        lg = entries[-1][0] + rng.choice([0, 0, 3]) if entries else rng.choice([0, make_id(1, 0)])
        return _info(key, len(entries), lg, entries[0][0] if entries else 0, entries[-1][0] if entries else 0)

    def scan_range(client, key, after, upto, count):
        assert count == options.read_count
        page = [[format_id(i).encode(), f] for i, f in model[key] if after < i <= upto]
        for start in range(0, len(page), count):
            yield page[start:start + count]

    monkeypatch.setattr(batch_reader, "connect", connect)
    def ping(client, conn):
        assert client is made[-1] and conn is options.connection
        client.pings += 1

    monkeypatch.setattr(batch_reader, "ping", ping)
    monkeypatch.setattr(batch_reader, "stream_info", stream_info)
    monkeypatch.setattr(batch_reader, "scan_range", scan_range)
    for _ in range(25):
        model = _model(rng)
        names = list(model)
        raw = {"streams": ",".join(names), "readcount": str(rng.choice([1, 2, 1000]))}
        if rng.random() < 0.2:
            raw["startingoffsets"] = "latest"
        elif rng.random() < 0.5:
            raw["startingoffsets"] = json.dumps({names[0]: format_id(rng.choice([0, make_id(2, 0), make_id(4, 1)]))})
        if rng.random() < 0.4:
            raw["endingoffsets"] = json.dumps({names[-1]: format_id(rng.choice([0, make_id(3, 0), make_id(6, 5)]))})
        if rng.random() < 0.3:
            raw["startingtimestamp"] = str(rng.choice([0, 2, 4]))
        if rng.random() < 0.7:
            raw["numpartitions"] = str(rng.randint(1, 7))
        options = read_options(raw, streaming=False)
        reader = BatchReader(options, DEFAULT_SCHEMA)
        made.clear()
        rng_state = rng.getstate()
        parts = reader.partitions()
        assert len(made) == 1 and made[0].closed == 1 and made[0].pings == 1
        # the spans it should build, with the same infos (the same random draws)
        rng.setstate(rng_state)
        spans = []
        for key in names:
            info = stream_info(made[0], key)
            after = start_after(options.starting[key], info, options.starting_timestamp)
            upto = end_upto(options.ending[key], info)
            spans.append(Span(key, after, upto, info.first_entry_id, info.last_entry_id, info.length))
        want = plan(spans, options.num_partitions) or [StreamRange("", 0, 0)]
        assert parts == want
        rows = {name: [] for name in names}
        for part in parts:
            made.clear()
            for batch in reader.read(part):
                assert batch.schema == reader.plan.arrow_schema
                for row in batch.to_pylist():
                    rows[row["stream"]].append((row["id"], row["ts_ms"], row["seq"], row["fields"]))
            live = part.stream and part.upto > part.after
            assert [c.closed for c in made] == ([1] if live else [])
        for span in spans:
            want_rows = [(format_id(i), i >> 64, i & (2**64 - 1), [("f", str(i % 97))]) for i, _ in model[span.stream]
                         if span.after < i <= span.upto]
            assert rows[span.stream] == want_rows


def test_read_skips_empty_and_foreign_partitions(monkeypatch):
    monkeypatch.setattr(batch_reader, "connect", lambda conn: pytest.fail("connected for an empty partition"))
    reader = BatchReader(read_options({"streams": "s"}, streaming=False), DEFAULT_SCHEMA)
    assert list(reader.read(StreamRange("s", 5, 5))) == []
    assert list(reader.read(StreamRange("s", 6, 5))) == []
    assert list(reader.read(object())) == []


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (redis.ConnectionError("gone"), "millrace: lost the server at redis://127.0.0.1:6379/0 while reading 's': gone"),
        (redis.ResponseError("WRONGTYPE Operation against a key"), "millrace: key 's' no longer holds a stream (option 'streams')"),
    ],
)
def test_read_range_errors(exc, message, monkeypatch):
    clients = []
    monkeypatch.setattr(batch_reader, "connect", lambda conn: clients.append(FakeClient({})) or clients[-1])

    def scan_range(client, key, after, upto, count):
        yield [[b"1-1", [b"f", b"v"]]]
        raise exc

    monkeypatch.setattr(batch_reader, "scan_range", scan_range)
    options = read_options({"streams": "s"}, streaming=False)
    with pytest.raises(SourceError) as excinfo:
        list(read_range(options, BatchReader(options, DEFAULT_SCHEMA).plan, StreamRange("s", 0, 5)))
    assert str(excinfo.value) == message
    assert clients[0].closed == 1
    other = redis.ResponseError("ERR something else")

    def failing(client, key, after, upto, count):
        raise other
        yield

    monkeypatch.setattr(batch_reader, "scan_range", failing)
    with pytest.raises(redis.ResponseError) as excinfo:
        list(read_range(options, BatchReader(options, DEFAULT_SCHEMA).plan, StreamRange("s", 0, 5)))
    assert excinfo.value is other and clients[1].closed == 1
