"""Effects reproduce stream state exactly: replay a random workload's effects into a fresh server.

The workload runs in one in-process Server through an ordinary client
(approximate trims, LIMIT, `*` and `ms-*` IDs, XDEL, XSETID, node sizes
changed in the middle); its effects are applied to a second Server through
a LoadingClient, as the AOF loader and replicas do, with the default node
sizes. Both keyspaces must then hold the same streams: entries, lengths and
every counter.
"""

from __future__ import annotations

import random

import pytest

import server.commands  # noqa: F401  (registers the handlers)
from server.client import Client, LoadingClient
from server.server import Server
from storage.stream import Stream
from storage.stream_id import MAX_ID
from tests.test_streams_diff import Workload


def stream_state(stream: Stream) -> tuple:
    return (
        stream.range(0, MAX_ID),
        len(stream),
        stream.last_id,
        stream.first_id,
        stream.max_deleted_entry_id,
        stream.entries_added,
    )


def keyspace_state(server: Server) -> dict:
    state = {}
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            state[(db.id, key)] = stream_state(value) if isinstance(value, Stream) else value
    return state


def check_normalized(argv: list[bytes]) -> None:
    """What reaches the AOF and replicas has concrete IDs and exact trims only."""
    name = argv[0].upper()
    if name in (b"XADD", b"XTRIM"):
        assert b"~" not in argv and b"LIMIT" not in [a.upper() for a in argv], argv
    if name == b"XADD":
        id_pos = 2 if argv[2].upper() != b"MAXLEN" else 5
        assert argv[id_pos] != b"*" and not argv[id_pos].endswith(b"-*"), argv


def replay(replica: Server, loader: LoadingClient, effects: list[list[bytes]]) -> None:
    for argv in effects:
        check_normalized(argv)
        if argv[0].upper() in (b"MULTI", b"EXEC"):
            continue
        reply = replica.execute(loader, argv)
        assert type(reply).__name__ != "Error", (argv, reply)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_effects_replay_to_the_same_streams(seed):
    source, replica = Server(), Server()
    effects: list[list[bytes]] = []
    source.effect_listeners.append(effects.extend)
    client, loader = Client(source), LoadingClient(replica)
    workload = Workload(seed)
    rnd = random.Random(seed)
    applied = 0
    for step in range(3000):
        if step == 1500:
            source.config.set("stream-node-max-entries", "7")
            source.config.set("stream-node-max-bytes", "300")
        source.clock()
        commands = workload.commands()
        if rnd.random() < 0.05:
            commands.append([b"XADD", rnd.choice([b"s1", b"s2"]), b"MAXLEN", b"~", b"120", b"*", b"f", b"v"])
        if rnd.random() < 0.03:
            commands.append([b"XTRIM", rnd.choice([b"s1", b"s2", b"s3"]), b"MINID", b"~", b"0-0"])
        for args in commands:
            source.execute(client, [a if isinstance(a, bytes) else str(a).encode() for a in args])
        if step % 25 == 0:
            replay(replica, loader, effects[applied:])
            applied = len(effects)
            assert keyspace_state(replica) == keyspace_state(source), step
    replay(replica, loader, effects[applied:])
    assert keyspace_state(replica) == keyspace_state(source)
    assert sum(argv[0] == b"XADD" for argv in effects) > 1000
    assert any(argv[0] == b"XADD" and b"MAXLEN" in argv for argv in effects)
    assert any(argv[0] == b"XTRIM" for argv in effects)
    assert any(argv[0] == b"XDEL" for argv in effects)
    assert any(argv[0] == b"XSETID" for argv in effects)
