"""CLIENT PAUSE WRITE against Redis 8.2.3: what it holds, and the order held commands run in when it ends.

Each scenario runs on both servers over raw sockets, and Millrace must answer what Redis answers:
- PUBLISH is held (Redis holds write and may-replicate commands), though COMMAND INFO shows no such flag;
- a client blocked on a key is served after each released command, not after all of them;
- a released client's pipelined commands run at once, before the next released client's.
Pauses last far longer than the tests unless a test is about the timer: only UNPAUSE ends them.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from functools import partial

import pytest

from tests.rawclient import RawConn, encode_command
from tests.servers import millrace_and_redis


@pytest.fixture(scope="module")
def servers():
    yield from millrace_and_redis()


def _blocked_clients(admin: RawConn, n: int) -> None:
    """Wait until INFO counts n blocked clients (postponed ones count, as in Redis)."""
    deadline = time.monotonic() + 10
    while f"blocked_clients:{n}\r\n" not in admin.call("INFO", "clients").decode():
        assert time.monotonic() < deadline, f"expected {n} blocked clients"
        time.sleep(0.01)


def _silent(conn: RawConn, seconds: float = 0.2) -> bool:
    """Nothing arrived on conn for `seconds`."""
    conn.sock.settimeout(seconds)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)  # bytes, or b"" for a close: neither is silence
        return False
    except TimeoutError:
        return True
    finally:
        conn.sock.settimeout(10.0)


def _read(conn: RawConn, timeout: float = 3.0):
    """The next reply, or "no reply" when none comes in time."""
    conn.sock.settimeout(timeout)
    try:
        return conn.read()
    except TimeoutError:
        return "no reply"
    finally:
        conn.sock.settimeout(10.0)


def _connect(port: int, conns: list[RawConn]) -> RawConn:
    conns.append(RawConn(port))
    return conns[-1]


def _differential(servers, scenario: Callable[[Callable[[], RawConn]], object]) -> None:
    """Run scenario on a clean Millrace and a clean Redis: the same observations.

    The scenario opens its connections with the function it is given; they are all closed after it,
    so that no client it left blocked counts in the next scenario's blocked_clients."""
    seen = []
    for proc in servers:
        admin = RawConn(proc.port)
        admin.call("FLUSHALL")
        conns: list[RawConn] = []
        try:
            seen.append(scenario(partial(_connect, proc.port, conns)))
        finally:
            admin.call("CLIENT", "UNPAUSE")
            for conn in conns:
                conn.close()
            _blocked_clients(admin, 0)
            admin.close()
    millrace, redis = seen
    assert millrace == redis


def test_publish_is_held_by_pause_write(servers):
    def scenario(connect: Callable[[], RawConn]):
        admin, pub, txn = connect(), connect(), connect()
        flags = admin.call("COMMAND", "INFO", "publish")[0][2]  # no may_replicate shown: the marker is internal
        assert txn.call("MULTI") == b"OK" and txn.call("PUBLISH", "x", "y") == b"QUEUED"
        admin.call("CLIENT", "PAUSE", 20000, "WRITE")
        pub.send(encode_command("PUBLISH", "x", "y"))
        _blocked_clients(admin, 1)
        txn.send(encode_command("EXEC"))  # a transaction that would publish waits too
        _blocked_clients(admin, 2)
        held = _silent(pub), _silent(txn)
        admin.call("CLIENT", "UNPAUSE")
        return flags, held, _read(pub), _read(txn)

    _differential(servers, scenario)


def _reader_and_writers(connect: Callable[[], RawConn], later: list[tuple]) -> tuple:
    """R blocks on ps; during a pause each of `later` is sent by its own client (in that order); then UNPAUSE."""
    admin, reader = connect(), connect()
    admin.call("XADD", "ps", "1-1", "f", "v")
    reader.send(encode_command("XREAD", "BLOCK", 0, "STREAMS", "ps", "$"))
    _blocked_clients(admin, 1)
    admin.call("CLIENT", "PAUSE", 20000, "WRITE")
    writers = []
    for argv in later:
        writer = connect()
        writer.send(encode_command(*argv))
        writers.append(writer)
        _blocked_clients(admin, 1 + len(writers))  # each one held before the next is sent: their order is known
    admin.call("CLIENT", "UNPAUSE")
    return _read(reader), [_read(writer) for writer in writers], admin.call("XRANGE", "ps", "-", "+")


