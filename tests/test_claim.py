"""XREADGROUP ... CLAIM (Redis 8.4) and XNACK (Redis 8.8) on a real server.

Redis 8.2.3, the oracle, has neither, so these follow the spec
(shared/specs/redis-8-streams.md sections 6 and 8) and Redis's own tests
(tests/unit/type/stream-cgroups.tcl): reply shapes in RESP2 and RESP3, claim
order, NOACK, errors, blocking wake-ups (timer, XNACK, new entry), the NACK
zone and how XPENDING, XCLAIM, XAUTOCLAIM, XINFO and XGROUP see it.
Idle times are made with XCLAIM ... IDLE instead of sleeping, except where
the feature is the passing of time.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from tests.rawclient import RawConn, encode_command
from tests.test_groups import as_map, raw

LLONG_MAX = 9223372036854775807


def setup(m, n: int = 3, key: str = "s", group: str = "g", read: str | None = "c1") -> None:
    """Entries 1-0..n-0 with values v1..vn, a group at 0, and (if `read`) all of them delivered to `read`."""
    m.delete(key)
    for i in range(1, n + 1):
        m.execute_command("XADD", key, f"{i}-0", "f", f"v{i}")
    m.execute_command("XGROUP", "CREATE", key, group, "0")
    if read:
        m.execute_command("XREADGROUP", "GROUP", group, read, "STREAMS", key, ">")


def age(m, key: str, group: str, owner: str, ms: int, *ids: str) -> None:
    """Make pending entries `ms` idle without waiting (XCLAIM ... IDLE JUSTID keeps their count)."""
    m.xclaim(key, group, owner, 0, list(ids), idle=ms, justid=True)


def claim(m, consumer: str, min_idle: int, *options, key: str = "s", group: str = "g"):
    return m.execute_command("XREADGROUP", "GROUP", group, consumer, *options, "CLAIM", min_idle, "STREAMS", key, ">")


def pending(m, key: str = "s", group: str = "g", *consumer: str) -> list:
    return [[i, o, idle, n] for i, o, idle, n in m.execute_command("XPENDING", key, group, "-", "+", 100, *consumer)]


def ids(reply) -> list[bytes]:
    return [entry[0] for entry in reply[0][1]]


# -- XREADGROUP ... CLAIM ------------------------------------------------------------


def test_claim_reply_is_four_elements_with_integer_idle_and_count_raw_resp2(server, m):
    setup(m, 2)
    m.execute_command("XACK", "s", "g", "2-0")
    age(m, "s", "g", "c1", 5000, "1-0")
    m.execute_command("XADD", "s", "3-0", "f", "v3")
    conn = RawConn(server.port)
    try:
        conn.send(encode_command("XREADGROUP", "GROUP", "g", "c2", "CLAIM", "1000", "STREAMS", "s", ">"))
        data = conn.read_raw(until=b"v3\r\n:0\r\n:0\r\n")
    finally:
        conn.close()
    head, rest = data.split(b"$2\r\nv1\r\n:", 1)
    assert head == b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n"
    idle, rest = rest.split(b"\r\n", 1)
    assert 5000 <= int(idle) < 60_000
    assert rest == b":1\r\n*4\r\n$3\r\n3-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv3\r\n:0\r\n:0\r\n"


def test_claim_reply_is_a_map_per_stream_in_resp3(server, m):
    setup(m, 1)
    age(m, "s", "g", "c1", 2000, "1-0")
    conn = RawConn(server.port)
    try:
        conn.call("HELLO", "3")
        conn.send(encode_command("XREADGROUP", "GROUP", "g", "c2", "CLAIM", "1000", "STREAMS", "s", ">"))
        data = conn.read_raw(until=b":1\r\n")
        assert data.startswith(b"%1\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$2\r\nv1\r\n:")
        conn.send(encode_command("XREADGROUP", "GROUP", "g", "c2", "CLAIM", "1000", "STREAMS", "s", ">"))
        assert conn.read_raw(until=b"\r\n") == b"_\r\n"  # nothing: RESP3 null, as a plain XREADGROUP
    finally:
        conn.close()


def test_redis_py_parses_the_claim_reply(r):
    setup(r, 3)
    age(r, "s", "g", "c1", 3000, "2-0")
    reply = r.xreadgroup("g", "c2", {"s": ">"}, count=5, claim_min_idle_time=1000)
    entries = reply[b"s"][0] if isinstance(reply, dict) else reply[0][1]
    assert [(e[0], e[1], e[3]) for e in entries] == [(b"2-0", {b"f": b"v2"}, 1)]
    assert entries[0][2] >= 3000


def test_claimed_entries_come_first_and_share_count_with_new_ones(m):
    setup(m, 3)
    for i in range(4, 8):
        m.execute_command("XADD", "s", f"{i}-0", "f", f"v{i}")
    age(m, "s", "g", "c1", 5000, "1-0", "2-0", "3-0")
    reply = claim(m, "c2", 1000, "COUNT", 4)
    assert [(e[0], e[3]) for e in reply[0][1]] == [(b"1-0", 1), (b"2-0", 1), (b"3-0", 1), (b"4-0", 0)]
    assert reply[0][1][3][1:] == [[b"f", b"v4"], 0, 0]
    assert [p[1] for p in pending(m)] == [b"c2"] * 4
    assert [p[3] for p in pending(m)] == [2, 2, 2, 1]
    info = as_map(m.execute_command("XINFO", "GROUPS", "s")[0])
    assert info[b"last-delivered-id"] == b"4-0" and info[b"entries-read"] == 4  # claims do not move the cursor


def test_min_idle_time_is_respected(m):
    setup(m, 2)
    age(m, "s", "g", "c1", 3000, "1-0")
    age(m, "s", "g", "c1", 1000, "2-0")
    assert ids(claim(m, "c2", 2500)) == [b"1-0"]
    assert claim(m, "c2", 2500) is None  # 1-0 was just delivered again, 2-0 not idle enough
    assert ids(claim(m, "c3", 0)) == [b"2-0", b"1-0"]  # 0: every pending entry, longest idle first
    m.execute_command("XADD", "s", "3-0", "f", "v3")
    assert ids(claim(m, "c3", LLONG_MAX)) == [b"3-0"]


def test_claim_order_is_longest_idle_first_across_owners(m):
    setup(m, 6, read=None)
    m.execute_command("XREADGROUP", "GROUP", "g", "a", "COUNT", 3, "STREAMS", "s", ">")
    m.execute_command("XREADGROUP", "GROUP", "g", "b", "COUNT", 3, "STREAMS", "s", ">")
    for entry, owner, idle in [("1-0", "a", 50_000), ("2-0", "a", 20_000), ("3-0", "a", 1000),
                               ("4-0", "b", 40_000), ("5-0", "b", 30_000), ("6-0", "b", 2000)]:  # fmt: skip
        age(m, "s", "g", owner, idle, entry)
    assert ids(claim(m, "c", 10_000, "COUNT", 10)) == [b"1-0", b"4-0", b"5-0", b"2-0"]
    assert ids(claim(m, "c", 1500, "COUNT", 10)) == [b"6-0"]


def test_claim_is_ignored_for_a_history_read(m):
    setup(m, 3)
    age(m, "s", "g", "c1", 5000, "1-0")
    reply = m.execute_command("XREADGROUP", "GROUP", "g", "c1", "CLAIM", 1000, "STREAMS", "s", "0")
    assert [len(e) for e in reply[0][1]] == [2, 2, 2]


def test_noack_leaves_claimed_entries_pending_and_new_ones_not(m):
    setup(m, 2, read=None)
    m.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", 1, "STREAMS", "s", ">")
    age(m, "s", "g", "c1", 5000, "1-0")
    assert ids(claim(m, "c2", 1000, "NOACK")) == [b"1-0", b"2-0"]
    assert [(p[0], p[1], p[3]) for p in pending(m)] == [(b"1-0", b"c2", 2)]


def test_option_positions_and_repeats(m):
    setup(m, 2)
    age(m, "s", "g", "c1", 5000, "1-0", "2-0")
    reply = m.execute_command("XREADGROUP", "CLAIM", 1000, "GROUP", "g", "c2", "COUNT", 1, "STREAMS", "s", ">")
    assert ids(reply) == [b"1-0"]
    # repeated CLAIM: the last one counts (2-0 is 5 s idle: CLAIM 60000 finds nothing)
    assert (
        m.execute_command("XREADGROUP", "GROUP", "g", "c2", "CLAIM", 1000, "COUNT", 1, "CLAIM", 60000, "STREAMS", "s", ">")
        is None
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["CLAIM", "test"], "min-idle-time is not an integer"),
        (["CLAIM", "5.5"], "min-idle-time is not an integer"),
        (["CLAIM", "+10"], "min-idle-time is not an integer"),
        (["CLAIM", "-0"], "min-idle-time is not an integer"),
        (["CLAIM", "10e"], "min-idle-time is not an integer"),
        (["CLAIM", "9223372036854775808"], "min-idle-time is not an integer"),
        (["CLAIM", "-10"], "min-idle-time must be a positive integer"),
        (["CLAIM", "10", "CLAIM", "COUNT", "1"], "min-idle-time is not an integer"),
    ],
)
def test_min_idle_time_errors(m, args, error):
    setup(m, 1)
    with pytest.raises(redis.ResponseError) as exc:
        m.execute_command("XREADGROUP", "GROUP", "g", "c", *args, "STREAMS", "s", ">")
    assert str(exc.value) == error


def test_claim_misplaced_and_xread_errors(m):
    setup(m, 1)
    cases = [
        (["XREADGROUP", "CLAIM", "GROUP", "g", "c", "STREAMS", "s", ">"], "min-idle-time is not an integer"),
        (["XREADGROUP", "GROUP", "g", "c", "CLAIM", "STREAMS", "s", ">"], "min-idle-time is not an integer"),
        (["XREADGROUP", "GROUP", "g", "CLAIM", "50", "c", "STREAMS", "s", ">"], "syntax error"),
        (["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", "CLAIM"], "Unbalanced 'xreadgroup' list of streams"),
        (["XREAD", "COUNT", "2", "CLAIM", "10", "STREAMS", "s", "0-0"],
         "The CLAIM option is only supported by XREADGROUP. You called XREAD instead."),
    ]  # fmt: skip
    for argv, error in cases:
        with pytest.raises(redis.ResponseError) as exc:
            m.execute_command(*argv)
        assert str(exc.value).startswith(error), argv
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such key 's' or consumer group 'nope'"):
        m.execute_command("XREADGROUP", "GROUP", "nope", "c", "CLAIM", 5, "STREAMS", "s", ">")


def test_claimed_entries_whose_stream_entry_is_gone_are_dropped(m):
    setup(m, 3)
    m.execute_command("XTRIM", "s", "MAXLEN", 1)
    age(m, "s", "g", "c1", 5000, "1-0", "2-0", "3-0")
    assert ids(claim(m, "c2", 1000)) == [b"3-0"]
    assert [p[0] for p in pending(m)] == [b"3-0"]  # 1-0 and 2-0 left the PEL (as XAUTOCLAIM drops them)
    m.execute_command("XTRIM", "s", "MAXLEN", 0)
    age(m, "s", "g", "c2", 5000, "3-0")
    assert claim(m, "c3", 1000) is None
    assert m.execute_command("XPENDING", "s", "g")[0] == 0


def test_a_deleted_consumer_leaves_nothing_to_claim(m):
    setup(m, 1)
    m.execute_command("XGROUP", "DELCONSUMER", "s", "g", "c1")
    assert claim(m, "c2", 0) is None


def test_setid_back_delivers_an_entry_as_claimed_and_as_new(m):
    """Redis's test: claimed with its count, then again as new (count 0); the next claim shows count 1."""
    setup(m, 2)
    claim(m, "c2", 0)
    m.execute_command("XGROUP", "SETID", "s", "g", "0")
    age(m, "s", "g", "c2", 5000, "1-0", "2-0")
    reply = claim(m, "c2", 1000)
    assert [(e[0], e[3]) for e in reply[0][1]] == [(b"1-0", 2), (b"2-0", 2), (b"1-0", 0), (b"2-0", 0)]
    age(m, "s", "g", "c2", 5000, "1-0", "2-0")
    assert [(e[0], e[3]) for e in claim(m, "c2", 1000)[0][1]] == [(b"1-0", 1), (b"2-0", 1)]


