"""Idempotent production (Redis 8.6's IDMP): per stream, per producer, the recent iids and their entry IDs.

XADD `IDMP pid iid` (or `IDMPAUTO pid`, iid computed from the fields) adds an
entry only if the producer's iid is not tracked; a repeat answers the ID of the
original entry, even one deleted or trimmed since (the map never looks at the
entries). Each producer keeps a FIFO of its iids in the order they were
recorded: past `maxsize` the oldest goes, and an iid whose entry ID's
millisecond part is older than `duration` seconds expires. Changing either
limit (XCFGSET) forgets every iid; the lifetime counters `iids_added` and
`iids_duplicates` stay.

Pure data: times come in as arguments. Expiry is a threshold (`expire(before_ms)`),
decided by the server once and replayed as that threshold, so a replica or a
loader removes exactly what the primary removed.
"""

from __future__ import annotations

import sys
from collections import deque

from xxhash import xxh3_128_digest

DEFAULT_DURATION = 100  # seconds (stream-idmp-duration)
DEFAULT_MAXSIZE = 100  # iids per producer (stream-idmp-maxsize)
DURATION_RANGE = (1, 86400)
MAXSIZE_RANGE = (1, 10000)
_U128 = (1 << 128) - 1


def auto_iid(fields: list[bytes], _digest=xxh3_128_digest, _int=int.from_bytes, _mask=_U128) -> bytes:
    """IDMPAUTO's iid: XXH3-128 of each field-value pair, combined so that the pairs' order does not matter.

    Each pair is hashed as field||value with the field's length as the seed (so
    `a`+`bc` and `ab`+`c` differ), and the pair hashes are added modulo 2**128
    (a sum does not depend on the order and, unlike XOR, does not cancel a pair
    given twice). Big-endian, 16 bytes.

    Per request, so written for CPython's costs: the big-endian digest read
    back with int.from_bytes is cheaper than xxh3_128_intdigest (which builds
    its int from two halves), and the usual one and two pairs are unrolled;
    the defaults are bound once, read as locals.
    """
    n = len(fields)
    if n == 2:  # one pair: the sum is its hash
        field = fields[0]
        return _digest(field + fields[1], len(field))
    if n == 4:  # two pairs (the usual event)
        a, b, c, d = fields
        return ((_int(_digest(a + b, len(a))) + _int(_digest(c + d, len(c)))) & _mask).to_bytes(16)
    total = 0
    for i in range(0, n, 2):
        field = fields[i]
        total += _int(_digest(field + fields[i + 1], len(field)))
    return (total & _mask).to_bytes(16)


class Fifo(dict):
    """One producer's iids -> their entry IDs, oldest first, and `order`: the same iids in a deque.

    Evicting a dict's oldest key (`next(iter(d))`) walks the deleted slots a dict
    keeps at its front until it next resizes, about 120 of them per eviction at
    the default maxsize of 100 (a sixth of an idempotent XADD's extra cost over a
    plain one): `order.popleft()` names the oldest at once. Everything that
    removes an iid takes it from `order`'s front, and everything that adds one
    appends it to both (`add`), so the two hold the same iids in the same order.
    """

    __slots__ = ("order",)

    def __init__(self) -> None:
        super().__init__()
        self.order: deque[bytes] = deque()

    def add(self, iid: bytes, entry_id: int) -> None:
        self[iid] = entry_id
        self.order.append(iid)

    def pop_oldest(self) -> None:
        del self[self.order.popleft()]


