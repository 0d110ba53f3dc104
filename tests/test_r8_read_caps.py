"""XREAD / XREADGROUP MAXCOUNT and MAXSIZE (Redis 8.10): one budget across the streams of a read.

Redis 8.2.3, the oracle, predates them: the expectations are redis.io's and the
client libraries' tests against 8.10 (predis, jedis, redis-py), and random reads
are checked against a brute force that rebuilds the reply from per-stream reads
and measures its RESP bytes with its own encoder.
"""

from __future__ import annotations

import random
import time

import pytest
import redis

from tests.test_groups import raw


def resp2(value) -> bytes:
    """RESP2 bytes of a parsed reply (bulk strings, arrays, nil), written independently of the server."""
    if value is None:
        return b"*-1\r\n"
    if isinstance(value, bytes):
        return b"$%d\r\n%s\r\n" % (len(value), value)
    return b"*%d\r\n" % len(value) + b"".join(resp2(item) for item in value)


def size(reply) -> int:
    """What MAXSIZE measures: the reply's bytes without the outer array header."""
    return len(resp2(reply)) - len(b"*%d\r\n" % len(reply))


@pytest.fixture
def c(server):
    client = raw(server.client(protocol=2))
    for name in ("XREAD", "XREADGROUP"):
        client.response_callbacks.pop(name, None)
    client.flushall()
    yield client
    client.close()


def fill(c, key: str, n: int, value: bytes = b"v") -> None:
    for i in range(1, n + 1):
        c.execute_command("XADD", key, f"{i}-0", "f", value)


def keys_and_counts(reply) -> list[tuple[bytes, int]]:
    return [(key, len(entries)) for key, entries in reply or []]


def test_maxcount_caps_the_total_and_skips_the_streams_after(c):
    fill(c, "s1", 2)
    fill(c, "s2", 1)
    fill(c, "s3", 3)
    # predis's 8.10 test: MAXCOUNT 2 over s1 (2 entries) and s2 (1): only s1
    assert keys_and_counts(c.execute_command("XREAD", "MAXCOUNT", 2, "STREAMS", "s1", "s2", 0, 0)) == [(b"s1", 2)]
    # jedis's example: COUNT 2 MAXCOUNT 3 over three streams: 2 from s1, 1 from s2, s3 skipped
    reply = c.execute_command("XREAD", "COUNT", 2, "MAXCOUNT", 3, "STREAMS", "s1", "s2", "s3", 0, 0, 0)
    assert keys_and_counts(reply) == [(b"s1", 2), (b"s2", 1)]
    reply = c.execute_command("XREAD", "COUNT", 1, "MAXCOUNT", 5, "STREAMS", "s1", "s2", "s3", 0, 0, 0)
    assert keys_and_counts(reply) == [(b"s1", 1), (b"s2", 1), (b"s3", 1)]
    # an empty stream on the way costs nothing
    assert keys_and_counts(c.execute_command("XREAD", "MAXCOUNT", 3, "STREAMS", "s2", "s1", "s3", "1-0", 0, 0)) == [(b"s1", 2), (b"s3", 1)]
    assert c.execute_command("XREAD", "MAXCOUNT", 3, "STREAMS", "s1", "2-0") is None  # an empty reply stays nil


def test_maxsize_returns_at_least_one_entry(c):
    c.execute_command("XADD", "big", "1-0", "f", b"x" * 1000)
    c.execute_command("XADD", "big", "2-0", "f", b"y")
    reply = c.execute_command("XREAD", "MAXSIZE", 10, "STREAMS", "big", 0)
    assert keys_and_counts(reply) == [(b"big", 1)]  # larger than the cap, returned all the same
    assert size(reply) > 10
    whole = c.execute_command("XREAD", "STREAMS", "big", 0)
    assert c.execute_command("XREAD", "MAXSIZE", size(whole), "STREAMS", "big", 0) == whole
    assert keys_and_counts(c.execute_command("XREAD", "MAXSIZE", size(whole) - 1, "STREAMS", "big", 0)) == [(b"big", 1)]