def test_several_streams_each_claim_then_read(m):
    for n, key in enumerate(["a", "b"]):
        m.execute_command("XADD", key, f"{2 * n + 1}-0", "f", "x")
        m.execute_command("XADD", key, f"{2 * n + 2}-0", "f", "y")
        m.execute_command("XGROUP", "CREATE", key, "g", "0")
    m.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", 1, "STREAMS", "a", "b", ">", ">")
    age(m, "a", "g", "c1", 5000, "1-0")
    age(m, "b", "g", "c1", 5000, "3-0")
    reply = m.execute_command("XREADGROUP", "GROUP", "g", "c1", "CLAIM", 1000, "STREAMS", "a", "b", ">", ">")
    assert [(k, [(e[0], e[3]) for e in entries]) for k, entries in reply] == [
        (b"a", [(b"1-0", 1), (b"2-0", 0)]), (b"b", [(b"3-0", 1), (b"4-0", 0)])
    ]  # fmt: skip


def test_claim_inside_multi(m):
    setup(m, 1)
    age(m, "s", "g", "c1", 5000, "1-0")
    pipe = m.pipeline(transaction=True)
    pipe.execute_command("XREADGROUP", "GROUP", "g", "c2", "CLAIM", 1000, "STREAMS", "s", ">")
    pipe.execute_command("XPENDING", "s", "g", "-", "+", 10)
    claimed, after = pipe.execute()
    assert ids(claimed) == [b"1-0"] and after[0][1] == b"c2"


