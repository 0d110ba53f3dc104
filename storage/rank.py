"""Live-entry ranks of a stream: how many live entries lie in any ID range, in O(log n).

Redis answers a group's lag with nil as soon as a tombstone may lie after the
group (it only knows the greatest deleted ID); counting the live entries after
an ID makes the lag exact. A stream already knows each node's live count
(`Node.count`); this module keeps those counts in a Fenwick tree indexed by
the node's position in creation order (a node's *slot*), so a range count is
two prefix sums plus a bisect inside at most two nodes.

Maintenance is lazy, so XADD pays nothing:

- appends only ever change the last node or open a new one; `sync()` folds
  them in when a count is asked for (amortized O(log n) per new node, i.e.
  per `stream-node-max-entries` entries);
- XDEL and trimming change older nodes; they call `changed(node)` /
  `removed(node)` (hooks in storage/stream.py), O(log n) each;
- the structure is derived state: it is built from the nodes on first use
  (so a loaded or copied stream rebuilds it) and never persisted.

Public API (used by lag, XBACKLOG and the retention work of issue 24):
`stream_rank(stream).count_live(start_id, end_id)` and
`count_live_after(stream, entry_id)`.
Set `MILLRACE_STREAM_RANK=0` in the environment to run without the structure
(every count then walks the nodes): the bench compares both.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right

from .stream_id import MAX_ID

ENABLED = os.environ.get("MILLRACE_STREAM_RANK", "1") != "0"


class LiveRank:
    """Fenwick tree of live counts per node slot (slots in node creation order; removed nodes count 0)."""

    __slots__ = ("stream", "masters", "slot_nodes", "counts", "tree", "alive")

    def __init__(self, stream) -> None:
        self.stream = stream
        self.masters: list[int] = []  # master ID per slot, increasing: bisect finds a node's slot
        self.slot_nodes: list = []  # the Node per slot (None once removed)
        self.counts: list[int] = []  # the count each slot holds in the tree
        self.tree: list[int] = [0]  # 1-based Fenwick array
        self.alive = 0  # slots not removed
        self._build()

    def _build(self) -> None:
        """Slots for the stream's nodes as they are (O(n): the linear Fenwick construction)."""
        nodes = self.stream.nodes
        self.masters = [node.master_id for node in nodes]
        self.slot_nodes = list(nodes)
        self.counts = [node.count for node in nodes]
        tree = [0, *self.counts]
        size = len(tree)
        for i in range(1, size):
            parent = i + (i & -i)
            if parent < size:
                tree[parent] += tree[i]
        self.tree = tree
        self.alive = len(nodes)

    # -- the Fenwick tree ----------------------------------------------------------

    def _add(self, slot: int, delta: int) -> None:
        tree = self.tree
        i = slot + 1
        size = len(tree)
        while i < size:
            tree[i] += delta
            i += i & -i

    def _append_slot(self, node) -> None:
        """A new slot at the end: its tree cell covers the cells below it (O(log n))."""
        tree = self.tree
        i = len(tree)
        value = node.count
        # tree[i] = counts[i-lowbit(i) .. i-1]: the value plus the cells it absorbs
        j = i - 1
        stop = i - (i & -i)
        while j > stop:
            value += tree[j]
            j -= j & -j
        tree.append(value)
        self.masters.append(node.master_id)
        self.slot_nodes.append(node)
        self.counts.append(node.count)
        self.alive += 1

    def _prefix(self, slot: int) -> int:
        """Live entries in slots 0..slot (inclusive)."""
        tree = self.tree
        i = slot + 1
        total = 0
        while i > 0:
            total += tree[i]
            i -= i & -i
        return total

    def _set(self, slot: int, value: int) -> None:
        delta = value - self.counts[slot]
        if delta:
            self.counts[slot] = value
            self._add(slot, delta)

    # -- hooks (storage/stream.py) ---------------------------------------------------

    def changed(self, node) -> None:
        """node's live count changed (XDEL, a partial trim)."""
        slot = self._slot(node)
        if slot is not None:
            self._set(slot, node.count)

    def removed(self, node) -> None:
        """node left the stream (trimmed, or its last entry deleted)."""
        slot = self._slot(node)
        if slot is not None:
            self._set(slot, 0)
            self.slot_nodes[slot] = None
            self.alive -= 1
            if self.alive * 2 < len(self.masters) and len(self.masters) > 64:
                self._build()  # mostly dead slots (a trimmed head): start again from the live nodes

    def _slot(self, node) -> int | None:
        """node's slot, None if it was opened after the last sync (sync() will count it)."""
        masters = self.masters
        if not masters or node.master_id > masters[-1]:
            return None
        i = bisect_left(masters, node.master_id)
        return i if self.slot_nodes[i] is node else None

    # -- queries -------------------------------------------------------------------

    def sync(self) -> None:
        """Fold in what appends did since the last query: the last known node's growth, new nodes."""
        stream = self.stream
        nodes = stream.nodes
        if not nodes:
            if self.masters:
                self._build()
            return
        masters = self.masters
        if masters:
            last = len(masters) - 1
            node = self.slot_nodes[last]
            if node is not None and node.count != self.counts[last]:
                self._set(last, node.count)
            if nodes[-1] is node:
                return
            first_new = bisect_right(stream.keys, masters[-1])
        else:
            first_new = 0
        for node in nodes[first_new:]:
            self._append_slot(node)

    def count_live(self, start_id: int = 0, end_id: int = MAX_ID) -> int:
        """Live entries with start_id <= id <= end_id (both inclusive), exactly."""
        if start_id > end_id:
            return 0
        return self._upto(end_id) - (self._upto(start_id - 1) if start_id else 0)

    def _upto(self, entry_id: int) -> int:
        """Live entries with id <= entry_id."""
        self.sync()
        stream = self.stream
        if entry_id >= stream.last_id:
            return stream.length
        slot = bisect_right(self.masters, entry_id) - 1
        if slot < 0:
            return 0
        before = self._prefix(slot - 1) if slot else 0
        node = self.slot_nodes[slot]
        if node is None or not node.count:
            return before
        return before + stream.node_rank(node, entry_id)


def stream_rank(stream) -> LiveRank:
    """The stream's rank structure, built on first use."""
    rank = stream.rank
    if rank is None:
        rank = stream.rank = LiveRank(stream)
    return rank


def count_live(stream, start_id: int = 0, end_id: int = MAX_ID) -> int:
    """Live entries of stream in [start_id, end_id]: through the rank structure, or by walking the nodes when disabled."""
    if ENABLED:
        return stream_rank(stream).count_live(start_id, end_id)
    return _walk_count(stream, start_id, end_id)


def count_live_after(stream, entry_id: int) -> int:
    """Live entries with an ID greater than entry_id (a group's lag, before held-back entries)."""
    if entry_id >= MAX_ID:
        return 0
    return count_live(stream, entry_id + 1, MAX_ID)


def _walk_count(stream, start_id: int, end_id: int) -> int:
    """count_live without the structure: one bisect per node, O(nodes)."""
    total = 0
    for _node, _ids, _rows, lo, hi in stream.spans(start_id, end_id):
        total += hi - lo
    return total
