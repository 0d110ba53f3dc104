"""Consumption-based retention through redis-py: commands, errors, rules, the cron, Redis's counters.

The random model (tests/test_retention_model.py) checks the rules over long
workloads; here each rule and each error has its own small case, plain
streams are compared field for field with Redis 8.2 (a policy adds fields only
where one is set), and the counters Redis defines (entries-added, first ID,
max-deleted-entry-id, entries-read, lag) are compared with Redis 8.2 doing
the same trims by hand.
"""

from __future__ import annotations

import time

import pytest
import redis

from persistence.snapshot import decode_value, encode_value
from storage import retention as store
from storage.consumer_group import ConsumerGroup
from storage.stream import Stream
from tests.redis8_fields import without_newer_fields
from tests.test_groups import as_map, raw


@pytest.fixture
def x(server):
    """One entry per node, so that "whole nodes" are single entries (test_whole_nodes_go sets its own size)."""
    client = raw(server.client(protocol=2))
    client.flushall()
    client.config_set("stream-node-max-entries", 1)
    yield client
    client.close()


def ids(client, key=b"s") -> list[bytes]:
    return [entry[0] for entry in client.execute_command("XRANGE", key, "-", "+")]


def fill(client, n: int, key=b"s", start: int = 1) -> None:
    for i in range(start, start + n):
        client.execute_command("XADD", key, f"{i}-0", "f", str(i))


def get(client, key=b"s") -> dict:
    return as_map(client.execute_command("XRETENTION", "GET", key))


def groups(client, key=b"s") -> dict:
    return {as_map(g)[b"name"]: as_map(g) for g in client.execute_command("XINFO", "GROUPS", key)}


def stats(client) -> dict:
    return client.info("stats")


# -- commands and errors -----------------------------------------------------------


def test_help_and_get_without_a_policy(x):
    lines = x.execute_command("XRETENTION", "HELP")
    assert lines[0].startswith(b"XRETENTION <subcommand>") and lines[-2:] == [b"HELP", b"    Print this help."]
    fill(x, 3)
    assert x.execute_command("XRETENTION", "GET", "s") is None
    assert x.execute_command("XRETENTION", "OFF", "s") == 0
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        x.execute_command("XRETENTION", "GET", "nosuch")
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        x.execute_command("XRETENTION", "SET", "nosuch", "CONSUMPTION")
    x.set("str", "v")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        x.execute_command("XRETENTION", "SET", "str", "CONSUMPTION")
    with pytest.raises(redis.ResponseError, match="unknown subcommand 'FOO'. Try XRETENTION HELP."):
        x.execute_command("XRETENTION", "FOO", "s")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["LIMITS"], "^syntax error$"),
        (["CONSUMPTION", "MIN-LEN"], "^syntax error$"),
        (["CONSUMPTION", "MIN-COUNT", "3"], "^syntax error$"),
        (["CONSUMPTION", "MIN-LEN", "x"], "^value is not an integer or out of range$"),
        (["CONSUMPTION", "MAX-BYTES", "-1"], r"^The MAX-BYTES argument must be >= 0\.$"),
        (["CONSUMPTION", "MIN-LEN", "3", "MIN-AGE", "5"], "^syntax error, MIN-LEN and MIN-AGE options at the same time are not compatible$"),
        (["CONSUMPTION", "MAX-AGE", "3", "MAX-AGE", "5"], "^syntax error, MAX-AGE and MAX-AGE options at the same time are not compatible$"),
        (["CONSUMPTION", "MIN-LEN", "5", "MAX-LEN", "4"], "^MIN-LEN must not be greater than MAX-LEN$"),
    ],
)
def test_set_errors_change_nothing(x, args, error):
    fill(x, 3)
    with pytest.raises(redis.ResponseError, match=error):
        x.execute_command("XRETENTION", "SET", "s", *args)
    assert x.execute_command("XRETENTION", "GET", "s") is None


