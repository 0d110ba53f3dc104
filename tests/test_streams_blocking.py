"""XREAD BLOCK with several clients: wake-ups, timeouts, and what Redis 7.4 does when the key changes.

Redis re-runs a blocked XREAD only when a stream is written under one of its
keys; a deleted, flushed or retyped key leaves the client waiting, with the
IDs it resolved when it blocked (`$` became the stream's last ID then).
"""

from __future__ import annotations

import time

import pytest

import server.commands  # noqa: F401  (registers the handlers)
from protocol.encoder import encode
from server.client import Client
from server.server import BLOCKED, Server
from tests.rawclient import RawConn, encode_command


def blocked_clients(conn: RawConn) -> int:
    info = conn.call("INFO", "clients").decode()
    return int(info.split("blocked_clients:")[1].split()[0])


def wait_blocked(conn: RawConn, n: int) -> None:
    for _ in range(500):
        if blocked_clients(conn) == n:
            return
        time.sleep(0.01)
    raise AssertionError(f"expected {n} blocked clients, INFO says {blocked_clients(conn)}")


def silent(conn: RawConn, seconds: float = 0.15) -> bool:
    """No reply arrives within `seconds`."""
    return conn.read_raw(timeout=seconds) == b""


@pytest.fixture
def admin(server):
    conn = RawConn(server.port)
    conn.call("FLUSHALL")
    yield conn
    conn.close()


@pytest.fixture
def conns(server):
    opened: list[RawConn] = []

    def connect() -> RawConn:
        conn = RawConn(server.port)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def block(conn: RawConn, *args) -> None:
    conn.send(encode_command("XREAD", *args))


def test_xadd_wakes_every_waiter(admin, conns):
    admin.call("XADD", "s", "5-0", "old", "1")
    waiters = [conns() for _ in range(3)]
    for i, conn in enumerate(waiters):
        block(conn, "BLOCK", "0", "STREAMS", "s", "$")
        wait_blocked(admin, i + 1)
    assert admin.call("XADD", "s", "6-0", "f", "v") == b"6-0"
    for conn in waiters:
        assert conn.read() == [[b"s", [[b"6-0", [b"f", b"v"]]]]]
    wait_blocked(admin, 0)


def test_timeout_and_zero_means_forever(admin, conns):
    conn = conns()
    start = time.monotonic()
    block(conn, "BLOCK", "150", "STREAMS", "s", "$")
    assert conn.read() is None
    assert time.monotonic() - start >= 0.14
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    assert silent(conn, 0.3)
    admin.call("XADD", "s", "1-0", "f", "v")
    assert conn.read() == [[b"s", [[b"1-0", [b"f", b"v"]]]]]


def test_only_streams_with_new_entries_are_returned(admin, conns):
    admin.call("XADD", "a", "1-0", "f", "v")
    conn = conns()
    block(conn, "COUNT", "2", "BLOCK", "0", "STREAMS", "a", "b", "$", "$")
    wait_blocked(admin, 1)
    admin.call("XADD", "b", "7-0", "x", "1")
    assert conn.read() == [[b"b", [[b"7-0", [b"x", b"1"]]]]]


def test_count_applies_when_served(admin, conns):
    conn = conns()
    block(conn, "COUNT", "2", "BLOCK", "0", "STREAMS", "s", "0")
    wait_blocked(admin, 1)
    admin.send(b"".join(encode_command("XADD", "s", f"{i}-0", "f", "v") for i in (1, 2, 3)))
    assert [admin.read() for _ in range(3)] == [b"1-0", b"2-0", b"3-0"]
    # served right after the first XADD of the pipeline, as Redis serves blocked clients after each command
    assert conn.read() == [[b"s", [[b"1-0", [b"f", b"v"]]]]]


def test_deleted_key_keeps_the_client_waiting(admin, conns):
    admin.call("XADD", "s", "5-0", "f", "v")
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    assert admin.call("DEL", "s") == 1
    assert silent(conn)
    assert blocked_clients(admin) == 1
    # the new stream's entries must still be newer than 5-0, the ID resolved when blocking
    admin.call("XADD", "s", "3-0", "f", "v")
    assert silent(conn)
    admin.call("XADD", "s", "6-0", "f", "new")
    assert conn.read() == [[b"s", [[b"6-0", [b"f", b"new"]]]]]


def test_type_change_keeps_the_client_waiting(admin, conns):
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    admin.call("SET", "s", "x")
    assert silent(conn)
    admin.call("DEL", "s")
    admin.call("XADD", "s", "1-0", "f", "v")
    assert conn.read() == [[b"s", [[b"1-0", [b"f", b"v"]]]]]


