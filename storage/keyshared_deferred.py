"""A KEYSHARED group's deferred set (Pulsar's replay queue) as blocks of stream positions with owner bytes.

Why not a dict of IDs and a queue per consumer: with 50 consumers a read passes
over ~49 entries of others for each of its own, and every one of them was put
in a dict and a queue one by one, then taken out again by its owner. Here a
read's passed-over span is kept whole, as one `Block`:

- `ids`: the span's entry IDs, increasing (a block's IDs lie between its
  neighbours', blocks never overlap);
- `hashes`: each entry's sticky hash (an `array('H')`: no int object per entry);
- `owners`: one byte per entry, the index of the consumer the ring gives its
  hash to (`ring.table()`'s names; 254 stands for "index 254 or more", checked
  exactly by the reader), or `FREE` (255) when the entry is not deferred
  (delivered, acknowledged, deleted). A consumer finds its own deferred entries
  with `bytearray.find` at C speed, never walking the others' in Python.
- `wids`/`wires`: each entry's ID and whole reply item as the encoder writes
  them (`*2`, the ID, the field array), made by the scan while the node's
  rows are at hand (None where unknown: an entry deferred one by one), so
  the owner's read joins bytes instead of revisiting cold rows. Entries
  never change, and every removal but a trim from the head goes through
  Stream.delete(), which takes deleted entries out of the set: so a deferred
  entry's cached reply item is its entry's as long as the ID is not below
  the stream's first ID.

Blocks are joined as scans go on (up to `_BLOCK_MAX` positions); emptied ones
are dropped, and sparse ones compacted once the positions kept greatly exceed
the deferred entries (`_compact`): memory follows the set's size.

Each consumer has a cursor (an ID below which it has no deferred entry), moved
by its reads and lowered when an entry is deferred for it; a ring change (join
or leave) recomputes every block's owner bytes from `hashes` (C-level maps); a
leave resets the cursors, a join only the joiner's (see `retable`). The set is the same set of (ID, hash) pairs the group had
as a dict: `__contains__`, `get`, `items`, `__iter__` (ID order), `__len__`.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left, bisect_right

FREE = 255  # owner byte of a position that is not deferred
OVERFLOW = 254  # owner byte of consumers at table index >= 254 (checked exactly by hash)
_NOT_FREE = re.compile(rb"[^\xff]")
_RUNS = re.compile(rb"[^\xff]+")
_FREE_MASK = bytes([0] * 255 + [255])  # translate(): FREE stays FREE, every owner byte becomes 0 (then OR-ed in)
_BLOCK_MAX = 4096  # a block grown by single insertions splits past this (list inserts stay cheap)


class Block:
    """One span of deferred (or once-deferred) stream positions; see the module docstring."""

    __slots__ = ("ids", "hashes", "owners", "live", "wids", "wires")

    def __init__(self, ids: list[int], hashes: array, owners: bytearray, live: int, wids: list, wires: list) -> None:
        self.ids = ids
        self.hashes = hashes
        self.owners = owners
        self.live = live  # positions not FREE
        self.wids = wids  # the IDs' wire form (None where unknown)
        self.wires = wires  # the entries' reply items (None where unknown)


def owner_bytes(slots, names_count: int, hashes) -> bytearray:
    """Each hash's owner byte under a ring table (slots: hash -> index into its names)."""
    if names_count <= OVERFLOW:
        return bytearray(map(slots.__getitem__, hashes))
    return bytearray(min(slots[h], OVERFLOW) for h in hashes)


