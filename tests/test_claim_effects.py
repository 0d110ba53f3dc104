"""CLAIM reads and XNACK reproduce exactly: replayed effects, snapshots, AOF rewrites, restarts and replicas.

In process: random group workloads with XREADGROUP ... CLAIM and XNACK (every
mode, RETRYCOUNT, FORCE, duplicates) run on a Server; its propagated effects
replay into a fresh one through a LoadingClient, the groups go through
dump_groups/load_groups and msgpack, the keyspace goes through the
preamble-less AOF rewrite; each must give the same PELs (owner or none,
delivery time and count), consumers and NACK zone in order.
End to end: real servers restarted from the AOF and from the snapshot, and a
replica, show the same XINFO STREAM FULL and hand out the same claim order.
"""

from __future__ import annotations

import random

import msgpack
import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import Error
from server.client import LoadingClient
from server.rewrite import keyspace_commands
from server.server import Server
from storage.consumer_group import dump_groups, lag, load_groups
from storage.stream import Stream
from storage.stream_id import MAX_ID, format_id
from tests import test_group_effects as base
from tests.persist_workload import state
from tests.test_groups import raw
from tests.test_persistence import kill9, start
from tests.test_replication import caught_up, replica_of


def dump(srv: Server, ghosts: bool = True) -> dict:
    """Every stream's entries, counters and groups: PELs, consumers, the NACK zone in order.

    ghosts=False leaves out pending entries whose stream entry is gone (what a
    rewrite as commands cannot carry, in Redis as here).
    """
    out = {}
    for db in srv.keyspace.dbs:
        for key, value in db.data.items():
            if not isinstance(value, Stream):
                continue
            keep = (lambda i: True) if ghosts else (lambda i: value.get(i) is not None)  # noqa: B023
            groups = {}
            for name, group in value.groups.items():
                groups[name] = {
                    "last_id": group.last_id,
                    "entries_read": group.entries_read,
                    "lag": lag(value, group),
                    "pel": [
                        (i, p.consumer.name if p.consumer is not None else None, p.delivery_time, p.delivery_count)
                        for i, p in group.pel.items()
                        if keep(i)
                    ],
                    "nacked": [i for i in group.nacked if keep(i)],
                    "consumers": {
                        c.name: (c.seen_time, c.active_time, [i for i in c.pel.keys() if keep(i)])
                        for c in sorted(group.consumers.values(), key=lambda c: c.name)
                    },
                }
                for i, p in group.pel.items():
                    assert (p.consumer is None) == (i in group.nacked)
                    if p.consumer is not None:
                        assert p.consumer.pel[i] is p
            out[(db.id, key)] = {"entries": value.range(0, MAX_ID), "last_id": value.last_id,
                                 "entries_added": value.entries_added, "groups": groups}  # fmt: skip
    return out


class Workload(base.Workload):
    """test_group_effects' workload plus CLAIM reads and XNACK, on IDs that exist or are pending."""

    def pick(self, key: bytes, group: bytes) -> str:
        rng = self.rng
        stream = self.client.db.data.get(key)
        cg = stream.groups.get(group) if isinstance(stream, Stream) else None
        if cg is not None and cg.pel and rng.random() < 0.6:
            return format_id(rng.choice(list(cg.pel.entries))).decode()
        if isinstance(stream, Stream) and len(stream) and rng.random() < 0.8:
            return format_id(rng.choice(stream.range(0, MAX_ID))[0]).decode()
        return self.some_id(key)

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        key, group, consumer = rng.choice(base.KEYS), rng.choice(base.GROUPS), rng.choice(base.CONSUMERS)
        if roll < 0.15:
            ids = [self.pick(key, group) for _ in range(rng.randint(1, 4))]
            options = (["RETRYCOUNT", rng.randint(0, 3)] if rng.random() < 0.3 else []) + (
                ["FORCE"] if rng.random() < 0.3 else []
            )
            self.server.now += rng.choice([0, 1, 300])
            self.run("XNACK", key, group, rng.choice(["SILENT", "FAIL", "FATAL"]), "IDS", len(ids), *ids, *options)
        elif roll < 0.3:
            self.server.now += rng.choice([0, 1, 700, 5000])
            options = (["COUNT", rng.randint(0, 4)] if rng.random() < 0.7 else []) + (["NOACK"] if rng.random() < 0.15 else [])
            keys = [key] if rng.random() < 0.8 else base.KEYS
            self.run("XREADGROUP", "GROUP", group, consumer, *options, "CLAIM", rng.choice([0, 100, 2000, 60_000]),
                     "STREAMS", *keys, *[">"] * len(keys))  # fmt: skip
        else:
            super().step()


def workload(seed: int, steps: int = 300) -> Workload:
    work = Workload(seed)
    for _ in range(steps):
        work.step()
    assert any(a[0] == b"XNACK" and type(r) is int and r > 0 for a, r in work.replies)
    assert any(b"CLAIM" in a and type(r) is list for a, r in work.replies)
    return work


def has_zone(state: dict) -> bool:
    return any(g["nacked"] for s in state.values() for g in s["groups"].values())


