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

A write that runs now counts what it changed, not its arguments: its string
keys' sizes after it less before (an overwrite of the same size, a SET NX that
did nothing, a WRONGTYPE: nothing), its argument bytes if one is a stream (an
XADD grows it by about that). Counting arguments made every overwrite look
like growth, and under an evicting policy that evicted live keys for nothing.
A command queued in MULTI counts its arguments when queued.
"""

from __future__ import annotations

import sys

MEASURE_EVERY_MS = 1000
STREAM = -1  # _key_size of a stream: its growth is estimated from the command's arguments


def _key_size(db, key: bytes) -> int:
    """A string key's size as MEMORY USAGE counts it, 0 if missing, STREAM for a stream (measuring one is O(nodes))."""
    from .commands.memory import key_overhead

    value = db.data.get(key)
    if value is None:
        return 0
    if type(value) is not bytes:
        return STREAM
    return key_overhead(key) + sys.getsizeof(value)


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

    __slots__ = ("server", "dataset", "since", "measured_at", "before")

    def __init__(self, server) -> None:
        self.server = server
        self.dataset = 0
        self.since = 0  # what the writes admitted since the last measure added (see the module docstring)
        self.measured_at = -MEASURE_EVERY_MS
        self.before = None  # (argv, db, keys, their sizes, argument bytes) of the admitted command about to run

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

    def admit(self, client, cmd, argv: list[bytes]) -> bool:
        """Before a denyoom command: evict as the policy allows while used memory is over maxmemory;
        False (refuse it) if it still is. Evictions cut short by their cap let the command run, as
        Redis's EVICT_RUNNING: the next command evicts on."""
        server = self.server
        if server.oom:
            cut_short = server.evictor.evict(self)
            if server.oom and not cut_short:
                return False
        arguments = sum(map(len, argv))
        if client is None or client.multi is not None or cmd.name == "exec":
            self.since += arguments  # queued (or EXEC's queue): its arguments, as an estimate
            self.update()
            return True
        db = client.db
        keys = cmd.get_keys(argv)
        self.before = (argv, db, keys, [_key_size(db, key) for key in keys], arguments)
        return True

    def settle(self) -> None:
        """After the admitted command: count what it added (module docstring)."""
        _argv, db, keys, sizes, arguments = self.before
        self.before = None
        grown = 0
        for key, size in zip(keys, sizes, strict=True):
            after = _key_size(db, key)
            if size is STREAM or after is STREAM:
                grown = arguments
                break
            grown += after - size
        self.since += grown
        self.update()

    def cron(self, now: int) -> None:
        """Measure again once the last measure is a second old."""
        if not self.server.config["maxmemory"]:
            self.server.oom = False
            return
        if now - self.measured_at >= MEASURE_EVERY_MS:
            self.measure(now)
