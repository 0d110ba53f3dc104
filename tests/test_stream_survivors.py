"""storage/stream.py against independent models: what the second mutation run found unguarded in-process.

Most stream tests reach storage only through a server process, which mutmut
cannot select, so these check storage/stream.py directly (issue 27, README
"Mutation testing"): the msgpack integer table sealed nodes are built from,
listpack element sizes (where nodes split, so what `XTRIM ~` removes),
XINFO's radix-tree-nodes against a real compressed trie, MEMORY USAGE's
accounting, XSETID's rules and exact errors, and a dump/load round trip over
random workloads. Each model is written from the format's or Redis's rule.
"""

from __future__ import annotations

import random
import re
import sys

import msgpack
import pytest

import storage.stream as stream_mod
from protocol.errors import ReplyError
from storage.consumer_group import ConsumerGroup
from storage.stream import Stream, _int_size, _pack_uints, _str_size, _uint_offset, _uint_table
from storage.stream_id import make_id


@pytest.fixture(autouse=True)
def _fresh_memos():
    """storage.stream memoizes sizes and rows: a value seen by an earlier test must not skip the code under test."""
    stream_mod._STR_SIZES.clear()
    stream_mod._ROWS.clear()
    stream_mod._LAST_ROW = (None, None)
    stream_mod._DECODED.clear()


# -- msgpack's unsigned integers ---------------------------------------------------------


def test_uint_table_holds_msgpacks_encodings_of_0_to_65535():
    """Every mutant of _uint_table (built once at import, so only a direct call can see one): sealed nodes
    whose seqs come from this table unpacked to other IDs."""
    table = _uint_table()
    assert table == b"".join(msgpack.packb(i) for i in range(65536))
    assert table == stream_mod._UINTS


def test_uint_offset_points_at_each_encoding():
    """_uint_offset's three bands (fixint, 0xcc, 0xcd) and their bounds."""
    offset = 0
    for value in range(65536):
        assert _uint_offset(value) == offset, value
        offset += len(msgpack.packb(value))


def test_pack_uints_is_msgpack():
    rng = random.Random(65)
    for _ in range(300):
        values = [rng.choice([rng.randint(0, 127), rng.randint(128, 1 << 20), 127, 128, 0]) for _ in range(rng.randint(1, 9))]
        assert _pack_uints(values) == msgpack.packb(values), values


# -- listpack element sizes ---------------------------------------------------------------

_INT = re.compile(rb"-?(0|[1-9][0-9]*)")


def lp_element_size(text: bytes) -> int:
    """listpack.c: a string that is the canonical form of an int64 is stored as an integer (7-bit uint
    1 byte, 13-bit 2, 16-bit 3, 24-bit 4, 32-bit 5, else 9), any other string with a 1, 2 or 5 byte
    header (length < 64, < 4096, else); then the back-length, as lpEncodeBacklen sizes it (1 byte up to
    127, then 2, 3, 4 below 16383, 2097151, 268435455: its bounds are not quite powers of two)."""
    value = int(text) if _INT.fullmatch(text) and text != b"-0" else None
    if value is not None and -(1 << 63) <= value < (1 << 63):
        if 0 <= value < 128:
            enc = 1
        else:
            enc = next(size for size, bits in ((2, 13), (3, 16), (4, 24), (5, 32), (9, 64)) if -(1 << (bits - 1)) <= value < (1 << (bits - 1)))
    else:
        n = len(text)
        enc = n + (1 if n < 64 else 2 if n < 4096 else 5)
    backlen = 1 if enc <= 127 else 2 if enc < 16383 else 3 if enc < 2097151 else 4 if enc < 268435455 else 5
    return enc + backlen


def interesting_texts(rng: random.Random) -> list[bytes]:
    edges = [0, 1, 127, 128, 4095, 4096, 32767, 32768, 8388607, 8388608, 2147483647, 2147483648, (1 << 63) - 1, 1 << 63]
    out = [b"", b"-", b"-0", b"-00", b"-01", b"-012", b"00", b"01", b"+1", b" 1", b"1 ", b"0", b"9" * 20, b"9" * 21, b"-" + b"9" * 19, b"1.5", b"1e3"]
    for edge in edges:
        for value in (edge - 1, edge, edge + 1):
            out += [b"%d" % value, b"%d" % -value]
    for n in (*range(0, 140), 4090, 4094, 4095, 4096, 4097, 16379, 16380, 16381, 16382, 16383, 16384):
        out.append(bytes(rng.choice(b"ab") for _ in range(n)))
    out += [b"x" * n for n in (2097140, 2097146, 2097147, 2097148, 2097151)]
    return out