# -- blocking -------------------------------------------------------------------------


def blocked(m) -> int:
    return m.info("clients")["blocked_clients"]


def wait_blocked(m, n: int) -> None:
    for _ in range(500):
        if blocked(m) == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"{blocked(m)} blocked clients, not {n}")


def test_block_returns_at_once_when_something_is_claimable(server, m):
    setup(m, 1)
    age(m, "s", "g", "c1", 5000, "1-0")
    start = time.monotonic()
    assert ids(claim(m, "c2", 1000, "BLOCK", 5000)) == [b"1-0"]
    assert time.monotonic() - start < 2


def test_block_wakes_when_an_entry_becomes_claimable(server, m):
    setup(m, 1)
    waiter = raw(server.client(protocol=2))
    start = time.monotonic()
    reply = waiter.execute_command("XREADGROUP", "GROUP", "g", "c2", "BLOCK", 15000, "CLAIM", 600, "STREAMS", "s", ">")
    waited = time.monotonic() - start
    assert [(e[0], e[3]) for e in reply[0][1]] == [(b"1-0", 1)]
    assert reply[0][1][0][2] >= 600
    assert 0.5 < waited < 8  # woken by the entry's idle time, not by the 15 s timeout
    assert pending(m)[0][1] == b"c2"


def test_block_times_out_with_nil_when_nothing_becomes_claimable(server, m):
    setup(m, 1)
    start = time.monotonic()
    assert claim(m, "c2", 60_000, "BLOCK", 300) is None
    assert 0.25 < time.monotonic() - start < 3


