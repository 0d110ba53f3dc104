"""Stream commands through redis-py, in RESP2 and RESP3."""

from __future__ import annotations

import time

import pytest
import redis

E = redis.ResponseError


def err(r, *args) -> str:
    with pytest.raises(E) as info:
        r.execute_command(*args)
    return str(info.value)


def raw(r, *args):
    """A reply without redis-py's response callbacks (None stays None)."""
    names = [str(args[0]).upper(), f"{args[0]} {args[1]}".upper()]
    saved = {name: r.response_callbacks.pop(name) for name in names if name in r.response_callbacks}
    try:
        return r.execute_command(*args)
    finally:
        r.response_callbacks.update(saved)


def test_xadd_ids_and_fields(r):
    assert r.xadd("s", {"a": "1", "b": "2"}, id="1-1") == b"1-1"
    assert r.execute_command("XADD", "s", "1-*", "f", "v") == b"1-2"
    assert r.execute_command("XADD", "s", "5-*", "f", "v") == b"5-0"
    auto = r.xadd("s", {"f": "v"})
    ms, seq = map(int, auto.split(b"-"))
    assert ms > 1_600_000_000_000 and seq == 0
    # duplicate fields are kept, in order
    r.execute_command("XADD", "d", "1-1", "a", "1", "a", "2", "b", "3")
    assert r.xrange("d") == [(b"1-1", {b"a": b"2", b"b": b"3"})]
    assert r.execute_command("XRANGE", "d", "-", "+") == [(b"1-1", {b"a": b"2", b"b": b"3"})]


