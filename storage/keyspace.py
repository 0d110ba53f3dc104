"""Databases: keys to values, with expiry times.

Values are `bytes` for strings and `storage.stream.Stream` for streams. Keys
removed by lazy expiry are remembered in `expired` so the server can
propagate them as DELs (replicas and the AOF never expire keys by their own
clock, exactly as in Redis).
"""

from __future__ import annotations

from itertools import islice

from protocol.errors import WRONGTYPE, ReplyError


def type_name(value: object) -> str:
    """The name TYPE reports for a value."""
    if type(value) is bytes:
        return "string"
    return getattr(value, "TYPE", "none")


class Database:
    __slots__ = ("id", "data", "expires", "expired")

    def __init__(self, id: int) -> None:
        self.id = id
        self.data: dict[bytes, object] = {}
        self.expires: dict[bytes, int] = {}  # key -> absolute unix time in ms
        self.expired: list[bytes] = []  # removed by lazy expiry, to propagate as DEL

    def __len__(self) -> int:
        return len(self.data)

    def lookup(self, key: bytes, now: int):
        """The live value at key, or None; an expired key is removed on the way."""
        expires = self.expires
        if expires:
            when = expires.get(key)
            if when is not None and when <= now and now:
                self._expire(key)
                return None
        return self.data.get(key)

    def lookup_type(self, key: bytes, now: int, kind: type):
        """The value at key if it is of `kind`, None if absent; WRONGTYPE otherwise."""
        value = self.lookup(key, now)
        if value is not None and type(value) is not kind:
            raise ReplyError(WRONGTYPE)
        return value

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
        self.data.clear()
        self.expires.clear()

    def expire_cycle(self, now: int, budget: int = 20) -> list[bytes]:
        """Active expiry: remove up to `budget` expired keys sampled from the TTL table."""
        removed = []
        if not self.expires:
            return removed
        for key, when in list(islice(self.expires.items(), budget * 4)):
            if when <= now:
                del self.data[key]
                del self.expires[key]
                removed.append(key)
                if len(removed) >= budget:
                    break
        return removed


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

    def flushall(self) -> None:
        for db in self.dbs:
            db.flush()
