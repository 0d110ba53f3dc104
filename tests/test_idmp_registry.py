"""The IDMP expiry cron finds streams through a registry of (db, key); each stream's Idmp.home says where.

The usual idempotent XADD checks the stream's home instead of writing the
registry; these in-process tests move streams around (RENAME, MOVE, SWAPDB,
COPY, and a key taken by another stream while its first was renamed away)
and check that once an idempotent XADD has reached a stream where it now is,
the cron expires its iids there, as it does for a stream that never moved.
"""

from __future__ import annotations

import pytest

import server.commands  # noqa: F401  (registers the handlers)
from server.client import Client
from server.commands.idmp import expire_cycle
from server.server import Server


def tracked(server: Server, client: Client, key: bytes) -> int:
    info = server.execute(client, [b"XINFO", b"STREAM", key])
    fields = dict(zip(info[0::2], info[1::2], strict=True)) if isinstance(info, list) else info
    return fields[b"iids-tracked"]


def setup() -> tuple[Server, Client]:
    server = Server()
    client = Client(server)
    server.clock()
    server.config.set("stream-idmp-duration", "1")
    return server, client


def add(server: Server, client: Client, key: bytes, iid: bytes) -> None:
    reply = server.execute(client, [b"XADD", key, b"IDMP", b"p", iid, b"*", b"f", b"v"])
    assert isinstance(reply, bytes), reply


def expire_later(server: Server) -> None:
    server.now += 5000  # past the 1 s duration of every iid so far
    expire_cycle(server)


@pytest.mark.parametrize("move", ["rename", "move", "swapdb", "copy"])
def test_a_moved_stream_expires_where_it_is_after_its_next_idempotent_xadd(move):
    server, client = setup()
    add(server, client, b"a", b"1")
    add(server, client, b"a", b"2")  # the steady state: home checked, not written
    target = b"a"
    if move == "rename":
        server.execute(client, [b"RENAME", b"a", b"b"])
        target = b"b"
    elif move == "move":
        server.execute(client, [b"MOVE", b"a", b"1"])
        server.execute(client, [b"SELECT", b"1"])
    elif move == "swapdb":
        server.execute(client, [b"SWAPDB", b"0", b"1"])
        server.execute(client, [b"SELECT", b"1"])
    else:
        server.execute(client, [b"COPY", b"a", b"b"])
        server.execute(client, [b"DEL", b"a"])
        target = b"b"
    add(server, client, target, b"3")  # a steady-state add where the stream now is
    assert tracked(server, client, target) == 3
    expire_later(server)
    assert tracked(server, client, target) == 0


def test_a_stream_displaced_from_its_key_registers_again():
    """a is renamed away, another stream takes key a (and the registry's entry), a comes back: the cron must
    find the first stream at a, though its home still says (0, a)."""
    server, client = setup()
    add(server, client, b"a", b"1")
    server.execute(client, [b"RENAME", b"a", b"b"])
    add(server, client, b"a", b"other")  # a second stream at a, registered as (0, a)
    server.execute(client, [b"RENAME", b"b", b"a"])  # the first one back, over it
    add(server, client, b"a", b"2")
    assert tracked(server, client, b"a") == 2
    expire_later(server)
    assert tracked(server, client, b"a") == 0