class DeferredSet:
    """Deferred entry IDs -> their hash, kept as blocks of owner bytes (module docstring)."""

    __slots__ = ("blocks", "firsts", "size", "positions", "slots", "names", "index", "cursors")

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self.firsts: list[int] = []  # blocks[i].ids[0], for bisection
        self.size = 0
        self.positions = 0  # sum of the blocks' lengths (FREE positions included)
        self.slots = None  # the ring table the owner bytes follow (HashRing.table())
        self.names: list = [None]
        self.index: dict = {}  # member -> its index in names
        self.cursors: dict[int, int] = {}  # owner byte -> no deferred entry of it below this ID

    # -- the ring ---------------------------------------------------------------------------

    def retable(self, table: tuple, joined: bytes | None = None) -> None:
        """The ring changed: every block's owner bytes from its hashes under the new table.

        After a leave every cursor is dropped. After the join of `joined` only its byte's: the others
        keep their indexes (HashRing's are stable) and a join only takes hashes away from them, so
        "no deferred entry of it below this ID" stays true for each of them."""
        slots, names = table
        self.slots, self.names = slots, names
        self.index = {name: i for i, name in enumerate(names) if name is not None}
        if joined is None:
            self.cursors = {}
        else:
            self.cursors.pop(min(self.index[joined], OVERFLOW), None)
        for block in self.blocks:
            fresh = owner_bytes(slots, len(names), block.hashes)
            if block.live != len(block.ids):  # FREE positions stay FREE: OR-ed in as one big integer
                n = len(fresh)
                mask = int.from_bytes(block.owners.translate(_FREE_MASK), "big")
                fresh = bytearray((int.from_bytes(fresh, "big") | mask).to_bytes(n, "big"))
            block.owners = fresh

    def owner_byte(self, hash_value: int) -> int:
        return min(self.slots[hash_value], OVERFLOW) if self.slots is not None else 0

    # -- lookups ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def _locate(self, entry_id: int) -> tuple[int, int]:
        """(block index, position) of entry_id, or (-1, -1) if no block holds it."""
        b = bisect_right(self.firsts, entry_id) - 1
        if b < 0:
            return -1, -1
        ids = self.blocks[b].ids
        if entry_id > ids[-1]:
            return -1, -1
        pos = bisect_left(ids, entry_id)
        if ids[pos] != entry_id:
            return -1, -1
        return b, pos

    def __contains__(self, entry_id: int) -> bool:
        b, pos = self._locate(entry_id)
        return b >= 0 and self.blocks[b].owners[pos] != FREE

    def get(self, entry_id: int, default=None):
        b, pos = self._locate(entry_id)
        if b < 0:
            return default
        block = self.blocks[b]
        return block.hashes[pos] if block.owners[pos] != FREE else default

    def __getitem__(self, entry_id: int) -> int:
        value = self.get(entry_id)
        if value is None:
            raise KeyError(entry_id)
        return value

    def __setitem__(self, entry_id: int, hash_value: int) -> None:
        """As a dict's: entry_id deferred with hash_value (its hash replaced if it already was)."""
        self.discard(entry_id)
        self.add(entry_id, hash_value)

    def items(self):
        """(ID, hash) pairs in ID order."""
        for block in self.blocks:
            if block.live:
                owners, hashes = block.owners, block.hashes
                for m in _NOT_FREE.finditer(owners):
                    pos = m.start()
                    yield block.ids[pos], hashes[pos]

    def __iter__(self):
        for entry_id, _h in self.items():
            yield entry_id

    def irange(self, minimum: int = 0):
        """Deferred IDs >= minimum, in order."""
        b = max(bisect_right(self.firsts, minimum) - 1, 0)
        for block in self.blocks[b:]:
            if block.live:
                ids = block.ids
                start = bisect_left(ids, minimum) if ids[0] < minimum else 0
                for m in _NOT_FREE.finditer(block.owners, start):
                    yield ids[m.start()]

    def first(self) -> int | None:
        for entry_id in self.irange():
            return entry_id
        return None

    def count_owned(self, byte: int) -> int:
        """Deferred entries whose owner byte is byte."""
        return sum(block.owners.count(byte) for block in self.blocks if block.live)

    # -- changes --------------------------------------------------------------------------------

    def add(self, entry_id: int, hash_value: int) -> bool:
        """entry_id (with its hash) is deferred; False if it already was."""
        byte = self.owner_byte(hash_value)
        blocks = self.blocks
        b = bisect_right(self.firsts, entry_id) - 1
        if b < 0 and blocks:
            b = 0  # before every block: it opens the first one
        if b < 0:
            blocks.append(Block([entry_id], array("H", (hash_value,)), bytearray((byte,)), 1, [None], [None]))
            self.firsts.append(entry_id)
            self.positions += 1
        else:
            block = blocks[b]
            ids = block.ids
            pos = bisect_left(ids, entry_id)
            if pos < len(ids) and ids[pos] == entry_id:
                if block.owners[pos] != FREE:
                    return False
                block.owners[pos] = byte
                block.hashes[pos] = hash_value
            else:
                ids.insert(pos, entry_id)
                block.hashes.insert(pos, hash_value)
                block.owners.insert(pos, byte)
                block.wids.insert(pos, None)
                block.wires.insert(pos, None)
                self.positions += 1
                if pos == 0:
                    self.firsts[b] = entry_id
                if len(ids) > _BLOCK_MAX:
                    self._split(b)
            block.live += 1
        self.size += 1
        cursor = self.cursors.get(byte)
        if cursor is not None and entry_id < cursor:
            self.cursors[byte] = entry_id
        return True

    def _split(self, b: int) -> None:
        block = self.blocks[b]
        half = len(block.ids) // 2
        tail = Block(block.ids[half:], block.hashes[half:], block.owners[half:], 0, block.wids[half:], block.wires[half:])
        block.ids, block.hashes, block.owners = block.ids[:half], block.hashes[:half], block.owners[:half]
        block.wids, block.wires = block.wids[:half], block.wires[:half]
        tail.live = len(tail.ids) - tail.owners.count(FREE)
        block.live -= tail.live
        self.blocks.insert(b + 1, tail)
        self.firsts.insert(b + 1, tail.ids[0])

    def add_span(self, ids: list[int], hashes: array, owners: bytearray, live: int, wids: list, wires: list) -> None:
        """A scanned span (owners FREE where not deferred; wids and wires the entries' wire forms),
        kept after every block, joined to the last one; entry by entry when it would overlap a block
        (entries deferred past the group's cursor by a leave)."""
        blocks = self.blocks
        if blocks and ids[0] <= blocks[-1].ids[-1]:
            for entry_id, hash_value, byte in zip(ids, hashes, owners, strict=True):
                if byte != FREE:
                    self.add(entry_id, hash_value)
            return
        last = blocks[-1] if blocks else None
        if last is not None and len(last.ids) < _BLOCK_MAX:
            last.ids += ids
            last.hashes += hashes
            last.owners += owners
            last.wids += wids
            last.wires += wires
            last.live += live
        else:
            blocks.append(Block(ids, hashes, owners, live, wids, wires))
            self.firsts.append(ids[0])
        self.size += live
        self.positions += len(ids)
        self._trim()

    def owned_by(self, name):
        """(ID, hash) of the deferred entries the ring gives to name (a consumer of the current table), in order."""
        me = self.index.get(name)
        if me is None:
            return
        byte = min(me, OVERFLOW)
        for block in self.blocks:
            if not block.live:
                continue
            owners, hashes, ids = block.owners, block.hashes, block.ids
            pos = owners.find(byte)
            while pos >= 0:
                if me < OVERFLOW or self.names[self.slots[hashes[pos]]] == name:
                    yield ids[pos], hashes[pos]
                pos = owners.find(byte, pos + 1)

    def discard(self, entry_id: int) -> int | None:
        """entry_id leaves the set; its hash, or None if it was not deferred."""
        b, pos = self._locate(entry_id)
        if b < 0:
            return None
        block = self.blocks[b]
        if block.owners[pos] == FREE:
            return None
        block.owners[pos] = FREE
        block.wires[pos] = block.wids[pos] = None
        block.live -= 1
        self.size -= 1
        return block.hashes[pos]

    def clear(self) -> None:
        self.blocks = []
        self.firsts = []
        self.size = 0
        self.positions = 0
        self.cursors = {}

    def _trim(self) -> None:
        """Drop emptied blocks at the head; compact every block once positions outnumber entries 4 to 1."""
        blocks = self.blocks
        dead = 0
        while dead < len(blocks) - 1 and not blocks[dead].live:
            self.positions -= len(blocks[dead].ids)
            dead += 1
        if dead:
            del blocks[:dead]
            del self.firsts[:dead]
        if self.positions > 4 * self.size + 8192:
            self._compact()

    def _compact(self) -> None:
        """Keep only the deferred positions (C-level slices per run of them), in blocks of up to _BLOCK_MAX."""
        kept: list[Block] = []
        for block in self.blocks:
            if not block.live:
                continue
            if block.live == len(block.ids):
                kept.append(block)
                continue
            ids, hashes, owners, wids, wires = [], array("H"), bytearray(), [], []
            for m in _RUNS.finditer(block.owners):
                lo, hi = m.span()
                ids += block.ids[lo:hi]
                hashes += block.hashes[lo:hi]
                owners += block.owners[lo:hi]
                wids += block.wids[lo:hi]
                wires += block.wires[lo:hi]
            if kept and len(kept[-1].ids) + len(ids) <= _BLOCK_MAX:
                last = kept[-1]
                last.ids += ids
                last.hashes += hashes
                last.owners += owners
                last.wids += wids
                last.wires += wires
                last.live += len(ids)
            else:
                kept.append(Block(ids, hashes, owners, len(ids), wids, wires))
        self.blocks = kept
        self.firsts = [block.ids[0] for block in kept]
        self.positions = sum(len(block.ids) for block in kept)
