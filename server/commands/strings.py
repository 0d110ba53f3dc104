"""String commands: applications keep offsets and flags beside their streams.

GET and plain `SET key value` are benchmarked against Redis, so their common
path is written out flat: no option parsing, no extra lookups.

Effects: SET with EX/PX/EXAT becomes `SET key value PXAT <abs-ms>` (KEEPTTL
kept, NX/XX/GET dropped because the outcome is known); the INCR family
becomes `SET key <new value> KEEPTTL`, which is exact wherever it is applied.
"""

from __future__ import annotations

from protocol.errors import OVERFLOW, SYNTAX, WRONGTYPE, ReplyError, wrong_arity
from protocol.reply import OK

from ..command import command
from .args import LLONG_MAX, LLONG_MIN, count_read, read_lookup, to_int


@command("get", 2, "readonly fast", keys=(1, 1, 1), group="string", summary="Returns the string value of a key.")
def get(ctx, argv):
    """GET key -> the value, nil if absent; WRONGTYPE if not a string."""
    db = ctx.db
    key = argv[1]
    value = db.data.get(key)
    if value is not None and db.expires:
        when = db.expires.get(key)
        if when is not None and when < ctx.server.now:
            value = db.lookup(key, ctx.server.now)  # the rare path: expired (see Database.expiry)
    if value is None:
        ctx.server.keyspace_misses += 1
        return None
    ctx.server.keyspace_hits += 1
    if type(value) is bytes:
        return value
    raise ReplyError(WRONGTYPE)


# SET option bits, named as in Redis's t_string.c
_NX, _XX, _GET, _KEEPTTL, _EX, _PX, _EXAT, _PXAT = (1 << i for i in range(8))
_ANY_EXPIRE = _EX | _PX | _EXAT | _PXAT
# option -> (bit, options it cannot follow, takes a value)
_SET_OPTIONS = {
    b"NX": (_NX, _XX, False),
    b"XX": (_XX, _NX, False),
    b"GET": (_GET, 0, False),
    b"KEEPTTL": (_KEEPTTL, _ANY_EXPIRE, False),
    b"EX": (_EX, _KEEPTTL | _PX | _EXAT | _PXAT, True),
    b"PX": (_PX, _KEEPTTL | _EX | _EXAT | _PXAT, True),
    b"EXAT": (_EXAT, _KEEPTTL | _EX | _PX | _PXAT, True),
    b"PXAT": (_PXAT, _KEEPTTL | _EX | _PX | _EXAT, True),
}


def _expire_ms(ctx, arg: bytes, flags: int, name: str) -> int:
    """The absolute expiry in ms for SET's EX/PX/EXAT/PXAT value (Redis's getExpireMillisecondsOrReply)."""
    if arg.isdigit() and arg[0] != 48 and len(arg) < 16:  # a plain positive number: the usual case
        when = int(arg)
    else:
        when = to_int(arg)
        if when <= 0:
            raise ReplyError(f"ERR invalid expire time in '{name}' command")
    if flags & (_EX | _EXAT):
        if when > LLONG_MAX // 1000:
            raise ReplyError(f"ERR invalid expire time in '{name}' command")
        when *= 1000
    if flags & (_EX | _PX):
        when += ctx.server.now
        if when > LLONG_MAX:
            raise ReplyError(f"ERR invalid expire time in '{name}' command")
    return when


@command("set", -3, "write denyoom", keys=(1, 1, 1), group="string", summary="Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
         complexity="O(1)")