def test_xadd_errors(r):
    r.xadd("s", {"f": "v"}, id="5-5")
    assert err(r, "XADD", "s", "5-5", "f", "v") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(r, "XADD", "s", "4-*", "f", "v") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(r, "XADD", "s", "0-0", "f", "v") == "The ID specified in XADD must be greater than 0-0"
    assert err(r, "XADD", "new", "0-0", "f", "v") == "The ID specified in XADD must be greater than 0-0"
    assert r.execute_command("XADD", "top", "18446744073709551615-18446744073709551615", "f", "v") == b"18446744073709551615-18446744073709551615"
    assert err(r, "XADD", "top", "5-5", "f", "v") == "The stream has exhausted the last possible ID, unable to add more items"
    assert err(r, "XADD", "top", "MAXLEN", "=", "1", "5-5", "f", "v") == "The stream has exhausted the last possible ID, unable to add more items"
    assert r.type("new") == b"none"
    assert err(r, "XADD", "s", "x", "f", "v") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XADD", "s", "*", "f") == "wrong number of arguments for 'xadd' command"
    assert err(r, "XADD", "s", "*", "f", "v", "g") == "wrong number of arguments for 'xadd' command"
    assert err(r, "XADD", "s", "MAXLEN", "-1", "*", "f", "v") == "The MAXLEN argument must be >= 0."
    assert err(r, "XADD", "s", "MAXLEN", "x", "*", "f", "v") == "value is not an integer or out of range"
    assert err(r, "XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "f", "v") == "syntax error, MAXLEN and MINID options at the same time are not compatible"
    assert err(r, "XADD", "s", "LIMIT", "10", "*", "f", "v") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    assert err(r, "XADD", "s", "MAXLEN", "1", "LIMIT", "10", "*", "f", "v") == "syntax error, LIMIT cannot be used without the special ~ option"
    assert err(r, "XADD", "s", "MAXLEN", "~", "1", "LIMIT", "-1", "*", "f", "v") == "The LIMIT argument must be >= 0."
    assert err(r, "XADD", "s", "MINID", "+", "*", "f", "v") == "Invalid stream ID specified as stream command argument"
    r.execute_command("XADD", "s", "6-18446744073709551615", "f", "v")
    # `ms-*` with that ms's sequence used up: 7.0 said "Elements are too large to be stored" (an unset
    # errno); the newest t_stream.c sets EDOM in streamAppendItem, which xaddCommand reports as too small.
    assert err(r, "XADD", "s", "6-*", "f", "v") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert r.execute_command("XADD", "s", "7-*", "f", "v") == b"7-0"
    r.execute_command("XSETID", "s", "18446744073709551615-18446744073709551615")
    assert err(r, "XADD", "s", "*", "f", "v") == "The stream has exhausted the last possible ID, unable to add more items"
    r.set("str", "x")
    assert err(r, "XADD", "str", "*", "f", "v").startswith("WRONGTYPE")


def test_nomkstream(r):
    assert r.xadd("s", {"f": "v"}, nomkstream=True) is None
    assert r.type("s") == b"none"
    r.xadd("s", {"f": "v"}, id="1-0")
    assert r.xadd("s", {"f": "v"}, id="2-0", nomkstream=True) == b"2-0"


def test_xadd_trimming(r):
    for i in range(1, 11):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    assert r.xadd("s", {"i": 11}, id="11-0", maxlen=5, approximate=False) == b"11-0"
    assert r.xlen("s") == 5
    assert r.xadd("s", {"i": 12}, id="12-0", minid="10", approximate=False) == b"12-0"
    assert [e[0] for e in r.xrange("s")] == [b"10-0", b"11-0", b"12-0"]
    # the new entry itself can be trimmed away
    assert r.xadd("s", {"i": 13}, id="13-0", minid="20", approximate=False) == b"13-0"
    assert r.xlen("s") == 0
    info = r.xinfo_stream("s")
    assert info["last-generated-id"] == b"13-0" and info["entries-added"] == 13


def test_approximate_trimming_works_on_whole_nodes(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1, 1001):
        pipe.xadd("s", {"f": "v"}, id=f"{i}-0")
    pipe.execute()
    assert r.xtrim("s", maxlen=950, approximate=True) == 0
    assert r.xtrim("s", maxlen=899, approximate=True) == 100
    assert r.xtrim("s", maxlen=0, approximate=True, limit=250) == 200
    assert r.xtrim("s", minid="651", approximate=True) == 300
    assert r.xlen("s") == 400
    assert r.xtrim("s", minid="651", approximate=False) == 50
    assert r.xinfo_stream("s")["recorded-first-entry-id"] == b"651-0"
    assert r.xtrim("missing", maxlen=0, approximate=False) == 0
    assert err(r, "XTRIM", "s", "LIMIT", "1") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    assert err(r, "XTRIM", "s", "MAXLEN") == "wrong number of arguments for 'xtrim' command"
    assert err(r, "XTRIM", "s", "FOO", "1") == "syntax error"
    assert err(r, "XTRIM", "s", "MAXLEN", "1", "LIMIT", "1") == "syntax error, LIMIT cannot be used without the special ~ option"


def config_set(r, name, value) -> None:
    r.config_set(name, value)


def test_node_size_config_at_runtime(r):
    config_set(r, "stream-node-max-entries", 10)
    try:
        for i in range(1, 101):
            r.xadd("s", {"f": "v"}, id=f"{i}-0")
        assert r.xinfo_stream("s")["radix-tree-keys"] == 10
        assert r.xtrim("s", maxlen=85, approximate=True) == 10
        r.config_set("stream-node-max-entries", 100)
        r.config_set("stream-node-max-bytes", 200)
        for i in range(101, 121):
            r.xadd("s", {"f": "x" * 50}, id=f"{i}-0")
        assert r.xinfo_stream("s")["radix-tree-keys"] == 9 + 7
    finally:
        r.config_set("stream-node-max-entries", 100)
        r.config_set("stream-node-max-bytes", 4096)


def test_xrange_and_xrevrange(r):
    for i in range(1, 6):
        r.xadd("s", {"i": i}, id=f"{i}-{i}")
    ids = lambda rows: [row[0] for row in rows]  # noqa: E731
    assert ids(r.xrange("s")) == [b"1-1", b"2-2", b"3-3", b"4-4", b"5-5"]
    assert ids(r.xrange("s", "2", "4")) == [b"2-2", b"3-3", b"4-4"]
    assert ids(r.xrange("s", "(2-2", "(5-5")) == [b"3-3", b"4-4"]
    assert ids(r.xrange("s", "-", "+", count=2)) == [b"1-1", b"2-2"]
    assert ids(r.xrevrange("s", "+", "-", count=2)) == [b"5-5", b"4-4"]
    assert ids(r.xrevrange("s", "4", "(2-2")) == [b"4-4", b"3-3"]
    assert r.xrange("missing") == []
    assert r.execute_command("XRANGE", "s", "-", "+", "COUNT", "0") is None
    assert r.execute_command("XRANGE", "s", "-", "+", "COUNT", "-5") is None
    assert err(r, "XRANGE", "s", "(-", "+") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XRANGE", "s", "(18446744073709551615-18446744073709551615", "+") == "invalid start ID for the interval"
    assert err(r, "XRANGE", "s", "-", "(0-0") == "invalid end ID for the interval"
    assert err(r, "XRANGE", "s", "-", "+", "COUNT") == "syntax error"
    assert err(r, "XRANGE", "s", "-", "+", "LIMIT", "1") == "syntax error"
    assert err(r, "XRANGE", "s", "-") == "wrong number of arguments for 'xrange' command"


def test_xlen_xdel_counters(r):
    assert r.xlen("s") == 0
    for i in range(1, 6):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    assert r.xdel("s", "1-0", "3-0", "9-0") == 2
    assert r.xdel("s", "3-0") == 0
    assert r.xdel("missing", "1-0") == 0
    assert err(r, "XDEL", "s", "-") == "Invalid stream ID specified as stream command argument"
    info = r.xinfo_stream("s")
    assert info["length"] == 3 and r.xlen("s") == 3
    assert info["max-deleted-entry-id"] == b"3-0"
    assert info["recorded-first-entry-id"] == b"2-0"
    assert info["entries-added"] == 5


def test_xsetid(r):
    r.xadd("s", {"f": "v"}, id="5-0")
    assert r.execute_command("XSETID", "s", "10-0", "ENTRIESADDED", "7", "MAXDELETEDID", "6-0") in (b"OK", "OK", True)
    info = r.xinfo_stream("s")
    assert (info["last-generated-id"], info["entries-added"], info["max-deleted-entry-id"]) == (b"10-0", 7, b"6-0")
    assert err(r, "XSETID", "s", "5-5") == "The ID specified in XSETID is smaller than current max_deleted_entry_id"
    assert err(r, "XSETID", "s", "11-0", "MAXDELETEDID", "12-0") == "The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
    assert err(r, "XSETID", "s", "11-0", "ENTRIESADDED", "-1") == "entries_added must be positive"
    assert err(r, "XSETID", "s", "11-0", "ENTRIESADDED", "0") == "The entries_added specified in XSETID is smaller than the target stream length"
    assert err(r, "XSETID", "s", "11-0", "FOO", "1") == "syntax error"
    assert err(r, "XSETID", "missing", "1-0") == "no such key"
    assert err(r, "XSETID", "s", "+") == "Invalid stream ID specified as stream command argument"
    r.xadd("t", {"f": "v"}, id="5-0")
    assert err(r, "XSETID", "t", "4-0") == "The ID specified in XSETID is smaller than the target stream top item"


def test_xread(r):
    assert raw(r, "XREAD", "STREAMS", "s", "0") is None
    for i in range(1, 4):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    r.xadd("t", {"j": 1}, id="7-0")
    reply = raw(r, "XREAD", "COUNT", "2", "STREAMS", "s", "t", "1-0", "0")
    s_entries = [[b"2-0", [b"i", b"2"]], [b"3-0", [b"i", b"3"]]]
    t_entries = [[b"7-0", [b"j", b"1"]]]
    if isinstance(reply, dict):  # RESP3: a map from key to entries
        assert reply == {b"s": s_entries, b"t": t_entries}
    else:
        assert reply == [[b"s", s_entries], [b"t", t_entries]]
    assert raw(r, "XREAD", "STREAMS", "s", "$") is None
    assert raw(r, "XREAD", "STREAMS", "missing", "0") is None
    last = raw(r, "XREAD", "STREAMS", "s", "+")  # Redis 7.4: the last entry
    flat = list(last.values())[0] if isinstance(last, dict) else last[0][1]
    assert [e[0] for e in flat] == [b"3-0"]
    assert err(r, "XREAD", "STREAMS", "s") == "wrong number of arguments for 'xread' command"
    assert err(r, "XREAD", "STREAMS", "s", "t", "0") == "Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must be specified."  # Redis 8's text
    assert err(r, "XREAD", "STREAMS", "s", ">") == "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
    assert err(r, "XREAD", "COUNT", "x", "STREAMS", "s", "0") == "value is not an integer or out of range"
    assert err(r, "XREAD", "BLOCK", "-1", "STREAMS", "s", "0") == "timeout is negative"
    assert err(r, "XREAD", "BLOCK", "x", "STREAMS", "s", "0") == "timeout is not an integer or out of range"
    assert err(r, "XREAD", "FOO", "STREAMS", "s", "0") == "syntax error"
    assert err(r, "XREAD", "GROUP", "g", "c", "STREAMS", "s", "0") == "The GROUP option is only supported by XREADGROUP. You called XREAD instead."
    r.set("str", "x")
    assert err(r, "XREAD", "STREAMS", "s", "str", "0", "0").startswith("WRONGTYPE")


def test_xinfo_stream(r):
    assert err(r, "XINFO", "STREAM", "missing") == "no such key"
    for i in range(1, 4):
        r.xadd("s", {"i": i}, id=f"{i}-0")
    info = r.xinfo_stream("s")
    assert info["length"] == 3
    assert info["radix-tree-keys"] == 1 and info["radix-tree-nodes"] == 2
    assert info["groups"] == 0
    assert info["first-entry"] == (b"1-0", {b"i": b"1"})
    assert info["last-entry"] == (b"3-0", {b"i": b"3"})
    full = raw(r, "XINFO", "STREAM", "s", "FULL")
    full = full if isinstance(full, dict) else dict(zip(full[0::2], full[1::2], strict=True))
    assert full[b"entries"] == [[b"1-0", [b"i", b"1"]], [b"2-0", [b"i", b"2"]], [b"3-0", [b"i", b"3"]]]
    assert full[b"groups"] == []
    assert list(full) == [
        b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id", b"max-deleted-entry-id",
        b"entries-added", b"recorded-first-entry-id", b"idmp-duration", b"idmp-maxsize", b"pids-tracked",
        b"iids-tracked", b"iids-added", b"iids-duplicates", b"entries", b"groups",
    ]  # Redis 8.6's IDMP fields are in FULL too (15 fields), placed as in the short reply
    one = raw(r, "XINFO", "STREAM", "s", "FULL", "COUNT", "1")
    one = one if isinstance(one, dict) else dict(zip(one[0::2], one[1::2], strict=True))
    assert len(one[b"entries"]) == 1
    assert err(r, "XINFO", "STREAM", "s", "FULL", "COUNT") == "unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
    assert err(r, "XINFO", "STREAM", "s", "PARTIAL") == "unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
    assert err(r, "XINFO", "STREAM") == "wrong number of arguments for 'xinfo|stream' command"
    assert err(r, "XINFO", "FOO", "s").startswith("unknown subcommand 'FOO'. Try XINFO HELP.")
    r.xtrim("s", maxlen=0)
    empty = r.xinfo_stream("s")
    assert empty["first-entry"] is None and empty["last-entry"] is None
    assert empty["recorded-first-entry-id"] == b"0-0"


def test_xinfo_help(r):
    lines = r.execute_command("XINFO", "HELP")
    assert lines[0] in (b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:", "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    assert len(lines) == 9


def test_generic_commands_on_streams(r):
    r.xadd("s", {"f": "v"}, id="1-0")
    assert r.type("s") == b"stream"
    r.set("str", "x")
    for cmd in (("XLEN", "str"), ("XRANGE", "str", "-", "+"), ("XDEL", "str", "1-0"), ("XTRIM", "str", "MAXLEN", "0"), ("XINFO", "STREAM", "str"), ("XSETID", "str", "1-0")):
        assert err(r, *cmd).startswith("WRONGTYPE"), cmd
    usage = r.memory_usage("s")
    assert isinstance(usage, int) and usage > 0
    assert r.memory_usage("missing") is None
    assert r.delete("s") == 1
    assert r.type("s") == b"none"


def test_keyspace_commands_treat_streams_as_values(r):
    r.xadd("s", {"f": "v"}, id="1-0")
    r.xadd("s", {"f": "w"}, id="2-0")
    r.set("str", "x")
    assert r.exists("s", "str", "missing") == 2
    assert sorted(r.scan_iter(_type="stream")) == [b"s"]
    assert sorted(r.scan_iter(_type="STREAM")) == [b"s"]
    assert r.rename("s", "t") is True
    assert r.type("s") == b"none" and r.xlen("t") == 2
    info = r.xinfo_stream("t")
    assert (info["last-generated-id"], info["entries-added"]) == (b"2-0", 2)
    assert r.rename("t", "str") is True  # overwrites the string
    assert r.type("str") == b"stream"
    assert r.pexpire("str", 400) is True
    assert 0 < r.pttl("str") <= 400
    for _ in range(500):
        if r.type("str") == b"none":
            break
        time.sleep(0.01)
    assert r.type("str") == b"none"
    assert r.xlen("str") == 0
    r.xadd("u", {"f": "v"}, id="1-0")
    r.expire("u", 100)
    r.xadd("u", {"f": "v"}, id="2-0")
    assert r.ttl("u") > 0  # XADD to an existing stream keeps its TTL


def test_memory_usage_grows_slowly_per_entry(r):
    pipe = r.pipeline(transaction=False)
    for i in range(5000):
        pipe.xadd("s", {"sensor-id": "1234", "temperature": "10.5"}, id=f"{1700000000000 + i}-0")
    pipe.execute()
    assert r.memory_usage("s") / 5000 < 40


def test_copy_makes_an_independent_stream(r):
    pipe = r.pipeline(transaction=False)
    for i in range(1, 251):
        pipe.xadd("s", {"f": i}, id=f"{i}-0")
    pipe.execute()
    r.xdel("s", "7-0")
    assert r.copy("s", "c") is True
    assert r.xinfo_stream("c") == r.xinfo_stream("s")
    r.xdel("c", "5-0", "150-0", "250-0")  # in sealed and open nodes of the copy
    r.xadd("c", {"f": "new"}, id="300-0")
    r.xtrim("c", maxlen=100, approximate=False)
    assert r.xlen("s") == 249 and r.xlen("c") == 100
    assert r.xrange("s", "5-0", "5-0") == [(b"5-0", {b"f": b"5"})]
    assert r.xrange("s", "150-0", "150-0") == [(b"150-0", {b"f": b"150"})]
    assert r.xinfo_stream("s")["last-generated-id"] == b"250-0"


def test_range_reply_cache_matches_the_encoder():
    """XRANGE's pre-encoded replies (cached per sealed node) are the encoder's bytes for the same
    entries, also after XDEL, trimming and reopening change the nodes the cache holds."""
    import random

    from protocol.encoder import encode
    from server.commands.streams import entries_reply, range_reply
    from storage.stream import Stream
    from storage.stream_id import MAX_ID

    rnd = random.Random(7)
    s = Stream()
    now = 1700000000000
    for step in range(4000):
        now += rnd.choice([0, 0, 1])
        flat = [b"sensor-id", b"%d" % rnd.randint(0, 9), b"temperature", b"10.5"] if rnd.random() < 0.9 else [b"x", b"y" * 50]
        s.add(now, flat, 10, 4096)
        if step % 50 == 49:
            ids = [entry_id for entry_id, _flat in s.range(0, MAX_ID)]
            lo, hi = sorted(rnd.sample(ids, 2))
            for start, end, count, rev in ((0, MAX_ID, 10, False), (0, MAX_ID, None, True), (lo, hi, None, False), (lo, hi, 7, True), (lo, hi, 3, False)):
                assert range_reply(s, start, end, count, rev) == encode(entries_reply(s.range(start, end, count, rev)))
            s.delete(rnd.sample(ids, 3))
            if step % 200 == 199:
                s.trim(maxlen=len(s) - 15)
            if step % 1000 == 999:
                s = Stream.load(s.dump())  # every node sealed, the tail reopened by the next add
    assert range_reply(s, 5, 4, None, False) == b"*0\r\n"
