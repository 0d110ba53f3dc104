"""Server commands: INFO, CONFIG, DEBUG, FUNCTION, LASTSAVE, SHUTDOWN, MONITOR."""

from __future__ import annotations

import logging
import os
import re
import time

import msgpack

from protocol.encoder import encode
from protocol.errors import SYNTAX, ReplyError, arg_text, subcommand_error
from protocol.reply import OK, Map, Push, Raw, Set, Simple, Verbatim

from .. import shutdown as stopping
from ..command import COMMANDS, command, container
from ..config import PARAMS, ConfigError, is_glob
from ..info import info_string, reset_stats
from ..latency import threshold_ns as latency_threshold_ns
from ..open_files import clients_that_fit
from ..output_limits import normal_limits
from ..process import set_oom_score_adj_for_role
from ..protected import is_local
from ..slowlog import threshold_ns as slowlog_threshold
from .args import help_reply, to_float, to_int
from .client import NO_REPLY

log = logging.getLogger("millrace")


# -- MONITOR ------------------------------------------------------------------

_REPR_ESCAPES = {0x5C: "\\\\", 0x22: '\\"', 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x07: "\\a", 0x08: "\\b"}


def quote_arg(arg: bytes) -> str:
    """Redis's sdscatrepr: a double-quoted, escaped, printable form of arg."""
    out = ['"']
    for c in arg:
        escaped = _REPR_ESCAPES.get(c)
        if escaped is not None:
            out.append(escaped)
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append(f"\\x{c:02x}")
    out.append('"')
    return "".join(out)


# Redis's SENSITIVE_CONFIG parameters: CONFIG SET hides their values (Redis 8.2 is built with TLS)
SENSITIVE_CONFIGS = frozenset((b"requirepass", b"masterauth", b"masteruser", b"tls-key-file-pass", b"tls-client-key-file-pass"))


def redacted(argv: list[bytes]) -> list[bytes]:
    """Hide passwords where Redis's commands do it as they read their arguments: AUTH's (unless
    there are too many, a syntax error), HELLO's AUTH pair, met walking the options after a
    valid protocol version, up to the first option it refuses, and CONFIG SET's sensitive values,
    in every pair even after one it refuses (not when the pairs are uneven, a syntax error)."""
    name = argv[0].lower()
    if name == b"config":
        if len(argv) >= 4 and len(argv) % 2 == 0 and argv[1].lower() == b"set":
            argv = [value if index % 2 == 0 or argv[index - 1].lower() not in SENSITIVE_CONFIGS else b"(redacted)"
                    for index, value in enumerate(argv)]
        return argv
    if name == b"auth":
        return argv if len(argv) > 3 else [argv[0]] + [b"(redacted)"] * (len(argv) - 1)
    if name == b"hello" and len(argv) > 2 and argv[1] in (b"2", b"3"):
        argv = list(argv)
        index = 2
        while index < len(argv):
            option, more = argv[index].lower(), len(argv) - 1 - index
            if option == b"auth" and more >= 2:
                argv[index + 1] = argv[index + 2] = b"(redacted)"
                index += 3
            elif option == b"setname" and more:
                index += 2
            else:
                break
    return argv


def monitor_line(client, argv: list[bytes], now: float) -> bytes:
    """`+1339518083.107412 [0 127.0.0.1:60866] "keys" "*"` as MONITOR shows a command."""
    args = " ".join(quote_arg(a) for a in redacted(argv))
    return f"+{now:.6f} [{client.db.id} {client.addr}] {args}\r\n".encode()


@command("monitor", 1, "admin noscript loading stale", group="server", summary="Listens for all requests received by the server in real-time.", complexity=None)
def monitor(ctx, argv):
    """MONITOR: as Redis's monitorCommand, refused inside EXEC (a DENY BLOCKING client) and silent when repeated."""
    if ctx.in_exec:
        raise ReplyError("ERR MONITOR isn't allowed for DENY BLOCKING client")
    if ctx.monitor:
        return NO_REPLY
    ctx.monitor = True
    ctx.update_subscribed()  # a monitor may no longer touch the keyspace (Server.execute)
    ctx.server.monitors.append(ctx)
    return OK