@pytest.mark.parametrize("seed", range(25))
def test_effects_replay_to_the_same_state(seed):
    """The final state, and the state at the first moment after step 40 with a NACK zone, replay exactly."""
    work = Workload(seed)
    midway = None
    for step in range(300):
        work.step()
        if midway is None and step > 40 and has_zone(dump(work.server)):
            midway = (len(work.batches), dump(work.server), work.server.now)
    if midway is not None:  # most seeds (test_workloads_reach_a_nack_zone)
        fresh = base.replay(work.batches[: midway[0]], midway[2] + 60_000)
        assert dump(fresh) == midway[1]
    fresh = base.replay(work.batches, work.server.now + 60_000)
    assert dump(fresh) == dump(work.server)


def test_workloads_reach_a_nack_zone():
    """The replay tests' workloads do exercise the zone: most seeds hold one at some point after step 40."""
    reached = 0
    for seed in range(25):
        work = Workload(seed)
        for step in range(120):
            work.step()
            if step > 40 and has_zone(dump(work.server)):
                reached += 1
                break
    assert reached >= 15


@pytest.mark.parametrize("seed", range(4))
def test_effects_replay_through_multi_exec(seed):
    work = workload(100 + seed)
    fresh = base.replay(work.batches, work.server.now + 60_000, transactions=True)
    assert dump(fresh) == dump(work.server)


@pytest.mark.parametrize("seed", range(8))
def test_snapshot_round_trip_keeps_the_nack_zone(seed):
    work = workload(200 + seed)
    before = dump(work.server)
    for db in work.server.keyspace.dbs:
        for value in db.data.values():
            if isinstance(value, Stream):
                value.groups = load_groups(msgpack.unpackb(msgpack.packb(dump_groups(value.groups)), strict_map_key=False))
    assert dump(work.server) == before


def test_a_snapshot_without_nack_state_still_loads():
    """Group rows as written before XNACK (five elements, every PEL entry owned) load unchanged."""
    row = [b"g", (5 << 64).to_bytes(16, "big"), 5, [[b"c", 10, 11]], [[(3 << 64).to_bytes(16, "big"), b"c", 10, 2]]]
    groups = load_groups(msgpack.unpackb(msgpack.packb([row])))
    group = groups[b"g"]
    assert group.nacked == {} and group.pel[3 << 64].consumer is group.consumers[b"c"]
    assert dump_groups(groups) == [row]


@pytest.mark.parametrize("seed", range(8))
def test_rewrite_as_commands_rebuilds_the_same_groups(seed):
    work = workload(300 + seed)
    fresh = Server()
    fresh.now = work.server.now + 60_000
    loader = LoadingClient(fresh)
    for argv in keyspace_commands(work.server.keyspace):
        reply = fresh.execute(loader, argv)
        assert type(reply) is not Error, (argv, reply)
    assert dump(fresh, ghosts=False) == dump(work.server, ghosts=False)


def test_rewrite_batches_the_zone_by_count_and_64_ids():
    work = base.Workload(0)
    for i in range(1, 71):
        work.run("XADD", "s", f"{i}-0", "f", i)
    work.run("XGROUP", "CREATE", "s", "g", "0")
    work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    work.run("XNACK", "s", "g", "FAIL", "IDS", 66, *[f"{i}-0" for i in range(1, 67)])
    work.run("XNACK", "s", "g", "FATAL", "IDS", 2, "68-0", "67-0")
    nacks = [argv for argv in keyspace_commands(work.server.keyspace) if argv[0] == b"XNACK"]
    assert [(int(a[5]), a[6], a[-2]) for a in nacks] == [
        (64, b"1-0", b"1"),
        (2, b"65-0", b"1"),
        (2, b"68-0", b"9223372036854775807"),
    ]
    assert nacks[0][:5] == [b"XNACK", b"s", b"g", b"FAIL", b"IDS"] and nacks[0][-3:] == [b"RETRYCOUNT", b"1", b"FORCE"]


