"""Reference policies against Redis's own test cases and a brute-force model (through redis-py's 8.x methods).

The `~` cases are the 8.6 rule (#14623, "XTRIM with approx and ACKED/DELREF deletes
entries correctly" in Redis's stream.tcl), which Redis 8.2.3, the differential
oracle, predates; XGROUP DESTROY is the 8.6 fix too (#14552). The model test
checks ACKED trims over random workloads with several groups against a brute
force written from the definition: an entry is referenced while some group has
it pending or has not been delivered it.
"""

from __future__ import annotations

import random

import pytest

import server.commands  # noqa: F401  (registers the command table)
from protocol.reply import Error
from server.client import Client
from server.server import Server
from storage.stream import Stream
from storage.stream_id import MAX_ID, format_id


@pytest.fixture
def r(server):
    client = server.client(decode_responses=True)
    client.flushall()
    yield client
    client.config_set("stream-node-max-entries", "100")
    client.close()


def ids(r, key="s") -> list[str]:
    return [entry_id for entry_id, _ in r.xrange(key)]


def fill(r, n: int, key: str = "s") -> None:
    for i in range(1, n + 1):
        r.xadd(key, {"f": "v"}, id=f"{i}-0")


def test_approx_acked_deletes_per_entry_inside_eligible_nodes(r):
    """stream.tcl: node size 2, 1..5 all read, 1-0 2-0 4-0 acked: MINID ~ 6-0 ACKED deletes 3 (8.2.3: 0)."""
    r.config_set("stream-node-max-entries", "2")
    fill(r, 5)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    r.xack("s", "g", "1-0", "2-0", "4-0")
    assert r.xtrim("s", minid="6-0", approximate=True, ref_policy="ACKED") == 3
    assert ids(r) == ["3-0", "5-0"]
    assert r.xinfo_stream("s")["max-deleted-entry-id"] == "0-0"  # a trim, not a deletion


def test_approx_delref_removes_eligible_nodes_and_their_references(r):
    r.config_set("stream-node-max-entries", "3")
    fill(r, 10)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    assert r.xtrim("s", maxlen=2, approximate=True, ref_policy="DELREF") == 6  # two nodes of 3; a third would leave 1
    assert ids(r) == ["7-0", "8-0", "9-0", "10-0"]
    assert [p["message_id"] for p in r.xpending_range("s", "g", "-", "+", 100)] == ["7-0", "8-0", "9-0", "10-0"]
    # LIMIT caps the work in whole nodes, as with KEEPREF
    r.xadd("s", {"f": "v"}, id="11-0")
    assert r.xtrim("s", maxlen=0, approximate=True, limit=2, ref_policy="DELREF") == 0


def test_approx_acked_stops_at_the_first_node_that_cannot_go(r):
    r.config_set("stream-node-max-entries", "3")
    fill(r, 10)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    r.xack("s", "g", "1-0", "2-0", "4-0", "5-0", "7-0", "8-0", "9-0")
    # nodes [1 2 3] [4 5 6] [7 8 9] [10]: the first two could go whole (10-3 >= 4, 8-3 >= 4), the third not (6-3 < 4)
    assert r.xtrim("s", maxlen=4, approximate=True, ref_policy="ACKED") == 4
    assert ids(r) == ["3-0", "6-0", "7-0", "8-0", "9-0", "10-0"]


def test_xadd_acked_and_delref_as_redis_tests_them(r):
    """stream.tcl's XADD cases: an unread group protects everything; acks free entries; DELREF empties PELs."""
    fill(r, 5)
    r.xgroup_create("s", "g", id="0")
    r.xadd("s", {"f": "v"}, id="6-0", maxlen=1, approximate=False, ref_policy="ACKED")
    assert r.xlen("s") == 6
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    r.xack("s", "g", "1-0")
    r.xadd("s", {"f": "v"}, id="7-0", maxlen=1, approximate=False, ref_policy="ACKED")
    assert r.xlen("s") == 6
    r.xreadgroup("g", "c", {"s": ">"})
    r.xack("s", "g", *ids(r))
    r.xadd("s", {"f": "v"}, maxlen=1, approximate=False, ref_policy="ACKED")
    assert r.xlen("s") == 1
    r.delete("s")
    fill(r, 5)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"}, count=1)
    r.xadd("s", {"f": "v"}, maxlen=1, approximate=False, ref_policy="DELREF")
    assert r.xlen("s") == 1 and r.xpending("s", "g")["pending"] == 0


def test_xdelex_acked_follows_groups_coming_and_going(r):
    """A new group re-blocks deletion; once the last group is destroyed nothing is referenced (8.6, #14552)."""
    fill(r, 5)
    r.xgroup_create("s", "g1", id="0")
    r.xreadgroup("g1", "c", {"s": ">"})
    r.xack("s", "g1", "1-0", "2-0")
    assert r.xdelex("s", "1-0", "3-0", ref_policy="ACKED") == [1, 2]
    r.xgroup_create("s", "g2", id="0")
    assert r.xdelex("s", "2-0", ref_policy="ACKED") == [2]  # g2 has not been delivered it
    r.xgroup_destroy("s", "g2")
    assert r.xdelex("s", "2-0", ref_policy="ACKED") == [1]
    r.xgroup_destroy("s", "g1")
    assert r.xdelex("s", "3-0", "4-0", "5-0", "6-0", ref_policy="ACKED") == [1, 1, 1, -1]