def test_listpack_element_sizes_match_the_model():
    """_int_size's bands and _str_size's integer test, headers and back-length steps: a node split at
    another entry than Redis's, so `XTRIM ~` and XINFO's node counts differed."""
    rng = random.Random(4096)
    for text in interesting_texts(rng):
        assert _str_size(text) == lp_element_size(text), (text[:30], len(text))
    for value in (0, 127, 128, -1, -4096, -4097, 4095, 4096, -32768, -32769, 32767, 32768, -8388608, -8388609, 8388607, 8388608, -(2**31), -(2**31) - 1, 2**31 - 1, 2**31, -(2**63), 2**63 - 1):
        assert _int_size(value) == lp_element_size(b"%d" % value), value


# -- radix tree nodes ---------------------------------------------------------------------


def trie_nodes(keys: list[bytes]) -> int:
    """Nodes of a rax over keys: build the plain byte trie, then count each maximal chain of non-key
    nodes with one child as one compressed node and every other node as itself."""
    if not keys:
        return 1
    root: dict = {}
    for key in keys:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = True  # a key ends here
    count = 0

    def walk(node: dict, in_chain: bool) -> None:
        nonlocal count
        children = [child for byte, child in node.items() if byte is not None]
        single = len(children) == 1 and None not in node
        if not (single and in_chain):
            count += 1  # a node of its own, or the start of a compressed chain
        for child in children:
            walk(child, single)

    walk(root, False)
    return count


def test_radix_tree_nodes_match_a_compressed_trie():
    """_rax_nodes' leaf depth (16), its first depth (0), the 16 big-endian key bytes, and the cached
    count's key (count and both ends): XINFO STREAM FULL's radix-tree-nodes went wrong or stale."""
    rng = random.Random(16)
    for _ in range(60):
        s = Stream()
        ms = rng.choice([0, 1, 255, 256, 1 << 20, 1 << 47, 1 << 56, (1 << 64) - 300])
        seq = rng.choice([0, 250, 65530, 1 << 40, (1 << 64) - 400])
        for _ in range(rng.randint(1, 40)):
            step = rng.choice(["seq", "seq", "seq256", "ms", "ms256", "far"])
            if step == "seq":
                seq += rng.randint(1, 3)
            elif step == "seq256":
                seq += 256 * rng.randint(1, 3)
            elif step == "ms":
                ms, seq = ms + rng.randint(1, 3), 0
            elif step == "ms256":
                ms, seq = ms + 256 * rng.randint(1, 300), rng.randint(0, 300)
            else:
                ms, seq = ms + rng.randint(1, 1 << 50), 0
            if ms >= 1 << 64 or seq >= 1 << 64:
                break
            s.append(make_id(ms, seq), [b"f", b"v"], rng.choice([1, 1, 2, 3]), 0)
            assert s.radix_tree_nodes() == trie_nodes([key.to_bytes(16, "big") for key in s.keys])
        while len(s):
            s.trim(maxlen=rng.randint(0, len(s) - 1))
            assert s.radix_tree_nodes() == trie_nodes([key.to_bytes(16, "big") for key in s.keys])


# -- MEMORY USAGE -------------------------------------------------------------------------


def objects_held(s: Stream) -> int:
    """The bytes of the distinct objects the stream holds (each counted once): a floor for MEMORY USAGE."""
    seen: dict[int, int] = {}

    def add(obj) -> None:
        seen.setdefault(id(obj), sys.getsizeof(obj))

    for obj in (s, s.nodes, s.keys, *s.keys):
        add(obj)
    for names in s._fields:
        add(names)
        for name in names:
            add(name)
    for node in s.nodes:
        for obj in (node, node.master_id, node.last_id):
            add(obj)
        if node.packed is not None:
            add(node.packed)
        else:
            add(node.ids)
            add(node.rows)
            for entry_id, row in zip(node.ids, node.rows, strict=True):
                add(entry_id)
                add(row)
                for item in row:
                    add(item)
    return sum(seen.values())


def test_memory_usage_counts_everything_the_stream_holds():
    """memory_usage's sums (`+=` turned into `=` or `-=`, a part measured as None): MEMORY USAGE fell
    below what the stream keeps alive, or grew by less than the values an entry added to the open node."""
    rng = random.Random(1024)
    for _ in range(12):
        s = Stream()
        max_entries = rng.choice([2, 5, 100])
        previous = s.memory_usage()
        assert previous >= objects_held(s)
        for i in range(rng.randint(1, 60)):
            fields = rng.choice([[b"f", b"v%d" % i], [b"a", b"x" * rng.randint(0, 300), b"b", b"%d" % i], [b"g%d" % (i % 3), b"%d" % (i * 7919)]])
            nodes = len(s.nodes)
            s.append(make_id(1000 + i, 0), fields, max_entries, 4096)
            now = s.memory_usage()
            assert now >= objects_held(s)
            if len(s.nodes) == nodes:  # (a new node seals the previous one, which may then take less)
                assert now - previous >= sum(len(item) for item in fields[1::2])
            previous = now
        while len(s):
            before = s.memory_usage()
            s.trim(maxlen=rng.randint(0, len(s) - 1))
            assert s.memory_usage() <= before
            assert s.memory_usage() >= objects_held(s)


# -- XSETID -------------------------------------------------------------------------------


