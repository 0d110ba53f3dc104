"""CLIENT subcommands: ID, SETNAME/GETNAME, SETINFO, LIST/INFO, KILL, REPLY, UNBLOCK..."""

from __future__ import annotations

import time
from collections.abc import Callable

from protocol.errors import SYNTAX, ReplyError, arg_text, subcommand_error
from protocol.reply import OK, Map, Raw, Set, Verbatim

from ..client import OFF, ON, SKIP_NEXT
from ..command import COMMANDS, command, container
from ..pause import is_postponed, pause, release
from ..shutdown import is_caller
from ..syntax import DECLARED, Arg
from ..tracking import tracking_command
from .args import help_reply, to_int
from .connection import validate_name

NO_REPLY = Raw(b"")  # encodes to nothing: CLIENT REPLY OFF/SKIP answer nothing
CLIENT_TYPES = ("normal", "master", "replica", "slave", "pubsub")

container("client", group="connection", summary="A container for client connection commands.", since="2.4.0")


def client_flags(client) -> str:
    """The flags field of CLIENT LIST (Redis's letters)."""
    flags = ""
    if client.monitor:
        flags += "O"
    elif client.replica is not None:
        flags += "S"
    if client.master_link is not None:
        flags += "M"
    if client.channels or client.patterns or client.shard_channels:
        flags += "P"
    if client.multi is not None:
        flags += "x"
    if client.blocked is not None and not client.blocked.internal:
        flags += "b"
    tracking = client.tracking
    if tracking is not None:
        flags += "t" + ("R" if tracking.broken_redir else "") + ("B" if tracking.bcast else "")
    if client.dirty_cas:
        flags += "d"
    if client.close_after_reply:
        flags += "c"
    if client.flags_no_evict:
        flags += "e"
    if client.no_touch:
        flags += "T"
    return flags or "N"


def command_name(argv) -> str:
    """The full name (`config|get`) of the command argv calls, for CLIENT LIST cmd=."""
    if not isinstance(argv, list) or not argv:
        return "NULL"
    cmd = COMMANDS.get(argv[0].lower())
    if cmd is None:
        return "NULL"
    if cmd.subcommands and len(argv) > 1:
        sub = cmd.subcommands.get(argv[1].lower())
        return "NULL" if sub is None else sub.name  # an unknown subcommand is no command to Redis
    return cmd.name


REPLY_CHUNK = 16 * 1024  # Redis's reply buffer and reply-list block size (PROTO_REPLY_CHUNK_BYTES)


