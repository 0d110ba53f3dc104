"""Keyspace notifications: the events Redis's commands emit, derived from a command's outcome.

Redis calls notifyKeyspaceEvent from inside each command; here a write's
reply and effects say what happened, so the events of the client's command are
worked out in one place after it ran (`Server.call`), with Redis's names:
INCR emits `incrby`, XADD with a trim that removed entries `xadd` then
`xtrim`, SET ... EX `set` then `expire`, an EXPIRE in the past `del`.
What the outcome does not say is taken before the command runs (`before`):
which keys existed and with what type (`new`, `overwritten`, `type_changed`),
whether XREADGROUP's, XCLAIM's or XAUTOCLAIM's consumer did
(`xgroup-createconsumer`), and which keys a read will miss (`keymiss`).
"""

from __future__ import annotations

from .pubsub import EXPIRED, GENERIC, KEY_MISS, NEW, OVERWRITTEN, STREAM, STRING, TYPE_CHANGED

# The event a successful string write emits, by command.
STRING_EVENTS = {
    "set": "set", "setnx": "set", "setex": "set", "psetex": "set", "getset": "set", "mset": "set", "msetnx": "set",
    "incr": "incrby", "decr": "incrby", "incrby": "incrby", "decrby": "incrby", "incrbyfloat": "incrbyfloat",
    "append": "append", "setrange": "setrange",
}  # fmt: skip
# Commands that may create their key (Redis's dbAdd): `new` precedes their event when it did not exist.
CREATING = frozenset(STRING_EVENTS) | {"xadd", "xgroup|create"}
# Writes that replace a whole value (Redis's setKey): `overwritten` (and `type_changed`) where `new` would be.
SETTING = frozenset({"set", "setnx", "setex", "psetex", "getset", "mset", "msetnx"})
# Writes whose destination may be replaced: `overwritten` after their own event.
REPLACING = frozenset({"rename", "renamenx", "copy"})
# Commands whose consumer argument Redis creates on the way (SCC_DEFAULT: with an event).
CONSUMER_CREATING = frozenset({"xreadgroup", "xclaim", "xautoclaim"})
# `keymiss` (class m): Redis's lookupKeyRead finds no key. Reads look each key argument up once,
# these as many times as listed (XREAD twice, OBJECT without notifying); writes only where listed,
# their first key (COPY's source) unless all keys are read.
# (WATCH never looks its keys up, MEMORY USAGE finds its key with dbFind: no keymiss from either.)
KEYMISS_LOOKUPS = {"xread": 2, "object|encoding": 0, "object|freq": 0, "object|idletime": 0, "object|refcount": 0,
                   "watch": 0, "memory|usage": 0}  # fmt: skip
READING_WRITES = {"getdel": False, "getex": False, "getset": False, "copy": False, "xack": False, "xackdel": False,
                  "xreadgroup": True, "xclaim": False, "xautoclaim": False}  # fmt: skip
# Errors that come after the lookup (a missing key's NOGROUP): its keymiss is sent all the same.
MISS_ERRORS = ("NOGROUP", "ERR no such key")


class Before:
    """What the events need to know from before the command ran."""

    __slots__ = ("existed", "misses", "looked_up")

    def __init__(self, existed, misses: list[bytes], looked_up: list) -> None:
        self.existed = existed  # keys that existed -> their value's type (or keys whose consumer existed)
        self.misses = misses  # keys a read looked up and did not find, once per lookup
        self.looked_up = looked_up  # the read keys' values in lookup order (None: missing), for WRONGTYPE


_TRIMS = (b"MAXLEN", b"MINID")  # an XADD effect that trimmed: `XADD key [ACKED] MAXLEN|MINID = n id ...`