def test_block_wakes_on_xnack(server, m):
    setup(m, 2)
    waiter = raw(server.client(protocol=2))
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", claim(waiter, "c2", 600_000, "BLOCK", 10_000)))
    thread.start()
    wait_blocked(m, 1)
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 2, "2-0", "1-0") == 2
    thread.join(15)
    assert [(e[0], e[2], e[3]) for e in result["r"][0][1]] == [(b"2-0", -1, 1), (b"1-0", -1, 1)]
    assert [p[0] for p in pending(m, "s", "g", "c2")] == [b"1-0", b"2-0"]


def test_block_notices_within_a_second_an_entry_xclaim_made_idle(server, m):
    """XCLAIM ... IDLE wakes no reader (as in Redis): the blocked CLAIM read re-checks at least once a second."""
    setup(m, 1)
    waiter = raw(server.client(protocol=2))
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", claim(waiter, "c2", 600_000, "BLOCK", 20_000)))
    thread.start()
    wait_blocked(m, 1)
    age(m, "s", "g", "c1", 700_000, "1-0")
    start = time.monotonic()
    thread.join(15)
    assert time.monotonic() - start < 10  # well before the 20 s timeout
    assert [(e[0], e[3]) for e in result["r"][0][1]] == [(b"1-0", 1)]