def test_xnack_effect_is_its_deterministic_form():
    work = base.Workload(0)
    for i in range(1, 5):
        work.run("XADD", "s", f"{i}-0", "f", i)
    work.run("XGROUP", "CREATE", "s", "g", "0")
    work.run("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    work.run("XCLAIM", "s", "g", "c", "0", "2-0", "RETRYCOUNT", "3", "JUSTID")
    work.batches.clear()
    assert work.run("XNACK", "s", "g", "SILENT", "IDS", 5, "3-0", "2-0", "9-0", "1-0", "3-0") == 4
    assert work.batches == [
        [
            [b"MULTI"],
            [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"1", b"2-0", b"RETRYCOUNT", b"2", b"FORCE"],
            [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"2", b"1-0", b"3-0", b"RETRYCOUNT", b"0", b"FORCE"],
            [b"EXEC"],
        ]
    ]


def test_a_claim_read_propagates_absolute_xclaims():
    work = base.Workload(0)
    for i in range(1, 4):
        work.run("XADD", "s", f"{i}-0", "f", i)
    work.run("XGROUP", "CREATE", "s", "g", "0")
    work.run("XREADGROUP", "GROUP", "g", "a", "COUNT", 2, "STREAMS", "s", ">")
    work.run("XDEL", "s", "2-0")
    work.server.now += 5000
    work.batches.clear()
    reply = work.run("XREADGROUP", "GROUP", "g", "b", "CLAIM", 1000, "STREAMS", "s", ">")
    assert reply == [[b"s", [[b"1-0", [b"f", b"1"], 5000, 1], [b"3-0", [b"f", b"3"], 0, 0]]]]
    now = b"%d" % work.server.now
    effects = work.batches[0][1:-1]
    assert effects == [
        [b"XCLAIM", b"s", b"g", b"b", b"0", b"1-0", b"TIME", now, b"RETRYCOUNT", b"2", b"FORCE", b"JUSTID", b"LASTID", b"2-0"],
        [b"XACK", b"s", b"g", b"2-0"],  # pending, but its entry was deleted: dropped
        [b"XCLAIM", b"s", b"g", b"b", b"0", b"3-0", b"TIME", now, b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID", b"LASTID", b"3-0"],
        [b"XGROUP", b"SETID", b"s", b"g", b"3-0", b"ENTRIESREAD", b"3"],
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"b", b"SEENTIME", now, b"ACTIVETIME", now],
    ]


# -- end to end: restarts and a replica ----------------------------------------------------------


def drive(client, seed: int, steps: int = 250) -> None:
    """Random traffic through redis-py: reads (with CLAIM), acks, XNACK, XCLAIM, deletes."""
    rng = random.Random(seed)
    for key in ("s1", "s2"):
        for i in range(1, 21):
            client.execute_command("XADD", key, f"{i}-0", "f", i)
        client.execute_command("XGROUP", "CREATE", key, "g", "0")
    for _ in range(steps):
        key, consumer = rng.choice(["s1", "s2"]), rng.choice(["a", "b", "c"])
        some = [f"{rng.randint(1, 24)}-0" for _ in range(rng.randint(1, 4))]
        roll = rng.random()
        try:
            if roll < 0.3:
                claim = ["CLAIM", rng.choice([0, 0, 1, 60_000])] if rng.random() < 0.7 else []
                client.execute_command(
                    "XREADGROUP", "GROUP", "g", consumer, "COUNT", rng.randint(1, 4), *claim, "STREAMS", key, ">"
                )
            elif roll < 0.55:
                extra = (["RETRYCOUNT", rng.randint(0, 5)] if rng.random() < 0.3 else []) + (
                    ["FORCE"] if rng.random() < 0.2 else []
                )
                client.execute_command(
                    "XNACK", key, "g", rng.choice(["SILENT", "FAIL", "FATAL"]), "IDS", len(some), *some, *extra
                )
            elif roll < 0.65:
                client.execute_command("XACK", key, "g", *some)
            elif roll < 0.75:
                client.execute_command("XCLAIM", key, "g", consumer, 0, *some, "JUSTID")
            elif roll < 0.8:
                client.execute_command("XDEL", key, rng.choice(some))
            else:
                client.execute_command("XADD", key, "*", "f", "new")
        except Exception as exc:  # noqa: BLE001 - replies are not what this test is about
            assert "ERR" in str(exc) or "NOGROUP" in str(exc), exc


def probe(client) -> list:
    """The claim order each stream hands out now (it claims everything: a change, so take it last)."""
    order = []
    for key in ("s1", "s2"):
        reply = client.execute_command("XREADGROUP", "GROUP", "g", "probe", "CLAIM", 0, "STREAMS", key, ">")
        order.append([entry[0] for entry in reply[0][1]] if reply else [])
    return order


def test_restarts_from_aof_and_snapshot_and_a_replica_hold_the_same_nack_state(tmp_path):
    primary = start(str(tmp_path), "--appendonly", "yes", "--appendfsync", "always", "--save", "")
    replica = replica_of(tmp_path, "replica", primary.port)
    try:
        client = raw(primary.client(protocol=2))
        drive(client, 7)
        before = state(client, dbs=1)
        nacked = [dict(zip(g[0::2], g[1::2], strict=True))[b"nacked-count"] for v in before.values() for g in v[2][b"groups"]]
        assert any(nacked)
        caught_up(client, replica.client())
        assert state(replica.client(protocol=2), dbs=1) == before
        client.execute_command("SAVE")
        replica.client().execute_command("REPLICAOF", "NO", "ONE")
        order = probe(client)
        assert order[0] and order[1]
        assert probe(raw(replica.client(protocol=2))) == order  # the promoted replica hands out the same entries
        after = state(client, dbs=1)
    finally:
        replica.stop()
    kill9(primary)
    proc = start(str(tmp_path), "--appendonly", "yes", "--save", "")  # the AOF: the probe's claims included
    try:
        assert state(proc.client(protocol=2), dbs=1) == after
    finally:
        kill9(proc)
    proc = start(str(tmp_path), "--appendonly", "no", "--save", "")  # the snapshot, taken before the probe
    try:
        assert state(proc.client(protocol=2), dbs=1) == before
        assert probe(raw(proc.client(protocol=2))) == order
    finally:
        kill9(proc)