def before(server, client, cmd, argv: list[bytes]) -> Before:
    name, db, now = cmd.name, client.db, server.now
    existed = None
    if name in CREATING:
        existed = {key: type(db.data[key]) for key in cmd.get_keys(argv) if key in db.data and not db.is_expired(key, now)}
    elif name in REPLACING:
        target = _target_db(server, client, name, argv)
        dst = argv[2]
        existed = {dst: type(target.data[dst])} if dst in target.data and not target.is_expired(dst, now) else {}
    elif name in CONSUMER_CREATING:
        existed = {key for key in _consumer_keys(name, argv) if _has_consumer(db, name, argv, key)}
    misses: list[bytes] = []
    if server.pubsub.flags & KEY_MISS:
        if not cmd.write:
            lookups = KEYMISS_LOOKUPS.get(name, 1)
            keys = cmd.get_keys(argv) if lookups else ()
        elif name in READING_WRITES or (name == "set" and b"GET" in (arg.upper() for arg in argv[3:])):
            lookups = 1
            keys = cmd.get_keys(argv)
            if not READING_WRITES.get(name):
                keys = keys[:1]
        else:
            keys, lookups = (), 0
        looked_up = [(key, None if db.is_expired(key, now) else db.data.get(key)) for key in keys]
        # XREAD looks all its keys up, then all of them again
        misses = [key for key, value in looked_up if value is None] * lookups
        return Before(existed, misses, looked_up)
    return Before(existed, misses, [])


def key_misses(server, db: int, before_state: Before, error: str | None = None, wanted: type = object) -> None:
    """The keymiss events of a command (of one that failed, only if it failed after its lookup)."""
    misses = before_state.misses
    if error is not None:
        if error.startswith("WRONGTYPE"):  # the keys missed before the one of another type
            misses = []
            for key, value in before_state.looked_up:
                if value is not None and not isinstance(value, wanted):
                    break
                if value is None:
                    misses.append(key)
        elif not error.startswith(MISS_ERRORS):
            return
        else:
            misses = misses[:1]
    pubsub = server.pubsub
    for key in misses:
        pubsub.notify(KEY_MISS, "keymiss", key, db)


def _target_db(server, client, name: str, argv: list[bytes]):
    """The database COPY ... DB n writes to (RENAME: the client's)."""
    if name == "copy":
        upper = [arg.upper() for arg in argv[3:]]
        if b"DB" in upper:
            index = upper.index(b"DB") + 4
            if index < len(argv) and argv[index].isdigit() and int(argv[index]) < len(server.keyspace.dbs):
                return server.keyspace.dbs[int(argv[index])]
    return client.db


