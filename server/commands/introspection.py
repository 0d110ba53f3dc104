"""COMMAND and its subcommands, generated from the one command table.

Replies follow Redis 7's shapes (flags and ACL categories as status replies,
key specs as maps, subcommands nested) so that redis-cli's hints and
client libraries' command discovery work unchanged.
"""

from __future__ import annotations

from protocol.errors import SYNTAX, ReplyError
from protocol.reply import Map, Set, Simple
from storage.glob import compile_pattern

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
# (@pubsub comes from the pubsub flag alone, as in Redis: PUBSUB HELP is in the group, not the category.)
GROUP_CATEGORY = {
    "generic": "keyspace", "string": "string", "stream": "stream", "list": "list", "hash": "hash", "set": "set",
    "sorted-set": "sortedset", "connection": "connection", "transactions": "transaction",
    "scripting": "scripting", "bitmap": "bitmap", "hyperloglog": "hyperloglog", "geo": "geo",
}  # fmt: skip


# Categories Redis's command JSON adds beyond what flags and group imply.
EXTRA_CATEGORIES = {
    "info": ("dangerous",),
    "lastsave": ("admin", "dangerous"),
    "role": ("admin", "dangerous"),
    "keys": ("dangerous",),
    "flushall": ("keyspace", "dangerous"),
    "flushdb": ("keyspace", "dangerous"),
    "swapdb": ("keyspace", "dangerous"),
    "dbsize": ("keyspace",),
    "randomkey": ("keyspace",),
    "wait": ("connection",),
    "waitaof": ("connection",),
}
# Commands whose group implies no category in Redis's JSON (WAIT is "generic" but not @keyspace).
NO_GROUP_CATEGORY = frozenset({"wait", "waitaof"})


def lookup(name: bytes) -> Command | None:
    """A command by name, `parent|sub` for a subcommand."""
    parent, bar, sub = name.lower().partition(b"|")
    cmd = COMMANDS.get(parent)
    if cmd is not None and bar:  # `get|` names no command
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
    group = GROUP_CATEGORY.get(cmd.group) if cmd.name not in NO_GROUP_CATEGORY else None
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


