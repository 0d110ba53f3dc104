"""Protocol robustness against the real process: malformed input answered and
closed exactly as redis-server does (checked side by side with the oracle),
connections that survive what Redis survives, a million pipelined commands
with bounded memory, and client-query-buffer-limit."""

from __future__ import annotations

import random
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.rawclient import RawConn, error_stats, probe
from tests.test_reader_protocol import OTHER_STRING_CASES, random_stream

PING = b"*1\r\n$4\r\nPING\r\n"

# Inputs whose reply bytes and close/keep-open outcome must equal Redis's.
CASES = [
    b"*abc\r\n",
    b"*3000000000\r\n",
    b"*1\r\n$-1\r\n",
    b"*1\r\n$abc\r\n",
    b"*1\r\n$600000000\r\n",
    b"*-5\r\nPING\r\n",
    b'SET k "a\r\nPING\r\n',
    b'SET k "a"b\r\n',
    b"*1\r\n*1\r\n$1\r\na\r\n",
    b"*1\r\n*3000000000\r\n",
    b":5\r\nPING\r\n",
    b"$3\r\nfoo\r\n",
    b"\r\n\r\nPING\r\n",
    b"*0\r\nPING\r\n",
    b"*1\r\n:1\r\n",
    b"*1\r\n-1\r\n",
    b"*1\r\n$-1\r\nPING\r\n",
    b"*1\r\n:1\r\nx",
    PING + b"$0\r\n\r\nPING\r\n",
    b"*0\r\n$0\r\n\r\nPING\r\n",
    b"*2\r\n$4\r\nECHO\r\n$2\r\nabc\r\n",
    b"*1\r\n$4\r\nPINGxx\r\n",
    b"*1\r\n$+4\r\nPING\r\n",
    b"*01\r\n$4\r\nPING\r\n",
    b"*1\r\n$04\r\nPING\r\n",
    b"*1\r\n$ 4\r\nPING\r\n",
    b"*1x\r\n",
    b"*\r\n",
    b"PING\nPING\n",
    b"  PING  \r\n",
    b"ECHO 'a\\'b'\r\n",
    b'ECHO "\\x41\\n"\r\n',
    PING + b"*1\r\n$4\r\nPING",
    b"*2\r\n$4\r\nPING\r\n",
    b"x" * 70000,
    b"*" + b"1" * 70000,
    b"*1\r\n$" + b"1" * 70000,
    b"*-1\r\n" + PING,
    b"*1\r\n$0\r\n\r\n",
    b"*2\r\n$4\r\nECHO\r\n$-5\r\n",
    b"*1\r\n$4\r\nPI",
    b"QUIT\r\nPING\r\n",
    b"*1\r\n$4\r\nPING\r\r",
    b"*1\r\n$4\r\nPING\n\n",
    b"PING\r\nGARBAGE\x00\xff\r\n",
    b"NOSUCH a b\r\nPING\r\n",
    b"GET\r\nPING\r\n",
    PING * 3 + b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n:12\r\n",
    # RESP3 and simple types where an argument belongs: Redis names the type byte,
    # also for the strings hiredis returns as bytes like a bulk (+ = ()
    b"*1\r\n+PING\r\n",
    PING + b"*2\r\n$4\r\nECHO\r\n+PING\r\n" + PING,
    b"*2\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n",
    b"*2\r\n$4\r\nECHO\r\n(12\r\n",
    b"*2\r\n$4\r\nECHO\r\n,1.5\r\n",
    b"*2\r\n$4\r\nECHO\r\n#t\r\n",
    b"*2\r\n$4\r\nECHO\r\n_\r\n",
    b"*2\r\n$4\r\nECHO\r\n%1\r\n+a\r\n+b\r\n",
    b"*2\r\n$4\r\nECHO\r\n~1\r\n+a\r\n",
    b"*2\r\n$4\r\nECHO\r\n>1\r\n+a\r\n",
    b"*3\r\n$4\r\nECHO\r\n$1\r\na\r\n|1\r\n+a\r\n+b\r\n",
    # the type byte named in the error: raw (not UTF-8), and CR or LF as a space (they would end the line)
    b"*1\r\n\xff\r\n",
    b"*2\r\n$3\r\n2GET\r\n$1\r\nk\r\n",
    b"*1\r\n\r\r\n",
    b"*2\r\n$4\r\n:C:>HO\r\n$5\r\nhello\r\n",
    # names echoed in errors end at a NUL, as C's printf ends them
    b"*1\r\n$4\r\nPI\x00G\r\n",
    b"*3\r\n$2\r\nN\x00\r\n$3\r\na\x00b\r\n$1\r\nc\r\n",
    b"*3\r\n$6\r\nCLIENT\r\n$5\r\nNO\x00PE\r\n$1\r\nx\r\n",
    # RESP3 aggregates with counts hiredis would size up front (a push's slots are even written)
    b"*1\r\n>999999999\r\n",
    b"*2\r\n$4\r\nECHO\r\n~999999999\r\n",
    b"*2\r\n$4\r\nECHO\r\n|4294967295\r\n",
    PING + b">999999999\r\n" + PING,
    b"*2\r\n$4\r\nECHO\r\n$10\r\n>999999999\r\n",
    # the same bytes inside arguments are data
    b"*2\r\n$4\r\nECHO\r\n$4\r\n+=(x\r\n*2\r\n$4\r\nECHO\r\n$3\r\n\n+a\r\n" + PING,
    b"ECHO +a=(b\r\n",
]

