"""Consumption-based retention against a brute-force model, on a real primary, its replica and restarts.

A seeded random workload (XADD, XREADGROUP with and without NOACK, XACK,
XCLAIM, XGROUP RELEASE, SETID backwards, SETCONFIG SUBSCRIBER changes,
explicit XTRIM and XDEL, exact MINID trims at a deleted entry that leave a
node of tombstones only, new policies with MIN/MAX in entries, ages and
bytes) runs on a primary with an AOF and a replica. The
model keeps every entry, each group's cursor, PEL, role and release point,
and applies the rules of storage/retention.py by brute force (per entry; the
node layout, which decides what "whole nodes" means, follows from the order
of appends with stream-node-max-entries 4): after every step the primary holds exactly the entries the model
says, with the model's counters (per-group entries-lost, entries truncated
and lost, the head holder). Byte limits depend on the process's memory, so
there the model checks bounds (MEMORY USAGE within MAX-BYTES; never fewer
entries than the subscribers and the other limits keep, never more than
those allow) and takes the primary's cut. The
replica, a DEBUG RELOAD (snapshot), a restart from the AOF and a restart
from a rewritten command AOF must all reproduce the primary's full state.

Ages: entry IDs are 100 s apart and 25 s off every age boundary the policies
use, so the server's clock (read at each run) decides as the model's does
for any test shorter than 25 s.
"""

from __future__ import annotations

import random
import time

import pytest

from tests.servers import start_millrace
from tests.test_persistence import kill9, no_child, wait_for
from tests.test_replication import caught_up

KEY = b"s"
STEP_MS = 100_000
NODE = 4  # stream-node-max-entries: several nodes, whole ones freed


def fid(entry_id: int) -> bytes:
    return b"%d-%d" % (entry_id >> 64, entry_id & ((1 << 64) - 1))


def pid(text: bytes) -> int:
    ms, seq = text.split(b"-")
    return int(ms) << 64 | int(seq)


class Group:
    def __init__(self, last: int) -> None:
        self.last = last
        self.pel: dict[int, bytes] = {}
        self.mode = b"none"
        self.release = 0
        self.lost = 0


class Model:
    """The stream as the rules say it must be."""

    def __init__(self) -> None:
        self.entries: list[int] = []
        self.groups: dict[bytes, Group] = {}
        self.policy: tuple | None = None  # ((kind, value) | None, (kind, value) | None)
        self.truncated = 0
        self.lost = 0
        self.node_of: dict[int, int] = {}  # entry -> its node, in the server's layout
        self.nodes = 0  # nodes ever opened
        self.tail_fill = NODE  # entries appended to the open node (NODE: a new one opens)

    def add(self, entry_id: int) -> None:
        if self.tail_fill == NODE:
            self.nodes += 1
            self.tail_fill = 0
        self.node_of[entry_id] = self.nodes
        self.tail_fill += 1
        self.entries.append(entry_id)

    def keep(self, kept: list[int]) -> None:
        self.entries = kept
        if not kept:
            self.tail_fill = NODE  # every node went: the next entry opens one

    def delete(self, entry_id: int) -> None:
        """XDEL: a node whose last live entry goes is removed, the open one too (the next append opens one)."""
        self.entries.remove(entry_id)
        node = self.node_of[entry_id]
        if node == self.nodes and not any(self.node_of[i] == node for i in self.entries):
            self.tail_fill = NODE

    def relayout(self) -> None:
        """The layout of a stream rebuilt entry by entry (a rewritten AOF): NODE live entries per node."""
        entries, self.entries, self.tail_fill = self.entries, [], NODE
        for entry_id in entries:
            self.add(entry_id)

    def whole(self, cut: int) -> int:
        """The cut rounded down so that only whole nodes go."""
        after = [i for i in self.entries if i >= cut]
        if not after:
            return cut
        node = self.node_of[after[0]]
        return min(i for i in self.entries if self.node_of[i] == node)

    def floor(self, group: Group) -> int:
        """The lowest pending entry that still exists, else the one after last-delivered."""
        live = set(self.entries)
        pending = [i for i in group.pel if i in live and i <= group.last]
        return min(pending) if pending else group.last + 1

    def point(self, group: Group) -> int:
        return group.release + 1 if group.mode == b"manual" else self.floor(group)

    def holder(self) -> tuple[bytes | None, int | None]:
        best = None
        for name in sorted(self.groups):
            group = self.groups[name]
            if group.mode != b"none":
                point = self.point(group)
                if best is None or point < best[1]:
                    best = (name, point)
        return best if best is not None else (None, None)

    def limit_cut(self, limit, now: int, is_min: bool) -> int | None:
        """None for byte limits (the model does not know the process's memory)."""
        kind, value = limit
        if kind == b"len":
            if len(self.entries) <= value:
                return 0
            return self.entries[len(self.entries) - value] if value else self.entries[-1] + 1
        if kind == b"age":
            return max(now - value, 0) << 64
        return None

    def cut_bounds(self, now: int) -> tuple[int, int]:
        """The cut, as (lowest, highest) possible: equal unless a byte limit leaves it open."""
        minimum, maximum = self.policy
        _holder, slb = self.holder()
        low = high = slb if slb is not None else ((1 << 128) if minimum is not None else 0)
        if minimum is not None:
            cut = self.limit_cut(minimum, now, True)
            if cut is None:
                low = 0
            else:
                low, high = min(low, cut), min(high, cut)
        low, high = self.whole(low), self.whole(high)
        if maximum is not None:
            cut = self.limit_cut(maximum, now, False)
            if cut is None:
                high = 1 << 128
            else:
                low, high = max(low, cut), max(high, cut)
        return low, high

    def truncate(self, kept_from_server: list[int] | None, now: int) -> tuple[list[int], bool]:
        """Apply a run; with a byte limit the server's result is checked against the bounds and taken."""
        if self.policy is None or not self.entries:
            return self.entries, False
        low, high = self.cut_bounds(now)
        must_keep = [i for i in self.entries if i >= high]
        may_keep = [i for i in self.entries if i >= low]
        if low == high:
            kept = may_keep
        else:
            kept = kept_from_server
            assert kept == self.entries[len(self.entries) - len(kept):], "the kept entries are the newest ones"
            assert set(must_keep) <= set(kept) <= set(may_keep), (must_keep, kept, may_keep)
        removed = self.entries[: len(self.entries) - len(kept)]
        if removed:
            _holder, slb = self.holder()
            if slb is not None:
                self.lost += sum(1 for i in removed if i >= slb)
            for group in self.groups.values():
                if group.mode == b"manual":
                    lost = sum(1 for i in removed if i > group.release)
                else:
                    lost = sum(1 for i in removed if i > group.last or i in group.pel)
                # No subscriber loses what it has not processed unless a MAX limit forced it
                assert not (lost and group.mode != b"none" and self.policy[1] is None), (group.mode, lost)
                group.lost += lost
            self.truncated += len(removed)
        self.keep(kept)
        return kept, low != high