class Idmp:
    """One stream's IDMP state: its two limits, the producers' iid maps, the lifetime counters."""

    __slots__ = ("duration", "maxsize", "producers", "tracked", "iids_added", "iids_duplicates", "oldest_ms", "home")

    def __init__(self, duration: int = DEFAULT_DURATION, maxsize: int = DEFAULT_MAXSIZE) -> None:
        self.duration = duration
        self.maxsize = maxsize
        self.producers: dict[bytes, Fifo] = {}  # pid -> {iid: entry ID}, oldest first
        self.tracked = 0  # iids in all producers' maps
        self.iids_added = 0
        self.iids_duplicates = 0
        self.oldest_ms = -1  # at most the smallest ms of a tracked entry ID (-1: none tracked)
        self.home: tuple[int, bytes] | None = None  # (db, key) the server's expiry cron last found it at; not persisted

    def lookup(self, pid: bytes, iid: bytes) -> int | None:
        iids = self.producers.get(pid)
        return None if iids is None else iids.get(iid)

    def record(self, pid: bytes, iid: bytes, entry_id: int) -> None:
        """Track a new iid; the producer's oldest goes when it holds more than maxsize."""
        iids = self.producers.get(pid)
        if iids is None:
            iids = self.producers[pid] = Fifo()
        iids.add(iid, entry_id)
        self.tracked += 1
        self.iids_added += 1
        ms = entry_id >> 64
        if self.oldest_ms < 0 or ms < self.oldest_ms:
            self.oldest_ms = ms
        while len(iids) > self.maxsize:
            iids.pop_oldest()
            self.tracked -= 1

    def configure(self, duration: int, maxsize: int) -> bool:
        """XCFGSET: new limits forget every tracked iid; the same limits change nothing. True if changed."""
        if duration == self.duration and maxsize == self.maxsize:
            return False
        self.duration, self.maxsize = duration, maxsize
        self.clear()
        return True

    def clear(self) -> None:
        self.producers = {}
        self.tracked = 0
        self.oldest_ms = -1

    def expiry_due(self, now_ms: int) -> int | None:
        """The threshold to expire with now (iids whose entry ms is below it), None if none can be due."""
        before = now_ms - self.duration * 1000
        if self.oldest_ms < 0 or self.oldest_ms >= before:
            return None
        return before

    def expire(self, before_ms: int) -> int:
        """Forget, from the front of each producer's FIFO, the iids whose entry ID's ms is below before_ms.

        A producer left with no iid is forgotten too (pids-tracked counts the
        others). Returns how many iids went.
        """
        removed = 0
        oldest = -1
        for pid in list(self.producers):
            iids = self.producers[pid]
            order = iids.order
            while order:
                ms = iids[order[0]] >> 64
                if ms >= before_ms:
                    if oldest < 0 or ms < oldest:
                        oldest = ms
                    break
                iids.pop_oldest()
                removed += 1
            if not iids:
                del self.producers[pid]
        self.tracked -= removed
        self.oldest_ms = oldest
        return removed

    def pids_tracked(self) -> int:
        return len(self.producers)

    def memory_usage(self) -> int:
        """Bytes the maps take in this process (part of the stream's MEMORY USAGE): this object, the
        producers' map and each producer's FIFO with its pid, iids and entry IDs. O(tracked iids)."""
        getsizeof = sys.getsizeof
        size = getsizeof(self) + getsizeof(self.producers)
        for pid, iids in self.producers.items():
            size += getsizeof(pid) + getsizeof(iids) + getsizeof(iids.order)
            for iid, entry_id in iids.items():
                size += getsizeof(iid) + getsizeof(entry_id)
        return size

    # -- snapshots ---------------------------------------------------------

    def dump(self) -> dict:
        """A msgpack-able map; IDs as 16 big-endian bytes, each producer's iids in FIFO order."""
        return {
            "duration": self.duration, "maxsize": self.maxsize,
            "added": self.iids_added, "duplicates": self.iids_duplicates,
            "producers": [[pid, [[iid, entry_id.to_bytes(16, "big")] for iid, entry_id in iids.items()]]
                          for pid, iids in self.producers.items()],
        }  # fmt: skip

    @classmethod
    def load(cls, state: dict) -> Idmp:
        idmp = cls(state["duration"], state["maxsize"])
        idmp.iids_added, idmp.iids_duplicates = state["added"], state["duplicates"]
        oldest = -1
        for pid, pairs in state["producers"]:
            iids = idmp.producers[pid] = Fifo()
            for iid, raw in pairs:
                entry_id = int.from_bytes(raw, "big")
                iids.add(iid, entry_id)
                if oldest < 0 or entry_id >> 64 < oldest:
                    oldest = entry_id >> 64
            idmp.tracked += len(iids)
        idmp.oldest_ms = oldest
        return idmp


def snapshot_extras(stream) -> dict:
    """Optional keys of a stream's snapshot record (absent: no IDMP state, as in files written before IDMP)."""
    return {} if stream.idmp is None else {"idmp": stream.idmp.dump()}


def load_extras(stream, extras: dict) -> None:
    state = extras.get("idmp")
    if state is not None:
        stream.idmp = Idmp.load(state)
