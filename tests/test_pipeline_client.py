"""pipeline/client.py and pipeline/source.py in-process (no server process, no Spark
session): redis-py clients built from the options (never connected), ping's errors,
XINFO/XCOUNT/XGROUPLAG/XRANGE helpers on a redis-py client answered by a Server in this
process, against what the entries added say; scan_range's pipelined pages over random
streams and page sizes; the data source's readers and writers and its refusals."""

from __future__ import annotations

import random

import pytest
import redis
import redis.sentinel
from redis.sentinel import SentinelConnectionPool

from pipeline import writer
from pipeline.arrow_batches import DEFAULT_SCHEMA
from pipeline.batch_reader import BatchReader
from pipeline.client import (
    SourceError,
    StreamInfo,
    _identity,
    connect,
    group_lag,
    live_after,
    nth_id_after,
    ping,
    scan_range,
    stream_info,
)
from pipeline.options import OptionError, connection_from
from pipeline.source import MillraceDataSource
from pipeline.stream_ids import MAX_ID, format_id, make_id, parse_id
from pipeline.stream_reader import StreamReader
from pipeline.writer import BatchWriter, StreamWriter
from tests.test_backlog_inprocess import InProcessRedis

RAW = ("XRANGE", "XREVRANGE", "XINFO STREAM", "XINFO GROUPS", "XADD")


class Conn:
    """A pooled connection whose pipelined replies come from the in-process Server, in the order sent."""

    def __init__(self, owner):
        self.owner, self.sent, self.read, self.disconnected = owner, [], 0, 0

    def send_command(self, *args):
        self.sent.append(args)

    def read_response(self):
        self.read += 1
        return self.owner.execute_command(*self.sent[self.read - 1])

    def disconnect(self):
        self.disconnected += 1


class Pool:
    def __init__(self):
        self.given, self.released = [], []

    def get_connection(self, *args, **kwargs):
        self.given.append(Conn(self.owner))
        return self.given[-1]

    def release(self, conn):
        self.released.append(conn)

    def close(self):
        self.closed = True


class Client(InProcessRedis):
    def __init__(self):
        super().__init__()
        for name in RAW:
            self.set_response_callback(name, _identity)
        self.connection_pool = Pool()
        self.connection_pool.owner = self


def test_connect_builds_the_client_the_options_describe():
    c = connect(connection_from({"host": "h", "port": "7", "db": "2", "username": "u", "password": "p", "timeout": "3"}))
    kw = c.connection_pool.connection_kwargs
    assert (kw["host"], kw["port"], kw["db"], kw["username"], kw["password"], kw["socket_timeout"], kw["socket_connect_timeout"],
            kw["protocol"]) == ("h", 7, 2, "u", "p", 3.0, 3.0, 2)
    assert c.connection_pool.connection_class is redis.Connection
    assert connect(connection_from({"ssl": "true"})).connection_pool.connection_class is redis.SSLConnection
    for name in RAW:
        assert c.response_callbacks[name] is _identity
    assert _identity([1], x=2) == [1]
    u = connect(connection_from({"url": "redis://uu:pp@hh:9/4", "timeout": "5"})).connection_pool.connection_kwargs
    assert (u["host"], u["port"], u["db"], u["username"], u["password"], u["socket_timeout"], u["protocol"]) == (
        "hh", 9, 4, "uu", "pp", 5.0, 2)
    s = connect(connection_from({"sentinel": "a:1,b:2", "sentinelmaster": "m", "db": "3", "password": "p", "timeout": "4"}))
    pool = s.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "m"
    assert [(x.connection_pool.connection_kwargs["host"], x.connection_pool.connection_kwargs["port"],
             x.connection_pool.connection_kwargs["socket_timeout"]) for x in pool.sentinel_manager.sentinels] == [
        ("a", 1, 4.0), ("b", 2, 4.0)]
    assert (pool.connection_kwargs["db"], pool.connection_kwargs["password"], pool.connection_kwargs["socket_timeout"],
            pool.connection_kwargs["protocol"]) == (3, "p", 4.0, 2)
    assert s.response_callbacks["XRANGE"] is _identity
    assert pool.connection_kwargs.get("username") is None and pool.connection_class is redis.sentinel.SentinelManagedConnection
    secure = connect(connection_from({"sentinel": "a:1", "username": "uu", "ssl": "true"})).connection_pool
    assert secure.connection_kwargs["username"] == "uu" and secure.connection_class is redis.sentinel.SentinelManagedSSLConnection


