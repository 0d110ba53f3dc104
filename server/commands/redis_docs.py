"""COMMAND DOCS facts of the commands Millrace shares with Redis, where the syntax line cannot give them.

Redis's src/commands/*.json name choices and blocks (`condition`, `expiration`, `flush-type`), say
since which release an argument exists, and record a command's history and deprecation; a
handler's syntax line (server/syntax.py) knows none of that. The trees below are written to
answer as Redis 8.2.3 does (tests/test_command_docs_diff.py compares every shared command with
it); Millrace's later options (CLAIM, MAXCOUNT, MAXSIZE, KEYSHARED) are the test's listed exceptions.
"""

from __future__ import annotations

from ..command import COMMANDS
from ..syntax import DECLARED, DEPRECATED, DOC_FLAGS, HISTORY, Arg
from . import groups, stream_args, streams  # noqa: F401  (registered before their docs are amended)


def _flags(optional: bool, multiple: bool) -> list[str]:
    return (["optional"] if optional else []) + (["multiple"] if multiple else [])


def _typed(kind: str):
    def make(name: str, token: str | None = None, *, optional: bool = False, multiple: bool = False,
             since: str | None = None, display: str | None = None, deprecated_since: str | None = None) -> Arg:
        return Arg(name, kind, token=token, flags=_flags(optional, multiple), since=since, display=display or False,
                   deprecated_since=deprecated_since)  # fmt: skip

    return make


string, integer, double, unix_time, pattern = (_typed(k) for k in ("string", "integer", "double", "unix-time", "pattern"))


def key(name: str = "key", *, multiple: bool = False) -> Arg:
    return Arg(name, "key", flags=_flags(False, multiple))


def token(word: str, *, optional: bool = False, since: str | None = None, name: str | None = None) -> Arg:
    """A pure token: `NX`, named `nx` unless told."""
    return Arg(name or word.lower(), "pure-token", token=word, flags=_flags(optional, False), since=since)


def oneof(name: str, *choices: Arg, token: str | None = None, optional: bool = False, multiple: bool = False,
          since: str | None = None) -> Arg:  # fmt: skip
    return Arg(name, "oneof", token=token, flags=_flags(optional, multiple), since=since, arguments=list(choices))


def block(name: str, *parts: Arg, token: str | None = None, optional: bool = False, since: str | None = None) -> Arg:
    return Arg(name, "block", token=token, flags=_flags(optional, False), since=since, arguments=list(parts))


def _expire_condition() -> Arg:
    """[NX | XX | GT | LT] of EXPIRE and its kin (7.0)."""
    return oneof("condition", token("NX"), token("XX"), token("GT"), token("LT"), optional=True, since="7.0.0")


def _flush_type(since: bool) -> Arg:
    """[ASYNC | SYNC] of FLUSHALL, FLUSHDB (with the releases that added them) and FUNCTION FLUSH."""
    return oneof("flush-type", token("ASYNC", since="4.0.0" if since else None),
                 token("SYNC", since="6.2.0" if since else None), optional=True)  # fmt: skip


def _on_off(name: str, *extra: Arg) -> list[Arg]:
    return [oneof(name, token("ON"), token("OFF"), *extra)]


def _id_selector() -> Arg:
    """<id | $> of XGROUP CREATE and SETID."""
    return oneof("id-selector", string("id"), token("$", name="new-id"))


def _entries_read() -> Arg:
    return integer("entriesread", "ENTRIESREAD", optional=True, display="entries-read")


def _streams() -> Arg:
    """STREAMS key [key ...] id [id ...] of XREAD and XREADGROUP."""
    return block("streams", key(multiple=True), string("id", multiple=True), token="STREAMS")


def _caps() -> list[Arg]:
    """[MAXCOUNT maxcount] [MAXSIZE maxsize] of XREAD and XREADGROUP (Redis 8.10; not in 8.2.3)."""
    return [integer("maxcount", "MAXCOUNT", optional=True, since="8.10.0"),
            integer("maxsize", "MAXSIZE", optional=True, since="8.10.0")]  # fmt: skip


def _replicaof() -> list[Arg]:
    return [oneof("args", block("host-port", string("host"), integer("port")), block("no-one", token("NO"), token("ONE")))]


# --- connection, clients, server ---------------------------------------------------------------