def test_set_get_off(x):
    fill(x, 3)
    assert x.execute_command("XRETENTION", "SET", "s", "consumption", "min-len", "2", "max-age", "1000") == b"OK"
    info = get(x)
    assert info[b"policy"] == b"consumption"
    assert info[b"min"] == [b"MIN-LEN", 2] and info[b"max"] == [b"MAX-AGE", 1000]
    assert info[b"holder"] is None and info[b"subscribers"] == 0
    # ms 1..3 are ancient: MAX-AGE removes them all (MAX wins over MIN)
    assert ids(x) == [] and info[b"entries-truncated"] == 3 and info[b"entries-lost"] == 0
    assert info[b"last-run"] > 0
    # different dimensions may be combined in any way; MIN <= MAX is checked within one
    assert x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", "5", "MAX-BYTES", "4") == b"OK"
    assert x.execute_command("XRETENTION", "OFF", "s") == 1
    assert x.execute_command("XRETENTION", "GET", "s") is None


def test_setconfig_and_release_errors(x):
    fill(x, 5)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    for args, error in [
        (["SUBSCRIBER", "SOMETIMES"], "^SUBSCRIBER must be AUTO, MANUAL or NONE$"),
        (["COLOR", "red"], "^Unrecognized XGROUP SETCONFIG option 'COLOR'$"),
        (["SUBSCRIBER", "AUTO", "SUBSCRIBER", "NONE"], "^XGROUP SETCONFIG option 'SUBSCRIBER' given twice$"),
    ]:
        with pytest.raises(redis.ResponseError, match=error):
            x.execute_command("XGROUP", "SETCONFIG", "s", "g", *args)
    with pytest.raises(redis.ResponseError, match="wrong number of arguments"):
        x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER")
    with pytest.raises(redis.ResponseError, match="^NOGROUP No such consumer group 'h' for key name 's'$"):
        x.execute_command("XGROUP", "SETCONFIG", "s", "h", "SUBSCRIBER", "AUTO")
    with pytest.raises(redis.ResponseError, match="^the consumer group is not a MANUAL subscriber$"):
        x.execute_command("XGROUP", "RELEASE", "s", "g", "2-0")
    assert x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "manual") == b"OK"
    assert x.execute_command("XGROUP", "RELEASE", "s", "g", "3-0") == b"OK"
    assert x.execute_command("XGROUP", "RELEASE", "s", "g", "3-0") == b"OK"  # the same point: no change
    with pytest.raises(redis.ResponseError, match="^release id is lower than the current one$"):
        x.execute_command("XGROUP", "RELEASE", "s", "g", "2-5")
    with pytest.raises(redis.ResponseError, match="^release id is greater than the stream's last ID$"):
        x.execute_command("XGROUP", "RELEASE", "s", "g", "6-0")
    with pytest.raises(redis.ResponseError, match="Invalid stream ID"):
        x.execute_command("XGROUP", "RELEASE", "s", "g", "x")
    assert x.execute_command("XGROUP", "RELEASE", "s", "g", "$") == b"OK"
    with pytest.raises(redis.ResponseError, match="^XRETENTION SETSTATE is for replication and AOF loading only$"):
        x.execute_command("XRETENTION", "SETSTATE", "s", "ENTRIES-TRUNCATED", "1", "ENTRIES-LOST", "0", "LAST-RUN", "0")
    fields = stats(x)
    assert fields["stream_release_updates"] >= 2 and fields["stream_release_rejected"] >= 3


# -- the rules ---------------------------------------------------------------------


def test_auto_subscriber_holds_pending_entries_until_acked(x):
    fill(x, 6)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    assert len(ids(x)) == 6  # nothing delivered yet
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "4", "STREAMS", "s", ">")
    assert len(ids(x)) == 6  # delivered but pending: still claimable
    x.execute_command("XACK", "s", "g", "2-0", "3-0")
    assert len(ids(x)) == 6  # 1-0 is still pending: the ack floor has not moved
    x.execute_command("XACK", "s", "g", "1-0")
    assert ids(x) == [b"4-0", b"5-0", b"6-0"]
    assert x.execute_command("XCLAIM", "s", "g", "other", "0", "4-0", "JUSTID") == [b"4-0"]
    x.execute_command("XACK", "s", "g", "4-0")
    assert ids(x) == [b"5-0", b"6-0"]
    info = get(x)
    assert info[b"holder"] == b"g" and info[b"entries-truncated"] == 4 and info[b"entries-lost"] == 0
    group = groups(x)[b"g"]
    assert (group[b"subscriber"], group[b"release-id"], group[b"entries-lost"], group[b"lag"]) == (b"auto", b"4-0", 0, 2)