ERRORS = [
    (["MAXCOUNT", 0], "MAXCOUNT must be a positive integer"),
    (["MAXCOUNT", -1], "MAXCOUNT must be a positive integer"),
    (["MAXCOUNT", "x"], "MAXCOUNT must be a positive integer"),
    (["MAXSIZE", 0], "MAXSIZE must be a positive integer"),
    (["MAXSIZE", "1.5"], "MAXSIZE must be a positive integer"),
    (["COUNT", 3, "MAXCOUNT", 2], "MAXCOUNT must be greater than or equal to COUNT"),
    (["MAXCOUNT", 2, "COUNT", 3], "MAXCOUNT must be greater than or equal to COUNT"),
]


@pytest.mark.parametrize(("options", "error"), ERRORS)
def test_errors(c, options, error):
    with pytest.raises(redis.ResponseError) as exc:
        c.execute_command("XREAD", *options, "STREAMS", "s", 0)
    assert str(exc.value) == error
    assert c.execute_command("XREAD", "COUNT", 2, "MAXCOUNT", 2, "STREAMS", "s", 0) is None  # equal is fine


def expected_read(c, keys: list[str], count: int, maxcount: int, maxsize: int, start=lambda key: 0):
    """Brute force: each stream's own read (from `start(key)`), cut where the total count or the measured bytes would pass the caps."""
    served, taken, used = [], 0, 0
    for key in keys:
        reply = c.execute_command("XREAD", *(["COUNT", count] if count else []), "STREAMS", key, start(key))
        if not reply:
            continue
        entries = reply[0][1]
        kept = []
        for entry in entries:
            if maxcount and taken == maxcount:
                break
            grown = used + size([[key.encode(), [*kept, entry]]])
            if maxsize and grown > maxsize and taken:
                break
            kept.append(entry)
            taken += 1
        if kept:
            used += size([[key.encode(), kept]])
            served.append([key.encode(), kept])
        if len(kept) < len(entries) or (maxcount and taken == maxcount):
            break
    return served or None


@pytest.mark.parametrize("seed", range(8))
def test_random_caps_match_the_brute_force(c, seed):
    rng = random.Random(seed)
    keys = ["a", "b", "c", "d"]
    for key in keys:
        for i in range(1, rng.randint(0, 6) + 1):
            c.execute_command("XADD", key, f"{i}-0", "f", b"v" * rng.choice([1, 5, 40, 300]), *(["g", "w"] if rng.random() < 0.3 else []))
    for _ in range(60):
        order = rng.sample(keys, rng.randint(1, 4))
        count = rng.choice([0, 1, 2, 3])
        maxcount = rng.choice([0, 0, max(count, 1), count + 2, 7])
        maxsize = rng.choice([0, 0, 1, 40, 120, 400, 2000])
        options = (["COUNT", count] if count else []) + (["MAXCOUNT", maxcount] if maxcount else []) + (["MAXSIZE", maxsize] if maxsize else [])
        got = c.execute_command("XREAD", *options, "STREAMS", *order, *[0] * len(order))
        assert got == expected_read(c, order, count, maxcount, maxsize), options


# -- XREADGROUP --------------------------------------------------------------------------------


def group_state(c, key: str) -> tuple:
    info = c.execute_command("XINFO", "GROUPS", key)
    info = [dict(zip(g[0::2], g[1::2], strict=True)) for g in info]
    pending = c.execute_command("XPENDING", key, "g", "-", "+", 100)
    return [(g[b"last-delivered-id"], g[b"entries-read"], g[b"pending"]) for g in info], [(p[0], p[1], p[3]) for p in pending]


