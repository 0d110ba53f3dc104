"""The behaviours a mutation spot-check found unguarded (issue 27), one test each.

Each test here failed under a one-line change that the rest of the suite let
pass: the mutation is named in the test's docstring. Most talk to the real
server process; the min-idle equalities run an in-process Server whose clock
the test sets, since an idle time equal to min-idle-time cannot be arranged
with sleeps.
"""

from __future__ import annotations

import time

import pytest
import redis

import server.commands  # noqa: F401  (registers the command table)
from server.client import Client
from server.server import Server
from tests.rawclient import InputCounter, RawConn


@pytest.fixture
def c(server):
    client = server.client(protocol=2, decode_responses=True)
    client.flushall()
    yield client
    client.close()


def _group(client: redis.Redis, key: str, name: str) -> dict:
    return next(g for g in client.xinfo_groups(key) if g["name"] == name)


# -- 1. approximate trimming with LIMIT ---------------------------------------------


def test_approx_trim_limit_equal_to_removable_nodes(c):
    """`if limit and deleted + entries > limit` -> `>=` removed nothing (LIMIT equal to the head nodes' entries)."""
    for i in range(1, 201):
        c.xadd("s", {"f": i}, id=f"{i}-0")  # two full nodes of 100 (stream-node-max-entries)
    assert c.execute_command("XTRIM", "s", "MAXLEN", "~", 0, "LIMIT", 100) == 100
    assert c.xlen("s") == 100
    assert c.xrange("s", count=1)[0][0] == "101-0"
    assert c.execute_command("XTRIM", "s", "MAXLEN", "~", 0, "LIMIT", 99) == 0  # a node goes whole or not at all
    assert c.execute_command("XTRIM", "s", "MAXLEN", "~", 0, "LIMIT", 100) == 100
    assert c.xlen("s") == 0


def test_approx_trim_limit_equal_with_minid(c):
    for i in range(1, 201):
        c.xadd("s", {"f": i}, id=f"{i}-0")
    assert c.execute_command("XTRIM", "s", "MINID", "~", 201, "LIMIT", 200) == 200
    assert c.xlen("s") == 0


# -- 2. lag when the group's own last ID is the deleted entry --------------------------


def test_lag_when_the_last_delivered_entry_is_deleted(c):
    """The tombstone at the group's own last ID is not ahead of it: lag 0 (a `<=` in the estimate made it nil)."""
    for i in (1, 2, 3):
        c.xadd("s", {"f": i}, id=f"{i}-0")
    c.xgroup_create("s", "g", id="0")
    assert len(c.xreadgroup("g", "alice", {"s": ">"})[0][1]) == 3
    assert c.xdel("s", "3-0") == 1
    group = _group(c, "s", "g")
    assert (group["entries-read"], group["lag"]) == (3, 0)
    # A tombstone before the group's last ID is not ahead of it either.
    assert c.xdel("s", "1-0") == 1
    assert _group(c, "s", "g")["lag"] == 0


# -- 3. a group behind a trimmed head, through XREADGROUP's bulk path ---------------


@pytest.mark.parametrize("count,expected", [(1, (4, 1)), (2, (5, 0))])
def test_group_behind_trimmed_head_reads_in_bulk(c, count, expected):
    """advance_many without `last_id >= stream.first_id` counted on from the stale counter: 7.0's 2 / 3."""
    for i in range(1, 6):
        c.xadd("s", {"f": i}, id=f"{i}-0")
    c.xgroup_create("s", "g", id="0")
    c.xreadgroup("g", "alice", {"s": ">"}, count=1)
    assert (_group(c, "s", "g")["entries-read"], _group(c, "s", "g")["lag"]) == (1, 4)
    assert c.execute_command("XTRIM", "s", "MAXLEN", 2) == 3  # 1-0 .. 3-0 go: the group is now behind the first entry
    assert _group(c, "s", "g")["lag"] == 2
    got = c.xreadgroup("g", "alice", {"s": ">"}, count=count)[0][1]
    assert [entry_id for entry_id, _ in got] == ["4-0", "5-0"][:count]
    group = _group(c, "s", "g")
    assert (group["entries-read"], group["lag"]) == expected


# -- 4. and 5. idle time equal to min-idle-time (an injected clock) ---------------------