# Requests cut across reads where Redis's reading and hiredis's differ: each chunk is one read of the server's
# (probe() sends the next only once the server has read the previous one).
SPLIT_CASES = [
    [PING + b"$", b"0\r\n\r\n" + PING],
    [PING + b"$3\r\nfo", b"o\r\n" + PING],
    [PING + b"$3\r", b"\nfoo\r\n" + PING],
    [b"*-1", b"\r\n*1\r\n$4\r\nECHO\r\n" + PING],
    [b"*2\r\n$4\r\nECHO\r\n", b"+PING\r\n" + PING],
    [b"*2\r", b"\n$4\r\nECHO\r\n~1\r\n+a\r\n" + PING],
    [b"*2\r\n$4\r\nECHO\r\n!1\r", b"\na\r\n" + PING],
    [b"*2\r\n$4\r\nEC", b"HO\r\n!1", b"\r\na\r\n" + PING],
    [b"*2\r\n$4\r\nECHO\r\n>9999", b"99999\r\n" + PING],
    [PING, b"~999999999\r\n" + PING],
    [PING + b"|99", b"9999999\r\n" + PING],
    # a huge aggregate where an argument belongs, its line ending in a later read: Redis answers then
    [b"*3\r\n$4\r\nECHO\r\n", b"|99999999\r", b"\n~1\r\n" + PING],
    [b"*2\r\n$4\r\nECHO\r\n*3000000000", b"\r\n" + PING],
]


# Every case of the reader's own test of these strings (commands before the bad one run, then Redis's error).
OTHER_STRINGS = [case[0] for case in OTHER_STRING_CASES]


@pytest.mark.parametrize("data", CASES, ids=[repr(c[:24]) for c in CASES])
def test_same_as_redis(server, oracle_server, data):
    with ThreadPoolExecutor(2) as pool:
        ours, redis = pool.map(lambda port: probe(port, data), (server.port, oracle_server.port))
    assert ours == redis


@pytest.mark.parametrize("chunks", SPLIT_CASES, ids=[repr(b"|".join(c)[:32]) for c in SPLIT_CASES])
def test_split_reads_same_as_redis(server, oracle_server, chunks):
    with ThreadPoolExecutor(2) as pool:
        ours, redis = pool.map(lambda port: probe(port, *chunks), (server.port, oracle_server.port))
    assert ours == redis


@pytest.mark.parametrize("data", OTHER_STRINGS, ids=[repr(c[:28]) for c in OTHER_STRINGS])
def test_other_strings_same_as_redis_however_split(server, oracle_server, data):
    """A simple, verbatim or big-number string where a request element is due: whole (the one-request lane,
    a whole pipeline) and cut in two at every byte, the same replies and close as Redis 8.2.3."""
    with ThreadPoolExecutor(2) as pool:
        for cut in range(len(data)):
            chunks = (data[:cut], data[cut:]) if cut else (data,)
            ours, redis = pool.map(lambda port, chunks=chunks: probe(port, *chunks), (server.port, oracle_server.port))
            assert ours == redis, (data, cut)


def test_random_mixes_same_as_redis(server, oracle_server):
    """Requests mixing bulk strings with simple, verbatim, big-number, nested elements and payloads not
    followed by a CRLF, cut at random points: the same replies and close as Redis 8.2.3."""
    rng = random.Random(2025)
    with ThreadPoolExecutor(2) as pool:
        for _ in range(120):
            data = random_stream(rng)
            cuts = sorted(rng.sample(range(1, len(data)), min(rng.randint(0, 2), len(data) - 1)))
            chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
            ours, redis = pool.map(lambda port, chunks=chunks: probe(port, *chunks), (server.port, oracle_server.port))
            assert ours == redis, chunks


