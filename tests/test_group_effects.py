"""The effects of consumer-group commands replay into exactly the same state.

Random workloads (XADD/XDEL/XTRIM/XSETID/DEL and every group command, with the clock
moving) run through an in-process Server; its propagated effects are applied
to a fresh Server through a LoadingClient, and the two keyspaces are compared
field by field: entries, stream counters, groups (last-delivered-id,
entries-read, lag), PELs (owner, delivery time and count) and consumers
(seen-time, active-time, their PELs).
"""

from __future__ import annotations

import random

import msgpack
import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import NULL_ARRAY, Error
from server.client import Client, LoadingClient
from server.server import Server
from storage.consumer_group import dump_groups, lag, load_groups
from storage.stream import Stream
from storage.stream_id import MAX_ID
from tests.test_streams_wide_diff import Workload as WideWorkload

KEYS = [b"s1", b"s2"]
GROUPS = [b"g1", b"g2", b"g3"]
CONSUMERS = [b"alice", b"bob", b"carol"]


def dump(srv: Server) -> dict:
    """Everything observable about the streams of every database."""
    state = {}
    for db in srv.keyspace.dbs:
        for key, value in db.data.items():
            if not isinstance(value, Stream):
                state[(db.id, key)] = value
                continue
            groups = {}
            for name, group in value.groups.items():
                groups[name] = {
                    "last_id": group.last_id,
                    "entries_read": group.entries_read,
                    "lag": lag(value, group),
                    "pel": [(i, p.consumer.name, p.delivery_time, p.delivery_count) for i, p in group.pel.items()],
                    "consumers": {
                        cname: (c.seen_time, c.active_time, list(c.pel.keys()))
                        for cname, c in sorted(group.consumers.items())
                    },
                }
                for i, p in group.pel.items():
                    assert p.consumer.pel[i] is p  # the group's and the owner's PEL share the entry
            state[(db.id, key)] = {
                "entries": value.range(0, MAX_ID),
                "length": len(value),
                "last_id": value.last_id,
                "first_id": value.first_id,
                "max_deleted_entry_id": value.max_deleted_entry_id,
                "entries_added": value.entries_added,
                "groups": groups,
            }
    return state