# -- INFO ---------------------------------------------------------------------


@command("info", -1, "loading stale", group="server", summary="Returns information and statistics about the server.")
def info(ctx, argv):
    """INFO [section [section ...]]: text sections; verbatim in RESP3."""
    sections = [a.decode(errors="replace").lower() for a in argv[1:]]
    return Verbatim(info_string(ctx.server, sections).encode())


# -- CONFIG -------------------------------------------------------------------

container("config", group="server", summary="A container for server configuration commands.", since="2.0.0")


@command("config|get", -3, "admin noscript loading stale", group="server", summary="Returns the effective values of configuration parameters.", since="2.0.0", complexity="O(N) when N is the number of configuration parameters provided")
def config_get(ctx, argv):
    """CONFIG GET parameter [parameter ...] -> map of every match."""
    config = ctx.server.config
    result: dict[bytes, bytes] = {}
    seen: set[str] = set()  # canonical names: Redis's matches dict compares names without case
    for pattern in argv[2:]:
        text = pattern.decode(errors="replace")
        exact = not is_glob(text)
        for name, value in config.get(text).items():
            if name not in seen:
                seen.add(name)
                result[pattern if exact else name.encode()] = value.encode("utf-8", "surrogateescape")  # an exact name comes back as typed
    return Map(result)


@command("config|set", -4, "admin noscript loading stale", group="server", summary="Sets configuration parameters in-flight.", since="2.0.0", complexity="O(N) when N is the number of configuration parameters provided")
def config_set(ctx, argv):
    """CONFIG SET parameter value [parameter value ...]: all or nothing."""
    if len(argv) % 2:
        raise ReplyError(SYNTAX)
    # names echo byte for byte in errors; values are kept byte for byte too (bytes that are not UTF-8
    # as surrogates), so CONFIG GET gives back what was set and CONFIG REWRITE escapes every byte
    pairs = [(arg_text(argv[i]), argv[i + 1].decode("utf-8", "surrogateescape")) for i in range(2, len(argv), 2)]
    config = ctx.server.config
    config.set_many(pairs, local=_local(ctx))
    if config["slowlog-log-slower-than"] >= 0:  # the log is on: Redis trims it after this very command
        ctx.server.slowlog.trim()
    return OK


@command("config|resetstat", 2, "admin noscript loading stale", group="server", summary="Resets the server's statistics.", since="2.0.0")
def config_resetstat(ctx, argv):
    reset_stats(ctx.server)
    return OK


@command("config|rewrite", 2, "admin noscript loading stale", group="server", summary="Persists the effective configuration to file.", since="2.8.0")
def config_rewrite(ctx, argv):
    """Rewrite the startup config file: changed lines in place, new ones appended."""
    config = ctx.server.config
    path = config.config_file
    if not path:
        raise ReplyError("ERR The server is running without a config file")
    try:
        users = [] if config["aclfile"] else [ctx.server.default_user.describe()]  # an ACL file keeps the users
        rewrite_config_file(path, config, users)
    except OSError as exc:
        log.warning("CONFIG REWRITE failed: %s", exc)
        raise ReplyError(f"ERR Rewriting config file: {exc.strerror}") from None
    return OK


