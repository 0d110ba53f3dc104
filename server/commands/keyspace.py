"""Generic key commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, EXPIRE and friends.

Effects follow one rule: what is propagated is the exact outcome, never the
request. Relative expiry becomes `PEXPIREAT key <abs-ms>`, an expiry already
in the past becomes `DEL key`, RENAMENX becomes RENAME, and a command that
changed nothing propagates nothing.
"""

from __future__ import annotations

import re

from protocol.errors import NO_SUCH_KEY, SYNTAX, ReplyError, arg_text
from protocol.reply import OK, Simple
from storage.keyspace import type_name
from storage.scan import ScanBuilder

from ..blocking import Block
from ..command import command, container
from .args import LLONG_MAX, LLONG_MIN, help_reply, int32_arg, read_lookup, to_int

# The names TYPE answers and SCAN ... TYPE accepts (Redis's obj_type_name).
TYPE_NAMES = frozenset((b"string", b"list", b"set", b"zset", b"hash", b"stream"))
ULONG_MAX = (1 << 64) - 1


@command("del", -2, "write", keys=(1, -1, 1), group="generic", summary="Deletes one or more keys.",
         complexity="O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).")
def del_(ctx, argv):
    """DEL key [key ...] -> number of keys removed; propagates DEL of those only."""
    db, now = ctx.db, ctx.server.now
    removed = [key for key in argv[1:] if db.delete(key, now)]
    return len(removed), ([[b"DEL", *removed]] if removed else [])


@command("unlink", -2, "write fast", keys=(1, -1, 1), group="generic", since="4.0.0",
         summary="Asynchronously deletes one or more keys.",
         complexity="O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.")
def unlink(ctx, argv):
    """UNLINK key [key ...]: DEL (memory is reclaimed by Python either way)."""
    return del_(ctx, argv)


@command("exists", -2, "readonly fast", keys=(1, -1, 1), group="generic", since="1.0.0",
         summary="Determines whether one or more keys exist.", complexity="O(N) where N is the number of keys to check.")
def exists(ctx, argv):
    """EXISTS key [key ...] -> how many of the arguments exist (repeats count again)."""
    server = ctx.server
    db, now = ctx.db, server.now
    if len(argv) == 2:  # the usual form: no generator, and a lookup call only for an expired key (as GET)
        key = argv[1]
        found = key in db.data
        if found and db.expires:
            when = db.expires.get(key)
            if when is not None and when < now:
                found = db.lookup(key, now) is not None  # the rare path: expired (see Database.expiry)
        if found:
            server.keyspace_hits += 1
            return 1
        server.keyspace_misses += 1
        return 0
    found = sum(1 for key in argv[1:] if db.lookup(key, now) is not None)
    server.keyspace_hits += found  # each key is a read lookup in Redis: a hit or a miss
    server.keyspace_misses += len(argv) - 1 - found
    return found


@command("type", 2, "readonly fast", keys=(1, 1, 1), group="generic", summary="Determines the type of value stored at a key.")
def type_(ctx, argv):
    """TYPE key -> string, stream... or none."""
    value = read_lookup(ctx, argv[1])
    return Simple(type_name(value).encode()) if value is not None else Simple(b"none")


@command("keys", 2, "readonly", group="generic", summary="Returns all key names that match a pattern.",
         complexity="O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.")
def keys(ctx, argv):
    """KEYS pattern -> matching live keys, in no particular order."""
    return ctx.db.keys(argv[1], ctx.server.now)


_STRING2LL = re.compile(rb"0|-?[1-9][0-9]*")  # what Redis's strict string2ll() reads
_STRTOULL = re.compile(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)")  # what C's strtoull() reads, to the end


