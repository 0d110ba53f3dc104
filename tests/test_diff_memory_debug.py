"""Differential tests against Redis 8.2.3 for MEMORY HELP/STATS/DOCTOR/MALLOC-STATS/PURGE and
DEBUG PROTOCOL, byte for byte over raw sockets in RESP2 and RESP3.

MEMORY STATS is compared by its shape (field names, their order and each value's RESP type),
not by its figures, which are each server's own (Millrace's are its RSS: see
server/commands/memory.py), except keys.count. Both servers run with enable-debug-command yes
(not settable at run time in Redis); tests leave no keys behind, so MEMORY DOCTOR's "empty"
text, compared first, still holds for the later tests' servers.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import require_redis, start_millrace, start_redis

PROTOCOL_TYPES = ["string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
                  "verbatim", "true", "false", "TRUE", "Verbatim", "nosuch"]  # fmt: skip
MARK = b"-end-of-reply-"
MARK_REPLY = b"$%d\r\n%s\r\n" % (len(MARK), MARK)


@pytest.fixture(scope="module")
def pair():
    """Millrace and Redis 8.2.3 with DEBUG enabled, in that order."""
    require_redis()
    procs = []
    try:
        procs.append(start_millrace("--enable-debug-command", "yes"))
        procs.append(start_redis("--enable-debug-command", "yes"))
        yield procs
    finally:
        for proc in procs:
            proc.stop()


def connect(port: int, protocol: int) -> RawConn:
    conn = RawConn(port)
    if protocol == 3:
        conn.call("HELLO", "3")
    return conn


def wire(conn: RawConn, *args, then: tuple = ()) -> bytes:
    """The exact bytes the server sends for one command (and the commands `then` sent in the same
    write), pushes after a reply included: read up to the reply of an ECHO sent behind them."""
    conn.send(b"".join(encode_command(*command) for command in [args, *then, ("ECHO", MARK)]))
    data = conn.read_raw(until=MARK_REPLY, timeout=10)
    assert data.endswith(MARK_REPLY), data[-200:]
    return data[: -len(MARK_REPLY)]


def on_both(pair, protocol: int, steps) -> list[list[bytes]]:
    """Each server's bytes for `steps`, on one connection of its own."""
    out = []
    for proc in pair:
        conn = connect(proc.port, protocol)
        try:
            out.append([wire(conn, *args) for args in steps])
        finally:
            conn.close()
    return out


# -- a RESP reader that keeps each value's type ---------------------------------------------------


def parse(data: bytes, pos: int = 0):
    """(type byte, value) and the next position; aggregates hold parsed children, maps (key, value) pairs."""
    end = data.index(b"\r\n", pos)
    kind, rest = data[pos : pos + 1], data[pos + 1 : end]
    pos = end + 2
    if kind in (b"$", b"=") and int(rest) >= 0:
        size = int(rest)
        return (kind, data[pos : pos + size]), pos + size + 2
    if kind in (b"*", b"~", b">", b"%") and int(rest) >= 0:
        items = []
        for _ in range(int(rest) * (2 if kind == b"%" else 1)):
            item, pos = parse(data, pos)
            items.append(item)
        if kind == b"%":
            items = list(zip(items[::2], items[1::2], strict=True))
        return (kind, items), pos
    return (kind, rest), pos


def fields(reply) -> list[tuple]:
    """A map's (name, value) pairs: a RESP3 map or RESP2's flat name, value array."""
    kind, items = reply
    if kind == b"%":
        return [(name[1], value) for name, value in items]
    assert kind == b"*"
    return [(items[i][1], items[i + 1]) for i in range(0, len(items), 2)]


def shape(reply) -> list[tuple]:
    """Field names in order with their values' types (nested maps by their own shape)."""
    out = []
    for name, value in fields(reply):
        out.append((name, shape(value) if re.fullmatch(rb"db\.\d+", name) else value[0]))
    return out


# -- MEMORY -------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_memory_doctor_on_an_empty_server_is_redis_text(pair, protocol):
    """Redis's "empty instance" report: a verbatim string in RESP3, a bulk string in RESP2."""
    millrace, redis = on_both(pair, protocol, [("MEMORY", "DOCTOR")])
    assert millrace == redis
    assert b"this instance is empty or is using very little memory" in millrace[0]
    assert millrace[0][:1] == (b"=" if protocol == 3 else b"$")


@pytest.mark.parametrize("protocol", [2, 3])
def test_memory_help_is_redis_text(pair, protocol):
    millrace, redis = on_both(pair, protocol, [("MEMORY", "HELP"), ("memory", "help")])
    assert millrace == redis
    assert millrace[0].startswith(b"*14\r\n+MEMORY <subcommand>")


