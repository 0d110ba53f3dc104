"""KEYSHARED session timeouts expired by the primary's cron (issue 22), not only by the group's next read.

A member silent for longer than its group's SESSION-TIMEOUT leaves the ring and
releases its pending entries (commands/keyshared.py's `expire_sessions`, the
same decision a read makes), decided here on the primary and propagated as
`XGROUP LEAVE key group consumer`: so XINFO KEYSHARED and CONSUMERS show the
ring as it is also while nobody reads, and replicas and the AOF follow.

Which streams to look at: `server.keyshared_keys`, (db, key) -> stream,
registered when SETCONFIG gives a KEYSHARED group a SESSION-TIMEOUT (also when
the AOF or the primary's stream replays it) and, after a snapshot load, for
every such stream. An entry whose key no longer holds that stream, or whose
groups no longer have a timeout, is dropped when visited: a stream moved by
RENAME, MOVE or SWAPDB is registered again by its next SETCONFIG or restart
(its reads still expire members meanwhile).
"""

from __future__ import annotations

from storage.stream import Stream

from .commands.keyshared import expire_sessions

CRON_STREAMS = 64  # streams visited per cron tick, the oldest visit first


def register(server, db: int, key: bytes, stream: Stream) -> None:
    server.keyshared_keys[(db, key)] = stream


def _timed(stream: Stream) -> bool:
    """Whether one of the stream's groups is KEYSHARED with a session timeout."""
    return any(g.keyshared is not None and g.keyshared.session_timeout for g in stream.groups.values())


def register_loaded(server) -> None:
    """After a snapshot replaced the databases (O(keys), once per load)."""
    server.keyshared_keys = {}
    for db in server.keyspace.dbs:
        for key, value in db.data.items():
            if type(value) is Stream and value.groups and _timed(value):
                register(server, db.id, key, value)


def cron(server, now: int) -> None:
    """On a primary, outside loading and CLIENT PAUSE: members past their timeout leave (XGROUP LEAVE effects)."""
    registry = server.keyshared_keys
    if not registry or server.loading or server.pause is not None:
        return
    if server.replication is not None and server.replication.master is not None:
        return  # a replica applies its primary's decisions
    for home in list(registry)[:CRON_STREAMS]:
        stream = registry.pop(home)
        db_id, key = home
        database = server.keyspace.dbs[db_id]
        if database.data.get(key) is not stream or not _timed(stream) or database.is_expired(key, now):
            continue
        registry[home] = stream  # back, last in the round
        effects: list = []
        for name, group in stream.groups.items():
            if group.keyshared is not None and group.keyshared.session_timeout:
                expire_sessions(stream, group, key, name, None, now, effects)
        if effects:
            server.after_write(db_id, effects)