def test_the_lowest_subscriber_holds_the_head_and_non_subscribers_lose(x):
    fill(x, 8)
    for name in ("a", "m", "n"):
        x.execute_command("XGROUP", "CREATE", "s", name, "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "a", "SUBSCRIBER", "AUTO")
    x.execute_command("XGROUP", "SETCONFIG", "s", "m", "SUBSCRIBER", "MANUAL")
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    x.execute_command("XREADGROUP", "GROUP", "a", "c", "COUNT", "6", "STREAMS", "s", ">")
    x.execute_command("XACK", "s", "a", *[f"{i}-0" for i in range(1, 7)])
    assert len(ids(x)) == 8 and get(x)[b"holder"] == b"m"  # m released nothing yet
    x.execute_command("XGROUP", "RELEASE", "s", "m", "4-0")
    assert ids(x)[0] == b"5-0" and get(x)[b"holder"] == b"m"
    x.execute_command("XGROUP", "RELEASE", "s", "m", "7-0")
    assert ids(x)[0] == b"7-0" and get(x)[b"holder"] == b"a"
    # n, a non-subscriber, never read: the six entries it never saw are its loss, not the stream's
    info = groups(x)
    assert info[b"n"][b"entries-lost"] == 6 and info[b"n"][b"subscriber"] == b"none" and info[b"n"][b"release-id"] is None
    assert info[b"n"][b"lag"] == 2  # Redis's rule: behind the first entry, lag is the length
    assert get(x)[b"entries-lost"] == 0


def test_min_moves_the_point_back_and_max_forward_counting_losses(x):
    fill(x, 10)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    x.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", "9", "STREAMS", "s", ">")
    x.execute_command("XACK", "s", "g", *[f"{i}-0" for i in range(1, 10)])
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", "3")
    assert ids(x) == [b"8-0", b"9-0", b"10-0"]  # consumed up to 9, MIN keeps three
    fill(x, 10, start=11)  # nobody reads: the subscriber holds 10-0 onwards
    assert len(ids(x)) == 11
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", "3", "MAX-LEN", "5")
    assert ids(x) == [b"16-0", b"17-0", b"18-0", b"19-0", b"20-0"]
    # 10..15 were forced out: 6 entries the subscriber had not processed
    assert get(x)[b"entries-lost"] == 6 and groups(x)[b"g"][b"entries-lost"] == 6
    assert stats(x)["stream_retention_lost_entries"] == 6


def test_subscribers_and_min_free_whole_nodes_max_is_exact(x):
    x.config_set("stream-node-max-entries", 3)
    fill(x, 9)  # nodes 1-3, 4-6, 7-9
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "MANUAL")
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    x.execute_command("XGROUP", "RELEASE", "s", "g", "2-0")
    assert len(ids(x)) == 9  # 3-0 holds its node
    x.execute_command("XGROUP", "RELEASE", "s", "g", "5-0")
    assert ids(x)[0] == b"4-0"  # the first node went whole; 6-0 holds the second
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", "2")
    assert ids(x) == [b"8-0", b"9-0"]  # MAX cuts exactly, inside a node
    assert groups(x)[b"g"][b"entries-lost"] == 2  # 6-0 and 7-0 were not released


def test_without_subscribers_only_the_limits_apply(x):
    fill(x, 6)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")  # NONE: holds nothing
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    assert len(ids(x)) == 6  # no MIN: nothing counts as consumed (no delete-on-publish)
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", "4")
    assert ids(x) == [b"3-0", b"4-0", b"5-0", b"6-0"]  # Pravega's plain policy: keep MIN
    fill(x, 1, start=7)
    assert ids(x) == [b"4-0", b"5-0", b"6-0", b"7-0"]


def test_explicit_trims_keep_their_meaning_under_a_policy(x):
    fill(x, 6)
    x.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    assert x.execute_command("XTRIM", "s", "MAXLEN", "4") == 2  # the subscriber holds all: still trimmed
    assert x.execute_command("XDEL", "s", "4-0") == 1
    x.execute_command("XADD", "s", "MINID", "5-0", "7-0", "f", "7")
    assert ids(x) == [b"5-0", b"6-0", b"7-0"]
    assert get(x)[b"entries-truncated"] == 0  # none of that was the policy's


def test_byte_limits_follow_memory_usage(x):
    for i in range(1, 61):
        x.execute_command("XADD", "s", f"{i}-0", "f", "v" * 100)
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-BYTES", "8000")
    usage = x.execute_command("MEMORY", "USAGE", "s")
    assert usage <= 8000
    kept = ids(x)
    assert 0 < len(kept) < 60 and kept[-1] == b"60-0"
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-BYTES", "6000")  # no subscriber: keep MIN
    assert x.execute_command("MEMORY", "USAGE", "s") >= 6000
    assert len(ids(x)) <= len(kept)


