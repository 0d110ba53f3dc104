"""Spark planning and budgeting (pipeline/partitioning.py, the per-trigger limit of
pipeline/stream_reader.py) against a brute-force model, without a Spark session.

The model is the obvious one: a read of `(after, upto]` must return exactly the
live entries in that range, each once, in ID order; a micro-batch under
maxRecordsPerTrigger=n must hold at most n entries; a streaming query must
in the end have read every entry once. Streams have 0-5 entries, gaps in
their IDs (milliseconds and sequence numbers), heads trimmed away and entries
deleted, and the ranges start and end on, between and beyond entries.

The streaming half drives the real StreamReader against a real server: its
offsets, its limit and its partitions, with the rows each partition names
read by XRANGE, as an executor would.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspark")

from pipeline.arrow_batches import DEFAULT_SCHEMA  # noqa: E402
from pipeline.options import read_options  # noqa: E402
from pipeline.partitioning import Span, StreamRange, cut, plan, share_out  # noqa: E402
from pipeline.stream_ids import MAX_ID, format_id, make_id, parse_id  # noqa: E402
from pipeline.stream_reader import ReadAllAvailable, ReadMaxRows, StreamReader  # noqa: E402

# -- the pure planning functions ---------------------------------------------------------


@st.composite
def stream_ids(draw, max_entries: int = 5) -> list[int]:
    """Up to 5 increasing IDs, with gaps in ms and in seq."""
    ids, ms, seq = [], draw(st.integers(1, 3)), 0
    for _ in range(draw(st.integers(0, max_entries))):
        if draw(st.booleans()):
            ms += draw(st.integers(1, 3))
            seq = draw(st.integers(0, 2))
        else:
            seq += draw(st.integers(1, 2))
        ids.append(make_id(ms, seq))
    return ids


def near(draw, ids: list[int]) -> int:
    """A bound on, just before, just after an entry, or at either end of the ID space."""
    choices = [0, MAX_ID] + [i + d for i in ids for d in (-1, 0, 1)]
    return draw(st.sampled_from(sorted(set(choices))))


@st.composite
def streams(draw) -> list[tuple[list[int], list[int], int, int]]:
    """Streams as (ever added, live, after, upto): some of the head trimmed, some entries deleted."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        ever = draw(stream_ids())
        trimmed = draw(st.integers(0, len(ever)))
        live = [i for i in ever[trimmed:] if not draw(st.booleans()) or not draw(st.booleans())]  # ~1/4 deleted
        out.append((ever, live, near(draw, ever), near(draw, ever)))
    return out


def read(parts: list[StreamRange], name: str, live: list[int]) -> list[int]:
    """What the executors read: each partition's live entries, partitions in plan order."""
    return [i for p in parts if p.stream == name for i in live if p.after < i <= p.upto]


@settings(max_examples=600, deadline=None)
@given(streams(), st.one_of(st.none(), st.integers(1, 12)))
def test_plan_reads_every_entry_once_in_order(specs, num_partitions):
    spans = []
    for k, (_ever, live, after, upto) in enumerate(specs):
        first, last = (live[0], live[-1]) if live else (0, 0)
        spans.append(Span(f"s{k}", after, upto, first, last, len(live)))
    parts = plan(spans, num_partitions)
    for k, (_ever, live, after, upto) in enumerate(specs):
        name = f"s{k}"
        wanted = [i for i in live if after < i <= upto]
        assert read(parts, name, live) == wanted
        mine = [p for p in parts if p.stream == name]
        for a, b in zip(mine, mine[1:], strict=False):
            assert a.upto <= b.after  # disjoint and in order: nothing read twice
        assert all(p.after < p.upto for p in mine)
        if wanted:
            assert mine
    assert len(parts) <= max(num_partitions or 0, len(specs))  # numPartitions, or one per stream when more


def test_plan_single_entry_stream():
    """A one-character change in the `first_id - 1` bound read a one-entry stream back as nothing."""
    entry = make_id(1_700_000_000_000, 0)
    for after in (0, entry - 1):
        parts = plan([Span("s", after, entry, entry, entry, 1)], None)
        assert [(p.after < entry <= p.upto) for p in parts] == [True]
    assert plan([Span("s", entry, entry, entry, entry, 1)], 4) == []


