"""Argument parsing shared by handlers: integers, floats and option cursors.

Every parse error raises Redis's own wording, so handlers stay short and
errors come out uniformly (fakeredis's lesson).
"""

from __future__ import annotations

from protocol.errors import NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE, ReplyError
from protocol.reply import Simple

LLONG_MIN, LLONG_MAX = -(2**63), 2**63 - 1


def to_int(arg: bytes, error: str = NOT_INTEGER) -> int:
    """A signed 64-bit integer written as Redis's string2ll accepts it.

    Only an optional '-' and ASCII digits, no leading zeros, no "-0" (Python's
    int() would also take spaces, '+' and underscores).
    """
    if arg.isdigit() and len(arg) < 19 and (arg[0] != 48 or len(arg) == 1):
        return int(arg)  # the usual argument: a non-negative number that cannot overflow
    digits = arg[1:] if arg[:1] == b"-" else arg
    if not digits.isdigit() or (digits[0] == 48 and len(arg) > 1) or len(digits) > 19:
        raise ReplyError(error)
    value = int(arg)
    if not LLONG_MIN <= value <= LLONG_MAX:
        raise ReplyError(error)
    return value


def to_float(arg: bytes, error: str = NOT_FLOAT) -> float:
    try:
        value = float(arg)
    except ValueError:
        raise ReplyError(error) from None
    if value != value:
        raise ReplyError(error)
    return value


def count_read(server, value) -> None:
    """INFO's keyspace_hits/keyspace_misses, counted where Redis's lookupKeyRead* counts (reads, not writes)."""
    if value is None:
        server.keyspace_misses += 1
    else:
        server.keyspace_hits += 1


def read_lookup(ctx, key: bytes, kind: type | None = None):
    """The live value at key, looked up for reading: a hit or a miss in INFO stats.

    With `kind` (bytes, Stream), a key of another type is a hit, then WRONGTYPE, as in Redis.
    """
    value = ctx.db.lookup(key, ctx.server.now)
    count_read(ctx.server, value)
    if kind is not None and value is not None and type(value) is not kind:
        raise ReplyError(WRONGTYPE)
    return value


def help_reply(lines: list[str]) -> list[Simple]:
    """A HELP subcommand's reply: one status line each, as Redis's addReplyHelp sends them."""
    return [Simple(line.encode()) for line in lines]


class Cursor:
    """Walks the arguments of a command left to right (mini-redis's Parse)."""

    __slots__ = ("argv", "pos")

    def __init__(self, argv: list[bytes], pos: int = 1) -> None:
        self.argv = argv
        self.pos = pos

    def __bool__(self) -> bool:
        return self.pos < len(self.argv)

    def remaining(self) -> int:
        return len(self.argv) - self.pos

    def peek(self) -> bytes:
        return self.argv[self.pos].upper()

    def next(self) -> bytes:
        if self.pos >= len(self.argv):
            raise ReplyError(SYNTAX)
        arg = self.argv[self.pos]
        self.pos += 1
        return arg

    def next_upper(self) -> bytes:
        return self.next().upper()

    def next_int(self, error: str = NOT_INTEGER) -> int:
        return to_int(self.next(), error)


def int32_arg(arg: bytes) -> int:
    """Redis's getIntFromObjectOrReply with its own messages: not an integer, or outside a C int."""
    value = to_int(arg, "ERR value is not an integer or out of range")
    if not -(2**31) <= value < 2**31:
        raise ReplyError("ERR value is out of range, value must between -2147483648 and 2147483647")
    return value