class Clocked:
    """An in-process server whose clock the test moves."""

    def __init__(self) -> None:
        self.server = Server()
        self.server.now = 1_700_000_000_000
        self.client = Client(self.server)

    def __call__(self, *argv):
        return self.server.execute(self.client, [a if isinstance(a, bytes) else str(a).encode() for a in argv])

    def delivered(self, idle_after: int) -> None:
        """Entries 1-0 and 2-0 delivered to alice, then the clock moved on by idle_after ms."""
        self("XADD", "s", "1-0", "f", "v")
        self("XADD", "s", "2-0", "f", "v")
        self("XGROUP", "CREATE", "s", "g", "0")
        self("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
        self.server.now += idle_after


def test_xautoclaim_claims_at_exactly_min_idle():
    """`now - delivery_time < min_idle` -> `<=` left an entry idle for exactly min-idle-time unclaimed."""
    box = Clocked()
    box.delivered(5000)
    assert box("XAUTOCLAIM", "s", "g", "bob", 5001, "0", "JUSTID") == [b"0-0", [], []]
    assert box("XAUTOCLAIM", "s", "g", "bob", 5000, "0", "JUSTID") == [b"0-0", [b"1-0", b"2-0"], []]
    assert [row[1] for row in box("XPENDING", "s", "g", "-", "+", 10)] == [b"bob", b"bob"]


def test_xpending_idle_filter_includes_exactly_min_idle():
    """XPENDING's IDLE filter `idle < min_idle` -> `<=` dropped entries idle for exactly that long."""
    box = Clocked()
    box.delivered(5000)
    assert box("XPENDING", "s", "g", "IDLE", 5001, "-", "+", 10) == []
    assert box("XPENDING", "s", "g", "IDLE", 5000, "-", "+", 10) == [[b"1-0", b"alice", 5000, 1], [b"2-0", b"alice", 5000, 1]]
    assert box("XPENDING", "s", "g", "IDLE", 5000, "-", "+", 10, "alice") == [[b"1-0", b"alice", 5000, 1], [b"2-0", b"alice", 5000, 1]]


def test_xclaim_claims_at_exactly_min_idle():
    box = Clocked()
    box.delivered(5000)
    assert box("XCLAIM", "s", "g", "bob", 5001, "1-0", "JUSTID") == []
    assert box("XCLAIM", "s", "g", "bob", 5000, "1-0", "2-0", "JUSTID") == [b"1-0", b"2-0"]


def test_min_idle_equality_on_the_real_server(server, c):
    """The same boundary over the wire: in one MULTI every command sees the same clock, so an
    entry given IDLE 5000 by XCLAIM is idle for exactly 5000 ms to the next commands."""
    c.xadd("s", {"f": 1}, id="1-0")
    c.xgroup_create("s", "g", id="0")
    c.xreadgroup("g", "alice", {"s": ">"})
    conn = RawConn(server.port)
    assert conn.call("MULTI") == b"OK"
    conn.call("XCLAIM", "s", "g", "alice", 0, "1-0", "IDLE", 5000, "JUSTID")
    conn.call("XPENDING", "s", "g", "IDLE", 5000, "-", "+", 10)
    conn.call("XAUTOCLAIM", "s", "g", "bob", 5000, "0", "JUSTID")
    claimed, pending, autoclaimed = conn.call("EXEC")
    conn.close()
    assert claimed == [b"1-0"]
    assert pending == [[b"1-0", b"alice", 5000, 1]]
    assert autoclaimed == [b"0-0", [b"1-0"], []]


# -- 6. a blocked XREAD $ whose stream is replaced by one with the same entries-added ---


def _wait_blocked_clients(admin: redis.Redis, n: int) -> None:
    deadline = time.monotonic() + 10
    while admin.info("clients")["blocked_clients"] != n:
        assert time.monotonic() < deadline, f"expected {n} blocked clients"
        time.sleep(0.01)


def _blocked_xread_served(server, c, replace) -> list:
    c.xadd("s", {"f": "old"}, id="1-0")
    reader = RawConn(server.port)
    reader.send(b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$5\r\n20000\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n")
    _wait_blocked_clients(c, 1)
    replace()
    try:
        reader.sock.settimeout(5)  # served at once; a missed wake-up would wait the 20 s
        return reader.read()
    finally:
        reader.close()


def test_blocked_xread_dollar_served_when_renamed_onto(server, c):
    """Comparing only entries-added (not the stream object) missed a same-sized stream moved in."""

    def replace():
        c.xadd("t", {"f": "new"}, id="5-0")  # entries-added 1, as s has
        c.rename("t", "s")

    assert _blocked_xread_served(server, c, replace) == [[b"s", [[b"5-0", [b"f", b"new"]]]]]


def test_blocked_xread_dollar_served_when_recreated_in_multi(server, c):
    def replace():
        pipe = c.pipeline(transaction=True)
        pipe.delete("s")
        pipe.xadd("s", {"f": "new"}, id="5-0")
        pipe.execute()

    assert _blocked_xread_served(server, c, replace) == [[b"s", [[b"5-0", [b"f", b"new"]]]]]


# -- 7. the pre-AUTH 10-argument limit when the header comes in a read of its own -------


@pytest.fixture
def secured(server):
    admin = server.client(protocol=2)
    admin.config_set("requirepass", "s3cret")
    yield server
    admin.config_set("requirepass", "")
    admin.close()


def test_unauthenticated_multibulk_header_alone(secured):
    """The `*11` header, sent alone, is refused before any argument arrives (the header check,
    not the complete-command one, must see it)."""
    conn = RawConn(secured.port)
    conn.send(b"*11\r\n")
    assert conn.read_raw(until=b"\r\n") == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    assert conn.is_closed()


def test_unauthenticated_ten_arguments_split_from_their_header(secured):
    conn = RawConn(secured.port)
    counter = InputCounter(secured.port, password="s3cret")
    conn.send(b"*10\r\n")
    assert counter.wait(conn.sock, 5) == (b"", False)  # read by the server before any argument is sent
    conn.send(b"$1\r\na\r\n" * 10)
    assert conn.read_raw(until=b"\r\n").startswith(b"-ERR unknown command 'a'")
    assert str(conn.call("PING")) == "NOAUTH Authentication required."
    counter.close()
    conn.close()


# -- 8. a stream ID argument is at most 127 bytes -----------------------------------------


def test_stream_id_of_127_bytes_is_parsed_128_refused(c):
    """`len(arg) > 127` -> `> 128`: a 128-byte ID (leading zeros are valid) was accepted."""
    ok = "0" * 124 + "1-1"  # 127 bytes
    assert len(ok) == 127
    assert c.xadd("s", {"f": 1}, id=ok) == "1-1"
    assert c.xrange("s", min=ok, max=ok) == [("1-1", {"f": "1"})]
    too_long = "0" + ok
    assert len(too_long) == 128
    with pytest.raises(redis.ResponseError, match="^Invalid stream ID specified as stream command argument$"):
        c.xadd("s", {"f": 2}, id="0" * 125 + "2-1")
    with pytest.raises(redis.ResponseError, match="^Invalid stream ID specified as stream command argument$"):
        c.xrange("s", min=too_long)
    with pytest.raises(redis.ResponseError, match="^Invalid stream ID specified as stream command argument$"):
        c.xdel("s", too_long)
    # the `ms-*` form of XADD has the same limit
    auto, auto_too_long = "0" * 124 + "9-*", "0" * 124 + "10-*"
    assert (len(auto), len(auto_too_long)) == (127, 128)
    assert c.xadd("s", {"f": 3}, id=auto) == "9-0"
    with pytest.raises(redis.ResponseError, match="^Invalid stream ID specified as stream command argument$"):
        c.xadd("s", {"f": 4}, id=auto_too_long)


# -- found by `make mutate` ---------------------------------------------------------------


def test_group_snapshot_keeps_ids_as_16_big_endian_bytes():
    """dump_groups writes IDs as Stream.dump does (16 bytes, big-endian): a 17-byte ID still loaded back
    through load_groups, so only the format itself tells."""
    from storage.consumer_group import ConsumerGroup, dump_groups, load_groups

    group = ConsumerGroup((5 << 64) | 1, 3)
    consumer, _ = group.consumer(b"alice", 1000)
    group.add_pending((5 << 64) | 1, consumer, 2000)
    [[name, last_id, entries_read, consumers, pel]] = dump_groups({b"g": group})
    assert (name, last_id, entries_read) == (b"g", b"\0" * 7 + b"\x05" + b"\0" * 7 + b"\x01", 3)
    assert consumers == [[b"alice", 1000, -1]]
    assert pel == [[last_id, b"alice", 2000, 1]]
    loaded = load_groups([[b"g", last_id, 3, consumers, pel]])[b"g"]
    assert (loaded.last_id, loaded.entries_read, list(loaded.pel)) == ((5 << 64) | 1, 3, [(5 << 64) | 1])
    assert loaded.consumers[b"alice"].pel.keys() == [(5 << 64) | 1]


def test_format_ms_seq_around_the_table_of_small_sequences():
    from storage.stream_id import format_ms_seq

    for seq in (0, 4095, 4096, 4097, 2**64 - 1):
        assert format_ms_seq(7, seq) == b"7-%d" % seq
    assert format_ms_seq(8, 1) == b"8-1" and format_ms_seq(7, 1) == b"7-1"


def test_pending_summary_consumer_filter_end_bound_and_delconsumer():
    """XPENDING's summary and its consumer and end filters, XGROUP DELCONSUMER's count, in process."""
    box = Clocked()
    box.delivered(100)
    box("XADD", "s", "3-0", "f", "v")
    box("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">")
    assert box("XPENDING", "s", "g") == [3, b"1-0", b"3-0", [[b"alice", b"2"], [b"bob", b"1"]]]
    assert [row[0] for row in box("XPENDING", "s", "g", "-", "+", 10, "bob")] == [b"3-0"]
    assert [row[0] for row in box("XPENDING", "s", "g", "-", "2-0", 10)] == [b"1-0", b"2-0"]
    assert box("XGROUP", "DELCONSUMER", "s", "g", "alice") == 2
    assert box("XPENDING", "s", "g") == [1, b"3-0", b"3-0", [[b"bob", b"1"]]]
    assert box("XGROUP", "DELCONSUMER", "s", "g", "alice") == 0
    assert box("XGROUP", "CREATECONSUMER", "s", "g", "carol") == 1
    assert box("XGROUP", "CREATECONSUMER", "s", "g", "carol") == 0


@pytest.mark.parametrize(
    "ids",
    [[(7, 0), (7, 1), (7, 4095)], [(7, 4095), (7, 4096)], [(7, 0), (8, 0)], [(2**40, 3), (2**40, 5)], [(1, 2**64 - 1)]],
)
def test_format_ids_matches_format_id(ids):
    from storage.stream_id import format_id, format_ids, make_id

    entry_ids = [make_id(ms, seq) for ms, seq in ids]
    assert format_ids(entry_ids) == [format_id(i) for i in entry_ids] == [b"%d-%d" % pair for pair in ids]


def test_parse_id_reads_numbers_as_redis_string2ull_does():
    """Redis parses each part with string2ull: string2ll first (a negative number is refused), then
    strtoull (leading spaces, a sign; a minus negates modulo 2^64)."""
    from protocol.errors import ReplyError
    from storage.stream_id import make_id, parse_id, parse_xadd_id

    u64 = 2**64
    assert parse_id(b"1-007") == make_id(1, 7)
    assert parse_id(b"1--0") == make_id(1, 0)  # "-0" is not string2ll's, strtoull reads 0
    assert parse_id(b"1--05") == make_id(1, u64 - 5)  # a leading zero: not string2ll's either
    assert parse_id(b"1--9223372036854775809") == make_id(1, u64 - 9223372036854775809)  # beyond a long long
    assert parse_id(b"1-  5") == make_id(1, 5)
    assert parse_id(b"1- +5") == make_id(1, 5)
    assert parse_id(b"1- 18446744073709551615") == make_id(1, u64 - 1)
    assert parse_id(b"0" * 124 + b"1-1") == make_id(1, 1)  # 127 bytes
    refused_ids = (b"1--5", b"1--9223372036854775808", b"1-18446744073709551616", b"1- 18446744073709551616")
    for refused in (*refused_ids, b"1-5 ", b"1-", b"1-+", b"1-x", b"1- x5", b"1-X5", b"0" * 125 + b"1-1"):
        with pytest.raises(ReplyError, match="^ERR Invalid stream ID specified as stream command argument$"):
            parse_id(refused)
    assert parse_xadd_id(b"0" * 124 + b"9-*") == (9, None)  # 127 bytes
    for refused in (b"0" * 124 + b"10-*", b"1-2-*", b"-*", b"x-*"):
        with pytest.raises(ReplyError, match="^ERR Invalid stream ID specified as stream command argument$"):
            parse_xadd_id(refused)
