"""Databases: keys to values, with expiry times.

Values are `bytes` for strings and `storage.stream.Stream` for streams. Keys
removed by lazy expiry are remembered in `expired` so the server can
propagate them as DELs (replicas and the AOF never expire keys by their own
clock, exactly as in Redis).
"""

from __future__ import annotations

import random
from itertools import islice

from protocol.errors import WRONGTYPE, ReplyError

from .glob import compile_pattern
from .scan import ScanIndex


def type_name(value: object) -> str:
    """The name TYPE reports for a value."""
    if type(value) is bytes:
        return "string"
    return getattr(value, "TYPE", "none")


class Database:
    __slots__ = ("id", "data", "expires", "expired", "scan_index", "scan_taken", "expire_holes", "expire_sampled")

    def __init__(self, id: int) -> None:
        self.id = id
        self.data: dict[bytes, object] = {}
        self.expires: dict[bytes, int] = {}  # key -> absolute unix time in ms
        self.expired: list[bytes] = []  # removed by lazy expiry, to propagate as DEL
        self.scan_index: ScanIndex | None = None  # SCAN's snapshot, see storage/scan.py
        self.scan_taken = 0  # the newest snapshot ever installed here (a sliced one finishing late is older)
        self.expire_holes = 0  # entries active expiry deleted from the TTL table since it was last compacted
        self.expire_sampled = 0  # keys active expiry has looked at, in all (INFO expired_stale_perc)

    def __len__(self) -> int:
        return len(self.data)

    # What a lookup does with a key past its expiry time (Redis's expireIfNeeded):
    # "delete" it (a primary; the server propagates the DEL), "hide" it (a replica
    # answering its clients: missing, but kept until the primary's DEL arrives), or
    # "keep" it (while applying loaded or replicated effects: Redis never expires
    # keys there, so a PERSIST or PEXPIREAT recorded in time still finds its key).
    # A client's write on a writable replica looks up in "write" mode: the key is
    # deleted, as by "delete" (Redis's lookupKeyWrite forces it), and DEL counts it.
    # Set on the class by the loader/replica code; only read on the expired path.
    expiry = "delete"
    # While CLIENT PAUSE is in force nothing expires (Redis's PAUSE_ACTION_EXPIRE): a key past its TTL
    # is missing to lookups, as "hide", and stays, so no DEL moves the offset a failover waits on.
    expire_paused = False

    def lookup(self, key: bytes, now: int):
        """The live value at key, or None; an expired key is removed on the way (see `expiry`)."""
        expires = self.expires
        if expires:
            when = expires.get(key)
            if when is not None and when < now and now:
                mode = self.expiry
                if mode == "delete" or mode == "write":
                    if not self.expire_paused:
                        self._expire(key)
                    return None
                if mode == "hide":
                    return None
        return self.data.get(key)

    def lookup_type(self, key: bytes, now: int, kind: type):
        """The value at key if it is of `kind`, None if absent; WRONGTYPE otherwise."""
        value = self.lookup(key, now) if self.expires else self.data.get(key)  # no TTLs: nothing to expire
        if value is not None and type(value) is not kind:
            raise ReplyError(WRONGTYPE)
        return value

    def expire_now(self, key: bytes) -> None:
        """Remove key, past its TTL, as a lookup would (remembered in `expired` for the DEL)."""
        self._expire(key)

    def _expire(self, key: bytes) -> None:
        del self.data[key]
        del self.expires[key]
        self.expired.append(key)

    def set(self, key: bytes, value: object, keep_ttl: bool = False) -> None:
        """Store value at key; like Redis's setKey, a new value drops any TTL."""
        self.data[key] = value
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)

    def delete(self, key: bytes, now: int) -> bool:
        if self.expiry == "write" and key in self.data and not self.expire_paused:  # a replica's DEL: expireIfNeeded keeps it, dbSyncDelete counts it
            self.expires.pop(key, None)
            del self.data[key]
            return True
        if self.lookup(key, now) is None:
            return False
        del self.data[key]
        if self.expires:
            self.expires.pop(key, None)
        return True

    def exists(self, key: bytes, now: int) -> bool:
        return self.lookup(key, now) is not None

    def ttl(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def set_expire(self, key: bytes, when_ms: int) -> None:
        self.expires[key] = when_ms

    def persist(self, key: bytes) -> bool:
        return self.expires.pop(key, None) is not None

    def flush(self) -> None:
        self.detach()  # the old tables go with the returned tuple

    def detach(self) -> tuple[dict, dict]:
        """Empty the database by handing its key and TTL tables to the caller, who frees them
        (FLUSHALL and FLUSHDB: a slice at a time, as Redis's lazyfree; see server/lazyfree.py)."""
        data, expires = self.data, self.expires
        self.data, self.expires = {}, {}
        self.scan_index = None
        self.expire_holes = 0
        return data, expires

    def is_expired(self, key: bytes, now: int) -> bool:
        """Has key a TTL in the past (still stored, not yet removed)? Redis's keyIsExpired."""
        when = self.expires.get(key)
        return when is not None and when < now

    def rename(self, src: bytes, dst: bytes) -> None:
        """Move the value and TTL of src (which exists) to dst, replacing whatever dst held."""
        data, expires = self.data, self.expires
        data[dst] = data.pop(src)
        when = expires.pop(src, None)
        if when is not None:
            expires[dst] = when
        elif expires:
            expires.pop(dst, None)

    def keys(self, pattern: bytes, now: int) -> list[bytes]:
        """KEYS: live keys matching a glob pattern (expired ones are skipped, not removed)."""
        expires = self.expires
        if pattern == b"*":
            found = list(self.data)
        else:
            match = compile_pattern(pattern)
            found = [key for key in self.data if match(key)]
        if expires:
            found = [key for key in found if not (key in expires and expires[key] < now)]
        return found

    def random_key(self, now: int, rng: random.Random | None = None) -> bytes | None:
        """RANDOMKEY: a uniformly chosen live key; expired picks are removed and retried.

        Picking the i-th key of a dict is a C-speed skip over i entries, so this
        costs O(n) at worst without copying the key list.
        """
        data = self.data
        randrange = (rng or random).randrange
        tries = 100  # where expired keys are not removed ("hide"), give one back, as a Redis replica does
        while data:
            index = randrange(len(data))
            key = next(islice(data, index, None))
            if self.lookup(key, now) is not None:
                return key
            tries -= 1
            if tries == 0 and key in data:
                return key
        return None

    def needs_scan_index(self, cursor: int) -> bool:
        """Whether a SCAN step from cursor takes a new snapshot (storage/scan.py)."""
        index = self.scan_index
        return cursor == 0 or index is None or index.data is not self.data

    def scan(self, cursor: int, count: int, now: int, fresh: ScanIndex | None = None) -> tuple[int, list[bytes]]:
        """One SCAN step over live keys; see storage/scan.py for the cursor's guarantee. `fresh`: a
        snapshot built for this step since it was asked for (ScanBuilder), used instead of a new one."""
        if fresh is not None:
            index = fresh
            if fresh.data is self.data and fresh.taken > self.scan_taken:  # never an older one (storage/scan.py)
                self.scan_index, self.scan_taken = fresh, fresh.taken
        elif self.needs_scan_index(cursor):
            index = self.scan_index = ScanIndex(self.data)
            self.scan_taken = index.taken
        else:
            index = self.scan_index
        cursor, keys = index.step(cursor, count)
        if cursor == 0:
            self.scan_index = None  # a finished iteration releases the snapshot
        if self.expires:
            keys = [key for key in keys if self.lookup(key, now) is not None]
        else:
            data = self.data
            keys = [key for key in keys if key in data]
        return cursor, keys

    def expire_cycle(self, now: int, keys_per_loop: int = 20, max_loops: int = 16, acceptable_stale: int = 25) -> tuple[list[bytes], bool]:
        """Active expiry, as Redis's activeExpireCycle: sample keys with a TTL, drop the expired.

        Each loop looks at the `keys_per_loop` oldest entries of the TTL table;
        a sampled key that is still alive is moved to the end of the table, so
        successive samples walk round all volatile keys without copying the
        table (dicts keep insertion order; delete+insert is O(1)). Loops repeat
        while more than `acceptable_stale` percent of a sample had expired (the server passes Redis's
        10 - (active-expire-effort - 1)), at most `max_loops`
        times. Returns the removed keys and whether the last sample was still
        that stale (the caller may spend more time while it is).
        """
        removed: list[bytes] = []
        expires, data = self.expires, self.data
        stale = False
        for _ in range(max_loops):
            if not expires:
                return removed, False
            sample = list(islice(expires.items(), keys_per_loop))
            self.expire_sampled += len(sample)
            expired = 0
            for key, when in sample:
                del expires[key]
                if when < now:
                    del data[key]
                    removed.append(key)
                    expired += 1
                else:
                    expires[key] = when
            stale = expired * 100 // len(sample) > acceptable_stale
            if expired:
                # A dict leaves a hole where an entry was deleted, and iteration from the
                # front walks over every hole; only inserts compact it. When expiry alone
                # has made as many holes as there are entries, copy the table (amortized O(1)).
                self.expire_holes += expired
                if self.expire_holes > 1024 and self.expire_holes > len(expires):
                    self.expires = expires = dict(expires)
                    self.expire_holes = 0
            if not stale:
                break
        return removed, stale


class Keyspace:
    """The numbered databases of one server."""

    __slots__ = ("dbs",)

    def __init__(self, databases: int = 16) -> None:
        self.dbs = [Database(i) for i in range(databases)]

    def __getitem__(self, index: int) -> Database:
        return self.dbs[index]

    def __len__(self) -> int:
        return len(self.dbs)

    def swap(self, a: int, b: int) -> None:
        """SWAPDB: exchange contents, keeping each Database's id."""
        da, db = self.dbs[a], self.dbs[b]
        da.data, db.data = db.data, da.data
        da.expires, db.expires = db.expires, da.expires
        da.scan_index = db.scan_index = None

    def flushall(self) -> None:
        for db in self.dbs:
            db.flush()