class Pinger:
    def __init__(self, exc):
        self.exc = exc

    def ping(self):
        if self.exc:
            raise self.exc
        return True


def test_ping_names_the_server_and_the_fault():
    conn = connection_from({"host": "h", "port": "7"})
    ping(Pinger(None), conn)
    cases = [
        (redis.AuthenticationError("bad pw"), "millrace: authentication failed at redis://h:7/0 (options 'url' or 'username'/'password'): bad pw"),
        (redis.ConnectionError("refused"), "millrace: cannot connect to the server at redis://h:7/0 (option 'url' or 'host'/'port'): refused"),
        (redis.ResponseError("NOAUTH Authentication required."), "millrace: the server at redis://h:7/0 requires a password (option 'password' or the url)"),
        (redis.InvalidResponse("Protocol error"), "millrace: the server at redis://h:7/0 does not speak the Redis protocol (is the url's host:port "
         "a Millrace or Redis server? option 'url' or 'host'/'port'): InvalidResponse: Protocol error"),
    ]
    for exc, message in cases:
        with pytest.raises(SourceError) as excinfo:
            ping(Pinger(exc), conn)
        assert str(excinfo.value) == message
    other = redis.ResponseError("ERR nope")
    with pytest.raises(redis.ResponseError) as excinfo:
        ping(Pinger(other), conn)
    assert excinfo.value is other


def _stream(c, rng, key):
    ids = []
    ms = rng.randint(1, 3)
    for _ in range(rng.randint(1, 9)):
        ms += rng.choice([0, 1, 3])
        seq = (ids[-1] & (2**64 - 1)) + 1 if ids and ids[-1] >> 64 == ms else rng.randint(0, 2)
        ids.append(make_id(ms, seq))
        c.execute_command("XADD", key, format_id(ids[-1]), "f", str(len(ids)))
    deleted = rng.sample(ids, rng.randint(0, len(ids) - 1))
    for i in deleted:
        c.execute_command("XDEL", key, format_id(i))
    return ids, [i for i in ids if i not in deleted], deleted


@pytest.mark.parametrize("seed", range(3))
def test_helpers_against_the_entries(seed):
    rng = random.Random(seed)
    c = Client()
    for round_ in range(8):
        key = f"s{round_}"
        added, live, deleted = _stream(c, rng, key)
        info = stream_info(c, key)
        assert info == StreamInfo(key, len(live), added[-1], len(added), max(deleted, default=0), live[0] if live else 0,
                                  live[-1] if live else 0)
        bounds = sorted({0, 1, *added, *(i + 1 for i in added), make_id(1000, 0)})
        for after in bounds:
            assert live_after(c, key, after) == sum(1 for i in live if i > after)
            for upto in rng.sample(bounds, 3):
                want = [i for i in live if after < i <= upto]
                for count in (1, 2, 3, 100):
                    pages = list(scan_range(c, key, after, upto, count))
                    assert [parse_id(e[0]) for p in pages for e in p] == want
                    assert all(len(p) <= count for p in pages) and all(pages)
                    if after < upto:
                        pool = c.connection_pool
                        assert pool.released[-1] is pool.given[-1] and pool.given[-1].disconnected == 0
                    n = rng.randint(1, 5)
                    got = nth_id_after(c, key, after, upto, n, count)
                    assert got == ((want[n - 1], n) if len(want) >= n else (want[-1] if want else after, len(want)))
        assert live_after(c, key, MAX_ID) == 0
        c.execute_command("XGROUP", "CREATE", key, "g", "0")
        assert group_lag(c, key, "g") == len(live)
        assert group_lag(c, key, "nope") is None


def test_scan_range_abandoned_mid_read_drops_the_connection():
    c = Client()
    for i in range(1, 8):
        c.execute_command("XADD", "s", f"{i}-0", "f", "v")
    pages = scan_range(c, "s", 0, make_id(7, 0), 2)
    assert len(next(pages)) == 2
    pages.close()  # the next page was already asked for
    conn = c.connection_pool.given[-1]
    assert conn.disconnected == 1 and c.connection_pool.released == [conn]
    assert conn.sent == [("XRANGE", "s", "-", "7-0", "COUNT", 2), ("XRANGE", "s", "(2-0", "7-0", "COUNT", 2)]
    given = len(c.connection_pool.given)
    assert list(scan_range(c, "s", 5, 5, 2)) == [] and len(c.connection_pool.given) == given
    last = list(scan_range(c, "s", make_id(5, 0), make_id(7, 0), 2))
    assert [len(p) for p in last] == [2] and len(c.connection_pool.given[-1].sent) == 1  # a full page at upto: no more asked


