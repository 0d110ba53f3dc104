"""pipeline/options.py and pipeline/option_names.py in-process (no server, no Spark):
every option's parsing, defaults, bounds and exact error text, and the name check's
answer for every valid, Spark-own and Kafka option name, on reads and on writes."""

from __future__ import annotations

import difflib
import random

import pytest

from pipeline import option_names
from pipeline.option_names import KAFKA, READ, SPARK_OWN, WRITE, check_names
from pipeline.options import (
    DEFAULT_READ_COUNT,
    DEFAULT_URL,
    DEFAULT_WRITE_BATCH,
    Connection,
    OptionError,
    Position,
    SourceOptions,
    connection_from,
    read_options,
    write_options,
)

U64 = 2**64 - 1


def _err(fn, *args, **kwargs) -> str:
    with pytest.raises(OptionError) as excinfo:
        fn(*args, **kwargs)
    assert isinstance(excinfo.value, ValueError)
    return str(excinfo.value)


def test_defaults():
    assert (DEFAULT_URL, DEFAULT_READ_COUNT, DEFAULT_WRITE_BATCH) == ("redis://127.0.0.1:6379", 1000, 1000)
    c = connection_from({})
    assert c == Connection(None, "127.0.0.1", 6379, None, None, 0, False, 30.0, (), "mymaster")
    assert c.describe() == "redis://127.0.0.1:6379/0"
    r = read_options({"streams": "a"}, streaming=False)
    assert r == SourceOptions(connection=c, streams=("a",), starting={"a": Position("earliest")}, ending={"a": Position("latest")})
    assert (r.starting_timestamp, r.num_partitions, r.read_count, r.max_records_per_trigger, r.fail_on_data_loss, r.group) == (
        None, None, 1000, None, True, None)
    assert read_options({"streams": "a"}, streaming=True).starting == {"a": Position("latest")}
    w = write_options({})
    assert (w.stream, w.maxlen, w.minid, w.approximate, w.write_batch_size, w.exactly_once, w.write_id, w.connection) == (
        None, None, None, False, 1000, "auto", None, c)
    assert Position("earliest").id == 0


def test_connection_pieces_and_describe():
    c = connection_from({"host": "h", "port": "7", "username": "u", "password": "p", "db": "3", "ssl": "yes", "timeout": "2.5",
                         "sentinelmaster": "m"})
    assert c == Connection(None, "h", 7, "u", "p", 3, True, 2.5, (), "m")
    assert c.describe() == "rediss://h:7/3"
    assert connection_from({"host": "", "username": "", "password": "", "sentinelmaster": "", "timeout": ""}) == Connection()
    assert connection_from({"url": "redis://x:1/2"}).describe() == "redis://x:1/2"
    assert connection_from({"url": "rediss://u:secret@x:1"}).describe() == "rediss://u:***@x:1"
    assert connection_from({"url": "unix://:pw@/tmp/s"}).describe() == "unix://:***@/tmp/s"
    assert connection_from({"url": "redis://secret@x:1"}).describe() == "redis://:***@x:1"
    assert connection_from({"url": "redis://a:b:c@d@x:1"}).describe() == "redis://a:***@x:1"
    assert connection_from({"url": ""}).url is None
    # a second "://" after the credentials (in a query string) is the host part's
    assert connection_from({"url": "redis://u:pw@h:1/0?x=a://b"}).describe() == "redis://u:***@h:1/0?x=a://b"
    msg = _err(connection_from, {"url": "http://u:pw@x"})
    assert msg == "option 'url' must start with redis://, rediss:// or unix://, got 'http://u:***@x'"
    assert _err(connection_from, {"url": "x@y"}) == "option 'url' must start with redis://, rediss:// or unix://, got 'x@y'"
    assert _err(connection_from, {"timeout": "soon"}) == "option 'timeout' must be a number of seconds, got 'soon'"
    s = connection_from({"sentinel": " a:1, ,b:c:65535,", "sentinelmaster": "mm"})
    assert s.sentinels == (("a", 1), ("b:c", 65535))
    assert s.describe() == "the primary of 'mm' at sentinels a:1,b:c:65535"
    for bad in ("a:0", "a:65536", ":1", "a:", "a", "a:x", "a:-1"):
        assert _err(connection_from, {"sentinel": f"ok:1, {bad} "}) == (
            f"option 'sentinel' must be host:port[,host:port...], got {bad!r}")
    assert connection_from({"sentinel": ""}).sentinels == ()


