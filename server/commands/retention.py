"""Consumption-based retention commands: XRETENTION SET/GET/OFF/HELP, XGROUP SETCONFIG SUBSCRIBER, XGROUP RELEASE.

See storage/retention.py for the rules and server/retention.py for when they
run. Every command here propagates as itself, normalized; the trims a policy
makes propagate as `XTRIM key MINID = <id>` plus `XRETENTION SETSTATE`, an
effect-only subcommand that loading clients and replicas alone may send.
"""

from __future__ import annotations

from protocol.errors import SYNTAX, ReplyError, arg_text
from protocol.reply import OK, Map
from storage import retention as store
from storage.stream_id import format_id, parse_strict_id

from ..command import command, container
from .args import Cursor, help_reply, to_int
from .group_config import setconfig_option
from .groups import _xgroup_prologue
from .stream_args import lookup_stream, read_stream

container("xretention", group="stream", summary="A container for consumption-based retention commands.", since="8.2.0")

_LIMITS = {
    b"MIN-LEN": (True, b"len"), b"MIN-AGE": (True, b"age"), b"MIN-BYTES": (True, b"bytes"),
    b"MAX-LEN": (False, b"len"), b"MAX-AGE": (False, b"age"), b"MAX-BYTES": (False, b"bytes"),
}  # fmt: skip


def limit_name(is_min: bool, kind: bytes) -> bytes:
    return (b"MIN-" if is_min else b"MAX-") + kind.upper()


def limit_reply(limit: tuple[bytes, int] | None) -> list | None:
    """A MIN or MAX limit as [name, value] (e.g. [MIN-LEN, 100]), nil when not set."""
    return None if limit is None else [limit[0], limit[1]]


def _existing_stream(ctx, key: bytes, write: bool):
    stream = lookup_stream(ctx, key) if write else read_stream(ctx, key)
    if stream is None:
        raise ReplyError("ERR no such key")
    return stream


@command("xretention|set", -4, "write", keys=(2, 2, 1), group="stream", summary="Sets a stream's consumption-based retention policy.", since="8.2.0")
def xretention_set(ctx, argv):
    """XRETENTION SET key CONSUMPTION [MIN-LEN n | MIN-AGE ms | MIN-BYTES b] [MAX-LEN n | MAX-AGE ms | MAX-BYTES b] -> OK"""
    cursor = Cursor(argv, 3)
    if cursor.next_upper() != b"CONSUMPTION":
        raise ReplyError(SYNTAX)
    limits: dict[bool, tuple[bytes, bytes, int]] = {}
    while cursor:
        word = cursor.next_upper()
        spec = _LIMITS.get(word)
        if spec is None or not cursor:
            raise ReplyError(SYNTAX)
        is_min, kind = spec
        if is_min in limits:
            raise ReplyError(f"ERR syntax error, {limits[is_min][0].decode()} and {word.decode()} options at the same time are not compatible")
        value = cursor.next_int()
        if value < 0:
            raise ReplyError(f"ERR The {word.decode()} argument must be >= 0.")
        limits[is_min] = (word, kind, value)
    low, high = limits.get(True), limits.get(False)
    if low is not None and high is not None and low[1] == high[1] and low[2] > high[2]:
        raise ReplyError(f"ERR {low[0].decode()} must not be greater than {high[0].decode()}")
    stream = _existing_stream(ctx, argv[2], True)
    retention = store.of(stream)
    retention.policy = (
        (low[1], low[2]) if low is not None else None,
        (high[1], high[2]) if high is not None else None,
    )
    effect = [b"XRETENTION", b"SET", argv[2], b"CONSUMPTION"]
    for limit in (low, high):
        if limit is not None:
            effect += [limit[0], b"%d" % limit[2]]
    ctx.server.retained.keys[(ctx.db.id, argv[2])] = None
    return OK, [effect]


