"""Running consumption-based retention: after stream writes and on the server's cron.

The decision (storage.retention.plan) is taken once, on the primary, and
travels as effects that replay it exactly: `XTRIM key MINID = <first kept ID>`
(`MAXLEN = 0` when nothing is kept) followed by `XRETENTION SETSTATE key ...`
with the counters as absolute values. Loading clients and replicas never run
retention themselves; they apply those effects.

The server keeps the (db, key) pairs of streams with a policy in
`server.retained`, so the cron visits only those, in turn: a key is added by
XRETENTION SET, dropped when the cron finds it gone, and the whole keyspace
is scanned again after a load, a promotion or a command that moves keys
(RENAME, MOVE, SWAPDB, COPY, RESTORE, FLUSH*).
"""

from __future__ import annotations

from storage import retention as policy_store
from storage.stream import Stream
from storage.stream_id import format_id

from .maxmemory import key_overhead
from .pubsub import STREAM as STREAM_EVENTS

Effects = list[list[bytes]]



STATS = ("stream_retention_runs", "stream_retention_truncated_entries", "stream_retention_lost_entries",
         "stream_release_updates", "stream_release_rejected")  # fmt: skip
MOVES_KEYS = frozenset({"rename", "renamenx", "move", "swapdb", "copy", "restore", "flushall", "flushdb"})
CRON_STREAMS = 64  # streams visited per cron tick at most


class Retained:
    """The streams with a policy, by (db, key); `rescan` asks for a full keyspace scan."""

    __slots__ = ("keys", "rescan", "primary")

    def __init__(self) -> None:
        self.keys: dict[tuple[int, bytes], None] = {}  # insertion order: the cron's round robin
        self.rescan = True
        self.primary = True


def install(server) -> None:
    """Give a server its registry and INFO counters."""
    server.retained = Retained()
    for name in STATS:
        server.stats.setdefault(name, 0)


def run(server, db: int, key: bytes, stream: Stream) -> Effects:
    """One retention run for the stream at key: trim it and return the effects, or [] when nothing goes."""
    retention = stream.retention
    policy = retention.policy if retention is not None else None
    if policy is None:
        return []
    now = server.now
    minimum, maximum = policy
    by_bytes = (minimum is not None and minimum[0] == b"bytes") or (maximum is not None and maximum[0] == b"bytes")
    decided = policy_store.plan(stream, retention, now, extra_bytes=key_overhead(key) if by_bytes else 0)
    server.stats["stream_retention_runs"] += 1
    if decided is None:
        return []
    before = {name: role.entries_lost for name, role in retention.roles.items()}
    lost_before = retention.entries_lost
    policy_store.account(stream, retention, decided, now)
    if decided.keep_from is None:
        stream.trim(maxlen=0)
        trim = [b"XTRIM", key, b"MAXLEN", b"=", b"0"]
    else:
        stream.trim(minid=decided.keep_from)
        trim = [b"XTRIM", key, b"MINID", b"=", format_id(decided.keep_from)]
    server.stats["stream_retention_truncated_entries"] += decided.removed
    server.stats["stream_retention_lost_entries"] += retention.entries_lost - lost_before
    if server.pubsub.active and decided.removed:  # (a run that only dropped empty nodes removed no entry)
        server.pubsub.notify(STREAM_EVENTS, "xtrim", key, db)  # what XTRIM itself sends
    return [trim, state_effect(key, retention, before)]


def state_effect(key: bytes, retention, before: dict[bytes, int] | None = None) -> list[bytes]:
    """XRETENTION SETSTATE: the counters as they are now (groups whose entries-lost changed, or all)."""
    effect = [
        b"XRETENTION", b"SETSTATE", key, b"ENTRIES-TRUNCATED", b"%d" % retention.entries_truncated,
        b"ENTRIES-LOST", b"%d" % retention.entries_lost, b"LAST-RUN", b"%d" % retention.last_run,
    ]  # fmt: skip
    for name, role in retention.roles.items():
        if before is None or before.get(name) != role.entries_lost:
            effect += [b"GROUP", name, b"%d" % role.entries_lost, format_id(role.release)]
    return effect


def after_write(server, client, cmd, argv: list[bytes], effects: Effects) -> Effects:
    """Called by Server.call after a write while some stream has a policy: retention for the keys it touched."""
    if cmd.group != "stream":
        if cmd.name in MOVES_KEYS:
            server.retained.rescan = True
        return effects
    if client.loading or (server.replication is not None and server.replication.master is not None):
        return effects
    extra: Effects = []
    db = client.db
    for key in (argv[1],) if cmd.keys == (1, 1, 1) else cmd.get_keys(argv):
        stream = db.data.get(key)
        if type(stream) is Stream and stream.retention is not None:
            extra += run(server, db.id, key, stream)
    return effects + extra if extra else effects


def _is_primary(server) -> bool:
    replication = server.replication
    return replication is None or replication.master is None


def cron(server) -> None:
    """Idle streams shrink too: run retention for up to CRON_STREAMS streams with a policy per tick."""
    retained = server.retained
    if not _is_primary(server):
        retained.primary = False
        return
    if not retained.primary:  # promoted: our registry was never kept
        retained.primary = True
        retained.rescan = True
    if server.loading or server.pause is not None:
        return
    if retained.rescan:
        retained.rescan = False
        retained.keys.clear()
        for db in server.keyspace.dbs:
            for key, value in db.data.items():
                if type(value) is Stream and value.retention is not None and value.retention.policy is not None:
                    retained.keys[(db.id, key)] = None
    visited = 0
    for db_id, key in list(retained.keys):
        if visited == CRON_STREAMS:
            break
        visited += 1
        retained.keys.pop((db_id, key))
        db = server.keyspace.dbs[db_id]
        stream = db.data.get(key)
        if db.is_expired(key, server.now) or type(stream) is not Stream or stream.retention is None or stream.retention.policy is None:
            continue
        retained.keys[(db_id, key)] = None  # back, last in the round
        effects = run(server, db_id, key, stream)
        if effects:
            server.after_write(db_id, effects)


def retention_commands(key: bytes, stream: Stream):
    """The commands that rebuild a stream's retention state (AOF rewrite): policy, roles, then counters."""
    retention = stream.retention
    policy_store.dump(stream)  # forgets the roles of destroyed groups
    if retention.policy is not None:
        effect = [b"XRETENTION", b"SET", key, b"CONSUMPTION"]
        for is_min, limit in zip((True, False), retention.policy, strict=True):
            if limit is not None:
                effect += [(b"MIN-" if is_min else b"MAX-") + limit[0].upper(), b"%d" % limit[1]]
        yield effect
    for name, role in retention.roles.items():
        if role.mode != policy_store.NONE:
            yield [b"XGROUP", b"SETCONFIG", key, name, b"SUBSCRIBER", role.mode.upper()]
    yield state_effect(key, retention)
