"""SLOWLOG: commands that ran longer than slowlog-log-slower-than, newest first.

Entries are kept as Redis keeps them: at most 32 arguments (the last one
saying how many more there were) and 128 bytes per argument.
"""

from __future__ import annotations

import time
from collections import deque

MAX_ARGC = 32  # SLOWLOG_ENTRY_MAX_ARGC
MAX_STRING = 128  # SLOWLOG_ENTRY_MAX_STRING
DISABLED = 1 << 62  # a threshold no command reaches


class SlowLog:
    """Redis's slowlogPushEntryIfNeeded runs after every command while the log is on (max-len > 0,
    threshold >= 0): it pushes a slow one, then drops the oldest past max-len; while off it does
    nothing, so a smaller max-len bites only once the log is on. Only CONFIG SET turns it on or
    shortens it, and it calls `trim` for that step; `push` does the rest."""

    __slots__ = ("entries", "max_len", "next_id")

    def __init__(self, max_len: int = 128) -> None:
        self.entries: deque[list] = deque()  # newest first; no deque maxlen, which would cut it at once
        self.max_len = max_len
        self.next_id = 0

    def resize(self, max_len: int) -> None:
        """CONFIG SET slowlog-max-len: nothing dropped yet (see `trim`)."""
        self.max_len = max_len

    def trim(self) -> None:
        """Drop the oldest entries past max_len, unless max_len is 0 (the log is off: Redis keeps them)."""
        entries, max_len = self.entries, self.max_len
        while max_len and len(entries) > max_len:
            entries.pop()

    def push(self, client, argv: list[bytes], duration_ns: int) -> None:
        if not self.max_len:  # slowlog-max-len 0: Redis logs nothing and keeps what it has
            return
        from .commands.server import redacted

        args = redacted(argv)
        if len(args) > MAX_ARGC:
            args = [*args[: MAX_ARGC - 1], f"... ({len(argv) - MAX_ARGC + 1} more arguments)".encode()]
        args = [a if len(a) <= MAX_STRING else a[:MAX_STRING] + f"... ({len(a) - MAX_STRING} more bytes)".encode() for a in args]
        entries = self.entries
        entries.appendleft([self.next_id, int(time.time()), duration_ns // 1000, args, client.addr.encode(), client.name])
        self.next_id += 1
        while len(entries) > self.max_len:  # one at most: the log is trimmed whenever it is turned on
            entries.pop()


def threshold_ns(micros: int) -> int:
    """slowlog-log-slower-than in µs (negative: off, 0: everything) as a ns threshold."""
    return DISABLED if micros < 0 else micros * 1000