def client_info(client, now: float | None = None, current: str | None = None) -> str:
    """One CLIENT LIST line, fields in Redis 8's order.

    Buffer sizes are approximations: Millrace's buffers live in asyncio and
    hiredis. Unsent replies are shown as Redis holds them: its 16 KB buffer
    first (obl), the rest as a list of 16 KB blocks (oll, omem). The query
    buffer is not measured (qbuf=0).
    """
    now = time.time() if now is None else now
    cmd_name = current or command_name(client.last_command)
    multi = len(client.multi) if client.multi is not None else -1
    transport = client.transport
    unsent = transport.get_write_buffer_size() if transport is not None else 0
    obl = min(unsent, REPLY_CHUNK)
    omem = unsent - obl
    oll = -(-omem // REPLY_CHUNK)
    return (
        f"id={client.id} addr={client.addr} laddr={client.laddr} fd={client.fd} "
        f"name={client.name.decode('latin-1')} age={int(now - client.created)} "
        f"idle={int(now - client.last_interaction / 1000)} flags={client_flags(client)} db={client.db.id} "
        f"sub={len(client.channels)} psub={len(client.patterns)} ssub={len(client.shard_channels)} multi={multi} watch={len(client.watched)} qbuf=0 qbuf-free=0 "
        f"argv-mem=0 multi-mem=0 rbs=16384 rbp=0 obl={obl} oll={oll} omem={omem} tot-mem={16384 + unsent} "
        f"events={'rw' if unsent else 'r'} cmd={cmd_name} user={'default' if client.master_link is None else '(superuser)'} redir={client.tracking.redirect if client.tracking is not None else -1} resp={client.resp} "
        f"lib-name={client.lib_name.decode('latin-1')} lib-ver={client.lib_ver.decode('latin-1')} "
        f"io-thread=0 tot-net-in={client.net_in} tot-net-out={client.net_out} tot-cmds={client.commands_processed}"
    )


def client_type(client) -> str:
    """Redis's getClientType: a replica link is `slave` (a MONITOR never is one here) and a subscriber
    `pubsub` (whatever its protocol, shard channels too), so CLIENT KILL TYPE normal (Sentinel's failover) leaves both be;
    a replica's own link to its primary is `master` (MasterLink.attach)."""
    if client.replica is not None:
        return "slave"
    if client.master_link is not None:
        return "master"
    if client.channels or client.patterns or client.shard_channels:
        return "pubsub"
    return "normal"


def client_type_by_name(name: bytes) -> str | None:
    """Redis's getClientTypeByName: `replica` is `slave`; None for a name it does not know."""
    kind = name.lower().decode(errors="replace")
    kind = "slave" if kind == "replica" else kind
    return kind if kind in CLIENT_TYPES else None


@command("client|id", 2, "noscript loading stale", group="connection", summary="Returns the unique client ID of the connection.", since="5.0.0")
def client_id(ctx, argv):
    return ctx.id


@command("client|setname", 3, "noscript loading stale", group="connection", summary="Sets the connection name.", since="2.6.9")
def client_setname(ctx, argv):
    """CLIENT SETNAME name ('' removes the name)."""
    validate_name(argv[2])
    ctx.name = argv[2]
    return OK


@command("client|getname", 2, "noscript loading stale", group="connection", summary="Returns the name of the connection.", since="2.6.9")
def client_getname(ctx, argv):
    return ctx.name or None


@command("client|setinfo", 4, "noscript loading stale", group="connection", summary="Sets information specific to the client or connection.", since="7.2.0")
def client_setinfo(ctx, argv):
    """CLIENT SETINFO LIB-NAME|LIB-VER value (redis-py sends both on connect)."""
    attr = argv[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        raise ReplyError(f"ERR Unrecognized option '{arg_text(argv[2])}'")
    validate_name(argv[3], argv[2].decode(errors="replace"))
    if attr == b"lib-name":
        ctx.lib_name = argv[3]
    else:
        ctx.lib_ver = argv[3]
    return OK


@command("client|info", 2, "noscript loading stale", group="connection", summary="Returns information about the connection.", since="6.2.0")
def client_info_cmd(ctx, argv):
    current = "exec" if ctx.in_exec else "client|info"  # Redis's lastcmd stays EXEC while the queue runs
    return Verbatim((client_info(ctx, current=current) + "\n").encode("latin-1"))


@command("client|list", -2, "admin noscript loading stale", group="connection", summary="Lists open connections.", since="2.4.0", complexity="O(N) where N is the number of client connections")
def client_list(ctx, argv):
    """CLIENT LIST [TYPE NORMAL|MASTER|REPLICA|PUBSUB] [ID client-id [client-id ...]]"""
    clients = ctx.server.clients
    if len(argv) == 2:
        chosen = list(clients.values())
    elif len(argv) == 4 and argv[2].lower() == b"type":
        kind = client_type_by_name(argv[3])
        if kind is None:
            raise ReplyError(f"ERR Unknown client type '{arg_text(argv[3])}'")
        chosen = [c for c in clients.values() if client_type(c) == kind]
    elif len(argv) > 3 and argv[2].lower() == b"id":
        chosen = []
        for arg in argv[3:]:
            found = clients.get(to_int(arg, "ERR Invalid client ID"))
            if found is not None:
                chosen.append(found)
    else:
        raise ReplyError(SYNTAX)
    now = time.time()
    own = "exec" if ctx.in_exec else "client|list"
    lines = (client_info(c, now, own if c is ctx else None) + "\n" for c in chosen)
    return Verbatim("".join(lines).encode("latin-1"))


@command("client|kill", -3, "admin noscript loading stale", group="connection", summary="Terminates open connections.", since="2.4.0", complexity="O(N) where N is the number of client connections")
def client_kill(ctx, argv):
    """CLIENT KILL [ID client-id] [TYPE NORMAL|MASTER|SLAVE|REPLICA|PUBSUB] [USER username] [ADDR ip:port] [LADDR ip:port] [SKIPME YES|NO] [MAXAGE maxage]

    The old form `CLIENT KILL ip:port` answers OK or "No such client".
    """
    clients = ctx.server.clients
    if len(argv) == 3:
        addr = argv[2].decode(errors="replace")
        for client in clients.values():
            if client.addr == addr:
                _kill(ctx, client)
                return OK
        raise ReplyError("ERR No such client")
    filters: dict[bytes, Callable] = {}  # one per option: a repeated option's last value wins, as in Redis
    skipme = True
    index = 2
    while index < len(argv):
        option = argv[index].lower()
        if index + 1 >= len(argv):
            raise ReplyError(SYNTAX)
        value = argv[index + 1]
        text = value.decode(errors="replace")
        if option == b"id":
            wanted = to_int(value, "ERR client-id should be greater than 0")
            if wanted <= 0:
                raise ReplyError("ERR client-id should be greater than 0")
            filters[option] = lambda c, w=wanted: c.id == w
        elif option == b"type":
            kind = client_type_by_name(value)
            if kind is None:
                raise ReplyError(f"ERR Unknown client type '{text}'")
            filters[option] = lambda c, k=kind: client_type(c) == k
        elif option == b"user":
            if value != b"default":
                raise ReplyError(f"ERR No such user '{text}'")
            filters[option] = lambda c: c.master_link is None  # our primary's client has no user, as Redis's
        elif option == b"addr":
            filters[option] = lambda c, a=text: c.addr == a
        elif option == b"laddr":
            filters[option] = lambda c, a=text: c.laddr == a
        elif option == b"skipme":
            if value.lower() == b"yes":
                skipme = True
            elif value.lower() == b"no":
                skipme = False
            else:
                raise ReplyError(SYNTAX)
        elif option == b"maxage":
            age = to_int(value, "ERR maxage is not an integer or out of range")
            if age <= 0:
                raise ReplyError("ERR maxage should be greater than 0")
            # whole seconds on both sides, as Redis's ctime and unixtime
            filters[option] = lambda c, a=age: int(time.time()) - int(c.created) >= a
        else:
            raise ReplyError(SYNTAX)
        index += 2
    killed = 0
    for client in list(clients.values()):
        if skipme and client is ctx:
            continue
        if all(match(client) for match in filters.values()):
            _kill(ctx, client)
            killed += 1
    return killed


def _kill(ctx, client) -> None:
    """Close a client; killing yourself closes after this reply, as in Redis."""
    if client is ctx:
        ctx.close_after_reply = True
    else:
        client.kill()


@command("client|no-evict", 3, "admin noscript loading stale", group="connection", summary="Sets the client eviction mode of the connection.", since="7.0.0")
def client_no_evict(ctx, argv):
    """CLIENT NO-EVICT ON|OFF"""
    ctx.flags_no_evict = _on_off(argv[2])
    return OK


@command("client|no-touch", 3, "noscript loading stale", group="connection", summary="Controls whether commands sent by the client affect the LRU/LFU of accessed keys.", since="7.2.0")
def client_no_touch(ctx, argv):
    """CLIENT NO-TOUCH ON|OFF"""
    ctx.no_touch = _on_off(argv[2])
    return OK


def _on_off(arg: bytes) -> bool:
    value = arg.lower()
    if value == b"on":
        return True
    if value == b"off":
        return False
    raise ReplyError(SYNTAX)


@command("client|reply", 3, "noscript loading stale", group="connection", summary="Instructs the server whether to reply to commands.", since="3.2.0")
def client_reply(ctx, argv):
    """CLIENT REPLY ON|OFF|SKIP: OFF and SKIP themselves get no reply."""
    mode = argv[2].lower()
    if mode == b"on":
        ctx.reply_mode = ON
        return OK
    if mode == b"off":
        ctx.reply_mode = OFF
        return NO_REPLY
    if mode == b"skip":
        if ctx.reply_mode is not OFF:
            ctx.reply_mode = SKIP_NEXT
        return NO_REPLY
    raise ReplyError(SYNTAX)


@command("client|unblock", -3, "admin noscript loading stale", group="connection", summary="Unblocks a client blocked by a blocking command from a different connection.", since="5.0.0", complexity="O(log N) where N is the number of client connections")
def client_unblock(ctx, argv):
    """CLIENT UNBLOCK client-id [TIMEOUT|ERROR] -> 1 if a blocked client was released."""
    if len(argv) > 4:  # Redis matches UNBLOCK on 3 or 4 arguments only, then falls to its subcommand error
        raise subcommand_error(argv)
    as_error = False
    if len(argv) == 4:
        reason = argv[3].lower()
        if reason == b"error":
            as_error = True
        elif reason != b"timeout":
            raise ReplyError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
    target = ctx.server.clients.get(to_int(argv[2]))
    block = getattr(target, "blocked", None)
    server = ctx.server
    if block is None or is_postponed(block) or block.internal or is_caller(server, block):  # CLIENT PAUSE's waiters, SCAN's
        return 0  # snapshot, a SHUTDOWN waiting for its replicas: not unblockable
    if as_error:
        server.unblock(block, server.error("UNBLOCKED client unblocked via CLIENT UNBLOCK"))
        # Redis counts a command failed when an error reply was sent while it ran: this one too
        COMMANDS[b"client"].subcommands[b"unblock"].failed_calls += 1
    else:
        server.unblock(block, block.timeout_reply())
    return 1


@command("client|pause", -3, "admin noscript loading stale", group="connection", summary="Suspends commands processing.", since="3.0.0")
def client_pause(ctx, argv):
    """CLIENT PAUSE timeout [WRITE|ALL]"""
    if len(argv) > 4:  # Redis matches PAUSE on 3 or 4 arguments only, then falls to its subcommand error
        raise subcommand_error(argv)
    write_only = False
    if len(argv) == 4:
        mode = argv[3].lower()
        if mode == b"write":
            write_only = True
        elif mode != b"all":
            raise ReplyError("ERR CLIENT PAUSE mode must be WRITE or ALL")
    timeout = to_int(argv[2], "ERR timeout is not an integer or out of range")
    if timeout < 0:
        raise ReplyError("ERR timeout is negative")
    server = ctx.server
    now = server.clock()
    if timeout > (1 << 63) - 1 - now:  # Redis 7.2+ (getTimeoutFromObjectOrReply): the deadline would overflow
        raise ReplyError("ERR timeout is out of range")
    pause(server, write_only, now + timeout)
    return OK


@command("client|unpause", 2, "admin noscript loading stale", group="connection", summary="Resumes processing commands from paused clients.", since="6.2.0", complexity="O(N) Where N is the number of paused clients")
def client_unpause(ctx, argv):
    """CLIENT UNPAUSE"""
    server = ctx.server
    if server.pause is not None:
        server.loop.call_soon(release, server, "client")  # after this reply, as Redis serves them in its next loop
    return OK


# -- client-side caching (server/tracking.py) ------------------------------------------------------


@command("client|tracking", -3, "noscript loading stale", group="connection", since="6.0.0",
         summary="Controls server-assisted client-side caching for the connection.",
         complexity="O(1). Some options may introduce additional complexity.")
def client_tracking(ctx, argv):
    """CLIENT TRACKING <ON | OFF> [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]"""
    late_error = tracking_command(ctx, argv)
    if late_error is not None:  # Redis replies an overlap between later prefixes and then OK (see _prefix_collision)
        return Raw(b"-%s\r\n+OK\r\n" % ctx.server.error(late_error))
    return OK


@command("client|caching", 3, "noscript loading stale", group="connection", since="6.0.0",
         summary="Instructs the server whether to track the keys in the next request.")
def client_caching(ctx, argv):
    """CLIENT CACHING <YES | NO>: the next command's keys are (OPTIN) or are not (OPTOUT) remembered."""
    state = ctx.tracking
    if state is None:
        raise ReplyError("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled")
    option = argv[2].lower()
    if option == b"yes":
        if not state.optin:
            raise ReplyError("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.")
    elif option == b"no":
        if not state.optout:
            raise ReplyError("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    else:
        raise ReplyError(SYNTAX)
    state.caching = True
    return OK


@command("client|getredir", 2, "noscript loading stale", group="connection", since="6.0.0",
         summary="Returns the client ID to which the connection's tracking notifications are redirected.")
def client_getredir(ctx, argv):
    """CLIENT GETREDIR -> the redirect client's ID, 0 for none, -1 when tracking is off."""
    return ctx.tracking.redirect if ctx.tracking is not None else -1


@command("client|trackinginfo", 2, "noscript loading stale", group="connection", since="6.2.0",
         summary="Returns information about server-assisted client-side caching for the connection.")
def client_trackinginfo(ctx, argv):
    """CLIENT TRACKINGINFO -> flags (a set), redirect and prefixes (in byte order, as Redis's rax)."""
    state = ctx.tracking
    if state is None:
        return Map({b"flags": Set([b"off"]), b"redirect": -1, b"prefixes": []})
    return Map({b"flags": Set(state.flags()), b"redirect": state.redirect, b"prefixes": sorted(state.prefixes)})


def _token(word: str, optional: bool = False) -> Arg:
    return Arg(word.lower(), "pure-token", token=word, flags=["optional"] if optional else [])


DECLARED["client|tracking"] = [
    Arg("status", "oneof", arguments=[_token("ON"), _token("OFF")]),
    Arg("client-id", "integer", token="REDIRECT", flags=["optional"]),
    Arg("prefix", "string", token="PREFIX", flags=["optional", "multiple", "multiple_token"]),
    *(_token(word, optional=True) for word in ("BCAST", "OPTIN", "OPTOUT", "NOLOOP")),
]
DECLARED["client|caching"] = [Arg("mode", "oneof", arguments=[_token("YES"), _token("NO")])]


CLIENT_HELP = [
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "HELP",
    "    Print this help.",
]


@command("client|help", 2, "loading stale", group="connection", summary="Returns helpful text about the different subcommands.", since="5.0.0")
def client_help(ctx, argv):
    return help_reply(CLIENT_HELP)