def set_(ctx, argv):
    """SET key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]"""
    key = argv[1]
    db = ctx.db
    argc = len(argv)
    if argc == 3:
        if db.expires and key in db.expires:
            db.lookup(key, ctx.server.now)  # past its TTL: removed first (DEL, `expired`), as Redis's lookupKeyWrite
            db.expires.pop(key, None)
        db.data[key] = argv[2]
        return OK, [argv]
    if argc == 5:  # SET key value EX|PX time: the common form with a TTL, without the option loop
        option = argv[3].upper()
        if option == b"EX" or option == b"PX":
            when = _expire_ms(ctx, argv[4], _EX if option == b"EX" else _PX, "set")
            if key in db.expires:
                db.lookup(key, ctx.server.now)  # (as above)
            db.data[key] = value = argv[2]
            db.expires[key] = when
            return OK, [[b"SET", key, value, b"PXAT", b"%d" % when]]
    flags = 0
    expire_arg = None
    index = 3
    while index < argc:
        option = _SET_OPTIONS.get(argv[index].upper())
        if option is None:
            raise ReplyError(SYNTAX)
        bit, excluded, takes_value = option
        if flags & excluded or (takes_value and index + 1 >= argc):
            raise ReplyError(SYNTAX)
        flags |= bit
        if takes_value:
            index += 1
            expire_arg = argv[index]
        index += 1
    when = _expire_ms(ctx, expire_arg, flags, "set") if expire_arg is not None else None
    old = None
    if flags & (_NX | _XX | _GET):
        value = db.lookup(key, ctx.server.now)
        if flags & _GET:  # Redis reads the old value as GET does (a hit or a miss)
            count_read(ctx.server, value)
            if value is not None and type(value) is not bytes:
                raise ReplyError(WRONGTYPE)
        old = value if flags & _GET else None
        if (flags & _NX and value is not None) or (flags & _XX and value is None):
            return old, []
    elif db.expires and key in db.expires:
        db.lookup(key, ctx.server.now)  # past its TTL: removed first, as Redis's lookupKeyWrite (KEEPTTL keeps no dead TTL)
    db.data[key] = argv[2]
    effect = [b"SET", key, argv[2]]
    if when is not None:
        db.expires[key] = when
        effect += [b"PXAT", b"%d" % when]
    elif flags & _KEEPTTL:
        effect.append(b"KEEPTTL")
    elif db.expires:
        db.expires.pop(key, None)
    return (old if flags & _GET else OK), [effect]


@command("getdel", 2, "write fast", keys=(1, 1, 1), group="string", since="6.2.0",
         summary="Returns the string value of a key after deleting the key.")
def getdel(ctx, argv):
    """GETDEL key -> the value, and the key is deleted."""
    key, db, now = argv[1], ctx.db, ctx.server.now
    value = read_lookup(ctx, key, bytes)
    if value is None:
        return None, []
    db.delete(key, now)
    return value, [[b"DEL", key]]


@command("mget", -2, "readonly fast", keys=(1, -1, 1), group="string", since="1.0.0",
         summary="Atomically returns the string values of one or more keys.",
         complexity="O(N) where N is the number of keys to retrieve.")
def mget(ctx, argv):
    """MGET key [key ...] -> values; nil for missing keys and for keys that are not strings."""
    db, now = ctx.db, ctx.server.now
    lookup = db.lookup
    values = []
    found = 0
    for key in argv[1:]:
        value = lookup(key, now)
        if value is not None:
            found += 1
        values.append(value if type(value) is bytes else None)
    server = ctx.server
    server.keyspace_hits += found
    server.keyspace_misses += len(values) - found
    return values


@command("mset", -3, "write denyoom", keys=(1, -1, 2), group="string", since="1.0.1",
         summary="Atomically creates or modifies the string values of one or more keys.",
         complexity="O(N) where N is the number of keys to set.")
def mset(ctx, argv):
    """MSET key value [key value ...]: like SETs, each drops the key's TTL."""
    if len(argv) % 2 == 0:
        raise wrong_arity("mset")
    db = ctx.db
    data, expires = db.data, db.expires
    for index in range(1, len(argv), 2):
        key = argv[index]
        if expires and key in expires:
            db.lookup(key, ctx.server.now)  # past its TTL: removed first, as SET (Redis's lookupKeyWrite)
            expires.pop(key, None)
        data[key] = argv[index + 1]
    return OK, [[b"MSET", *argv[1:]]]


