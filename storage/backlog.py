"""Backlog analysis (Pulsar's PIP-187, as XBACKLOG): scan what a group still has to process.

What a group still has to process, in ID order: its pending entries (the PEL),
a KEYSHARED group's deferred entries (passed over for another consumer, issue
22) and every live entry after its last-delivered-id. Entries between the ack
floor and last-delivered-id that are not pending were acknowledged out of
order and are skipped, as Pulsar skips individually acknowledged entries. A
PEL reference whose entry is gone (XDEL, trimming) counts as
`deleted-pending`.

Each examined entry passes every filter (accepted), fails one (rejected), or
lacks a field an EQ/MATCH filter names (missing-field, counted apart, never
as rejected; an EXISTS filter on a missing field rejects). An entry with a
field twice is judged by its first value. Work is bounded by a count of
examined positions and a deadline; the result says where to continue
(a cursor: the last examined ID). Read-only: nothing here changes the group.
Pure: the deadline is a callable the caller builds from its clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .glob import compile_pattern
from .stream_id import MAX_ID


@dataclass(frozen=True)
class Filter:
    """WHERE field EQ value | WHERE field MATCH glob [NOCASE] | WHERE field EXISTS."""

    field: bytes
    op: str  # "eq", "match", "exists"
    value: bytes = b""
    nocase: bool = False
    test: Callable[[bytes], bool] | None = None

    @classmethod
    def make(cls, name: bytes, op: str, value: bytes = b"", nocase: bool = False) -> Filter:
        if op == "eq":
            test = value.__eq__
        elif op == "match":
            test = compile_pattern(value, nocase)
        else:
            test = None
        return cls(name, op, value, nocase, test)


@dataclass
class BacklogScan:
    """One call's figures (XBACKLOG's reply map)."""

    entries: int = 0
    accepted: int = 0
    rejected: int = 0
    missing_field: int = 0
    pending: int = 0
    deleted_pending: int = 0
    first_id: int | None = None
    last_id: int | None = None
    aborted: bool = False
    abort_reason: str = "done"  # count | time | done
    cursor: int = 0  # the last examined ID when aborted, 0 when complete


def ack_floor(group) -> int:
    """Where the group's backlog starts: its lowest pending (or KEYSHARED deferred) ID, else just after last-delivered-id."""
    if group.pel:
        floor = min(group.pel.first(), group.last_id + 1) if group.last_id < MAX_ID else group.pel.first()
    else:
        floor = group.last_id + 1 if group.last_id < MAX_ID else MAX_ID
    deferred = _deferred(group)
    return min(floor, deferred.first()) if deferred else floor


def _deferred(group):
    """A KEYSHARED group's deferred entries (passed over, not delivered yet: still to process), a
    storage.keyshared_deferred.DeferredSet (kept in ID order); an empty tuple otherwise."""
    keyshared = getattr(group, "keyshared", None)
    return keyshared.deferred if keyshared is not None else ()


def _deferred_between(group, start: int, last: int) -> list[int]:
    deferred = _deferred(group)
    if not deferred:
        return []
    out = []
    for entry_id in deferred.irange(start):
        if entry_id > last:
            break
        out.append(entry_id)
    return out


def _singles(stream, group, start: int) -> Iterator[tuple[int, object, list | None, bool]]:
    """(id, node fields or None, row or flat list or None if gone, pending) one by one, in ID order from start:
    the PEL up to last-delivered-id, then, if PEL IDs lie after it (a SETID backwards), the live entries merged with them.
    """
    pel = group.pel
    last = group.last_id
    if start <= last:
        get = stream.get
        deferred = _deferred_between(group, start, last)
        if not deferred:
            for entry_id in list(pel.irange(start, last)):
                yield entry_id, None, get(entry_id), True
        else:  # merged in ID order; a deferred entry deleted since is nothing to process (no PEL reference)
            for entry_id in sorted([*pel.irange(start, last), *deferred]):
                pending = entry_id in pel
                row = get(entry_id)
                if pending or row is not None:
                    yield entry_id, None, row, pending
        start = last + 1
    if start > MAX_ID or not _refs_after(group, start):
        return
    refs = list(pel.irange(start, MAX_ID))
    r = 0
    for node, ids, rows, a, b in _node_spans(stream, start):
        fields = node.fields
        for k in range(a, b):
            entry_id = ids[k]
            while r < len(refs) and refs[r] < entry_id:
                yield refs[r], None, None, True
                r += 1
            pending = r < len(refs) and refs[r] == entry_id
            if pending:
                r += 1
            yield entry_id, fields, rows[k], pending
    while r < len(refs):
        yield refs[r], None, None, True
        r += 1


