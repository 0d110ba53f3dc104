"""Wide and big requests (issue 25): a million-field XADD and a 64 MB SET, fast paths checked exactly.

The wide paths (`protocol.reader._HeaderCheck._bulks`, `storage.stream._strs_size`) are checked
against the per-element code they stand in for, over seeded random input; the real server then
stores a wide entry exactly, trims it, and a replica, an AOF restart and a snapshot restart hold
the same stream.
"""

from __future__ import annotations

import random

import pytest
import redis

import storage.stream as stream_module
from protocol import reader as reader_module
from protocol.reader import RequestReader
from storage.stream import Stream, _str_size, _strs_size
from tests.test_persistence import wait_for
from tests.test_replication import caught_up, replica_of, start

# -- listpack sizes of wide entries -------------------------------------------------


def random_item(rnd: random.Random) -> bytes:
    kind = rnd.randrange(10)
    if kind == 0:
        return str(rnd.randrange(-(10**20), 10**20)).encode()  # integers, some past int64
    if kind == 1:
        return rnd.choice([b"", b"-", b"-0", b"0", b"007", b"--5", b"-12", b"9" * 20, b"-" + b"9" * 19])
    if kind == 2:
        return bytes(rnd.randrange(256) for _ in range(rnd.choice([63, 64, 100, 4095, 4096, 5000])))
    return bytes(rnd.randrange(256) for _ in range(rnd.randrange(12)))


@pytest.mark.parametrize("seed", range(6))
def test_strs_size_is_the_sum_of_str_size(seed):
    rnd = random.Random(seed)
    for _ in range(40):
        narrow = rnd.random() < 0.5  # all under 64 bytes: the pass over lengths and digits
        items = [random_item(rnd) for _ in range(rnd.randrange(0, 300))]
        if narrow:
            items = [item for item in items if len(item) < 64]
        assert _strs_size(items) == sum(map(_str_size, items)), items


def fill(stream: Stream, rnd: random.Random, entries: int, max_bytes: int) -> list[int]:
    sizes = []
    for number in range(entries):
        nfields = rnd.choice([1, 3, 64, 65, 100, 300])
        names = [b"f%d" % i for i in range(nfields)] if rnd.random() < 0.7 else [random_item(rnd)[:63] for _ in range(nfields)]
        values = [random_item(rnd) for _ in names]
        if rnd.random() < 0.7:  # all under 64 bytes: the pass over lengths and digits
            values = [value[:63] for value in values]
        flat = [x for name, value in zip(names, values, strict=True) for x in (name, value)]
        stream.add(number + 1, flat, 100, max_bytes)
        sizes.append(tuple((node.lp_bytes, node.count) for node in stream.nodes))
    return sizes


@pytest.mark.parametrize("seed", range(4))
def test_wide_entries_size_their_nodes_as_narrow_ones(seed, monkeypatch):
    """Node sizes (which decide splits and TOO_LARGE) are the same whether items are sized in passes or one by one."""
    max_bytes = random.Random(seed).choice([4096, 20000, 0])
    wide = fill(Stream(), random.Random(seed), 30, max_bytes)
    monkeypatch.setattr(stream_module, "_WIDE", 10**9)
    narrow = fill(Stream(), random.Random(seed), 30, max_bytes)
    assert wide == narrow


def test_wide_entries_still_refuse_a_listpack_over_1gb(monkeypatch):
    monkeypatch.setattr(stream_module, "LISTPACK_MAX_SIZE", 1000)
    stream = Stream()
    flat = [b"f%d" % i for i in range(199)] + [b"x" * 400]  # 199 short items (686 bytes) + 400 > 1000
    with pytest.raises(stream_module.ReplyError, match="too large"):
        stream.add(1, flat)


# -- the reader's walk of incomplete requests -------------------------------------------


def request(rnd: random.Random) -> bytes:
    n = rnd.choice([1, 2, 150, 400])
    width = rnd.choice([0, 1, 5, 40, 300])
    args = [b"XADD", b"k", b"*"]
    for _ in range(n):
        length = width if rnd.random() < 0.8 else rnd.randrange(6)
        args.append(bytes(rnd.choice(b"ab$\r\n*0") for _ in range(length)))
    return b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)


def corrupt(rnd: random.Random, data: bytes) -> bytes:
    at = rnd.randrange(len(data))
    bad = rnd.choice([b"$03", b"$-1", b"*5", b"$99999999999\r\n", b"+x", b"\r\n", b"$", b"$1\r\nab"])
    return data[:at] + bad + data[at + rnd.randrange(4) :]


def read_all(data: bytes, cuts: list[int], unauthenticated: bool):
    reader = RequestReader(max_bulk_len=200)
    reader.unauthenticated = unauthenticated
    out = []
    edges = [0, *cuts, len(data)]
    for begin, end in zip(edges, edges[1:], strict=False):
        commands, error = reader.feed(data[begin:end])
        out.append((commands, error))
        if error is not None:
            break
    return out


@pytest.mark.parametrize("seed", range(8))
def test_run_walk_reads_as_the_element_walk(seed, monkeypatch):
    """Pipelines of long requests, some corrupted, split anywhere: the same commands and errors
    with the same-length runs walked in one match as element by element."""
    rnd = random.Random(seed)
    for _ in range(60):
        data = b"".join(request(rnd) for _ in range(rnd.randrange(1, 4)))
        if rnd.random() < 0.5:
            data = corrupt(rnd, data)
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, rnd.randrange(1, 12))))
        unauthenticated = rnd.random() < 0.2
        fast = read_all(data, cuts, unauthenticated)
        with monkeypatch.context() as patch:
            patch.setattr(reader_module._HeaderCheck, "_bulks", lambda self, data, pos, end: pos)
            slow = read_all(data, cuts, unauthenticated)
        assert fast == slow, (data, cuts)