@pytest.mark.parametrize("protocol", [2, 3])
def test_memory_purge_and_errors_as_redis(pair, protocol):
    steps = [("MEMORY", "PURGE"), ("MEMORY", "HELP", "x"), ("MEMORY", "STATS", "x"), ("MEMORY", "DOCTOR", "x"),
             ("MEMORY", "MALLOC-STATS", "x"), ("MEMORY", "PURGE", "x"), ("MEMORY",), ("MEMORY", "nosuch")]  # fmt: skip
    millrace, redis = on_both(pair, protocol, steps)
    assert millrace == redis
    assert millrace[0] == b"+OK\r\n"


def test_memory_malloc_stats_is_a_bulk_string(pair):
    """Redis built with libc malloc answers with a bulk string; the oracle (jemalloc) sends its
    report as a bulk string in RESP2 too."""
    millrace, redis = on_both(pair, 2, [("MEMORY", "MALLOC-STATS")])
    assert millrace == [b"$45\r\nStats not supported for the current allocator\r\n"]
    assert redis[0][:1] == b"$"


@pytest.mark.parametrize("protocol", [2, 3])
def test_memory_stats_has_redis_fields_order_and_types(pair, protocol):
    """Every field Redis sends, in its order and with its type (doubles are `,` in RESP3 and bulk
    strings in RESP2), a nested map per database with keys, and the same keys.count."""
    setup = [("SET", "a", "1"), ("XADD", "s", "1-1", "f", "v"), ("SELECT", "3"), ("SET", "k", "v"),
             ("EXPIRE", "k", "1000"), ("SELECT", "0")]  # fmt: skip
    replies = []
    for proc in pair:
        conn = connect(proc.port, protocol)
        try:
            for args in setup:
                conn.call(*args)
            data = wire(conn, "MEMORY", "STATS")
            conn.call("FLUSHALL")
        finally:
            conn.close()
        reply, end = parse(data)
        assert end == len(data)
        replies.append(reply)
    millrace, redis = replies
    assert shape(millrace) == shape(redis)
    assert dict(fields(millrace))[b"keys.count"] == dict(fields(redis))[b"keys.count"] == (b":", b"3")
    names = [name for name, _ in fields(millrace)]
    assert names.index(b"db.0") == 12 and names.index(b"db.3") == 13 and len(names) == 35
    assert dict(shape(millrace))[b"fragmentation"] == (b"," if protocol == 3 else b"$")


def test_memory_stats_figures_are_info_memorys(pair):
    """Millrace's own figures: those INFO memory reports, and 0 where it has no such thing."""
    conn = RawConn(pair[0].port)
    try:
        stats = {name: value for name, value in fields(parse(wire(conn, "MEMORY", "STATS"))[0])}
        info = dict(line.split(":", 1) for line in conn.call("INFO", "memory").decode().split("\r\n") if ":" in line)
    finally:
        conn.close()
    assert int(stats[b"startup.allocated"][1]) == int(info["used_memory_startup"])
    assert 0 < int(stats[b"startup.allocated"][1]) <= int(stats[b"total.allocated"][1]) <= int(stats[b"peak.allocated"][1])
    assert stats[b"keys.count"] == stats[b"keys.bytes-per-key"] == (b":", b"0")
    assert stats[b"lua.caches"] == stats[b"cluster.links"] == stats[b"fragmentation.bytes"] == (b":", b"0")
    assert stats[b"fragmentation"] == (b"$", b"1")
    assert b"db.0" not in stats


@pytest.mark.parametrize("protocol", [2, 3])
def test_memory_doctor_with_data_is_redis_healthy_text(pair, protocol):
    """Over 5 MB of data (Millrace: grown since start-up) and no issue: Redis's "healthy" report."""
    fill = [[("SET", f"big:{i}", "x" * (1 << 20)) for i in range(8)], [("DEBUG", "POPULATE", "100000", "key", "32")]]
    for proc, commands in zip(pair, fill, strict=True):
        conn = RawConn(proc.port)
        try:
            for args in commands:
                conn.call(*args)
        finally:
            conn.close()
    try:
        ours, theirs = on_both(pair, protocol, [("MEMORY", "DOCTOR")])
    finally:
        on_both(pair, 2, [("FLUSHALL",)])
    assert ours == theirs
    assert b"I can't find any memory issue in your instance" in ours[0]


def test_command_info_and_docs_of_the_memory_subcommands_are_redis(pair):
    names = ["memory|help", "memory|stats", "memory|doctor", "memory|malloc-stats", "memory|purge"]
    steps = [("COMMAND", kind, name) for name in names for kind in ("INFO", "DOCS")]
    for protocol in (2, 3):
        millrace, redis = on_both(pair, protocol, steps)
        assert millrace == redis