def test_plan_gives_a_stream_with_nothing_in_range_no_partition_share():
    """numPartitions all go to the stream with entries in range: one whose range ends before its first
    entry, or starts after its last, takes no share."""
    first, last = make_id(10, 0), make_id(20, 0)
    idle = [Span("early", 0, first - 1, first, last, 50), Span("late", last, MAX_ID, first, last, 50)]
    busy = Span("busy", 0, make_id(40, 0), make_id(30, 0), make_id(40, 0), 5)
    parts = plan([*idle, busy], 4)
    assert [p.stream for p in parts] == ["busy"] * 4


def test_share_out_examples():
    assert share_out(4, [1, 0]) == [3, 1]  # a zero weight still gets its one partition
    assert share_out(4, [0, 0]) == [2, 2]
    assert share_out(2, [5, 5, 5]) == [1, 1, 1]  # at least one each, even above the total
    assert share_out(10, [7, 2, 1]) == [7, 2, 1]
    assert share_out(3, [1, 1]) in ([2, 1], [1, 2])


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 40), st.lists(st.integers(0, 50), min_size=1, max_size=8))
def test_share_out(total, weights):
    shares = share_out(total, weights)
    assert len(shares) == len(weights)
    assert sum(shares) == max(total, len(weights))
    assert min(shares) >= 1
    if sum(weights) > 0 and total >= len(weights):
        # largest remainders: each share is its exact part rounded down or up, once the 1s are given
        whole = sum(weights)
        for share, weight in zip(shares, weights, strict=True):
            exact = total * weight / whole
            assert share <= max(1, int(exact) + 1)


@settings(max_examples=400, deadline=None)
@given(stream_ids(), st.integers(1, 9), st.data())
def test_cut_covers_the_span_exactly(ids, parts, data):
    after, upto = near(data.draw, ids), near(data.draw, ids)
    first, last = (ids[0], ids[-1]) if ids else (0, 0)
    ranges = cut(Span("s", after, upto, first, last, len(ids)), parts)
    inside = [i for i in ids if after < i <= upto]
    assert read(ranges, "s", ids) == inside
    assert len(ranges) <= parts
    if inside:
        assert ranges[0].after == after and ranges[-1].upto == upto
        assert all(a.upto == b.after for a, b in zip(ranges, ranges[1:], strict=False))
    # no wasted task: every range holds some of the ID space between the first and the last entry
    for r in ranges:
        assert max(r.after, first - 1) < min(r.upto, last)


# -- the per-trigger limit, through the real StreamReader and a real server -------------------


@pytest.fixture(scope="module")
def db(server):
    client = server.client(protocol=2, decode_responses=True)
    yield client
    client.close()


def _load(db, specs) -> dict[str, list[int]]:
    """Create the streams on the server: every ID added, the head trimmed, some deleted."""
    db.flushall()
    live_of = {}
    for k, (ever, live, _after, _upto) in enumerate(specs):
        name = f"s{k}"
        db.xgroup_create(name, "made", id="$", mkstream=True)  # the stream exists even with no entries
        for i in ever:
            db.xadd(name, {"n": format_id(i)}, id=format_id(i))
        trimmed = [i for i in ever if i not in live and (not live or i < live[0])]
        if trimmed:
            db.execute_command("XTRIM", name, "MINID", format_id(trimmed[-1] + 1))
        gone = [i for i in ever if i not in live and i not in trimmed]
        if gone:
            db.xdel(name, *map(format_id, gone))
        live_of[name] = live
    return live_of


def _reader(port: int, names: list[str], limit: int | None, num_partitions: int | None, **more) -> StreamReader:
    options = {"streams": ",".join(names), "port": port, "startingOffsets": "earliest", "failOnDataLoss": "false", **more}
    if limit:
        options["maxRecordsPerTrigger"] = limit
    if num_partitions:
        options["numPartitions"] = num_partitions
    return StreamReader(read_options(options, streaming=True), DEFAULT_SCHEMA)


