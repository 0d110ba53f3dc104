"""MAXCOUNT and MAXSIZE of XREAD and XREADGROUP (Redis 8.10): one budget across all the streams of a read.

COUNT limits each stream; MAXCOUNT caps the entries of the whole reply and
MAXSIZE its bytes. Streams are served in the order the caller named them; once
the budget is spent the remaining streams are skipped (left out of the reply,
as a stream with nothing new is). At least one entry is always returned: the
byte budget holds only once an entry was taken, so a single entry larger than
MAXSIZE still comes back. An entry over the budget is neither sent nor, for
XREADGROUP, delivered (no PEL entry, the group's cursor stays before it).

Size, where redis.io says only "the total reply size in bytes, protocol
overhead included": each entry counts its RESP bytes (`*2`, the ID, the field
array, as both protocols write it) and each stream served its key and the
array headers around its entries. The measure does not depend on RESP2/RESP3,
so a read delivers the same entries whatever the client's protocol.
"""

from __future__ import annotations

from protocol.errors import ReplyError

from .args import to_int

MAXCOUNT_NOT_POSITIVE = "ERR MAXCOUNT must be a positive integer"
MAXSIZE_NOT_POSITIVE = "ERR MAXSIZE must be a positive integer"
MAXCOUNT_BELOW_COUNT = "ERR MAXCOUNT must be greater than or equal to COUNT"


def parse_positive(arg: bytes, error: str) -> int:
    """A MAXCOUNT/MAXSIZE value: an integer of at least 1, else Redis's error for that option."""
    try:
        value = to_int(arg)
    except ReplyError:
        raise ReplyError(error) from None
    if value <= 0:
        raise ReplyError(error)
    return value


def check_count(count: int, maxcount: int) -> None:
    """MAXCOUNT may not be below a (positive) COUNT."""
    if maxcount and count > 0 and maxcount < count:
        raise ReplyError(MAXCOUNT_BELOW_COUNT)


def _bulk(size: int) -> int:
    return len(b"$%d\r\n" % size) + size + 2


def entry_size(entry_id: bytes, fields: list[bytes] | None) -> int:
    """The RESP bytes of one `[id, [field, value, ...]]` entry."""
    if fields is None:
        return 4 + _bulk(len(entry_id)) + 5  # a deleted entry's nil body (XREADGROUP history)
    return 4 + _bulk(len(entry_id)) + len(b"*%d\r\n" % len(fields)) + sum(_bulk(len(f)) for f in fields)


class ReadCaps:
    """The budget of one read; spent stream by stream (begin), entry by entry (admit), in serving order."""

    __slots__ = ("maxcount", "maxsize", "entries", "bytes", "spent", "_key_bytes", "_in_stream")

    def __init__(self, maxcount: int = 0, maxsize: int = 0) -> None:
        self.maxcount = maxcount  # 0: no cap
        self.maxsize = maxsize
        self.entries = 0  # taken so far, all streams
        self.bytes = 0  # their measured size
        self.spent = False  # nothing more is taken: the remaining streams are skipped
        self._key_bytes = 0
        self._in_stream = 0

    def __bool__(self) -> bool:
        """Whether the read has caps at all (the usual read has none and skips this bookkeeping)."""
        return bool(self.maxcount or self.maxsize)

    def fresh(self) -> ReadCaps:
        """The same caps with nothing spent: each run of a read (a blocked one re-runs when woken)."""
        return ReadCaps(self.maxcount, self.maxsize)

    def count(self, count: int) -> int:
        """The COUNT to fetch the next stream with (0: all), at most what MAXCOUNT leaves."""
        if not self.maxcount:
            return count
        left = self.maxcount - self.entries
        return left if not count or count > left else count

    def begin(self, key: bytes) -> None:
        """The next stream of the reply starts (its framing counts once it has an entry)."""
        self._key_bytes = 4 + _bulk(len(key))
        self._in_stream = 0

    def admit(self, entry_id: bytes, fields: list[bytes] | None, extra: int = 0) -> bool:
        """Whether the stream's next entry fits (counted if so); `extra`: bytes beyond [id, fields] (CLAIM's)."""
        if self.spent:
            return False
        if self.maxsize:
            n = self._in_stream
            frame = self._key_bytes + len(b"*%d\r\n" % (n + 1))
            before = self._key_bytes + len(b"*%d\r\n" % n) if n else 0
            grown = self.bytes - before + frame + entry_size(entry_id, fields) + extra
            if grown > self.maxsize and self.entries:  # over budget, and something was taken already
                self.spent = True
                return False
            self.bytes = grown
        self.entries += 1
        self._in_stream += 1
        if self.maxcount and self.entries >= self.maxcount:
            self.spent = True
        return True

    def fit(self, key: bytes, entries: list[tuple[bytes, list[bytes] | None]]) -> int:
        """How many of a new stream's entries fit (a prefix), counted."""
        self.begin(key)
        return self.fit_more(entries)

    def fit_more(self, entries: list[tuple[bytes, list[bytes] | None]]) -> int:
        """How many more entries of the current stream fit (a prefix), counted."""
        taken = 0
        for entry_id, fields in entries:
            if not self.admit(entry_id, fields):
                break
            taken += 1
        return taken