DECLARED["auth"] = [string("username", optional=True, since="6.0.0"), string("password")]
DECLARED["hello"] = [block(
    "arguments",
    integer("protover"),
    block("auth", string("username"), string("password"), token="AUTH", optional=True),
    string("clientname", "SETNAME", optional=True),
    optional=True,
)]  # fmt: skip
DECLARED["client|kill"] = [oneof(
    "filter",
    string("old-format", display="ip:port", deprecated_since="2.8.12"),
    oneof(
        "new-format",
        integer("client-id", "ID", optional=True, since="2.8.12"),
        oneof("client-type", token("NORMAL"), token("MASTER", since="3.2.0"), token("SLAVE"),
              token("REPLICA", since="5.0.0"), token("PUBSUB"), token="TYPE", optional=True, since="2.8.12"),
        string("username", "USER", optional=True),
        string("addr", "ADDR", optional=True, display="ip:port"),
        string("laddr", "LADDR", optional=True, since="6.2.0", display="ip:port"),
        oneof("skipme", token("YES"), token("NO"), token="SKIPME", optional=True),
        integer("maxage", "MAXAGE", optional=True, since="7.4.0"),
        multiple=True,
    ),
)]  # fmt: skip
DECLARED["client|list"] = [
    oneof("client-type", token("NORMAL"), token("MASTER"), token("REPLICA"), token("PUBSUB"),
          token="TYPE", optional=True, since="5.0.0"),
    integer("client-id", "ID", optional=True, multiple=True, since="6.2.0"),
]  # fmt: skip
DECLARED["client|no-evict"] = _on_off("enabled")
DECLARED["client|no-touch"] = _on_off("enabled")
DECLARED["client|reply"] = _on_off("action", token("SKIP"))
DECLARED["client|pause"] = [integer("timeout"), oneof("mode", token("WRITE"), token("ALL"), optional=True, since="6.2.0")]
DECLARED["client|setinfo"] = [oneof("attr", string("libname", "LIB-NAME"), string("libver", "LIB-VER"))]
DECLARED["client|setname"] = [string("connection-name")]
DECLARED["client|unblock"] = [integer("client-id"), oneof("unblock-type", token("TIMEOUT"), token("ERROR"), optional=True)]
DECLARED["command|list"] = [oneof(
    "filterby", string("module-name", "MODULE"), string("category", "ACLCAT"), pattern("pattern", "PATTERN"),
    token="FILTERBY", optional=True,
)]  # fmt: skip
DECLARED["bgsave"] = [token("SCHEDULE", optional=True, since="3.2.2")]
DECLARED["debug"] = []  # Redis documents no arguments for DEBUG, nor for REPLCONF
DECLARED["replconf"] = []
DECLARED["psync"] = [string("replicationid"), integer("offset")]
DECLARED["replicaof"] = _replicaof()
DECLARED["slaveof"] = _replicaof()
DECLARED["failover"] = [
    block("target", string("host"), integer("port"), token("FORCE", optional=True), token="TO", optional=True),
    token("ABORT", optional=True),
    integer("milliseconds", "TIMEOUT", optional=True),
]
DECLARED["flushall"] = [_flush_type(since=True)]
DECLARED["flushdb"] = [_flush_type(since=True)]
DECLARED["function|flush"] = [_flush_type(since=False)]
DECLARED["function|list"] = [string("library-name-pattern", "LIBRARYNAME", optional=True), token("WITHCODE", optional=True)]
DECLARED["shutdown"] = [
    oneof("save-selector", token("NOSAVE"), token("SAVE"), optional=True),
    token("NOW", optional=True, since="7.0.0"),
    token("FORCE", optional=True, since="7.0.0"),
    token("ABORT", optional=True, since="7.0.0"),
]

# --- keys and strings ----------------------------------------------------------------------------