def parse_cursor(arg: bytes) -> int:
    """A SCAN cursor as Redis 8 reads it (string2ull): a strict integer, which must not be negative, or
    else anything strtoull() reads whole, so leading spaces, '+', leading zeros and '-' (wrapping) pass.

    Redis reads the argument as a C string: a NUL byte ends it."""
    text = arg.split(b"\0", 1)[0]
    if len(text) <= 20 and _STRING2LL.fullmatch(text) and LLONG_MIN <= (value := int(text)) <= LLONG_MAX:
        if value < 0:
            raise ReplyError("ERR invalid cursor")
        return value
    match = _STRTOULL.fullmatch(text)
    digits = match[2].lstrip(b"0") if match else b""
    if match is None or len(digits) > 20 or (value := int(digits or b"0")) > ULONG_MAX:
        raise ReplyError("ERR invalid cursor")
    return (-value) & ULONG_MAX if match[1] == b"-" else value


@command("scan", -2, "readonly", group="generic", since="2.8.0",
         summary="Iterates over the key names in the database.",
         complexity="O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
         waits=True)
def scan(ctx, argv):
    """SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] -> [next cursor, keys].

    The cursor is a position in hash order (storage/scan.py explains why every
    key present for a whole iteration is returned). COUNT is how many keys a
    step examines before MATCH and TYPE filter them, as Redis's is a number
    of buckets: a step may return fewer keys than COUNT, even none.
    """
    cursor = parse_cursor(argv[1])
    count = 10
    match = None
    kind = None
    index, argc = 2, len(argv)
    while index < argc:
        option = argv[index].lower()
        has_value = argc - index >= 2
        if option == b"count" and has_value:
            count = to_int(argv[index + 1])
            if count < 1:
                raise ReplyError(SYNTAX)
            index += 2
        elif option == b"match" and has_value:
            match = None if argv[index + 1] == b"*" else argv[index + 1]
            index += 2
        elif option == b"type" and has_value:
            kind = argv[index + 1].lower()
            index += 2
        elif option == b"novalues":
            raise ReplyError("ERR NOVALUES option can only be used in HSCAN")
        else:
            raise ReplyError(SYNTAX)
    if kind is not None and kind not in TYPE_NAMES:
        return [b"0", []]  # Redis 7.x answers an unknown type name with an empty iteration
    db = ctx.db
    if len(db.data) > SLICED_SCAN_KEYS and db.needs_scan_index(cursor) and not ctx.cannot_block:
        return _scan_after_snapshot(ctx.server, db, lambda index: _scan_step(ctx.server, db, cursor, count, match, kind, index, True))
    return _scan_step(ctx.server, db, cursor, count, match, kind, None)


SLICED_SCAN_KEYS = 65536  # a bigger keyspace's snapshot is sorted a slice at a time, the caller waiting
SCAN_SLICE_KEYS = 16384  # keys sorted or merged per event-loop turn (~5-10 ms)


def _scan_after_snapshot(server, db, reply) -> Block:
    """SCAN on a big keyspace: the snapshot sorted in slices between other clients' events (Redis's
    SCAN never holds the server: its cursor walks the hash table). The caller waits, on an internal
    wait that Redis's client would not be in (not a blocked client to INFO, CLIENT LIST, CLIENT
    UNBLOCK or CLIENT PAUSE), and gets its reply once the snapshot is ready."""
    builder = ScanBuilder(db.data)
    block = Block([], 0, lambda: reply(builder.index), internal=True)

    def work() -> None:
        if builder.step(SCAN_SLICE_KEYS):
            server.finish_wait(block)
        else:
            server.loop.call_soon(work)

    server.loop.call_soon(work)
    return block


def _scan_step(server, db, cursor: int, count: int, match: bytes | None, kind: bytes | None, fresh, woken: bool = False) -> list:
    now = server.now
    cursor, found = db.scan(cursor, count, now, fresh)
    if woken and db.expired:  # run outside execute(), which propagates a command's expired keys
        server.propagate_expired(db)
    if match is not None:
        from storage.glob import compile_pattern

        matcher = compile_pattern(match)
        found = [key for key in found if matcher(key)]
    if kind is not None:
        data = db.data
        found = [key for key in found if type_name(data[key]).encode() == kind]
    return [b"%d" % cursor, found]