def _run(db, reader: StreamReader, limit: int | None, grow=None, start=None) -> tuple[dict[str, list[int]], list[int]]:
    """Micro-batches until the offsets stop: the IDs read per stream, and each batch's size."""
    got: dict[str, list[int]] = {name: [] for name in reader.options.streams}
    sizes = []
    start = start or reader.initialOffset()
    for batch in range(100):
        end = reader.latestOffset(start, ReadMaxRows(limit) if limit else ReadAllAvailable())
        parts = reader.partitions(start, end) if end != start else []
        rows = 0
        for part in parts:
            for entry_id, _fields in db.xrange(part.stream, "(" + format_id(part.after) if part.after else "-", format_id(part.upto)):
                got[part.stream].append(parse_id(entry_id))
                rows += 1
        if end == start:
            assert rows == 0
            if grow is None or not grow(batch):
                break
            continue
        sizes.append(rows)
        reader.commit(end)
        start = end
        if grow is not None:
            grow(batch)
    else:
        raise AssertionError("the query never caught up")
    reader.stop()
    return got, sizes


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(streams(), st.integers(1, 7), st.one_of(st.none(), st.integers(1, 6)))
def test_streaming_limit_reads_everything_once_no_batch_above_it(server, db, specs, limit, num_partitions):
    live_of = _load(db, specs)
    reader = _reader(server.port, list(live_of), limit, num_partitions)
    got, sizes = _run(db, reader, limit)
    assert got == live_of  # every live entry once, in order, per stream
    assert all(size <= limit for size in sizes)  # a batch may only move past deleted entries
    total = sum(map(len, live_of.values()))
    assert len(sizes) >= -(-total // limit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 3))
def test_streaming_limit_with_entries_arriving(server, db, nstreams, limit, per_batch):
    """Entries added between micro-batches are read once too, and batches stay within the limit."""
    db.flushall()
    names = [f"s{k}" for k in range(nstreams)]
    added = {name: [] for name in names}
    for name in names:
        added[name].append(parse_id(db.xadd(name, {"n": 0})))

    def grow(batch: int) -> bool:
        if batch >= 5:
            return False
        for name in names[:per_batch]:
            added[name].append(parse_id(db.xadd(name, {"n": batch})))
        return per_batch > 0

    got, sizes = _run(db, _reader(server.port, names, limit, None), limit, grow)
    assert got == added
    assert all(0 < size <= limit for size in sizes)


def test_one_record_per_trigger_delivers_all_six(server, db):
    """maxRecordsPerTrigger=1 over six entries: six batches of one, none lost while the offsets move on."""
    db.flushall()
    ids = [parse_id(db.xadd("s", {"n": n}, id=f"{n}-0")) for n in range(1, 7)]
    got, sizes = _run(db, _reader(server.port, ["s"], 1, None), 1)
    assert got == {"s": ids} and sizes == [1] * 6


def test_limit_shared_by_the_streams(server, db):
    """A budget equal to the number of streams gives each one entry, as the backlogs are equal."""
    db.flushall()
    names = ["a", "b", "c"]
    ids = {name: [parse_id(db.xadd(name, {"n": n})) for n in range(4)] for name in names}
    reader = _reader(server.port, names, 3, None)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(3))
    assert {name: end[name]["id"] for name in names} == {name: format_id(ids[name][0]) for name in names}
    reader.stop()


@pytest.mark.parametrize("limit", [1, 2])
def test_limit_below_the_number_of_streams(server, db, limit):
    """Three streams and a budget of 1 or 2: no batch holds more than the budget."""
    db.flushall()
    names = ["a", "b", "c"]
    ids = {name: [parse_id(db.xadd(name, {"n": n})) for n in range(2)] for name in names}
    got, sizes = _run(db, _reader(server.port, names, limit, None), limit)
    assert got == ids
    assert all(0 < size <= limit for size in sizes) and sum(sizes) == 6


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(streams(), st.integers(1, 4))
def test_group_follows_the_committed_offsets(server, db, specs, limit):
    """With option `group`, each commit moves the group to the batch's end: XINFO GROUPS shows the
    last committed ID, its entries-read when the offset knows it, and the lag Redis derives from that."""
    live_of = _load(db, specs)
    names = list(live_of)
    db.xgroup_create(names[0], "spark", id="0")  # already there: BUSYGROUP is no error
    reader = _reader(server.port, names, limit, None, group="spark")
    start = reader.initialOffset()
    assert all(r["lag"] == -1 for r in reader.reportLatestOffset().values())  # no batch planned yet
    for name in names[1:]:  # names[0]'s group was there already (BUSYGROUP): the first commit moves it
        group = next(g for g in db.xinfo_groups(name) if g["name"] == "spark")
        assert group["last-delivered-id"] == start[name]["id"]  # `earliest`: just before the first entry still there
        if start[name]["entries_read"] >= 0:  # created with ENTRIESREAD, not an unknown counter
            assert group["entries-read"] == start[name]["entries_read"]
    for _ in range(100):
        end = reader.latestOffset(start, ReadMaxRows(limit))
        if end == start:
            break
        reader.commit(end)
        for name in names:
            group = next(g for g in db.xinfo_groups(name) if g["name"] == "spark")
            assert group["last-delivered-id"] == end[name]["id"]
            if end[name]["entries_read"] >= 0:
                assert group["entries-read"] == end[name]["entries_read"]
        report = reader.reportLatestOffset()
        for name in names:
            info = db.xinfo_stream(name)
            exact = len(db.xrange(name, "(" + end[name]["id"], "+")) if end[name]["id"] != "18446744073709551615-18446744073709551615" else 0
            assert report[name] == {"id": info["last-generated-id"], "entries_added": info["entries-added"], "lag": exact,  # XCOUNT
                                    "group_lag": exact}  # Millrace's XGROUPLAG: the live entries after the committed batch
        start = end
    for name in names:  # read to the end: nothing left for the group
        assert next(g for g in db.xinfo_groups(name) if g["name"] == "spark")["lag"] in (0, None)
    reader.stop()