def _incr(ctx, key: bytes, delta: int):
    """Add delta to the integer at key (0 if absent), keeping its TTL."""
    db = ctx.db
    value = db.lookup(key, ctx.server.now)
    if value is None:
        current = 0
    elif type(value) is not bytes:
        raise ReplyError(WRONGTYPE)
    else:
        current = to_int(value)  # a plain counter takes to_int's first test
    result = current + delta
    if not LLONG_MIN <= result <= LLONG_MAX:
        raise ReplyError(OVERFLOW)
    encoded = b"%d" % result
    db.data[key] = encoded
    return result, [[b"SET", key, encoded, b"KEEPTTL"]]


@command("incr", 2, "write denyoom fast", keys=(1, 1, 1), group="string", summary="Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.")
def incr(ctx, argv):
    """INCR key"""
    return _incr(ctx, argv[1], 1)


@command("decr", 2, "write denyoom fast", keys=(1, 1, 1), group="string", summary="Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.")
def decr(ctx, argv):
    """DECR key"""
    return _incr(ctx, argv[1], -1)


@command("incrby", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.")
def incrby(ctx, argv):
    """INCRBY key increment"""
    return _incr(ctx, argv[1], to_int(argv[2]))


@command("decrby", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.")
def decrby(ctx, argv):
    """DECRBY key decrement"""
    delta = to_int(argv[2])
    if delta == LLONG_MIN:
        raise ReplyError("ERR decrement would overflow")
    return _incr(ctx, argv[1], -delta)


@command("append", 3, "write denyoom fast", keys=(1, 1, 1), group="string", since="2.0.0",
         summary="Appends a string to the value of a key. Creates the key if it doesn't exist.", complexity="O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.")
def append(ctx, argv):
    """APPEND key value -> the new length; the TTL stays."""
    key, db = argv[1], ctx.db
    value = db.lookup_type(key, ctx.server.now, bytes)
    if value is None:
        db.data[key] = argv[2]
        return len(argv[2]), [[b"APPEND", key, argv[2]]]  # Redis's own form: a replica's event is `append` too
    length = len(value) + len(argv[2])
    if length > ctx.server.config["proto-max-bulk-len"]:
        raise ReplyError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    db.data[key] = value + argv[2]
    return length, [[b"APPEND", key, argv[2]]]


@command("strlen", 2, "readonly fast", keys=(1, 1, 1), group="string", since="2.2.0",
         summary="Returns the length of a string value.")
def strlen(ctx, argv):
    """STRLEN key -> the length, 0 without key."""
    value = read_lookup(ctx, argv[1], bytes)
    return 0 if value is None else len(value)


# -- the older and rarer string commands --------------------------------------


@command("setnx", 3, "write denyoom fast", keys=(1, 1, 1), group="string", summary="Set the string value of a key only when the key doesn't exist.")
def setnx(ctx, argv):
    """SETNX key value -> 1 if set, 0 if the key exists."""
    key, db = argv[1], ctx.db
    if db.lookup(key, ctx.server.now) is not None:
        return 0, []
    db.set(key, argv[2])
    return 1, [[b"SET", key, argv[2]]]


def _setex(ctx, argv, flag: int, name: str):
    """SETEX/PSETEX key time value: SET key value EX|PX time."""
    when = _expire_ms(ctx, argv[2], flag, name)
    key, db = argv[1], ctx.db
    db.lookup(key, ctx.server.now)  # an expired key goes first, as its DEL must
    db.data[key] = argv[3]
    db.expires[key] = when
    return OK, [[b"SET", key, argv[3], b"PXAT", b"%d" % when]]


@command("setex", 4, "write denyoom", keys=(1, 1, 1), group="string", since="2.0.0",
         summary="Sets the string value and expiration time of a key. Creates the key if it doesn't exist.")
def setex(ctx, argv):
    """SETEX key seconds value"""
    return _setex(ctx, argv, _EX, "setex")


@command("psetex", 4, "write denyoom", keys=(1, 1, 1), group="string", since="2.6.0",
         summary="Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.")
def psetex(ctx, argv):
    """PSETEX key milliseconds value"""
    return _setex(ctx, argv, _PX, "psetex")


@command("getset", 3, "write denyoom fast", keys=(1, 1, 1), group="string",
         summary="Returns the previous string value of a key after setting it to a new value.")
def getset(ctx, argv):
    """GETSET key value -> the old value; like SET, the TTL is dropped."""
    key, db = argv[1], ctx.db
    old = read_lookup(ctx, key, bytes)
    db.set(key, argv[2])
    return old, [[b"SET", key, argv[2]]]


@command("msetnx", -3, "write denyoom", keys=(1, -1, 2), group="string", since="1.0.1",
         summary="Atomically modifies the string values of one or more keys only when all keys don't exist.",
         complexity="O(N) where N is the number of keys to set.")
def msetnx(ctx, argv):
    """MSETNX key value [key value ...] -> 1 if all were set, 0 if any key existed."""
    if len(argv) % 2 == 0:
        raise wrong_arity("msetnx")
    db, now = ctx.db, ctx.server.now
    if any(db.lookup(argv[index], now) is not None for index in range(1, len(argv), 2)):
        return 0, []
    return 1, mset(ctx, argv)[1]


@command("getex", -2, "write fast", keys=(1, 1, 1), group="string", since="6.2.0",
         summary="Returns the string value of a key after setting its expiration time.")
def getex(ctx, argv):
    """GETEX key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST] -> the value."""
    flags, expire_arg = 0, None
    persist = False
    index, argc = 2, len(argv)
    while index < argc:
        option = argv[index].upper()
        takes_value = option in (b"EX", b"PX", b"EXAT", b"PXAT")
        if option == b"PERSIST" and not flags:
            persist = True
        elif takes_value and not persist and not flags & ~_SET_OPTIONS[option][0] and index + 1 < argc:
            flags = _SET_OPTIONS[option][0]
            index += 1
            expire_arg = argv[index]
        else:
            raise ReplyError(SYNTAX)
        index += 1
    key, db, now = argv[1], ctx.db, ctx.server.now
    value = read_lookup(ctx, key, bytes)
    if value is None:
        return None, []
    when = _expire_ms(ctx, expire_arg, flags, "getex") if expire_arg is not None else None
    if when is not None:
        if when <= now and not ctx.loading:
            db.delete(key, now)
            return value, [[b"DEL", key]]
        db.set_expire(key, when)
        return value, [[b"PEXPIREAT", key, b"%d" % when]]
    if persist and db.persist(key):
        return value, [[b"PERSIST", key]]
    return value, []


@command("getrange", 4, "readonly", keys=(1, 1, 1), group="string", since="2.4.0",
         summary="Returns a substring of the string stored at a key.",
         complexity="O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
def getrange(ctx, argv):
    """GETRANGE key start end: inclusive, negative indexes count from the end."""
    start, end = to_int(argv[2]), to_int(argv[3])
    value = read_lookup(ctx, argv[1], bytes)
    if value is None:
        return b""
    length = len(value)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start = max(length + start, 0)
    if end < 0:
        end = max(length + end, 0)
    end = min(end, length - 1)
    if start > end or length == 0:
        return b""
    return value[start : end + 1]


@command("substr", 4, "readonly", keys=(1, 1, 1), group="string", summary="Returns a substring from a string value.",
         complexity="O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.")
def substr(ctx, argv):
    """SUBSTR key start end"""
    return getrange(ctx, argv)


@command("setrange", 4, "write denyoom", keys=(1, 1, 1), group="string", since="2.2.0",
         summary="Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", complexity="O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.")
def setrange(ctx, argv):
    """SETRANGE key offset value -> the new length; zero bytes pad a gap."""
    offset = to_int(argv[2])
    if offset < 0:
        raise ReplyError("ERR offset is out of range")
    key, piece, db = argv[1], argv[3], ctx.db
    value = db.lookup_type(key, ctx.server.now, bytes)
    if value is None:
        if not piece:
            return 0, []
        value = b""
    elif not piece:
        return len(value), []
    if offset + len(piece) > ctx.server.config["proto-max-bulk-len"]:
        raise ReplyError("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    if len(value) < offset:
        value += b"\x00" * (offset - len(value))
    value = value[:offset] + piece + value[offset + len(piece) :]
    db.data[key] = value
    return len(value), [[b"SETRANGE", key, b"%d" % offset, piece]]


@command("incrbyfloat", 3, "write denyoom fast", keys=(1, 1, 1), group="string", since="2.6.0",
         summary="Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.")
def incrbyfloat(ctx, argv):
    """INCRBYFLOAT key increment -> the new value as a bulk string (long double arithmetic, see long_double.py)."""
    from .long_double import add

    key, db = argv[1], ctx.db
    value = db.lookup_type(key, ctx.server.now, bytes)
    result = add(value, argv[2])
    db.data[key] = result
    return result, [[b"SET", key, result, b"KEEPTTL"]]


@command("lcs", -3, "readonly", keys=(1, 2, 1), group="string", since="7.0.0",
         summary="Finds the longest common substring.", complexity="O(N*M) where N and M are the lengths of s1 and s2, respectively")
def lcs(ctx, argv):
    """LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]: Redis's dynamic programming and range walk."""
    from array import array

    from protocol.reply import Map

    a, b = read_lookup(ctx, argv[1]), read_lookup(ctx, argv[2])
    if (a is not None and type(a) is not bytes) or (b is not None and type(b) is not bytes):
        raise ReplyError("ERR The specified keys must contain string values")
    a, b = a or b"", b or b""
    get_len = get_idx = with_match_len = False
    min_match_len = 0
    index, argc = 3, len(argv)
    while index < argc:
        option = argv[index].upper()
        if option == b"IDX":
            get_idx = True
        elif option == b"LEN":
            get_len = True
        elif option == b"WITHMATCHLEN":
            with_match_len = True
        elif option == b"MINMATCHLEN" and index + 1 < argc:
            index += 1
            min_match_len = max(to_int(argv[index]), 0)
        else:
            raise ReplyError(SYNTAX)
        index += 1
    if get_idx and get_len:
        raise ReplyError("ERR If you want both the length and indexes, please just use IDX.")
    alen, blen = len(a), len(b)
    if (alen + 1) * (blen + 1) * 4 > ctx.server.config["proto-max-bulk-len"]:
        raise ReplyError("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    # table[i][j]: length of the LCS of a[:i] and b[:j]
    table = [array("I", bytes(4 * (blen + 1)))]
    for i in range(1, alen + 1):
        previous, row = table[-1], array("I", [0])
        ai = a[i - 1]
        for j in range(1, blen + 1):
            if ai == b[j - 1]:
                row.append(previous[j - 1] + 1)
            else:
                up, left = previous[j], row[j - 1]
                row.append(up if up > left else left)
        table.append(row)
    length = table[alen][blen]
    if get_len:
        return length
    result = bytearray(length)
    matches = []
    position = length
    a_start, a_end, b_start, b_end = alen, 0, 0, 0  # a_start == alen: no range open
    i, j = alen, blen
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            result[position - 1] = a[i - 1]
            if a_start == alen:
                a_start = a_end = i - 1
                b_start = b_end = j - 1
            elif a_start == i and b_start == j:
                a_start -= 1
                b_start -= 1
            else:
                emit = True
            if a_start == 0 or b_start == 0:
                emit = True
            position -= 1
            i -= 1
            j -= 1
        else:
            if table[i - 1][j] > table[i][j - 1]:
                i -= 1
            else:
                j -= 1
            if a_start != alen:
                emit = True
        if emit:
            match_len = a_end - a_start + 1
            if min_match_len == 0 or match_len >= min_match_len:
                match = [[a_start, a_end], [b_start, b_end]]
                if with_match_len:
                    match.append(match_len)
                matches.append(match)
            a_start = alen
    if get_idx:
        return Map({b"matches": matches, b"len": length})
    return bytes(result)
