"""Backlog analysis (Pulsar's PIP-187, as XBACKLOG): scan what a group still has to process.

What a group still has to process, in ID order: its pending entries (the PEL)
and every live entry after its last-delivered-id. Entries between the ack
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
from dataclasses import dataclass, field

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
    examined: list[int] = field(default_factory=list, repr=False)  # filled only when asked (tests)


def ack_floor(group) -> int:
    """Where the group's backlog starts: its lowest pending ID, else just after last-delivered-id."""
    if group.pel:
        return min(group.pel.first(), group.last_id + 1) if group.last_id < MAX_ID else group.pel.first()
    return group.last_id + 1 if group.last_id < MAX_ID else MAX_ID


def _positions(stream, group, start: int) -> Iterator[tuple[int, object, list | None, bool]]:
    """(id, node fields, row or None if gone, pending) for every position of the backlog from start, in ID order."""
    pel = group.pel
    last = group.last_id
    if start <= last:
        get = stream.get
        for entry_id in list(pel.irange(start, last)):
            flat = get(entry_id)
            yield entry_id, None, flat, True
        start = last + 1
    if start > MAX_ID:
        return
    # Live entries after last-delivered-id, merged with PEL references there (after a SETID backwards).
    refs = list(pel.irange(start, MAX_ID)) if pel and pel.last() >= start else []
    r = 0
    lo = start
    while True:
        spans = stream.spans(lo, MAX_ID, 256)
        if not spans:
            break
        for node, ids, rows, a, b in spans:
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
        last_seen = spans[-1][1][spans[-1][4] - 1]
        if last_seen >= MAX_ID:
            break
        lo = last_seen + 1
    while r < len(refs):
        yield refs[r], None, None, True
        r += 1


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


def scan(stream, group, start: int, count: int, expired: Callable[[], bool], filters: list[Filter], keep_ids: bool = False) -> BacklogScan:
    """Examine at most `count` positions of the backlog from `start` (inclusive), stopping early once expired()."""
    out = BacklogScan()
    examined = 0
    positions = _positions(stream, group, start)
    for entry_id, fields, row, pending in positions:
        if examined == count or (examined & 63 == 63 and expired()):
            out.aborted = True
            out.abort_reason = "count" if examined == count else "time"
            out.cursor = out.last_id
            break
        examined += 1
        if out.first_id is None:
            out.first_id = entry_id
        out.last_id = entry_id
        if keep_ids:
            out.examined.append(entry_id)
        if row is None:
            out.deleted_pending += 1
            continue
        out.entries += 1
        if pending:
            out.pending += 1
        verdict = 1  # 1 accepted, 0 rejected, -1 missing field
        for flt in filters:
            value = _value(fields, row, flt.field)
            if flt.op == "exists":
                if value is None and verdict == 1:
                    verdict = 0
            elif value is None:
                verdict = -1
                break
            elif verdict == 1 and not flt.test(value):
                verdict = 0
        if verdict == 1:
            out.accepted += 1
        elif verdict == 0:
            out.rejected += 1
        else:
            out.missing_field += 1
    return out