def test_group_created_on_commit_if_gone(server, db):
    """A group destroyed under a running query is created again at the committed offset."""
    db.flushall()
    ids = [db.xadd("s", {"n": n}) for n in range(3)]
    reader = _reader(server.port, ["s"], 2, None, group="spark")
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(2))
    db.xgroup_destroy("s", "spark")
    reader.commit(end)
    group = db.xinfo_groups("s")[0]
    assert (group["name"], group["last-delivered-id"], group["entries-read"], group["lag"]) == ("spark", ids[1], 2, 1)
    reader.stop()


@pytest.mark.parametrize("num_partitions, expected", [(None, 1), (1, 1), (4, 4)])
def test_streaming_partitions_follow_num_partitions(server, db, num_partitions, expected):
    db.flushall()
    for n in range(1, 11):
        db.xadd("s", {"n": n}, id=f"{n}-0")
    reader = _reader(server.port, ["s"], None, num_partitions)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    parts = reader.partitions(start, end)
    assert len(parts) == expected
    assert (parts[0].after, parts[-1].upto) == (0, make_id(10, 0))
    reader.stop()


@pytest.mark.parametrize(
    "options, first_read, offset",
    [
        ({"startingOffsets": "latest"}, None, ("6-0", 6)),
        ({"startingOffsets": '{"s": "3-0"}'}, 3, ("3-0", -1)),
        ({"startingOffsets": '{"s": "6-0"}'}, None, ("6-0", 6)),  # at the tail: the counter is known
        ({"startingOffsets": '{"s": "earliest"}', "startingTimestamp": "3"}, 2, ("2-18446744073709551615", -1)),
        ({"startingOffsets": "latest", "startingTimestamp": "3"}, 2, ("2-18446744073709551615", -1)),  # the time wins
        ({"startingOffsets": "earliest"}, 0, ("0-0", 0)),
    ],
)
def test_starting_positions(server, db, options, first_read, offset):
    """Where a query starts: its first offset, then every entry after it read once (two added later too)."""
    db.flushall()
    ids = [parse_id(db.xadd("s", {"n": n}, id=f"{n}-0")) for n in range(1, 7)]
    reader = StreamReader(read_options({"streams": "s", "port": server.port, **options}, streaming=True), DEFAULT_SCHEMA)
    start = reader.initialOffset()
    assert (start["s"]["id"], start["s"]["entries_read"]) == offset
    later = [parse_id(db.xadd("s", {"n": n}, id=f"{n}-0")) for n in (7, 8)]
    first = reader.latestOffset(start, ReadMaxRows(1))  # one entry on: its counter, or still unknown
    read = start["s"]["entries_read"]
    assert first["s"]["entries_read"] == (read + 1 if read >= 0 else -1)
    got, sizes = _run(db, reader, 3, start=start)
    assert got == {"s": (ids[first_read:] if first_read is not None else []) + later}
    assert all(size <= 3 for size in sizes)