def test_run_walk_stops_at_the_request_end():
    """After a request's last element, bytes that look like its elements belong to the next item
    (here an inline line `$1`): the run must not count them."""
    args = [b"ab"] * 200
    whole = b"*200\r\n" + b"".join(b"$2\r\nab\r\n" for _ in args)
    data = whole + b"$2\r\nab\r\n" * 3
    reader = RequestReader()
    commands, error = reader.feed(data[:100])
    assert commands == [] and error is None
    commands, error = reader.feed(data[100:])
    assert commands == [args, [b"$2"], [b"ab"], [b"$2"], [b"ab"], [b"$2"], [b"ab"]], commands


# -- the real server ------------------------------------------------------------------


def wide_fields(count: int, seed: int) -> dict[bytes, bytes]:
    rnd = random.Random(seed)
    kinds = [lambda i: b"v%d" % i, lambda i: b"%d" % -i, lambda i: b"", lambda i: b"x" * 70, lambda i: b"%d" % i]
    return {b"f%d" % i: kinds[rnd.randrange(5)](i) for i in range(count)}


def entries(client, key: str):
    return client.xrange(key, "-", "+")


def test_wide_xadd_big_set_durable_and_replicated(tmp_path):
    primary = start(tmp_path, "primary", "--appendonly", "yes", "--appendfsync", "always")
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        p = primary.client(socket_timeout=120)
        first = wide_fields(50_000, 1)
        id1 = p.xadd("wide", first)
        got = entries(p, "wide")
        assert got == [(id1, first)]
        assert list(got[0][1]) == list(first)  # field order kept
        second = wide_fields(20_000, 2)
        id2 = p.xadd("wide", second, maxlen=1)  # an exact trim with a wide entry
        assert entries(p, "wide") == [(id2, second)]
        assert p.xinfo_stream("wide")["entries-added"] == 2
        big = bytes(random.Random(3).randrange(256) for _ in range(1 << 16)) * 128  # 8 MB
        assert p.set("big", big)
        assert p.get("big") == big
        caught_up(p, replica.client())
        r = replica.client(socket_timeout=120)
        assert entries(r, "wide") == [(id2, second)]
        assert r.get("big") == big
        assert p.bgrewriteaof() or True
        wait_for(lambda: p.info("persistence")["aof_rewrite_in_progress"] == 0, timeout=60)
        p.xadd("wide", first, id="9999999999999-0")
        expected = entries(p, "wide")
        p.save()
        primary.stop()
        primary = start(tmp_path, "primary", "--appendonly", "yes", port=primary.port)  # from the AOF
        p = primary.client(socket_timeout=120)
        assert entries(p, "wide") == expected
        assert p.get("big") == big
        primary.stop()
        primary = start(tmp_path, "primary", "--appendonly", "no", port=primary.port)  # from the snapshot
        p = primary.client(socket_timeout=120)
        assert entries(p, "wide") == expected
        assert p.get("big") == big
    finally:
        primary.stop()
        replica.stop()


def test_wide_xadd_refused_like_redis_when_odd(tmp_path):
    server = start(tmp_path, "odd")
    try:
        client = server.client()
        args = ["XADD", "w", "*"] + ["f"] * 100_001
        with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'xadd' command"):
            client.execute_command(*args)
        assert client.exists("w") == 0
    finally:
        server.stop()


def read_big(data: bytes, cuts: list[int]):
    reader = RequestReader()
    out = []
    edges = [0, *cuts, len(data)]
    for begin, end in zip(edges, edges[1:], strict=False):
        commands, error = reader.feed(data[begin:end])
        out.append(([[len(arg) if type(arg) is bytes else arg for arg in argv] for argv in commands], error))
        if error is not None:
            break
    return out


@pytest.mark.parametrize("seed", range(4))
def test_big_carried_request_checked_as_by_a_join(seed, monkeypatch):
    """A request carried over more than 1 MB is checked for bulk strings without a copy
    (`_bulk_strings`): the same commands and errors as with the join, whatever follows it."""
    rnd = random.Random(seed)
    big = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1200000\r\n" + b"x" * 1_200_000 + b"\r\n"
    tails = [b"", b"*1\r\n$4\r\nPING\r\n", b"*2\r\n:1\r\n$1\r\nx\r\n", b"*2\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n", b"PING\r\n", b"*1\r\n$-1\r\n"]
    for _ in range(6):
        data = big + rnd.choice(tails) + rnd.choice(tails)
        cuts = sorted(rnd.sample(range(1, len(data)), 3))
        fast = read_big(data, cuts)
        with monkeypatch.context() as patch:
            patch.setattr(reader_module, "_JOIN_MAX", 1 << 40)
            joined = read_big(data, cuts)
        assert fast == joined
        assert fast[-1][0] or fast[-2][0]  # the SET came through
    assert reader_module._bulk_strings([[b"a"], [b"b"]], 0) is None
    for bad in ([[1]], [[b"a", None]], [[[b"a"]]], [[b"a"], [b"b", 2]]):
        with pytest.raises(TypeError):
            reader_module._bulk_strings(bad, 0)