class Workload:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.server = Server()
        self.server.now = 1_700_000_000_000
        self.client = Client(self.server)
        self.batches: list[list[list[bytes]]] = []
        self.server.effect_listeners.append(self.batches.append)
        self.replies = []

    def run(self, *argv) -> object:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in argv]
        reply = self.server.execute(self.client, argv)
        self.replies.append((argv, reply))
        return reply

    def some_id(self, key: bytes) -> str:
        """An ID near the stream's entries: existing, deleted, or not yet there."""
        stream = self.client.db.data.get(key)
        top = stream.last_id >> 64 if isinstance(stream, Stream) else 5
        return f"{self.rng.randint(0, top + 2)}-{self.rng.randint(0, 1)}"

    def some_idle(self, key: bytes, group: bytes) -> int:
        """The idle time of a pending entry of the group, exactly: a min-idle-time on the boundary."""
        stream = self.client.db.data.get(key)
        cg = stream.groups.get(group) if isinstance(stream, Stream) else None
        if cg is None or not cg.pel:
            return 1
        pending = self.rng.choice(list(cg.pel.entries.values()))
        return max(1, self.server.now - pending.delivery_time)

    def setid(self, key: bytes) -> None:
        """XSETID, sometimes lowering entries-added below what groups have read (they are clamped)."""
        stream = self.client.db.data.get(key)
        if not isinstance(stream, Stream):
            return
        added = max(len(stream), stream.entries_added - self.rng.randint(0, 3))
        last = stream.last_id + self.rng.randint(0, 1)
        self.run("XSETID", key, f"{last >> 64}-{last & ((1 << 64) - 1)}", "ENTRIESADDED", added)

    def step(self) -> None:
        rng = self.rng
        key = rng.choice(KEYS)
        group = rng.choice(GROUPS)
        consumer = rng.choice(CONSUMERS)
        self.server.now += rng.choice([0, 0, 1, 7, 250, 5000])
        roll = rng.random()
        if roll < 0.22:
            trim = rng.choice([[], [], ["MAXLEN", "~", rng.randint(0, 5)], ["MAXLEN", rng.randint(0, 5)]])
            self.run("XADD", key, *trim, "*", "f", rng.randint(0, 9))
        elif roll < 0.26:
            self.run("XDEL", key, *[self.some_id(key) for _ in range(rng.randint(1, 3))])
        elif roll < 0.29:
            self.run("XTRIM", key, "MAXLEN", rng.randint(0, 6))
        elif roll < 0.32:
            self.run("DEL", key) if rng.random() < 0.3 else self.setid(key)
        elif roll < 0.37:
            start = rng.choice(["0", "$", self.some_id(key)])
            extra = rng.choice([[], ["MKSTREAM"], ["ENTRIESREAD", rng.randint(0, 8)]])
            self.run("XGROUP", "CREATE", key, group, start, *extra)
        elif roll < 0.40:
            extra = rng.choice([[], ["ENTRIESREAD", rng.randint(-1, 8)]])
            self.run("XGROUP", "SETID", key, group, rng.choice(["0", "$", self.some_id(key)]), *extra)
        elif roll < 0.41:
            self.run("XGROUP", "DESTROY", key, group)
        elif roll < 0.43:
            self.run("XGROUP", "CREATECONSUMER", key, group, consumer)
        elif roll < 0.44:
            self.run("XGROUP", "DELCONSUMER", key, group, consumer)
        elif roll < 0.66:
            options = []
            if rng.random() < 0.7:
                options += ["COUNT", rng.randint(0, 4)]
            if rng.random() < 0.15:
                options.append("NOACK")
            start = ">" if rng.random() < 0.75 else rng.choice(["0", self.some_id(key)])
            keys = [key] if rng.random() < 0.8 else KEYS
            self.run("XREADGROUP", "GROUP", group, consumer, *options, "STREAMS", *keys, *[start] * len(keys))
        elif roll < 0.76:
            self.run("XACK", key, group, *[self.some_id(key) for _ in range(rng.randint(1, 4))])
        elif roll < 0.86:
            options = []
            if rng.random() < 0.3:
                options += rng.choice([["IDLE", rng.randint(0, 3000)], ["TIME", self.server.now - rng.randint(-50, 3000)]])
            if rng.random() < 0.3:
                options += ["RETRYCOUNT", rng.randint(0, 5)]
            for flag in ("FORCE", "JUSTID"):
                if rng.random() < 0.3:
                    options.append(flag)
            if rng.random() < 0.1:
                options += ["LASTID", self.some_id(key)]
            ids = [self.some_id(key) for _ in range(rng.randint(1, 3))]
            self.run("XCLAIM", key, group, consumer, rng.choice([0, 0, 100, 4000, self.some_idle(key, group)]), *ids, *options)
        else:
            options = ["COUNT", rng.randint(1, 3)] if rng.random() < 0.6 else []
            if rng.random() < 0.3:
                options.append("JUSTID")
            min_idle = rng.choice([0, 100, 4000, self.some_idle(key, group)])
            self.run("XAUTOCLAIM", key, group, consumer, min_idle, rng.choice(["0", "-", self.some_id(key)]), *options)


def replay(batches, now: int, transactions: bool = False) -> Server:
    """Apply propagated batches to a fresh server as a loader would (MULTI/EXEC kept or dropped)."""
    fresh = Server()
    fresh.now = now
    loader = LoadingClient(fresh)
    for batch in batches:
        for argv in batch:
            if not transactions and argv[0].upper() in (b"MULTI", b"EXEC"):
                continue
            reply = fresh.execute(loader, argv)
            assert type(reply) is not Error, (argv, reply)
            if argv[0].upper() == b"EXEC":
                assert all(type(r) is not Error for r in reply), (batch, reply)
    return fresh


def assert_pels_counted(server: Server) -> None:
    """Every PEL's bookkeeping: its sorted IDs are the live ones plus exactly `stale` removed ones."""
    for db in server.keyspace.dbs:
        for value in db.data.values():
            if not isinstance(value, Stream):
                continue
            for group in value.groups.values():
                for pel in [group.pel, *(c.pel for c in group.consumers.values())]:
                    assert len(pel.order) - pel.head - pel.stale == len(pel.entries)
                    assert list(pel) == sorted(pel.entries)


@pytest.mark.parametrize("seed", range(40))
def test_effects_replay_to_the_same_state(seed):
    work = Workload(seed)
    for step in range(250):
        work.step()
        if step % 10 == 0:
            assert_pels_counted(work.server)
    assert any(a[0] == b"XREADGROUP" and type(r) is not Error and r is not NULL_ARRAY for a, r in work.replies)
    assert any(a[0] == b"XSETID" and type(r) is not Error for a, r in work.replies) or seed % 4
    fresh = replay(work.batches, work.server.now + 60_000)
    assert dump(fresh) == dump(work.server)