def test_xackdel_as_redis_tests_it(r):
    """stream-cgroups.tcl: two groups; ACKED waits for the last one, KEEPREF leaves the other's refs, DELREF drops them."""
    for policy, first, second, other_pel in (("ACKED", [2, 2], [1, 1], 0), ("KEEPREF", [1, 1], [1, 1], 2), ("DELREF", [1, 1], [-1, -1], 0)):
        r.delete("s")
        fill(r, 2)
        for group in ("group1", "group2"):
            r.xgroup_create("s", group, id="0")
            r.xreadgroup(group, "consumer", {"s": ">"})
        assert r.xackdel("s", "group1", "1-0", "2-0", ref_policy=policy) == first, policy
        assert r.xpending("s", "group1")["pending"] == 0
        assert r.xpending("s", "group2")["pending"] == (2 if policy == "ACKED" else other_pel), policy
        assert r.xackdel("s", "group2", "1-0", "2-0", ref_policy=policy) == second, policy
        assert r.xlen("s") == 0 and r.xpending("s", "group2")["pending"] == 0


def test_xackdel_takes_many_ids(r):
    """CVE-2025-62507 was a fixed-size vector overflow past 8 IDs: 50 must work."""
    fill(r, 50)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    assert r.xackdel("s", "g", *[f"{i}-0" for i in range(1, 51)]) == [1] * 50
    assert r.xlen("s") == 0


# -- ACKED trimming against a brute-force model -------------------------------------------------


class Model:
    """An in-process server and the definition of 'referenced', read from the outside each time."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.srv = Server()
        self.srv.now = 1_700_000_000_000
        self.client = Client(self.srv)
        self.next_ms = 1
        self.run("CONFIG", "SET", "stream-node-max-entries", self.rng.choice([2, 3, 5, 100]))

    def run(self, *argv):
        reply = self.srv.execute(self.client, [a if isinstance(a, bytes) else str(a).encode() for a in argv])
        return reply

    def stream(self) -> Stream | None:
        return self.srv.keyspace.dbs[0].data.get(b"s")

    def referenced(self, stream: Stream) -> set[int]:
        """Brute force: every entry pending in some group or after some group's last-delivered-id."""
        live = [entry_id for entry_id, _ in stream.range(0, MAX_ID)]
        held = set()
        for group in stream.groups.values():
            held.update(group.pel.keys())
            held.update(entry_id for entry_id in live if entry_id > group.last_id)
        return held

    def some_id(self) -> str:
        return f"{self.rng.randint(1, self.next_ms)}-0"

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        group = rng.choice(["g1", "g2", "g3"])
        if roll < 0.4:
            self.next_ms += rng.randint(1, 2)
            self.run("XADD", "s", f"{self.next_ms}-0", "f", "v")
        elif roll < 0.5:
            self.run("XGROUP", "CREATE", "s", group, rng.choice(["0", "$", self.some_id()]))
        elif roll < 0.53:
            self.run("XGROUP", rng.choice(["DESTROY", "SETID"]), "s", group, *([self.some_id()] if rng.random() < 0.5 else ["0"]))
        elif roll < 0.75:
            self.run("XREADGROUP", "GROUP", group, rng.choice(["a", "b"]), "COUNT", rng.randint(1, 6), "STREAMS", "s", ">")
        elif roll < 0.95:
            self.run("XACK", "s", group, *[self.some_id() for _ in range(rng.randint(1, 6))])
        else:
            self.run("XDEL", "s", self.some_id())

    def check_trim(self) -> tuple[int, int]:
        """One ACKED trim, checked; (entries deleted, referenced entries it had to keep)."""
        rng = self.rng
        stream = self.stream()
        if stream is None or not stream.length:
            return 0, 0
        held = self.referenced(stream)
        live = [entry_id for entry_id, _ in stream.range(0, MAX_ID)]
        pels = {name: sorted(group.pel.keys()) for name, group in stream.groups.items()}
        counters = (stream.max_deleted_entry_id, stream.entries_added, stream.last_id)
        nodes = len(stream.nodes)
        if rng.random() < 0.5:
            minid = rng.randint(1, self.next_ms + 1) << 64
            approx = rng.random() < 0.4
            deleted = self.run("XTRIM", "s", "MINID", "~" if approx else "=", format_id(minid), "ACKED")
            gone = [entry_id for entry_id in live if entry_id < minid and entry_id not in held]
            if not approx:
                # exact MINID: every unreferenced entry below the threshold, and nothing else
                assert deleted == len(gone)
        else:
            maxlen = rng.randint(0, len(live))
            approx = rng.random() < 0.4
            deleted = self.run("XTRIM", "s", "MAXLEN", "~" if approx else "=", maxlen, "ACKED")
            gone = [entry_id for entry_id in live if entry_id not in held][: max(len(live) - maxlen, 0)]
        left = [entry_id for entry_id, _ in stream.range(0, MAX_ID)] if self.stream() is not None else []
        removed = [entry_id for entry_id in live if entry_id not in set(left)]
        assert type(deleted) is not Error and deleted == len(removed)
        assert not set(removed) & held, "an ACKED trim removed a referenced entry"
        # what goes is always the oldest unreferenced entries, never one after a kept unreferenced one
        assert removed == gone[: len(removed)]
        if not approx and nodes <= 1:
            # within one node nothing ends the walk early: exactly the oldest unreferenced entries go
            assert removed == gone
        assert {name: sorted(group.pel.keys()) for name, group in stream.groups.items()} == pels  # ACKED: PELs untouched
        assert (stream.max_deleted_entry_id, stream.entries_added, stream.last_id) == counters
        return len(removed), len(held & set(live))


@pytest.mark.parametrize("seed", range(25))
def test_acked_trims_match_the_brute_force_definition(seed):
    model = Model(seed)
    deleted = kept = 0
    for step in range(400):
        model.step()
        if step % 7 == 6:
            d, k = model.check_trim()
            deleted += d
            kept += k
    assert deleted > 0 and kept > 0  # the workload both trims and protects
