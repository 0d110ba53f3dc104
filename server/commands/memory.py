"""MEMORY USAGE: what a key's value costs in this process.

Streams report their own size (packed nodes, lists, counters: see
storage.stream.Stream.memory_usage); strings their bytes object. Both add
the key name and the dictionary slot, as Redis adds its dictEntry and key.
"""

from __future__ import annotations

import sys

from protocol.errors import SYNTAX, ReplyError

from ..command import COMMANDS, command, container
from .args import to_int

if b"memory" not in COMMANDS:
    container("memory", group="server", summary="A container for memory diagnostics commands.", since="4.0.0")

_SLOT = 3 * 8  # a dict entry: hash, key and value pointers


def key_overhead(key: bytes) -> int:
    """What MEMORY USAGE adds to a value's own size: the key and its dictionary slot."""
    return sys.getsizeof(key) + _SLOT


@command(
    "memory|usage", -3, "readonly", keys=(2, 2, 1), group="server", since="4.0.0",
    summary="Estimates the memory usage of a key.", complexity="O(N) where N is the number of samples.",
)
def memory_usage(ctx, argv):
    """MEMORY USAGE key [SAMPLES count]

    Bytes, or nil when the key does not exist.
    """
    j = 3
    while j < len(argv):
        if argv[j].lower() == b"samples" and j + 1 < len(argv):
            if to_int(argv[j + 1]) < 0:
                raise ReplyError(SYNTAX)
            j += 2
        else:
            raise ReplyError(SYNTAX)
    key = argv[2]
    value = ctx.db.lookup(key, ctx.server.now)
    if value is None:
        return None
    size = key_overhead(key)
    measure = getattr(value, "memory_usage", None)
    return size + (measure() if measure is not None else sys.getsizeof(value))