def test_set_id_rules_and_exact_errors():
    """set_id's bounds (`<` vs `<=`), its `-1` for "no ENTRIESADDED", the clamp of a group's entries-read
    when entries-added is lowered, the default max-deleted-entry-id and Redis's exact error texts."""
    s = Stream()
    for i in range(1, 6):
        s.append(make_id(i, 0), [b"f", b"v"])
    s.delete([make_id(2, 0)])
    with pytest.raises(ReplyError) as error:
        s.set_id(make_id(1, 5))
    assert str(error.value) == "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    with pytest.raises(ReplyError) as error:
        s.set_id(make_id(4, 9))
    assert str(error.value) == "ERR The ID specified in XSETID is smaller than the target stream top item"
    with pytest.raises(ReplyError) as error:
        s.set_id(make_id(9, 0), entries_added=3)
    assert str(error.value) == "ERR The entries_added specified in XSETID is smaller than the target stream length"
    s.set_id(make_id(5, 0))  # the top item itself, no ENTRIESADDED: accepted, counters untouched
    assert (s.last_id, s.entries_added, s.max_deleted_entry_id) == (make_id(5, 0), 5, make_id(2, 0))
    s.set_id(make_id(5, 0), entries_added=4)  # equal to the length: accepted
    assert s.entries_added == 4

    empty = Stream()
    empty.append(make_id(3, 0), [b"f", b"v"])
    empty.delete([make_id(3, 0)])
    empty.set_id(make_id(3, 0))  # equal to max-deleted-entry-id: accepted (Redis refuses only smaller)
    assert (empty.last_id, empty.max_deleted_entry_id, empty.last_valid_id()) == (make_id(3, 0), make_id(3, 0), 0)

    g = Stream()
    for i in range(1, 4):
        g.append(make_id(i, 0), [b"f", b"v"])
    high, low = ConsumerGroup(make_id(3, 0), 3), ConsumerGroup(make_id(1, 0), 1)
    g.groups = {b"high": high, b"low": low}
    g.set_id(make_id(9, 0), entries_added=5)  # raised: no group touched
    assert (high.entries_read, low.entries_read) == (3, 1)
    g.set_id(make_id(9, 0), entries_added=3)  # lowered to 3: 3 stays 3
    assert (high.entries_read, low.entries_read, g.max_deleted_entry_id) == (3, 1, 0)
    high.entries_read = 5
    g.set_id(make_id(9, 0), entries_added=3)  # equal: not lowered, a counter past it stays (redis#15489)
    assert high.entries_read == 5
    g.set_id(make_id(9, 0), entries_added=4)
    g.set_id(make_id(9, 0), entries_added=3)
    assert (high.entries_read, low.entries_read) == (3, 1)


def test_last_valid_id_of_an_empty_stream_is_zero():
    s = Stream()
    assert s.last_valid_id() == 0
    s.append(make_id(7, 1), [b"f", b"v"])
    assert s.last_valid_id() == make_id(7, 1)
    s.delete([make_id(7, 1)])
    assert s.last_valid_id() == 0 and s.last_id == make_id(7, 1)


# -- a random workload through dump and load -----------------------------------------------


def model_entries(s: Stream) -> list[tuple[int, list[bytes]]]:
    return s.range(0, (1 << 128) - 1)


def test_dump_load_round_trip_over_random_workloads():
    """dump()/load() and what a loaded stream then does: every entry, counter and node boundary kept, so a
    restart from a snapshot trims, splits and reads exactly like the stream it saved."""
    rng = random.Random(2027)
    for _ in range(25):
        s = Stream()
        max_entries, max_bytes = rng.choice([(3, 4096), (100, 200), (5, 0), (100, 4096)])
        model: list[tuple[int, list[bytes]]] = []
        ms = 1
        for _ in range(rng.randint(0, 120)):
            op = rng.random()
            if op < 0.7:
                ms += rng.randint(0, 2)
                seq = 0 if not model or (model[-1][0] >> 64) != ms else (model[-1][0] & ((1 << 64) - 1)) + 1
                entry_id = max(make_id(ms, seq), s.last_id + 1)
                flat = rng.choice([[b"f", b"%d" % rng.randint(-300, 70000)], [b"name", b"x" * rng.randint(0, 90), b"n", b"7"]])
                s.append(entry_id, flat, max_entries, max_bytes)
                model.append((entry_id, flat))
            elif op < 0.85 and model:
                victims = rng.sample([e for e, _ in model], k=min(len(model), rng.randint(1, 3)))
                s.delete(victims)
                model = [(e, f) for e, f in model if e not in victims]
            elif model:
                keep = rng.randint(0, len(model))
                s.trim(maxlen=keep)
                model = model[len(model) - keep :]
            assert model_entries(s) == model
        loaded = Stream.load(msgpack.unpackb(msgpack.packb(s.dump()), raw=False))
        assert loaded.dump() == s.dump()
        assert model_entries(loaded) == model
        assert (len(loaded), loaded.first_id, loaded.last_id, loaded.entries_added, loaded.max_deleted_entry_id) == (
            len(s), s.first_id, s.last_id, s.entries_added, s.max_deleted_entry_id)
        assert loaded.range(0, (1 << 128) - 1, rev=True, count=3) == model[::-1][:3]
        after = s.last_id + 1
        for twin in (s, loaded):
            twin.append(after, [b"f", b"after"], max_entries, max_bytes)
            twin.trim(maxlen=max(0, len(twin) - 7), approx=True)
        assert loaded.dump() == s.dump()