# Key specs as Redis's src/commands/*.json declare them, where they differ from the default
# (one range from the legacy positions, RW+update for writes, RO+access for reads):
# (flags, begin_search, (lastkey, keystep, limit), notes); begin_search is an index or (keyword, startfrom).
KeySpecRow = tuple[tuple[str, ...], "int | tuple[str, int]", tuple[int, int, int], "str | None"]
_ONE = (0, 1, 0)
_RW_ACCESS_UPDATE = ((("RW", "access", "update"), 1, _ONE, None),)
_RO_ONE = ((("RO",), 1, _ONE, None),)
_RO_ALL = ((("RO",), 1, (-1, 1, 0), None),)
_RO_SUB = ((("RO",), 2, _ONE, None),)
KEY_SPECS: dict[str, tuple[KeySpecRow, ...]] = {
    "append": ((("RW", "insert"), 1, _ONE, None),),
    "copy": ((("RO", "access"), 1, _ONE, None), (("OW", "update"), 2, _ONE, None)),
    "rename": ((("RW", "access", "delete"), 1, _ONE, None), (("OW", "update"), 2, _ONE, None)),
    "renamenx": ((("RW", "access", "delete"), 1, _ONE, None), (("OW", "insert"), 2, _ONE, None)),
    "del": ((("RM", "delete"), 1, (-1, 1, 0), None),),
    "unlink": ((("RM", "delete"), 1, (-1, 1, 0), None),),
    "getdel": ((("RW", "access", "delete"), 1, _ONE, None),),
    "getex": ((("RW", "access", "update"), 1, _ONE, "RW and UPDATE because it changes the TTL"),),
    "set": ((("RW", "access", "update", "variable_flags"), 1, _ONE, "RW and ACCESS due to the optional `GET` argument"),),
    "mset": ((("OW", "update"), 1, (-1, 2, 0), None),),
    "msetnx": ((("OW", "insert"), 1, (-1, 2, 0), None),),
    "setex": ((("OW", "update"), 1, _ONE, None),),
    "psetex": ((("OW", "update"), 1, _ONE, None),),
    "setnx": ((("OW", "insert"), 1, _ONE, None),),
    "incr": _RW_ACCESS_UPDATE, "decr": _RW_ACCESS_UPDATE, "incrby": _RW_ACCESS_UPDATE, "decrby": _RW_ACCESS_UPDATE,
    "incrbyfloat": _RW_ACCESS_UPDATE, "getset": _RW_ACCESS_UPDATE, "move": _RW_ACCESS_UPDATE,
    "exists": _RO_ALL, "touch": _RO_ALL, "watch": _RO_ALL,
    "strlen": _RO_ONE, "type": _RO_ONE, "xlen": _RO_ONE,
    "memory|usage": _RO_SUB, "object|encoding": _RO_SUB, "object|freq": _RO_SUB, "object|idletime": _RO_SUB,
    "object|refcount": _RO_SUB,
    "xadd": ((("RW", "update"), 1, _ONE, "UPDATE instead of INSERT because of the optional trimming feature"),),
    "xautoclaim": ((("RW", "delete"), 1, _ONE, None),),
    "xdel": ((("RW", "delete"), 1, _ONE, None),),
    "xdelex": ((("RW", "delete"), 1, _ONE, None),),
    "xackdel": ((("RW", "update", "delete"), 1, _ONE, None),),
    "xtrim": ((("RW", "delete"), 1, _ONE, None),),
    "xgroup|create": ((("RW", "insert"), 2, _ONE, None),),
    "xgroup|createconsumer": ((("RW", "insert"), 2, _ONE, None),),
    "xgroup|delconsumer": ((("RW", "delete"), 2, _ONE, None),),
    "xgroup|destroy": ((("RW", "delete"), 2, _ONE, None),),
    "xread": ((("RO", "access"), ("STREAMS", 1), (-1, 1, 2), None),),
    "xreadgroup": ((("RO", "access"), ("STREAMS", 4), (-1, 1, 2), None),),
}  # fmt: skip

# Command tips (request/response policies for cluster clients, nondeterministic output), as in Redis 8.2's JSON.
_NONDET = ("nondeterministic_output",)
_ORDER = ("nondeterministic_output_order",)
_ALL_SHARDS_OK = ("request_policy:all_shards", "response_policy:all_succeeded")
_MULTI_SUM = ("request_policy:multi_shard", "response_policy:agg_sum")
_ALL_NODES_OK = ("request_policy:all_nodes", "response_policy:all_succeeded")
TIPS: dict[str, tuple[str, ...]] = {
    "client|info": _NONDET, "client|list": _NONDET, "lastsave": _NONDET, "pttl": _NONDET, "ttl": _NONDET,
    "time": _NONDET, "xadd": _NONDET, "xautoclaim": _NONDET, "xclaim": _NONDET, "xinfo|consumers": _NONDET,
    "xpending": _NONDET, "xtrim": _NONDET, "object|encoding": _NONDET, "object|freq": _NONDET,
    "object|idletime": _NONDET, "object|refcount": _NONDET,
    "command": _ORDER, "command|docs": _ORDER, "command|info": _ORDER, "command|list": _ORDER, "function|list": _ORDER,
    "config|set": _ALL_NODES_OK, "config|resetstat": _ALL_NODES_OK, "config|rewrite": _ALL_NODES_OK,
    "client|setname": _ALL_NODES_OK, "client|setinfo": _ALL_NODES_OK,
    "dbsize": ("request_policy:all_shards", "response_policy:agg_sum"),
    "flushall": _ALL_SHARDS_OK, "flushdb": _ALL_SHARDS_OK, "function|flush": _ALL_SHARDS_OK, "ping": _ALL_SHARDS_OK,
    "function|stats": ("nondeterministic_output", "request_policy:all_shards", "response_policy:special"),
    "info": ("nondeterministic_output", "request_policy:all_shards", "response_policy:special"),
    "keys": ("request_policy:all_shards", "nondeterministic_output_order"),
    "randomkey": ("request_policy:all_shards", "response_policy:special", "nondeterministic_output"),
    "scan": ("nondeterministic_output", "request_policy:special", "response_policy:special"),
    "del": _MULTI_SUM, "exists": _MULTI_SUM, "touch": _MULTI_SUM, "unlink": _MULTI_SUM,
    "mget": ("request_policy:multi_shard",),
    "mset": ("request_policy:multi_shard", "response_policy:all_succeeded"),
    "slowlog|get": ("request_policy:all_nodes", "nondeterministic_output"),
    "slowlog|len": ("request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"),
    "slowlog|reset": _ALL_NODES_OK,
    "wait": ("request_policy:all_shards", "response_policy:agg_min"),
    "waitaof": ("request_policy:all_shards", "response_policy:agg_min"),
}  # fmt: skip


