"""Retention on streams with nodes of tombstones only, and the byte meter's bookkeeping (issue 24 review).

An exact trim that ends in a deleted entry keeps its node with no live entry
(as Redis does); XTRIM ... ACKED can leave one in the middle. Retention took
"the first/last entry of node i" as if every node had one: an IndexError in
the run after the write, which dropped the connection, lost the write's
propagation (primary and replica diverged) and stopped the cron. Here each
such stream goes through a real primary with an AOF (appendfsync always) and
a replica, and both, and the primary restarted from its AOF after kill -9,
must hold the same state.

ByteMeter keeps node sizes and a running total between runs (a run on a stream
that only grows costs O(1)); its bookkeeping is checked against a fresh
measure after random appends, trims and XDELs, and the byte cuts against
their brute-force meaning.
"""

from __future__ import annotations

import random
import sys
import time

import pytest

from storage import retention as store
from storage.stream import Stream, node_memory
from storage.stream_id import MAX_ID
from tests.servers import start_millrace
from tests.test_persistence import kill9
from tests.test_replication import caught_up
from tests.test_retention_inprocess import InProcessClient
from tests.test_retention_model import pairs

NODE = 3


def start(tmp_path, name: str, *args: str, port: int | None = None):
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    return start_millrace("--stream-node-max-entries", str(NODE), *args, workdir=str(directory), port=port)


def state(client, key: bytes = b"s") -> list:
    """The stream as clients see it, node layout (radix-tree-keys) included."""
    return [
        client.execute_command("XRANGE", key, "-", "+"),
        pairs(client.execute_command("XINFO", "STREAM", key, "FULL", "COUNT", "0")),
        client.execute_command("XINFO", "GROUPS", key),
        client.execute_command("XRETENTION", "GET", key),
    ]


def ids(client, key: bytes = b"s") -> list[bytes]:
    return [entry[0] for entry in client.execute_command("XRANGE", key, "-", "+")]


def info(client, key: bytes = b"s") -> dict:
    return pairs(client.execute_command("XINFO", "STREAM", key))


def xadd(client, *numbers: int, key: bytes = b"s") -> None:
    for n in numbers:
        client.execute_command("XADD", key, f"{n}-0", "f", f"v{n}")


def tombstone_head(c) -> None:
    """Nodes [1 2 (3)] [4 5 6]: the first holds tombstones only."""
    xadd(c, *range(1, 7))
    assert c.execute_command("XDEL", "s", "3-0") == 1
    assert c.execute_command("XTRIM", "s", "MINID", "=", "3") == 2
    assert info(c)[b"radix-tree-keys"] == 2


def tombstone_middle(c, last: int, pending: tuple[int, ...]) -> None:
    """Nodes of 3 up to `last`; g has read 1..last-4 and keeps `pending`; XDEL and XTRIM MINID ACKED at
    last-3 leave the pending entries and, before the last node, one of tombstones only."""
    xadd(c, *range(1, last + 1))
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    read = last - 4
    c.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", read, "STREAMS", "s", ">")
    acked = [f"{i}-0" for i in range(1, read + 1) if i not in pending]
    assert c.execute_command("XACK", "s", "g", *acked) == len(acked)
    assert c.execute_command("XDEL", "s", f"{last - 3}-0") == 1
    assert c.execute_command("XTRIM", "s", "MINID", "=", f"{last - 3}", "ACKED") == len(acked)
    assert ids(c) == [b"%d-0" % i for i in (*pending, last - 2, last - 1, last)]
    assert info(c)[b"radix-tree-keys"] == len(pending) + 2


def auto_policy_last(c) -> None:
    """The policy set on a stream whose head node is empty (the review's r_emptynode.py)."""
    tombstone_head(c)
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION") == b"OK"
    assert ids(c) == [b"4-0", b"5-0", b"6-0"]  # g holds everything
    xadd(c, 7, 8)
    c.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", 10, "STREAMS", "s", ">")
    assert c.execute_command("XACK", "s", "g", "4-0", "5-0", "6-0") == 3  # g releases the node [4 5 6]
    assert ids(c) == [b"7-0", b"8-0"]
    assert info(c)[b"radix-tree-keys"] == 1  # the empty node went with it
    assert pairs(c.execute_command("XRETENTION", "GET", "s"))[b"entries-truncated"] == 3