def entry_ids(client) -> list[int]:
    return [pid(i) for i, _fields in client.xrange(KEY)]


def full_state(client, structure: bool = True) -> list:
    """Everything a client sees of the stream, with absolute times only (the node layout unless structure is off)."""
    if not client.exists(KEY):
        return []
    info = pairs(client.execute_command("XINFO", "STREAM", KEY, "FULL", "COUNT", "0"))
    if not structure:
        del info[b"radix-tree-keys"], info[b"radix-tree-nodes"]
    return [
        client.execute_command("XRANGE", KEY, "-", "+"),
        info,
        client.execute_command("XINFO", "GROUPS", KEY),
        client.execute_command("XRETENTION", "GET", KEY),
    ]


def pairs(reply) -> dict:
    if isinstance(reply, dict):
        return reply
    return dict(zip(reply[0::2], reply[1::2], strict=True))


class Workload:
    def __init__(self, client, seed: int) -> None:
        self.c = client
        self.rng = random.Random(seed)
        self.model = Model()
        now = int(time.time() * 1000)
        self.next_ms = now - 40 * STEP_MS - 25_000  # IDs 25 s off the age boundaries (multiples of STEP_MS)
        self.consumers = [b"c1", b"c2"]
        self.byte_checks = 0

    def now(self) -> int:
        return int(time.time() * 1000)

    # -- steps -----------------------------------------------------------------

    def xadd(self) -> None:
        n = self.rng.randint(1, 3)
        for _ in range(n):
            self.next_ms += STEP_MS
            entry_id = self.next_ms << 64
            value = b"v" * self.rng.choice((1, 10, 200))
            self.c.execute_command("XADD", KEY, fid(entry_id), "f", value)
            self.model.add(entry_id)
            self.check()

    def create_group(self) -> None:
        name = b"g%d" % len(self.model.groups)
        start = self.rng.choice((b"0", b"$"))
        self.c.execute_command("XGROUP", "CREATE", KEY, name, start)
        last = 0 if start == b"0" else self.last_id()
        self.model.groups[name] = Group(last)
        self.check()

    def last_id(self) -> int:
        return pid(pairs(self.c.execute_command("XINFO", "STREAM", KEY))[b"last-generated-id"])

    def read(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        consumer = self.rng.choice(self.consumers)
        reply = self.c.execute_command("XREADGROUP", "GROUP", name, consumer, "COUNT", self.rng.randint(1, 4), "STREAMS", KEY, ">")
        group = self.model.groups[name]
        new = [i for i in self.model.entries if i > group.last][:0]
        if reply:
            got = [pid(entry[0]) for entry in reply[0][1]]
            new = [i for i in self.model.entries if i > group.last][: len(got)]
            assert got == new
            for i in got:
                group.pel[i] = consumer
            group.last = got[-1]
        self.check()

    def read_noack(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        group = self.model.groups[name]
        reply = self.c.execute_command("XREADGROUP", "GROUP", name, "c1", "COUNT", self.rng.randint(1, 4), "NOACK", "STREAMS", KEY, ">")
        if reply:
            got = [pid(entry[0]) for entry in reply[0][1]]
            assert got == [i for i in self.model.entries if i > group.last][: len(got)]
            group.last = got[-1]
        self.check()

    def setid(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        group = self.model.groups[name]
        target = self.rng.choice([0, *self.model.entries[: max(1, len(self.model.entries) // 2)]])
        self.c.execute_command("XGROUP", "SETID", KEY, name, fid(target))
        group.last = target  # backwards: a subscriber holds from there again (what is gone stays gone)
        self.check()

    def xdel(self) -> None:
        if not self.model.entries:
            return
        entry_id = self.rng.choice(self.model.entries)
        assert self.c.execute_command("XDEL", KEY, fid(entry_id)) == 1
        self.model.delete(entry_id)
        self.check()

    def ack(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        group = self.model.groups[name]
        if not group.pel:
            return
        ids = self.rng.sample(sorted(group.pel), self.rng.randint(1, len(group.pel)))
        assert self.c.execute_command("XACK", KEY, name, *map(fid, ids)) == len(ids)
        for i in ids:
            del group.pel[i]
        self.check()

    def claim(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        group = self.model.groups[name]
        if not group.pel:
            return
        entry_id = self.rng.choice(sorted(group.pel))
        consumer = self.rng.choice(self.consumers)
        self.c.xclaim(KEY, name, consumer, 0, [fid(entry_id)], justid=True)
        if entry_id in self.model.entries:
            group.pel[entry_id] = consumer
        else:  # its entry was truncated: the claim drops the reference
            del group.pel[entry_id]
        self.check()

    def setconfig(self) -> None:
        name = self.rng.choice(sorted(self.model.groups))
        mode = self.rng.choice((b"auto", b"manual", b"none"))
        self.c.execute_command("XGROUP", "SETCONFIG", KEY, name, "SUBSCRIBER", mode.upper())
        group = self.model.groups[name]
        if mode == b"manual" and group.mode != b"manual":
            group.release = self.model.floor(group) - 1
        group.mode = mode
        self.check()

    def release(self) -> None:
        manual = [n for n, g in sorted(self.model.groups.items()) if g.mode == b"manual"]
        if not manual:
            return
        name = self.rng.choice(manual)
        group = self.model.groups[name]
        last = self.last_id()
        if self.rng.random() < 0.2 and group.release > 0:
            with pytest.raises(Exception, match="release id is lower than the current one"):
                self.c.execute_command("XGROUP", "RELEASE", KEY, name, fid(group.release - 1))
            return
        choices = [i for i in self.model.entries if i >= group.release] + [last]
        target = self.rng.choice(choices)
        self.c.execute_command("XGROUP", "RELEASE", KEY, name, fid(target))
        group.release = target
        self.check()

    def policy(self) -> None:
        rng = self.rng
        minimum = rng.choice((None, (b"len", rng.randint(0, 6)), (b"age", STEP_MS * rng.randint(1, 8)), (b"bytes", rng.randint(500, 3000))))
        maximum = rng.choice((None, (b"len", rng.randint(6, 14)), (b"age", STEP_MS * rng.randint(8, 20)), (b"bytes", rng.randint(3000, 9000))))
        args = [b"XRETENTION", b"SET", KEY, b"CONSUMPTION"]
        if minimum is not None:
            args += [b"MIN-" + minimum[0].upper(), b"%d" % minimum[1]]
        if maximum is not None:
            args += [b"MAX-" + maximum[0].upper(), b"%d" % maximum[1]]
        self.c.execute_command(*args)
        self.model.policy = (minimum, maximum)
        self.check()

    def user_trim(self) -> None:
        keep = self.rng.randint(len(self.model.entries) // 2, len(self.model.entries))
        self.c.execute_command("XTRIM", KEY, "MAXLEN", keep)
        self.model.keep(self.model.entries[len(self.model.entries) - keep :])  # a user trim: nobody's loss
        self.check()

    def trim_at_deleted(self) -> None:
        """XDEL the newest live entry of a node (not the last one's), then an exact XTRIM MINID at it: the node
        keeps its tombstones and no live entry (Redis keeps the node an exact trim ends in), before the first."""
        model = self.model
        ends = [i for i, after in zip(model.entries[:-1], model.entries[1:], strict=True) if model.node_of[i] != model.node_of[after]]
        if not ends:
            return
        entry_id = self.rng.choice(ends)
        assert self.c.execute_command("XDEL", KEY, fid(entry_id)) == 1
        model.delete(entry_id)
        self.check()
        below = sum(1 for i in model.entries if i < entry_id)
        assert self.c.execute_command("XTRIM", KEY, "MINID", "=", fid(entry_id)) == below
        model.keep([i for i in model.entries if i > entry_id])  # a user trim: nobody's loss
        self.check()

    def ack_gone(self) -> None:
        """Acknowledge every pending entry whose stream entry was truncated."""
        for name, group in self.model.groups.items():
            gone = [i for i in group.pel if i not in self.model.entries]
            if gone:
                assert self.c.execute_command("XACK", KEY, name, *map(fid, gone)) == len(gone)
                for i in gone:
                    del group.pel[i]
        self.check()

    # -- checking --------------------------------------------------------------

    def check(self) -> None:
        model = self.model
        server = entry_ids(self.c)
        kept, open_cut = model.truncate(server, self.now())
        assert server == kept
        if model.policy is None:
            return
        memory = self.c.memory_usage(KEY)
        minimum, maximum = model.policy
        if maximum is not None and maximum[0] == b"bytes":
            assert memory <= maximum[1], (memory, maximum)
            self.byte_checks += 1
        info = pairs(self.c.execute_command("XRETENTION", "GET", KEY))
        holder, _slb = model.holder()
        assert info[b"holder"] == holder
        assert (info[b"entries-truncated"], info[b"entries-lost"]) == (model.truncated, model.lost)
        for group_info in self.c.execute_command("XINFO", "GROUPS", KEY):
            fields = pairs(group_info)
            group = model.groups[fields[b"name"]]
            assert fields[b"subscriber"] == group.mode
            assert fields[b"entries-lost"] == group.lost, fields
            lag = len([i for i in model.entries if i > group.last])
            if fields[b"lag"] is not None:
                assert fields[b"lag"] == lag, (fields, lag)

    def steps(self, n: int) -> None:
        if not self.model.groups:
            self.c.execute_command("XADD", KEY, fid(self.next_ms << 64), "f", "first")
            self.model.add(self.next_ms << 64)
            self.create_group()
            self.create_group()
        actions = [self.xadd] * 6 + [self.read] * 5 + [self.ack] * 4 + [
            self.claim, self.setconfig, self.setconfig, self.release, self.release, self.policy, self.user_trim,
            self.create_group, self.read_noack, self.setid, self.xdel, self.trim_at_deleted,
        ]  # fmt: skip
        for _ in range(n):
            if len(self.model.groups) > 4 and self.rng.choice(actions) == self.create_group:
                continue
            self.rng.choice(actions)()


def start(tmp_path, name: str, *args: str, port: int | None = None):
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    return start_millrace("--enable-debug-command", "yes", "--stream-node-max-entries", str(NODE), *args, workdir=str(directory), port=port)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_retention_matches_the_model_on_primary_replica_and_restarts(tmp_path, seed):
    primary = start(tmp_path, "primary", "--appendonly", "yes", "--appendfsync", "always", "--save", "")
    replica = start(tmp_path, "replica", "--replicaof", "127.0.0.1", str(primary.port))
    try:
        p, r = primary.client(), replica.client()
        work = Workload(p, seed)
        work.steps(150)
        caught_up(p, r)
        assert full_state(r) == full_state(p)
        before = full_state(p)
        assert p.execute_command("DEBUG", "RELOAD") == b"OK"  # the snapshot
        assert full_state(p) == before
        work.steps(150)
        caught_up(p, r)
        assert full_state(r) == full_state(p)
        before = full_state(p)
        kill9(primary)  # the AOF: a snapshot base plus the effects since
        primary = start(tmp_path, "primary", "--appendonly", "yes", "--save", "", port=primary.port)
        p = primary.client()
        assert full_state(p) == before
        # A rewritten AOF of commands cannot hold a PEL entry whose stream entry is gone (XCLAIM
        # drops it, as in Redis's preamble-less rewrite) nor the node layout: those are acked first
        # and the layout is left out of the comparison.
        work.c = p
        work.ack_gone()
        before = full_state(p, structure=False)
        p.config_set("aof-use-rdb-preamble", "no")
        p.execute_command("BGREWRITEAOF")
        wait_for(lambda: no_child(p) and p.info("persistence")["aof_rewrite_scheduled"] == 0)
        kill9(primary)
        primary = start(tmp_path, "primary", "--appendonly", "yes", "--save", "", port=primary.port)
        p = primary.client()
        assert full_state(p, structure=False) == before
        work.model.relayout()
        work.c = p
        work.steps(60)
        caught_up(p, r)
        assert full_state(r) == full_state(p)
        assert work.byte_checks or seed != 1
    finally:
        replica.stop()
        primary.stop()