def test_protocol_errors_count_in_error_stats_as_in_redis(server, oracle_server):
    """A protocol error is an error reply like any other: total_error_replies and errorstat_ERR."""
    deltas = []
    for port in (server.port, oracle_server.port):
        before = error_stats(port)
        for data in [b"*1\r\n$-1\r\n", b"*abc\r\n", b'SET k "a\r\n', PING + b"*1\r\n:1\r\n"]:
            probe(port, data)
        after = error_stats(port)
        deltas.append((after[0] - before[0], after[1] - before[1]))
    assert deltas[0] == deltas[1] == (4, 4)


def test_connection_survives_what_redis_survives(server):
    conn = RawConn(server.port)
    for data in [b"NOSUCH\r\n", b"GET\r\n", b"\r\n", b"   \r\n", b"*0\r\n", b"*-1\r\n", b"SET\r\n", b"CONFIG FOO\r\n"]:
        conn.send(data)
        conn.send(PING)
        got = conn.read_raw(until=b"+PONG\r\n", timeout=3)
        assert got.endswith(b"+PONG\r\n"), data
    conn.close()


def test_truncated_frames_then_hangup(server):
    for data in [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\nabc", b"*2\r\n$4", b"*1\r", b'SET k "unterminated']:
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(data)
        sock.close()
    conn = RawConn(server.port)
    assert conn.call("PING") == b"PONG"
    assert conn.call("GET", "k") is None
    conn.close()


def test_large_declared_length_does_not_stall_others(server):
    """A client announcing 400MB (allowed) just waits; nothing is allocated up front."""
    rss_before = rss_kb(server)
    slow = RawConn(server.port)
    slow.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$400000000\r\npartial")
    other = RawConn(server.port)
    assert other.call("PING") == b"PONG"
    assert rss_kb(server) - rss_before < 50 * 1024
    slow.send(b"more")
    assert not slow.is_closed(timeout=0.3)
    slow.close()
    other.close()


def rss_kb(server) -> int:
    with open(f"/proc/{server.proc.pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_million_pipelined_pings_in_order_with_bounded_memory(server):
    total = 1_000_000
    expected = b"+PONG\r\n" * total
    sock = socket.create_connection(("127.0.0.1", server.port))
    sock.settimeout(60)
    received = bytearray()
    peak = [rss_kb(server)]
    baseline = peak[0]

    def reader() -> None:
        while len(received) < len(expected):
            data = sock.recv(1 << 20)
            if not data:
                break
            received.extend(data)
            peak[0] = max(peak[0], rss_kb(server))

    thread = threading.Thread(target=reader)
    thread.start()
    # sent in pieces cut at odd places; the tail alternates inline and multibulk forms
    mixed = 20_000
    stream = PING * (total - mixed) + (PING + b"PING\r\n") * (mixed // 2)
    step = 65521
    for start in range(0, len(stream), step):
        sock.sendall(stream[start : start + step])
    thread.join(120)
    sock.close()
    assert len(received) == len(expected)
    assert bytes(received) == expected
    assert peak[0] - baseline < 150 * 1024, f"RSS grew {peak[0] - baseline} kB"


def test_client_query_buffer_limit_closes_without_reply(server):
    admin = RawConn(server.port)
    assert admin.call("CONFIG", "SET", "client-query-buffer-limit", "1mb") == b"OK"
    try:
        before = int(admin.call("INFO", "stats").decode().split("client_query_buffer_limit_disconnections:")[1].split("\r\n")[0])
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.settimeout(5)
        sock.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3000000\r\n")
        try:
            for _ in range(30):
                sock.sendall(b"x" * 100_000)
                time.sleep(0.005)
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed while we were still writing
        try:
            assert sock.recv(100) == b""  # closed, and no error reply before it
        except ConnectionResetError:
            pass
        sock.close()
        after = int(admin.call("INFO", "stats").decode().split("client_query_buffer_limit_disconnections:")[1].split("\r\n")[0])
        assert after == before + 1
        assert admin.call("GET", "k") is None
    finally:
        admin.call("CONFIG", "SET", "client-query-buffer-limit", "1gb")
        admin.close()
