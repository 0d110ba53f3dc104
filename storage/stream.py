"""The stream data type: entries in nodes, like Redis's radix tree of listpacks.

A stream is a sorted list of nodes plus a parallel list of their keys (the ID
of the first entry ever inserted into the node, Redis's "master ID"), searched
with bisect. The last node is open (plain Python lists, cheap to append to);
every other node is sealed: its IDs and values are packed with msgpack, field
names stored once per node (Redis's master entry) and only the values kept
for entries with the same fields. Sealed nodes are unpacked on demand into a
small LRU cache.

Node boundaries follow Redis exactly, because approximate trimming (`~`) and
LIMIT remove only whole nodes and users see the resulting lengths: a new node
starts when the tail holds `stream-node-max-entries` entries (live plus
deleted) or when its listpack would reach `stream-node-max-bytes`. To decide
the latter the node keeps `lp_bytes`, the size the same entries take in a
Redis listpack (computed from listpack's encoding rules, see `_str_size`).
Deleted entries are removed from the node's lists, but counted in `deleted`
as Redis counts its tombstones, and `last_id` keeps the ID of the last entry
ever appended (a tombstone still bounds the node in Redis).

Counters have Redis 7's meanings: `entries_added` counts every entry ever
added, `max_deleted_entry_id` is the largest ID removed by XDEL (trimming does
not change it), `first_id` is the first live entry's ID (0 when empty).
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from itertools import accumulate, chain, compress, repeat
from operator import and_, rshift, sub

import msgpack

from protocol.errors import ReplyError

from .stream_id import MAX_ID, SEQ_MASK, U64_MAX, format_ms_seq

LISTPACK_MAX_SIZE = 1 << 30  # STREAM_LISTPACK_MAX_SIZE
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1

EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ID_TOO_SMALL = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
TOO_LARGE = "ERR Elements are too large to be stored"


# -- listpack sizes --------------------------------------------------------


def _int_size(value: int) -> int:
    """Bytes of an integer element in a listpack, backlen included."""
    if 0 <= value <= 127:
        return 2
    if -4096 <= value <= 4095:
        return 3
    if -32768 <= value <= 32767:
        return 4
    if -8388608 <= value <= 8388607:
        return 5
    if -2147483648 <= value <= 2147483647:
        return 6
    return 10


def _str_size(text: bytes) -> int:
    """Bytes of a string element in a listpack: integers are stored as integers."""
    n = len(text)
    if n <= 20 and n and (text.isdigit() or (text[0] == 45 and text[1:].isdigit())):
        if n == 1 or (text[0] != 48 and text[:2] != b"-0"):
            value = int(text)
            if _I64_MIN <= value <= _I64_MAX:
                return _int_size(value)
    if n < 64:
        enc = 1 + n
    elif n < 4096:
        enc = 2 + n
    else:
        enc = 5 + n
    if enc <= 127:
        return enc + 1
    if enc < 16383:
        return enc + 2
    if enc < 2097151:
        return enc + 3
    if enc < 268435455:
        return enc + 4
    return enc + 5


_STR_SIZES: dict[bytes, int] = {}  # memo of _str_size for the values streams repeat
_COUNT_STEPS = {127: 1, 4095: 1, 32767: 1, 8388607: 1, 2147483647: 4}  # count -> growth of its element at count+1

# Streams repeat their field/value lists (XADD's benchmarks and most producers do):
# flat -> (total length, field names, listpack size of the entry as a same-fields
# entry with both ID deltas under 128, its row, the size of a new node holding just
# this entry, the entry excepted). Only short lists: the key is hashed on every
# append. Entries with the same values share one row list: rows are never changed
# in place (entries are removed whole), and sizes are counted per entry all the same.
_ROWS: dict[tuple[bytes, ...], tuple[int, tuple[bytes, ...], int, list[bytes], int]] = {}
_ROWS_MAX = 1024
# add()'s last hit in _ROWS, [flat, what _ROWS holds for it]: comparing the list with the
# last one is cheaper than hashing a tuple of fresh bytes, and producers repeat theirs.
_LAST_ROW: tuple = (None, None)
_ROWS_MAX_TOTAL = 256
# Entries of more items than this never go in _ROWS (only hundreds of empty strings could stay
# under _ROWS_MAX_TOTAL), so a wide entry is never copied into a tuple and hashed for a look-up.
_ROWS_MAX_ITEMS = 2 * _ROWS_MAX_TOTAL
_WIDE = 64  # items from which sizes are summed in passes over the whole list (`_strs_size`)


def _str_size_cached(text: bytes) -> int:
    size = _STR_SIZES.get(text)
    if size is None:
        size = _str_size(text)
        if len(text) <= 32:
            if len(_STR_SIZES) >= 2048:
                _STR_SIZES.clear()
            _STR_SIZES[text] = size
    return size


def _strs_size(items: list[bytes]) -> int:
    """Sum of _str_size over items, for wide entries: C-level passes over lengths and digits instead
    of a call per item (XADD's million-field entry). Every string under 64 bytes takes 2 bytes more
    than its length, unless it is stored as an integer: the digit pass picks the candidates (a superset:
    `--5`, `007`), which _str_size then sizes alone."""
    lengths = list(map(len, items))
    if not lengths or max(lengths) >= 64:
        return sum(map(_str_size, items))
    size = sum(lengths) + 2 * len(lengths)
    for item in compress(items, map(bytes.isdigit, map(bytes.lstrip, items, repeat(b"-")))):  # integer candidates
        size += _str_size(item) - len(item) - 2
    return size


def _i64(value: int) -> int:
    """An unsigned 64-bit difference as the signed value listpack stores."""
    value &= U64_MAX
    return value - (1 << 64) if value > _I64_MAX else value


# -- nodes -----------------------------------------------------------------


class Node:
    """One macro node: Redis's listpack keyed by its master ID in the radix tree."""

    __slots__ = ("master_id", "fields", "ids", "rows", "packed", "count", "deleted", "lp_bytes", "last_id")

    def __init__(self, master_id: int, fields: tuple[bytes, ...]) -> None:
        self.master_id = master_id
        self.fields = fields  # the master entry's field names
        self.ids: list[int] | None = []  # open node: live entry IDs
        self.rows: list[list] | None = []  # open node: values, or [None, f1, v1, ...]
        self.packed: bytes | None = None  # sealed node
        self.count = 0  # live entries
        self.deleted = 0  # tombstones, as Redis counts them
        self.lp_bytes = 0  # the size of the same data as a Redis listpack
        self.last_id = master_id  # last entry ever appended, tombstone or not


_PACKER = msgpack.Packer(use_bin_type=True)  # msgpack.packb's, made once


def _pack(node: Node, ids: list[int], rows: list[list]) -> bytes:
    """ms parts as deltas from the previous entry (the first from the master ID), seqs as they are, rows.

    The bytes msgpack makes of the tuple (deltas, seqs, rows), built with fewer
    operations on the 128-bit IDs (`_pack_ids_by_ms`), and a node whose entries
    share one row (the usual case, see `_ROWS`) packs that row once.
    """
    n = len(ids)
    if not n:
        return _PACKER.pack(([], [], rows))
    master_ms = node.master_id >> 64
    first_ms = ids[0] >> 64
    last_ms = ids[-1] >> 64
    packed_ids = _pack_ids_by_ms(ids, first_ms, last_ms, master_ms) if (last_ms - first_ms) * 4 < n else None
    if packed_ids is None:
        ms_parts = list(map(rshift, ids, repeat(64, n)))
        deltas = list(map(sub, ms_parts, chain((master_ms,), ms_parts)))
        seqs = list(map(and_, ids, repeat(SEQ_MASK, n)))
        packed_ids = _pack_uints(deltas) + _pack_uints(seqs)
    row = rows[-1]
    if rows.count(row) == n:  # identity first: cheap when the rows are one object
        packed_rows = _PACKER.pack_array_header(n) + _PACKER.pack(row) * n
    else:
        packed_rows = _PACKER.pack(rows)
    return b"\x93" + packed_ids + packed_rows  # 0x93: an array of three


def _pack_ids_by_ms(ids: list[int], ms: int, last_ms: int, master_ms: int) -> bytes | None:
    """The packed deltas and seqs of IDs spread over few milliseconds, worked out per millisecond:
    the deltas are zero but the first, the seqs usually one run of consecutive numbers, a slice of
    `_UINTS`. None when some ms gap or seq run does not fit that (the caller packs them one by one)."""
    n = len(ids)
    deltas = bytearray(n)  # fixint zeros
    seq_parts = []
    prev = master_ms
    lo = 0
    while True:
        base = ms << 64
        hi = n if ms == last_ms else bisect_left(ids, base + _ONE_MS, lo)
        delta = ms - prev
        first = ids[lo] - base
        last = ids[hi - 1] - base
        if delta >= 128 or last - first != hi - 1 - lo or last >= 65536:
            return None
        deltas[lo] = delta
        seq_parts.append(_UINTS[_uint_offset(first) : _uint_offset(last + 1)])
        if hi == n:
            break
        prev = ms
        lo = hi
        ms = ids[lo] >> 64
    header = _PACKER.pack_array_header(n)
    return header + deltas + header + b"".join(seq_parts)


def _uint_offset(value: int) -> int:
    """Where value's encoding starts in `_UINTS`: 128 one-byte ones, 128 of two bytes, then three."""
    return value if value < 128 else 2 * value - 128 if value < 256 else 3 * value - 384


def _uint_table() -> bytes:
    """msgpack's encodings of 0..65535 one after another: fixint, 0xcc and a byte, 0xcd and two (big-endian)."""
    wide = array("H", range(256, 65536))
    if sys.byteorder == "little":
        wide.byteswap()
    raw = wide.tobytes()
    out = bytearray(b"\xcd" * (3 * len(wide)))
    out[1::3] = raw[0::2]
    out[2::3] = raw[1::2]
    mid = bytearray(b"\xcc" * 256)
    mid[1::2] = range(128, 256)
    return bytes(range(128)) + mid + out


_UINTS = _uint_table()  # 196 KB
_ONE_MS = 1 << 64


def _pack_uints(values: list[int]) -> bytes:
    """msgpack's bytes for a non-empty list of non-negative ints; all under 128 are one byte each (fixint)."""
    if max(values) < 128:
        return _PACKER.pack_array_header(len(values)) + bytes(values)
    return _PACKER.pack(values)


def _unpack(node: Node) -> tuple[list[int], list[list]]:
    deltas, seqs, rows = msgpack.unpackb(node.packed, raw=False)
    ms_parts = accumulate(deltas, initial=node.master_id >> 64)
    next(ms_parts)
    return [(ms << 64) | seq for ms, seq in zip(ms_parts, seqs, strict=True)], rows


_DECODED: OrderedDict[Node, tuple[list[int], list[list]]] = OrderedDict()
_DECODED_MAX = 16  # a decoded node costs ~20 KB of Python objects: keep few


def _decoded(node: Node) -> tuple[list[int], list[list]]:
    """The node's (ids, rows), unpacking a sealed node through the LRU cache."""
    ids = node.ids
    if ids is not None:
        return ids, node.rows
    cached = _DECODED.get(node)
    if cached is not None:
        _DECODED.move_to_end(node)
        return cached
    cached = _unpack(node)
    _DECODED[node] = cached
    if len(_DECODED) > _DECODED_MAX:
        _DECODED.popitem(last=False)
    return cached


_MS_SEQS: OrderedDict[Node, tuple[bytes, list[int], list[int]]] = OrderedDict()
_MS_SEQS_MAX = 64  # two lists of small ints a node: what counting (storage/rank.py) reads


def _ms_seqs(node: Node) -> tuple[list[int], list[int]]:
    """A sealed node's ms parts and seqs, without its rows or 128-bit IDs (building those is most of
    _unpack's cost); cached while the node's `packed` is the same bytes object (every change replaces it)."""
    packed = node.packed
    cached = _MS_SEQS.get(node)
    if cached is not None and cached[0] is packed:
        _MS_SEQS.move_to_end(node)
        return cached[1], cached[2]
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(packed)
    unpacker.read_array_header()  # (deltas, seqs, rows): stop before the rows
    deltas, seqs = unpacker.unpack(), unpacker.unpack()
    ms_parts = list(accumulate(deltas, initial=node.master_id >> 64))
    del ms_parts[0]
    _MS_SEQS[node] = (packed, ms_parts, seqs)
    if len(_MS_SEQS) > _MS_SEQS_MAX:
        _MS_SEQS.popitem(last=False)
    return ms_parts, seqs


def _expand(fields: tuple[bytes, ...], row: list) -> list[bytes]:
    """A row back to the flat [field, value, ...] list."""
    if row[0] is None:
        return row[1:]
    out = [None] * (2 * len(row))
    out[0::2] = fields
    out[1::2] = row
    return out


def expand_rows(fields: tuple[bytes, ...], rows: list[list]) -> list[list[bytes]]:
    """Rows of one node back to flat [field, value, ...] lists, in one call (the usual one or two fields inline)."""
    n = len(fields)
    if n == 2:
        f0, f1 = fields
        return [[f0, row[0], f1, row[1]] if row[0] is not None else row[1:] for row in rows]
    if n == 1:
        f0 = fields[0]
        return [[f0, row[0]] if row[0] is not None else row[1:] for row in rows]
    return [_expand(fields, row) for row in rows]


# -- the stream --------------------------------------------------------------


class Stream:
    """A Redis stream: nodes of entries plus Redis 7's counters."""

    TYPE = "stream"
    __slots__ = ("nodes", "keys", "length", "last_id", "first_id", "max_deleted_entry_id", "entries_added", "groups", "idmp", "_fields", "_rax", "rank", "retention", "__weakref__")

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.keys: list[int] = []  # nodes[i].master_id, for bisect
        self.length = 0
        self.last_id = 0
        self.first_id = 0
        self.max_deleted_entry_id = 0
        self.entries_added = 0
        self.groups: dict[bytes, object] = {}  # consumer groups, in creation order
        self.idmp = None  # storage.idmp.Idmp once the stream tracks iids (XADD IDMP, XCFGSET)
        self._fields: dict[tuple[bytes, ...], tuple[bytes, ...]] = {}  # interned master fields
        self._rax: tuple[int, int, int, int] | None = None  # (node count, first key, last key, radix-tree-nodes)
        self.rank = None  # storage/rank.py's LiveRank, built on first use; delete() and trim() keep it current
        self.retention = None  # storage.retention.Retention: a consumption-based policy and group roles, if any

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        return f"<Stream length={self.length} nodes={len(self.nodes)}>"

    # -- adding ------------------------------------------------------------

    def next_id(self, now_ms: int, ms: int | None = None, seq: int | None = None) -> int:
        """The ID XADD uses for `*` (ms None), `ms-*` (seq None) or `ms-seq`; Redis's errors."""
        last = self.last_id
        if last == MAX_ID:
            raise ReplyError(EXHAUSTED)
        if ms is None:
            new = now_ms << 64 if now_ms > last >> 64 else last + 1
        elif seq is None:
            if last >> 64 == ms:
                if last & SEQ_MASK == U64_MAX:
                    raise ReplyError(ID_TOO_SMALL)
                new = last + 1
            else:
                new = ms << 64
        else:
            new = (ms << 64) | seq
        if new <= last:
            raise ReplyError(ID_TOO_SMALL)
        return new

    def add(self, now_ms: int, flat: list[bytes], max_entries: int = 100, max_bytes: int = 4096) -> bytes:
        """XADD with `*`: append(next_id(now_ms), flat, ...) in one call; returns the new ID's text (format_id).

        The usual entry (open tail node with room, the master entry's fields,
        a field/value list seen before) takes a fast path: its listpack size,
        the ID deltas aside, comes from `_ROWS` (through `_LAST_ROW`) in one lookup (`_add_at`).
        """
        last = self.last_id
        ms = last >> 64
        if now_ms > ms:  # a clock in ms never reaches 2**64: last is not MAX_ID here
            ms = now_ms
            seq = 0
            entry_id = now_ms << 64
        else:
            entry_id = last + 1
            seq = entry_id & SEQ_MASK
            if not seq:
                ms += 1
                if ms > U64_MAX:  # last was MAX_ID
                    raise ReplyError(EXHAUSTED)
        return self._add_at(entry_id, ms, seq, flat, max_entries, max_bytes)

    def add_id(self, ms: int, seq: int, flat: list[bytes], max_entries: int = 100, max_bytes: int = 4096) -> bytes:
        """XADD with an explicit `ms-seq` (what a replica applies): append(next_id(now, ms, seq), flat, ...)
        through add()'s fast path; returns the ID's text (format_id). Redis's errors as next_id's."""
        last = self.last_id
        if last == MAX_ID:
            raise ReplyError(EXHAUSTED)
        entry_id = (ms << 64) | seq
        if entry_id <= last:
            raise ReplyError(ID_TOO_SMALL)
        return self._add_at(entry_id, ms, seq, flat, max_entries, max_bytes)

    def _add_at(self, entry_id: int, ms: int, seq: int, flat: list[bytes], max_entries: int, max_bytes: int) -> bytes:
        """Append entry_id (= ms-seq, above last_id): the usual entry in a few steps, any other through append()."""
        global _LAST_ROW
        last_flat, known = _LAST_ROW
        if flat != last_flat:
            known = _ROWS.get(tuple(flat)) if len(flat) <= _ROWS_MAX_ITEMS else None
            if known is not None:
                _LAST_ROW = (flat.copy(), known)
        if known is not None and (nodes := self.nodes):
            node = nodes[-1]
            ids = node.ids
            total, names, cost4, row, _head = known
            count = node.count
            size = node.lp_bytes
            # Room left (max_bytes <= 0, max_entries 0 or a huge max_bytes take the general path).
            if (
                ids is not None
                and size + total < max_bytes <= LISTPACK_MAX_SIZE
                and count + node.deleted < max_entries
                and (names is node.fields or names == node.fields)
            ):
                master = node.master_id
                if entry_id - master <= 127:  # both ID deltas fit in 7 bits (even across a ms boundary: seq wraps)
                    size += cost4
                else:  # cost4 counts 2 bytes per delta
                    ms_diff = ms - (master >> 64)
                    seq_diff = seq - (master & SEQ_MASK)
                    size += cost4 + (0 if 0 <= ms_diff <= 127 else _int_size(_i64(ms_diff)) - 2)
                    # (_i64 leaves a 13-bit difference as it is: _int_size inline)
                    size += 0 if 0 <= seq_diff <= 127 else 1 if -4096 <= seq_diff <= 4095 else _int_size(_i64(seq_diff)) - 2
                node.lp_bytes = size + _COUNT_STEPS.get(count, 0) if count >= 127 else size
                node.count = count + 1
                ids.append(entry_id)
                node.rows.append(row)
                node.last_id = entry_id
                length = self.length
                self.length = length + 1
                self.entries_added += 1
                self.last_id = entry_id
                if not length:
                    self.first_id = entry_id
                return format_ms_seq(ms, seq)
            limit = max_bytes if 0 < max_bytes <= LISTPACK_MAX_SIZE else LISTPACK_MAX_SIZE
            if size + total >= limit or (max_entries and count + node.deleted >= max_entries):  # full, as append decides
                self._seal(node)
                self._open_node(entry_id, known)
                return format_ms_seq(ms, seq)
        elif known is not None:
            self._open_node(entry_id, known)
            return format_ms_seq(ms, seq)
        self.append(entry_id, flat, max_entries, max_bytes)
        return format_ms_seq(ms, seq)

    def _open_node(self, entry_id: int, known: tuple) -> None:
        """append() of an entry with known values (`_ROWS`) in a new node, without working out its sizes again."""
        _total, names, cost4, row, head = known
        node = self._new_node(entry_id, names)
        node.lp_bytes = head + cost4
        node.count = 1
        node.ids.append(entry_id)
        node.rows.append(row)
        self._added(entry_id)

    def _new_node(self, entry_id: int, names: tuple[bytes, ...]) -> Node:
        """The node entry_id opens, last in the stream."""
        if len(self._fields) < 64 and len(names) <= _ROWS_MAX_ITEMS:  # share the usual field sets; never grow without bound
            names = self._fields.setdefault(names, names)
        node = Node(entry_id, names)
        self.nodes.append(node)
        self.keys.append(entry_id)
        return node

    def _added(self, entry_id: int) -> None:
        """The stream's counters after entry_id is appended (add()'s fast path does the same inline)."""
        self.length += 1
        self.entries_added += 1
        self.last_id = entry_id
        if self.length == 1:
            self.first_id = entry_id

    def append(self, entry_id: int, flat: list[bytes], max_entries: int = 100, max_bytes: int = 4096) -> None:
        """Add an entry (entry_id > last_id, flat = [field, value, ...]) as streamAppendItem does."""
        global _LAST_ROW
        nodes = self.nodes
        total = sum(map(len, flat))
        if total > LISTPACK_MAX_SIZE:
            raise ReplyError(TOO_LARGE)
        node = nodes[-1] if nodes else None
        if node is not None:
            limit = max_bytes if 0 < max_bytes <= LISTPACK_MAX_SIZE else LISTPACK_MAX_SIZE
            if node.lp_bytes + total >= limit or (max_entries and node.count + node.deleted >= max_entries):
                self._seal(node)
                node = None
        names = tuple(flat[0::2])
        nfields = len(names)
        if node is None:
            node = self._new_node(entry_id, names)
            size = 13 + _int_size(nfields)  # header, end, count=1, deleted=0, the 0 terminator
            if nfields > _WIDE:
                size += _strs_size(names)
            else:
                for name in names:
                    size += _str_size_cached(name)
            same = True
        else:
            if node.ids is None:
                self._unseal(node)
            size = node.lp_bytes + _COUNT_STEPS.get(node.count, 0)
            same = names == node.fields
        master = node.master_id
        ms_diff = (entry_id >> 64) - (master >> 64)
        seq_diff = (entry_id & SEQ_MASK) - (master & SEQ_MASK)
        size += 2 if 0 <= ms_diff <= 127 else _int_size(_i64(ms_diff))
        size += 2 if 0 <= seq_diff <= 127 else _int_size(_i64(seq_diff))
        sizes = _STR_SIZES
        if same:
            row = flat[1::2]
            cost = 2 + _int_size(nfields + 3)  # flags, lp-count
            if nfields > _WIDE:
                cost += _strs_size(row)
            else:
                for value in row:
                    cost += sizes.get(value) or _str_size_cached(value)
            size += cost
            if total <= _ROWS_MAX_TOTAL and nfields <= _ROWS_MAX_TOTAL:
                key = tuple(flat)
                known = _ROWS.get(key)
                if known is not None:
                    row = known[3]  # the same values: share the row the node's other entries hold
                    head = known[4]
                else:
                    if len(_ROWS) >= _ROWS_MAX:
                        _ROWS.clear()
                    # a new node's size with this entry, the entry aside: header, end, counts, the master fields
                    head = 13 + _int_size(nfields) + sum(map(_str_size_cached, names))
                known = _ROWS[key] = (total, node.fields, cost + 4, row, head)
                _LAST_ROW = (flat.copy(), known)
        else:
            row = [None, *flat]
            size += 2  # flags
            if nfields > _WIDE:
                size += _strs_size(flat)
            else:
                for item in flat:
                    size += sizes.get(item) or _str_size_cached(item)
            size += _int_size(nfields) + _int_size(2 * nfields + 4)
        node.lp_bytes = size
        node.count += 1
        node.ids.append(entry_id)
        node.rows.append(row)
        node.last_id = entry_id
        self._added(entry_id)

    def _seal(self, node: Node) -> None:
        if node.ids is None:
            return
        ids, rows = node.ids, node.rows
        node.packed = _pack(node, ids, rows)
        node.ids = node.rows = None

    def _unseal(self, node: Node) -> None:
        ids, rows = _decoded(node)
        _DECODED.pop(node, None)
        node.ids, node.rows, node.packed = ids, rows, None

    def _repack(self, node: Node, ids: list[int], rows: list[list]) -> None:
        """Store a sealed node's lists again after entries were removed from them."""
        if node.ids is None:
            node.packed = _pack(node, ids, rows)

    # -- reading -----------------------------------------------------------

    def range(self, start: int, end: int, count: int | None = None, rev: bool = False) -> list[tuple[int, list[bytes]]]:
        """Live entries with start <= id <= end, oldest first (newest first if rev)."""
        out: list[tuple[int, list[bytes]]] = []
        for node, ids, rows, lo, hi in self.spans(start, end, count, rev):
            if rev:
                part = list(zip(ids[lo:hi], expand_rows(node.fields, rows[lo:hi]), strict=True))
                part.reverse()
                out += part
            else:
                out += zip(ids[lo:hi], expand_rows(node.fields, rows[lo:hi]), strict=True)
        return out

    def spans(self, start: int, end: int, count: int | None = None, rev: bool = False) -> list[tuple[Node, list[int], list[list], int, int]]:
        """Where range() finds its entries: (node, ids, rows, lo, hi) per node, ids[lo:hi] the node's
        entries in the range (read backwards when rev), at most `count` entries in all.

        For callers that cache per node: a node's `packed` is None while it is open
        (its entries still change); a sealed node's `packed` is replaced whenever its entries change.
        """
        out: list[tuple[Node, list[int], list[list], int, int]] = []
        if start > end or not self.length:
            return out
        nodes, keys = self.nodes, self.keys
        left = count or 0  # entries still wanted when count is given
        if not rev:
            # (`-` and `+` need no search: IDs compare as 128-bit ints, not cheaply)
            first = bisect_right(keys, start) - 1 if start else 0
            for i in range(max(first, 0), len(nodes)):
                node = nodes[i]
                if node.master_id > end:
                    break
                ids, rows = _decoded(node)
                stop = len(ids) if end == MAX_ID else bisect_right(ids, end)
                low = bisect_left(ids, start) if start else 0
                take = min(stop, low + left) if count else stop
                if take > low:
                    out.append((node, ids, rows, low, take))
                    left -= take - low
                if (count and not left) or stop < len(ids):
                    break
        else:
            i = len(keys) - 1 if end == MAX_ID else bisect_right(keys, end) - 1
            while i >= 0:
                node = nodes[i]
                ids, rows = _decoded(node)
                stop = len(ids) if end == MAX_ID else bisect_right(ids, end)
                low = bisect_left(ids, start) if start else 0
                if stop > low:
                    first = max(low, stop - left) if count else low
                    out.append((node, ids, rows, first, stop))
                    left -= stop - first
                    if count and not left:
                        break
                if low > 0 or node.master_id < start:
                    break
                i -= 1
        return out

    def get(self, entry_id: int) -> list[bytes] | None:
        """The fields of a live entry, or None."""
        i = bisect_right(self.keys, entry_id) - 1
        if i < 0:
            return None
        node = self.nodes[i]
        ids, rows = _decoded(node)
        j = bisect_left(ids, entry_id)
        if j < len(ids) and ids[j] == entry_id:
            return _expand(node.fields, rows[j])
        return None

    def node_ids(self, node: Node) -> list[int]:
        """The live entry IDs of one of this stream's nodes, oldest first (read only: the node's own list)."""
        return _decoded(node)[0]

    def node_rank(self, node: Node, entry_id: int) -> int:
        """How many of node's live entries have an ID <= entry_id (storage/rank.py's count inside a node)."""
        if entry_id >= node.last_id:
            return node.count
        ids = node.ids
        if ids is None:
            cached = _DECODED.get(node)
            if cached is None:  # sealed: bisect the ms parts, then the seqs of that ms
                ms_parts, seqs = _ms_seqs(node)
                ms = entry_id >> 64
                lo = bisect_left(ms_parts, ms)
                return bisect_right(seqs, entry_id & SEQ_MASK, lo, bisect_right(ms_parts, ms, lo))
            ids = cached[0]
        return bisect_right(ids, entry_id)

    def first_entry(self) -> tuple[int, list[bytes]] | None:
        for node in self.nodes:
            ids, rows = _decoded(node)
            if ids:
                return ids[0], _expand(node.fields, rows[0])
        return None

    def last_entry(self) -> tuple[int, list[bytes]] | None:
        for node in reversed(self.nodes):
            ids, rows = _decoded(node)
            if ids:
                return ids[-1], _expand(node.fields, rows[-1])
        return None

    def last_valid_id(self) -> int:
        """The ID of the last live entry (streamLastValidID); 0 when empty."""
        for node in reversed(self.nodes):
            ids, _rows = _decoded(node)
            if ids:
                return ids[-1]
        return 0

    def _first_valid_id(self) -> int:
        for node in self.nodes:
            ids, _rows = _decoded(node)
            if ids:
                return ids[0]
        return 0

    # -- removing ----------------------------------------------------------

    def delete(self, entry_ids: list[int], keep_nodes: bool = False) -> list[int]:
        """XDEL: remove the live entries among entry_ids; returns those removed, in order.

        A node whose last live entry goes is removed, as XDEL removes it; `keep_nodes` keeps it, as
        the node a trim ends in is kept (Redis marks the entries deleted inside the listpack)."""
        removed: list[int] = []
        dirty: dict[Node, tuple[list[int], list[list]]] = {}
        first_deleted = False
        nodes, keys = self.nodes, self.keys
        for entry_id in entry_ids:
            i = bisect_right(keys, entry_id) - 1
            if i < 0:
                continue
            node = nodes[i]
            ids, rows = dirty.get(node) or _decoded(node)
            j = bisect_left(ids, entry_id)
            if j == len(ids) or ids[j] != entry_id:
                continue
            if node.count == 1 and not keep_nodes:
                del nodes[i]
                del keys[i]
                dirty.pop(node, None)
                _DECODED.pop(node, None)
                if self.rank is not None:
                    self.rank.removed(node)
            else:
                del ids[j]
                del rows[j]
                self._count_tombstones(node, 1)
                dirty[node] = (ids, rows)
                if self.rank is not None:
                    self.rank.changed(node)
            self.length -= 1
            if entry_id == self.first_id:
                first_deleted = True
            if entry_id > self.max_deleted_entry_id:
                self.max_deleted_entry_id = entry_id
            removed.append(entry_id)
        for node, (ids, rows) in dirty.items():
            self._repack(node, ids, rows)
        if removed:
            if self.length == 0:
                self.first_id = 0
            elif first_deleted:
                self.first_id = self._first_valid_id()
            for group in self.groups.values():  # a deleted entry is nothing a KEYSHARED group still has to deliver
                held = group.keyshared.deferred if group.keyshared is not None else None
                if held:
                    group.keyshared.undefer([entry_id for entry_id in removed if entry_id in held])
        return removed

    def drop_empty_nodes(self, gone: list[Node]) -> None:
        """Remove nodes that hold no live entry (only tombstones): a policy trim's eligible nodes."""
        doomed = set(gone)
        keep = [i for i, node in enumerate(self.nodes) if node not in doomed]
        self.nodes = [self.nodes[i] for i in keep]
        self.keys = [self.keys[i] for i in keep]
        for node in gone:
            _DECODED.pop(node, None)
            if self.rank is not None:
                self.rank.removed(node)

    @staticmethod
    def _count_tombstones(node: Node, k: int) -> None:
        """k live entries of node became tombstones: Redis rewrites both counters."""
        count, deleted = node.count, node.deleted
        node.lp_bytes += _int_size(count - k) - _int_size(count) + _int_size(deleted + k) - _int_size(deleted)
        node.count = count - k
        node.deleted = deleted + k

    def trim(self, maxlen: int | None = None, minid: int | None = None, approx: bool = False, limit: int = 0) -> int:
        """streamTrim: remove the oldest entries by MAXLEN or MINID; returns how many.

        Whole nodes go first; `approx` stops at the first node that cannot go
        entirely, `limit` (0: none) caps the entries removed in whole nodes.
        """
        nodes = self.nodes
        deleted = 0
        gone = 0  # whole nodes removed from the head
        by_len = maxlen is not None
        while gone < len(nodes):
            if by_len and self.length <= maxlen:
                break
            node = nodes[gone]
            entries = node.count
            if limit and deleted + entries > limit:
                break
            if by_len:
                remove = self.length - entries >= maxlen
            else:
                remove = node.last_id < minid
            if remove:
                self.length -= entries
                deleted += entries
                gone += 1
                continue
            if approx:
                break
            ids, rows = _decoded(node)
            k = self.length - maxlen if by_len else bisect_left(ids, minid)
            if k:
                del ids[:k]
                del rows[:k]
                self._count_tombstones(node, k)
                self._repack(node, ids, rows)
                self.length -= k
                deleted += k
            break
        if gone:
            dropped = nodes[:gone]
            for node in dropped:
                _DECODED.pop(node, None)
            del nodes[:gone]
            del self.keys[:gone]
            if self.rank is not None:
                for node in dropped:
                    self.rank.removed(node)
        if self.rank is not None and deleted and nodes:
            self.rank.changed(nodes[0])  # a partial trim of the new head node
        if self.length == 0:
            self.first_id = 0
        elif deleted:
            self.first_id = self._first_valid_id()
        return deleted

    # -- XSETID ------------------------------------------------------------

    def set_id(self, last_id: int, entries_added: int = -1, max_deleted_entry_id: int = 0) -> None:
        """XSETID's checks against the stream (the argument checks are the caller's)."""
        if last_id < self.max_deleted_entry_id:
            raise ReplyError("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id")
        if self.length:
            if last_id < self.last_valid_id():
                raise ReplyError("ERR The ID specified in XSETID is smaller than the target stream top item")
            if entries_added != -1 and self.length > entries_added:
                raise ReplyError("ERR The entries_added specified in XSETID is smaller than the target stream length")
        self.last_id = last_id
        if entries_added != -1:
            lowered = entries_added < self.entries_added
            self.entries_added = entries_added
            # Newest Redis (redis#15489) clamps the groups' counters only when entries-added is
            # lowered: an XSETID that repeats or raises it leaves a counter that reads pushed past
            # it untouched, so XSETID's effect (which always states ENTRIESADDED) replays exactly.
            if lowered:
                for group in self.groups.values():
                    if group.entries_read > entries_added:
                        group.entries_read = entries_added
        if max_deleted_entry_id:
            self.max_deleted_entry_id = max_deleted_entry_id

    # -- snapshots ---------------------------------------------------------

    def dump(self) -> list:
        """The entries, nodes and counters as msgpack-able data (IDs as 16 big-endian bytes).

        Nodes are kept as they are, as Redis's RDB keeps its listpacks, so a
        reloaded stream trims and splits exactly like the original.
        Consumer groups are not included: they belong to their own dump.
        """
        nodes = []
        for node in self.nodes:
            packed = node.packed if node.packed is not None else _pack(node, node.ids, node.rows)
            nodes.append([_id16(node.master_id), list(node.fields), packed, node.count, node.deleted, node.lp_bytes, _id16(node.last_id)])
        return [self.length, _id16(self.last_id), _id16(self.first_id), _id16(self.max_deleted_entry_id), self.entries_added, nodes]

    @classmethod
    def load(cls, state: list) -> Stream:
        """The inverse of dump(); every loaded node starts sealed."""
        stream = cls()
        length, last_id, first_id, max_deleted, entries_added, nodes = state
        stream.length, stream.entries_added = length, entries_added
        stream.last_id, stream.first_id = int.from_bytes(last_id, "big"), int.from_bytes(first_id, "big")
        stream.max_deleted_entry_id = int.from_bytes(max_deleted, "big")
        for master_id, fields, packed, count, deleted, lp_bytes, node_last in nodes:
            names = tuple(fields)
            if len(stream._fields) < 64:
                names = stream._fields.setdefault(names, names)
            node = Node(int.from_bytes(master_id, "big"), names)
            node.ids = node.rows = None
            node.packed, node.count, node.deleted, node.lp_bytes = packed, count, deleted, lp_bytes
            node.last_id = int.from_bytes(node_last, "big")
            stream.nodes.append(node)
            stream.keys.append(node.master_id)
        return stream

    # -- introspection -----------------------------------------------------

    def radix_tree_keys(self) -> int:
        return len(self.nodes)

    def radix_tree_nodes(self) -> int:
        """Nodes of a compressed radix tree over the 16-byte big-endian node keys.

        Redis's rax reports its real node count; this is the count of an
        ideally compressed rax over the same keys, which is what rax builds
        for appended keys (deletions may leave Redis with a few more).
        """
        if not self.keys:
            return 1
        # Keys only come and go at the ends or as whole nodes, always increasing:
        # count plus both ends identify the set between two calls.
        mark = (len(self.keys), self.keys[0], self.keys[-1])
        if self._rax is None or self._rax[:3] != mark:
            keys = [k.to_bytes(16, "big") for k in self.keys]
            self._rax = (*mark, _rax_nodes(keys, 0, len(keys), 0))
        return self._rax[3]

    def memory_usage(self) -> int:
        """Bytes this stream takes in this process (objects, packed nodes, lists, the IDMP maps)."""
        size = self.fixed_memory() + sum(map(node_memory, self.nodes))
        return size if self.idmp is None else size + self.idmp.memory_usage()

    def fixed_memory(self) -> int:
        """memory_usage() without its nodes: base_memory(), the two node lists and the node keys."""
        size = self.base_memory() + sys.getsizeof(self.nodes) + sys.getsizeof(self.keys)
        for key in self.keys:
            size += sys.getsizeof(key)
        return size

    def base_memory(self) -> int:
        """The part of memory_usage() no node adds to: the stream object and its interned field names."""
        size = sys.getsizeof(self)
        for names in self._fields:
            size += sys.getsizeof(names) + sum(sys.getsizeof(name) for name in names)
        return size


def node_memory(node: Node) -> int:
    """One node's part of Stream.memory_usage(): the node, its IDs and its packed bytes or open lists."""
    size = sys.getsizeof(node) + sys.getsizeof(node.master_id) + sys.getsizeof(node.last_id)
    if node.packed is not None:
        return size + sys.getsizeof(node.packed)
    size += sys.getsizeof(node.ids) + sys.getsizeof(node.rows)
    for entry_id, row in zip(node.ids, node.rows, strict=True):
        size += sys.getsizeof(entry_id) + sys.getsizeof(row)
        for item in row:
            size += sys.getsizeof(item)
    return size


def _id16(stream_id: int) -> bytes:
    return stream_id.to_bytes(16, "big")


def _rax_nodes(keys: list[bytes], lo: int, hi: int, depth: int) -> int:
    """Nodes under a rax node reached after `depth` bytes, for keys[lo:hi] (sorted)."""
    if hi - lo == 1:
        return 1 if depth == 16 else 2  # a leaf, or a compressed node plus the leaf
    first, last = keys[lo], keys[hi - 1]
    split = depth
    while first[split] == last[split]:
        split += 1
    total = (1 if split > depth else 0) + 1  # a compressed prefix, then the branching node
    i = lo
    while i < hi:
        byte = keys[i][split]
        j = i + 1
        while j < hi and keys[j][split] == byte:
            j += 1
        total += _rax_nodes(keys, i, j, split + 1)
        i = j
    return total