def test_block_wakes_on_a_new_entry_before_anything_is_idle_enough(server, m):
    setup(m, 1)
    waiter = raw(server.client(protocol=2))
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("r", claim(waiter, "c2", 600_000, "BLOCK", 10_000)))
    thread.start()
    wait_blocked(m, 1)
    m.execute_command("XADD", "s", "2-0", "f", "v2")
    thread.join(15)
    assert [(e[0], e[2], e[3]) for e in result["r"][0][1]] == [(b"2-0", 0, 0)]


def test_two_blocked_clients_one_served_by_the_entry_one_by_its_idle_time(server, m):
    m.execute_command("XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    results = {}

    def wait(name: str) -> None:
        results[name] = claim(raw(server.client(protocol=2)), name, 300, "BLOCK", 0)

    threads = [threading.Thread(target=wait, args=(name,)) for name in ("c1", "c2")]
    for thread in threads:
        thread.start()
        wait_blocked(m, threads.index(thread) + 1)
    m.execute_command("XADD", "s", "2-0", "f", "v")
    for thread in threads:
        thread.join(15)
    assert [(e[0], e[3]) for e in results["c1"][0][1]] == [(b"2-0", 0)]
    assert [(e[0], e[3]) for e in results["c2"][0][1]] == [(b"2-0", 1)]  # claimed from c1 300 ms later


# -- XNACK ------------------------------------------------------------------------


def test_xnack_errors(m):
    for argv in (["XNACK"], ["XNACK", "k"], ["XNACK", "k", "g", "SILENT", "IDS", "1"], ["XNACK", "s", "g", "FAIL", "RETRYCOUNT"]):
        with pytest.raises(redis.ResponseError, match="^wrong number of arguments for 'xnack' command$"):
            m.execute_command(*argv)
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such key 'nokey' or consumer group 'g'$"):
        m.execute_command("XNACK", "nokey", "g", "SILENT", "IDS", 1, "1-0")
    m.set("str", "x")
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE"):
        m.execute_command("XNACK", "str", "g", "FAIL", "IDS", 1, "1-0")
    setup(m, 2)
    with pytest.raises(redis.ResponseError, match="^NOGROUP"):
        m.execute_command("XNACK", "s", "nogroup", "SILENT", "IDS", 1, "1-0")
    cases = [
        ("FAIL BADOPT IDS 1 1-0", "Unrecognized XNACK option 'BADOPT'"),
        ("FAIL IDS 1 1-0 BADOPT", "Unrecognized XNACK option 'BADOPT'"),
        ("SILENT FORCE BADOPT IDS 1 1-0", "Unrecognized XNACK option 'BADOPT'"),
        ("FAIL RETRYCOUNT 5 BADOPT IDS 1 1-0", "Unrecognized XNACK option 'BADOPT'"),
        ("FAIL FORCE IDS 1 1-0 BADOPT RETRYCOUNT 5", "Unrecognized XNACK option 'BADOPT'"),
        ("BADMODE IDS 1 1-0", "mode must be SILENT, FAIL, or FATAL"),
        ("FAIL FATAL IDS 1 1-0", "Unrecognized XNACK option 'FATAL'"),
        ("SILENT NOTIDS 1 1-0", "Unrecognized XNACK option 'NOTIDS'"),
        ("SILENT FORCE RETRYCOUNT 5", "syntax error, expected IDS keyword"),
        ("SILENT IDS abc 1-0", "numids must be a positive integer"),
        ("SILENT IDS 0 1-0", "numids must be a positive integer"),
        ("SILENT IDS -1 1-0", "numids must be a positive integer"),
        ("SILENT IDS 2 1-0", "number of IDs doesn't match numids"),
        ("FAIL IDS 1 not-a-valid-id", "Invalid stream ID specified as stream command argument"),
        ("FAIL IDS 1 1-0 RETRYCOUNT abc", "value is not an integer or out of range"),
        ("FAIL IDS 1 1-0 RETRYCOUNT -1", "Invalid RETRYCOUNT value, must be >= 0"),
        ("FAIL IDS 1 1-0 RETRYCOUNT 99999999999999999999", "value is not an integer or out of range"),
        ("FAIL IDS 1 1-0 RETRYCOUNT", "Unrecognized XNACK option 'RETRYCOUNT'"),
        ("FAIL IDS 1 1-0 2-0", "Unrecognized XNACK option '2-0'"),
        ("FAIL IDS 1 1-0 IDS 1 2-0", "Unrecognized XNACK option 'IDS'"),
    ]
    for args, error in cases:
        with pytest.raises(redis.ResponseError) as exc:
            m.execute_command("XNACK", "s", "g", *args.split())
        assert str(exc.value) == error, args
    assert pending(m)[0][1] == b"c1"  # no error changed anything


def test_xnack_modes_and_counts(m):
    setup(m, 1)
    assert m.execute_command("XNACK", "s", "g", "SILENT", "IDS", 1, "1-0") == 1
    assert pending(m) == [[b"1-0", b"", -1, 0]]
    m.execute_command("XCLAIM", "s", "g", "c2", 0, "1-0", "RETRYCOUNT", 0)
    m.execute_command("XNACK", "s", "g", "SILENT", "IDS", 1, "1-0")
    assert pending(m)[0][3] == 0  # not below 0
    for _ in range(3):
        m.execute_command("XCLAIM", "s", "g", "c1", 0, "1-0")
    m.execute_command("XNACK", "s", "g", "SILENT", "IDS", 1, "1-0")
    assert pending(m) == [[b"1-0", b"", -1, 2]]
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0") == 1
    assert pending(m) == [[b"1-0", b"", -1, 2]]
    m.execute_command("XNACK", "s", "g", "FATAL", "IDS", 1, "1-0")
    assert pending(m) == [[b"1-0", b"", -1, LLONG_MAX]]
    m.execute_command("XNACK", "s", "g", "FATAL", "IDS", 1, "1-0", "RETRYCOUNT", 42)
    assert pending(m) == [[b"1-0", b"", -1, 42]]
    m.execute_command("XNACK", "s", "g", "FATAL", "IDS", 1, "1-0")
    m.execute_command("XCLAIM", "s", "g", "c1", 0, "1-0")  # one more delivery of a FATAL entry stays at the maximum
    owner, count = pending(m)[0][1], pending(m)[0][3]
    assert (owner, count) == (b"c1", LLONG_MAX)


def test_xnack_releases_entries_from_their_consumers(m):
    setup(m, 3, read=None)
    m.execute_command("XREADGROUP", "GROUP", "g", "c1", "COUNT", 2, "STREAMS", "s", ">")
    m.execute_command("XREADGROUP", "GROUP", "g", "c2", "COUNT", 1, "STREAMS", "s", ">")
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "3-0") == 1
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0") == 1
    assert [p[:2] for p in pending(m)] == [[b"1-0", b""], [b"2-0", b"c1"], [b"3-0", b""]]
    assert [p[0] for p in pending(m, "s", "g", "c1")] == [b"2-0"] and pending(m, "s", "g", "c2") == []
    summary = m.execute_command("XPENDING", "s", "g")
    assert summary == [3, b"1-0", b"3-0", [[b"c1", b"1"]]]
    consumers = {as_map(c)[b"name"]: as_map(c)[b"pending"] for c in m.execute_command("XINFO", "CONSUMERS", "s", "g")}
    assert consumers == {b"c1": 1, b"c2": 0}  # not deleted, not created
    # a history read no longer shows them
    assert ids(m.execute_command("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0")) == [b"2-0"]