def test_flush_keeps_the_client_waiting(admin, conns):
    admin.call("XADD", "s", "5-0", "f", "v")
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    admin.call("FLUSHALL")
    assert silent(conn)
    admin.call("XADD", "s", "4-0", "f", "v")
    assert silent(conn)
    admin.call("XADD", "s", "9-0", "f", "v")
    assert conn.read() == [[b"s", [[b"9-0", [b"f", b"v"]]]]]


def test_reexecution_checks_every_key_type(admin, conns):
    """Redis 7.2+ runs the blocked XREAD again from the start (7.0 served the data)."""
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "a", "b", "$", "$")
    wait_blocked(admin, 1)
    admin.call("SET", "b", "x")  # b is not signalled as a stream: nothing happens
    assert silent(conn)
    admin.call("XADD", "a", "1-0", "f", "v")
    assert str(conn.read()) == "WRONGTYPE Operation against a key holding the wrong kind of value"
    wait_blocked(admin, 0)


def test_changes_without_new_entries_keep_waiting(admin, conns):
    admin.call("XADD", "s", "1-0", "f", "v")
    admin.call("XADD", "s", "2-0", "f", "v")
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    admin.call("XDEL", "s", "1-0")
    admin.call("XTRIM", "s", "MAXLEN", "0")
    admin.call("XSETID", "s", "5-0")
    assert silent(conn)
    admin.call("XADD", "s", "6-0", "f", "w")
    assert conn.read() == [[b"s", [[b"6-0", [b"f", b"w"]]]]]


def test_an_entry_trimmed_by_its_own_xadd_keeps_the_client_waiting(admin, conns):
    """XADD MAXLEN 0 adds and trims at once. Redis 7.2+ re-run the blocked XREAD (redis#11012) and
    an empty stream serves nothing, so the client waits; 7.0 answered at once with an empty range."""
    admin.call("XADD", "s", "1-0", "f", "v")
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    admin.call("XADD", "s", "MAXLEN", "0", "2-0", "f", "w")
    assert silent(conn)
    admin.call("XADD", "s", "3-0", "f", "x")
    assert conn.read() == [[b"s", [[b"3-0", [b"f", b"x"]]]]]


def test_a_block_time_past_the_clock_s_range_is_refused(admin):
    """Newest timeout.c: BLOCK t with t + now beyond LLONG_MAX is "timeout is out of range", even when
    data would be served at once (7.0 had no such check and served it)."""
    admin.call("XADD", "s", "1-0", "f", "v")
    admin.call("XGROUP", "CREATE", "s", "g", "0")
    assert str(admin.call("XREAD", "BLOCK", "9223372036854775807", "STREAMS", "s", "0")) == "ERR timeout is out of range"
    reply = admin.call("XREADGROUP", "GROUP", "g", "c", "BLOCK", "9223372036854775807", "STREAMS", "s", ">")
    assert str(reply) == "ERR timeout is out of range"
    assert admin.call("XREAD", "BLOCK", "9000000000000000000", "STREAMS", "s", "0") == [[b"s", [[b"1-0", [b"f", b"v"]]]]]


def test_rename_onto_the_key_serves_the_client(admin, conns):
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")  # no key: $ is 0-0
    wait_blocked(admin, 1)
    admin.call("XADD", "other", "3-0", "f", "v")
    assert admin.call("RENAME", "other", "s") == b"OK"
    assert conn.read() == [[b"s", [[b"3-0", [b"f", b"v"]]]]]


def test_disconnect_releases_the_waiter(admin, conns):
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    conn.close()
    wait_blocked(admin, 0)
    assert admin.call("XADD", "s", "1-0", "f", "v") == b"1-0"


def test_resp3_reply_is_a_map(admin, conns):
    conn = conns()
    conn.call("HELLO", "3")
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(admin, 1)
    admin.call("XADD", "s", "1-0", "f", "v")
    assert conn.read() == {b"s": [[b"1-0", [b"f", b"v"]]]}


def test_block_inside_multi_does_not_block(admin):
    assert admin.call("MULTI") == b"OK"
    assert admin.call("XREAD", "BLOCK", "0", "STREAMS", "s", "$") == b"QUEUED"
    assert admin.call("EXEC") == [None]