@pytest.mark.parametrize("seed", range(3))
def test_int_and_bool_options_against_a_model(seed):
    rng = random.Random(seed)
    ints = {"port": (6379, 1), "db": (0, 0)}
    for _ in range(300):
        name = rng.choice(["port", "db", "ssl"])
        raw = rng.choice(["", "0", "1", "2", "-1", "65535", "x", "1.5", " 3", "true", "TRUE", " Yes ", "on", "off", "No", "FALSE",
                          "0 ", "y", "t"])
        options = {name: raw}
        if name == "ssl":
            low = raw.strip().lower()
            if raw == "":
                assert connection_from(options).ssl is False
            elif low in ("true", "1", "yes", "on"):
                assert connection_from(options).ssl is True
            elif low in ("false", "0", "no", "off"):
                assert connection_from(options).ssl is False
            else:
                assert _err(connection_from, options) == f"option 'ssl' must be true or false, got {raw!r}"
            continue
        default, minimum = ints[name]
        if raw == "":
            assert getattr(connection_from(options), name) == default
            continue
        try:
            value = int(raw)
        except ValueError:
            assert _err(connection_from, options) == f"option '{name}' must be an integer, got {raw!r}"
            continue
        if value < minimum:
            assert _err(connection_from, options) == f"option '{name}' must be >= {minimum}, got {value}"
        else:
            assert getattr(connection_from(options), name) == value


def test_read_option_bounds_and_aliases():
    base = {"streams": "a"}
    for key, attr, minimum in (("numpartitions", "num_partitions", 1), ("readcount", "read_count", 1),
                               ("maxrecordspertrigger", "max_records_per_trigger", 1),
                               ("maxoffsetspertrigger", "max_records_per_trigger", 1),
                               ("startingtimestamp", "starting_timestamp", 0)):
        spelled = next(n for n in READ if n.lower() == key)
        assert getattr(read_options({**base, key: str(minimum)}, streaming=True), attr) == minimum
        assert getattr(read_options({**base, key: str(minimum + 7)}, streaming=True), attr) == minimum + 7
        assert _err(read_options, {**base, key: str(minimum - 1)}, streaming=True) == (
            f"option '{spelled}' must be >= {minimum}, got {minimum - 1}")
    both = read_options({**base, "maxrecordspertrigger": "3", "maxoffsetspertrigger": "9"}, streaming=True)
    assert both.max_records_per_trigger == 3
    assert read_options({**base, "maxrecordspertrigger": "", "maxoffsetspertrigger": "9"}, streaming=True).max_records_per_trigger == 9
    assert read_options({**base, "failondataloss": "False"}, streaming=True).fail_on_data_loss is False
    assert read_options({**base, "group": "g"}, streaming=True).group == "g"
    assert read_options({**base, "group": ""}, streaming=True).group is None
    # Spark hands options as any mapping with any case; None is an empty value
    mixed = read_options({"Streams": " a , b ,", "ReadCount": 5, "group": None}.items(), streaming=False)
    assert (mixed.streams, mixed.read_count, mixed.group) == (("a", "b"), 5, None)
    assert _err(read_options, {**base, "failondataloss": "sometimes"}, streaming=True) == (
        "option 'failOnDataLoss' must be true or false, got 'sometimes'")
    assert read_options({"stream": "s"}, streaming=False).streams == ("s",)
    assert read_options({"streams": "a", "stream": "s"}, streaming=False).streams == ("a",)
    assert _err(read_options, {"streams": " , "}, streaming=False) == (
        "option 'streams' is required: a comma-separated list of stream keys to read")
    assert _err(read_options, {"path": "p"}, streaming=False).startswith("option 'streams' is required")
    assert _err(read_options, {"streams": "a,b, a"}, streaming=False) == "option 'streams' lists a stream twice: 'a,b, a'"
    assert _err(read_options, {"streams": "a", "endingoffsets": "latest"}, streaming=True) == (
        "option 'endingOffsets' is for batch reads only; a streaming read has no end")
    assert read_options({"streams": "a", "startingoffsets": "latest"}, streaming=False).starting == {"a": Position("latest")}
    assert _err(read_options, {"streams": "a", "startingoffset": "1"}, streaming=True).startswith(
        "unknown option 'startingoffset' for a Millrace streaming read; did you mean 'startingOffsets'?")
    assert _err(read_options, {"streams": "a", "startingoffset": "1"}, streaming=False).startswith(
        "unknown option 'startingoffset' for a Millrace read; did you mean 'startingOffsets'?")