def rewrite_config_file(path: str, config, users: list[str] | None = None) -> None:
    """`users`: the `user` lines, in place of the file's (Redis's rewriteConfigUserOption), so that a
    password changed since start-up is the one the next start reads; None leaves the file's as they are.
    An empty `replicaof` (a promoted replica) removes its line, as Redis's rewriteConfigReplicaOfOption."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except FileNotFoundError:
        lines = []
    wanted = config.changed()
    done: set[str] = set()
    out: list[str] = []
    def current(line: str) -> str | None:
        """The option a line sets, by its current name (an older alias's line is rewritten under it, as Redis)."""
        words = line.split()
        name = words[0].lower() if words and not words[0].startswith("#") else None
        return PARAMS[name].alias if name in PARAMS and PARAMS[name].older else name

    users_done = users is None
    for line in lines:
        name = current(line)
        if users is not None and name == "user":
            if not users_done:
                out.extend(users)
                users_done = True
            continue
        if name == "replicaof" and not config["replicaof"]:
            done.add(name)
            continue
        if name in PARAMS:
            if name in done:
                continue  # Redis keeps one line per option
            done.add(name)
            out.extend(config_lines(name, config.format(name), sum(1 for other in lines if current(other) == name)))
        else:
            out.append(line)
    extra = [name for name in wanted if name not in done]
    if extra or not users_done:
        marker = "# Generated by CONFIG REWRITE"
        if marker not in out:
            out.append(marker)
        for name in extra:
            out.extend(config_lines(name, wanted[name]))
        if not users_done:
            out.extend(users)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write("\n".join(out) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def config_lines(name: str, value: str, existing: int = 0) -> list[str]:
    """The directives of one parameter: client-output-buffer-limit has a line per class (Redis's
    rewriteConfigClientOutputBufferLimitOption; `existing`: its lines in the file), others one."""
    if name == "client-output-buffer-limit":
        from ..output_limits import rewrite_lines

        return rewrite_lines(value, existing)
    return [config_line(name, value)]


def config_line(name: str, value: str) -> str:
    """One directive as CONFIG REWRITE writes it, read back by the config file parser (sdssplitargs)
    to exactly `value`: a string parameter's value quoted and escaped by sdscatrepr, always, as
    Redis's rewriteConfigStringOption writes it (a newline in it can never start a directive of its
    own); the words of a multi-word one (bind, save) and the other kinds as they are, quoted the
    same way if a word is empty or holds anything but printable ASCII other than quotes and '\\'."""
    param = PARAMS[name]
    if param.kind == "string" and not param.multi:
        return f"{name} {_repr(value)}"
    words = value.split(" ") if param.multi or param.kind == "save" else [value]
    return " ".join([name, *(word if _PLAIN_WORD.fullmatch(word) else _repr(word) for word in words)])


_PLAIN_WORD = re.compile(r"[!#-&(-\[\]-~]+")  # printable ASCII but space, '"', "'" and '\\': sdssplitargs takes it as is


def _repr(value: str) -> str:
    return quote_arg(value.encode("utf-8", "surrogateescape"))


def install_config_listeners(server) -> None:
    """Make CONFIG SET take effect on live connections where Redis's does."""

    def changed(name: str, value) -> None:
        if name == "proto-max-bulk-len":
            for client in server.clients.values():
                client.reader.max_bulk_len = value
        elif name == "client-query-buffer-limit":
            for client in server.clients.values():
                client.reader.max_query_buffer = value
        elif name == "slowlog-log-slower-than":
            server.slowlog_threshold_ns = slowlog_threshold(value)
        elif name == "slowlog-max-len":
            server.slowlog.resize(value)
        elif name == "latency-tracking":
            server.latency_tracking = value
        elif name == "latency-monitor-threshold":
            server.latency_threshold_ns = latency_threshold_ns(value)
        elif name == "maxmemory":  # at once, not at the next cron tick
            server.memory_meter.measure(server.now)
            server.update_refusing()
        elif name == "min-replicas-to-write":
            server.update_refusing()
        elif name == "maxmemory-policy":
            server.policy_changed()
        elif name == "maxclients":  # the open-files limit follows, as Redis's updateMaxclients
            fits = clients_that_fit(value)
            if fits < value:
                raise ConfigError(f"The operating system is not able to handle the specified number of clients, try with {fits}")
        elif name in ("oom-score-adj", "oom-score-adj-values") and not set_oom_score_adj_for_role(server):
            raise ConfigError("Failed to set current oom_score_adj. Check server logs.")
        elif name in ("notify-keyspace-events", "client-output-buffer-limit"):
            server.pubsub.config_changed(name)
            if name == "client-output-buffer-limit":
                server.normal_output_limits = normal_limits(server.config)

    server.config.listeners.append(changed)


CONFIG_HELP = [
    "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
    "HELP",
    "    Print this help.",
]


@command("config|help", 2, "loading stale", group="server", summary="Returns helpful text about the different subcommands.", since="5.0.0")
def config_help(ctx, argv):
    return help_reply(CONFIG_HELP)


# -- DEBUG --------------------------------------------------------------------

DEBUG_HELP = [
    "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOG <message>",
    "    Write <message> to the server log.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "RELOAD",
    "    Save the dataset and load it back (not supported yet).",
    "LOADAOF",
    "    Flush the AOF buffers and reload the AOF (not supported yet).",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not accessed.",
    "HELP",
    "    Print this help.",
]
DEBUG_NOT_ALLOWED = (
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", "
    "you can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server."
)


def _local(ctx) -> bool:
    return is_local(ctx.addr.rsplit(":", 1)[0])


def debug_refused(ctx) -> bool:
    """enable-debug-command forbids this client DEBUG (checked before MULTI queues it, as Redis's processCommand)."""
    allowed = ctx.server.config["enable-debug-command"]
    return not ctx.loading and (allowed == "no" or (allowed == "local" and not _local(ctx)))


@command("debug", -2, "admin noscript loading stale", group="server", summary="A container for debugging commands.", complexity="Depends on subcommand.")
def debug(ctx, argv):
    """DEBUG subcommand [arg [arg ...]]: the introspection and test hooks that make sense here."""
    if debug_refused(ctx):
        raise ReplyError(DEBUG_NOT_ALLOWED)
    sub = argv[1].lower()
    argc = len(argv)
    if sub == b"help" and argc == 2:
        return help_reply(DEBUG_HELP)
    if sub == b"log" and argc == 3:
        log.warning("DEBUG LOG: %s", argv[2].decode(errors="replace"))
        return OK
    if sub == b"sleep" and argc == 3:
        seconds = to_float(argv[2])
        if seconds > 0:
            time.sleep(seconds)  # stops the whole server, which is what DEBUG SLEEP is for
        return OK
    if sub == b"set-active-expire" and argc == 3:
        ctx.server.active_expire = argv[2] != b"0"
        return OK
    if sub == b"protocol" and argc == 3:
        return debug_protocol(ctx, argv[2].lower())
    if sub == b"object" and argc == 3:
        return debug_object(ctx, argv[2])
    if sub in (b"reload", b"loadaof"):
        hook = ctx.server.debug_reload if sub == b"reload" else ctx.server.debug_loadaof
        if hook is None:
            raise ReplyError(f"ERR DEBUG {sub.decode().upper()} not supported yet: Millrace has no persistence in this build")
        return hook(argv[2:])
    raise subcommand_error(argv)


def debug_object(ctx, key: bytes) -> Simple:
    """DEBUG OBJECT key: Redis's one-line summary (redis-py's debug_object parses it). The key is found as
    Redis's dbFind does (a key past its TTL too). `serializedlength` is the RDB string encoding's size for a
    string (no LZF attempt) and the snapshot record's for a stream; `lru_seconds_idle` is OBJECT IDLETIME's
    under an LRU policy, else 0 (no access clock is kept: server/eviction.py)."""
    from persistence.snapshot import encode_value

    from .keyspace import value_encoding

    value = ctx.db.data.get(key)
    if value is None:
        raise ReplyError("ERR no such key")
    encoding = value_encoding(key, value, ctx.db.ttl(key) is not None)
    if type(value) is not bytes:
        length = len(msgpack.packb(encode_value(value), use_bin_type=True))
    elif encoding == b"int" and -(1 << 31) <= int(value) < 1 << 31:
        number = int(value)
        length = 2 if -128 <= number < 128 else 3 if -32768 <= number < 32768 else 5
    else:
        n = len(value)
        length = n + (1 if n < 64 else 2 if n < 16384 else 5)
    lru = int(time.time()) & ((1 << 24) - 1)
    clock = ctx.server.access
    idle = clock.idle(ctx.db.id, key) if clock is not None and clock.kind == "lru" else 0
    return Simple(b"Value at:0x%x refcount:1 encoding:%s serializedlength:%d lru:%d lru_seconds_idle:%d"
                  % (id(value), encoding, length, lru, idle))


_BIGNUM = b"1234567999999999999999999999999999999"
_ATTRIBUTE = b"|1\r\n" + encode(b"key-popularity", 3) + encode([b"key:123", 90], 3)  # one key and its value
_PROTOCOL_VALUES = {
    b"string": b"Hello World", b"integer": 12345, b"double": 3.141, b"null": None,
    b"array": [0, 1, 2], b"set": Set([0, 1, 2]), b"map": Map({0: False, 1: True, 2: False}),
    b"verbatim": Verbatim(b"This is a verbatim\nstring"), b"true": True, b"false": False,
}  # fmt: skip


def debug_protocol(ctx, name: bytes):
    """DEBUG PROTOCOL <type>: Redis's test value of each RESP type, for clients' decoder tests.

    RESP2 gets Redis's fallbacks through the encoder (a bool is :1/:0, a double or a
    verbatim string a bulk string). The two types the encoder has no value for are
    built here: a bignum (`(`, a bulk string in RESP2) and an attribute (`|`, dropped
    in RESP2) ahead of the real reply. A push goes out after the reply, as every push
    to a command's own client (and RESP2 has none: an error).
    """
    if name in _PROTOCOL_VALUES:
        return _PROTOCOL_VALUES[name]
    resp3 = ctx.resp == 3
    if name == b"bignum":
        return Raw(b"(%s\r\n" % _BIGNUM) if resp3 else _BIGNUM
    if name == b"attrib":
        reply = b"Some real reply following the attribute"
        return Raw(_ATTRIBUTE + encode(reply, 3)) if resp3 else reply
    if name == b"push":
        if not resp3:
            raise ReplyError("ERR RESP2 is not supported by this command")
        out: list[bytes] = []
        ctx.encode(Push([b"server-cpu-usage", 42]), out)
        ctx.pushes = out if ctx.pushes is None else ctx.pushes + out
        return b"Some real reply following the push reply"
    raise ReplyError(
        "ERR Wrong protocol type name. Please use one of the following: "
        "string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false"
    )


# -- FUNCTION (no scripting: the library is always empty) ----------------------

container("function", group="scripting", summary="A container for function commands.", since="7.0.0")


@command("function|list", -2, "noscript", group="scripting", summary="Returns information about all libraries.", since="7.0.0", complexity="O(N) where N is the number of functions")
def function_list(ctx, argv):
    """FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE] -> [] (no libraries)."""
    index = 2
    while index < len(argv):
        option = argv[index].lower()
        if option == b"withcode":
            index += 1
        elif option == b"libraryname" and index + 1 < len(argv):
            index += 2
        elif option == b"libraryname":
            raise ReplyError("ERR library name argument was not given")
        else:
            raise ReplyError(f"ERR Unknown argument {arg_text(argv[index])}")
    return []


@command("function|flush", -2, "write noscript", group="scripting", summary="Deletes all libraries and functions.", since="7.0.0", complexity="O(N) where N is the number of functions deleted")
def function_flush(ctx, argv):
    """FUNCTION FLUSH [ASYNC|SYNC]"""
    if len(argv) > 3:
        raise ReplyError("ERR wrong number of arguments for 'function|flush' command")
    if len(argv) == 3 and argv[2].lower() not in (b"async", b"sync"):
        raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    return OK, []


@command("function|stats", 2, "noscript allow-busy", group="scripting", summary="Returns information about a function during execution.", since="7.0.0")
def function_stats(ctx, argv):
    return Map({b"running_script": None, b"engines": Map({b"LUA": Map({b"libraries_count": 0, b"functions_count": 0})})})


FUNCTION_HELP = [
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "STATS",
    "    Return information about the current function running.",
    "HELP",
    "    Print this help.",
]


@command("function|help", 2, "loading stale", group="scripting", summary="Returns helpful text about the different subcommands.", since="7.0.0")
def function_help(ctx, argv):
    return help_reply(FUNCTION_HELP)


# -- LASTSAVE, SHUTDOWN ---------------------------------------------------------


@command("lastsave", 1, "loading stale fast", group="server", summary="Returns the Unix timestamp of the last successful save to disk.")
def lastsave(ctx, argv):
    return int(ctx.server.lastsave)


@command("shutdown", -1, "admin noscript loading stale no-multi allow-busy", group="server", waits=True, summary="Synchronously saves the database(s) to disk and shuts down the Redis server.", complexity="O(N) when saving, where N is the total number of keys in all databases when saving data, otherwise O(1)")
def shutdown(ctx, argv):
    """SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: no reply, the server exits (once its replicas have
    caught up, or shutdown-timeout is spent: server/shutdown.py); ABORT cancels a shutdown that waits."""
    flags = stopping.Flags()
    abort = False
    for arg in argv[1:]:
        option = arg.lower()
        if option == b"nosave":
            flags.nosave = True
        elif option == b"save":
            flags.save = True
        elif option == b"abort":
            abort = True
        elif option == b"now":
            flags.now = True
        elif option == b"force":
            flags.force = True
        else:
            raise ReplyError(SYNTAX)
    if (flags.save and flags.nosave) or (abort and (flags.save or flags.nosave or flags.now or flags.force)):  # (ABORT ABORT is no error)
        raise ReplyError(SYNTAX)
    server = ctx.server
    if abort:
        answered = stopping.abort(server)
        if answered is None:
            raise ReplyError("ERR No shutdown in progress.")
        if answered:  # Redis counts a command failed when an error reply was sent while it ran: the callers'
            COMMANDS[b"shutdown"].failed_calls += 1
        return OK
    if server.shutdown is None:
        raise ReplyError(stopping.FAILED)
    outcome = stopping.prepare(server, flags)
    if outcome is None:
        return stopping.wait_block(server)  # the replicas catch up first; the exit (or cancel()'s error) ends the wait
    if not outcome:
        raise ReplyError(stopping.FAILED)  # FORCE exits even so, as Redis
    ctx.close_after_reply = True
    return NO_REPLY


# -- SLOWLOG --------------------------------------------------------------------

container("slowlog", group="server", summary="A container for slow log commands.", since="2.2.12")


@command("slowlog|get", -2, "admin loading stale", group="server", summary="Returns the slow log's entries.", since="2.2.12", complexity="O(N) where N is the number of entries returned")
def slowlog_get(ctx, argv):
    """SLOWLOG GET [count] -> newest entries first: id, time, µs, arguments, address, name."""
    entries = ctx.server.slowlog.entries
    count = 10
    if len(argv) == 3:
        count = to_int(argv[2], "ERR count should be greater than or equal to -1")
        if count < -1:
            raise ReplyError("ERR count should be greater than or equal to -1")
        if count == -1:
            count = len(entries)
    elif len(argv) > 3:
        raise subcommand_error(argv)
    return [list(entry) for entry in list(entries)[:count]]


@command("slowlog|len", 2, "admin loading stale", group="server", summary="Returns the number of entries in the slow log.", since="2.2.12")
def slowlog_len(ctx, argv):
    return len(ctx.server.slowlog.entries)


@command("slowlog|reset", 2, "admin loading stale", group="server", summary="Clears all entries from the slow log.", since="2.2.12", complexity="O(N) where N is the number of entries in the slowlog")
def slowlog_reset(ctx, argv):
    ctx.server.slowlog.entries.clear()
    return OK


SLOWLOG_HELP = [
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Print this help.",
]


@command("slowlog|help", 2, "loading stale", group="server", summary="Show helpful text about the different subcommands", since="6.2.0")
def slowlog_help(ctx, argv):
    return help_reply(SLOWLOG_HELP)
