"""The Spark source's progress `lag` without option `group` (pipeline/stream_reader.py, issue 23).

The source tracks its own position (the last planned batch's end ID and its
entries-read). Its old lag, entries-added minus that entries-read, counts
entries deleted or trimmed after the position, and is unknown (-1) when the
position's entries-read is. On Millrace the lag is `XCOUNT key (end-id +`:
the live entries still to read, exactly. The tests drive the real
StreamReader (no Spark session: its reportLatestOffset is what a query's
progress shows as `latestOffset`) against a real server, with deletions,
and check the lag against len(XRANGE) after the position, and that the old
formula would have been wrong there. Against Redis 8.2.3 (no XCOUNT) the
source falls back to the old formula.
"""

from __future__ import annotations

import random

import pytest

pytest.importorskip("pyspark")

from pipeline.arrow_batches import DEFAULT_SCHEMA  # noqa: E402
from pipeline.options import read_options  # noqa: E402
from pipeline.stream_ids import MAX_ID, format_id, parse_id  # noqa: E402
from pipeline.stream_reader import ReadMaxRows, StreamReader  # noqa: E402


def reader_for(port: int, *names: str, **more) -> StreamReader:
    options = {"streams": ",".join(names), "port": port, "startingOffsets": "earliest", "failOnDataLoss": "false", **more}
    return StreamReader(read_options(options, streaming=True), DEFAULT_SCHEMA)


def live_after(db, key: str, position: dict) -> int:
    """The brute force: the live entries XRANGE returns after the position."""
    after = parse_id(position["id"])
    return 0 if after == MAX_ID else len(db.xrange(key, "(" + position["id"], "+"))


def old_lag(db, key: str, position: dict) -> int:
    """What the source reported before XCOUNT: entries-added minus the position's entries-read."""
    read = position["entries_read"]
    return db.xinfo_stream(key)["entries-added"] - read if read >= 0 else -1


@pytest.fixture
def db(server):
    client = server.client(protocol=2, decode_responses=True)
    client.flushall()
    yield client
    client.close()


def test_lag_counts_live_entries_after_deletions(server, db):
    ids = [db.xadd("events", {"n": n}) for n in range(10)]
    reader = reader_for(server.port, "events")
    start = reader.initialOffset()
    assert reader.reportLatestOffset()["events"]["lag"] == -1  # no batch planned yet: no position
    end = reader.latestOffset(start, ReadMaxRows(4))
    assert end["events"] == {"id": ids[3], "entries_read": 4}
    db.xdel("events", ids[5], ids[7])  # two unread entries deleted
    db.xadd("events", {"n": 10})
    db.xdel("events", ids[1])  # a read one: counted by neither
    lag = reader.reportLatestOffset()["events"]["lag"]
    assert lag == live_after(db, "events", end["events"]) == 10 - 4 - 2 + 1
    assert old_lag(db, "events", end["events"]) == 11 - 4  # the old formula counts the two deleted entries
    # a trim after the position removes unread entries: they are no lag either
    db.xtrim("events", minid=ids[7], approximate=False)
    assert reader.reportLatestOffset()["events"]["lag"] == live_after(db, "events", end["events"]) == 3
    reader.stop()


def test_lag_is_known_where_entries_read_is_not(server, db):
    """Started after deletions, the position's entries-read is unknown (-1): the old lag was -1 for ever."""
    ids = [db.xadd("events", {"n": n}) for n in range(8)]
    db.xdel("events", ids[0], ids[4])
    reader = reader_for(server.port, "events")
    start = reader.initialOffset()
    assert start["events"]["entries_read"] == -1  # `earliest` behind a deleted entry
    end = reader.latestOffset(start, ReadMaxRows(2))
    assert end["events"]["entries_read"] == -1 and old_lag(db, "events", end["events"]) == -1
    assert reader.reportLatestOffset()["events"]["lag"] == live_after(db, "events", end["events"]) == 4
    reader.stop()


@pytest.mark.parametrize("seed", range(4))
def test_lag_against_brute_force_over_random_workloads(server, db, seed):
    """Batches of random size between random adds, deletes and trims, on two streams: each report's lag is
    the live entries after the planned position; the old formula differs somewhere (it counts deletions)."""
    rng = random.Random(seed)
    names = ("a", "b")
    for name in names:
        db.xgroup_create(name, "other", id="$", mkstream=True)
    reader = reader_for(server.port, *names)
    start = reader.initialOffset()
    wrong_before = 0
    for _ in range(60):
        for name in names:
            for _ in range(rng.randint(0, 4)):
                db.xadd(name, {"n": rng.randint(0, 9)})
            live = [entry_id for entry_id, _ in db.xrange(name)]
            if live and rng.random() < 0.5:
                db.xdel(name, *rng.sample(live, rng.randint(1, min(3, len(live)))))
            if live and rng.random() < 0.1:
                db.xtrim(name, maxlen=rng.randint(0, len(live)), approximate=False)
        end = reader.latestOffset(start, ReadMaxRows(rng.randint(1, 6)))
        report = reader.reportLatestOffset()
        for name in names:
            exact = live_after(db, name, end[name])
            assert report[name]["lag"] == exact
            wrong_before += old_lag(db, name, end[name]) != exact
        start = end
    assert wrong_before > 0
    reader.stop()


def test_redis_without_xcount_keeps_the_old_formula(oracle_server):
    """Redis has no XCOUNT: the source asks once, then reports entries-added minus entries-read."""
    db = oracle_server.client(protocol=2, decode_responses=True)
    db.flushall()
    try:
        ids = [db.xadd("events", {"n": n}) for n in range(6)]
        reader = reader_for(oracle_server.port, "events")
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadMaxRows(2))
        db.xdel("events", ids[4])
        assert reader.reportLatestOffset()["events"]["lag"] == old_lag(db, "events", end["events"]) == 4
        assert reader._has_xcount is False
        assert format_id(parse_id(end["events"]["id"])) == ids[1]
        reader.stop()
    finally:
        db.close()