def test_positions():
    streams = {"streams": "a,b"}
    for spelled in ("earliest", " EARLIEST ", "Latest"):
        got = read_options({**streams, "startingoffsets": spelled}, streaming=True).starting
        assert got == {"a": Position(spelled.strip().lower()), "b": Position(spelled.strip().lower())}
    got = read_options({**streams, "startingoffsets": " ", "endingoffsets": '{"b": "5-1"}'}, streaming=False)
    assert got.starting == {"a": Position("earliest"), "b": Position("earliest")}
    assert got.ending == {"a": Position("latest"), "b": Position("id", 5 * 2**64 + 1)}
    spec = '{"a": -2, "b": -1}'
    assert read_options({**streams, "startingoffsets": spec}, streaming=True).starting == {"a": Position("earliest"), "b": Position("latest")}
    spec = '{"a": "LATEST", "b": 7}'
    assert read_options({**streams, "startingoffsets": spec}, streaming=True).starting == {"a": Position("latest"), "b": Position("id", 7 * 2**64)}
    got = read_options({**streams, "startingoffsets": '{"b": "1-1"}'}, streaming=False).starting
    assert got == {"a": Position("earliest"), "b": Position("id", 2**64 + 1)}  # the batch default for the others
    spec = '{"a": "earliest"}'
    assert read_options({**streams, "startingoffsets": spec}, streaming=True).starting == {"a": Position("earliest"), "b": Position("latest")}
    for bad in ('{"a": -3}', '{"a": "x"}', '{"a": null}', '{"a": "1-2-3"}', f'{{"a": "{U64 + 1}-0"}}'):
        value = eval(bad.replace("null", "None"))["a"]
        assert _err(read_options, {**streams, "startingoffsets": bad}, streaming=True) == (
            f"option 'startingOffsets': bad position {value!r} for stream 'a' "
            "(use earliest, latest, or a stream ID such as 1700000000000-0)")
    assert _err(read_options, {**streams, "endingoffsets": "soon"}, streaming=False) == (
        "option 'endingOffsets' must be earliest, latest, or JSON like {\"stream\": \"1700000000000-0\"}, got 'soon'")
    assert _err(read_options, {**streams, "startingoffsets": "[1]"}, streaming=False) == (
        "option 'startingOffsets' must be a JSON object mapping stream names to IDs, got '[1]'")
    assert _err(read_options, {**streams, "startingoffsets": '{"z": 1, "c": 2, "a": 1}'}, streaming=False) == (
        "option 'startingOffsets' names streams not listed in option 'streams': c, z")


def test_write_options():
    w = write_options({"streams": "s", "maxlen": "0", "approximate": "on", "writebatchsize": "1", "writeid": "w", "exactlyonce": " TRUE "})
    assert (w.stream, w.maxlen, w.minid, w.approximate, w.write_batch_size, w.exactly_once, w.write_id) == ("s", 0, None, True, 1, "true", "w")
    assert write_options({"stream": "t", "streams": "s"}).stream == "t"
    assert write_options({"stream": "", "streams": ""}).stream is None
    assert write_options({"minid": "5"}).minid == 5 * 2**64
    assert write_options({"minid": "5-3"}).minid == 5 * 2**64 + 3
    assert write_options({"minid": ""}).minid is None
    assert _err(write_options, {"minid": "5-"}) == "option 'minid' must be a stream ID such as 1700000000000-0, got '5-'"
    assert _err(write_options, {"maxlen": "-1"}) == "option 'maxlen' must be >= 0, got -1"
    assert _err(write_options, {"writebatchsize": "0"}) == "option 'writeBatchSize' must be >= 1, got 0"
    assert _err(write_options, {"maxlen": "1", "minid": "1"}) == (
        "options 'maxlen' and 'minid' cannot be used together (XADD accepts one trimming strategy)")
    assert write_options({"maxlen": "", "minid": "1"}).maxlen is None
    assert _err(write_options, {"approximate": "maybe"}) == "option 'approximate' must be true or false, got 'maybe'"
    for raw, want in (("auto", "auto"), (" Auto", "auto"), ("1", "true"), ("off", "false"), ("NO", "false"), ("yes", "true")):
        assert write_options({"exactlyonce": raw}).exactly_once == want
    assert _err(write_options, {"exactlyonce": " Maybe"}) == "option 'exactlyOnce' must be auto, true or false, got 'maybe'"
    assert _err(write_options, {"exactlyonce": ""}) == "option 'exactlyOnce' must be auto, true or false, got ''"