# -- node layout: where a listpack fills up, as Redis's streamAppendItem decides -------------------


def int_element(value: int) -> int:
    """A listpack integer element, back-length included (values are int64: a uint64 difference wraps)."""
    value &= (1 << 64) - 1
    if value >= 1 << 63:
        value -= 1 << 64
    return lp_element_size(b"%d" % value)


class ModelNode:
    def __init__(self, master_id: int, fields: tuple[bytes, ...]) -> None:
        self.master_id, self.fields = master_id, fields
        self.entries: list[list] = []  # [id, flat, deleted] for every entry ever appended, tombstones kept
        self.count = self.deleted = 0

    def lp_bytes(self) -> int:
        """The whole listpack: header and end (7), master entry (count, deleted, field count, the
        fields, a 0 terminator), then each entry (flags, ms and seq differences to the master ID, the
        values alone when its fields are the master's, else the field count and every field and value,
        and its element count: fields + 3, or 2 * fields + 4)."""
        size = 7 + int_element(self.count) + int_element(self.deleted) + int_element(len(self.fields)) + int_element(0)
        size += sum(lp_element_size(name) for name in self.fields)
        master_ms, master_seq = self.master_id >> 64, self.master_id & ((1 << 64) - 1)
        for entry_id, flat, _deleted in self.entries:
            names = tuple(flat[0::2])
            size += int_element(2) + int_element((entry_id >> 64) - master_ms) + int_element((entry_id & ((1 << 64) - 1)) - master_seq)
            if names == self.fields:
                size += sum(lp_element_size(v) for v in flat[1::2]) + int_element(len(names) + 3)
            else:
                size += int_element(len(names)) + sum(lp_element_size(item) for item in flat) + int_element(2 * len(names) + 4)
        return size


class ModelStream:
    """Nodes as streamAppendItem and streamTrim shape them, sized from scratch after every change."""

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.nodes: list[ModelNode] = []

    def __len__(self) -> int:
        return sum(node.count for node in self.nodes)

    def live(self) -> list[int]:
        return [e[0] for node in self.nodes for e in node.entries if not e[2]]

    def add(self, entry_id: int, flat: list[bytes]) -> None:
        tail = self.nodes[-1] if self.nodes else None
        if tail is not None:
            limit = self.max_bytes if 0 < self.max_bytes <= (1 << 30) else 1 << 30
            if limit < 1 << 29 and tail.lp_bytes() + sum(map(len, flat)) >= limit:  # (the tests' nodes stay far below 512 MB)
                tail = None
            elif self.max_entries and tail.count + tail.deleted >= self.max_entries:
                tail = None
        if tail is None:
            tail = ModelNode(entry_id, tuple(flat[0::2]))
            self.nodes.append(tail)
        tail.entries.append([entry_id, flat, False])
        tail.count += 1

    def _tombstone(self, node: ModelNode, entry: list) -> None:
        entry[2] = True
        node.count -= 1
        node.deleted += 1

    def delete(self, entry_id: int) -> None:
        for node in self.nodes:
            for entry in node.entries:
                if entry[0] == entry_id and not entry[2]:
                    self._tombstone(node, entry)
                    if node.count == 0:
                        self.nodes.remove(node)
                    return

    def trim(self, maxlen: int | None, minid: int | None, approx: bool, limit: int) -> None:
        removed = 0
        while self.nodes:
            if maxlen is not None and len(self) <= maxlen:
                break
            node = self.nodes[0]
            if limit and removed + node.count > limit:
                break
            whole = len(self) - node.count >= maxlen if maxlen is not None else node.entries[-1][0] < minid
            if whole:
                removed += node.count
                self.nodes.pop(0)
                continue
            if not approx:
                for entry in node.entries:
                    if entry[2]:
                        continue
                    if (len(self) <= maxlen) if maxlen is not None else entry[0] >= minid:
                        break
                    self._tombstone(node, entry)
            break