def test_data_loss_fails_or_is_skipped_with_exact_counters(server, db):
    """Entries trimmed before the query read them: failOnDataLoss (the default) names how many; with
    it off the query skips them and its offsets still count exactly what was added."""
    from pipeline.client import SourceError

    db.flushall()
    for n in range(1, 7):
        db.xadd("s", {"n": n}, id=f"{n}-0")
    strict = StreamReader(read_options({"streams": "s", "port": server.port, "startingOffsets": "earliest"}, streaming=True), DEFAULT_SCHEMA)
    start = strict.initialOffset()
    end = strict.latestOffset(start, ReadMaxRows(2))
    assert (end["s"]["id"], end["s"]["entries_read"]) == ("2-0", 2)
    db.execute_command("XTRIM", "s", "MAXLEN", 3)  # 3-0 goes unread: one entry is a loss too
    with pytest.raises(SourceError, match=r"^millrace: 1 entries of stream 's' after ID 2-0 were removed"):
        strict.latestOffset(end, ReadMaxRows(2))
    db.execute_command("XTRIM", "s", "MAXLEN", 2)  # 3-0 and 4-0 go unread
    message = (
        "millrace: 2 entries of stream 's' after ID 2-0 were removed (trimmed or deleted) before this query read them; "
        "set option 'failOnDataLoss' to false to skip them"
    )
    with pytest.raises(SourceError, match="^" + re.escape(message) + "$"):
        strict.latestOffset(end, ReadMaxRows(2))
    strict.stop()
    lenient = _reader(server.port, ["s"], 2, None)
    after = lenient.latestOffset(end, ReadMaxRows(2))
    assert (after["s"]["id"], after["s"]["entries_read"]) == ("6-0", 6)
    assert lenient.reportLatestOffset() == {"s": {"id": "6-0", "entries_added": 6, "lag": 0}}
    got, _sizes = _run(db, lenient, 2, start=end)
    assert got == {"s": [make_id(5, 0), make_id(6, 0)]}


def test_reader_limits_pickling_and_available_now(server, db):
    """The default read limit follows maxRecordsPerTrigger; a reader pickles without its connection
    (Spark ships it to executors); Trigger.AvailableNow stops at the tail seen when it was prepared;
    read() turns a partition into Arrow rows."""
    import pickle

    db.flushall()
    for n in range(1, 4):
        db.xadd("s", {"n": n}, id=f"{n}-0")
    assert _reader(server.port, ["s"], 5, None).getDefaultReadLimit().max_rows == 5
    assert isinstance(_reader(server.port, ["s"], None, None).getDefaultReadLimit(), ReadAllAvailable)
    reader = _reader(server.port, ["s"], None, None)
    start = reader.initialOffset()  # connects
    state = reader.__getstate__()
    assert state["_client"] is None and reader._client is not None
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._client is None and copy.options == reader.options
    reader.prepareForTriggerAvailableNow()
    db.xadd("s", {"n": 4}, id="4-0")
    end = reader.latestOffset(start, ReadAllAvailable())
    assert (end["s"]["id"], end["s"]["entries_read"]) == ("3-0", 3)
    [part] = reader.partitions(start, end)
    rows = [row for batch in copy.read(part) for row in batch.to_pylist()]
    assert [(row["stream"], row["id"]) for row in rows] == [("s", "1-0"), ("s", "2-0"), ("s", "3-0")]
    reader.stop()


def test_explicit_start_before_a_trimmed_head_is_no_loss(server, db):
    """A start at an ID has no counter: entries trimmed before it cannot be told lost, the query reads on."""
    db.flushall()
    for n in range(1, 7):
        db.xadd("s", {"n": n}, id=f"{n}-0")
    db.execute_command("XTRIM", "s", "MAXLEN", 2)
    reader = StreamReader(read_options({"streams": "s", "port": server.port, "startingOffsets": '{"s": "1-0"}'}, streaming=True), DEFAULT_SCHEMA)
    got, _sizes = _run(db, reader, 1)
    assert got == {"s": [make_id(5, 0), make_id(6, 0)]}


def test_latest_offset_without_a_start_and_stop(server, db):
    """PySpark before 4.2 asks latestOffset() with no start: the tails, with their counters. stop() closes
    the connection; the next call opens a new one."""
    db.flushall()
    db.xadd("a", {"n": 1}, id="1-0")
    db.xadd("b", {"n": 1}, id="2-0")
    db.xadd("b", {"n": 2}, id="3-0")
    reader = _reader(server.port, ["a", "b"], None, None)
    assert reader.latestOffset() == {"a": {"id": "1-0", "entries_read": 1}, "b": {"id": "3-0", "entries_read": 2}}
    assert reader.reportLatestOffset()["b"] == {"id": "3-0", "entries_added": 2, "lag": 0}
    reader.stop()
    assert reader._client is None
    assert reader.latestOffset()["a"] == {"id": "1-0", "entries_read": 1}
    assert reader._client is not None
    reader.stop()