def test_xnack_counts_found_ids_and_duplicates(m):
    setup(m, 3)
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "9-9") == 0
    assert m.execute_command("XNACK", "s", "g", "SILENT", "IDS", 3, "1-0", "2-0", "3-0") == 3
    assert pending(m) == [[b"1-0", b"", -1, 0], [b"2-0", b"", -1, 0], [b"3-0", b"", -1, 0]]
    m.execute_command("XCLAIM", "s", "g", "c1", 0, "1-0", "2-0", "3-0")
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 5, "1-0", "9-9", "2-0", "8-8", "3-0") == 3
    m.execute_command("XCLAIM", "s", "g", "c1", 0, "1-0")
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 2, "1-0", "1-0") == 2
    assert pending(m)[0] == [b"1-0", b"", -1, 2]
    m.execute_command("XACK", "s", "g", "1-0", "2-0", "3-0")
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0") == 0


def full_group(m, key: str = "s", index: int = 0) -> dict:
    return as_map(as_map(m.execute_command("XINFO", "STREAM", key, "FULL"))[b"groups"][index])


def test_nack_zone_is_claimed_first_in_nack_order(m):
    setup(m, 5)
    age(m, "s", "g", "c1", 60_000, "5-0")  # the longest idle owned entry
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 3, "1-0", "2-0", "3-0")
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")  # to the zone's tail
    group = full_group(m)
    assert group[b"nacked-count"] == 3 and group[b"pel-count"] == 5
    assert list(group)[-1] == b"nacked-count"
    assert group[b"pending"][0] == [b"1-0", b"", 0, 1]
    order = [ids(claim(m, "c2", 1000, "COUNT", 1))[0] for _ in range(4)]
    assert order == [b"2-0", b"3-0", b"1-0", b"5-0"]
    assert full_group(m)[b"nacked-count"] == 0