def test_xreadgroup_caps_deliver_nothing_beyond_them(c):
    for key in ("s1", "s2"):
        fill(c, key, 3)
        c.execute_command("XGROUP", "CREATE", key, "g", "0")
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "alice", "COUNT", 2, "MAXCOUNT", 3, "STREAMS", "s1", "s2", ">", ">")
    assert keys_and_counts(reply) == [(b"s1", 2), (b"s2", 1)]
    # what was not sent is not pending and the group's cursor stays before it
    assert group_state(c, "s1") == ([(b"2-0", 2, 2)], [(b"1-0", b"alice", 1), (b"2-0", b"alice", 1)])
    assert group_state(c, "s2") == ([(b"1-0", 1, 1)], [(b"1-0", b"alice", 1)])
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s1", "s2", ">", ">")
    assert keys_and_counts(reply) == [(b"s1", 1), (b"s2", 2)]  # the rest, to the next reader
    # MAXSIZE: one entry at least, the next left for later
    c.execute_command("XADD", "s1", "4-0", "f", b"x" * 500)
    c.execute_command("XADD", "s1", "5-0", "f", b"y")
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "carol", "MAXSIZE", 20, "STREAMS", "s1", ">")
    assert [entry[0] for entry in reply[0][1]] == [b"4-0"]
    assert group_state(c, "s1")[0] == [(b"4-0", 4, 4)]
    # history reads are capped too, and re-deliver (count) only what they send
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "alice", "MAXCOUNT", 1, "STREAMS", "s1", "s2", "0", "0")
    assert keys_and_counts(reply) == [(b"s1", 1)]
    assert group_state(c, "s1")[1][:2] == [(b"1-0", b"alice", 2), (b"2-0", b"alice", 1)]
    assert group_state(c, "s2")[1][0] == (b"1-0", b"alice", 1)


def test_xreadgroup_caps_errors(c):
    fill(c, "s", 1)
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    for options, error in ERRORS:
        with pytest.raises(redis.ResponseError) as exc:
            c.execute_command("XREADGROUP", "GROUP", "g", "c", *options, "STREAMS", "s", ">")
        assert str(exc.value) == error
    assert group_state(c, "s") == ([(b"0-0", None, 0)], [])  # nothing read by the refused commands


def test_xreadgroup_claim_counts_towards_the_caps(c):
    """CLAIM's idle pending entries come first and share MAXCOUNT; one not taken keeps its owner and time."""
    fill(c, "s", 4)
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    c.execute_command("XREADGROUP", "GROUP", "g", "alice", "COUNT", 2, "STREAMS", "s", ">")
    time.sleep(0.01)  # claim order is longest idle first: the deliveries must fall in different milliseconds
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "bob", "MAXCOUNT", 1, "CLAIM", 0, "STREAMS", "s", ">")
    assert [entry[0] for entry in reply[0][1]] == [b"1-0"]
    assert group_state(c, "s")[1] == [(b"1-0", b"bob", 2), (b"2-0", b"alice", 1)]
    time.sleep(0.01)
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "bob", "MAXCOUNT", 2, "CLAIM", 0, "STREAMS", "s", ">")
    assert [entry[0] for entry in reply[0][1]] == [b"2-0", b"1-0"]  # 2-0 was left claimable, then 1-0 again
    reply = c.execute_command("XREADGROUP", "GROUP", "g", "bob", "CLAIM", 100000, "STREAMS", "s", ">")
    assert [entry[0] for entry in reply[0][1]] == [b"3-0", b"4-0"]


def expected_group_read(c, keys: list[str], count: int, maxcount: int, maxsize: int):
    """Brute force for `>`: each stream's entries after the group's cursor, cut as the caps cut them."""

    def cursor(key: str) -> bytes:
        return dict(zip(*[iter(c.execute_command("XINFO", "GROUPS", key)[0])] * 2, strict=True))[b"last-delivered-id"]

    return expected_read(c, keys, count, maxcount, maxsize, start=cursor)