# -- DEBUG PROTOCOL -----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", [2, 3])
def test_debug_protocol_sends_redis_bytes(pair, protocol):
    """Each type as Redis sends it: RESP3's own types, or RESP2's fallbacks (no attribute, bool as
    integer, double, bignum and verbatim as bulk strings, push refused); the push follows its reply."""
    steps = [("DEBUG", "PROTOCOL", name) for name in PROTOCOL_TYPES]
    steps += [("DEBUG", "PROTOCOL"), ("DEBUG", "PROTOCOL", "true", "x")]
    millrace, redis = on_both(pair, protocol, steps)
    assert millrace == redis
    got = dict(zip(PROTOCOL_TYPES, millrace, strict=False))
    if protocol == 3:
        assert got["bignum"] == b"(1234567999999999999999999999999999999\r\n"
        assert got["attrib"].startswith(b"|1\r\n") and got["push"].endswith(b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n")
    else:
        assert got["true"] == b":1\r\n" and got["push"] == b"-ERR RESP2 is not supported by this command\r\n"


@pytest.mark.parametrize("protocol", [2, 3])
def test_debug_protocol_inside_multi_as_redis(pair, protocol):
    """In a transaction the attribute sits before its element (not counted), the push after EXEC's reply."""
    steps = [("MULTI",), ("DEBUG", "PROTOCOL", "attrib"), ("DEBUG", "PROTOCOL", "push"), ("DEBUG", "PROTOCOL", "bignum"),
             ("DEBUG", "PROTOCOL", "map"), ("EXEC",)]  # fmt: skip
    millrace, redis = [], []
    for proc, out in zip(pair, (millrace, redis), strict=True):
        conn = connect(proc.port, protocol)
        try:
            out.append(wire(conn, *steps[0], then=steps[1:]))  # one write: ECHO is not queued
        finally:
            conn.close()
    assert millrace == redis
    assert millrace[0].startswith(b"+OK\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n+QUEUED\r\n*4\r\n")


def test_debug_help_lists_protocol_as_redis(pair):
    """DEBUG HELP's PROTOCOL entry: its line and the indented lines under it, as Redis's."""
    entries = []
    for proc in pair:
        conn = RawConn(proc.port)
        try:
            lines = conn.call("DEBUG", "HELP")
        finally:
            conn.close()
        start = lines.index(b"PROTOCOL <type>")
        end = start + 1
        while lines[end].startswith(b"    "):
            end += 1
        entries.append(lines[start:end])
    assert entries[0] == entries[1]
    assert len(entries[0]) == 4


def test_memory_usage_finds_a_key_past_its_ttl_and_leaves_it(pair):
    """Redis's MEMORY USAGE looks the key up with dbFind, not as a read: a key past its TTL, not yet
    expired, is measured and stays (it used to answer nil and delete it)."""
    seen = []
    for proc in pair:
        conn = RawConn(proc.port)
        try:
            conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "0")
            conn.call("SET", "memory:ttl", "v", "PX", "1")
            conn.call("XADD", "memory:ttl-stream", "1-1", "f", "v")
            conn.call("PEXPIRE", "memory:ttl-stream", "1")
            time.sleep(0.05)
            usage = [conn.call("MEMORY", "USAGE", key) for key in ("memory:ttl", "memory:ttl-stream")]
            seen.append(([type(n) is int and n > 0 for n in usage], conn.call("DBSIZE"), conn.call("GET", "memory:ttl"), conn.call("DBSIZE")))
        finally:
            conn.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
            conn.call("DEL", "memory:ttl", "memory:ttl-stream")
            conn.close()
    assert seen[0] == seen[1] == ([True, True], 2, None, 1)


def debug_object_seen(port: int) -> list:
    import redis as redis_py

    client = redis_py.Redis(port=port, protocol=2)
    conn = RawConn(port)
    try:
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        client.set("debug:small", "v")
        client.set("debug:int", "12345")
        client.set("debug:ttl", "v", px=1)
        client.xadd("debug:stream", {"f": "v"}, id="1-1")
        time.sleep(0.01)  # debug:ttl is past its TTL: dbFind still finds it
        seen = []
        for key in ("debug:small", "debug:int", "debug:ttl", "debug:stream"):
            parsed = client.debug_object(key)  # redis-py parses the line into a dict
            lru_clock = int(client.info("server")["lru_clock"])
            seen.append((key, sorted(parsed), parsed["type"], parsed["at"][:2], parsed["refcount"], parsed["encoding"],
                         abs(parsed["lru"] - lru_clock) <= 2, parsed["lru_seconds_idle"] <= 1))
        seen.append(("serializedlength", [client.debug_object(key)["serializedlength"] for key in ("debug:small", "debug:int")]))
        for args in (("debug:missing",), (), ("debug:small", "fast")):
            reply = conn.call("DEBUG", "OBJECT", *args)
            seen.append(str(reply) if isinstance(reply, Exception) else reply)
        help_lines = conn.call("DEBUG", "HELP")
        start = help_lines.index(b"OBJECT <key>")
        seen.append(help_lines[start:start + 2])
        return seen
    finally:
        client.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        client.delete("debug:small", "debug:int", "debug:ttl", "debug:stream")
        client.close()
        conn.close()


def test_debug_object_is_redis_line(pair):
    """DEBUG OBJECT key: the line redis-py's debug_object parses (it failed as an unknown subcommand)."""
    millrace, redis = (debug_object_seen(proc.port) for proc in pair)
    assert millrace == redis
    assert millrace[0][5] == "embstr" and millrace[3][5] == "stream"