DECLARED["scan"] = [
    integer("cursor"),
    pattern("pattern", "MATCH", optional=True),
    integer("count", "COUNT", optional=True),
    string("type", "TYPE", optional=True, since="6.0.0"),
]
DECLARED["expire"] = [key(), integer("seconds"), _expire_condition()]
DECLARED["pexpire"] = [key(), integer("milliseconds"), _expire_condition()]
DECLARED["expireat"] = [key(), unix_time("unix-time-seconds"), _expire_condition()]
DECLARED["pexpireat"] = [key(), unix_time("unix-time-milliseconds"), _expire_condition()]
DECLARED["set"] = [
    key(),
    string("value"),
    oneof("condition", token("NX"), token("XX"), optional=True, since="2.6.12"),
    token("GET", optional=True, since="6.2.0"),
    oneof(
        "expiration",
        integer("seconds", "EX", since="2.6.12"),
        integer("milliseconds", "PX", since="2.6.12"),
        unix_time("unix-time-seconds", "EXAT", since="6.2.0"),
        unix_time("unix-time-milliseconds", "PXAT", since="6.2.0"),
        token("KEEPTTL", since="6.0.0"),
        optional=True,
    ),
]
DECLARED["getex"] = [key(), oneof(
    "expiration",
    integer("seconds", "EX"),
    integer("milliseconds", "PX"),
    unix_time("unix-time-seconds", "EXAT"),
    unix_time("unix-time-milliseconds", "PXAT"),
    token("PERSIST"),
    optional=True,
)]  # fmt: skip
DECLARED["getrange"] = [key(), integer("start"), integer("end")]
DECLARED["substr"] = [key(), integer("start"), integer("end")]
DECLARED["incrbyfloat"] = [key(), double("increment")]

# --- streams -------------------------------------------------------------------------------------

DECLARED["xsetid"] = [
    key(),
    string("last-id"),
    integer("entries-added", "ENTRIESADDED", optional=True, since="7.0.0"),
    string("max-deleted-id", "MAXDELETEDID", optional=True, since="7.0.0"),
]
DECLARED["xpending"] = [key(), string("group"), block(
    "filters",
    integer("min-idle-time", "IDLE", optional=True, since="6.2.0"),
    string("start"),
    string("end"),
    integer("count"),
    string("consumer", optional=True),
    optional=True,
)]  # fmt: skip
DECLARED["xinfo|stream"] = [key(), block("full-block", token("FULL"), integer("count", "COUNT", optional=True), optional=True)]
DECLARED["xgroup|create"] = [
    key(), string("group"), _id_selector(), token("MKSTREAM", optional=True), _entries_read(),
    string("keyshared", "KEYSHARED", optional=True, display="field"),  # Millrace's key-ordered delivery
]  # fmt: skip
DECLARED["xgroup|setid"] = [key(), string("group"), _id_selector(), _entries_read()]
DECLARED["xread"] = [
    integer("count", "COUNT", optional=True), *_caps(), integer("milliseconds", "BLOCK", optional=True), _streams(),
]  # fmt: skip
DECLARED["xreadgroup"] = [
    block("group-block", string("group"), string("consumer"), token="GROUP"),
    integer("count", "COUNT", optional=True),
    *_caps(),
    integer("milliseconds", "BLOCK", optional=True),
    integer("min-idle-time", "CLAIM", optional=True, since="8.4.0"),
    token("NOACK", optional=True),
    _streams(),
]

# Complexity as Redis 8.2.3 gives it, for commands declared in modules others are editing.
COMMANDS[b"xread"].complexity = None  # 8.2.3's xread.json has none
COMMANDS[b"xreadgroup"].complexity = (
    "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant "
    "(e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side "
    "when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the "
    "stream getting new data."
)
COMMANDS[b"xinfo"].subcommands[b"stream"].complexity = "O(1)"
COMMANDS[b"xgroup"].subcommands[b"destroy"].complexity = (
    "O(N) where N is the number of entries in the group's pending entries list (PEL)."
)

# --- deprecation and doc flags -------------------------------------------------------------------


def _deprecated(name: str, since: str, replaced_by: str) -> None:
    DOC_FLAGS[name] = ("deprecated",)
    DEPRECATED[name] = (since, replaced_by)


_deprecated("getset", "6.2.0", "`SET` with the `!GET` argument")
_deprecated("psetex", "2.6.12", "`SET` with the `PX` argument")
_deprecated("setex", "2.6.12", "`SET` with the `EX` argument")
_deprecated("setnx", "2.6.12", "`SET` with the `NX` argument")
_deprecated("substr", "2.0.0", "`GETRANGE`")
_deprecated("slaveof", "5.0.0", "`REPLICAOF`")
_deprecated("quit", "7.2.0", "just closing the connection")
DOC_FLAGS["debug"] = ("syscmd",)
DOC_FLAGS["replconf"] = ("syscmd",)

# --- history -------------------------------------------------------------------------------------

