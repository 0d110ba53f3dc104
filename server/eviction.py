"""maxmemory-policy: which keys go when a write finds memory over maxmemory (Redis's evict.c), and the
access clock its LRU and LFU policies read.

The clock (`AccessClock`, `server.access`) exists only while an LRU or LFU policy is set, so the
default (noeviction) costs one test a command. Redis keeps an access time or frequency in every
object, updated by each lookup; here a dict per database keeps, for each key a command named, an
int as Redis packs it: the LRU clock (seconds) or, for LFU, the minutes of the last decrement and
the logarithmic counter (`ldt << 8 | counter`, lfu-log-factor, lfu-decay-time). Commands Redis
looks keys up for without a touch (TYPE, EXISTS, TTL, OBJECT...) and clients in CLIENT NO-TOUCH
leave it as it is. A key's record goes with its DEL (any deletion is one as an effect), moves
with RENAME and MOVE, and a key first seen starts at LFU_INIT_VAL, as a new Redis object.

Eviction (`evict`) samples `maxmemory-samples` keys of every database and drops the best
candidate (the longest idle, the least frequent, the nearest expiry, or any one), as Redis's
evictionPoolPopulate with a pool of one, until used memory is back under maxmemory. Picks come
from a list of each database's keys (or keys with a TTL for volatile-*) taken at most once a
second, so a pick is O(1) where a dict offers only O(n); a key added since is not a candidate
until the next list, and one gone since is skipped. An evicted key is deleted as a DEL would:
its DEL propagated, blocked readers, WATCH and tracking told, `evicted` notified, INFO
`evicted_keys` counted.
"""

from __future__ import annotations

import logging
import math
import random
from time import perf_counter_ns

log = logging.getLogger("millrace")

LFU_INIT_VAL = 5  # a new object's counter (Redis's LFU_INIT_VAL)
# Lookups Redis makes with LOOKUP_NOTOUCH (or dbFind): they leave the access clock as it is
NO_TOUCH = frozenset({
    "type", "exists", "ttl", "pttl", "expiretime", "pexpiretime", "object|encoding", "object|freq",
    "object|idletime", "object|refcount", "memory|usage", "debug", "watch",
})  # fmt: skip
# Commands that look their keys up twice (a read, then a write or a serve): two LFU touches, as in Redis
TWICE = frozenset({"getset", "xread", "xreadgroup"})
REFRESH_MS = 1000  # how old a database's list of candidate keys may grow
CHECK_EVERY = 16  # evictions between two looks at the clock (Redis's performEvictions)


def eviction_time_limit_us(tenacity: int) -> float:
    """Redis's evictionTimeLimitUs: 50 us a step of maxmemory-eviction-tenacity up to 10 (500 us, the
    default), then 15 % more a step (about two minutes at 99); 100: no limit."""
    if tenacity <= 10:
        return 50 * tenacity
    if tenacity < 100:
        return int(500.0 * 1.15 ** (tenacity - 10))
    return math.inf


def policy_kind(policy: str) -> str | None:
    """'lru' or 'lfu' for the policies that need an access clock, else None."""
    return policy[-3:] if policy.endswith(("-lru", "-lfu")) else None


