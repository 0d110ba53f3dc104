"""Redis 8.2's reference policies: what deleting or trimming an entry does to the groups pointing at it.

A consumer group references an entry while the entry is pending in its PEL
(owned or not) or while the group has not been delivered it yet (the entry is
after the group's last-delivered-id). The policies, given by XADD, XTRIM,
XDELEX and XACKDEL:

- KEEPREF (the default, Redis 7's behaviour): delete the entry, leave PEL
  references to it dangling;
- DELREF: delete the entry and remove it from every group's PEL;
- ACKED: delete the entry only when no group references it; referenced
  entries are skipped, so a trim can leave gaps.

Trimming never moves `max-deleted-entry-id` (Redis since 7.4, PR #13473, also
for the gaps ACKED leaves), while XDELEX and XACKDEL deletions do, as XDEL.
Pure: no I/O, no clock.
"""

from __future__ import annotations

from .stream import Stream
from .stream_id import MAX_ID

KEEPREF, DELREF, ACKED = b"KEEPREF", b"DELREF", b"ACKED"
POLICIES = {b"keepref": KEEPREF, b"delref": DELREF, b"acked": ACKED}


class References:
    """The groups' hold on a stream's entries, taken once per command (Redis caches min_cgroup_last_id)."""

    __slots__ = ("groups", "min_last_id")

    def __init__(self, stream: Stream) -> None:
        self.groups = list(stream.groups.values())
        self.min_last_id = min((group.last_id for group in self.groups), default=MAX_ID)

    def referenced(self, entry_id: int) -> bool:
        """Pending in some group, or not yet delivered to some group (a KEYSHARED group's deferred entries too)."""
        if entry_id > self.min_last_id:
            return True
        return any(
            entry_id in group.pel or (group.keyshared is not None and entry_id in group.keyshared.deferred) for group in self.groups
        )


def drop_references(stream: Stream, entry_ids: list[int]) -> dict[bytes, list[int]]:
    """DELREF: remove entry_ids from every group's PEL (and their owners'); per group, the IDs removed."""
    removed: dict[bytes, list[int]] = {}
    unique = list(dict.fromkeys(entry_ids))
    for name, group in stream.groups.items():
        pel = group.pel
        gone = [entry_id for entry_id in unique if entry_id in pel]
        for entry_id in gone:
            group.drop_pending(entry_id)
        if gone:
            removed[name] = gone
    return removed


def delete_entries(stream: Stream, entry_ids: list[int], trimming: bool, keep_nodes: bool = False) -> list[int]:
    """Remove live entries as XDEL does; a trim leaves max-deleted-entry-id where it was (and
    keeps the node it ends in: `keep_nodes`)."""
    max_deleted = stream.max_deleted_entry_id
    removed = stream.delete(entry_ids, keep_nodes)
    if trimming:
        stream.max_deleted_entry_id = max_deleted
    return removed


class TrimOutcome:
    """What a policy trim did: how many entries went and, for DELREF, the PEL references removed per group."""

    __slots__ = ("deleted", "dropped")

    def __init__(self, deleted: int = 0, dropped: dict[bytes, list[int]] | None = None) -> None:
        self.deleted = deleted
        self.dropped = dropped or {}


def trim(
    stream: Stream,
    maxlen: int | None = None,
    minid: int | None = None,
    approx: bool = False,
    limit: int = 0,
    policy: bytes = KEEPREF,
) -> TrimOutcome:
    """streamTrim with a reference policy (Redis 8.6's rules, #14623 included).

    KEEPREF, and any policy on a stream without groups, is Redis 7's trim. With
    DELREF or ACKED the head is walked node by node as Redis 7 walks it (a node is
    eligible when removing it whole still satisfies MAXLEN/MINID; LIMIT caps the
    work in whole nodes), but entries go one by one: ACKED skips the referenced
    ones. `~` stops at the first node that is not eligible (before 8.6 it deleted
    nothing at all with these policies); an exact trim goes on entry by entry into
    that node and ends there, as Redis 7's does, even when ACKED skipped entries
    (checked against Redis 8.2.3). Nodes as Redis leaves them: an eligible node
    left with no live entry goes (also one that had none), the node the walk ends
    in stays even when emptied (its entries only marked deleted).
    """
    if policy == KEEPREF or not stream.groups:
        return TrimOutcome(stream.trim(maxlen=maxlen, minid=minid, approx=approx, limit=limit))
    refs = References(stream) if policy == ACKED else None
    horizon = refs.min_last_id if refs is not None else MAX_ID  # every later entry is undelivered somewhere
    by_len = maxlen is not None
    length = stream.length
    doomed: list[int] = []  # from eligible nodes: one they empty is removed
    tail: list[int] = []  # from the node the walk ends in: it stays, emptied or not
    empty: list = []  # eligible nodes with only tombstones
    visited = 0  # live entries of the nodes walked: what LIMIT caps
    stop = False
    for node in stream.nodes:
        if stop or (by_len and length <= maxlen):
            break
        entries = node.count
        if limit and visited + entries > limit:
            break
        eligible = length - entries >= maxlen if by_len else node.last_id < minid
        if approx and not eligible:
            break  # `~` removes only from nodes that could go whole
        stop = not eligible  # an exact trim ends in the first node that cannot go whole, as Redis 7's
        if eligible and not entries:
            empty.append(node)
        into = doomed if eligible else tail
        for entry_id in stream.node_ids(node):
            if entry_id > horizon or (length <= maxlen if by_len else entry_id >= minid):
                stop = True
                break
            if refs is not None and refs.referenced(entry_id):
                continue
            into.append(entry_id)
            length -= 1
        visited += entries
    if empty:
        stream.drop_empty_nodes(empty)
    if not doomed and not tail:
        return TrimOutcome()
    dropped = drop_references(stream, doomed + tail) if policy == DELREF else {}
    delete_entries(stream, doomed, trimming=True)
    delete_entries(stream, tail, trimming=True, keep_nodes=True)
    return TrimOutcome(len(doomed) + len(tail), dropped)
