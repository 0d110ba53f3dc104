"""COMMAND and its subcommands, generated from the one command table.

Replies follow Redis 7's shapes (flags and ACL categories as status replies,
key specs as maps, subcommands nested) so that redis-cli's hints and
client libraries' command discovery work unchanged.
"""

from __future__ import annotations

import fnmatch

from protocol.errors import SYNTAX, ReplyError
from protocol.reply import Map, Set, Simple

from .. import syntax
from ..command import COMMANDS, Command, command
from .args import help_reply

# Redis's order of command flags and ACL categories in COMMAND INFO.
FLAG_ORDER = (
    "write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript", "blocking", "loading", "stale",
    "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth", "may_replicate", "sentinel", "only_sentinel",
    "no_mandatory_keys", "protected", "module_getkeys", "module_no_cluster", "no_async_loading", "no_multi",
    "movablekeys", "allow_busy",
)  # fmt: skip
CATEGORY_ORDER = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog", "geo",
    "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection", "transaction", "scripting",
)  # fmt: skip
GROUP_CATEGORY = {
    "generic": "keyspace", "string": "string", "stream": "stream", "list": "list", "hash": "hash", "set": "set",
    "sorted-set": "sortedset", "pubsub": "pubsub", "connection": "connection", "transactions": "transaction",
    "scripting": "scripting", "bitmap": "bitmap", "hyperloglog": "hyperloglog", "geo": "geo",
}  # fmt: skip


# Categories Redis's command JSON adds beyond what flags and group imply.
EXTRA_CATEGORIES = {
    "info": ("dangerous",),
    "lastsave": ("admin", "dangerous"),
    "keys": ("dangerous",),
    "flushall": ("keyspace", "dangerous"),
    "flushdb": ("keyspace", "dangerous"),
    "swapdb": ("keyspace", "dangerous"),
    "dbsize": ("keyspace",),
    "randomkey": ("keyspace",),
}


def lookup(name: bytes) -> Command | None:
    """A command by name, `parent|sub` for a subcommand."""
    parent, _, sub = name.lower().partition(b"|")
    cmd = COMMANDS.get(parent)
    if cmd is not None and sub:
        return cmd.subcommands.get(sub)
    return cmd


def command_flags(cmd: Command) -> list[str]:
    names = {flag.replace("-", "_") for flag in cmd.flags}
    if cmd.keys_fn is not None:
        names.add("movablekeys")
    return [flag for flag in FLAG_ORDER if flag in names]


def acl_categories(cmd: Command) -> list[str]:
    if cmd.handler is None:  # a container: its subcommands carry the categories
        return ["slow"]
    cats = set()
    flags = cmd.flags
    if "write" in flags:
        cats.add("write")
    if "readonly" in flags:
        cats.add("read")
    if "admin" in flags:
        cats.update(("admin", "dangerous"))
    if "pubsub" in flags:
        cats.add("pubsub")
    if "blocking" in flags:
        cats.add("blocking")
    cats.add("fast" if "fast" in flags else "slow")
    group = GROUP_CATEGORY.get(cmd.group)
    if group is not None:
        cats.add(group)
    top = cmd.parent.name if cmd.parent is not None else cmd.name
    cats.update(EXTRA_CATEGORIES.get(cmd.name, ()))
    if top == "command":  # COMMAND and its subcommands are @connection in Redis
        cats.add("connection")
    return [cat for cat in CATEGORY_ORDER if cat in cats]


def legacy_keys(cmd: Command) -> tuple[int, int, int]:
    if cmd.keys_fn is not None:
        return (0, 0, 0)
    return cmd.keys


def key_flags(cmd: Command) -> list[str]:
    if "write" in cmd.flags:
        return ["RW", "update"]
    return ["RO", "access"]


def key_specs(cmd: Command) -> list:
    first, last, step = cmd.keys
    if cmd.keys_fn is not None:
        return [
            Map(
                {
                    b"flags": Set([Simple(f.encode()) for f in key_flags(cmd)]),
                    b"begin_search": Map({b"type": b"unknown", b"spec": Map()}),
                    b"find_keys": Map({b"type": b"unknown", b"spec": Map()}),
                }
            )
        ]
    if first == 0:
        return []
    lastkey = last - first if last >= 0 else last
    return [
        Map(
            {
                b"flags": Set([Simple(f.encode()) for f in key_flags(cmd)]),
                b"begin_search": Map({b"type": b"index", b"spec": Map({b"index": first})}),
                b"find_keys": Map({b"type": b"range", b"spec": Map({b"lastkey": lastkey, b"keystep": step, b"limit": 0})}),
            }
        )
    ]


def command_info(cmd: Command) -> list:
    """One entry of COMMAND / COMMAND INFO (10 fields, Redis 7)."""
    first, last, step = legacy_keys(cmd)
    return [
        cmd.name.encode(),
        cmd.arity,
        Set([Simple(f.encode()) for f in command_flags(cmd)]),
        first,
        last,
        step,
        Set([Simple(b"@" + c.encode()) for c in acl_categories(cmd)]),
        Set([]),
        Set(key_specs(cmd)),
        Set([command_info(sub) for sub in cmd.subcommands.values()]),
    ]