def test_idle_streams_shrink_on_the_cron(x):
    now = int(time.time() * 1000)
    for i in range(5):
        x.execute_command("XADD", "s", f"{now - 1000 + 300 * i}-0", "f", str(i))
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-AGE", "1500")
    assert len(ids(x)) == 5
    runs = stats(x)["stream_retention_runs"]
    deadline = time.monotonic() + 10
    while len(ids(x)) == 5 and time.monotonic() < deadline:
        time.sleep(0.05)  # no write: only the cron can trim
    assert len(ids(x)) < 5
    assert stats(x)["stream_retention_runs"] > runs
    assert stats(x)["stream_retention_truncated_entries"] >= 1


def test_retention_inside_multi_exec(x):
    fill(x, 3)
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", "2")
    pipe = x.pipeline(transaction=True)
    pipe.execute_command("XADD", "s", "4-0", "f", "4")
    pipe.execute_command("XLEN", "s")
    assert pipe.execute() == [b"4-0", 2]


# -- plain streams and Redis's counters ----------------------------------------------


def test_plain_streams_answer_as_redis(x, oracle):
    for client in (x, raw(oracle)):
        fill(client, 4)
        client.execute_command("XGROUP", "CREATE", "s", "g", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")  # a role, but no policy
    mine = as_map(without_newer_fields(x.execute_command("XINFO", "STREAM", "s")))
    theirs = as_map(oracle.execute_command("XINFO", "STREAM", "s"))
    assert list(mine) == list(theirs)
    assert list(groups(x)[b"g"]) == list(as_map(oracle.execute_command("XINFO", "GROUPS", "s")[0]))
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION")
    assert b"retention-policy" in as_map(x.execute_command("XINFO", "STREAM", "s"))
    assert b"subscriber" in groups(x)[b"g"]


def test_counters_after_retention_trims_are_redis_s(x, oracle):
    """Redis 8.2 given the same writes and, after each, `XTRIM MINID` at our first entry reports the same counters."""
    o = raw(oracle)
    o.flushall()
    for client in (x, o):
        fill(client, 3)
        client.execute_command("XGROUP", "CREATE", "s", "sub", "0")
        client.execute_command("XGROUP", "CREATE", "s", "late", "0")
        client.execute_command("XGROUP", "CREATE", "s", "fast", "0")
    x.execute_command("XGROUP", "SETCONFIG", "s", "sub", "SUBSCRIBER", "AUTO")
    x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", "6")
    script = [
        ("XADD", "s", "4-0", "f", "4"), ("XREADGROUP", "GROUP", "sub", "c", "COUNT", "2", "STREAMS", "s", ">"),
        ("XREADGROUP", "GROUP", "fast", "c", "STREAMS", "s", ">"), ("XACK", "s", "sub", "1-0", "2-0"),
        ("XDEL", "s", "4-0"), ("XADD", "s", "5-0", "f", "5"), ("XADD", "s", "6-0", "f", "6"),
        ("XREADGROUP", "GROUP", "sub", "c", "STREAMS", "s", ">"), ("XACK", "s", "sub", "3-0", "5-0"),
        *[("XADD", "s", f"{i}-0", "f", str(i)) for i in range(7, 16)],
        ("XREADGROUP", "GROUP", "late", "c", "COUNT", "2", "STREAMS", "s", ">"),
    ]  # fmt: skip
    for command in script:
        x.execute_command(*command)
        o.execute_command(*command)
        first = ids(x)
        o.execute_command("XTRIM", "s", "MINID", first[0] if first else "16-0")
        assert ids(o) == first
        mine, theirs = as_map(x.execute_command("XINFO", "STREAM", "s")), as_map(o.execute_command("XINFO", "STREAM", "s"))
        for field in (b"length", b"last-generated-id", b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id", b"first-entry", b"last-entry"):
            assert mine[field] == theirs[field], (command, field)
        for name, group in groups(x).items():
            expected = as_map(next(g for g in o.execute_command("XINFO", "GROUPS", "s") if as_map(g)[b"name"] == name))
            for field in (b"pending", b"last-delivered-id", b"entries-read", b"lag"):
                assert group[field] == expected[field], (command, name, field)
    assert get(x)[b"entries-truncated"] > 0


# -- the snapshot ----------------------------------------------------------------------


def test_snapshots_without_retention_still_load_and_roles_of_destroyed_groups_go():
    stream = Stream()
    stream.add(5, [b"f", b"v"])
    group = stream.groups[b"g"] = ConsumerGroup(0)
    retention = store.of(stream)
    retention.policy = ((b"len", 1), None)
    retention.role_for(stream, b"g", group).mode = store.MANUAL
    kind, payload = encode_value(stream)
    assert len(payload) == 3  # the optional retention map
    loaded = decode_value(kind, payload)
    assert loaded.retention.policy == ((b"len", 1), None) and loaded.retention.roles[b"g"].mode == store.MANUAL
    assert loaded.retention.roles[b"g"].group is loaded.groups[b"g"]
    older = decode_value(kind, payload[:2])  # a file written before retention existed
    assert older.retention is None and len(older) == 1
    del stream.groups[b"g"]
    retention.policy = None
    assert len(encode_value(stream)[1]) == 2  # nothing left to keep: the old form


def test_the_byte_meter_matches_memory_usage_node_by_node():
    """The cached node sizes byte limits use equal a fresh measure after every append, XDEL and trim."""
    import random
    import sys

    from storage.stream import node_memory

    rng = random.Random(24)
    stream = Stream()
    meter = store.ByteMeter()
    next_ms = 1
    for step in range(3000):
        roll = rng.random()
        if roll < 0.7 or not len(stream):
            next_ms += rng.randint(0, 2)
            stream.add(next_ms, [b"f", b"v" * rng.choice((1, 30, 300))], max_entries=rng.choice((5, 100)))
        elif roll < 0.8:
            live = [i for i, _ in stream.range(0, (1 << 128) - 1)]
            stream.delete(rng.sample(live, min(len(live), rng.randint(1, 3))))
        elif roll < 0.9:
            stream.trim(maxlen=rng.randint(len(stream) // 2, len(stream)))
        else:
            stream.trim(maxlen=rng.randint(0, len(stream)), approx=True, limit=100)
        if rng.random() < 0.5:
            continue  # several changes between two runs too
        expected = [node_memory(node) + sys.getsizeof(key) for node, key in zip(stream.nodes, stream.keys, strict=True)]
        assert meter.sizes(stream) == expected, step
        assert stream.fixed_memory() + sum(map(node_memory, stream.nodes)) == stream.memory_usage()


def test_the_example_keeps_memory_flat_while_the_consumer_keeps_up(server):
    """examples/retention_flat_memory.py: while billing consumes, XLEN and MEMORY USAGE stay flat as entries go
    through; once it stops, the stream grows to MAX-BYTES and no further."""
    from examples.retention_flat_memory import run

    client = server.client()
    client.flushall()
    client.config_set("stream-node-max-entries", 100)
    samples = run(client, 6.0, report=lambda line: None)
    consuming = [s for s in samples if s[4]]
    stopped = [s for s in samples if not s[4]]
    assert consuming and stopped
    assert consuming[-1][1] > 5 * consuming[-1][2]  # many more entries went through than the stream holds
    assert max(s[3] for s in consuming) < 500_000  # flat: far below MAX-BYTES while billing keeps up
    assert max(s[3] for s in samples) <= 2_000_000  # never past MAX-BYTES


def test_a_retention_trim_sends_xtrim_like_xtrim_does(server, x):
    listener = server.client()
    x.config_set("notify-keyspace-events", "Et")
    pubsub = listener.pubsub()
    pubsub.subscribe("__keyevent@0__:xtrim", "__keyevent@0__:xadd")
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    try:
        fill(x, 3)
        x.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-LEN", "3")
        x.execute_command("XADD", "s", "4-0", "f", "4")  # xadd, then the policy's xtrim
        events = []
        while (message := pubsub.get_message(timeout=2)) is not None:
            if message["type"] == "message":
                events.append((message["channel"], message["data"]))
        assert events[-2:] == [(b"__keyevent@0__:xadd", b"s"), (b"__keyevent@0__:xtrim", b"s")]
        assert ids(x) == [b"2-0", b"3-0", b"4-0"]
    finally:
        x.config_set("notify-keyspace-events", "")
        pubsub.close()
        listener.close()