def _consumer_keys(name: str, argv: list[bytes]) -> list[bytes]:
    if name != "xreadgroup":
        return [argv[1]]
    upper = [arg.upper() for arg in argv]
    if b"STREAMS" not in upper:
        return []
    start = upper.index(b"STREAMS") + 1
    return argv[start : start + (len(argv) - start) // 2]


def _has_consumer(db, name: str, argv: list[bytes], key: bytes) -> bool:
    group_name, consumer = argv[2], argv[3]  # XREADGROUP GROUP group consumer, XCLAIM key group consumer
    stream = db.data.get(key)
    group = getattr(stream, "groups", {}).get(group_name)
    return group is not None and consumer in group.consumers


def events(server, client, cmd, argv: list[bytes], reply, effects: list, before_state: Before) -> list[tuple[int, str, bytes, int]]:
    """(class, event, key, db) in Redis's order for a write that ran."""
    name, db = cmd.name, client.db.id
    out: list[tuple[int, str, bytes, int]] = []

    def new(key: bytes, target: int = db) -> None:
        out.append((NEW, "new", key, target))

    existed = before_state.existed

    def created(key: bytes) -> None:
        if existed is None:
            return
        if key not in existed:
            new(key)
        elif name in SETTING:
            replaced(key, bytes, db)

    def replaced(key: bytes, now_type: type, target: int) -> None:
        out.append((OVERWRITTEN, "overwritten", key, target))
        if existed[key] is not now_type:
            out.append((TYPE_CHANGED, "type_changed", key, target))

    if not cmd.write:
        return out
    if name in CONSUMER_CREATING:
        for key in _consumer_keys(name, argv):
            if key not in existed and _has_consumer(client.db, name, argv, key):
                out.append((STREAM, "xgroup-createconsumer", key, db))
        return out
    if not effects:
        return out
    event = STRING_EVENTS.get(name)
    if event is not None:
        if name in ("mset", "msetnx"):
            for index in range(1, len(argv), 2):
                created(argv[index])
                out.append((STRING, "set", argv[index], db))
            return out
        key = argv[1]
        created(key)
        out.append((STRING, event, key, db))
        if name in ("setex", "psetex") or (name == "set" and b"PXAT" in effects[0][3:]):
            out.append((GENERIC, "expire", key, db))
        return out
    first = effects[0]
    verb = first[0].upper()
    if name in ("del", "unlink"):
        out += [(GENERIC, "del", key, db) for key in first[1:]]
    elif name in ("getdel", "getex", "expire", "pexpire", "expireat", "pexpireat", "persist"):
        out.append((GENERIC, {b"DEL": "del", b"PEXPIREAT": "expire", b"PERSIST": "persist"}[verb], argv[1], db))
    elif name in ("rename", "renamenx"):
        new(argv[2])
        out += [(GENERIC, "rename_from", argv[1], db), (GENERIC, "rename_to", argv[2], db)]
        if argv[2] in existed:
            replaced(argv[2], type(client.db.data.get(argv[2])), db)
    elif name == "copy":
        target = int(first[4]) if len(first) > 4 else db
        new(argv[2], target)
        out.append((GENERIC, "copy_to", argv[2], target))
        if argv[2] in existed:
            replaced(argv[2], type(server.keyspace.dbs[target].data.get(argv[2])), target)
    elif name == "move":
        target = int(first[2])
        new(argv[1], target)
        out += [(GENERIC, "move_from", argv[1], db), (GENERIC, "move_to", argv[1], target)]
    elif name == "xadd" and verb == b"XADD":  # not an IDMP repeat's expiry alone
        created(argv[1])
        out.append((STREAM, "xadd", argv[1], db))
        if first[2] in _TRIMS or (first[2] == b"ACKED" and first[3] in _TRIMS):  # the effect's trim, not a field
            out.append((STREAM, "xtrim", argv[1], db))
    elif name in ("xtrim", "xdel", "xsetid"):
        out.append((STREAM, name, argv[1], db))
    elif name in ("xdelex", "xackdel"):
        if any(effect[0] == b"XDEL" for effect in effects):  # Redis 8.2 sends `xdel` when entries went
            out.append((STREAM, "xdel", argv[1], db))
    elif name.startswith("xgroup|"):
        if name == "xgroup|create":
            created(argv[2])
        elif name == "xgroup|createconsumer" and reply != 1:  # the effect form only pinned an existing consumer's times
            return out
        out.append((STREAM, name.replace("|", "-"), argv[2], db))
    return out


def notify_call(server, client, cmd, argv: list[bytes], reply, effects: list, before_state: Before) -> None:
    """The events of a command that ran: its key misses, then what its write did."""
    key_misses(server, client.db.id, before_state)
    pubsub = server.pubsub
    for cls, event, key, db in events(server, client, cmd, argv, reply, effects, before_state):
        pubsub.notify(cls, event, key, db)


def notify_expired(server, db: int, keys: list[bytes]) -> None:
    """Keys removed by lazy or active expiry: `expired` each, before what the command itself emits."""
    pubsub = server.pubsub
    if pubsub.active:
        for key in keys:
            pubsub.notify(EXPIRED, "expired", key, db)


def value_type(cmd) -> type:
    """The value type a command of this group reads (what its WRONGTYPE is about)."""
    from storage.stream import Stream

    return {"stream": Stream, "string": bytes}.get(cmd.group, object)