@pytest.mark.parametrize("seed", range(5))
def test_effects_replay_through_multi_exec(seed):
    """The batches as the AOF and replicas get them, transactions included."""
    work = Workload(100 + seed)
    for _ in range(250):
        work.step()
    assert any(batch[0] == [b"MULTI"] for batch in work.batches)
    fresh = replay(work.batches, work.server.now + 60_000, transactions=True)
    assert dump(fresh) == dump(work.server)


def test_effects_replay_midway_too():
    """Replaying a prefix of the effects gives the state the server had at that point."""
    work = Workload(1234)
    for _ in range(120):
        work.step()
        snapshot = dump(work.server)
        fresh = replay(work.batches, work.server.now + 60_000)
        assert dump(fresh) == snapshot


@pytest.mark.parametrize("seed", range(5))
def test_groups_snapshot_round_trip(seed):
    """dump_groups/load_groups (through msgpack) keep every group, PEL and consumer."""
    work = Workload(seed)
    for _ in range(250):
        work.step()
    before = dump(work.server)
    for db in work.server.keyspace.dbs:
        for value in db.data.values():
            if isinstance(value, Stream):
                value.groups = load_groups(msgpack.unpackb(msgpack.packb(dump_groups(value.groups))))
    assert dump(work.server) == before


def test_xsetid_effect_keeps_a_counter_past_entries_added():
    """XSETID's effect always states ENTRIESADDED; replayed, it must not clamp a counter the source kept."""
    work = Workload(0)
    for i in range(1, 6):
        work.run("XADD", "s", f"{i}-0", "f", i)
    work.run("XGROUP", "CREATE", "s", "g", "0")
    work.run("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    work.run("XDEL", "s", "1-0")
    work.run("XSETID", "s", "5-0", "ENTRIESADDED", "4")
    work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")  # entries-read 5 > entries-added 4
    work.run("XSETID", "s", "6-0")
    work.run("XSETID", "s", "6-0", "ENTRIESADDED", "4")
    assert work.server.keyspace[0].data[b"s"].groups[b"g"].entries_read == 5
    assert dump(replay(work.batches, work.server.now)) == dump(work.server)


@pytest.mark.parametrize("seed", [143, 288, 7])
def test_mixed_workload_effects_replay_to_the_same_state(seed):
    """tests/test_streams_wide_diff.py's workload (XSETID with MAXDELETEDID, repeated keys in reads,
    NOACK, trims with LIMIT, wrong types) with the clock moving; replayed every 100 commands.
    Seeds 143 and 288 once ended with a counter read past entries-added that XSETID's replay clamped."""
    work = Workload(seed)
    mixed = WideWorkload(seed)
    rng = random.Random(seed)
    for step in range(2400):
        work.server.now += rng.choice([0, 0, 1, 7, 250, 5000])
        work.run(*mixed.command())
        if step % 100 == 99:
            assert dump(replay(work.batches, work.server.now)) == dump(work.server), step


def test_consumer_times_follow_redis_7_2():
    """seen-time moves on every attempt, active-time only when something is delivered or claimed."""
    work = Workload(0)
    srv = work.server
    start = srv.now
    work.run("XADD", "s", "1-0", "f", "v")
    work.run("XGROUP", "CREATE", "s", "g", "$")

    def times(name: bytes):
        consumer = srv.keyspace[0].data[b"s"].groups[b"g"].consumers[name]
        return consumer.seen_time - start, consumer.active_time - start if consumer.active_time != -1 else -1

    srv.now = start + 10
    assert work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">") is NULL_ARRAY
    assert times(b"c") == (10, -1)  # created by an empty read: seen, never active
    srv.now = start + 20
    work.run("XADD", "s", "2-0", "f", "v")
    work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert times(b"c") == (20, 20)
    srv.now = start + 30
    work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "0")  # history: seen only
    assert times(b"c") == (30, 20)
    srv.now = start + 40
    assert work.run("XCLAIM", "s", "g", "d", "1000", "2-0") == []  # not idle enough: seen only
    assert times(b"d") == (40, -1)
    srv.now = start + 2000
    work.run("XCLAIM", "s", "g", "d", "1000", "2-0")
    assert times(b"d") == (2000, 2000)
    srv.now = start + 2500
    work.run("XAUTOCLAIM", "s", "g", "e", "0", "0")
    assert times(b"e") == (2500, 2500)
    info = {c[b"name"]: c for c in work.run("XINFO", "CONSUMERS", "s", "g")}
    assert (info[b"c"][b"idle"], info[b"c"][b"inactive"]) == (2470, 2480)
    assert (info[b"e"][b"idle"], info[b"e"][b"inactive"]) == (0, 0)
    fresh = replay(work.batches, srv.now + 60_000)
    assert dump(fresh) == dump(srv)
