"""How many changes a write counts in `rdb_changes_since_last_save`, as Redis's `server.dirty`.

By default a write counts one per effect. Where Redis counts otherwise, the
rule reads the count from the effects or the reply (measured against Redis
8.2.3): keys deleted, pairs set, IDs acknowledged, deleted or claimed, and an
XREADGROUP once per stream it delivered from (a read of the group's own
history changes nothing). Consumer times (`XGROUP CREATECONSUMER ... SEENTIME`)
are Millrace's bookkeeping and count nothing; Redis's +1 for a consumer an
XREADGROUP or XCLAIM creates is not counted (the effect does not say whether
the consumer is new).
"""

from __future__ import annotations

from collections.abc import Callable

Effects = list[list[bytes]]


def _claimed(argv: list[bytes]) -> int:
    """IDs in an `XCLAIM key group consumer min-idle id... TIME ...` effect."""
    n = 0
    for arg in argv[5:]:
        if arg[:1].isalpha():
            break
        n += 1
    return n


def _per_effect(reply, effects: Effects) -> int:
    n = 0
    for argv in effects:
        op = argv[0].upper()
        if op in (b"DEL", b"UNLINK"):
            n += len(argv) - 1
        elif op == b"XACK":
            n += len(argv) - 3
        elif op == b"XDEL":
            n += len(argv) - 2
        elif op == b"MSET":
            n += (len(argv) - 1) // 2
        elif op == b"XCLAIM":
            n += _claimed(argv)
        elif op == b"XGROUP" and argv[1].upper() == b"CREATECONSUMER":
            continue
        else:
            n += 1
    return n


def _xreadgroup(reply, effects: Effects) -> int:
    return sum(1 for argv in effects if argv[0] == b"XGROUP" and argv[1] == b"SETID") + sum(
        len(argv) - 3 for argv in effects if argv[0] == b"XACK"
    )


def _reply_count(reply, effects: Effects) -> int:
    return reply if type(reply) is int else len(effects)


def _counted_by_handler(reply, effects: Effects) -> int:
    """FLUSHALL/FLUSHDB: the keys removed, which the effect does not say; the handler adds them before
    FLUSHALL's save (so with save points the count is 0 after it, as Redis 8.2.3)."""
    return 0


def _createconsumer(reply, effects: Effects) -> int:
    return 1 if effects else 0


RULES: dict[str, Callable[[object, Effects], int]] = {
    "del": _per_effect, "unlink": _per_effect, "mset": _per_effect, "msetnx": _per_effect,
    "xack": _per_effect, "xdel": _per_effect, "xclaim": _per_effect, "xautoclaim": _per_effect,
    "xreadgroup": _xreadgroup, "xtrim": _reply_count, "xgroup|createconsumer": _createconsumer,
    "flushall": _counted_by_handler, "flushdb": _counted_by_handler,
    "xnack": _reply_count,  # one per NACKed ID, as XACK and XCLAIM count theirs (Redis 8.8's own count is not documented)
}  # fmt: skip