def command_docs(cmd: Command) -> Map:
    """One value of COMMAND DOCS."""
    docs = Map(
        {
            b"summary": cmd.summary.encode(),
            b"since": cmd.since.encode(),
            b"group": cmd.group.encode(),
            b"complexity": cmd.complexity.encode(),
        }
    )
    try:
        arguments = syntax.arguments(cmd.handler, cmd.name)
    except Exception:  # a syntax line the parser cannot read: no argument docs, never an error
        arguments = []
    if arguments:
        docs[b"arguments"] = arguments
    if cmd.subcommands:
        docs[b"subcommands"] = Map({sub.name.encode(): command_docs(sub) for sub in cmd.subcommands.values()})
    return docs


def all_names() -> list[Command]:
    result = []
    for cmd in COMMANDS.values():
        result.append(cmd)
        result.extend(cmd.subcommands.values())
    return result


@command("command", -1, "loading stale", group="server", summary="Returns detailed information about all commands.", since="2.8.13", complexity="O(N) where N is the total number of Redis commands")
def command_(ctx, argv):
    """COMMAND -> the full table (subcommands nested)."""
    return [command_info(cmd) for cmd in COMMANDS.values()]


@command("command|count", 2, "loading stale", group="server", summary="Returns a count of commands.", since="2.8.13")
def command_count(ctx, argv):
    return len(COMMANDS)


@command("command|info", -2, "loading stale", group="server", summary="Returns information about one, multiple or all commands.", since="2.8.13")
def command_info_cmd(ctx, argv):
    """COMMAND INFO [command-name [command-name ...]]: null for unknown names; all without names."""
    if len(argv) == 2:
        return [command_info(cmd) for cmd in COMMANDS.values()]
    result = []
    for name in argv[2:]:
        cmd = lookup(name)
        result.append(command_info(cmd) if cmd is not None else None)
    return result


@command("command|docs", -2, "loading stale", group="server", summary="Returns documentary information about one, multiple or all commands.", since="7.0.0")
def command_docs_cmd(ctx, argv):
    """COMMAND DOCS [command-name [command-name ...]] -> map of name to docs; unknown names left out."""
    if len(argv) == 2:
        return Map({cmd.name.encode(): command_docs(cmd) for cmd in COMMANDS.values()})
    result = Map()
    for name in argv[2:]:
        cmd = lookup(name)
        if cmd is not None:
            result[cmd.name.encode()] = command_docs(cmd)
    return result


@command("command|list", -2, "loading stale", group="server", summary="Returns a list of command names.", since="7.0.0")
def command_list(ctx, argv):
    """COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]"""
    names = all_names()
    if len(argv) == 2:
        return [cmd.name.encode() for cmd in names]
    if len(argv) != 5 or argv[2].lower() != b"filterby":
        raise ReplyError(SYNTAX)
    kind, value = argv[3].lower(), argv[4].decode(errors="replace")
    if kind == b"module":
        return []
    if kind == b"aclcat":
        category = value.lower()
        return [cmd.name.encode() for cmd in names if category in acl_categories(cmd)]
    if kind == b"pattern":
        return [cmd.name.encode() for cmd in names if fnmatch.fnmatchcase(cmd.name, value.lower())]
    raise ReplyError(SYNTAX)


def _keys_for(argv: list[bytes]) -> tuple[Command, list[int]]:
    target = argv[2:]
    cmd = COMMANDS.get(target[0].lower())
    if cmd is not None and cmd.subcommands and len(target) > 1:
        cmd = cmd.subcommands.get(target[1].lower())
    if cmd is None:
        raise ReplyError("ERR Invalid command specified")
    arity = cmd.arity
    if (arity > 0 and len(target) != arity) or len(target) < -arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    positions = cmd.key_positions(target)
    if not positions:
        raise ReplyError("ERR The command has no key arguments")
    return cmd, positions


@command("command|getkeys", -3, "loading stale", group="server", summary="Extracts the key names from an arbitrary command.", since="2.8.13")
def command_getkeys(ctx, argv):
    """COMMAND GETKEYS command [arg [arg ...]]"""
    _cmd, positions = _keys_for(argv)
    return [argv[2 + i] for i in positions]


@command("command|getkeysandflags", -3, "loading stale", group="server", summary="Extracts the key names and access flags for an arbitrary command.", since="7.0.0")
def command_getkeysandflags(ctx, argv):
    """COMMAND GETKEYSANDFLAGS command [arg [arg ...]]"""
    cmd, positions = _keys_for(argv)
    flags = Set([Simple(f.encode()) for f in key_flags(cmd)])
    return [[argv[2 + i], flags] for i in positions]


COMMAND_HELP = [
    "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
    "HELP",
    "    Print this help.",
]


@command("command|help", 2, "loading stale", group="server", summary="Returns helpful text about the different subcommands.", since="5.0.0")
def command_help(ctx, argv):
    return help_reply(COMMAND_HELP)
