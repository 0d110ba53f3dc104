"""Request parsing: RESP multibulk via hiredis, inline commands, and Redis's limits.

hiredis parses multibulk requests in C, but it cannot tell where an inline
command starts, and it waits patiently for a bulk of any declared length.
So this reader adds what Redis's `processInlineBuffer`/`processMultibulkBuffer`
do around it: inline lines (and the bare CRLFs `redis-cli --pipe` sends),
and a check of the headers of any command still incomplete after a read, so
a huge declared length is refused at once rather than buffered for ever.
"""

from __future__ import annotations

import re
from itertools import chain

import hiredis

from .bigarg import BIG_ARG, BigRequest, args_before
from .errors import ProtocolError, arg_text

INLINE_MAX = 64 * 1024  # PROTO_INLINE_MAX_SIZE
INT_MAX = 2**31 - 1
UNAUTH_MAX_ARGS = 10  # Redis's limits before AUTH (processMultibulkBuffer)
UNAUTH_MAX_BULK = 16384
_STAR = 42  # b"*"
_LF = 10  # b"\n"
# An aggregate type byte and three digits: a count of 100 or more, which hiredis
# would allocate as one list as soon as it reads the header, before any element
# arrives (8 bytes a slot; freeing 10^8 of them stalls the server for 0.2 s, and
# hiredis nests up to 1024 of them). Such a count reaches hiredis only when the
# bytes already read cover it (`_covered`, `RequestReader._bytes_for_count`: its
# list then costs at most 8 bytes per byte the client sent). Otherwise, at a
# command start the request is held and its headers walked until it is whole
# (`RequestReader._hold`); where an element is due it is Redis's "expected '$'".
# Counts below 100 pass: at hiredis's 1024 nesting levels they cost at most 1024
# lists of 99 slots (~1.5 ms once, and the request is refused). '>' (push), '~'
# (set) and '|' (attribute) are sized the same way ('%', a dict, is not).
# Rare bytes in requests: an `in` test (a memchr) goes before each search, and a
# search for one type byte (a literal) costs half as much as one search for the three.
_HUGE_COUNT = re.compile(rb"\*[0-9]{3}")
_huge_search = _HUGE_COUNT.search
_huge_push, _huge_set, _huge_attribute = (re.compile(kind + rb"[0-9]{3}").search for kind in (rb">", rb"~", rb"\|"))
_HUGE = re.compile(rb"[*>~|][0-9]{3}")  # any of them: where the guarded path stops
_DIGITS = re.compile(rb"[0-9]*")
# The digits of each such count, one pattern per type byte (a literal prefix: sre looks for it
# with memchr, several times faster than a class); the RESP3 ones only when their byte is there.
_huge_digits = [(kind, re.compile(b"\\" + bytes([kind]) + rb"([0-9]{3,})").findall) for kind in b"*>~|"]


def _covered(data: bytes) -> bool:
    """Whether the counts of 100+ in data (`_HUGE`, headers or payload) add up to no more than its
    bytes: whatever hiredis makes of them, its lists then cost at most 8 times the read (the usual
    pipeline of requests with 100+ arguments each, read whole)."""
    total = 0
    for kind, findall in _huge_digits:
        if kind == _STAR or kind in data:
            for digits in findall(data):
                if len(digits) > 10:
                    return False
                total += int(digits)
    return total <= len(data)


def _huge(data: bytes) -> bool:
    """Whether data holds a count hiredis must not see (`_HUGE`), in a header or as payload."""
    return _huge_search(data) is not None or (
        (62 in data and _huge_push(data) is not None)
        or (126 in data and _huge_set(data) is not None)
        or (124 in data and _huge_attribute(data) is not None)
    )


# Simple strings, verbatim strings and big numbers: RESP types hiredis hands back as
# bytes, like a bulk string, where Redis takes bulk strings only ("expected '$', got
# '+'"). A read with one of their type bytes ('+' '=' '(' are 43 61 40: a memchr each)
# is checked (`_other_strings`, `_canonical_prefix`) and, if it may hold one, read again
# header by header (`_walk`), which raises Redis's error at the element Redis refuses.
# Only the check runs for an argument `+` (XRANGE k - +): the walk halved XRANGE's speed.
_pack = hiredis.pack_command
_UNREAD = object()  # RequestReader._first when `request` left nothing for `feed`
_SET_START = re.compile(rb"\n~[0-9]")  # where a RESP3 set header may start a request (a literal prefix: fast)
_COUNT_TAIL = re.compile(rb"[*~|>][0-9]{0,2}\Z")  # a read ending where such a count may be cut


def split_args(line: bytes) -> list[bytes]:
    """Split an inline command as Redis's sdssplitargs does (quotes, escapes)."""
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in b" \t\n\r\v\f\x00":
            i += 1
        if i >= n:
            return args
        current = bytearray()
        quote = 0  # 0 none, 1 double, 2 single
        while True:
            if i >= n:
                if quote:
                    raise ProtocolError("unbalanced quotes in request")
                break
            c = line[i]
            if quote == 1:
                if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 and _ishex(line[i + 2]) and _ishex(line[i + 3]):
                    current.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif c == 0x5C and i + 1 < n:
                    i += 1
                    current += {0x6E: b"\n", 0x72: b"\r", 0x74: b"\t", 0x62: b"\b", 0x61: b"\a"}.get(line[i], bytes([line[i]]))
                elif c == 0x22:
                    if i + 1 < n and line[i + 1] not in b" \t\n\r\v\f\x00":
                        raise ProtocolError("unbalanced quotes in request")
                    i += 1
                    break
                else:
                    current.append(c)
            elif quote == 2:
                if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    current.append(0x27)
                elif c == 0x27:
                    if i + 1 < n and line[i + 1] not in b" \t\n\r\v\f\x00":
                        raise ProtocolError("unbalanced quotes in request")
                    i += 1
                    break
                else:
                    current.append(c)
            elif c in b" \t\n\r\x00":  # sdssplitargs: \v and \f are skipped between tokens, kept inside one
                break
            elif c == 0x22:
                quote = 1
            elif c == 0x27:
                quote = 2
            else:
                current.append(c)
            i += 1
        args.append(bytes(current))


