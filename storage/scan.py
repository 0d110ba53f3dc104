"""SCAN's cursor: a position in hash order over a snapshot of the keyspace.

Redis walks its hash table's buckets in reverse-binary order so that a
cursor stays meaningful while the table grows or shrinks. A Python dict
exposes no buckets, so Millrace orders keys by their 64-bit hash instead:

- the cursor is an unsigned 64-bit position `u = hash(key) + 2**63`; cursor
  `c` means "every key with u < c has been returned";
- a step sorts nothing: it uses a `ScanIndex`, a snapshot of the keys sorted
  by hash (plus their hashes in a compact array), bisects to `c`, returns up
  to `count` keys from there (more when several share the last hash, so that
  equal hashes never straddle two steps) and answers with the position of
  the next key, or 0 at the end;
- SCAN 0 always takes a fresh snapshot; later steps reuse the newest one, or
  take a new one if it was dropped (FLUSHDB, SWAPDB, an iteration finishing).
  Keys no longer present (or expired) are filtered out at each step.

Why every key present for a whole iteration is returned: each step of the
iteration reads a snapshot taken at or after its SCAN 0 (snapshots only ever
get newer), and such a snapshot holds every key that has been present since
then. Positions do not depend on the snapshot, so the steps' ranges
[c, c') tile [0, 2**64) in order whatever snapshot each step used, and the
key's position falls in exactly one of them. Keys added or removed during
the iteration may or may not be returned, and a key may come back twice
(only after a new snapshot) — the same contract Redis gives.

Cost: O(n log n) at each SCAN 0 (C-speed sort, ~0.5 s per million keys),
O(log n + count) per later step; the snapshot costs ~16 bytes per key and
keeps deleted keys' names alive until the iteration ends or restarts. A big
keyspace's snapshot is built by `ScanBuilder` a slice at a time (the SCAN
command waits for it between other clients' events); it is the same index.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from heapq import merge
from itertools import count, islice

HASH_OFFSET = 1 << 63
_TAKEN = count(1)  # snapshots in the order they were taken: a database installs only newer ones


class ScanIndex:
    """The keys of one dict at one moment, sorted by hash."""

    __slots__ = ("data", "keys", "hashes", "taken")

    def __init__(self, data: dict, keys: list[bytes] | None = None, hashes: array | None = None, taken: int = 0) -> None:
        self.data = data  # the dict snapshotted, to notice a swapped database
        self.taken = taken or next(_TAKEN)  # when the snapshot was taken (ScanBuilder's: at its start)
        self.keys = sorted(data, key=hash) if keys is None else keys  # (keys: already in hash order)
        self.hashes = array("q", map(hash, self.keys)) if hashes is None else hashes

    def step(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """Keys from position `cursor` on (at least `count` unless at the end) and the next cursor."""
        hashes = self.hashes
        start = bisect_left(hashes, cursor - HASH_OFFSET) if cursor else 0
        end = start + count
        total = len(hashes)
        if end >= total:
            return 0, self.keys[start:]
        last = hashes[end - 1]
        while end < total and hashes[end] == last:
            end += 1
        if end >= total:
            return 0, self.keys[start:]
        return hashes[end] + HASH_OFFSET, self.keys[start:end]


class ScanBuilder:
    """A ScanIndex built a bounded piece at a time, so that a big keyspace's SCAN 0 does not hold
    the server for the whole sort: the keys are snapshotted at once (a C-level copy), sorted in
    chunks, and the chunks merged. The snapshot is the one the module docstring's argument needs:
    taken when the SCAN that asked for it ran. `step(work)` does about `work` keys' worth."""

    CHUNK = 16384  # keys sorted per step (at C speed)

    __slots__ = ("data", "todo", "chunks", "merged", "out", "hashes", "index", "taken")

    def __init__(self, data: dict) -> None:
        self.data = data
        self.taken = next(_TAKEN)
        self.todo = list(data)
        self.chunks: list[list[bytes]] = []
        self.merged = None  # the merge of the sorted chunks, once every chunk is sorted
        self.out: list[bytes] = []
        self.hashes = array("q")  # out's hashes, extended as out grows
        self.index: ScanIndex | None = None  # set when done

    def step(self, work: int) -> bool:
        """About `work` keys sorted or merged; True once the index is built."""
        if self.index is not None:
            return True
        todo = self.todo
        while todo and work > 0:
            chunk = todo[-self.CHUNK:]
            del todo[-self.CHUNK:]
            self.chunks.append(sorted(chunk, key=hash))
            work -= len(chunk)
        if todo or work <= 0:
            return False
        if self.merged is None:
            self.merged = merge(*self.chunks, key=hash)
            self.chunks = []
        piece = list(islice(self.merged, work))
        self.out += piece
        self.hashes.extend(map(hash, piece))
        if len(piece) < work:
            self.index = ScanIndex(self.data, self.out, self.hashes, self.taken)
            self.merged = None
            return True
        return False