def _refs_after(group, start: int) -> bool:
    """Whether PEL IDs lie at or after start (only after a SETID backwards, past last-delivered-id)."""
    return bool(group.pel) and group.pel.last() >= start


def _node_spans(stream, start: int, batch: int = 256):
    """The live entries from start on, a node span at a time (Stream.spans), read in batches."""
    lo = start
    while True:
        spans = stream.spans(lo, MAX_ID, batch)
        if not spans:
            return
        yield from spans
        _node, ids, _rows, _a, b = spans[-1]
        if ids[b - 1] >= MAX_ID:
            return
        lo = ids[b - 1] + 1


def _value(fields, row, name: bytes) -> bytes | None:
    """The first value of field `name` in an entry (a node row, or a flat list when fields is None)."""
    if fields is None:
        flat = row
    elif row[0] is None:
        flat = row[1:]
    else:
        try:
            return row[fields.index(name)]
        except ValueError:
            return None
    for i in range(0, len(flat), 2):
        if flat[i] == name:
            return flat[i + 1]
    return None


def _verdict(fields, row, filters: list[Filter]) -> int:
    """1 accepted, 0 rejected, -1 missing field."""
    verdict = 1
    for flt in filters:
        value = _value(fields, row, flt.field)
        if flt.op == "exists":
            if value is None and verdict == 1:
                verdict = 0
        elif value is None:
            return -1
        elif verdict == 1 and not flt.test(value):
            verdict = 0
    return verdict


def _verdicts(fields: tuple[bytes, ...], rows: list[list], filters: list[Filter]) -> list[int]:
    """_verdict of each row of one node span, a filter at a time over the span (the rows' values by index)."""
    n = len(rows)
    verdicts = [1] * n
    if not filters:
        return verdicts
    odd = [i for i, row in enumerate(rows) if row[0] is None]  # entries with their own field names
    for flt in filters:
        if flt.field in fields:
            index = fields.index(flt.field)
            values = [row[index] for row in rows]
        else:
            values = [None] * n
        for i in odd:
            values[i] = _value(fields, rows[i], flt.field)
        if flt.op == "exists":
            for i, value in enumerate(values):
                if value is None and verdicts[i] == 1:
                    verdicts[i] = 0
            continue
        test = flt.test
        for i, value in enumerate(values):
            if verdicts[i] == -1:
                continue
            if value is None:
                verdicts[i] = -1
            elif verdicts[i] == 1 and not test(value):
                verdicts[i] = 0
    return verdicts


def _count(out: BacklogScan, verdicts: list[int]) -> None:
    accepted = verdicts.count(1)
    rejected = verdicts.count(0)
    out.accepted += accepted
    out.rejected += rejected
    out.missing_field += len(verdicts) - accepted - rejected


def scan(stream, group, start: int, count: int, expired: Callable[[], bool], filters: list[Filter]) -> BacklogScan:
    """Examine at most `count` positions of the backlog from `start` (inclusive), stopping early once expired().

    Positions go one by one while pending entries are involved, and a node
    span at a time over the live entries after last-delivered-id (the usual
    bulk), where the filters run a filter at a time over the span's values.
    """
    out = BacklogScan()
    examined = 0

    def stop(reason: str) -> BacklogScan:
        out.aborted = True
        out.abort_reason = reason
        out.cursor = out.last_id
        return out

    for entry_id, fields, row, pending in _singles(stream, group, start):
        if examined == count or (examined & 63 == 63 and expired()):
            return stop("count" if examined == count else "time")
        examined += 1
        if out.first_id is None:
            out.first_id = entry_id
        out.last_id = entry_id
        if row is None:
            out.deleted_pending += 1
            continue
        out.entries += 1
        if pending:
            out.pending += 1
        verdict = _verdict(fields, row, filters)
        if verdict == 1:
            out.accepted += 1
        elif verdict == 0:
            out.rejected += 1
        else:
            out.missing_field += 1
    bulk_from = max(start, group.last_id + 1) if group.last_id < MAX_ID else None
    if bulk_from is None or bulk_from > MAX_ID or _refs_after(group, bulk_from):
        return out  # done above, one by one
    for node, ids, rows, a, b in _node_spans(stream, bulk_from):
        if examined == count or (examined and expired()):
            return stop("count" if examined == count else "time")
        b = min(b, a + count - examined)
        examined += b - a
        if out.first_id is None:
            out.first_id = ids[a]
        out.last_id = ids[b - 1]
        out.entries += b - a
        _count(out, _verdicts(node.fields, rows[a:b], filters))
        if b - a and examined == count:
            # the budget ends inside this span or at its end: more positions follow if the stream goes on
            rest = stream.spans(out.last_id + 1, MAX_ID, 1) if out.last_id < MAX_ID else []
            if rest:
                return stop("count")
            return out
    return out