def test_scan_range_failing_on_a_read_drops_the_connection():
    c = Client()
    for i in range(1, 6):
        c.execute_command("XADD", "s", f"{i}-0", "f", "v")
    for fail_at in (1, 2):  # the first page's read, or the second's (a reply may still be on its way)
        pages = scan_range(c, "s", 0, make_id(5, 0), 2)
        conn_class_read = Conn.read_response

        def read_response(self, fail_at=fail_at, real=conn_class_read):
            if self.read + 1 == fail_at:
                raise redis.TimeoutError("timed out")
            return real(self)

        Conn.read_response = read_response
        try:
            with pytest.raises(redis.TimeoutError):
                list(pages)
        finally:
            Conn.read_response = conn_class_read
        conn = c.connection_pool.given[-1]
        assert conn.disconnected == 1 and c.connection_pool.released[-1] is conn


def test_stream_info_errors_and_absent_fields():
    c = Client()
    with pytest.raises(SourceError) as excinfo:
        stream_info(c, "nokey")
    assert str(excinfo.value) == ("millrace: stream 'nokey' does not exist (option 'streams'); create it first, "
                                  "e.g. with XADD or XGROUP CREATE ... MKSTREAM")
    c.execute_command("SET", "str", "v")
    with pytest.raises(SourceError, match=r"^millrace: key 'str' holds a string, not a stream \(option 'streams'\)$"):
        stream_info(c, "str")

    class Old:
        def execute_command(self, *args):
            if args[0] == "XCOUNT" or args[0] == "XGROUPLAG":
                raise redis.ResponseError("ERR unknown command")
            if args == ("XINFO STREAM", "k"):
                return [b"length", 2, "last-generated-id", b"5-1", b"first-entry", [b"3-0", []], b"last-entry", None]
            raise redis.ResponseError("ERR other")

    assert stream_info(Old(), "k") == StreamInfo("k", 2, make_id(5, 1), 2, 0, make_id(3, 0), 0)
    assert live_after(Old(), "k", 0) is None and group_lag(Old(), "k", "g") is None
    with pytest.raises(redis.ResponseError, match="ERR other"):
        stream_info(Old(), "other")

    class Resp3:
        def execute_command(self, *args):
            return [{"lag": 4}]

    class Resp2:
        def execute_command(self, *args):
            return [[b"name", b"g", b"lag", b"6"]]

    assert group_lag(Resp3(), "k", "g") == 4 and group_lag(Resp2(), "k", "g") == 6


def test_the_data_source(monkeypatch):
    assert MillraceDataSource.name() == "millrace"
    source = MillraceDataSource({"streams": "a,b", "readCount": "7"})
    assert source.schema() is DEFAULT_SCHEMA
    reader = source.reader(DEFAULT_SCHEMA)
    assert isinstance(reader, BatchReader) and reader.options.streams == ("a", "b") and reader.options.read_count == 7
    assert reader.options.starting["a"].kind == "earliest"
    stream = source.streamReader(DEFAULT_SCHEMA)
    assert isinstance(stream, StreamReader) and stream.options.starting["a"].kind == "latest"
    c = Client()
    reached = []
    monkeypatch.setattr(writer, "connect", lambda conn: reached.append(conn) or c)
    sink = MillraceDataSource({"stream": "out", "writeBatchSize": "3"})
    for make, kind in ((sink.writer, BatchWriter), (sink.streamWriter, StreamWriter)):
        w = make(DEFAULT_SCHEMA, False)
        assert isinstance(w, kind) and w.options.stream == "out" and w.options.write_batch_size == 3
    assert len(reached) == 2
    with pytest.raises(OptionError) as excinfo:
        sink.writer(DEFAULT_SCHEMA, True)
    assert str(excinfo.value) == (
        "millrace: save mode 'overwrite' is not supported: a stream is append-only and writing never removes "
        "entries. Use .mode('append') (to start the stream afresh, DEL the key first; to bound it, option 'maxlen' or 'minid')")
    with pytest.raises(OptionError) as excinfo:
        sink.streamWriter(DEFAULT_SCHEMA, True)
    assert str(excinfo.value) == (
        "millrace: outputMode 'complete' is not supported: a stream is append-only and would get every "
        "result again on each trigger. Use outputMode('append') (with a watermark for aggregations)")
    assert len(reached) == 2
    with pytest.raises(OptionError, match="option 'streams' is required"):
        MillraceDataSource({}).reader(DEFAULT_SCHEMA)
