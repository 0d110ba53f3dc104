"""maxmemory against the memory the data uses, checked before every write command.

Redis's performEvictions runs before each command that may add memory (denyoom):
over `maxmemory` the policy's evictions run first (server/eviction.py), and if
memory is still over (noeviction, or nothing left to evict) it is refused with
OOM. The process RSS is a poor measure here: CPython
keeps freed memory and the allocator's arenas, and reading it per command costs
a system call. So the figure is the memory at start-up plus the data's own
size, MEMORY USAGE summed over every key, measured once a second while
maxmemory is set (and at once when it is set). The cron's measure goes a few
milliseconds at a time (`MeasurePass`: a list of the keys, then slices of it,
MEASURE_SLICE_MS each tick), so a large keyspace never stalls the server for
the whole sum (half a second at 500,000 keys); what writes add while a pass
runs counts on top of it. Between two measures each admitted
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
import time

MEASURE_EVERY_MS = 1000
MEASURE_SLICE_MS = 3  # the cron's share of a tick for the measure in progress
STREAM = -1  # _key_size of a stream: its growth is estimated from the command's arguments
DELETING = frozenset({"del", "unlink", "getdel"})  # writes whose keys' whole size may go at once
FLUSHING = frozenset({"flushall", "flushdb"})


_SLOT = 3 * 8  # a dict entry: hash, key and value pointers


def key_overhead(key: bytes) -> int:
    """What MEMORY USAGE adds to a value's own size: the key and its dictionary slot."""
    return sys.getsizeof(key) + _SLOT


def key_size(key: bytes, value) -> int:
    """MEMORY USAGE of key holding value: here, a leaf module, so the meter, the evictor, retention and
    MEMORY USAGE itself share the one rule without importing the command modules."""
    measure = getattr(value, "memory_usage", None)
    return key_overhead(key) + (measure() if measure is not None else sys.getsizeof(value))


def _key_size(db, key: bytes, deleting: bool = False) -> int:
    """A string key's size as MEMORY USAGE counts it, 0 if missing, STREAM for a stream (measuring one is
    O(nodes): only for a command that deletes keys)."""
    value = db.data.get(key)
    if value is None:
        return 0
    if type(value) is not bytes and not deleting:
        return STREAM
    return key_size(key, value)


def dataset_bytes(server) -> int:
    """MEMORY USAGE of every key: the value's own size, the key and its dictionary slot."""
    total = 0
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            total += key_size(key, value)
    return total


class MeasurePass:
    """One measure of every key, done a slice at a time (`step`) from a list of the keys taken at its start."""

    __slots__ = ("todo", "total")

    def __init__(self, server) -> None:
        self.todo = [(db, list(db.data)) for db in server.keyspace.dbs if db.data]
        self.total = 0

    def step(self, deadline: float) -> bool:
        """Measure keys until perf_counter() passes deadline; True once every key is measured."""
        todo = self.todo
        while todo:
            db, keys = todo[-1]
            data = db.data
            total = 0
            while keys:
                for key in keys[-256:]:
                    value = data.get(key)
                    if value is not None:
                        total += key_size(key, value)
                del keys[-256:]
                if time.perf_counter() > deadline:
                    self.total += total
                    return False
            self.total += total
            todo.pop()
        return True