def _ishex(c: int) -> bool:
    return c in b"0123456789abcdefABCDEF"


class _HeaderCheck:
    """Walks the headers of one incomplete multibulk command as its bytes arrive.

    It validates what Redis validates before buffering a payload: the
    multibulk count, the '$' type byte and each bulk length. Once the last
    header is seen the rest is payload and it has nothing more to check.
    """

    __slots__ = ("args", "declared", "skip", "line", "max_bulk", "unauthenticated", "bulk", "kept")

    def __init__(self, max_bulk: int, unauthenticated: bool = False) -> None:
        self.args: int | None = None  # arguments still to come; None before '*N'
        self.declared = 0  # N; a count below 1 makes a request Redis skips (hiredis: [] or None)
        self.skip = 0  # payload bytes (with CRLF) still to pass over
        self.line = b""  # a header line not yet ended
        self.max_bulk = max_bulk
        self.unauthenticated = unauthenticated
        self.bulk = 0  # the length of the bulk whose payload `skip` passes over
        # This command's bytes so far, as read, while they are few (`_KEEP_MAX`): what a bulk of
        # `BIG_ARG` bytes or more needs to be read outside hiredis (`RequestReader._go_big`).
        self.kept: list[bytes] | None = None

    @property
    def started(self) -> bool:
        """Its '*' header is seen (a carried '$' line, say, may turn out to be an inline command)."""
        return self.args is not None or self.line[:1] == b"*"

    def feed(self, data: bytes, pos: int) -> int:
        """Check the headers in data[pos:]; the offset just after the command, -1 if it goes on."""
        end = len(data)
        while pos < end and (self.args != 0 or self.skip):
            if self.args and not self.skip and not self.line:
                pos = self._bulks(data, pos, end)
                if pos >= end or not self.args:
                    continue
            if self.skip:
                step = min(self.skip, end - pos)
                self.skip -= step
                pos += step
                continue
            if self.line[-1:] == b"\r" and data[pos] == 0x0A:  # CRLF split between reads
                header, pos = self.line[:-1], pos + 1
            else:
                nl = data.find(b"\r\n", pos)
                if nl < 0:
                    self.line += data[pos:]
                    if len(self.line) > INLINE_MAX:
                        raise ProtocolError("too big mbulk count string" if self.args is None else "too big bulk count string")
                    return -1
                header, pos = self.line + data[pos:nl], nl + 2
            self.line = b""
            if self.args is None:
                count = header[1:]
                if header[:1] != b"*" or not (_canonical(count) or count[:1] == b"-" and _canonical(count[1:]) and count != b"-0") or int(count) > INT_MAX:
                    raise ProtocolError("invalid multibulk length")
                self.declared = int(count)
                self.args = max(self.declared, 0)
                if self.unauthenticated and self.args > UNAUTH_MAX_ARGS:
                    raise ProtocolError("unauthenticated multibulk length")
                continue
            self.bulk = self.bulk_length(header)
            self.args -= 1
            self.skip = self.bulk + 2
        return pos if self.args == 0 and not self.skip else -1

    def bulk_length(self, header: bytes) -> int:
        """The length a bulk header line (CRLF cut) declares, refused as Redis refuses it."""
        if header[:1] != b"$":
            kind = header[:1] or b"\r"  # an empty line: Redis names its CR
            raise ProtocolError(f"expected '$', got '{arg_text(kind)}'")
        if not _canonical(header[1:]) or int(header[1:]) > self.max_bulk:
            raise ProtocolError("invalid bulk length")
        if self.unauthenticated and int(header[1:]) > UNAUTH_MAX_BULK:
            raise ProtocolError("unauthenticated bulk length")
        return int(header[1:])


    def _bulks(self, data: bytes, pos: int, end: int) -> int:
        """Pass over the whole, valid `$n\r\n<n bytes>\r\n` elements at data[pos:] (at most `args`):
        the offset after them. A run of same-length elements goes in one regex match (`_same_bulks`):
        a request of a million short arguments is walked at C speed. Whatever this stops at (a header
        Redis refuses, an element cut by the read) is left to `feed`'s loop, which reads it as before."""
        args = self.args
        max_bulk = min(self.max_bulk, UNAUTH_MAX_BULK) if self.unauthenticated else self.max_bulk
        header = _bulk_header
        while args:
            match = header(data, pos)
            if match is None:
                break
            n = int(match[1])
            after = match.end() + n + 2
            if n > max_bulk or after > end:
                break
            args -= 1
            if n < _SAME_BULKS_MAX and args:
                run = _same_bulks(n).match(data, after, end)
                unit = after - pos
                same = min((run.end() - after) // unit, args)
                after += same * unit
                args -= same
            pos = after
        self.args = args
        return pos


_bulk_header = re.compile(rb"\$(0|[1-9][0-9]{0,17})\r\n").match
_SAME_BULKS_MAX = 256
_SAME_BULKS: dict[int, re.Pattern] = {}


def _same_bulks(n: int) -> re.Pattern:
    """A run of whole elements of n bytes each (a possessive repeat: no backtracking state)."""
    pattern = _SAME_BULKS.get(n)
    if pattern is None:
        pattern = _SAME_BULKS[n] = re.compile(rb"(?:\$%d\r\n.{%d}\r\n)*+" % (n, n), re.DOTALL)
    return pattern


# A read's requests are checked to be arrays of bulk strings by joining them (C speed, a copy no
# bigger than the read); a request carried over more than this many bytes is checked without one
# (a 64 MB SET would otherwise be copied whole once more, 3x its size at the peak).
_JOIN_MAX = 1 << 20
# The bytes of an incomplete request kept from one read to the next, beside hiredis's copy, in case
# a big bulk's header follows (`RequestReader._go_big`): headers and short arguments come first.
_KEEP_MAX = 64 * 1024


def _bulk_strings(commands: list, first: int) -> None:
    """Raise TypeError unless commands[first:] hold bytes only, the first (carried) without copying it:
    bytes.__len__ refuses anything else (ints, nulls, nested arrays) at C speed."""
    sum(map(bytes.__len__, commands[first]))
    if len(commands) > first + 1:
        b"".join(chain.from_iterable(commands[first + 1 :]))


def _canonical(digits: bytes) -> bool:
    """A length as Redis's string2ll accepts it here: decimal, no sign, no leading zero."""
    return digits.isdigit() and (digits[:1] != b"0" or digits == b"0")


def encoded_size(commands: list) -> int:
    """Bytes that `commands` take as canonical RESP requests: `*<argc>\r\n`, then `$<len>\r\n<arg>\r\n`
    per argument (the usual one- and two-digit lengths without str()): where a read's completed
    requests end, when one is left incomplete."""
    size = 0
    for argv in commands:
        size += 4 if len(argv) < 10 else 3 + len(str(len(argv)))
        for arg in argv:
            n = len(arg)
            size += n + (6 if n < 10 else 7 if n < 100 else 5 + len(str(n)))
    return size


def _other_strings(data: bytes, start: int, joined: bytes) -> bool:
    """Whether the requests hiredis read from data[start:] (their arguments joined: `joined`) may hold
    a simple, verbatim or big-number string where Redis wants a '$' (`_walk` tells). False is certain.

    Counts of each type byte tell, at C speed: every '+' '=' '(' of a bulk's payload, or of such a
    string's text, is in both; the type byte of such a string is in the data only, and no header holds
    one (hiredis refuses a sign in a length). Only bytes that are no argument add to the data's count as
    well: the two after a payload, passed over unread (Redis, hiredis), a verbatim's dropped `txt:`, and
    a request cut at the end of data."""
    return (
        (43 in data and data.count(b"+", start) != joined.count(b"+"))
        or (61 in data and data.count(b"=", start) != joined.count(b"="))
        or (40 in data and data.count(b"(", start) != joined.count(b"("))
    )


def _canonical_prefix(data: bytes, start: int, commands: list) -> bool:
    """Whether data[start:] begins with `commands` as canonical requests (arrays of bulk strings only,
    as `hiredis.pack_command` writes them): where the requests end is not known (a request is cut)."""
    return data.startswith(b"".join([_pack(tuple(argv)) for argv in commands]), start)


class RequestBounds:
    """Where the requests of a byte stream end, read by read (a client before AUTH: server/client.py).

    Headers are walked as _HeaderCheck walks them and payloads skipped whole, so a request costs
    the same whatever its payload holds; an inline request ends at its newline. Nothing is kept."""

    __slots__ = ("check", "inline")

    def __init__(self) -> None:
        self.check: _HeaderCheck | None = None
        self.inline = False

    @property
    def at_boundary(self) -> bool:
        return self.check is None and not self.inline

    def reset(self) -> None:
        self.check, self.inline = None, False

    def end(self, data: bytes, pos: int) -> int:
        """The offset just after the request going on at data[pos], -1 if it goes on past data.
        ProtocolError where Redis refuses a header (the reader answers it)."""
        if self.at_boundary:
            if data[pos] == _STAR:
                self.check = _HeaderCheck(1 << 62)
            else:
                self.inline = True
        if self.inline:
            nl = data.find(b"\n", pos)
            if nl < 0:
                return -1
            self.inline = False
            return nl + 1
        at = self.check.feed(data, pos)
        if at >= 0:
            self.check = None
        return at


class QueryBufferLimit(ProtocolError):
    """A pending command outgrew client-query-buffer-limit: Redis closes without a reply."""


def unauthenticated_error(commands: list, inline_ids: set[int]) -> int:
    """Index of the first command over Redis's pre-AUTH limits, or -1.

    Those limits are multibulk ones (processMultibulkBuffer): an inline command (its id in
    `inline_ids`) has only the inline line's. The caller feeds no further than an AUTH or
    HELLO, which may authenticate what follows."""
    for index, argv in enumerate(commands):
        if type(argv) is not list:
            return -1
        if id(argv) in inline_ids:
            continue
        if len(argv) > UNAUTH_MAX_ARGS or any(len(arg) > UNAUTH_MAX_BULK for arg in argv):
            return index
    return -1


class RequestReader:
    """Turns a connection's byte stream into argv lists.

    `feed` returns the complete commands in the bytes read so far and, when the
    stream turns malformed, the Redis error text to answer before closing (the
    commands before the bad one still run, as in Redis); an empty text means
    close without a reply (client-query-buffer-limit). `request` is the lane
    for the usual read of a request/reply client, one whole request: it returns
    that argv without the list and tuple around it, and hands any other read on
    to `feed`.

    hiredis does not say whether it stopped inside a command (its `has_data()`
    is false after any complete element, inside an array too; only right after
    a complete request does it tell whether bytes follow, which is what the
    fast path of `feed` asks it), so the reader keeps that fact itself:
    `_fresh` (hiredis has parsed nothing since its last reset: an inline line
    may start here) and `_carry` (bytes of the incomplete command fed so far,
    -1 when a command is pending but its start is unknown).

    A request that declares 100 or more arguments, more than the bytes read so
    far, reaches hiredis only once it is whole: `_big` walks its headers as its
    bytes arrive (Redis's errors, at the byte where Redis gives them) and
    `_big_parts` keeps them, so its declared count costs nothing until its
    elements are there (Redis, too, sizes argv by what arrives).
    """

    __slots__ = (
        "_reader", "_first", "_inline", "_fresh", "_carry", "_check", "_held", "_clean", "_broken",
        "_big", "_big_parts", "_big_size", "_direct", "max_bulk_len", "max_query_buffer", "unauthenticated",
        "inline_ids",
    )

    def __init__(self, max_bulk_len: int = 512 * 1024 * 1024, max_query_buffer: int = 1024 * 1024 * 1024) -> None:
        self._reader = hiredis.Reader()
        self._first = _UNREAD  # hiredis's first reply from a read `request` passed on to `feed`
        self._inline = b""  # an inline line not yet ended
        self._fresh = True
        self._carry = 0
        self._check: _HeaderCheck | None = None
        self._held = b""  # a trailing aggregate type byte + digits kept for the next read
        self._clean = True  # at a command boundary with nothing held back: the fast path applies
        self._broken = False  # a header refused before its line ended: only `_check` reads on
        self._big: _HeaderCheck | None = None  # a request of 100+ arguments held until it is whole
        self._big_parts: list[bytes] = []
        self._big_size = 0
        self._direct: BigRequest | None = None  # the rest of a request with a big bulk, read without hiredis
        self.unauthenticated = False  # Redis's tighter request limits before AUTH
        self.inline_ids: set[int] = set()  # ids of the inline commands read before AUTH (exempt from its limits)
        self.max_bulk_len = max_bulk_len
        self.max_query_buffer = max_query_buffer

    def request(self, data: bytes) -> list[bytes] | None:
        """The usual read of a request/reply client: `data` is one whole request, read from a
        command boundary; its argv. None for any other read, which `feed` must then be given:
        it goes on from where this stopped (hiredis may have seen the bytes already)."""
        if (  # not _huge(data) or _covered(data), inlined: this test runs on every request
            self._clean and data[-1] == _LF and data[0] == _STAR and (
                (
                    _huge_search(data) is None
                    and (62 not in data or _huge_push(data) is None)
                    and (126 not in data or _huge_set(data) is None)
                    and (124 not in data or _huge_attribute(data) is None)
                )
                or _covered(data)
            )
        ):
            reader = self._reader
            reader.feed(data)
            self._fresh = False
            try:
                argv = reader.gets()
            except (hiredis.ProtocolError, TypeError):  # TypeError: a RESP3 map keyed by an aggregate (unhashable)
                argv = None
            if type(argv) is list and argv and not reader.has_data():
                try:  # requests are arrays of bulk strings only: a C-level join checks every argument
                    joined = b"".join(argv)
                except TypeError:
                    pass
                else:
                    if not (43 in data or 61 in data or 40 in data):
                        return argv
                    # `_other_strings`, its usual case inlined (a call costs more than it): one '+', an argument
                    if 61 not in data and 40 not in data and data.count(b"+") == 1 and 43 in joined:
                        return argv
                    if not _other_strings(data, 0, joined):
                        return argv
                    argv = None  # a simple, verbatim or big-number string may be in it: `feed` reads it again
            self._first = argv
        return None

    def feed(self, data: bytes) -> tuple[list[list[bytes]], str | None]:
        commands, error = self._feed(data)
        if commands and self.max_query_buffer - 2 < self.max_bulk_len:  # (never with the defaults)
            # Redis reads a big bulk, with its CRLF, alone into the query buffer, and closes the client
            # once that buffer passes client-query-buffer-limit, before the command can run: a request
            # with such a bulk is never run, however the reads cut it
            limit = self.max_query_buffer - 2
            for index, argv in enumerate(commands):
                if type(argv) is list and any(len(arg) > limit for arg in argv):
                    del commands[index:]
                    return commands, ""
        return commands, error

    def _feed(self, data: bytes) -> tuple[list[list[bytes]], str | None]:
        commands: list[list[bytes]] = []
        if self._first is _UNREAD and data:  # a read `request` has not seen yet
            argv = self.request(data)
            if argv is not None:
                return [argv], None
        argv, self._first = self._first, _UNREAD  # hiredis's first reply, when it has this read
        if argv is not _UNREAD:
            # The usual read: whole requests from a command boundary (ending
            # with a line end, so no count is cut at the edge). Anything unusual
            # in it is parsed again from the start by the general path.
            reader = self._reader
            try:
                while type(argv) is list and argv:
                    commands.append(argv)
                    # hiredis stops right after a complete request: unread bytes
                    # mean more requests (or a part of one) follow, none mean
                    # the requests took every byte and the read ends on a boundary.
                    if not reader.has_data():
                        try:  # requests are arrays of bulk strings only: a C-level join checks every argument
                            joined = b"".join(argv) if len(commands) == 1 else b"".join(chain.from_iterable(commands))
                        except TypeError:
                            break
                        if (43 in data or 61 in data or 40 in data) and _other_strings(data, 0, joined):
                            break  # a simple, verbatim or big-number string may be in them: the general path reads them
                        if 126 in data and len(commands) > 1 and _SET_START.search(data) is not None:
                            break  # a request may start with a set header: the general path reads it as Redis does
                        return commands, None
                    argv = reader.gets()
            except (hiredis.ProtocolError, TypeError):  # TypeError: a RESP3 map keyed by an aggregate (unhashable)
                argv = None
            if argv is False:  # a request is cut at the end of the read
                try:
                    joined = b"".join(chain.from_iterable(commands))
                    at = self._boundary(data, 0, commands, 0, 0)
                    if data[at : at + 1] != b"*":  # the cut item is an inline line to Redis
                        argv = None
                    elif (43 in data or 61 in data or 40 in data) and _other_strings(data, 0, joined) and not _canonical_prefix(data, 0, commands):
                        argv = None  # a simple, verbatim or big-number string may be in them (`at` is then wrong)
                    elif 126 in data and len(commands) > 1 and _SET_START.search(data) is not None:
                        argv = None  # a request may start with a set header: the general path reads it
                except TypeError:
                    argv = None
                if argv is False:
                    self._clean = False
                    try:
                        self._pending(data, 0, at if commands else None)
                    except QueryBufferLimit:
                        return commands, ""
                    except ProtocolError as exc:
                        return commands, f"ERR Protocol error: {exc}"
                    self._go_big()
                    return commands, None
            self._reader = hiredis.Reader()
            commands = []
        self._clean = False
        if self._held:
            data = self._held + data
            self._held = b""
        if self._direct is not None:
            data, done = self._feed_outside(self._feed_direct, data, commands)
            if done is not None:
                return done
        if self._big is not None:
            data, done = self._feed_outside(self._feed_big, data, commands)
            if done is not None:
                return done
        edge = len(data) - 3 if len(data) > 3 else 0
        tail = _COUNT_TAIL.search(data, edge)
        if tail is not None:
            # An aggregate type byte and digits at the very end: the count may go on
            # in the next read, and hiredis must not see a huge one, so wait for the rest.
            self._held = data[tail.start() :]
            data = data[: tail.start()]
            if not data:
                return commands, None
        try:
            if not _huge(data) or _covered(data):
                self._feed_part(data, commands)
            else:
                self._feed_guarded(data, commands)
        except QueryBufferLimit:
            return commands, ""
        except ProtocolError as exc:
            return commands, f"ERR Protocol error: {exc}"
        self._go_big()
        self._clean = self._is_clean()
        return commands, None

    def _feed_outside(self, feed, data: bytes, commands: list) -> tuple[bytes, tuple | None]:
        """Run one of the readers that work outside hiredis (`_feed_direct`, `_feed_big`) over data:
        (the bytes left for what follows, None), or (b"", feed's return value) when it ends the read."""
        try:
            end = feed(data, commands)
        except QueryBufferLimit:
            return b"", (commands, "")
        except ProtocolError as exc:
            return b"", (commands, f"ERR Protocol error: {exc}")
        if end == len(data):
            self._clean = self._is_clean()
            return b"", (commands, None)
        return data[end:], None

    @property
    def at_boundary(self) -> bool:
        """Whether the bytes fed so far end between two requests."""
        return self._clean

    def _is_clean(self) -> bool:
        return (
            not self._held and not self._inline and self._carry == 0 and self._check is None and self._big is None and self._direct is None
        )

    def _go_big(self) -> None:
        """At the end of a read: if it ended inside the payload of a bulk of `BIG_ARG` bytes or more,
        the rest of that request is read by a `BigRequest` (each argument into one buffer of its size)
        and hiredis, which holds the request's start, is dropped. The arguments before the bulk come
        from the bytes `_pending` kept of the request (a request that kept none stays with hiredis)."""
        check = self._check
        if check is None or check.kept is None:
            return
        if check.skip <= 2 or check.bulk < BIG_ARG or self._broken or self._carry <= 0:
            if self._carry > _KEEP_MAX:
                check.kept = None  # past the first read, keep a little only: a big bulk's header comes early
            return
        head = b"".join(check.kept)
        if len(head) != self._carry:
            check.kept = None
            return
        end = len(head) - (check.bulk + 2 - check.skip)  # where the bulk's payload starts
        argv = args_before(head, end, check.bulk, check.declared - check.args - 1)
        if argv is None:  # (never: the headers were checked)
            check.kept = None
            return
        try:
            request = BigRequest(argv, check.bulk, check.args, self._carry, check.bulk_length, INLINE_MAX)
        except MemoryError:  # its size could not be reserved: hiredis goes on, as before
            check.kept = None
            return
        request.feed(head[end:])
        self._reset()
        self._direct = request

    def _feed_direct(self, data: bytes, commands: list) -> int:
        """Go on with the `BigRequest`: bytes of data it takes. client-query-buffer-limit is checked
        as for any request cut by a read (`_pending`): after its headers, and not once it is whole.
        An argument after the big one whose size cannot be reserved closes the link as that limit does."""
        request = self._direct
        try:
            end = request.feed(data)
        except MemoryError:
            self._direct = None
            raise QueryBufferLimit("no memory for the request") from None
        if end >= 0:
            commands.append(request.argv)
            self._direct = None
            return end
        request.carry += len(data)
        if request.carry > self.max_query_buffer:
            raise QueryBufferLimit("query buffer limit reached")
        return len(data)

    def _feed_part(self, data: bytes, commands: list) -> None:
        if self._fresh and (self._inline or data[:1] != b"*"):
            self._feed_inline(data, commands)
        else:
            resume = self._feed_multibulk(data, 0, commands)
            if resume is not None:
                self._feed_inline(data, commands, resume)

    def _feed_guarded(self, data: bytes, commands: list) -> None:
        """Rare path: data holds a huge aggregate count somewhere (`_HUGE`: in a payload, or a header).

        Feed up to each such place and look at the parser's state there: at a
        command start '*' is a multibulk count of 100M+ arguments, and the
        other types an inline line (hiredis, reset, does not see it); where an
        element is expected it is a nested aggregate (Redis: "expected '$'");
        in a payload or an inline line it is just data.
        """
        start = 0
        for match in _HUGE.finditer(data):
            at = match.start()
            if at < start:
                continue
            if at > start:
                self._feed_part(data[start:at], commands)
                start = at
            if self._inline or self._broken:
                continue  # inside an inline line, or a refused header whose line goes on: data
            check = self._check
            if self._fresh or check is None or (self._carry == 0 and not check.started):
                # A command boundary: hiredis holds nothing of a command.
                self._reset()
                if data[at] != _STAR:
                    continue  # an inline line from here (hiredis, reset, does not see it)
                if self._bytes_for_count(data, at):
                    continue  # hiredis may read it: its list costs no more than the bytes already here
                start = self._hold(data, at, commands)
                if start < 0:
                    return
                continue
            if check.args and not check.skip and not check.line:
                # An aggregate where an element is due: Redis answers "expected '$', got '*'"
                # once the header's line ends. From here only `check` reads, and raises then.
                check.feed(data, at)
                self._await_line(check, self._carry + len(data) - at, len(data))
                return
            # in a payload or a header line: data, which hiredis reads as such
        if start < len(data):
            self._feed_part(data[start:], commands)

    def _bytes_for_count(self, data: bytes, at: int) -> bool:
        """Whether the request header at data[at] is valid and at least as many bytes as it declares
        arguments are here: hiredis's list for them (8 bytes a slot) then costs at most 8 times what
        the client sent, as Redis's argv grows with what arrives. Its arguments are parsed at C speed."""
        digits = _DIGITS.match(data, at + 1).end()
        if data[digits : digits + 2] != b"\r\n" or digits - at > 11 or data[at + 1] == 48 or self.unauthenticated:
            return False  # the line goes on, or the header is refused: `_hold` reads it as Redis does
        count = int(data[at + 1 : digits])
        return count <= INT_MAX and len(data) - at >= count

    def _hold(self, data: bytes, at: int, commands: list) -> int:
        """A request declaring 100+ arguments starts at data[at]: walk its headers (Redis's header
        errors raise here) and keep its bytes until it is whole, then parse it. The offset just
        after it, or -1 when it goes on past this read."""
        check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
        self._big, self._big_parts, self._big_size = check, [], 0
        end = self._feed_big(data[at:], commands)
        return -1 if self._big is not None else at + end

    def _feed_big(self, data: bytes, commands: list) -> int:
        """Go on with the held request: bytes of data it takes; it is parsed once whole."""
        check = self._big
        end = check.feed(data, 0)
        part = data if end < 0 else data[:end]
        self._big_parts.append(part)
        self._big_size += len(part)
        if self._big_size > self.max_query_buffer:
            raise QueryBufferLimit("query buffer limit reached")
        if end < 0:
            return len(data)
        request = b"".join(self._big_parts)
        self._big, self._big_parts, self._big_size = None, [], 0
        # Every header is checked: hiredis reads an array of bulk strings, each slot's bytes already here.
        reader = hiredis.Reader()
        reader.feed(request)
        commands.append(reader.gets())
        self._reset()
        return end

    def _feed_inline(self, data: bytes, commands: list, pos: int = 0) -> None:
        """Inline lines (`PING\\r\\n`, bare CRLFs) and the multibulk runs between them.

        A loop, not recursion: a pipeline may alternate forms thousands of times.
        """
        if self._inline:
            data = self._inline + data[pos:]
            self._inline = b""
            pos = 0
        end = len(data)
        while pos < end:
            if data[pos] == _STAR:
                resume = self._feed_multibulk(data, pos, commands)
                if resume is None:
                    return
                pos = resume  # hiredis met an inline line (or '*-N') here
                continue
            nl = data.find(b"\n", pos)
            if nl < 0 or data.find(b"\x00", pos, nl) >= 0:
                # Redis looks for the newline with strchr, which stops at a NUL:
                # such a line never ends, until it is too big.
                if end - pos > INLINE_MAX:
                    raise ProtocolError("too big inline request")
                self._inline = data[pos:]
                return
            args = split_args(data[pos:nl])
            pos = nl + 1
            if args:
                commands.append(args)
                if self.unauthenticated:
                    self.inline_ids.add(id(args))

    def _feed_multibulk(self, data: bytes, pos: int, commands: list) -> int | None:
        """Feed data[pos:] to hiredis and collect the commands it completes.

        Returns None when all of data is consumed, or the offset where inline
        parsing must go on (hiredis has been reset there).
        """
        if self._broken:
            self._carry += len(data) - pos
            if self._carry > self.max_query_buffer:
                raise QueryBufferLimit("query buffer limit reached")
            if self._check.feed(data, pos) >= 0:  # it raises once the line ends
                raise ProtocolError("invalid multibulk length")
            return None
        first = len(commands)
        # `start`: where the first command begun in this read starts, `commands[begun]` that
        # command. A multibulk command carried over from earlier reads has its headers here
        # checked first (start -1: it goes on past this read, or where it started is unknown).
        start, begun = (pos if self._carry == 0 else -1), first
        check = self._check
        if self._carry >= 0 and check is not None and check.started:
            start = check.feed(data, pos)
            begun = first + 1 if check.declared > 0 else first
        reader = self._reader
        reader.feed(data, pos)
        self._fresh = False
        gets = reader.gets
        has_data = reader.has_data
        skipped = 0  # bytes of '*0' / '*-1' requests, which Redis ignores
        ended = False  # the last request hiredis completed ends where data ends
        try:
            while (argv := gets()) is not False:
                if type(argv) is list:
                    if argv:
                        commands.append(argv)
                        ended = not has_data()
                    else:
                        skipped += 4
                elif argv is None:
                    skipped += 5
                else:
                    # A top-level bulk, status, RESP3 map/set/push...: where Redis reads an inline line.
                    return self._resync(data, pos, commands, first, skipped, start, begun)
        except (hiredis.ProtocolError, TypeError):  # TypeError: a RESP3 map keyed by an aggregate (unhashable)
            # Bytes that are no RESP type: an inline line where a command may
            # start, or garbage.
            return self._resync(data, pos, commands, first, skipped, start, begun)
        done = len(commands) > first
        if done:
            # Requests are arrays of bulk strings only: one C-level join checks
            # every argument of the batch (it raises on ints, nulls and arrays).
            try:
                if self._carry > _JOIN_MAX or self._carry < 0:  # the first may be huge: no copy of it
                    _bulk_strings(commands, first)
                elif len(commands) == first + 1:
                    b"".join(commands[first])
                else:
                    b"".join(chain.from_iterable(commands[first:] if first else commands))
            except TypeError:
                return self._reject(data, pos, commands, first, skipped, start, begun)
            resume = self._set_start(data, start, commands, begun)
            if resume >= 0:
                return resume
            self._walk_other_strings(data, start, commands, begun, ended=ended and not skipped)
        completed = done or skipped
        # Where what follows the completed commands starts: the next command, if this read has its start.
        at = self._boundary(data, pos, commands, first, skipped) if completed else pos if self._carry == 0 else len(data)
        # hiredis's has_data() is false after any complete element, inside an
        # array too: only the bytes the completed requests take tell whether
        # it stopped between commands (a read ending `$1\r\n1\r\n` may be
        # a request cut after an argument equal to the last command's last).
        if completed and at == len(data) and not reader.has_data() and data[-2:] == b"\r\n":
            self._carry, self._check, self._clean = 0, None, True
            return None
        if at < len(data) and data[at] != _STAR:  # the incomplete item is an inline line to Redis
            return self._restart(data, pos, commands, first, skipped)
        self._clean = False
        self._pending(data, pos, at if completed else None)
        return None

    def _pending(self, data: bytes, pos: int, boundary: int | None) -> None:
        """A command is incomplete after this read: track its size and check its headers.

        boundary: where it starts, when commands completed before it in this read (else None).
        """
        if boundary is not None:
            start = boundary
            self._check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
            self._check.kept = [data[start:] if start else data]
            self._carry = len(data) - start
        elif self._carry >= 0 and self._check is not None:
            start = len(data) if self._check.started else pos  # started: _feed_multibulk checked this read
            self._carry += len(data) - pos
            if self._check.kept is not None:
                self._check.kept.append(data[pos:] if pos else data)
        elif self._carry == 0:  # the first bytes of a command, read from a boundary
            start = pos
            self._check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
            self._check.kept = [data[pos:] if pos else data]
            self._carry = len(data) - pos
        else:
            return  # its start is unknown: hiredis alone parses it
        if self._carry > self.max_query_buffer:
            raise QueryBufferLimit("query buffer limit reached")
        self._check.feed(data, start)

    def _boundary(self, data: bytes, pos: int, commands: list, first: int, skipped: int) -> int:
        """Offset in data just after the commands completed in this read."""
        carry = max(self._carry, 0)
        # Never before pos: an item that started in an earlier read (a top-level
        # `$0` cut after the `$`) is gone, so what follows is parsed from here.
        return max(min(pos + encoded_size(commands[first:]) + skipped - carry, len(data)), pos)

    def _resync(self, data: bytes, pos: int, commands: list, first: int, skipped: int, start: int, begun: int) -> int:
        """Go on after the last complete command, once those before are known to be arrays of bulk strings."""
        if len(commands) > first:
            try:
                if self._carry > _JOIN_MAX or self._carry < 0:
                    _bulk_strings(commands, first)
                else:
                    b"".join(chain.from_iterable(commands[first:]))
            except TypeError:
                return self._reject(data, pos, commands, first, skipped, start, begun)
            resume = self._set_start(data, start, commands, begun)
            if resume >= 0:
                return resume
            self._walk_other_strings(data, start, commands, begun, len(commands) - begun)
        return self._restart(data, pos, commands, first, skipped)

    def _restart(self, data: bytes, pos: int, commands: list, first: int, skipped: int) -> int:
        """Drop hiredis's state; the offset (end of the last complete command) to parse on from."""
        at = self._boundary(data, pos, commands, first, skipped)
        check = self._check
        if at == pos and self._carry > 0 and check is not None and check.started and check.line:
            # hiredis refused the carried command at a header whose line goes on (it read this read)
            return self._await_line(check, self._carry + len(data) - pos, len(data))
        self._reset()
        if at < len(data) and data[at] == _STAR:
            check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
            end = check.feed(data, at)  # Redis's error for a header it refuses
            if end >= 0 and check.declared < 0:
                return end  # '*-5' (hiredis refuses it): Redis ignores counts below 1
            if end < 0 and check.line:
                return self._await_line(check, len(data) - at, len(data))
            raise ProtocolError("invalid multibulk length")
        return at

    def _reset(self) -> None:
        """Drop hiredis's state: what follows is parsed from a command boundary by a fresh reader."""
        self._reader = hiredis.Reader()
        self._fresh, self._carry, self._check = True, 0, None

    def _await_line(self, check: _HeaderCheck, carry: int, end: int) -> int:
        """A header refused before its line ended (by hiredis, `!1` say, or a huge aggregate count),
        where Redis reads the whole line before it answers "expected '$', got '!'": from here only
        `check` reads, until it raises."""
        if carry > self.max_query_buffer:
            raise QueryBufferLimit("query buffer limit reached")
        self._check, self._carry, self._broken, self._fresh = check, carry, True, False
        return end

    def _reject(self, data: bytes, pos: int, commands: list, first: int, skipped: int, start: int, begun: int) -> int:
        """A parsed item is not an array of bulk strings: an inline restart, or Redis's error."""
        resume = self._set_start(data, start, commands, begun)  # a set header before it starts an inline line
        if resume >= 0:
            return resume
        for index in range(first, len(commands)):
            argv = commands[index]
            if type(argv) is not list:
                # A top-level non-array is where Redis would have read an inline line.
                del commands[index:]
                return self._restart(data, pos, commands, first, skipped)
            if not all(type(a) is bytes for a in argv):
                if index >= begun:  # raises with the type byte Redis names
                    self._walk(data, start, commands, begun, index - begun + 1)
                del commands[index:]
                self._reset()
                raise ProtocolError(_bad_element(argv))

    def _set_start(self, data: bytes, start: int, commands: list, begun: int) -> int:
        """A request hiredis completed from a RESP3 set header (`~N`: it hands a set over as a list,
        as it does an array) is an inline line to Redis: drop it and those after it, and return where
        it starts, for the inline parse to go on from there (hiredis reset); -1 when there is none.
        Looked for only where a `~` and a digit follow a line end (XADD's `~` argument has none)."""
        if start < 0 or 126 not in data or (data[start : start + 1] != b"~" and _SET_START.search(data, max(start - 1, 0)) is None):
            return -1
        at = start
        for index in range(begun, len(commands)):
            while True:  # header by header, as `_walk`: an element Redis refuses raises its error here
                if data[at] != _STAR:
                    del commands[index:]
                    self._reset()
                    return at
                check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
                try:
                    at = check.feed(data, at)
                except ProtocolError:
                    del commands[index:]
                    self._reset()
                    raise
                if check.declared > 0:  # not '*0' or '*-1', which Redis skips (hiredis gave [] or None)
                    break
        return -1

    def _walk_other_strings(self, data: bytes, start: int, commands: list, begun: int, count: int = -1, ended: bool = False) -> None:
        """`_walk` the requests begun in a read with a simple, verbatim or big-number string's type byte,
        unless they hold none (ended: they end where data ends, and the counts of those bytes tell)."""
        if start < 0 or not (43 in data or 61 in data or 40 in data):
            return
        if not _other_strings(data, start, b"".join(chain.from_iterable(commands[begun:]))):
            return
        if not ended and _canonical_prefix(data, start, commands[begun:]):
            return  # the cut request after them has such a byte
        self._walk(data, start, commands, begun, count)

    def _walk(self, data: bytes, start: int, commands: list, begun: int, count: int = -1) -> None:
        """Read the requests hiredis completed from `start` (commands[begun] on) header by header, as Redis does.

        At the first header Redis refuses (an element that is no bulk string), the
        commands from that one on are dropped and Redis's error raised. `count` bounds
        the requests read (-1: all, and the headers of an incomplete last one).
        """
        if start < 0:  # the command carried over goes on past this read, or its start is unknown
            return
        pos, end, ok = start, len(data), begun
        while pos < end and count:
            if data[pos] != _STAR:
                return  # no request of hiredis's arrays starts here: an inline line to Redis, read as one elsewhere
            check = _HeaderCheck(self.max_bulk_len, self.unauthenticated)
            try:
                pos = check.feed(data, pos)
            except ProtocolError:
                del commands[ok:]
                self._reset()
                raise
            if pos < 0:
                return
            if check.declared > 0:  # not '*0' or '*-1' (hiredis gave [] or None; Redis ignores them)
                ok += 1
                count -= 1


def _bad_element(argv) -> str:
    if None in argv:
        return "invalid bulk length"
    for a in argv:
        if type(a) is not bytes:
            kind = {int: ":", list: "*", hiredis.ReplyError: "-"}.get(type(a), "?")
            return f"expected '$', got '{kind}'"
    return "invalid bulk length"