class AccessClock:
    """Each key's last access (LRU) or access frequency (LFU), for the databases of one server."""

    __slots__ = ("server", "kind", "records", "keys", "started", "rng")

    def __init__(self, server, kind: str) -> None:
        self.server = server
        self.kind = kind
        self.records: list[dict[bytes, int]] = [{} for _ in server.keyspace.dbs]
        # each database's keys as a list, for O(1) random picks: those there now, and each key given a
        # record since (a key gone stays until a pick or `prune` finds it gone)
        self.keys: list[list[bytes]] = [list(db.data) for db in server.keyspace.dbs]
        self.started = server.now  # keys not seen since count as last used then (ms)
        self.rng = random.Random()

    # -- the clock --------------------------------------------------------------------------------

    def touch(self, client, cmd, argv: list[bytes]) -> None:
        """After a command: the keys it named were accessed (Redis's lookupKey updating val->lru)."""
        if cmd.name in NO_TOUCH or (client.no_touch and cmd.name != "touch"):
            return
        keys = cmd.get_keys(argv)
        if not keys:
            return
        db = client.db
        data, records = db.data, self.records[db.id]
        listed = self.keys[db.id]
        if self.kind == "lru":
            now = self.server.now
            for key in keys:
                if key in data:
                    if key not in records:
                        listed.append(key)
                    records[key] = now
            return
        twice = cmd.name in TWICE or (cmd.name == "set" and any(arg.lower() == b"get" for arg in argv[3:]))
        for key in keys:
            if key in data:
                record = records.get(key)
                if record is None:
                    records[key] = self._minutes() << 8 | LFU_INIT_VAL
                    listed.append(key)
                else:
                    record = self._lfu_touch(record)
                    records[key] = self._lfu_touch(record) if twice else record

    def _minutes(self) -> int:
        return (self.server.now // 60000) & 65535

    def counter(self, record: int) -> int:
        """Redis's LFUDecrAndReturn: the counter less one per lfu-decay-time minutes since its last decrement."""
        counter = record & 255
        decay = self.server.config["lfu-decay-time"]
        if decay:
            now, ldt = self._minutes(), record >> 8
            elapsed = now - ldt if now >= ldt else 65535 - ldt + now
            counter = max(counter - elapsed // decay, 0)
        return counter

    def _lfu_touch(self, record: int) -> int:
        """Redis's updateLFU: decay, then LFULogIncr (a counter of c goes up with probability 1/((c-5)*factor+1))."""
        counter = self.counter(record)
        if counter < 255:
            base = max(counter - LFU_INIT_VAL, 0)
            if self.rng.random() < 1.0 / (base * self.server.config["lfu-log-factor"] + 1):
                counter += 1
        return self._minutes() << 8 | counter

    def freq(self, db: int, key: bytes) -> int:
        """OBJECT FREQ."""
        record = self.records[db].get(key)
        return LFU_INIT_VAL if record is None else self.counter(record)

    def idle_ms(self, db: int, key: bytes) -> int:
        """Milliseconds since the key was last accessed (since the clock started, if never)."""
        return max(self.server.now - self.records[db].get(key, self.started), 0)

    def idle(self, db: int, key: bytes) -> int:
        """OBJECT IDLETIME (seconds)."""
        return self.idle_ms(db, key) // 1000

    # -- what deletes or moves keys (a write's effects) ---------------------------------------------

    def effects(self, db: int, effects: list) -> None:
        records = self.records
        for argv in effects:
            name = argv[0].lower()
            if name in (b"del", b"unlink"):
                for key in argv[1:]:
                    records[db].pop(key, None)
            elif name in (b"rename", b"renamenx") and len(argv) == 3:  # Redis 8 makes a new object: a fresh record
                records[db].pop(argv[1], None)
                records[db].pop(argv[2], None)
            elif name == b"move" and len(argv) == 3:  # a new object in the target database, as RENAME's
                records[db].pop(argv[1], None)
                if argv[2].isdigit() and int(argv[2]) < len(records):
                    target = int(argv[2])
                    fresh = self.server.now if self.kind == "lru" else self._minutes() << 8 | LFU_INIT_VAL
                    records[target][argv[1]] = fresh
                    self.keys[target].append(argv[1])
            elif name == b"flushall":
                for table in records:
                    table.clear()
            elif name == b"flushdb":
                records[db].clear()
            elif name == b"swapdb" and len(argv) == 3 and argv[1].isdigit() and argv[2].isdigit():
                a, b = int(argv[1]), int(argv[2])
                if a < len(records) and b < len(records):
                    records[a], records[b] = records[b], records[a]

    def prune(self) -> None:
        """Drop the records of keys gone by ways no effect names (a full sync), and list each database's
        keys again once the list holds many gone ones."""
        for db, table in zip(self.server.keyspace.dbs, self.records, strict=True):
            data = db.data
            if len(table) > 2 * len(data) + 1024:
                self.records[db.id] = {key: record for key, record in table.items() if key in data}
            if len(self.keys[db.id]) > 2 * len(data) + 1024:
                self.keys[db.id] = list(data)


class Evictor:
    """`server.evictor`: frees memory under maxmemory-policy (see the module docstring)."""

    __slots__ = ("server", "candidates", "listed_at", "next_db", "rng", "running", "exceeded_since", "exceeded_total")

    def __init__(self, server) -> None:
        self.server = server
        self.candidates: dict[int, list[bytes]] = {}  # db -> its keys (or keys with a TTL) when last listed
        self.listed_at: dict[int, int] = {}
        self.next_db = 0  # the random policies go round the databases, as Redis's
        self.rng = random.Random()
        self.running = False  # evictions go on between loop turns (Redis's eviction time proc)
        self.exceeded_since = 0  # perf_counter_ns when used memory last went over maxmemory for good (0: it is not)
        self.exceeded_total = 0  # ns over maxmemory before, in all (INFO total_eviction_exceeded_time)

    def evict(self, meter) -> bool:
        """Evict until `meter` says used memory is under maxmemory or there is nothing left to evict, for
        at most maxmemory-eviction-tenacity's time (looking at the clock every 16 keys, as Redis); True if
        that time ran out first (Redis's EVICT_RUNNING: the command may run, and evictions go on between
        loop turns until memory is back under maxmemory)."""
        server = self.server
        policy = server.config["maxmemory-policy"]
        maxmemory = server.config["maxmemory"]
        if not maxmemory:
            return False
        replication = server.replication
        if replication is not None and replication.master is not None and server.config["replica-ignore-maxmemory"]:
            return False  # a replica's data is its primary's: the primary's evictions reach it as DELs
        if policy == "noeviction":
            self.exceeded(meter.used() > maxmemory)
            return False
        volatile = policy.startswith("volatile-")
        limit_ns = eviction_time_limit_us(server.config["maxmemory-eviction-tenacity"]) * 1000
        started = perf_counter_ns()
        freed = 0
        running = False
        while meter.used() > maxmemory:
            victim = self._random(volatile) if policy.endswith("random") else self._best(policy, volatile)
            if victim is None:
                break  # nothing left to evict (Redis's EVICT_FAIL)
            db, key = victim
            meter.freed(self._size(db, key))
            self.delete(db, key)
            freed += 1
            if freed % CHECK_EVERY == 0 and perf_counter_ns() - started > limit_ns:
                running = True
                self.go_on()
                break
        meter.update()
        self.exceeded(meter.used() > maxmemory)
        return running

    def go_on(self) -> None:
        """Evict on between loop turns (Redis's evictionTimeProc), each turn for the same time at most."""
        if not self.running:
            self.running = True
            self.server.loop.call_soon(self._turn)

    def new_maxmemory(self) -> None:
        """CONFIG SET maxmemory below the memory in use: evictions start at once, between loop turns
        (Redis's updateMaxmemory), not at the next write."""
        server = self.server
        meter = server.memory_meter
        meter.update()
        if server.oom and server.loop is not None:
            log.warning(
                "WARNING: the new maxmemory value set via CONFIG SET (%d) is smaller than the current memory usage (%d). "
                "This will result in key eviction and/or the inability to accept new write commands depending on the maxmemory-policy.",
                server.config["maxmemory"], meter.used(),
            )  # fmt: skip
            self.go_on()

    def _turn(self) -> None:
        self.running = False
        server = self.server
        if server.loading or server.pause is not None or not server.config["maxmemory"]:
            return  # (Redis's isSafeToPerformEvictions; a pause holds evictions too)
        self.evict(server.memory_meter)

    def exceeded(self, over: bool) -> None:
        """Time spent over maxmemory, as Redis's stat_last/total_eviction_exceeded_time."""
        if over:
            if not self.exceeded_since:
                self.exceeded_since = perf_counter_ns()
        elif self.exceeded_since:
            self.exceeded_total += perf_counter_ns() - self.exceeded_since
            self.exceeded_since = 0

    def exceeded_ms(self) -> tuple[int, int]:
        """INFO's (total_eviction_exceeded_time, current_eviction_exceeded_time), in ms."""
        current = perf_counter_ns() - self.exceeded_since if self.exceeded_since else 0
        return (self.exceeded_total + current) // 1_000_000, current // 1_000_000

    def _keys(self, db, volatile: bool, fresh: bool) -> list[bytes]:
        clock = self.server.access
        if clock is not None and not volatile:  # the clock lists every key as it comes: no key is left out
            if fresh or len(clock.keys[db.id]) < len(db.data):  # (keys loaded or moved in since: list them all)
                clock.keys[db.id] = list(db.data)
            return clock.keys[db.id]
        now = self.server.now
        keys = self.candidates.get(db.id)
        if fresh or keys is None or now - self.listed_at.get(db.id, 0) >= REFRESH_MS:
            keys = self.candidates[db.id] = list(db.expires if volatile else db.data)
            self.listed_at[db.id] = now
        return keys

    def _sample(self, db, volatile: bool, count: int) -> list[bytes]:
        """Up to count keys of db still there (a few tries more for the gone ones); the list is made
        again at once if every key it had is gone."""
        source = db.expires if volatile else db.data
        picked: list[bytes] = []
        randrange = self.rng.randrange
        for fresh in (False, True):
            if not source:
                break
            keys = self._keys(db, volatile, fresh)
            for _ in range(count * 3):
                if not keys:
                    break
                index = randrange(len(keys))
                key = keys[index]
                if key in source:
                    picked.append(key)
                    if len(picked) == count:
                        break
                else:  # gone since the list was made: out of the list (the last takes its place)
                    keys[index] = keys[-1]
                    keys.pop()
            if picked:
                break
        return picked

    def _random(self, volatile: bool):
        dbs = self.server.keyspace.dbs
        for step in range(len(dbs)):
            db = dbs[(self.next_db + step) % len(dbs)]
            picked = self._sample(db, volatile, 1)
            if picked:
                self.next_db = (db.id + 1) % len(dbs)
                return db, picked[0]
        return None

    def _best(self, policy: str, volatile: bool):
        """The sampled key with the highest score: idle seconds (LRU), 255 - frequency (LFU), or the
        nearest expiry (volatile-ttl)."""
        server = self.server
        samples = server.config["maxmemory-samples"]
        clock = server.access
        best = None
        best_score = -1
        for db in server.keyspace.dbs:
            for key in self._sample(db, volatile, samples):
                if policy == "volatile-ttl":
                    score = (1 << 63) - db.expires[key]
                elif clock.kind == "lru":  # (an LRU or LFU policy always has its clock: Server.policy_changed)
                    score = clock.idle_ms(db.id, key)
                else:
                    score = 255 - clock.freq(db.id, key)
                if score > best_score:
                    best, best_score = (db, key), score
        return best

    @staticmethod
    def _size(db, key: bytes) -> int:
        from .maxmemory import key_size

        return key_size(key, db.data[key])

    def delete(self, db, key: bytes) -> None:
        """Redis's deleteEvictedKeyAndPropagate: gone as a DEL would take it."""
        from .pubsub import NOTIFY_CLASSES

        server = self.server
        del db.data[key]
        if db.expires:
            db.expires.pop(key, None)
        server.stats["evicted_keys"] += 1
        server.pubsub.notify(NOTIFY_CLASSES["e"], "evicted", key, db.id)
        server.after_write(db.id, [[b"DEL", key]], 0)