@command("xretention|off", 3, "write", keys=(2, 2, 1), group="stream", summary="Removes a stream's retention policy.", since="8.2.0")
def xretention_off(ctx, argv):
    """XRETENTION OFF key -> 1 if the stream had a policy, else 0 (group roles and counters stay)."""
    stream = _existing_stream(ctx, argv[2], True)
    retention = stream.retention
    if retention is None or retention.policy is None:
        return 0, []
    retention.policy = None
    return 1, [[b"XRETENTION", b"OFF", argv[2]]]


def policy_fields(stream, prefix: bytes = b"") -> list[tuple[bytes, object]]:
    """The fields XRETENTION GET shows (XINFO STREAM shows them with the `retention-` prefix)."""
    retention = stream.retention
    minimum, maximum = retention.policy
    holder, _slb = store.head_holder(stream, retention)
    return [
        (prefix + b"policy", b"consumption"),
        (prefix + b"min", _named(minimum, True)),
        (prefix + b"max", _named(maximum, False)),
        (prefix + b"holder", holder),
        (prefix + b"entries-truncated", retention.entries_truncated),
        (prefix + b"entries-lost", retention.entries_lost),
        (prefix + b"last-run", retention.last_run),
    ]


def _named(limit, is_min: bool) -> list | None:
    return None if limit is None else [limit_name(is_min, limit[0]), limit[1]]


@command("xretention|get", 3, "readonly", keys=(2, 2, 1), group="stream", summary="Returns a stream's retention policy and counters.", since="8.2.0")
def xretention_get(ctx, argv):
    """XRETENTION GET key -> policy, min, max, holder, entries-truncated, entries-lost, last-run; nil without a policy."""
    stream = _existing_stream(ctx, argv[2], False)
    if stream.retention is None or stream.retention.policy is None:
        return None
    fields = policy_fields(stream)
    fields.insert(4, (b"subscribers", len(stream.retention.subscribers(stream))))
    return Map(dict(fields))


@command("xretention|setstate", -9, "write", keys=(2, 2, 1), group="stream", summary="Sets a stream's retention counters (replication and AOF only).", since="8.2.0")
def xretention_setstate(ctx, argv):
    """XRETENTION SETSTATE key ENTRIES-TRUNCATED n ENTRIES-LOST n LAST-RUN ms [GROUP name entries-lost release-id ...]

    Effect only: the counters (and each named group's entries-lost and MANUAL
    release ID) exactly, as a run or an AOF rewrite states them.
    """
    if not ctx.loading:
        raise ReplyError("ERR XRETENTION SETSTATE is for replication and AOF loading only")
    if (len(argv) - 9) % 4 or [a.upper() for a in argv[3:9:2]] != [b"ENTRIES-TRUNCATED", b"ENTRIES-LOST", b"LAST-RUN"]:
        raise ReplyError(SYNTAX)
    stream = _existing_stream(ctx, argv[2], True)
    retention = store.of(stream)
    truncated, lost, last_run = to_int(argv[4]), to_int(argv[6]), to_int(argv[8])
    groups = []
    for i in range(9, len(argv), 4):
        if argv[i].upper() != b"GROUP":
            raise ReplyError(SYNTAX)
        group = stream.groups.get(argv[i + 1])
        if group is None:
            raise ReplyError(f"NOGROUP No such consumer group '{arg_text(argv[i + 1])}' for key name '{arg_text(argv[2])}'")
        groups.append((argv[i + 1], group, to_int(argv[i + 2]), parse_strict_id(argv[i + 3])))
    retention.entries_truncated, retention.entries_lost, retention.last_run = truncated, lost, last_run
    for name, group, group_lost, release in groups:
        role = retention.role_for(stream, name, group)
        role.entries_lost, role.release = group_lost, release
    return OK, [argv]