@command("randomkey", 1, "readonly", group="generic", summary="Returns a random key name from the database.")
def randomkey(ctx, argv):
    """RANDOMKEY -> a random live key, or nil when the database is empty."""
    return ctx.db.random_key(ctx.server.now)


@command("dbsize", 1, "readonly fast", group="server", summary="Returns the number of keys in the database.")
def dbsize(ctx, argv):
    """DBSIZE -> the number of keys (expired ones not yet removed included, as in Redis)."""
    return len(ctx.db)


def _rename(ctx, argv, nx: bool):
    src, dst = argv[1], argv[2]
    db, now = ctx.db, ctx.server.now
    if db.lookup(src, now) is None:
        raise ReplyError(NO_SUCH_KEY)
    if src == dst:
        return (0 if nx else OK), []
    if db.lookup(dst, now) is not None and nx:
        return 0, []
    db.rename(src, dst)
    return (1 if nx else OK), [[b"RENAME", src, dst]]


@command("rename", 3, "write", keys=(1, 2, 1), group="generic", summary="Renames a key and overwrites the destination.")
def rename(ctx, argv):
    """RENAME key newkey: the value and its TTL move; onto itself is OK (if it exists)."""
    return _rename(ctx, argv, nx=False)


@command("renamenx", 3, "write fast", keys=(1, 2, 1), group="generic",
         summary="Renames a key only when the target key name doesn't exist.")
def renamenx(ctx, argv):
    """RENAMENX key newkey -> 1 if renamed, 0 if newkey exists (or is key)."""
    return _rename(ctx, argv, nx=True)


def _flush_lazily(ctx, argv: list[bytes]) -> bool:
    """FLUSHALL/FLUSHDB [ASYNC | SYNC]: whether the old keys are freed as Redis 8 frees them, in the
    background (here: a slice at a time after the reply, counted in INFO's lazyfreed_objects). Not a
    synchronous flush from a client that cannot wait (MULTI/EXEC, loading): Redis frees that at once."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in (b"sync", b"async")):
        raise ReplyError(SYNTAX)
    mode = argv[1].lower() if len(argv) == 2 else (b"async" if ctx.server.config["lazyfree-lazy-user-flush"] else b"sync")
    return mode == b"async" or not ctx.cannot_block


def _flush(server, db, lazily: bool) -> None:
    if lazily:
        server.lazyfree.free(*db.detach())
    else:
        db.flush()


@command("flushall", -1, "write", group="server", summary="Removes all keys from all databases.",
         complexity="O(N) where N is the total number of keys in all databases")
def flushall(ctx, argv):
    """FLUSHALL [ASYNC | SYNC]"""
    lazily = _flush_lazily(ctx, argv)
    server = ctx.server
    for db in server.keyspace.dbs:
        server.touch_watched_db(db.id)
    if server.tracking is not None:  # client-side caching: a null invalidation to every tracking client
        server.tracking.invalidate_on_flush(ctx, argv)
    server.dirty += sum(len(db.data) for db in server.keyspace.dbs)  # Redis counts the keys removed (server/dirty.py)
    for db in server.keyspace.dbs:
        _flush(server, db, lazily)
    if server.persistence is not None and server.config["save"] and not ctx.loading:
        # as Redis: with save points set, the emptied dataset is saved at once, so an old
        # snapshot cannot bring the keys back after a restart
        server.persistence.flushall_save()
    return OK, [[b"FLUSHALL"]]


@command("flushdb", -1, "write", group="server", summary="Remove all keys from the current database.",
         complexity="O(N) where N is the number of keys in the selected database")
def flushdb(ctx, argv):
    """FLUSHDB [ASYNC | SYNC]"""
    lazily = _flush_lazily(ctx, argv)
    ctx.server.touch_watched_db(ctx.db.id)
    if ctx.server.tracking is not None:  # client-side caching: a null invalidation to every tracking client
        ctx.server.tracking.invalidate_on_flush(ctx, argv)
    ctx.server.dirty += len(ctx.db.data)  # the keys removed, as FLUSHALL
    _flush(ctx.server, ctx.db, lazily)
    return OK, [[b"FLUSHDB"]]


def _db_index(arg: bytes, error: str) -> int:
    index = to_int(arg, error)
    if not -(2**31) <= index < 2**31:
        raise ReplyError(error)
    return index


@command("swapdb", 3, "write fast", group="server", since="4.0.0", summary="Swaps two Redis databases.",
         complexity="O(N) where N is the count of clients watching or blocking on keys from both databases.")
def swapdb(ctx, argv):
    """SWAPDB index1 index2: clients selecting either database see the other's keys."""
    first = _db_index(argv[1], "ERR invalid first DB index")
    second = _db_index(argv[2], "ERR invalid second DB index")
    server = ctx.server
    count = len(server.keyspace)
    if not (0 <= first < count and 0 <= second < count):
        raise ReplyError("ERR DB index is out of range")
    if first == second:
        return OK, []
    server.touch_watched_db(first, second)
    server.touch_watched_db(second, first)
    server.keyspace.swap(first, second)
    return OK, [[b"SWAPDB", b"%d" % first, b"%d" % second]]