def auto_policy_first(c) -> None:
    """The policy first, then the user's XDEL and exact XTRIM MINID (the review's r_emptynode2.py)."""
    xadd(c, *range(1, 7))
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION") == b"OK"
    assert c.execute_command("XDEL", "s", "3-0") == 1
    assert c.execute_command("XTRIM", "s", "MINID", "=", "3") == 2
    assert ids(c) == [b"4-0", b"5-0", b"6-0"]
    xadd(c, 7, 8)
    c.execute_command("XREADGROUP", "GROUP", "g", "c", "COUNT", 10, "STREAMS", "s", ">")
    assert c.execute_command("XACK", "s", "g", "4-0", "5-0", "6-0") == 3
    assert ids(c) == [b"7-0", b"8-0"]


def len_limits(c) -> None:
    """MIN-LEN and MAX-LEN: idle while the stream fits, then MAX cuts exactly past the empty head node."""
    xadd(c, *range(1, 7))
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", 1, "MAX-LEN", 6) == b"OK"
    assert c.execute_command("XDEL", "s", "3-0") == 1
    assert c.execute_command("XTRIM", "s", "MINID", "=", "3") == 2
    xadd(c, 7, 8, 9)
    assert ids(c) == [b"%d-0" % i for i in range(4, 10)]
    xadd(c, 10)  # 7 entries: MAX-LEN takes 4-0, which g still held
    assert ids(c) == [b"%d-0" % i for i in range(5, 11)]
    assert info(c)[b"radix-tree-keys"] == 3
    got = pairs(c.execute_command("XRETENTION", "GET", "s"))
    assert (got[b"entries-truncated"], got[b"entries-lost"]) == (1, 1)


def max_bytes_empty_head(c) -> None:
    """MAX-BYTES counts the empty head node's bytes: keeping from the first entry, it drops that node."""
    tombstone_head(c)
    c.execute_command("XGROUP", "CREATE", "s", "g", "0")
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    limit = c.execute_command("MEMORY", "USAGE", "s") - 1
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-BYTES", limit) == b"OK"
    assert ids(c) == [b"4-0", b"5-0", b"6-0"]
    assert info(c)[b"radix-tree-keys"] == 1
    assert c.execute_command("MEMORY", "USAGE", "s") <= limit
    got = pairs(c.execute_command("XRETENTION", "GET", "s"))
    assert (got[b"entries-truncated"], got[b"entries-lost"]) == (0, 0)


def max_bytes_empty_middle(c) -> None:
    """Nodes [1] [] [7 8 9]: MAX-BYTES that the first node takes past keeps from 7-0, dropping the empty node."""
    tombstone_middle(c, 9, (1,))
    c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")
    limit = c.execute_command("MEMORY", "USAGE", "s") - 1
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MAX-BYTES", limit) == b"OK"
    assert ids(c) == [b"7-0", b"8-0", b"9-0"]
    assert info(c)[b"radix-tree-keys"] == 1
    assert c.execute_command("MEMORY", "USAGE", "s") <= limit
    got = pairs(c.execute_command("XRETENTION", "GET", "s"))
    assert (got[b"entries-truncated"], got[b"entries-lost"]) == (1, 1)  # g's pending 1-0


MIDDLE = (1, 4)  # min_bytes_empty_middle's layout: [1] [4] [] [10 11 12]


def min_bytes_limit() -> tuple[int, int]:
    """The same stream in this process: (MIN-BYTES reached only from the empty node on, its MEMORY USAGE)."""
    mirror = InProcessClient()
    mirror.execute_command("CONFIG", "SET", "stream-node-max-entries", NODE)
    tombstone_middle(mirror, 12, MIDDLE)
    stream = mirror.server.keyspace.dbs[0].data[b"s"]
    assert [node.count for node in stream.nodes] == [1, 1, 0, 3]
    sizes = store.ByteMeter().sizes(stream)
    from server.maxmemory import key_overhead

    reach = stream.base_memory() + 2 * sys.getsizeof([]) + key_overhead(b"s") + sum(size + 16 for size in sizes[2:])
    return reach, mirror.execute_command("MEMORY", "USAGE", "s")


