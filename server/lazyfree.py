"""Freeing a flushed database a slice at a time: Redis's lazyfree for FLUSHALL and FLUSHDB.

Redis 8 never frees a flushed database in the command: FLUSHALL/FLUSHDB ASYNC hand the old tables
to a background thread (emptyDbAsync), and SYNC does the same while its caller waits
(flushallSyncBgDone), so other clients are served meanwhile. CPython frees on the thread that
drops the last reference, with the GIL held, so a thread would not help: the old tables are kept
here and emptied a few milliseconds at a time between the other clients' events, as Client.run
slices a long pipeline. 200,000 small streams took 0.15 s to free in one go (Redis: 0 for its
other clients). The tables are out of the keyspace before the command returns: nothing can see
them, so freeing them later changes no reply. INFO's lazyfree_pending_objects and
lazyfreed_objects count the keys, as Redis counts them.
"""

from __future__ import annotations

from time import perf_counter

SLICE_SECONDS = 0.002  # one turn's work, less than a client's slice (server/client.py)
_BATCH = 256  # keys freed between looks at the clock


class LazyFree:
    """`server.lazyfree`: the flushed key tables still to free, and the INFO counters."""

    __slots__ = ("server", "tables", "pending", "freed", "scheduled")

    def __init__(self, server) -> None:
        self.server = server
        self.tables: list[tuple[dict, bool]] = []  # (table, counted): a key table counts its keys, a TTL table not
        self.pending = 0  # INFO lazyfree_pending_objects: keys handed over, not yet freed
        self.freed = 0  # INFO lazyfreed_objects
        self.scheduled = False

    def free(self, data: dict, expires: dict) -> None:
        """Take over a database's old key and TTL tables (the database has new, empty ones)."""
        if expires:
            self.tables.append((expires, False))
        if data:
            self.tables.append((data, True))
            self.pending += len(data)
        if self.tables and not self.scheduled:
            loop = self.server.loop
            if loop is None:  # no event loop (a server built in-process): free at once
                self.step(at_once=True)
            else:
                self.scheduled = True
                loop.call_soon(self.step)

    def step(self, at_once: bool = False) -> None:
        """Free keys for about SLICE_SECONDS (at_once: all of them), then go on next turn."""
        self.scheduled = False
        deadline = None if at_once else perf_counter() + SLICE_SECONDS
        tables = self.tables
        while tables:
            table, counted = tables[-1]
            pop = table.popitem
            done = min(_BATCH, len(table))
            for _ in range(done):
                pop()
            if counted:
                self.pending -= done
                self.freed += done
            if not table:
                tables.pop()
            if tables and deadline is not None and perf_counter() > deadline:
                self.scheduled = True
                self.server.loop.call_soon(self.step)
                return