def test_blocked_reader_served_after_each_released_write(servers):
    later = [("XADD", "ps", "2-1", "f", "v"), ("XADD", "ps", "3-1", "f", "v")]
    _differential(servers, lambda connect: _reader_and_writers(connect, later))


def test_blocked_reader_sees_released_write_before_a_later_del(servers):
    later = [("XADD", "ps", "2-1", "f", "v"), ("DEL", "ps"), ("XADD", "ps", "3-1", "f", "v")]
    _differential(servers, lambda connect: _reader_and_writers(connect, later))


def _pipelined_after_held(connect: Callable[[], RawConn], pipeline: list[tuple], replies: int, unpause: bool = True) -> tuple:
    """B sends `pipeline` in one write, its first command held by a pause; C's DEL is held after it."""
    admin, b, c = connect(), connect(), connect()
    admin.call("XADD", "ps", "1-1", "f", "v")
    admin.call("CLIENT", "PAUSE", 20000 if unpause else 2000, "WRITE")
    b.send(b"".join(encode_command(*argv) for argv in pipeline))
    _blocked_clients(admin, 1)
    c.send(encode_command("DEL", "ps"))
    _blocked_clients(admin, 2)
    if unpause:
        admin.call("CLIENT", "UNPAUSE")
    return [_read(b) for _ in range(replies)], _read(c), admin.call("EXISTS", "ps")


def test_pipelined_commands_run_before_other_released_clients(servers):
    _differential(servers, lambda connect: _pipelined_after_held(connect, [("XADD", "ps", "2-1", "f", "v"), ("XLEN", "ps")], 2))


def test_pipelined_transaction_runs_before_other_released_clients(servers):
    pipeline = [("XADD", "ps", "2-1", "f", "v"), ("MULTI",), ("XLEN", "ps"), ("XRANGE", "ps", "-", "+"), ("EXEC",)]
    _differential(servers, lambda connect: _pipelined_after_held(connect, pipeline, 5))


def test_pipelined_commands_run_in_turn_when_the_pause_times_out(servers):
    # a 2 s pause ends by its timer: the reads wait up to 3 s each
    pipeline = [("XADD", "ps", "2-1", "f", "v"), ("XLEN", "ps")]
    _differential(servers, lambda connect: _pipelined_after_held(connect, pipeline, 2, unpause=False))


def _expiry_story(port: int, active: bool) -> list:
    """A key's TTL passes during CLIENT PAUSE WRITE: what DBSIZE, GET and INFO show, then after UNPAUSE."""
    admin = RawConn(port)
    try:
        admin.call("FLUSHALL")
        admin.call("CONFIG", "RESETSTAT")
        admin.call("DEBUG", "SET-ACTIVE-EXPIRE", "1" if active else "0")
        admin.call("SET", "k", "v")
        admin.call("SET", "ex", "v", "PX", "100")
        admin.call("CLIENT", "PAUSE", "100000", "WRITE")
        time.sleep(0.6)  # the TTL passes; active expiry would have had about six cycles
        seen = [admin.call("DBSIZE"), admin.call("GET", "ex"), admin.call("DBSIZE"), admin.call("EXISTS", "ex"), admin.call("DBSIZE")]
        stats = admin.call("INFO", "stats").decode()
        seen.append(stats.split("expired_keys:")[1].split("\r\n")[0])
        admin.call("CLIENT", "UNPAUSE")
        seen += [admin.call("GET", "ex"), admin.call("DBSIZE")]
        stats = admin.call("INFO", "stats").decode()
        seen.append(stats.split("expired_keys:")[1].split("\r\n")[0])
        return seen
    finally:
        admin.call("DEBUG", "SET-ACTIVE-EXPIRE", "1")
        admin.close()


@pytest.mark.parametrize("active", [True, False], ids=["active expiry on", "lazy expiry only"])
def test_nothing_expires_during_a_pause(servers, active):
    """Redis pauses expiry with writes (PAUSE_ACTION_EXPIRE): a key past its TTL is missing to reads but
    stays, so no DEL reaches the AOF or replicas while a failover waits for their offsets."""
    millrace, redis = servers
    ours, theirs = _expiry_story(millrace.port, active), _expiry_story(redis.port, active)
    assert ours == theirs
    assert theirs == [2, None, 2, 0, 2, "0", None, 1, "1"]
