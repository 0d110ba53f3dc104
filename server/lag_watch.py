"""The Burrow windows the server keeps for lag-status (XGROUPLAG), sampled by the cron.

A group gets a window the first time XGROUPLAG reports on it; from then on
the cron samples it once a second (and every XGROUPLAG call samples it too),
recording a sample only when the group did something (storage/burrow.py).
Windows are in memory only: derived, monitoring state that a restart or a
replica starts afresh, like Burrow's own. At most MAX_WATCHED groups are
watched; the oldest watched one makes room for a new one.
"""

from __future__ import annotations

from storage.backlog import ack_floor
from storage.burrow import LagWindow
from storage.lag import exact_lag

SAMPLE_MS = 1000
MAX_WATCHED = 10_000

_watches: dict[int, LagWatch] = {}  # id(server) -> its watch (Server has no __weakref__)


class LagWatch:
    __slots__ = ("server", "windows", "last_tick")

    def __init__(self, server) -> None:
        self.server = server
        self.windows: dict[tuple[int, bytes, bytes], tuple[object, LagWindow]] = {}
        self.last_tick = 0

    def observe(self, db_id: int, key: bytes, name: bytes, stream, group, now: int) -> LagWindow:
        """Sample the group now (if it did something) and return its window, made if new."""
        slot = (db_id, key, name)
        held = self.windows.get(slot)
        if held is None or held[0] is not group:  # new, or a group recreated under the same name
            if held is None and len(self.windows) >= MAX_WATCHED:
                del self.windows[next(iter(self.windows))]
            held = self.windows[slot] = (group, LagWindow())
        window = held[1]
        backlog = exact_lag(stream, group) + len(group.pel)
        activity = max((c.seen_time for c in group.consumers.values()), default=0)
        window.observe(now, (ack_floor(group), group.last_id), backlog, activity)
        return window

    def tick(self, now: int) -> None:
        """The cron's sampling, once per SAMPLE_MS: every watched group still there."""
        if now - self.last_tick < SAMPLE_MS:
            return
        self.last_tick = now
        dbs = self.server.keyspace.dbs
        for slot, (group, _window) in list(self.windows.items()):
            db_id, key, name = slot
            stream = dbs[db_id].data.get(key) if db_id < len(dbs) else None
            groups = getattr(stream, "groups", None)
            if groups is None or groups.get(name) is not group:
                del self.windows[slot]  # the key or the group is gone
                continue
            self.observe(db_id, key, name, stream, group, now)


def lag_watch(server) -> LagWatch:
    watch = _watches.get(id(server))
    if watch is None or watch.server is not server:
        watch = _watches[id(server)] = LagWatch(server)
    return watch


def cron(server, now: int) -> None:
    """Called by the server's cron: sample the watched groups once a second."""
    watch = _watches.get(id(server))
    if watch is not None and watch.server is server and watch.windows:
        watch.tick(now)