def test_plus_waits_for_the_last_entry(admin, conns):
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "+")
    wait_blocked(admin, 1)
    admin.call("MULTI")
    admin.call("XADD", "s", "1-0", "f", "a")
    admin.call("XADD", "s", "2-0", "f", "b")
    admin.call("EXEC")
    assert conn.read() == [[b"s", [[b"2-0", [b"f", b"b"]]]]]  # `+` is resolved again: only the last


def test_commands_sent_while_blocked_run_after(admin, conns):
    conn = conns()
    block(conn, "BLOCK", "0", "STREAMS", "s", "$")
    conn.send(b"*1\r\n$4\r\nPING\r\n")
    wait_blocked(admin, 1)
    admin.call("XADD", "s", "1-0", "f", "v")
    assert conn.read() == [[b"s", [[b"1-0", [b"f", b"v"]]]]]
    assert conn.read() == b"PONG"


# -- serving order, in process ---------------------------------------------------------------


class Recorder(Client):
    """A client without a socket that records when it is resumed."""

    served: list[tuple[int, object]]

    def resume(self, reply) -> None:
        self.blocked = None
        Recorder.served.append((self.id, reply))


def test_waiters_are_served_in_the_order_they_blocked():
    server = Server()
    Recorder.served = []
    clients = []
    for i in (3, 1, 2):
        client = Recorder(server)
        client.id = i
        assert server.execute(client, [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]) is BLOCKED
        clients.append(client)
    writer = Recorder(server)
    assert server.execute(writer, [b"XADD", b"s", b"1-0", b"f", b"v"]) == b"1-0"
    server.serve_ready()
    assert [client_id for client_id, _reply in Recorder.served] == [3, 1, 2]
    assert encode(Recorder.served[0][1]) == encode([[b"s", [[b"1-0", [b"f", b"v"]]]]])  # (entries come pre-encoded)
    assert server.blocking.count == 0


def test_a_waiter_does_not_keep_a_deleted_stream_alive():
    import gc
    import weakref

    server = Server()
    Recorder.served = []
    writer, waiter = Recorder(server), Recorder(server)
    server.execute(writer, [b"XADD", b"s", b"1-0", b"f", b"v"])
    stream_ref = weakref.ref(server.keyspace[0].data[b"s"])
    assert server.execute(waiter, [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"]) is BLOCKED
    server.execute(writer, [b"DEL", b"s"])
    server.serve_ready()
    gc.collect()
    assert stream_ref() is None
    assert Recorder.served == []
    server.execute(writer, [b"XADD", b"s", b"2-0", b"f", b"w"])
    server.serve_ready()
    assert [(who, encode(reply)) for who, reply in Recorder.served] == [(waiter.id, encode([[b"s", [[b"2-0", [b"f", b"w"]]]]]))]


class FakeTransport:
    """Collects what a Client writes; no socket."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def get_extra_info(self, name: str):
        return None

    def close(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def test_commands_read_while_blocked_stay_ahead_of_later_ones():
    """A wake-up and the blocked client's next bytes can arrive in the same loop iteration:
    what the client pipelined behind its XREAD must still be answered first."""
    import asyncio

    loop = asyncio.new_event_loop()
    try:
        server = Server()
        server.loop = loop
        reader, writer = Client(server), Client(server)
        transport = FakeTransport()
        reader.connection_made(transport)
        writer.connection_made(FakeTransport())
        reader.data_received(encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$") + encode_command("ECHO", "first"))
        assert reader.blocked is not None
        writer.data_received(encode_command("XADD", "s", "1-0", "f", "v"))  # serves the reader
        reader.data_received(encode_command("ECHO", "second"))  # before the loop runs again
        loop.run_until_complete(asyncio.sleep(0))
        replies = b"".join(transport.written)
        assert replies.endswith(b"$5\r\nfirst\r\n$6\r\nsecond\r\n"), replies
    finally:
        loop.close()


def test_a_write_postponed_by_client_pause_wakes_readers_when_it_runs():
    import asyncio

    from server.pause import pause, unpause

    loop = asyncio.new_event_loop()
    try:
        server = Server()
        server.loop = loop
        reader, writer = Client(server), Client(server)
        transport = FakeTransport()
        reader.connection_made(transport)
        writer.connection_made(FakeTransport())
        reader.data_received(encode_command("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
        pause(server, True, server.clock() + 60000)
        writer.data_received(encode_command("XADD", "s", "1-0", "f", "v"))
        assert writer.blocked is not None  # postponed by the pause
        unpause(server)
        loop.run_until_complete(asyncio.sleep(0))  # replies are written when the loop turn ends
        assert b"".join(transport.written) == b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    finally:
        loop.close()