XRETENTION_HELP = [
    "XRETENTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "SET <key> CONSUMPTION [MIN-LEN <n>|MIN-AGE <ms>|MIN-BYTES <b>] [MAX-LEN <n>|MAX-AGE <ms>|MAX-BYTES <b>]",
    "    Keep what the subscriber groups have not processed, at least MIN and at most MAX.",
    "GET <key>",
    "    Show the policy, the group holding the head and the retention counters.",
    "OFF <key>",
    "    Remove the policy (group roles and counters are kept).",
    "Groups take part through XGROUP (XGROUP HELP lists Redis's subcommands only):",
    "XGROUP SETCONFIG <key> <groupname> SUBSCRIBER AUTO|MANUAL|NONE",
    "    AUTO holds entries until acknowledged, MANUAL until released, NONE holds nothing.",
    "XGROUP RELEASE <key> <groupname> <id|$>",
    "    A MANUAL subscriber releases the entries up to <id> (never backwards).",
    "HELP",
    "    Print this help.",
]


@command("xretention|help", 2, "loading stale", group="stream", summary="Returns helpful text about the different subcommands.", since="8.2.0")
def xretention_help(ctx, argv):
    """XRETENTION HELP"""
    return help_reply(XRETENTION_HELP)


# -- XGROUP SETCONFIG ... SUBSCRIBER, XGROUP RELEASE --------------------------------


def _parse_subscriber(ctx, stream, group, cursor: Cursor):
    word = cursor.next()
    mode = word.lower()
    if mode not in store.MODES:
        raise ReplyError("ERR SUBSCRIBER must be AUTO, MANUAL or NONE")
    return mode, [b"SUBSCRIBER", mode.upper()]


def _apply_subscriber(ctx, stream, name: bytes, group, mode: bytes) -> None:
    retention = store.of(stream)
    role = retention.role_for(stream, name, group)
    if mode == store.MANUAL and role.mode != store.MANUAL:
        role.release = store.ack_floor(stream, group) - 1  # it holds what it has not processed yet
    role.mode = mode


setconfig_option(b"SUBSCRIBER", _parse_subscriber, _apply_subscriber)


@command("xgroup|release", 5, "write", keys=(2, 2, 1), group="stream", summary="Releases a MANUAL subscriber group's entries up to an ID.", since="8.2.0")
def xgroup_release(ctx, argv):
    """XGROUP RELEASE key group <id | $> -> OK; the group no longer holds entries <= id (never moves back)."""
    stream, group, _mkstream, _entries_read = _xgroup_prologue(ctx, argv[:4], True)
    stats = ctx.server.stats
    release = stream.last_id if argv[4] == b"$" else parse_strict_id(argv[4])
    retention = stream.retention
    role = retention.role(stream, argv[3]) if retention is not None else None
    if role is None or role.mode != store.MANUAL:
        stats["stream_release_rejected"] += 1
        raise ReplyError("ERR the consumer group is not a MANUAL subscriber")
    if release < role.release:
        stats["stream_release_rejected"] += 1
        raise ReplyError("ERR release id is lower than the current one")
    if release > stream.last_id:
        stats["stream_release_rejected"] += 1
        raise ReplyError("ERR release id is greater than the stream's last ID")
    if release == role.release:
        return OK, []
    role.release = release
    stats["stream_release_updates"] += 1
    return OK, [[b"XGROUP", b"RELEASE", argv[2], argv[3], format_id(release)]]




def group_fields(stream, name: bytes, group) -> list[tuple[bytes, object]]:
    """XINFO GROUPS' extra fields for a stream with a policy: subscriber, release-id, entries-lost."""
    role = stream.retention.role(stream, name)
    mode = role.mode if role is not None else store.NONE
    if mode == store.MANUAL:
        release = format_id(role.release)
    elif mode == store.AUTO:
        release = format_id(store.ack_floor(stream, group) - 1)
    else:
        release = None
    return [(b"subscriber", mode), (b"release-id", release), (b"entries-lost", role.entries_lost if role is not None else 0)]
