"""Claim order against a brute-force model, over random workloads.

An in-process server (its clock set by the test) runs random group traffic:
reads with and without CLAIM, acks, XCLAIM with IDLE/TIME/RETRYCOUNT/FORCE,
XAUTOCLAIM, XNACK in every mode, XDEL/XTRIM, SETID, DELCONSUMER. Before each
XREADGROUP ... CLAIM the model predicts the reply from the PEL alone: the NACK
zone in the order the test saw entries NACKed (an entry NACKed again moves
to the end), then owned entries idle at least min-idle-time (any idle time
for 0) sorted by (delivery time, ID), those whose stream entry is gone
dropped without counting, then new entries up to the shared COUNT. The reply
(IDs, idle, previous count) and the PEL after it must match the prediction.
"""

from __future__ import annotations

import random

import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import NULL_ARRAY, Error
from server.client import Client
from server.server import Server
from storage.stream import Stream
from storage.stream_id import MAX_ID, format_id, parse_id

LLONG_MAX = (1 << 63) - 1
CONSUMERS = [b"a", b"b", b"c"]


class Model:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.server = Server()
        self.server.now = 1_700_000_000_000
        self.client = Client(self.server)
        self.zone: list[int] = []  # NACK order, as this test saw it
        self.claims = 0
        self.claimed_nacked = 0

    def run(self, *argv):
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in argv]
        return self.server.execute(self.client, argv)

    @property
    def stream(self) -> Stream | None:
        return self.client.db.data.get(b"s")

    @property
    def group(self):
        stream = self.stream
        return stream.groups.get(b"g") if stream is not None else None

    def some_id(self) -> str:
        """Mostly a pending or an existing entry's ID, sometimes one that is neither."""
        rng, group, stream = self.rng, self.group, self.stream
        roll = rng.random()
        if roll < 0.5 and group is not None and group.pel:
            return format_id(rng.choice(list(group.pel.entries))).decode()
        if roll < 0.85 and stream is not None and len(stream):
            return format_id(rng.choice(stream.range(0, MAX_ID))[0]).decode()
        top = stream.last_id >> 64 if stream is not None else 5
        return f"{rng.randint(top - 5, top + 1)}-0"

    def nacked_now(self) -> list[int]:
        """The zone as the test tracked it, without entries no longer NACKed (acked, claimed, dropped)."""
        group = self.group
        if group is None:
            return []
        self.zone = [i for i in self.zone if (p := group.pel.get(i)) is not None and p.consumer is None]
        return list(self.zone)

    def xnack(self) -> None:
        rng = self.rng
        ids = [self.some_id() for _ in range(rng.randint(1, 4))]
        force = rng.random() < 0.3
        options = (["RETRYCOUNT", rng.randint(0, 3)] if rng.random() < 0.3 else []) + (["FORCE"] if force else [])
        group, stream = self.group, self.stream
        expected = []
        if group is not None:
            pel = set(group.pel.entries)
            for text in ids:
                entry_id = parse_id(text.encode())
                if entry_id in pel or (force and stream.get(entry_id) is not None):
                    pel.add(entry_id)
                    expected.append(entry_id)
        reply = self.run("XNACK", "s", "g", rng.choice(["SILENT", "FAIL", "FATAL"]), "IDS", len(ids), *ids, *options)
        if group is None:
            assert type(reply) is Error
            return
        assert reply == len(expected)
        for entry_id in expected:
            if entry_id in self.zone:
                self.zone.remove(entry_id)
            self.zone.append(entry_id)

    def claim_read(self) -> None:
        rng = self.rng
        group, stream = self.group, self.stream
        if group is None:
            return
        now = self.server.now
        count = rng.choice([0, 1, 2, 3, 5])
        min_idle = rng.choice([0, 1, 100, 1000, 5000, 60_000])
        consumer = rng.choice(CONSUMERS)
        noack = rng.random() < 0.2
        # the model's prediction, from the PEL as it is
        zone = self.nacked_now()
        owned = sorted(
            (p.delivery_time, i) for i, p in group.pel.items()
            if p.consumer is not None and (not min_idle or now - p.delivery_time >= min_idle)
        )  # fmt: skip
        before = {i: (p.delivery_time, p.delivery_count, p.consumer) for i, p in group.pel.items()}
        expected, dropped = [], []
        for entry_id in zone + [i for _t, i in owned]:
            if count and len(expected) == count:
                break
            if stream.get(entry_id) is None:
                dropped.append(entry_id)
                continue
            time, n, owner = before[entry_id]
            expected.append([format_id(entry_id), stream.get(entry_id), -1 if owner is None else now - time, n])
        room = None if not count else count - len(expected)
        new = stream.range(group.last_id + 1, MAX_ID, room) if room != 0 else []
        expected += [[format_id(i), fields, 0, 0] for i, fields in new]
        args = ["COUNT", count] if count or rng.random() < 0.5 else []
        reply = self.run(
            "XREADGROUP", "GROUP", "g", consumer, *args, *(["NOACK"] if noack else []), "CLAIM", min_idle, "STREAMS", "s", ">"
        )
        if expected:
            assert reply == [[b"s", expected]], (count, min_idle, zone, owned)
        else:
            assert reply is NULL_ARRAY, reply
        new_ids = {i for i, _fields in new}
        for entry_id in [parse_id(e[0]) for e in expected[: len(expected) - len(new)]]:
            pending = group.pel[entry_id]
            assert pending.consumer.name == consumer and pending.delivery_time == now
            if entry_id in new_ids and not noack:  # SETID moved back: delivered again as new, count 1
                assert pending.delivery_count == 1
            else:
                assert pending.delivery_count == min(before[entry_id][1] + 1, LLONG_MAX)
        for entry_id in dropped:
            assert entry_id not in group.pel
        for entry_id, _fields in new:
            assert (entry_id in group.pel) is (not noack or entry_id in before)
        self.claims += 1
        self.claimed_nacked += sum(1 for e in expected if e[2] == -1)

    def step(self) -> None:
        rng = self.rng
        self.server.now += rng.choice([0, 0, 1, 50, 700, 3000, 20_000])
        roll = rng.random()
        if roll < 0.2:
            self.run("XADD", "s", "*", "f", rng.randint(0, 9))
        elif roll < 0.23:
            self.run("XDEL", "s", self.some_id())
        elif roll < 0.25:
            self.run("XTRIM", "s", "MAXLEN", rng.randint(2, 8))
        elif roll < 0.27:
            self.run("XGROUP", "SETID", "s", "g", rng.choice(["0", "$", self.some_id()]))
        elif roll < 0.28:
            self.run("XGROUP", "DELCONSUMER", "s", "g", rng.choice(CONSUMERS))
        elif roll < 0.40:
            args = ["COUNT", rng.randint(1, 3)] if rng.random() < 0.7 else []
            self.run("XREADGROUP", "GROUP", "g", rng.choice(CONSUMERS), *args, "STREAMS", "s", rng.choice([">", ">", "0"]))
        elif roll < 0.47:
            self.run("XACK", "s", "g", *[self.some_id() for _ in range(rng.randint(1, 3))])
        elif roll < 0.57:
            timing = rng.choice([[], ["IDLE", rng.randint(0, 90_000)], ["TIME", self.server.now - rng.randint(0, 90_000)]])
            extra = rng.choice([[], ["JUSTID"], ["FORCE"], ["RETRYCOUNT", rng.randint(0, 4)]])
            self.run(
                "XCLAIM", "s", "g", rng.choice(CONSUMERS), rng.choice([0, 1000]), self.some_id(), self.some_id(), *timing, *extra
            )
        elif roll < 0.61:
            self.run("XAUTOCLAIM", "s", "g", rng.choice(CONSUMERS), rng.choice([0, 5000]), "0", "COUNT", rng.randint(1, 3))
        elif roll < 0.73:
            self.xnack()
        else:
            self.claim_read()


@pytest.mark.parametrize("seed", range(30))
def test_claim_order_matches_the_brute_force_model(seed):
    model = Model(seed)
    model.run("XADD", "s", "*", "f", "0")
    model.run("XGROUP", "CREATE", "s", "g", "0")
    for _ in range(300):
        model.step()
    assert model.claims > 40 and model.claimed_nacked > 0


def test_a_scan_from_the_head_forgets_the_acknowledged_ids_there():
    """XAUTOCLAIM 0-0 after acks from the head (the bench's two-command way) must not walk them on every call."""
    from itertools import islice

    from storage.consumer_group import PendingEntry, PendingList

    pel = PendingList()
    for entry_id in range(1, 1001):
        pel[entry_id] = PendingEntry(None, 0)
    for entry_id in range(1, 101):
        pel.pop(entry_id)
    assert (pel.head, pel.stale) == (0, 100)  # not compacted yet: fewer stale than live
    assert list(islice(pel.irange(0), 3)) == [101, 102, 103]
    assert (pel.head, pel.stale) == (100, 0)
    assert len(pel.order) - pel.head - pel.stale == len(pel.entries)
    assert list(islice(pel.irange(50), 2)) == [101, 102] and list(pel.irange(990)) == list(range(990, 1001))
