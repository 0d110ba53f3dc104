"""Consumer groups: the group's cursor, its pending entries list and its consumers.

Redis's streamCG / streamConsumer / streamNACK, plus the lag rules of Redis 7
(t_stream.c as of 7.4: streamEstimateDistanceFromFirstEverEntry,
streamRangeHasTombstones, streamReplyWithCGLag and the entries_read update in
streamReplyWithRange).

A group's PEL and every consumer's PEL are ordered by entry ID and share the
same `PendingEntry` objects, so a pending entry is owned by exactly one
consumer. A PEL is a `PendingList`: a dict for lookups plus a sorted list of
IDs for ranges, cheap for the common pattern (deliveries append the newest
IDs, acknowledgements remove the oldest) where a balanced tree pays on every
call. Pure: times are passed in (`now`, milliseconds), nothing here reads
a clock. The stream is read only through its counters (`len(stream)`,
`first_id`, `last_id`, `max_deleted_entry_id`, `entries_added`) and
`stream.get(id)`, so the functions below work on any object with those.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from heapq import heapify, heappush
from itertools import islice, repeat
from operator import attrgetter

from .keyshared import KeyShared
from .stream_id import MAX_ID

_consumer_of = attrgetter("consumer")

INVALID_ENTRIES_READ = -1  # SCG_INVALID_ENTRIES_READ: the group's logical read counter is unknown


class PendingEntry:
    """An entry delivered to a consumer and not yet acknowledged (Redis's streamNACK)."""

    __slots__ = ("delivery_time", "delivery_count", "consumer")

    def __init__(self, consumer: Consumer | None, delivery_time: int, delivery_count: int = 1) -> None:
        self.consumer = consumer
        self.delivery_time = delivery_time
        self.delivery_count = delivery_count


class SharedPendingEntry(PendingEntry):
    """One PendingEntry standing for every ID of one XREADGROUP delivery (same owner, time, count 1).

    Saves an object per entry on the hottest path. Nothing may change it in
    place: ConsumerGroup.own() gives an ID its private copy first.
    """

    __slots__ = ()


class PendingList:
    """Pending entries by ID: dict lookups, ordered iteration and ranges.

    `order` holds the IDs sorted, possibly with stale IDs that were removed
    from `entries` (removal only counts them); IDs before `head` are all
    stale. Stale IDs are skipped when iterating, dropped from the ends as they
    are met, and compacted away once they outnumber the live ones, so every
    operation is amortized O(1) except an out-of-order insert (O(log n) plus a
    list insert) and a range seek (O(log n)).
    """

    __slots__ = ("entries", "order", "head", "stale", "unsorted", "top")

    def __init__(self) -> None:
        self.entries: dict[int, PendingEntry] = {}
        self.order: list[int] = []
        self.head = 0
        self.stale = 0
        self.unsorted = False  # insert_new appended older IDs: `order` is sorted again when an ordered answer is asked
        self.top = 0  # while unsorted: no ID in `order` is greater

    def __len__(self) -> int:
        return len(self.entries)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def __contains__(self, entry_id: int) -> bool:
        return entry_id in self.entries

    def __getitem__(self, entry_id: int) -> PendingEntry:
        return self.entries[entry_id]

    def get(self, entry_id: int) -> PendingEntry | None:
        return self.entries.get(entry_id)

    def __setitem__(self, entry_id: int, pending: PendingEntry) -> None:
        entries = self.entries
        if entry_id in entries:
            entries[entry_id] = pending
            return
        if self.unsorted:
            self._sort()
        entries[entry_id] = pending
        order = self.order
        if not order or entry_id > order[-1]:
            order.append(entry_id)
            return
        i = bisect_left(order, entry_id, self.head)
        if i < len(order) and order[i] == entry_id:
            self.stale -= 1  # its stale copy is live again
        else:
            order.insert(i, entry_id)

    def insert_new(self, entry_ids: list[int], pairs: dict[int, PendingEntry]) -> None:
        """__setitem__ for increasing IDs none of which is pending (pairs: each ID -> its pending entry).

        IDs older than the last (a KEYSHARED group's deferred entries, delivered between other
        consumers' pending ones) are appended and `order` is marked unsorted: it is sorted again
        (rebuilt from `entries`, stale copies dropped) only when an ordered answer is asked (first,
        last, irange, an out-of-order __setitem__). A KEYSHARED group's reads and acks ask none, so
        a delivery costs one C-level extend instead of a seek and insert per ID; a stale copy of
        an appended ID stays counted in `stale`, so len(order) - head - stale == len(entries) holds.
        """
        self.entries.update(pairs)
        self.extend(entry_ids)

    def extend(self, entry_ids: list[int]) -> None:
        """Append increasing IDs (just added to `entries`) to `order`, which becomes unsorted unless they follow it."""
        order = self.order
        if order and not self.unsorted and entry_ids[0] <= order[-1]:  # (equal: a stale copy of it)
            self.unsorted = True
            self.top = order[-1]
        order.extend(entry_ids)
        if self.unsorted and entry_ids[-1] > self.top:
            self.top = entry_ids[-1]

    def last_bound(self) -> int:
        """An ID no pending ID exceeds (the PEL must not be empty), without sorting: last() or more."""
        return self.top if self.unsorted else self.order[-1]

    def _sort(self) -> None:
        """`order` sorted again: the pending IDs only (every stale copy dropped)."""
        self.order = sorted(self.entries)
        self.head = self.stale = 0
        self.unsorted = False

    def pop(self, entry_id: int, default=None):
        pending = self.entries.pop(entry_id, None)
        if pending is None:
            return default
        self.stale += 1
        self.settle()
        return pending

    def settle(self) -> None:
        """After removals: drop every ID once none is live, compact once the stale outnumber the live."""
        stale = self.stale
        if stale > 64 or not self.entries:
            if not self.entries:
                self.order = []
                self.head = self.stale = 0
                self.unsorted = False
            elif stale > len(self.entries):
                self._compact()

    def __delitem__(self, entry_id: int) -> None:
        if self.pop(entry_id) is None:
            raise KeyError(entry_id)

    def _compact(self) -> None:
        entries = self.entries
        if self.unsorted:  # the live IDs in insertion order, still unsorted (a stale copy may duplicate one)
            self.order = list(entries)
            self.head = self.stale = 0
            return
        self.order = [i for i in self.order[self.head :] if i in entries]
        self.head = 0
        self.stale = 0

    def first(self) -> int:
        """The smallest pending ID (the PEL must not be empty)."""
        if self.unsorted:
            self._sort()
        order, entries, head = self.order, self.entries, self.head
        while order[head] not in entries:
            head += 1
            self.stale -= 1
        self.head = head
        return order[head]

    def last(self) -> int:
        """The greatest pending ID (the PEL must not be empty)."""
        if self.unsorted:
            self._sort()
        order, entries = self.order, self.entries
        while order[-1] not in entries:
            order.pop()
            self.stale -= 1
        return order[-1]

    def irange(self, minimum: int = 0, maximum: int = MAX_ID):
        """Pending IDs with minimum <= id <= maximum, in order (the PEL must not change meanwhile).

        A range from the head first drops the stale IDs there (as first() does),
        so scans from the start (XAUTOCLAIM 0-0 after acks) do not walk them again.
        """
        if self.unsorted:
            self._sort()
        order, entries = self.order, self.entries
        start = bisect_left(order, minimum, self.head)
        if start == self.head and entries:
            while order[start] not in entries:
                start += 1
                self.stale -= 1
            self.head = start
        for i in range(start, len(order)):
            entry_id = order[i]
            if entry_id > maximum:
                return
            if entry_id in entries:
                yield entry_id

    def __iter__(self):
        return self.irange()

    def keys(self) -> list[int]:
        return list(self.irange())

    def items(self):
        entries = self.entries
        for entry_id in self.irange():
            yield entry_id, entries[entry_id]


class Consumer:
    """A named reader in a group.

    seen_time: last time it tried to read or claim; active_time: last time a read
    or claim actually gave it something (-1 until then), as Redis 7.2+ keeps them.
    """

    __slots__ = ("name", "seen_time", "active_time", "pel")

    def __init__(self, name: bytes, now: int) -> None:
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel = PendingList()  # entry id -> PendingEntry, shared with the group's PEL


class ConsumerGroup:
    """last_id is the last delivered ID; entries_read counts the entries the group read, or is invalid (-1).

    `nacked` is Redis 8.8's NACK zone: the IDs XNACK released, oldest first.
    Their PendingEntry has no consumer and delivery time 0; they stay in
    `pel` only (no consumer's). `timeline` orders the owned pending entries
    by delivery time for XREADGROUP ... CLAIM (storage/claim.py): a heap of
    (delivery_time, id) built on first use, pushed to whenever a delivery
    time changes (add_pending, add_new, retime), its stale records dropped
    when met. None until a CLAIM read needs it, so other groups pay nothing.
    """

    __slots__ = ("last_id", "entries_read", "pel", "consumers", "nacked", "timeline", "keyshared")

    def __init__(self, last_id: int, entries_read: int = INVALID_ENTRIES_READ) -> None:
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel = PendingList()  # entry id -> PendingEntry
        self.consumers: dict[bytes, Consumer] = {}
        self.nacked: dict[int, None] = {}  # the NACK zone, in NACK order
        self.timeline: list[tuple[int, int]] | None = None
        self.keyshared = None  # storage.keyshared.KeyShared in a KEYSHARED group: told of every PEL removal and move

    # -- consumers -----------------------------------------------------------

    def consumer(self, name: bytes, now: int) -> tuple[Consumer, bool]:
        """The consumer called name, created (seen now, never active) if missing; and whether it was created."""
        consumer = self.consumers.get(name)
        if consumer is not None:
            return consumer, False
        consumer = self.consumers[name] = Consumer(name, now)
        return consumer, True

    def delete_consumer(self, name: bytes) -> int | None:
        """Remove a consumer and its pending entries; the number it had pending, None if unknown."""
        consumer = self.consumers.pop(name, None)
        if consumer is None:
            return None
        pel = self.pel
        for entry_id in list(consumer.pel):
            del pel[entry_id]
        return len(consumer.pel)

    # -- the cursor and its counter --------------------------------------------

    def advance(self, stream, entry_id: int) -> None:
        """Move last_id to a newly delivered entry_id (> last_id), keeping entries_read as Redis does.

        The counter is incremented when it is valid, the group is not behind the
        stream's first entry and no tombstone lies after the group's position;
        otherwise it is re-estimated for the new ID (and may become invalid).
        """
        if (
            self.entries_read != INVALID_ENTRIES_READ
            and self.last_id >= stream.first_id
            and not range_has_tombstones(stream, self.last_id)
        ):
            self.entries_read += 1
        elif stream.entries_added:
            self.entries_read = estimate_entries_read(stream, entry_id)
        self.last_id = entry_id

    def advance_many(self, stream, entry_ids: list[int]) -> None:
        """advance() through increasing entry_ids, in one step when the counter is simply counting.

        Once the increment rule holds for the current last_id it holds for every
        greater ID (the stream does not change meanwhile), so n deliveries add n.
        """
        last_id = self.last_id
        if (
            self.entries_read != INVALID_ENTRIES_READ
            and last_id >= stream.first_id
            and not range_has_tombstones(stream, last_id)
        ):
            self.entries_read += len(entry_ids)
            self.last_id = entry_ids[-1]
            return
        advance = self.advance
        for entry_id in entry_ids:
            advance(stream, entry_id)

    def set_id(self, last_id: int, entries_read: int, entries_added: int) -> None:
        """XGROUP SETID (and CREATE): a new cursor; ENTRIESREAD above entries-added is clamped to it."""
        self.last_id = last_id
        self.entries_read = clamp_entries_read(entries_read, entries_added)

    # -- the pending entries list ----------------------------------------------

    def add_pending(self, entry_id: int, consumer: Consumer, now: int) -> PendingEntry:
        """Record a first delivery (XREADGROUP >): a new PEL entry, or one taken over from its owner."""
        pending = self.pel.get(entry_id)
        if pending is None:
            pending = PendingEntry(consumer, now)
            self.pel[entry_id] = pending
            consumer.pel[entry_id] = pending
            if self.timeline is not None:
                heappush(self.timeline, (now, entry_id))
            return pending
        # Already pending (the group's ID was moved back by SETID): it changes owner and starts over.
        pending = self.transfer(entry_id, pending, consumer)
        pending.delivery_count = 1
        self.retime(entry_id, pending, now)
        return pending

    def add_new(self, entry_ids: list[int], consumer: Consumer, now: int, fresh: bool = False) -> None:
        """First deliveries of increasing IDs (XREADGROUP >): add_pending for each, in bulk when they all go last.

        In bulk the IDs share one SharedPendingEntry. `fresh`: the caller knows none of them is pending
        (a KEYSHARED read), so the check for one is skipped.
        """
        pel, own = self.pel, consumer.pel
        first = entry_ids[0]
        order, own_order = pel.order, own.order  # after every ID of both lists (`top` bounds an unsorted one)
        if (not order or first > (pel.top if pel.unsorted else order[-1])) and (not own_order or first > (own.top if own.unsorted else own_order[-1])):
            pending = SharedPendingEntry(consumer, now) if len(entry_ids) > 1 else PendingEntry(consumer, now)
            pairs = dict.fromkeys(entry_ids, pending)
            pel.entries.update(pairs)
            order.extend(entry_ids)
            own.entries.update(pairs)
            own_order.extend(entry_ids)
            if pel.unsorted:
                pel.top = entry_ids[-1]
            if own.unsorted:
                own.top = entry_ids[-1]
            timeline = self.timeline
            if timeline is not None:
                for entry_id in entry_ids:
                    heappush(timeline, (now, entry_id))
            return
        if self.timeline is None and (fresh or not any(map(pel.entries.__contains__, entry_ids))):
            # None pending yet (a KEYSHARED group delivers older deferred entries): the same shared
            # entry, appended to both lists (PendingList.insert_new: sorted again when asked)
            pending = SharedPendingEntry(consumer, now) if len(entry_ids) > 1 else PendingEntry(consumer, now)
            pairs = dict.fromkeys(entry_ids, pending)
            pel.insert_new(entry_ids, pairs)
            own.insert_new(entry_ids, pairs)
            return
        for entry_id in entry_ids:
            self.add_pending(entry_id, consumer, now)

    def own(self, entry_id: int, pending: PendingEntry) -> PendingEntry:
        """entry_id's pending entry, given its private copy first if it is shared (call before any change)."""
        if type(pending) is not SharedPendingEntry:
            return pending
        mine = PendingEntry(pending.consumer, pending.delivery_time, pending.delivery_count)
        self.pel.entries[entry_id] = mine  # the same keys: both lists' order is unchanged
        pending.consumer.pel.entries[entry_id] = mine
        return mine

    def ack_many(self, entry_ids: list[int]) -> list[bool]:
        """XACK: which of entry_ids were pending (and are acknowledged now).

        PendingList.pop done in bulk (C-level map over dict.pop): the group's and
        the owners' entries go, their stale counts grow, and each list is
        settled once at the end. The usual call acknowledges one consumer's batch.
        """
        pel = self.pel
        popped = list(map(pel.entries.pop, entry_ids, repeat(None)))
        if not all(popped):  # some were not pending (a PendingEntry is always true)
            done = [pending is not None for pending in popped]
            acked = [entry_id for entry_id, ok in zip(entry_ids, done, strict=True) if ok]
            popped = [pending for pending in popped if pending is not None]
        else:
            done = [True] * len(entry_ids)
            acked = entry_ids
        if not acked:
            return done
        if self.keyshared is not None:
            self.keyshared.forget(acked)
        pel.stale += len(acked)
        owners = set(map(_consumer_of, popped))
        if self.nacked:
            nacked = self.nacked
            for entry_id in acked:
                nacked.pop(entry_id, None)
        if len(owners) == 1 and None not in owners:
            own = owners.pop().pel
            deque(map(own.entries.__delitem__, acked), 0)
            own.stale += len(acked)
            own.settle()
        else:
            owners.discard(None)  # NACKed entries: in the group's PEL only
            for entry_id, pending in zip(acked, popped, strict=True):
                if pending.consumer is not None:
                    own = pending.consumer.pel
                    del own.entries[entry_id]
                    own.stale += 1
            for consumer in owners:
                consumer.pel.settle()
        pel.settle()
        return done

    def drop_pending(self, entry_id: int) -> None:
        """Forget a pending entry whose stream entry no longer exists (XCLAIM/XAUTOCLAIM clean-up)."""
        pending = self.pel.pop(entry_id)
        if self.keyshared is not None:
            self.keyshared.forget((entry_id,))
        if pending.consumer is not None:
            pending.consumer.pel.pop(entry_id, None)
        else:
            self.nacked.pop(entry_id, None)

    def transfer(self, entry_id: int, pending: PendingEntry, consumer: Consumer) -> PendingEntry:
        """Give a pending entry to consumer (XCLAIM, XAUTOCLAIM); returns it, private, for further changes.

        A NACKed entry leaves the NACK zone. Its delivery time (0) must be set next, with retime().
        """
        pending = self.own(entry_id, pending)
        if pending.consumer is not consumer:
            if pending.consumer is not None:
                del pending.consumer.pel[entry_id]
            else:
                self.nacked.pop(entry_id, None)
            consumer.pel[entry_id] = pending
            pending.consumer = consumer
        if self.keyshared is not None:
            self.keyshared.moved(entry_id, consumer.name)
        return pending

    def retime(self, entry_id: int, pending: PendingEntry, delivery_time: int) -> None:
        """Set a (private, owned) pending entry's delivery time: every change of one goes through here
        (or add_pending/add_new), so the CLAIM timeline stays complete."""
        pending.delivery_time = delivery_time
        timeline = self.timeline
        if timeline is not None:
            heappush(timeline, (delivery_time, entry_id))
            if len(timeline) > 2 * len(self.pel) + 64:
                self.build_timeline()

    def build_timeline(self) -> list[tuple[int, int]]:
        """The timeline from the PEL as it is (first use, or compaction once stale records dominate)."""
        timeline = [(p.delivery_time, i) for i, p in self.pel.entries.items() if p.consumer is not None]
        heapify(timeline)
        self.timeline = timeline
        return timeline

    def pel_range(self, start: int, end: int, consumer: Consumer | None = None):
        """(id, PendingEntry) pairs with start <= id <= end, of the group or of one consumer."""
        pel = consumer.pel if consumer is not None else self.pel
        for entry_id in pel.irange(start, end):
            yield entry_id, pel[entry_id]

    def autoclaim_candidates(self, start: int, limit: int) -> list[int]:
        """Up to limit PEL IDs >= start, in order."""
        return list(islice(self.pel.irange(minimum=start), limit))


# -- lag (pure functions of the stream counters and the group) --------------------


def clamp_entries_read(entries_read: int, entries_added: int) -> int:
    """A given ENTRIESREAD cannot exceed the entries ever added (newest Redis clamps it)."""
    if entries_read != INVALID_ENTRIES_READ and entries_read > entries_added:
        return entries_added
    return entries_read


def range_has_tombstones(stream, start: int, end: int = MAX_ID) -> bool:
    """Whether a deleted entry may lie in [start, end]: only the greatest deleted ID is known."""
    max_deleted = stream.max_deleted_entry_id
    if not len(stream) or not max_deleted:
        return False
    return start <= max_deleted <= end


def estimate_entries_read(stream, entry_id: int) -> int:
    """The logical read counter of entry_id (entries from the first ever added up to it), or -1 if unknowable."""
    entries_added = stream.entries_added
    if not entries_added:
        return 0  # nothing was ever added: every ID counts zero
    length = len(stream)
    last_id = stream.last_id
    if not length and entry_id <= last_id:
        return entries_added  # empty stream: everything up to the last ID was read
    max_deleted = stream.max_deleted_entry_id
    if entry_id and entry_id < max_deleted:
        return INVALID_ENTRIES_READ  # a tombstone lies between the ID and the end
    if entry_id == last_id:
        return entries_added
    if entry_id > last_id:
        return INVALID_ENTRIES_READ  # a future ID
    first_id = stream.first_id
    if not max_deleted or max_deleted < first_id:
        # No fragmentation ahead: counting from the first entry is exact.
        if entry_id < first_id:
            return entries_added - length
        if entry_id == first_id:
            return entries_added - length + 1
    return INVALID_ENTRIES_READ  # an arbitrary ID inside a fragmented stream


def lag(stream, group: ConsumerGroup) -> int | None:
    """Entries not yet delivered to the group; None where Redis cannot know it."""
    if not stream.entries_added:
        return 0
    length = len(stream)
    if not length:
        return 0
    first_id = stream.first_id
    if group.last_id < first_id and stream.max_deleted_entry_id < first_id:
        return length  # both the group and every tombstone are before the first entry
    if group.entries_read != INVALID_ENTRIES_READ and not range_has_tombstones(stream, group.last_id):
        return stream.entries_added - group.entries_read
    entries_read = estimate_entries_read(stream, group.last_id)
    if entries_read != INVALID_ENTRIES_READ:
        return stream.entries_added - entries_read
    return None


# -- snapshots ---------------------------------------------------------------------


def dump_groups(groups: dict[bytes, ConsumerGroup]) -> list:
    """A stream's groups as msgpack-able data (IDs as 16 big-endian bytes, like Stream.dump).

    Per group: name, last-delivered-id, entries-read, consumers [name,
    seen-time, active-time] and the PEL [id, owner, delivery time, count];
    each consumer's own PEL is rebuilt from the owners. A NACKed entry's
    owner is nil, and a group with a NACK zone has a sixth element, a map
    whose `nacked` lists the zone's IDs in order (absent: no zone; files
    written before XNACK load unchanged) and, for a KEYSHARED group,
    `keyshared` holds KeyShared.dump() (issue 22).
    """
    out = []
    for name, group in groups.items():
        consumers = [[c.name, c.seen_time, c.active_time] for c in group.consumers.values()]
        pel = [
            [i.to_bytes(16, "big"), p.consumer.name if p.consumer is not None else None, p.delivery_time, p.delivery_count]
            for i, p in group.pel.items()
        ]
        row = [name, group.last_id.to_bytes(16, "big"), group.entries_read, consumers, pel]
        options = {}
        if group.nacked:
            options["nacked"] = [i.to_bytes(16, "big") for i in group.nacked]
        if group.keyshared is not None:
            options["keyshared"] = group.keyshared.dump()
        if options:
            row.append(options)
        out.append(row)
    return out


def load_groups(data: list) -> dict[bytes, ConsumerGroup]:
    """The inverse of dump_groups()."""
    groups: dict[bytes, ConsumerGroup] = {}
    for name, last_id, entries_read, consumers, pel, *optional in data:
        group = groups[name] = ConsumerGroup(int.from_bytes(last_id, "big"), entries_read)
        for consumer_name, seen_time, active_time in consumers:
            consumer = group.consumers[consumer_name] = Consumer(consumer_name, seen_time)
            consumer.active_time = active_time
        for entry_id, owner, delivery_time, delivery_count in pel:
            entry_id = int.from_bytes(entry_id, "big")
            consumer = group.consumers[owner] if owner is not None else None
            pending = PendingEntry(consumer, delivery_time, delivery_count)
            group.pel[entry_id] = pending
            if consumer is not None:
                consumer.pel[entry_id] = pending
        extra = optional[0] if optional else {}
        group.nacked = dict.fromkeys(int.from_bytes(i, "big") for i in extra.get("nacked", ()))
        if "keyshared" in extra:
            group.keyshared = KeyShared.load(extra["keyshared"], group.pel)
    return groups