def test_nacked_entries_and_stream_deletions(m):
    setup(m, 3)
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 2, "1-0", "3-0")
    m.execute_command("XDEL", "s", "1-0", "3-0")
    assert [p[:2] for p in pending(m)] == [[b"1-0", b""], [b"2-0", b"c1"], [b"3-0", b""]]  # XDEL keeps them
    assert m.execute_command("XCLAIM", "s", "g", "c2", 0, "1-0") == []  # gone: cleaned from the PEL
    assert [p[0] for p in pending(m)] == [b"2-0", b"3-0"]
    cursor, claimed, deleted = m.execute_command("XAUTOCLAIM", "s", "g", "c2", 0, "0-0")
    assert [e[0] for e in claimed] == [b"2-0"] and deleted == [b"3-0"]
    assert full_group(m)[b"nacked-count"] == 0


def test_nacked_entries_are_claimable_whatever_the_idle_time(m):
    setup(m, 2)
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    assert [e[0] for e in m.execute_command("XCLAIM", "s", "g", "c2", 99999, "1-0")] == [b"1-0"]
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "2-0")
    assert [e[0] for e in m.execute_command("XAUTOCLAIM", "s", "g", "c3", 99999, "0-0")[1]] == [b"2-0"]
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    assert ids(claim(m, "c4", LLONG_MAX)) == [b"1-0"]
    assert [p[:2] for p in pending(m)] == [[b"1-0", b"c4"], [b"2-0", b"c3"]]


def test_xpending_idle_filter_includes_nacked_entries(m):
    setup(m, 2)
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "2-0")
    assert m.execute_command("XPENDING", "s", "g", "IDLE", 60_000, "-", "+", 10) == [[b"2-0", b"", -1, 1]]


def test_xgrouplag_shows_a_nacked_lowest_pending_entry_as_xpending_does(m):
    setup(m, 2)
    age(m, "s", "g", "c1", 5000, "1-0")
    assert as_map(m.execute_command("XGROUPLAG", "s", "g")[0])[b"oldest-pending-idle-ms"] >= 5000
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    assert as_map(m.execute_command("XGROUPLAG", "s", "g")[0])[b"oldest-pending-idle-ms"] == -1  # not now - 0


def test_delconsumer_keeps_and_destroy_drops_nacked_entries(m):
    setup(m, 2)
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    assert m.execute_command("XGROUP", "DELCONSUMER", "s", "g", "c1") == 1
    assert pending(m) == [[b"1-0", b"", -1, 1]]
    assert full_group(m)[b"nacked-count"] == 1
    assert len(m.execute_command("XCLAIM", "s", "g", "c2", 0, "1-0")) == 1
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    m.execute_command("XGROUP", "DESTROY", "s", "g")
    m.execute_command("XGROUP", "CREATE", "s", "g", "0")
    assert m.execute_command("XPENDING", "s", "g")[0] == 0