def key_spec_rows(cmd: Command) -> tuple[KeySpecRow, ...]:
    rows = KEY_SPECS.get(cmd.name)
    if rows is not None:
        return rows
    flags = ("RW", "update") if "write" in cmd.flags else ("RO", "access")
    first, last, step = cmd.keys
    if first == 0:
        return ()
    return ((flags, first, (last - first if last >= 0 else last, step, 0), None),)


def key_flags(cmd: Command, argv: list[bytes], nth: int) -> tuple[str, ...]:
    """The flags of the nth key COMMAND GETKEYSANDFLAGS found in argv (the command and its arguments)."""
    if cmd.name == "set":  # variable flags: Redis's setGetKeys looks for GET
        if any(arg.lower() == b"get" for arg in argv[3:]):
            return ("RW", "access", "update")
        return ("OW", "update")
    rows = key_spec_rows(cmd)
    return rows[min(nth, len(rows) - 1)][0]


def _key_spec(row: KeySpecRow) -> Map:
    flags, begin, (lastkey, keystep, limit), notes = row
    spec = Map({b"notes": notes.encode()}) if notes is not None else Map()
    spec[b"flags"] = Set([Simple(f.encode()) for f in flags])
    if isinstance(begin, int):
        spec[b"begin_search"] = Map({b"type": b"index", b"spec": Map({b"index": begin})})
    else:
        spec[b"begin_search"] = Map({b"type": b"keyword", b"spec": Map({b"keyword": begin[0].encode(), b"startfrom": begin[1]})})
    spec[b"find_keys"] = Map({b"type": b"range", b"spec": Map({b"lastkey": lastkey, b"keystep": keystep, b"limit": limit})})
    return spec


def key_specs(cmd: Command) -> list:
    return [_key_spec(row) for row in key_spec_rows(cmd)]


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
        Set([t.encode() for t in TIPS.get(cmd.name, ())]),
        Set(key_specs(cmd)),
        [command_info(sub) for sub in cmd.subcommands.values()] if cmd.subcommands else Set(),  # as Redis: an array, or an empty set
    ]


def command_docs(cmd: Command) -> Map:
    """One value of COMMAND DOCS."""
    docs = Map({b"summary": cmd.summary.encode(), b"since": cmd.since.encode(), b"group": cmd.group.encode()})
    if cmd.complexity is not None:
        docs[b"complexity"] = cmd.complexity.encode()
    doc_flags = syntax.DOC_FLAGS.get(cmd.name)
    if doc_flags:
        docs[b"doc_flags"] = Set([Simple(flag.encode()) for flag in doc_flags])
    deprecated = syntax.DEPRECATED.get(cmd.name)
    if deprecated is not None:
        docs[b"deprecated_since"] = deprecated[0].encode()
        docs[b"replaced_by"] = deprecated[1].encode()
    history = syntax.HISTORY.get(cmd.name)
    if history:
        docs[b"history"] = Set([[version.encode(), change.encode()] for version, change in history])  # a set in RESP3, as Redis
    try:
        arguments = syntax.arguments(cmd.handler, cmd.name, len(key_spec_rows(cmd)))
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


