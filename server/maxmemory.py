"""maxmemory against the memory the data uses, checked before every write command.

Redis's performEvictions runs before each command that may add memory (denyoom):
over `maxmemory` the policy's evictions run first (server/eviction.py), and if
memory is still over (noeviction, or nothing left to evict) it is refused with
OOM. The process RSS is a poor measure here: CPython
keeps freed memory and the allocator's arenas, and reading it per command costs
a system call. So the figure is the memory at start-up plus the data's own
size, MEMORY USAGE summed over every key, measured exactly once a second while
maxmemory is set (and when it is set: O(nodes), the price of the setting); between two measures each admitted
write adds its arguments' bytes, so a pipeline cannot run past the limit
between two ticks (the issue: 60,000 × 1 KB XADDs were accepted whole with the
limit 20 MB above use). A deletion lowers the figure at the next measure.
"""

from __future__ import annotations

import sys

MEASURE_EVERY_MS = 1000


def dataset_bytes(server) -> int:
    """MEMORY USAGE of every key: the value's own size, the key and its dictionary slot."""
    from .commands.memory import key_overhead

    total = 0
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            measure = getattr(value, "memory_usage", None)
            total += key_overhead(key) + (measure() if measure is not None else sys.getsizeof(value))
    return total


class MemoryMeter:
    """`server.memory_meter`: the data's size as last measured, and what writes added since."""

    __slots__ = ("server", "dataset", "since", "measured_at")

    def __init__(self, server) -> None:
        self.server = server
        self.dataset = 0
        self.since = 0  # argument bytes of the writes admitted since the last measure
        self.measured_at = -MEASURE_EVERY_MS

    def used(self) -> int:
        return self.server.memory_startup + self.dataset + self.since

    def measure(self, now: int) -> None:
        self.dataset = dataset_bytes(self.server)
        self.since = 0
        self.measured_at = now
        self.update()

    def freed(self, size: int) -> None:
        """A key of `size` bytes was evicted (measured exactly at the next tick): off the last measure,
        and what is left off the writes counted since (the key may be one of them)."""
        self.dataset -= size
        if self.dataset < 0:
            self.since = max(self.since + self.dataset, 0)
            self.dataset = 0

    def update(self) -> None:
        server = self.server
        maxmemory = server.config["maxmemory"]
        server.oom = bool(maxmemory) and self.used() > maxmemory

    def admit(self, argv: list[bytes]) -> bool:
        """Before a denyoom command: False (refuse it) when used memory is already over maxmemory."""
        server = self.server
        if server.oom:
            server.evictor.evict(self)
            if server.oom:
                return False
        self.since += sum(map(len, argv))
        self.update()
        return True

    def cron(self, now: int) -> None:
        """Measure again once the last measure is a second old."""
        if not self.server.config["maxmemory"]:
            self.server.oom = False
            return
        if now - self.measured_at >= MEASURE_EVERY_MS:
            self.measure(now)
