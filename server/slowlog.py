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
    __slots__ = ("entries", "next_id")

    def __init__(self, max_len: int = 128) -> None:
        self.entries: deque[list] = deque(maxlen=max_len)
        self.next_id = 0

    def resize(self, max_len: int) -> None:
        self.entries = deque(self.entries, maxlen=max_len)

    def push(self, client, argv: list[bytes], duration_ns: int) -> None:
        from .commands.server import redacted

        args = redacted(argv)
        if len(args) > MAX_ARGC:
            args = [*args[: MAX_ARGC - 1], f"... ({len(argv) - MAX_ARGC + 1} more arguments)".encode()]
        args = [a if len(a) <= MAX_STRING else a[:MAX_STRING] + f"... ({len(a) - MAX_STRING} more bytes)".encode() for a in args]
        self.entries.appendleft(
            [self.next_id, int(time.time()), duration_ns // 1000, args, client.addr.encode(), client.name]
        )
        self.next_id += 1


def threshold_ns(micros: int) -> int:
    """slowlog-log-slower-than in µs (negative: off, 0: everything) as a ns threshold."""
    return DISABLED if micros < 0 else micros * 1000