def min_bytes_empty_middle(c, limit: int, usage: int) -> None:
    """MIN-BYTES reached only counting the empty node keeps from the node before it, so that MEMORY USAGE still
    reaches the limit afterwards (keeping from the next live node would drop the empty one with it)."""
    tombstone_middle(c, 12, MIDDLE)
    assert c.execute_command("MEMORY", "USAGE", "s") == usage  # the mirror measured this very stream
    assert c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-BYTES", limit) == b"OK"
    assert ids(c) == [b"4-0", b"10-0", b"11-0", b"12-0"]
    assert info(c)[b"radix-tree-keys"] == 3
    assert c.execute_command("MEMORY", "USAGE", "s") >= limit
    c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-BYTES", limit + 1)  # more than the three nodes hold
    assert ids(c)[0] == b"4-0"


SCENARIOS = {
    "auto-policy-last": auto_policy_last,
    "auto-policy-first": auto_policy_first,
    "min-len-max-len": len_limits,
    "max-bytes-empty-head": max_bytes_empty_head,
    "max-bytes-empty-middle": max_bytes_empty_middle,
    "min-bytes-empty-middle": min_bytes_empty_middle,
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_empty_nodes_on_primary_replica_and_aof(tmp_path, name):
    """Each scenario answers as it says on the primary; the replica and the AOF (kill -9) hold the same."""
    args = min_bytes_limit() if name == "min-bytes-empty-middle" else ()
    primary = start(tmp_path, "primary", "--appendonly", "yes", "--appendfsync", "always", "--save", "")
    replica = start(tmp_path, "replica", "--replicaof", "127.0.0.1", str(primary.port))
    try:
        p, r = primary.client(), replica.client()
        caught_up(p, r)
        SCENARIOS[name](p, *args)
        before = state(p)
        caught_up(p, r)
        assert state(r) == before
        kill9(primary)
        primary = start(tmp_path, "primary", "--appendonly", "yes", "--save", "", port=primary.port)
        assert state(primary.client()) == before
        assert "Traceback" not in primary.read_log()
    finally:
        replica.stop()
        primary.stop()


def test_the_cron_survives_a_stream_whose_head_node_is_empty(server):
    """The cron runs retention on every stream with a policy: an empty head node must not stop it (and with
    it active expiry)."""
    c = server.client()
    c.flushall()
    c.config_set("stream-node-max-entries", NODE)
    try:
        xadd(c, *range(1, 7))
        c.execute_command("XGROUP", "CREATE", "s", "g", "0")
        c.execute_command("XGROUP", "SETCONFIG", "s", "g", "SUBSCRIBER", "AUTO")  # g holds everything
        c.execute_command("XRETENTION", "SET", "s", "CONSUMPTION", "MIN-LEN", 1)
        assert c.execute_command("XDEL", "s", "3-0") == 1
        assert c.execute_command("XTRIM", "s", "MINID", "=", "3") == 2
        expired = c.info("stats")["expired_keys"]
        c.set("k", "v", px=50)
        deadline = time.monotonic() + 10
        while c.info("stats")["expired_keys"] == expired:
            assert time.monotonic() < deadline, "the cron stopped"
            time.sleep(0.05)
        assert ids(c) == [b"4-0", b"5-0", b"6-0"]
        assert "Traceback" not in server.read_log()
    finally:
        c.flushall()
        c.config_set("stream-node-max-entries", 100)


# -- in process: the storage rules on streams with empty nodes ---------------------------------------


def _live(stream: Stream) -> list[int]:
    return [i for i, _ in stream.range(0, MAX_ID)]


def _random_stream(rng: random.Random) -> Stream:
    """Small nodes, tombstones, and nodes with none left: exact MINID trims at a deleted entry, and XDELs that
    keep their node (as XTRIM ... ACKED does)."""
    stream = Stream()
    node = rng.choice((1, 2, 3, 5))
    ms = 0
    for _ in range(rng.randrange(1, 40)):
        ms += 1
        stream.add_id(ms, 0, [b"f", b"v" * rng.choice((1, 30, 300))], node)
        if rng.random() < 0.3 and len(stream) > 1:
            victim = rng.choice(_live(stream)[:-1])
            stream.delete([victim])
            if rng.random() < 0.6:
                stream.trim(minid=victim)
        if rng.random() < 0.15 and len(stream) > 1:
            nodes = [n for n in stream.nodes[:-1] if n.count]
            if nodes:
                stream.delete(list(stream.node_ids(rng.choice(nodes))), keep_nodes=True)
    return stream


def _fresh_sizes(stream: Stream) -> list[int]:
    return [node_memory(node) + sys.getsizeof(key) for node, key in zip(stream.nodes, stream.keys, strict=True)]


def _bytes_cut_by_definition(stream: Stream, limit: int, at_least: bool, extra: int) -> int:
    """The cut a trim can make (it keeps from a live entry, with every node after it): MAX keeps the most
    nodes whose count stays within limit, MIN the fewest whose count reaches it (all when none does)."""
    nodes, sizes = stream.nodes, _fresh_sizes(stream)
    n = len(nodes)
    if at_least:
        count = [stream.base_memory() + 2 * sys.getsizeof([]) + extra + sum(sizes[h:]) + 16 * (n - h) for h in range(n)]
        if count[0] < limit:
            return 0
        reach = [h for h in range(n) if nodes[h].count and count[h] >= limit]
        return stream.node_ids(nodes[reach[-1]])[0] if reach else 0
    count = [stream.base_memory() + sys.getsizeof(nodes) + sys.getsizeof(stream.keys) + extra + sum(sizes[h:]) for h in range(n + 1)]
    if count[0] <= limit:
        return 0
    fits = [h for h in range(1, n) if nodes[h].count and count[h] <= limit]
    return stream.node_ids(nodes[fits[0]])[0] if fits else stream.last_id + 1


@pytest.mark.parametrize("seed", range(6))
def test_cuts_step_over_nodes_without_live_entries(seed: int) -> None:
    """whole_nodes, the byte cuts and plan() on streams with empty nodes (head and middle): the cuts mean what
    they do on other streams, and plan() names a live entry to keep from."""
    rng = random.Random(900 + seed)
    for _ in range(150):
        stream = _random_stream(rng)
        live = _live(stream)
        if not live:
            continue
        extra = rng.choice((0, 50))
        meter = store.ByteMeter()
        for at_least in (False, True):
            edges = {stream.memory_usage() + extra, stream.base_memory()}
            edges |= {stream.base_memory() + sum(_fresh_sizes(stream)[h:]) for h in range(len(stream.nodes))}
            for limit in sorted({edge + d for edge in edges for d in (-300, -1, 0, 1, 300)}):
                want = _bytes_cut_by_definition(stream, limit, at_least, extra)
                assert store._bytes_cut(stream, meter, limit, at_least, extra) == want, (limit, at_least)
        for cut in rng.sample([*live, stream.last_id + 1], min(5, len(live) + 1)):
            straddling = [ids for ids in map(stream.node_ids, stream.nodes) if ids and ids[0] < cut <= ids[-1]]
            kept = set(straddling[0]) if straddling else set()
            rounded = store.whole_nodes(stream, cut)
            assert [i for i in live if i < rounded] == [i for i in live if i < cut and i not in kept]
        retention = store.Retention()
        minimum = rng.choice((None, (b"len", rng.randrange(0, 6)), (b"bytes", rng.randrange(200, 3000))))
        maximum = rng.choice((None, (b"len", rng.randrange(0, 12)), (b"bytes", rng.randrange(500, 6000))))
        retention.policy = (minimum, maximum)
        decided = store.plan(stream, retention, 0, extra_bytes=extra)
        if decided is not None:
            assert decided.keep_from is None or decided.keep_from in live
            if decided.removed == 0:  # only empty nodes go, for MAX-BYTES
                assert decided.keep_from == live[0] and not stream.nodes[0].count and maximum[0] == b"bytes"


# -- the byte meter --------------------------------------------------------------------------------------


def _check_meter(meter: store.ByteMeter, stream: Stream, step) -> None:
    fresh = _fresh_sizes(stream)
    assert meter.measure(stream) == sum(fresh), step
    for i in range(len(fresh) + 1):
        assert meter.suffix(i) == sum(fresh[i:]), (step, i)
    assert meter.sizes(stream) == fresh, step
    assert stream.fixed_memory() + sum(map(node_memory, stream.nodes)) == stream.memory_usage()


@pytest.mark.parametrize("seed", range(4))
def test_the_byte_meter_keeps_count_of_every_change(seed: int) -> None:
    """The meter's sizes, total and suffix sums after random appends, trims (whole nodes, into the head, exact
    MINID at a deleted entry), XDELs (in sealed nodes, the tail, whole nodes, keeping empty nodes) and a reload
    (every node sealed, the tail unsealed by the next append) equal a fresh measure: the incremental
    bookkeeping cannot drift."""
    rng = random.Random(700 + seed)
    stream = Stream()
    meter = store.ByteMeter()
    ms = 1
    node = rng.choice((1, 3, 10))
    for step in range(2500):
        roll = rng.random()
        if roll < 0.6 or not len(stream):
            for _ in range(rng.choice((1, 1, 2, 12))):
                ms += rng.randint(0, 2)
                stream.add(ms, [b"f", b"v" * rng.choice((1, 1, 30, 300))], max_entries=node)
        elif roll < 0.7:
            live = _live(stream)
            stream.delete(rng.sample(live, min(len(live), rng.randint(1, 3))), keep_nodes=rng.random() < 0.3)
        elif roll < 0.78:
            stream.trim(maxlen=rng.randint(len(stream) // 2, len(stream)))
        elif roll < 0.84:
            stream.trim(maxlen=rng.randint(0, len(stream)), approx=True, limit=rng.choice((0, 100)))
        elif roll < 0.92:
            live = _live(stream)
            victim = rng.choice(live)
            stream.delete([victim])
            stream.trim(minid=victim)
        elif roll < 0.95:
            stream = Stream.load(stream.dump())  # as a reload leaves it: new nodes, all sealed
        elif roll < 0.97:
            node = rng.choice((1, 3, 10))
        if rng.random() < 0.4:
            continue  # several changes between two runs too
        _check_meter(meter, stream, step)


def test_a_run_on_a_growing_stream_measures_only_what_changed(monkeypatch) -> None:
    """O(1) per run on a stream that only grows: sealing a node measures that node alone (not every sealed one
    again), a trim from the head measures nothing more, and an XDEL in the middle measures everything once."""
    measured = []
    monkeypatch.setattr(store, "node_memory", lambda node: measured.append(node) or node_memory(node))
    stream = Stream()
    for ms in range(1, 5001):
        stream.add_id(ms, 0, [b"f", b"v"], 10)
    retention = store.of(stream)
    retention.policy = (None, (b"bytes", 10**12))
    assert store.plan(stream, retention, 0) is None
    assert len(measured) == 499  # every sealed node, once
    for ms in range(5001, 5101):
        del measured[:]
        stream.add_id(ms, 0, [b"f", b"v"], 10)
        assert store.plan(stream, retention, 0) is None
        assert len(measured) == (1 if ms % 10 == 1 else 0), ms  # the node this entry sealed
    del measured[:]
    stream.trim(maxlen=len(stream) - 25)  # two whole nodes and into the third
    assert store.plan(stream, retention, 0) is None
    assert measured == [stream.nodes[0]]  # the head, trimmed into
    del measured[:]
    stream.delete([stream.node_ids(stream.nodes[200])[3]])
    assert store.plan(stream, retention, 0) is None
    assert len(measured) == len(stream.nodes) - 1  # an XDEL in the middle: everything, once
    del measured[:]
    assert store.plan(stream, retention, 0) is None
    assert measured == []
    _check_meter(retention.meter, stream, "end")