@command("command|info", -2, "loading stale", group="server", summary="Returns information about one, multiple or all commands.", since="2.8.13", complexity="O(N) where N is the number of commands to look up")
def command_info_cmd(ctx, argv):
    """COMMAND INFO [command-name [command-name ...]]: null for unknown names; all without names."""
    if len(argv) == 2:
        return [command_info(cmd) for cmd in COMMANDS.values()]
    result = []
    for name in argv[2:]:
        cmd = lookup(name)
        result.append(command_info(cmd) if cmd is not None else None)
    return result


@command("command|docs", -2, "loading stale", group="server", summary="Returns documentary information about one, multiple or all commands.", since="7.0.0", complexity="O(N) where N is the number of commands to look up")
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


@command("command|list", -2, "loading stale", group="server", summary="Returns a list of command names.", since="7.0.0", complexity="O(N) where N is the total number of Redis commands")
def command_list(ctx, argv):
    """COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]"""
    names = all_names()
    if len(argv) == 2:
        return [cmd.name.encode() for cmd in names]
    if len(argv) != 5 or argv[2].lower() != b"filterby":
        raise ReplyError(SYNTAX)
    kind, value = argv[3].lower(), argv[4]
    if kind == b"module":
        return []
    if kind == b"aclcat":
        category = value.decode(errors="replace").lower()
        return [cmd.name.encode() for cmd in names if category in acl_categories(cmd)]
    if kind == b"pattern":
        match = compile_pattern(value, nocase=True)  # Redis's stringmatchlen over the full name, nocase
        return [cmd.name.encode() for cmd in names if match(cmd.name.encode())]
    raise ReplyError(SYNTAX)


def _keys_for(argv: list[bytes]) -> tuple[Command, list[int]]:
    target = argv[2:]
    cmd = COMMANDS.get(target[0].lower())
    if cmd is not None and cmd.subcommands and len(target) > 1:
        cmd = cmd.subcommands.get(target[1].lower())
    if cmd is None:
        raise ReplyError("ERR Invalid command specified")
    not_keys = KEY_SPECS.get(cmd.name)
    only_not_keys = not_keys is not None and all("not_key" in row[0] for row in not_keys)  # SPUBLISH's channel
    if (cmd.keys_fn is None and cmd.keys[0] == 0) or only_not_keys:  # Redis asks this before it checks the arity
        raise ReplyError("ERR The command has no key arguments")
    arity = cmd.arity
    if (arity > 0 and len(target) != arity) or len(target) < -arity:
        raise ReplyError("ERR Invalid number of arguments specified for command")
    positions = cmd.key_positions(target)
    if not positions and "no-mandatory-keys" not in cmd.flags:
        raise ReplyError("ERR Invalid arguments specified for command")  # e.g. XREAD without STREAMS
    return cmd, positions


@command("command|getkeys", -3, "loading stale", group="server", summary="Extracts the key names from an arbitrary command.", since="2.8.13", complexity="O(N) where N is the number of arguments to the command")
def command_getkeys(ctx, argv):
    """COMMAND GETKEYS command [arg [arg ...]]"""
    _cmd, positions = _keys_for(argv)
    return [argv[2 + i] for i in positions]


@command("command|getkeysandflags", -3, "loading stale", group="server", summary="Extracts the key names and access flags for an arbitrary command.", since="7.0.0", complexity="O(N) where N is the number of arguments to the command")
def command_getkeysandflags(ctx, argv):
    """COMMAND GETKEYSANDFLAGS command [arg [arg ...]]"""
    cmd, positions = _keys_for(argv)
    target = argv[2:]
    return [[target[i], Set([Simple(f.encode()) for f in key_flags(cmd, target, n)])] for n, i in enumerate(positions)]


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