def test_node_layout_matches_redis_listpack_sizes_over_random_workloads():
    """add()'s fast path, append(), _open_node, _count_tombstones and trims against listpack sizes worked
    out from scratch: a node that fills one entry early or late changes what `XTRIM ~` and LIMIT remove,
    what XINFO reports, and where a replica's or a reloaded stream's nodes split."""
    rng = random.Random(1207)
    field_sets = [(b"f",), (b"temperature", b"humidity"), (b"a", b"b", b"c")]
    for round_ in range(25):
        max_entries, max_bytes = rng.choice([(100, 4096), (3, 4096), (0, 300), (1000, 1 << 20), (200, 0), (100, 700)])
        s, model = Stream(), ModelStream(max_entries, max_bytes)
        now = rng.choice([1, 1_700_000_000_000])
        for _ in range(rng.randint(1, 400)):
            op = rng.random()
            if op < 0.8:
                names = field_sets[0] if rng.random() < 0.6 else rng.choice(field_sets)
                value = rng.choice([b"%d" % rng.choice([0, 5, 127, 128, -1, 4095, 4096, 70000, 1 << 40]), b"x" * rng.choice([1, 10, 63, 64, 130]), b"007"])
                flat = [item for name in names for item in (name, value)]
                how = rng.random()
                if how < 0.4:
                    now += rng.choice([0, 0, 1, 200])
                    text = s.add(now, flat, max_entries, max_bytes)
                    ms, seq = map(int, text.split(b"-") if isinstance(text, bytes) else text.split("-"))
                    entry_id = make_id(ms, seq)
                else:
                    last = s.last_id
                    step = rng.choice([1, 1, 2, 130, 5000, 1 << 64, 200 << 64, 70000 << 64])
                    entry_id = last + step
                    if how < 0.7:
                        s.add_id(entry_id >> 64, entry_id & ((1 << 64) - 1), flat, max_entries, max_bytes)
                    else:
                        s.append(entry_id, flat, max_entries, max_bytes)
                    now = max(now, entry_id >> 64)
                model.add(entry_id, flat)
            elif op < 0.9 and len(model):
                victim = rng.choice(model.live())
                s.delete([victim])
                model.delete(victim)
            elif len(model):
                approx, limit = rng.random() < 0.5, rng.choice([0, 0, 1, 3, 100])
                if rng.random() < 0.5:
                    maxlen = rng.randint(0, len(model))
                    s.trim(maxlen=maxlen, approx=approx, limit=limit)
                    model.trim(maxlen, None, approx, limit)
                else:
                    live = model.live()
                    minid = rng.choice(live) + rng.choice([0, 1])
                    s.trim(minid=minid, approx=approx, limit=limit)
                    model.trim(None, minid, approx, limit)
            assert s.keys == [node.master_id for node in model.nodes], round_
            assert [(n.count, n.deleted, n.lp_bytes) for n in s.nodes] == [(n.count, n.deleted, n.lp_bytes()) for n in model.nodes], round_
            assert [e for e, _ in s.range(0, (1 << 128) - 1)] == model.live()


def replay(model: ModelStream, s: Stream, how: str, entry_id: int, flat: list[bytes]) -> None:
    if how == "add":
        s.add(entry_id >> 64, flat, model.max_entries, model.max_bytes)  # a clock at the ID's ms
        assert s.last_id == entry_id
    elif how == "add_id":
        s.add_id(entry_id >> 64, entry_id & ((1 << 64) - 1), flat, model.max_entries, model.max_bytes)
    else:
        s.append(entry_id, flat, model.max_entries, model.max_bytes)
    model.add(entry_id, flat)


def same_layout(s: Stream, model: ModelStream) -> bool:
    return s.keys == [n.master_id for n in model.nodes] and [(n.count, n.deleted, n.lp_bytes) for n in s.nodes] == [
        (n.count, n.deleted, n.lp_bytes()) for n in model.nodes
    ]