_EXPIRE_OPTIONS = [("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")]
_MINUS_TWO = [("2.8.0", "Added the -2 reply.")]
_FLUSH_MODES = [("4.0.0", "Added the `ASYNC` flushing mode modifier."), ("6.2.0", "Added the `SYNC` flushing mode modifier.")]
_EXCLUSIVE_RANGES = [("6.2.0", "Added exclusive ranges.")]
HISTORY.update({
    "auth": [("6.0.0", "Added ACL style (username and password).")],
    "bgsave": [("3.2.2", "Added the `SCHEDULE` option.")],
    "client|kill": [
        ("2.8.12", "Added new filter format."),
        ("2.8.12", "`ID` option."),
        ("3.2.0", "Added `master` type in for `TYPE` option."),
        ("5.0.0", "Replaced `slave` `TYPE` with `replica`. `slave` still supported for backward compatibility."),
        ("6.2.0", "`LADDR` option."),
        ("7.4.0", "`MAXAGE` option."),
    ],
    "client|list": [
        ("2.8.12", "Added unique client `id` field."),
        ("5.0.0", "Added optional `TYPE` filter."),
        ("6.0.0", "Added `user` field."),
        ("6.2.0", "Added `argv-mem`, `tot-mem`, `laddr` and `redir` fields and the optional `ID` filter."),
        ("7.0.0", "Added `resp`, `multi-mem`, `rbs` and `rbp` fields."),
        ("7.0.3", "Added `ssub` field."),
        ("7.2.0", "Added `lib-name` and `lib-ver` fields."),
        ("7.4.0", "Added `watch` field."),
        ("8.0.0", "Added `io-thread` field."),
    ],
    "client|pause": [("6.2.0", "`CLIENT PAUSE WRITE` mode added along with the `mode` option.")],
    "command|info": [("7.0.0", "Allowed to be called with no argument to get info on all commands.")],
    "config|get": [("7.0.0", "Added the ability to pass multiple pattern parameters in one call")],
    "config|set": [("7.0.0", "Added the ability to set multiple parameters in one call.")],
    "exists": [("3.0.3", "Accepts multiple `key` arguments.")],
    "expire": _EXPIRE_OPTIONS, "expireat": _EXPIRE_OPTIONS, "pexpire": _EXPIRE_OPTIONS, "pexpireat": _EXPIRE_OPTIONS,
    "flushall": _FLUSH_MODES, "flushdb": _FLUSH_MODES,
    "hello": [("6.2.0", "`protover` made optional; when called without arguments the command reports the current connection's context.")],
    "info": [("7.0.0", "Added support for taking multiple section arguments.")],
    "pttl": _MINUS_TWO, "ttl": _MINUS_TWO,
    "renamenx": [("3.2.0", "The command no longer returns an error when source and destination names are the same.")],
    "scan": [("6.0.0", "Added the `TYPE` subcommand.")],
    "set": [
        ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
        ("6.0.0", "Added the `KEEPTTL` option."),
        ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
        ("7.0.0", "Allowed the `NX` and `GET` options to be used together."),
    ],
    "shutdown": [("7.0.0", "Added the `NOW`, `FORCE` and `ABORT` modifiers.")],
    "slowlog|get": [("4.0.0", "Added client IP address, port and name to the reply.")],
    "xautoclaim": [("7.0.0", "Added an element to the reply array, containing deleted entries the command cleared from the PEL")],
    "xgroup|create": [("7.0.0", "Added the `entries_read` named argument.")],
    "xgroup|setid": [("7.0.0", "Added the optional `entries_read` argument.")],
    "xinfo|consumers": [("7.2.0", "Added the `inactive` field, and changed the meaning of `idle`.")],
    "xinfo|groups": [("7.0.0", "Added the `entries-read` and `lag` fields")],
    "xinfo|stream": [
        ("6.0.0", "Added the `FULL` modifier."),
        ("7.0.0", "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields"),
        ("7.2.0", "Added the `active-time` field, and changed the meaning of `seen-time`."),
    ],
    "xpending": [("6.2.0", "Added the `IDLE` option and exclusive range intervals.")],
    "xrange": _EXCLUSIVE_RANGES, "xrevrange": _EXCLUSIVE_RANGES,
    "xsetid": [("7.0.0", "Added the `entries_added` and `max_deleted_entry_id` arguments.")],
})  # fmt: skip
