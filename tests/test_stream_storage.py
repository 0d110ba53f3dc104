"""storage.stream without sockets: IDs, nodes, ranges, trims, counters, and a list model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ReplyError
from storage.stream import Stream, _str_size
from storage.stream_id import INVALID_ID, MAX_ID, format_id, make_id, parse_id, parse_strict_id, parse_xadd_id

# -- IDs -----------------------------------------------------------------------


def test_parse_id_forms():
    assert parse_id(b"5-3") == make_id(5, 3)
    assert parse_id(b"5") == make_id(5, 0)
    assert parse_id(b"5", missing_seq=2**64 - 1) == make_id(5, 2**64 - 1)
    assert parse_id(b"-") == 0
    assert parse_id(b"+") == MAX_ID
    assert parse_id(b"18446744073709551615-18446744073709551615") == MAX_ID
    # string2ull's strtoull fallback, as in Redis
    assert parse_id(b"007-1") == make_id(7, 1)
    assert parse_id(b"+7- 1") == make_id(7, 1)
    for bad in (b"", b"x", b"1-x", b"1-2-3", b"18446744073709551616", b"-1", b"1--1", b"1-", b"a" * 200):
        with pytest.raises(ReplyError) as err:
            parse_id(bad)
        assert err.value.message == INVALID_ID
    for bad in (b"-", b"+"):
        with pytest.raises(ReplyError):
            parse_strict_id(bad)


def test_parse_xadd_id():
    assert parse_xadd_id(b"5-*") == (5, None)
    assert parse_xadd_id(b"5-6") == (5, 6)
    assert parse_xadd_id(b"5") == (5, 0)
    for bad in (b"-*", b"5-5-*", b"x-*", b"+", b"-"):
        with pytest.raises(ReplyError):
            parse_xadd_id(bad)


def test_format_id():
    assert format_id(make_id(1700000000000, 7)) == b"1700000000000-7"
    assert format_id(MAX_ID) == b"18446744073709551615-18446744073709551615"


def test_next_id_rules():
    s = Stream()
    assert s.next_id(1000) == make_id(1000, 0)
    s.append(make_id(1000, 0), [b"f", b"v"])
    assert s.next_id(999) == make_id(1000, 1)  # the clock never goes back
    assert s.next_id(2000) == make_id(2000, 0)
    assert s.next_id(0, 1000, None) == make_id(1000, 1)
    assert s.next_id(0, 1001, None) == make_id(1001, 0)
    with pytest.raises(ReplyError, match="equal or smaller"):
        s.next_id(0, 1000, 0)
    with pytest.raises(ReplyError, match="equal or smaller"):
        s.next_id(0, 999, None)
    s.append(make_id(1000, 2**64 - 1), [b"f", b"v"])
    with pytest.raises(ReplyError, match="equal or smaller"):
        s.next_id(0, 1000, None)
    assert s.next_id(5) == make_id(1001, 0)
    s.append(MAX_ID, [b"f", b"v"])
    with pytest.raises(ReplyError, match="exhausted"):
        s.next_id(5)


# -- listpack sizes --------------------------------------------------------------


def test_listpack_string_sizes():
    assert _str_size(b"0") == 2
    assert _str_size(b"127") == 2
    assert _str_size(b"128") == 3
    assert _str_size(b"-1") == 3
    assert _str_size(b"1234") == 3
    assert _str_size(b"40000") == 5
    assert _str_size(b"9223372036854775807") == 10
    assert _str_size(b"9223372036854775808") == 1 + 19 + 1  # too big: a string
    assert _str_size(b"01") == 4  # not canonical: a string
    assert _str_size(b"-0") == 4
    assert _str_size(b"10.5") == 6
    assert _str_size(b"x" * 63) == 65
    assert _str_size(b"x" * 64) == 66 + 1  # 2-byte header, 2-byte backlen
    assert _str_size(b"x" * 5000) == 5005 + 2


# -- nodes -----------------------------------------------------------------------


def fill(s: Stream, n: int, start: int = 1, max_entries: int = 100, max_bytes: int = 4096, value: bytes = b"v") -> None:
    for i in range(start, start + n):
        s.append(make_id(i, 0), [b"f", value], max_entries, max_bytes)


def test_nodes_split_by_entries():
    s = Stream()
    fill(s, 250)
    assert [n.count for n in s.nodes] == [100, 100, 50]
    assert s.keys == [make_id(1, 0), make_id(101, 0), make_id(201, 0)]
    assert s.nodes[0].packed is not None and s.nodes[2].packed is None


def test_nodes_split_by_bytes():
    s = Stream()
    fill(s, 30, value=b"x" * 300, max_bytes=4096)
    # each entry is ~300 listpack bytes: the node closes before reaching 4096 bytes
    assert all(n.lp_bytes < 4096 for n in s.nodes)
    assert len(s.nodes) == 3 and s.nodes[0].count == 13


def test_deleted_entries_still_fill_the_node():
    s = Stream()
    fill(s, 60)
    assert s.delete([make_id(i, 0) for i in range(1, 51)]) == [make_id(i, 0) for i in range(1, 51)]
    fill(s, 50, start=61)
    assert [n.count for n in s.nodes] == [50, 10]
    assert s.nodes[0].deleted == 50


def test_node_removed_when_last_live_entry_deleted():
    s = Stream()
    fill(s, 101)
    s.delete([make_id(101, 0)])
    assert len(s.nodes) == 1
    # the full sealed node is the tail again: the next entry opens a new node
    fill(s, 1, start=200)
    assert len(s.nodes) == 2


def test_append_to_reopened_sealed_node():
    s = Stream()
    s.append(make_id(1, 0), [b"f", b"x" * 3000])
    s.append(make_id(2, 0), [b"f", b"x" * 3000])  # too big for the first node
    s.delete([make_id(2, 0)])
    s.append(make_id(3, 0), [b"f", b"y"])  # small enough for node 1, sealed before
    assert len(s.nodes) == 1 and s.nodes[0].count == 2
    assert s.range(0, MAX_ID) == [(make_id(1, 0), [b"f", b"x" * 3000]), (make_id(3, 0), [b"f", b"y"])]


def test_fields_kept_per_entry():
    s = Stream()
    s.append(make_id(1, 0), [b"a", b"1", b"b", b"2"])
    s.append(make_id(2, 0), [b"a", b"3", b"a", b"4"])  # duplicate fields are kept
    s.append(make_id(3, 0), [b"b", b"5", b"a", b"6"])
    s.append(make_id(4, 0), [b"a", b"7", b"b", b"8"])
    fill(s, 100, start=10)  # seal the first node
    assert s.get(make_id(2, 0)) == [b"a", b"3", b"a", b"4"]
    assert s.get(make_id(3, 0)) == [b"b", b"5", b"a", b"6"]
    assert s.get(make_id(4, 0)) == [b"a", b"7", b"b", b"8"]
    assert s.get(make_id(5, 0)) is None


def test_range_bounds_count_and_reverse():
    s = Stream()
    fill(s, 350)
    ids = [make_id(i, 0) for i in range(1, 351)]
    assert [e[0] for e in s.range(0, MAX_ID)] == ids
    assert [e[0] for e in s.range(make_id(99, 0), make_id(205, 0))] == ids[98:205]
    assert [e[0] for e in s.range(make_id(99, 0), make_id(205, 0), rev=True)] == ids[98:205][::-1]
    assert [e[0] for e in s.range(make_id(150, 1), MAX_ID, count=3)] == ids[150:153]
    assert [e[0] for e in s.range(0, make_id(300, 0), count=4, rev=True)] == ids[299:295:-1]
    assert s.range(make_id(5, 0), make_id(4, 0)) == []


# -- trimming ----------------------------------------------------------------------


def test_exact_and_approximate_maxlen():
    s = Stream()
    fill(s, 1000)
    assert s.trim(maxlen=950, approx=True) == 0  # 50 would cut into the first node
    assert s.trim(maxlen=899, approx=True) == 100
    assert s.trim(maxlen=850) == 50
    assert len(s) == 850 and s.first_id == make_id(151, 0)
    assert s.nodes[0].count == 50 and s.nodes[0].deleted == 50
    # LIMIT counts entries of whole nodes
    assert s.trim(maxlen=0, approx=True, limit=300) == 250
    assert len(s) == 600


def test_minid_uses_the_node_tail_tombstone_included():
    s = Stream()
    fill(s, 200)
    s.delete([make_id(100, 0)])  # tombstone at the end of node 1
    assert s.trim(minid=make_id(100, 0), approx=True) == 0  # node 1's last id (100) is not < 100
    assert s.trim(minid=make_id(101, 0), approx=True) == 99
    assert s.first_id == make_id(101, 0)


def test_exact_minid_can_leave_an_empty_node():
    s = Stream()
    fill(s, 150)
    s.delete([make_id(100, 0)])
    assert s.trim(minid=make_id(100, 0)) == 99
    assert s.nodes[0].count == 0 and len(s.nodes) == 2
    assert s.first_id == make_id(101, 0)
    assert s.range(0, MAX_ID, count=1) == [(make_id(101, 0), [b"f", b"v"])]


def test_counters():
    s = Stream()
    fill(s, 10)
    assert (s.entries_added, s.first_id, s.max_deleted_entry_id) == (10, make_id(1, 0), 0)
    s.delete([make_id(1, 0), make_id(5, 0), make_id(99, 0)])
    assert s.first_id == make_id(2, 0) and s.max_deleted_entry_id == make_id(5, 0)
    s.trim(maxlen=2)
    assert s.max_deleted_entry_id == make_id(5, 0)  # trimming does not count as deleting
    assert s.first_id == make_id(9, 0) and s.entries_added == 10
    s.trim(maxlen=0)
    assert (len(s), s.first_id, s.last_id) == (0, 0, make_id(10, 0))


def test_set_id_checks():
    s = Stream()
    fill(s, 3)
    s.delete([make_id(2, 0)])
    with pytest.raises(ReplyError, match="smaller than current max_deleted_entry_id"):
        s.set_id(make_id(1, 0))
    with pytest.raises(ReplyError, match="smaller than the target stream top item"):
        s.set_id(make_id(2, 5))
    with pytest.raises(ReplyError, match="entries_added specified in XSETID is smaller"):
        s.set_id(make_id(5, 0), entries_added=1)
    s.set_id(make_id(5, 0), entries_added=7, max_deleted_entry_id=make_id(4, 0))
    assert (s.last_id, s.entries_added, s.max_deleted_entry_id) == (make_id(5, 0), 7, make_id(4, 0))


def test_radix_tree_nodes_shape():
    s = Stream()
    assert s.radix_tree_nodes() == 1
    fill(s, 1)
    assert s.radix_tree_nodes() == 2
    fill(s, 100, start=2)
    assert len(s.nodes) == 2 and s.radix_tree_nodes() == 6
    fill(s, 899, start=102)
    assert s.radix_tree_nodes() == 26  # what Redis 7 reports for the same keys
    s.trim(maxlen=500, approx=True)
    assert s.radix_tree_nodes() == 14


def test_memory_is_packed():
    s = Stream()
    for i in range(20000):
        s.append(make_id(1700000000000 + i // 3, i % 3), [b"sensor-id", b"1234", b"temperature", b"10.5"])
    assert s.memory_usage() / 20000 < 40


@pytest.mark.parametrize("seed", range(4))
def test_pack_is_msgpacks_bytes(seed):
    """A sealed node's bytes are exactly msgpack's for (ms deltas, seqs, rows), whichever way _pack builds them
    (per millisecond with table slices, or one by one): dumps and MEMORY USAGE depend on it."""
    import random

    import msgpack

    from storage.stream import Node, _pack, _unpack

    rnd = random.Random(seed)
    for _ in range(400):
        n = rnd.choice([1, 2, 3, 17, 100, 300])
        master = make_id(rnd.choice([0, 5, 1700000000000, 2**64 - 3]), rnd.choice([0, 100, 200, 300, 65400, 2**64 - 2000]))
        cur = min(master + rnd.choice([0, 1, 2**64]), MAX_ID)
        ms_step, gap = rnd.choice([0.0, 0.02, 0.3, 1.0]), rnd.choice([0.0, 0.1])
        ids = []
        for _i in range(n):
            ids.append(cur)
            if rnd.random() < ms_step:
                cur = make_id((cur >> 64) + rnd.choice([1, 2, 127, 128, 5000]), rnd.choice([0, 1, 127, 128, 255, 256]))
            else:
                cur += rnd.randint(2, 1000) if rnd.random() < gap else 1
            cur = min(cur, MAX_ID)
        if len(set(ids)) < n:
            continue
        row = [b"1234", b"10.5"]
        rows = [row] * n if rnd.random() < 0.6 else [rnd.choice([row, [b"1234", b"10.5"], [None, b"f", b"v"]]) for _i in range(n)]
        node = Node(master, (b"sensor-id", b"temperature"))
        ms_parts = [entry_id >> 64 for entry_id in ids]
        deltas = [b - a for a, b in zip([master >> 64, *ms_parts], ms_parts, strict=False)]
        seqs = [entry_id & (2**64 - 1) for entry_id in ids]
        node.packed = _pack(node, ids, rows)
        assert node.packed == msgpack.packb((deltas, seqs, rows), use_bin_type=True)
        assert _unpack(node) == (ids, rows)


# -- property test against a list model -----------------------------------------------


class Model:
    """Entries in a list plus Redis's node bookkeeping by entry counts alone."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max_entries
        self.entries: list[tuple[int, list[bytes]]] = []
        self.nodes: list[dict] = []  # {"live": [ids], "dead": n, "last": id}
        self.last_id = self.first_id = self.max_deleted = self.added = 0

    def add(self, entry_id: int, flat: list[bytes]) -> None:
        self.entries.append((entry_id, flat))
        tail = self.nodes[-1] if self.nodes else None
        if tail is None or len(tail["live"]) + tail["dead"] >= self.max_entries:
            tail = {"live": [], "dead": 0, "last": entry_id}
            self.nodes.append(tail)
        tail["live"].append(entry_id)
        tail["last"] = entry_id
        self.last_id, self.added = entry_id, self.added + 1
        self._first()

    def _first(self) -> None:
        self.first_id = self.entries[0][0] if self.entries else 0

    def delete(self, ids: list[int]) -> int:
        n = 0
        for entry_id in ids:
            for k, (eid, _f) in enumerate(self.entries):
                if eid == entry_id:
                    del self.entries[k]
                    node = next(nd for nd in self.nodes if entry_id in nd["live"])
                    if len(node["live"]) == 1:
                        self.nodes.remove(node)
                    else:
                        node["live"].remove(entry_id)
                        node["dead"] += 1
                    self.max_deleted = max(self.max_deleted, entry_id)
                    n += 1
                    break
        self._first()
        return n

    def trim(self, maxlen, minid, approx, limit) -> int:
        removed = 0
        while self.nodes:
            if maxlen is not None and len(self.entries) <= maxlen:
                break
            node = self.nodes[0]
            live = len(node["live"])
            if limit and removed + live > limit:
                break
            whole = len(self.entries) - live >= maxlen if maxlen is not None else node["last"] < minid
            if whole:
                self._drop(node["live"])
                self.nodes.pop(0)
                removed += live
                continue
            if approx:
                break
            victims = node["live"][: len(self.entries) - maxlen] if maxlen is not None else [i for i in node["live"] if i < minid]
            self._drop(victims)
            node["live"] = node["live"][len(victims):]
            node["dead"] += len(victims)
            removed += len(victims)
            break
        self._first()
        return removed

    def _drop(self, ids) -> None:
        gone = set(ids)
        self.entries = [e for e in self.entries if e[0] not in gone]