# -- expiry -------------------------------------------------------------------

_EXPIRE_FLAGS = {b"NX": 1, b"XX": 2, b"GT": 4, b"LT": 8}
_SECONDS_MIN, _SECONDS_MAX = -(-LLONG_MIN // 1000), LLONG_MAX // 1000  # seconds whose ms fit a long long


def _invalid_expire(argv) -> ReplyError:
    return ReplyError(f"ERR invalid expire time in '{argv[0].decode(errors='replace').lower()}' command")


def _expire_flags(argv) -> int:
    """EXPIRE's NX/XX/GT/LT options as bits (1, 2, 4, 8), refused as expireGenericCommand refuses them."""
    flags = 0
    for option in argv[3:]:
        flag = _EXPIRE_FLAGS.get(option.upper())
        if flag is None:
            raise ReplyError(f"ERR Unsupported option {arg_text(option)}")
        flags |= flag
    if flags & 1 and flags & 14:
        raise ReplyError("ERR NX and XX, GT or LT options at the same time are not compatible")
    if flags & 12 == 12:
        raise ReplyError("ERR GT and LT options at the same time are not compatible")
    return flags


def _expire_allowed(flags: int, current: int | None, when: int) -> bool:
    """Whether the options let `when` replace the key's TTL `current` (None: no TTL, an infinite one)."""
    if flags & 1:  # NX
        return current is None
    if flags & 2 and current is None:  # XX
        return False
    if flags & 4 and (current is None or when <= current):  # GT
        return False
    return not (flags & 8 and current is not None and when >= current)  # LT


def _expire(ctx, argv, unit_ms: int, relative: bool):
    """Redis's expireGenericCommand: options, then the time, then the key."""
    flags = _expire_flags(argv) if len(argv) > 3 else 0
    when = to_int(argv[2])
    if unit_ms == 1000:
        if not _SECONDS_MIN <= when <= _SECONDS_MAX:
            raise _invalid_expire(argv)
        when *= 1000
    now = ctx.server.now
    if relative:
        if when > LLONG_MAX - now:
            raise _invalid_expire(argv)
        when += now
    key, db = argv[1], ctx.db
    if db.lookup(key, now) is None:
        return 0, []
    if flags and not _expire_allowed(flags, db.expires.get(key), when):
        return 0, []
    if when <= now and not ctx.loading:
        db.delete(key, now)
        return 1, [[b"DEL", key]]
    db.set_expire(key, when)
    return 1, [[b"PEXPIREAT", key, b"%d" % when]]


_EXPIRE_DOC = dict(group="generic", complexity="O(1)")


@command("expire", -3, "write fast", keys=(1, 1, 1), summary="Sets the expiration time of a key in seconds.", **_EXPIRE_DOC)
def expire(ctx, argv):
    """EXPIRE key seconds [NX | XX | GT | LT]"""
    return _expire(ctx, argv, 1000, relative=True)


@command("pexpire", -3, "write fast", keys=(1, 1, 1), since="2.6.0",
         summary="Sets the expiration time of a key in milliseconds.", **_EXPIRE_DOC)
def pexpire(ctx, argv):
    """PEXPIRE key milliseconds [NX | XX | GT | LT]"""
    return _expire(ctx, argv, 1, relative=True)


@command("expireat", -3, "write fast", keys=(1, 1, 1), since="1.2.0",
         summary="Sets the expiration time of a key to a Unix timestamp.", **_EXPIRE_DOC)
def expireat(ctx, argv):
    """EXPIREAT key unix-time-seconds [NX | XX | GT | LT]"""
    return _expire(ctx, argv, 1000, relative=False)


@command("pexpireat", -3, "write fast", keys=(1, 1, 1), since="2.6.0",
         summary="Sets the expiration time of a key to a Unix milliseconds timestamp.", **_EXPIRE_DOC)
def pexpireat(ctx, argv):
    """PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]"""
    return _expire(ctx, argv, 1, relative=False)


def _c_div(value: int, divisor: int) -> int:
    """Integer division truncating toward zero, as C's."""
    quotient = abs(value) // divisor
    return quotient if value >= 0 else -quotient


def _ttl(ctx, key: bytes, unit_ms: int, absolute: bool) -> int:
    """Redis's ttlGenericCommand: -2 no key, -1 no TTL, else the (rounded) time left or the deadline."""
    db, now = ctx.db, ctx.server.now
    if read_lookup(ctx, key) is None:
        return -2
    when = db.expires.get(key)
    if when is None:
        return -1
    ttl = when if absolute else when - now
    if ttl < 0:
        ttl = 0
    return ttl if unit_ms == 1 else _c_div(ttl + 500, 1000)


@command("ttl", 2, "readonly fast", keys=(1, 1, 1), group="generic", summary="Returns the expiration time in seconds of a key.")
def ttl(ctx, argv):
    """TTL key -> seconds left (rounded), -1 without expiry, -2 without key."""
    return _ttl(ctx, argv[1], 1000, absolute=False)


@command("pttl", 2, "readonly fast", keys=(1, 1, 1), group="generic", since="2.6.0",
         summary="Returns the expiration time in milliseconds of a key.")
def pttl(ctx, argv):
    """PTTL key -> milliseconds left, -1 without expiry, -2 without key."""
    return _ttl(ctx, argv[1], 1, absolute=False)


@command("expiretime", 2, "readonly fast", keys=(1, 1, 1), group="generic", since="7.0.0",
         summary="Returns the expiration time of a key as a Unix timestamp.")
def expiretime(ctx, argv):
    """EXPIRETIME key -> the expiry as a Unix time in seconds, -1 or -2."""
    return _ttl(ctx, argv[1], 1000, absolute=True)


@command("pexpiretime", 2, "readonly fast", keys=(1, 1, 1), group="generic", since="7.0.0",
         summary="Returns the expiration time of a key as a Unix milliseconds timestamp.")
def pexpiretime(ctx, argv):
    """PEXPIRETIME key -> the expiry as a Unix time in milliseconds, -1 or -2."""
    return _ttl(ctx, argv[1], 1, absolute=True)


@command("persist", 2, "write fast", keys=(1, 1, 1), group="generic", since="2.2.0",
         summary="Removes the expiration time of a key.")
def persist(ctx, argv):
    """PERSIST key -> 1 if a TTL was removed, else 0 (and nothing propagates)."""
    key, db = argv[1], ctx.db
    if db.lookup(key, ctx.server.now) is None or not db.persist(key):
        return 0, []
    return 1, [[b"PERSIST", key]]


# -- moving and copying keys --------------------------------------------------


@command("touch", -2, "readonly fast", keys=(1, -1, 1), group="generic", since="3.2.1",
         summary="Returns the number of existing keys out of those specified after updating the time they were last accessed.",
         complexity="O(N) where N is the number of keys that will be touched.")
def touch(ctx, argv):
    """TOUCH key [key ...] -> how many of the keys exist: EXISTS, as Millrace keeps no access times."""
    return exists(ctx, argv)


def _target_db(ctx, arg: bytes):
    index = int32_arg(arg)
    keyspace = ctx.server.keyspace
    if not 0 <= index < len(keyspace):
        raise ReplyError("ERR DB index is out of range")
    return keyspace[index]


def _lookup_elsewhere(ctx, db, key: bytes):
    """Look a key up in another database; one found expired is propagated as that database's DEL."""
    value = db.lookup(key, ctx.server.now)
    if db.expired:
        ctx.server.propagate_expired(db)
    return value


@command("move", 3, "write fast", keys=(1, 1, 1), group="generic", summary="Moves a key to another database.")
def move(ctx, argv):
    """MOVE key db -> 1 if moved (with its TTL), 0 if absent here or present there."""
    key, src = argv[1], ctx.db
    dst = _target_db(ctx, argv[2])
    if dst is src:
        raise ReplyError("ERR source and destination objects are the same")
    now = ctx.server.now
    value = src.lookup(key, now)
    if value is None or _lookup_elsewhere(ctx, dst, key) is not None:
        return 0, []
    when = src.expires.get(key)
    src.delete(key, now)
    dst.set(key, value)
    if when is not None:
        dst.set_expire(key, when)
    ctx.server.touch(dst.id, key)
    return 1, [[b"MOVE", key, b"%d" % dst.id]]


@command("copy", -3, "write denyoom", keys=(1, 2, 1), group="generic", since="6.2.0",
         summary="Copies the value of a key to a new key.",
         complexity="O(N) worst case for collections, where N is the number of nested items. O(1) for string values.")
def copy_(ctx, argv):
    """COPY source destination [DB destination-db] [REPLACE] -> 1 if copied (with the TTL), else 0."""
    src = dst = ctx.db
    replace = False
    index, argc = 3, len(argv)
    while index < argc:
        option = argv[index].lower()
        if option == b"replace":
            replace = True
        elif option == b"db" and index + 1 < argc:
            index += 1
            dst = _target_db(ctx, argv[index])
        else:
            raise ReplyError(SYNTAX)
        index += 1
    key, newkey = argv[1], argv[2]
    if src is dst and key == newkey:
        raise ReplyError("ERR source and destination objects are the same")
    now = ctx.server.now
    value = read_lookup(ctx, key)  # the source is read (a hit or a miss), the destination written
    if value is None:
        return 0, []
    existing = _lookup_elsewhere(ctx, dst, newkey) if dst is not src else dst.lookup(newkey, now)
    if existing is not None and not replace:
        return 0, []
    when = src.expires.get(key)
    if type(value) is not bytes:
        import copy

        value = copy.deepcopy(value)
    dst.set(newkey, value)
    if when is not None:
        dst.set_expire(newkey, when)
    effect = [b"COPY", key, newkey, b"DB", b"%d" % dst.id]
    if existing is not None:
        effect.append(b"REPLACE")
    return 1, [effect]


# -- OBJECT -------------------------------------------------------------------

container("object", group="generic", summary="A container for object introspection commands.", since="2.2.3")

OBJECT_HELP = [
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Print this help.",
]

EMBSTR_MAX_SIZE = 41  # key + value bytes Redis 8 still embeds with the object (7.x: a 44-byte value, key apart)
EXPIRE_SIZE = 8  # an embedded expire time


def _integer_encoded(value: bytes) -> bool:
    """Would Redis store this string as an integer (tryObjectEncoding: at most 20 bytes, string2l)?"""
    if len(value) > 20:
        return False
    try:
        to_int(value)
    except ReplyError:
        return False
    return True


@command("object|encoding", 3, "readonly", keys=(2, 2, 1), group="generic", since="2.2.3",
         summary="Returns the internal encoding of a Redis object.")
def object_encoding(ctx, argv):
    """OBJECT ENCODING key -> int, embstr or raw for strings, by content; stream for streams.

    Redis 8 embeds the key, the value and any expire time in one 64-byte allocation when they fit:
    embstr while key, value and the 8 bytes of an expire time add up to at most 41 bytes."""
    key = argv[2]
    value = read_lookup(ctx, key)
    return None if value is None else value_encoding(key, value, ctx.db.ttl(key) is not None)


def value_encoding(key: bytes, value, has_ttl: bool) -> bytes:
    """OBJECT ENCODING's answer for key's value (see there)."""
    if type(value) is not bytes:
        return type_name(value).encode()
    if _integer_encoded(value):
        return b"int"
    size = len(key) + len(value)
    if not has_ttl:
        return b"embstr" if size <= EMBSTR_MAX_SIZE else b"raw"
    # With an expire time: Redis 8.2.3 as measured for every key and value length up to 60 bytes; a key of
    # 32 bytes or more (its longer sds header) also embeds when key and value add up to 40 or 41 bytes
    embedded = size + EXPIRE_SIZE <= EMBSTR_MAX_SIZE or (len(key) >= 32 and 40 <= size <= EMBSTR_MAX_SIZE)
    return b"embstr" if embedded else b"raw"


@command("object|refcount", 3, "readonly", keys=(2, 2, 1), group="generic", since="2.2.3",
         summary="Returns the reference count of a value of a key.")
def object_refcount(ctx, argv):
    """OBJECT REFCOUNT key -> 1. Redis 8 embeds a key's value in its own object, so even the small integers
    that 7.x shared (refcount INT_MAX) are not shared values any more."""
    return None if read_lookup(ctx, argv[2]) is None else 1


@command("object|idletime", 3, "readonly", keys=(2, 2, 1), group="generic", since="2.2.3",
         summary="Returns the time since the last access to a Redis object.")
def object_idletime(ctx, argv):
    """OBJECT IDLETIME key: seconds since the key was last accessed, under an LRU maxmemory-policy; 0 under
    the others, where no access clock is kept (it would cost every command: server/eviction.py)."""
    value = read_lookup(ctx, argv[2])
    if value is None:
        return None
    if "lfu" in ctx.server.config["maxmemory-policy"]:
        raise ReplyError("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
                         "switching between policies at runtime LRU and LFU data will take some time to adjust.")
    clock = ctx.server.access
    return clock.idle(ctx.db.id, argv[2]) if clock is not None else 0


@command("object|freq", 3, "readonly", keys=(2, 2, 1), group="generic", since="4.0.0",
         summary="Returns the logarithmic access frequency counter of a Redis object.")
def object_freq(ctx, argv):
    """OBJECT FREQ key: the key's logarithmic access counter, only under an LFU maxmemory policy (redis-cli --hotkeys)."""
    value = read_lookup(ctx, argv[2])
    if value is None:
        return None
    if "lfu" not in ctx.server.config["maxmemory-policy"]:
        raise ReplyError("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that "
                         "when switching between policies at runtime LRU and LFU data will take some time to adjust.")
    return ctx.server.access.freq(ctx.db.id, argv[2])


@command("object|help", 2, "loading stale", group="generic", since="6.2.0", summary="Returns helpful text about the different subcommands.")
def object_help(ctx, argv):
    """OBJECT HELP"""
    return help_reply(OBJECT_HELP)
