"""XREAD / XREADGROUP MAXCOUNT and MAXSIZE (Redis 8.10): one budget across the streams of a read.

Redis 8.2.3, the oracle, predates them: the expectations are redis.io's and the
client libraries' tests against 8.10 (predis, jedis, redis-py), and random reads
are checked against a brute force that rebuilds the reply from per-stream reads
and measures its RESP bytes with its own encoder.
"""

from __future__ import annotations

import random

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


def expected_read(c, keys: list[str], count: int, maxcount: int, maxsize: int):
    """Brute force: each stream's own read, cut where the total count or the measured bytes would pass the caps."""
    served, taken, used = [], 0, 0
    for key in keys:
        reply = c.execute_command("XREAD", *(["COUNT", count] if count else []), "STREAMS", key, 0)
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