# LIMITs that equal the entries of whole head nodes (node sizes 1, 3, 10, 100 below), and some that do not
limits = st.sampled_from([0, 0, 1, 2, 3, 5, 6, 9, 10, 20, 30, 100])

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 4), st.lists(st.sampled_from([b"a", b"b", b"7", b"x" * 70]), min_size=1, max_size=3)),
        st.tuples(st.just("del"), st.lists(st.integers(0, 400), min_size=1, max_size=4)),
        st.tuples(st.just("maxlen"), st.integers(0, 300), st.booleans(), limits),
        st.tuples(st.just("minid"), st.integers(0, 400), st.booleans(), limits),
        st.tuples(st.just("range"), st.integers(0, 400), st.integers(0, 400), st.integers(0, 5), st.booleans()),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops, max_entries=st.sampled_from([1, 3, 10, 100]))
def test_matches_list_model(ops, max_entries):
    s, m = Stream(), Model(max_entries)
    seq = 0
    for op in ops:
        kind = op[0]
        if kind == "add":
            for _ in range(op[1]):
                seq += 1
                entry_id = make_id(seq // 2, seq % 2)
                flat = [x for f in op[2] for x in (f, f + b"v")]
                s.append(entry_id, flat, max_entries, 0)
                m.add(entry_id, flat)
        elif kind == "del":
            ids = [make_id(i // 2, i % 2) for i in op[1]]
            assert len(s.delete(ids)) == m.delete(ids)
        elif kind in ("maxlen", "minid"):
            _kind, value, approx, limit = op
            limit = limit if approx else 0
            maxlen = value if kind == "maxlen" else None
            minid = make_id(value // 2, value % 2) if kind == "minid" else None
            assert s.trim(maxlen, minid, approx, limit) == m.trim(maxlen, minid, approx, limit)
        else:
            _kind, a, b, count, rev = op
            lo, hi = make_id(a // 2, a % 2), make_id(b // 2, b % 2)
            expected = [e for e in m.entries if lo <= e[0] <= hi]
            if rev:
                expected.reverse()
            if count:
                expected = expected[:count]
            assert s.range(lo, hi, count, rev) == expected
        assert s.range(0, MAX_ID) == m.entries
        assert len(s) == len(m.entries)
        assert (s.last_id, s.first_id, s.max_deleted_entry_id, s.entries_added) == (m.last_id, m.first_id, m.max_deleted, m.added)
        assert [n.count for n in s.nodes] == [len(n["live"]) for n in m.nodes]
        assert [n.deleted for n in s.nodes] == [n["dead"] for n in m.nodes]
        for entry_id, flat in m.entries[:3] + m.entries[-3:]:
            assert s.get(entry_id) == flat


def _nodes(s: Stream) -> list:
    return [(n.master_id, n.fields, n.count, n.deleted, n.lp_bytes, n.last_id) for n in s.nodes]


@pytest.mark.parametrize("max_entries, max_bytes", [(100, 4096), (3, 4096), (0, 300), (100, 0), (1000, 1 << 20), (1000, 1 << 31)])
def test_add_fast_path_matches_append(max_entries, max_bytes):
    """Stream.add (XADD *) with its memoized sizes builds the same nodes as next_id + append."""
    import random

    rnd = random.Random(max_entries * 7 + max_bytes)
    fast, slow = Stream(), Stream()
    now = 1700000000000
    values = [b"1234", b"10.5", b"-7", b"007", b"x" * 70, b"200"]
    for step in range(3000):
        now += rnd.choice([0, 0, 0, 1, 300])
        if rnd.random() < 0.8:
            flat = [b"sensor-id", rnd.choice(values), b"temperature", rnd.choice(values)]
        else:
            flat = [rnd.choice([b"a", b"sensor-id", b"b"]), rnd.choice(values)]
        if step % 500 == 499:  # XSETID-like jump to the last sequence of the current ms
            fast.last_id = slow.last_id = make_id(max(now, slow.last_id >> 64), 2**64 - 1)
        elif step % 500 == 250:  # sequences past the table of small ones
            fast.last_id = slow.last_id = make_id(max(now, slow.last_id >> 64), 5000)
        text = fast.add(now, flat, max_entries, max_bytes)
        entry_id = slow.next_id(now)
        slow.append(entry_id, flat, max_entries, max_bytes)
        assert text == format_id(entry_id)
        if step % 700 == 0 and slow.length > 5:
            victims = [e for e, _f in slow.range(0, MAX_ID)][-3:]
            assert fast.delete(victims) == slow.delete(victims)
        if step % 900 == 0:
            fast, slow = Stream.load(fast.dump()), Stream.load(slow.dump())  # a sealed tail node
        assert _nodes(fast) == _nodes(slow)
    assert fast.range(0, MAX_ID) == slow.range(0, MAX_ID)
    assert (fast.length, fast.last_id, fast.first_id, fast.entries_added) == (slow.length, slow.last_id, slow.first_id, slow.entries_added)


@pytest.mark.parametrize("max_entries, max_bytes", [(100, 4096), (3, 4096), (0, 300), (100, 0), (1000, 1 << 20)])
def test_add_id_matches_append(max_entries, max_bytes):
    """Stream.add_id (a replica's `XADD key ms-seq ...`) builds the same nodes as next_id + append,
    whatever gaps the IDs leave, and refuses an ID at or below the last one as next_id does."""
    import random

    rnd = random.Random(max_entries * 5 + max_bytes)
    fast, slow = Stream(), Stream()
    ms, seq = 1700000000000, 0
    values = [b"1234", b"10.5", b"-7", b"x" * 70]
    for step in range(3000):
        gap = rnd.choice([0, 0, 0, 1, 200, 5000, 1 << 40])
        ms, seq = (ms, seq + rnd.choice([1, 1, 2, 130, 5000])) if not gap else (ms + gap, rnd.choice([0, 0, 3, 4100, 1 << 63]))
        flat = [b"sensor-id", rnd.choice(values), b"temperature", rnd.choice(values)] if rnd.random() < 0.8 else [b"a", rnd.choice(values)]
        text = fast.add_id(ms, seq, flat, max_entries, max_bytes)
        entry_id = slow.next_id(0, ms, seq)
        slow.append(entry_id, flat, max_entries, max_bytes)
        assert text == format_id(entry_id)
        if step % 300 == 0:
            with pytest.raises(ReplyError, match="equal or smaller"):
                fast.add_id(ms, seq, flat, max_entries, max_bytes)
        if step % 900 == 0:
            fast, slow = Stream.load(fast.dump()), Stream.load(slow.dump())  # a sealed tail node
        assert _nodes(fast) == _nodes(slow)
    assert fast.range(0, MAX_ID) == slow.range(0, MAX_ID)
    assert (fast.length, fast.last_id, fast.first_id, fast.entries_added) == (slow.length, slow.last_id, slow.first_id, slow.entries_added)
    fast.add_id(2**64 - 1, 2**64 - 1, [b"f", b"v"])
    with pytest.raises(ReplyError, match="exhausted"):
        fast.add_id(2**64 - 1, 2**64 - 1, [b"f", b"v"])


def test_dump_and_load_keep_nodes_and_counters():
    import msgpack

    s = Stream()
    fill(s, 250)
    s.append(make_id(300, 0), [b"g", b"1", b"h", b"2"])
    s.delete([make_id(5, 0), make_id(250, 0)])
    s.trim(maxlen=200)
    copy = Stream.load(msgpack.unpackb(msgpack.packb(s.dump()), raw=False))
    assert copy.range(0, MAX_ID) == s.range(0, MAX_ID)
    state = lambda t: (len(t), t.last_id, t.first_id, t.max_deleted_entry_id, t.entries_added,  # noqa: E731
                       [(n.master_id, n.count, n.deleted, n.lp_bytes, n.last_id) for n in t.nodes])
    assert state(copy) == state(s)
    for stream in (s, copy):  # both go on identically: same node splits, same approximate trims
        fill(stream, 120, start=400)
        stream.trim(maxlen=150, approx=True)
    assert state(copy) == state(s)
    assert copy.range(0, MAX_ID) == s.range(0, MAX_ID)
