"""Replies are written once per client per loop turn, after the turn's reads (Redis's beforeSleep).

In-process, with a recording transport: what these tests check is when and how
often the server calls write(), which a socket cannot show.
"""

from __future__ import annotations

import asyncio

import pytest

import server.commands  # noqa: F401  (registers the handlers)
from server.client import Client
from server.server import Server
from tests.rawclient import encode_command


class RecordingTransport:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written.append(data)

    def get_extra_info(self, name: str):
        return None

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


@pytest.fixture
def setup():
    loop = asyncio.new_event_loop()
    server = Server()
    server.loop = loop

    def connect() -> tuple[Client, RecordingTransport]:
        client, transport = Client(server), RecordingTransport()
        client.connection_made(transport)
        return client, transport

    def turn() -> None:
        loop.run_until_complete(asyncio.sleep(0))

    yield server, connect, turn
    loop.close()


def test_replies_wait_for_the_end_of_the_turn_and_go_out_in_one_write(setup):
    server, connect, turn = setup
    client, transport = connect()
    client.data_received(encode_command("SET", "k", "v"))
    client.data_received(encode_command("GET", "k") + encode_command("PING"))
    assert transport.written == []  # nothing is written from the read handler
    turn()
    assert transport.written == [b"+OK\r\n$1\r\nv\r\n+PONG\r\n"]
    turn()
    assert len(transport.written) == 1


def test_each_client_gets_its_own_replies(setup):
    server, connect, turn = setup
    (a, ta), (b, tb) = connect(), connect()
    a.data_received(encode_command("ECHO", "a1"))
    b.data_received(encode_command("ECHO", "b1"))
    a.data_received(encode_command("ECHO", "a2"))
    turn()
    assert ta.written == [b"$2\r\na1\r\n$2\r\na2\r\n"]
    assert tb.written == [b"$2\r\nb1\r\n"]


def test_quit_closes_after_its_reply_is_written(setup):
    server, connect, turn = setup
    client, transport = connect()
    client.data_received(encode_command("PING") + encode_command("QUIT") + encode_command("PING"))
    assert not transport.closed
    turn()
    assert transport.written == [b"+PONG\r\n+OK\r\n"]
    assert transport.closed


def test_a_killed_client_still_gets_the_replies_of_commands_it_ran(setup):
    server, connect, turn = setup
    (killer, tk), (victim, tv) = connect(), connect()
    victim.data_received(encode_command("INCR", "n") + encode_command("INCR", "n"))
    killer.data_received(encode_command("CLIENT", "KILL", "ID", str(victim.id)))
    assert tv.written == [b":1\r\n:2\r\n"] and tv.closed
    turn()
    assert tk.written == [b":1\r\n"]
    assert tv.written == [b":1\r\n:2\r\n"]  # nothing after the close


# A session that visits what the one-request path must hand over to the general
# one: errors before execution, MULTI, CLIENT REPLY modes, RESP3, a wake-up of a
# blocked reader, and QUIT.
SESSION = [
    ("PING",), ("SET", "k", "v"), ("GET", "k"), ("GET", "nokey"), ("GET",), ("NOSUCH", "x"), ("CONFIG", "GET", "maxclients"),
    ("CLIENT", "REPLY", "SKIP"), ("INCRBY", "skipped", "7"), ("INCR", "n"),
    ("CLIENT", "REPLY", "OFF"), ("SET", "quiet", "1"), ("CLIENT", "REPLY", "ON"),
    ("MULTI",), ("INCR", "n"), ("GET", "k"), ("EXEC",), ("MULTI",), ("GET",), ("EXEC",),
    ("XADD", "s", "1-1", "f", "v"), ("XADD", "s", "1-1", "f", "v"), ("XRANGE", "s", "-", "+"), ("XADD", "s", "*"),
    ("HELLO", "3"), ("GET", "nokey"), ("CONFIG", "GET", "maxclients"), ("XREAD", "STREAMS", "s", "0"), ("XADD", "w", "5-1", "a", "b"),
    ("SET", "k", "v2", "GET"), ("QUIT",), ("PING",),
]


def _play(setup, one_per_read: bool) -> tuple[bytes, bytes, dict]:
    server, connect, turn = setup

    def counters() -> dict:  # the command table is the process's: count this session's share
        return {cmd.name: (cmd.calls, cmd.failed_calls, cmd.rejected_calls) for cmd in set(server.commands.values())}

    before = counters()
    (client, transport), (waiter, waiter_transport) = connect(), connect()
    waiter.data_received(encode_command("XREAD", "BLOCK", "0", "STREAMS", "w", "$"))
    requests = [encode_command(*argv) for argv in SESSION]
    for data in requests if one_per_read else [b"".join(requests)]:
        if not transport.closed:
            client.data_received(data)
        turn()
    stats = {name: tuple(a - b for a, b in zip(now, before.get(name, (0, 0, 0)), strict=True)) for name, now in counters().items()}
    return b"".join(transport.written), b"".join(waiter_transport.written), {"stats": stats, "dirty": server.dirty, "errors": dict(server.errorstats)}


def test_one_request_per_read_answers_as_a_pipeline_does():
    """Reads of one request take a shorter path than pipelines: replies, wake-ups and counters must not differ."""
    loop = asyncio.new_event_loop()
    results = []
    for one_per_read in (True, False):
        server = Server()
        server.loop = loop

        def connect(server=server) -> tuple[Client, RecordingTransport]:
            client, transport = Client(server), RecordingTransport()
            client.connection_made(transport)
            return client, transport

        def turn() -> None:
            loop.run_until_complete(asyncio.sleep(0))

        results.append(_play((server, connect, turn), one_per_read))
    loop.close()
    alone, replies = results[0], results[0][0]
    assert replies.startswith(b"+PONG\r\n+OK\r\n$1\r\nv\r\n$-1\r\n-ERR wrong number of arguments for 'get' command\r\n")
    assert b"\r\n_\r\n%1\r\n" in replies  # the missing key's nil in RESP3, then CONFIG GET's map
    assert b":7\r\n" not in replies and b"+OK\r\n+OK\r\n+QUEUED" in replies  # SKIP and OFF drop their replies
    assert replies.endswith(b"$1\r\nv\r\n+OK\r\n")  # SET ... GET (RESP3), then QUIT; the PING after it never runs
    assert alone[1].startswith(b"*1\r\n*2\r\n$1\r\nw\r\n")  # the blocked XREAD woke with the XADD to w
    assert alone[2]["stats"]["incr"][0] == 2 and alone[2]["errors"]
    assert results[0] == results[1]