def test_every_valid_and_spark_name_passes_and_only_on_its_side():
    assert set(SPARK_OWN) == {"path", "checkpointLocation", "queryName"}
    for name in (*READ, *SPARK_OWN):
        check_names({name.lower(): "x"}, READ, "read")
    for name in (*WRITE, *SPARK_OWN):
        check_names({name.lower(): "x"}, WRITE, "write")
    for name in set(READ) - set(WRITE) - set(KAFKA):
        assert _err(check_names, {name.lower(): "x"}, WRITE, "write").startswith(f"unknown option '{name.lower()}' for a Millrace write")
    for name in set(WRITE) - set(READ):
        assert _err(check_names, {name.lower(): "x"}, READ, "read").startswith(f"unknown option '{name.lower()}' for a Millrace read")
    assert {"url", "host", "port", "username", "password", "db", "ssl", "timeout", "sentinel", "sentinelMaster"} <= set(READ) & set(WRITE)


def test_kafka_names_get_their_hint_on_each_side():
    for name, hint in KAFKA.items():
        if not hint:
            continue
        for what, valid, side, verb in (("read", READ, "source", "reads"), ("streaming read", READ, "source", "reads"),
                                        ("write", WRITE, "sink", "writes")):
            assert _err(check_names, {"url": "x", name.lower(): "1"}, valid, what) == (
                f"option '{name}' is a Kafka {side} option; Millrace {verb} Redis streams: {hint}")
    assert _err(check_names, {"kafka.ssl.key": "1"}, WRITE, "write") == (
        "option 'kafka.ssl.key' is a Kafka sink option; Millrace writes Redis streams: "
        "connection settings are options 'url' or 'host'/'port'/'password'")
    # the alias with an empty hint is a valid read name, and unknown on a write
    check_names({"maxoffsetspertrigger": "1"}, READ, "read")
    assert _err(check_names, {"maxoffsetspertrigger": "1"}, WRITE, "write").startswith("unknown option 'maxoffsetspertrigger'")


@pytest.mark.parametrize("seed", range(3))
def test_unknown_names_suggest_the_closest(seed):
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for _ in range(150):
        what, valid = rng.choice([("read", READ), ("write", WRITE), ("streaming read", READ)])
        base = rng.choice([*valid, *SPARK_OWN]).lower()
        chars = list(base)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(chars) + 1)
            op = rng.random()
            if op < 0.4:
                chars.insert(i, rng.choice(letters))
            elif chars and op < 0.7:
                del chars[min(i, len(chars) - 1)]
            elif chars:
                chars[min(i, len(chars) - 1)] = rng.choice(letters)
        key = "".join(chars)
        known = {n.lower(): n for n in (*valid, *SPARK_OWN)}
        if key in known or key.startswith("kafka.") or key in {k.lower() for k, h in KAFKA.items() if h}:
            continue
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        hint = f"; did you mean '{known[close[0]]}'?" if close else ""
        assert _err(check_names, {key: "1"}, valid, what) == (
            f"unknown option '{key}' for a Millrace {what}{hint} (valid: {', '.join(valid)})")
    assert _err(check_names, {"zzzzzz": "1"}, READ, "read") == f"unknown option 'zzzzzz' for a Millrace read (valid: {', '.join(READ)})"
    assert _err(check_names, {"checkpointlocatio": "1"}, READ, "read").startswith(
        "unknown option 'checkpointlocatio' for a Millrace read; did you mean 'checkpointLocation'?")
    assert option_names.OptionError is OptionError