@pytest.mark.parametrize("seed", range(6))
def test_random_group_reads_match_the_brute_force(c, seed):
    rng = random.Random(seed)
    keys = ["a", "b", "c"]
    for key in keys:
        c.execute_command("XGROUP", "CREATE", key, "g", "0", "MKSTREAM")
    ms = 0
    for _ in range(80):
        for key in rng.sample(keys, rng.randint(0, 3)):
            ms += 1
            c.execute_command("XADD", key, f"{ms}-0", "f", b"v" * rng.choice([1, 30, 200]))
        order = rng.sample(keys, rng.randint(1, 3))
        count = rng.choice([0, 1, 2])
        maxcount = rng.choice([0, max(count, 1), 3])
        maxsize = rng.choice([0, 0, 1, 90, 300])
        options = (["COUNT", count] if count else []) + (["MAXCOUNT", maxcount] if maxcount else []) + (["MAXSIZE", maxsize] if maxsize else [])
        expected = expected_group_read(c, order, count, maxcount, maxsize)
        before = {key: group_state(c, key)[1] for key in keys}
        got = c.execute_command("XREADGROUP", "GROUP", "g", "c1", *options, "STREAMS", *order, *[">"] * len(order))
        assert got == expected, options
        for key in keys:  # exactly the entries sent became pending
            sent = [entry[0] for k, entries in (got or []) if k == key.encode() for entry in entries]
            assert [p[0] for p in group_state(c, key)[1]] == [p[0] for p in before[key]] + sent


def test_a_blocked_read_is_capped_when_served(server, c):
    """MAXCOUNT applies to what a blocked XREAD/XREADGROUP gets when woken (two entries arrive at once)."""
    import threading

    c.execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    results = {}

    def block(name, *argv):
        client = raw(server.client(protocol=2))
        client.response_callbacks.pop(argv[0], None)
        results[name] = client.execute_command(*argv)
        client.close()

    threads = [
        threading.Thread(target=block, args=("xread", "XREAD", "MAXCOUNT", 1, "BLOCK", 5000, "STREAMS", "s", "$")),
        threading.Thread(target=block, args=("group", "XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", 1, "BLOCK", 5000, "STREAMS", "s", ">")),
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while c.info("clients")["blocked_clients"] < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    with c.pipeline(transaction=True) as pipe:
        pipe.execute_command("XADD", "s", "1-0", "f", "v")
        pipe.execute_command("XADD", "s", "2-0", "f", "v")
        pipe.execute()
    for thread in threads:
        thread.join(10)
    assert keys_and_counts(results["xread"]) == [(b"s", 1)]
    assert keys_and_counts(results["group"]) == [(b"s", 1)]
    assert group_state(c, "s") == ([(b"1-0", 1, 1)], [(b"1-0", b"c", 1)])  # the second entry is still to deliver


def test_resp3_gets_the_same_entries_as_a_map(server, c):
    """The reply keeps its shape (a map in RESP3) and the caps take the same entries in both protocols."""
    for key in ("s1", "s2"):
        fill(c, key, 3, value=b"z" * 30)
    three = server.client(protocol=3)
    three.response_callbacks.pop("XREAD", None)
    for options in (["MAXCOUNT", 4], ["MAXSIZE", 150], ["COUNT", 1, "MAXSIZE", 1]):
        two = c.execute_command("XREAD", *options, "STREAMS", "s1", "s2", 0, 0)
        mapped = three.execute_command("XREAD", *options, "STREAMS", "s1", "s2", 0, 0)
        assert isinstance(mapped, dict)
        assert [[key, entries] for key, entries in mapped.items()] == two, options
    three.close()


def test_redis_py_max_count_and_max_size(server):
    """redis-py 8.x's xread/xreadgroup keywords reach the server as MAXCOUNT/MAXSIZE."""
    r = server.client(decode_responses=True)
    r.flushall()
    for key in ("s1", "s2"):
        for i in range(1, 4):
            r.xadd(key, {"f": "v"}, id=f"{i}-0")
    got = r.xread({"s1": 0, "s2": 0}, count=2, max_count=3)
    assert [(key, [entry_id for entry_id, _ in entries]) for key, entries in got] == [("s1", ["1-0", "2-0"]), ("s2", ["1-0"])]
    assert len(r.xread({"s1": 0, "s2": 0}, max_size=1)[0][1]) == 1
    r.xgroup_create("s1", "g", id="0")
    got = r.xreadgroup("g", "c", {"s1": ">"}, max_count=2)
    assert [entry_id for entry_id, _ in got[0][1]] == ["1-0", "2-0"]
    assert r.xpending("s1", "g")["pending"] == 2
    r.close()