@pytest.mark.parametrize("one_ms", [False, True])
@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_counts_crossing_listpack_integer_widths(how, one_ms):
    """A node's count and deleted counters grow a byte at 128 and 4096 entries (`_COUNT_STEPS`, the
    fast path's `count >= 127`, _count_tombstones), and so does an entry's seq difference to the master
    ID at 128 and 4096 (all in one millisecond; the fast path's `entry_id - master <= 127`): the node
    then fills at Redis's entry."""
    model = ModelStream(100_000, 1 << 30)  # (an entry limit: stream-node-max-entries 0 never takes add()'s fast path)
    s = Stream()
    checkpoints = {1, 126, 127, 128, 129, 130, 4094, 4095, 4096, 4097, 4098, 4200}
    for i in range(4200):
        replay(model, s, how, make_id(1, i) if one_ms else make_id(1 + i // 3, i % 3), [b"f", b"v"])
        if i + 1 in checkpoints:
            assert same_layout(s, model), i
    victims = model.live()[5:140]
    for n, victim in enumerate(victims):
        s.delete([victim])
        model.delete(victim)
        if n in (0, 125, 126, 127, 128, len(victims) - 1):
            assert same_layout(s, model), n
    s.trim(maxlen=len(model) - 100)
    model.trim(len(model) - 100, None, False, 0)
    assert same_layout(s, model)


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_entries_with_many_fields_count_their_elements(how):
    """An entry's element count (fields + 3 for the master's fields, 2 * fields + 4 otherwise) takes two
    bytes from 128 on: entries of 124..126 fields, and 61..63 fields that differ from the master's."""
    for width in (61, 62, 63, 124, 125, 126):
        model, s = ModelStream(100, 1 << 20), Stream()
        names = [b"f%d" % i for i in range(width)]
        flat = [item for name in names for item in (name, b"v")]
        other = [item for name in names for item in (b"g" + name, b"v")]
        for i in range(4):
            replay(model, s, how, make_id(1, i), flat if i % 2 == 0 else other)
            assert same_layout(s, model), (width, i)


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_node_splits_exactly_when_the_listpack_would_reach_max_bytes(how):
    """`size + total < max_bytes` (the fast path) and `lp_bytes + total >= limit` (append): with
    stream-node-max-bytes equal to the size the next entry would bring the node to, a new node starts;
    one byte more and it does not."""
    rng = random.Random(300)
    for _ in range(30):
        value = b"x" * rng.randint(1, 40)  # repeated, as producers do: add() then takes its fast path
        entries = [(make_id(5, i), [b"f", value if rng.random() < 0.8 else b"y"]) for i in range(rng.randint(1, 6))]
        probe = ModelStream(0, 1 << 30)
        for entry_id, flat in entries[:-1]:
            probe.add(entry_id, flat)
        entry_id, flat = entries[-1]
        threshold = probe.nodes[0].lp_bytes() + sum(map(len, flat)) if probe.nodes else None
        if threshold is None:
            continue
        for max_bytes, nodes in ((threshold, 2), (threshold + 1, 1)):
            model, s = ModelStream(100, max_bytes), Stream()
            for entry_id, flat in entries:
                replay(model, s, how, entry_id, flat)
            assert len(s.nodes) == len(model.nodes) == nodes
            assert same_layout(s, model)


# -- defaults and the end of the ID space -------------------------------------------------------


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_default_node_limits_are_redis_defaults(how):
    """add()/add_id()/append() without limits use stream-node-max-entries 100 and stream-node-max-bytes
    4096, Redis's defaults (`= 100` -> 101, `= 4096` -> 4097 went unnoticed)."""
    s = Stream()
    for i in range(101):
        if how == "add":
            s.add(1, [b"f", b"v"])
        elif how == "add_id":
            s.add_id(1, i, [b"f", b"v"])
        else:
            s.append(make_id(1, i), [b"f", b"v"])
    assert [n.count for n in s.nodes] == [100, 1]
    probe = ModelStream(0, 1 << 30)
    first = [b"f", b"x" * 1000]
    for i in range(3):
        probe.add(make_id(1, i), first)
    last = [b"f", b"y" * (4096 - probe.nodes[0].lp_bytes() - 1)]  # lp_bytes + fields and values == 4096
    s = Stream()
    for i, flat in enumerate([first, first, first, last]):
        if how == "add":
            s.add(1, flat)
        elif how == "add_id":
            s.add_id(1, i, flat)
        else:
            s.append(make_id(1, i), flat)
    assert [n.count for n in s.nodes] == [3, 1]  # the fourth entry would bring the listpack to 4096 bytes


def test_add_reaches_the_last_millisecond_and_then_is_exhausted():
    """add()'s `ms > U64_MAX` (-> `>=`) and its EXHAUSTED error: the ID after ms-18446744073709551615 is
    (ms+1)-0 up to the very last millisecond; only after 18446744073709551615-18446744073709551615 nothing."""
    top = (1 << 64) - 1
    s = Stream()
    s.append(make_id(top - 1, top), [b"f", b"v"])
    s.add(5, [b"f", b"w"])  # a clock far behind: the next ID after the last one
    assert s.last_id == make_id(top, 0)
    s.append(make_id(top, top), [b"f", b"v"])
    with pytest.raises(ReplyError) as error:
        s.add(5, [b"f", b"x"])
    assert str(error.value) == "ERR The stream has exhausted the last possible ID, unable to add more items"
    with pytest.raises(ReplyError) as error:
        s.add_id(top, top, [b"f", b"x"])
    assert str(error.value) == "ERR The stream has exhausted the last possible ID, unable to add more items"
    assert len(s) == 3


# -- XDEL and trims: counters, replies and the live ranks -------------------------------------------


def test_delete_and_trim_keep_counters_replies_and_ranks():
    """delete()'s `continue` (-> break: XDEL skipped the IDs after one before the stream), its per-call
    `dirty` lists (over more sealed nodes than the decode cache holds, an entry came back), first_id after
    deleting the first entry alone or all but one, trim()'s reply (`deleted += k`), and the rank hooks
    (delete/trim telling storage/rank.py which node changed): lag and retention counts went wrong."""
    from storage.rank import count_live

    rng = random.Random(31)
    for round_ in range(30):
        s, live = Stream(), []
        max_entries = rng.choice([2, 3, 5])
        for i in range(rng.randint(20, 120)):
            entry_id = make_id(10 + i, rng.randint(0, 2))
            s.append(entry_id, [b"f", b"%d" % i], max_entries, 4096)
            live.append(entry_id)
        count_live(s, 0)  # builds the rank structure: from here on delete() and trim() must keep it current
        max_deleted = 0
        for _ in range(25):
            if not live:
                break
            op = rng.random()
            if op < 0.5:
                asked = [make_id(1, 0)] if rng.random() < 0.3 else []  # before the first node
                asked += rng.sample(live, k=min(len(live), rng.randint(1, 25)))
                asked += [live[0]] if rng.random() < 0.3 else []  # the first entry (maybe twice)
                asked += [make_id(10 + rng.randint(0, 130), 7)]  # an ID that never existed
                removed = s.delete(asked)
                want = []
                for entry_id in asked:
                    if entry_id in live:
                        live.remove(entry_id)
                        want.append(entry_id)
                        max_deleted = max(max_deleted, entry_id)
                assert removed == want, round_
            elif op < 0.65:
                s.delete([live[0]])  # the first entry alone
                max_deleted = max(max_deleted, live.pop(0))
            elif op < 0.75 and len(live) > 1:
                victims = live[:-1]  # all but the last: first_id is the survivor
                assert s.delete(victims) == victims
                max_deleted = max(max_deleted, *victims)
                live = live[-1:]
            else:
                if rng.random() < 0.5:
                    maxlen = rng.randint(0, len(live))
                    before = len(live)
                    got = s.trim(maxlen=maxlen)
                    assert got == before - maxlen
                    live = live[len(live) - maxlen :]
                else:
                    minid = rng.choice(live)
                    got = s.trim(minid=minid)
                    assert got == sum(1 for e in live if e < minid)
                    live = [e for e in live if e >= minid]
            assert len(s) == len(live)
            assert s.first_id == (live[0] if live else 0)
            assert s.max_deleted_entry_id == max_deleted
            assert [e for e, _ in s.range(0, (1 << 128) - 1)] == live
            for _ in range(4):
                a, b = sorted(rng.choice([0, *live, make_id(10 + rng.randint(0, 130), 1)]) for _ in range(2))
                assert count_live(s, a, b) == sum(1 for e in live if a <= e <= b), (round_, a, b)


def test_dump_writes_every_id_as_16_bytes():
    """_id16's width: snapshots keep IDs as 16 big-endian bytes, which other versions read back."""
    s = Stream()
    for i in range(7):
        s.append(make_id(1 << 40, i), [b"f", b"v"], 3, 4096)
    s.delete([make_id(1 << 40, 2)])
    length, last_id, first_id, max_deleted, _added, nodes = s.dump()
    assert [len(x) for x in (last_id, first_id, max_deleted)] == [16, 16, 16]
    assert last_id == make_id(1 << 40, 6).to_bytes(16, "big") and max_deleted == make_id(1 << 40, 2).to_bytes(16, "big")
    assert all(len(node[0]) == 16 and len(node[6]) == 16 for node in nodes)


def test_delete_across_more_sealed_nodes_than_the_decode_cache_holds():
    """delete()'s `dirty.get(node)` (-> a lookup that misses): one XDEL over more sealed nodes than the
    decode cache keeps went back to a node's stale packed bytes, and an entry it had deleted came back."""
    s = Stream()
    for i in range(3 * 40):
        s.append(make_id(1 + i // 3, i % 3), [b"f", b"%d" % i], 3, 4096)
    asked = [make_id(1 + n, 0) for n in range(40)] + [make_id(1, 1)]
    assert s.delete(asked) == asked
    want = [make_id(1, 2)] + [make_id(1 + n, seq) for n in range(1, 40) for seq in (1, 2)]
    assert [e for e, _ in s.range(0, (1 << 128) - 1)] == want and len(s) == len(want)
    assert [e for e, _ in Stream.load(s.dump()).range(0, (1 << 128) - 1)] == want


# -- reading ranges and sealing nodes at their boundaries ------------------------------------------


def test_ranges_with_bounds_on_entry_and_node_ids_match_the_model():
    """spans(): `start > end` (-> `>=`: XRANGE key id id answered nothing) and `master_id > end` (-> `>=`:
    a range ending at a node's first entry lost it), forwards and backwards, with and without COUNT."""
    rng = random.Random(77)
    for _ in range(40):
        s, model = Stream(), []
        for i in range(rng.randint(1, 60)):
            entry_id = make_id(100 + i // 2, i % 2)
            s.append(entry_id, [b"f", b"%d" % i], rng.choice([1, 2, 3, 100]), 4096)
            model.append(entry_id)
        for victim in rng.sample(model, k=rng.randint(0, len(model) // 3)):
            s.delete([victim])
            model.remove(victim)
        bounds = [0, *s.keys, *model, *(e + 1 for e in model), *(e - 1 for e in model), (1 << 128) - 1]
        for _ in range(30):
            start, end = rng.choice(bounds), rng.choice(bounds)
            if rng.random() < 0.3:
                end = start
            count = rng.choice([None, 1, 2, 3, 50])
            want = [e for e in model if start <= e <= end]
            forward = [e for e, _ in s.range(start, end, count)]
            backward = [e for e, _ in s.range(start, end, count, rev=True)]
            assert forward == want[:count] if count else forward == want, (start, end, count)
            assert backward == want[::-1][:count] if count else backward == want[::-1], (start, end, count)


def test_sealed_nodes_at_the_edges_of_the_table_and_fixint():
    """_pack_ids_by_ms's limits: a millisecond step of exactly 128 (not a fixint), a seq run reaching 65536
    (past the table) and the per-millisecond test `(last_ms - first_ms) * 4 < n`: the bytes stay msgpack's."""
    from storage.stream import Node, _pack, _unpack

    cases = []
    for step in (127, 128, 129):
        cases.append([make_id(1000 + step * (i // 300), i % 300) for i in range(600)])  # two ms, `step` apart
        cases.append([make_id(1000 + step, i) for i in range(600)])  # master 1000: the first delta is `step`
    for top in (65534, 65535, 65536, 65537):
        cases.append([make_id(7, seq) for seq in range(top - 20, top + 1)])
    for spread in (1, 2, 3):
        cases.append([make_id(50 + spread * (i % 2), i) for i in range(4 * spread)])  # (last-first)*4 == n
    for ids in cases:
        ids = sorted(ids)
        node = Node(make_id(1000, 0) if ids[0] >> 64 >= 1000 else ids[0], (b"f",))
        rows = [[b"v"]] * len(ids)
        ms_parts = [entry_id >> 64 for entry_id in ids]
        deltas = [b - a for a, b in zip([node.master_id >> 64, *ms_parts], ms_parts, strict=False)]
        seqs = [entry_id & ((1 << 64) - 1) for entry_id in ids]
        node.packed = _pack(node, ids, rows)
        assert node.packed == msgpack.packb((deltas, seqs, rows)), (ids[0], ids[-1], len(ids))
        assert _unpack(node) == (ids, rows)


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_ms_differences_crossing_integer_widths(how):
    """The fast path's millisecond difference to the master ID (`0 <= ms_diff <= 127`, then the 13-bit and
    wider sizes), at each width's edge: an entry 128 ms after its node's first took one byte too few."""
    for gap in (1, 126, 127, 128, 129, 4095, 4096, 4097, 32767, 32768, 1 << 23, 1 << 31, 1 << 40):
        model, s = ModelStream(100, 1 << 20), Stream()
        for ms in (1000, 1000, 1000 + gap, 1000 + gap, 1000 + 2 * gap):
            entry_id = s.last_id + 1 if s.last_id >> 64 == ms else make_id(ms, 0)
            replay(model, s, how, entry_id, [b"f", b"v"])
        assert same_layout(s, model), gap


def empty_a_node(s: Stream, model: ModelStream, how: str, ids: list[int], victim: int) -> None:
    """Entries ids, then victim (the last of its node) deleted and MINID at it: that node keeps tombstones
    only (its last ID is not below MINID, so it does not go whole; its live entries all are)."""
    for entry_id in ids:
        replay(model, s, how, entry_id, [b"f", b"v"])
    s.delete([victim])
    model.delete(victim)
    s.trim(minid=victim)
    model.trim(None, victim, False, 0)


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_a_sealed_node_left_empty_by_an_exact_trim(how):
    """_pack's empty case (`pack(([], [], rows))` -> pack(None): every later read of the node broke)."""
    s, model = Stream(), ModelStream(3, 4096)
    empty_a_node(s, model, how, [make_id(1, i) for i in range(4)], make_id(1, 2))
    assert len(s) == 1 and s.nodes[0].count == 0 and s.nodes[0].packed is not None
    assert same_layout(s, model)
    assert s.range(0, (1 << 128) - 1) == [(make_id(1, 3), [b"f", b"v"])] and s.first_id == make_id(1, 3)
    loaded = Stream.load(msgpack.unpackb(msgpack.packb(s.dump()), raw=False))
    assert loaded.range(0, (1 << 128) - 1) == s.range(0, (1 << 128) - 1) and loaded.dump() == s.dump()


@pytest.mark.parametrize("how", ["add", "add_id", "append"])
def test_first_entry_into_an_emptied_open_node(how):
    """add()'s fast path into an open node that holds only tombstones (`first_id = entry_id` -> None)."""
    s, model = Stream(), ModelStream(100, 4096)
    empty_a_node(s, model, how, [make_id(1, i) for i in range(3)], make_id(1, 2))
    assert len(s) == 0 and len(s.nodes) == 1 and s.first_id == 0
    replay(model, s, how, make_id(1, 3), [b"f", b"v"])
    assert s.first_id == make_id(1, 3) and len(s) == 1 and same_layout(s, model)
    assert s.range(0, (1 << 128) - 1) == [(make_id(1, 3), [b"f", b"v"])]