class MemoryMeter:
    """`server.memory_meter`: the data's size as last measured, and what writes added since."""

    __slots__ = ("server", "dataset", "since", "measured_at", "before", "running", "running_since")

    def __init__(self, server) -> None:
        self.server = server
        self.dataset = 0
        self.since = 0  # what the writes admitted since the last measure added (see the module docstring)
        self.measured_at = -MEASURE_EVERY_MS
        self.before = None  # (argv, db, keys, their sizes, argument bytes) of the admitted command about to run
        self.running: MeasurePass | None = None  # the cron's measure in progress
        self.running_since = 0  # what writes added since it started (its `since` once it is done)

    def used(self) -> int:
        return self.server.memory_startup + self.dataset + self.since

    def measure(self, now: int) -> None:
        """Every key now, at once (CONFIG SET maxmemory)."""
        self.dataset = dataset_bytes(self.server)
        self.since = 0
        self.running = None
        self.measured_at = now
        self.update()

    def grew(self, size: int) -> None:
        self.since += size
        if self.running is not None:
            self.running_since += size

    def freed(self, size: int) -> None:
        """A key of `size` bytes was evicted (measured exactly at the next tick): off the last measure,
        and what is left off the writes counted since (the key may be one of them)."""
        self.dataset -= size
        if self.dataset < 0:
            self.since = max(self.since + self.dataset, 0)
            self.dataset = 0
        # (not off the pass in progress: it may not have reached the key, and would then count it
        # neither way; if it has, the pass over-counts it until the next one, the safe side)

    def update(self) -> None:
        server = self.server
        maxmemory = server.config["maxmemory"]
        server.oom = bool(maxmemory) and self.used() > maxmemory

    def admit(self, client, cmd, argv: list[bytes]) -> bool:
        """Before a denyoom command: evict as the policy allows while used memory is over maxmemory;
        False (refuse it) if it still is. Evictions cut short by maxmemory-eviction-tenacity let the
        command run, as Redis's EVICT_RUNNING: they go on between loop turns."""
        server = self.server
        if not server.oom and server.evictor.exceeded_since:
            server.evictor.exceeded(False)  # back under maxmemory (Redis's EVICT_OK ends the exceeded time)
        if server.oom:
            replication = server.replication
            if replication is not None and replication.master is not None and server.config["replica-ignore-maxmemory"]:
                return True  # Redis's performEvictions answers EVICT_OK on such a replica: never OOM
            if server.pause is not None:
                return True  # a CLIENT PAUSE holds evictions too (Redis's PAUSE_ACTION_EVICT): nor OOM
            cut_short = server.evictor.evict(self)
            if server.oom and not cut_short:
                return False
        arguments = sum(map(len, argv))
        if client is None or client.multi is not None or cmd.name == "exec":
            self.grew(arguments)  # queued (or EXEC's queue): its arguments, as an estimate
            self.update()
            return True
        self.record(client, cmd, argv, arguments)
        return True

    def record(self, client, cmd, argv: list[bytes], arguments: int = 0) -> None:
        """Before a write runs now: its keys' sizes, for settle() (a deleting command's streams measured too)."""
        if client is None or client.multi is not None:
            return
        if cmd.name in FLUSHING:
            self.before = (argv, None, (), (), 0)  # measured again after it: what is left is small or nothing
            return
        db = client.db
        keys = cmd.get_keys(argv)
        deleting = cmd.name in DELETING
        self.before = (argv, db, keys, [_key_size(db, key, deleting) for key in keys], arguments)

    def settle(self) -> None:
        """After the admitted command: count what it added (module docstring)."""
        _argv, db, keys, sizes, arguments = self.before
        self.before = None
        if db is None:
            self.measure(self.server.now)
            return
        grown = 0
        for key, size in zip(keys, sizes, strict=True):
            after = _key_size(db, key)
            if size == STREAM or after == STREAM:
                grown = arguments
                break
            grown += after - size
        self.grew(grown)
        self.update()

    def cron(self, now: int) -> None:
        """Measure again once the last measure is a second old, a slice per tick."""
        if not self.server.config["maxmemory"]:
            self.server.oom = False
            self.running = None
            return
        if self.running is None:
            if now - self.measured_at < MEASURE_EVERY_MS:
                return
            self.running, self.running_since = MeasurePass(self.server), 0
        if self.running.step(time.perf_counter() + MEASURE_SLICE_MS / 1000):
            self.dataset, self.since = self.running.total, max(self.running_since, -self.running.total)
            self.running = None
            self.measured_at = now
            self.update()