def test_xnack_force_and_retrycount(m):
    setup(m, 3, read=None)
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0", "FORCE") == 1
    assert pending(m) == [[b"1-0", b"", -1, 0]]
    assert m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "9-9", "FORCE") == 0
    m.execute_command("XACK", "s", "g", "1-0")
    assert m.execute_command("XNACK", "s", "g", "FATAL", "IDS", 1, "1-0", "FORCE") == 1
    m.execute_command("XACK", "s", "g", "1-0")
    assert m.execute_command("XNACK", "s", "g", "SILENT", "IDS", 2, "1-0", "2-0", "FORCE") == 2
    assert pending(m) == [[b"1-0", b"", -1, 0], [b"2-0", b"", -1, 0]]
    m.execute_command("XACK", "s", "g", "1-0", "2-0")
    for args in (["FAIL", "FORCE", "RETRYCOUNT", 42, "IDS", 1, "1-0"], ["FAIL", "RETRYCOUNT", 5, "IDS", 1, "1-0", "FORCE"],
                 ["FATAL", "FORCE", "IDS", 1, "1-0", "RETRYCOUNT", 3]):  # fmt: skip
        assert m.execute_command("XNACK", "s", "g", *args) == 1
        assert pending(m) == [[b"1-0", b"", -1, args[args.index("RETRYCOUNT") + 1]]]
        m.execute_command("XACK", "s", "g", "1-0")
    m.delete("e")
    m.execute_command("XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    assert m.execute_command("XNACK", "e", "g", "FAIL", "IDS", 1, "1-0", "FORCE") == 0


def test_copy_keeps_the_nack_zone(m):
    setup(m, 3)
    m.execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "3-0")
    m.execute_command("XNACK", "s", "g", "FATAL", "IDS", 1, "1-0")
    m.execute_command("COPY", "s", "t")
    # idle times tick between the two XPENDINGs: compare the rest, and the NACKed ones' -1
    assert [[i, o, n, idle < 0] for i, o, idle, n in pending(m, "t")] == [[i, o, n, idle < 0] for i, o, idle, n in pending(m, "s")]
    assert [ids(claim(m, "c2", 0, "COUNT", 1, key="t"))[0] for _ in range(2)] == [b"3-0", b"1-0"]
    assert pending(m, "s")[0][:2] == [b"1-0", b""]


def test_xnack_writes_touch_watch(server, m):
    setup(m, 1)
    pipe = m.pipeline(transaction=True)
    pipe.watch("s")
    server.client().execute_command("XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    pipe.multi()
    pipe.set("x", 1)
    with pytest.raises(redis.WatchError):
        pipe.execute()


def test_redis_py_xnack(r):
    setup(r, 2)
    assert r.xnack("s", "g", "FATAL", "1-0", "2-0", retrycount=7) == 2
    assert [p["times_delivered"] for p in r.xpending_range("s", "g", "-", "+", 10)] == [7, 7]


# -- COMMAND INFO / DOCS ----------------------------------------------------------------


def test_command_info_and_docs(server):
    conn = RawConn(server.port)
    try:
        info = conn.call("COMMAND", "INFO", "xnack")[0]
        docs = conn.call("COMMAND", "DOCS", "xnack", "xreadgroup")
    finally:
        conn.close()
    assert info[:7] == [b"xnack", -7, [b"write", b"fast"], 1, 1, 1, [b"@write", b"@stream", b"@fast"]]
    assert info[8][0][:2] == [b"flags", [b"RW", b"update"]]
    docs = {docs[i]: as_map(docs[i + 1]) for i in range(0, len(docs), 2)}
    assert docs[b"xnack"][b"since"] == b"8.8.0" and docs[b"xnack"][b"group"] == b"stream"
    # redis.io's xnack page (generated from Redis's command JSON)
    assert docs[b"xnack"][b"summary"] == b"Releases pending messages back to the group's PEL without acknowledging them, making them available for re-delivery."
    arguments = [as_map(a) for a in docs[b"xnack"][b"arguments"]]
    assert [(a[b"name"], a[b"type"], a.get(b"token"), a.get(b"flags")) for a in arguments] == [
        (b"key", b"key", None, None), (b"group", b"string", None, None), (b"mode", b"oneof", None, None),
        (b"ids", b"block", b"IDS", None), (b"count", b"integer", b"RETRYCOUNT", [b"optional"]),
        (b"force", b"pure-token", b"FORCE", [b"optional"]),
    ]  # fmt: skip
    assert [as_map(a)[b"token"] for a in arguments[2][b"arguments"]] == [b"SILENT", b"FAIL", b"FATAL"]
    assert [as_map(a)[b"name"] for a in arguments[3][b"arguments"]] == [b"numids", b"id"]
    assert [b"8.4.0", b"Added the `CLAIM` option."] in docs[b"xreadgroup"][b"history"]
    claim_arg = [as_map(a) for a in docs[b"xreadgroup"][b"arguments"] if as_map(a).get(b"token") == b"CLAIM"]
    assert claim_arg[0][b"name"] == b"min-idle-time" and claim_arg[0][b"flags"] == [b"optional"]
