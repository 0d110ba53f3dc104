"""Connection commands: PING, ECHO, HELLO, SELECT, QUIT, RESET, AUTH, TIME."""

from __future__ import annotations

import time

from protocol.errors import SYNTAX, ReplyError, arg_text
from protocol.reply import OK, PONG, Map, Simple

from .. import REDIS_VERSION
from ..client import ON, SKIP
from ..command import command
from .args import int32_arg, to_int

NO_PASSWORD = (
    "ERR AUTH <password> called without any password configured for the default user. "
    "Are you sure your configuration is correct?"
)
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
HELLO_NOAUTH = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
    "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
    "select the RESP protocol version at the same time"
)

# INFO stats acl_access_denied_auth: every failed AUTH / HELLO AUTH since start-up. Not in server.stats:
# Redis's CONFIG RESETSTAT leaves it (resetServerStats does not touch server.acl_info). Per process, as fork.STATS.
AUTH_STATS = {"acl_access_denied_auth": 0}


def authenticate(ctx, username: bytes, password: bytes) -> None:
    """Check credentials against the default user (server/default_user.py: the only ACL user).

    A `nopass` default user (no requirepass) accepts any password, as in Redis; a disabled one none.
    """
    if username != b"default" or not ctx.server.default_user.check(password):
        AUTH_STATS["acl_access_denied_auth"] += 1
        raise ReplyError(WRONGPASS)
    ctx.logged_in = ctx.authenticated = True
    ctx.reader.unauthenticated = False


def validate_name(name: bytes, what: str = "Client names") -> None:
    """Redis accepts only printable ASCII without spaces in names (validateClientName)."""
    if any(c < 0x21 or c > 0x7E for c in name):
        raise ReplyError(f"ERR {what} cannot contain spaces, newlines or special characters.")


@command("ping", -1, "fast", group="connection", summary="Returns the server's liveliness response.")
def ping(ctx, argv):
    """PING [message] -> +PONG, or the message as a bulk string."""
    if len(argv) > 2:
        raise ReplyError("ERR wrong number of arguments for 'ping' command")
    if ctx.subscribed:  # RESP2 subscribed context: Redis answers as a pub/sub message
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return argv[1] if len(argv) == 2 else PONG


@command("echo", 2, "fast loading stale", group="connection", summary="Returns the given string.")
def echo(ctx, argv):
    """ECHO message"""
    return argv[1]


@command("select", 2, "fast loading stale", group="connection", summary="Changes the selected database.")
def select(ctx, argv):
    """SELECT index"""
    index = int32_arg(argv[1])
    if not 0 <= index < len(ctx.server.keyspace):
        raise ReplyError("ERR DB index is out of range")
    ctx.db = ctx.server.keyspace[index]
    return OK


@command("quit", -1, "noscript loading stale fast no-auth allow-busy", group="connection", summary="Closes the connection.")
def quit_(ctx, argv):
    """QUIT"""
    ctx.close_after_reply = True
    return OK


@command("auth", -2, "noscript loading stale fast no-auth allow-busy", group="connection", summary="Authenticates the connection.", complexity="O(N) where N is the number of passwords defined for the user")
def auth(ctx, argv):
    """AUTH [username] password"""
    if len(argv) > 3:
        raise ReplyError(SYNTAX)
    if len(argv) == 2:
        if ctx.server.default_user.nopass:
            raise ReplyError(NO_PASSWORD)
        authenticate(ctx, b"default", argv[1])
    else:
        authenticate(ctx, argv[1], argv[2])
    return OK


@command("hello", -1, "noscript loading stale fast no-auth allow-busy", group="connection", summary="Handshakes with the Redis server.", since="6.0.0")
def hello(ctx, argv):
    """HELLO [protover [AUTH username password] [SETNAME clientname]] -> server info map."""
    version = ctx.resp
    if len(argv) > 1:
        version = to_int(argv[1], "ERR Protocol version is not an integer or out of range")
        if version not in (2, 3):
            raise ReplyError("NOPROTO unsupported protocol version")
    credentials = None
    name = None
    index = 2
    while index < len(argv):
        more = len(argv) - 1 - index
        option = argv[index].upper()
        if option == b"AUTH" and more >= 2:
            credentials = (argv[index + 1], argv[index + 2])
            index += 3
        elif option == b"SETNAME" and more >= 1:
            name = argv[index + 1]
            validate_name(name)
            index += 2
        else:
            raise ReplyError(f"ERR Syntax error in HELLO option '{arg_text(argv[index])}'")
    if credentials is not None:
        authenticate(ctx, *credentials)
    if not ctx.logged_in:  # Redis's c->authenticated, not authRequired: a password removed since does not log it in
        raise ReplyError(HELLO_NOAUTH)
    if name is not None:
        ctx.name = name
    ctx.set_resp(version)
    return Map(
        {
            b"server": b"redis",
            b"version": REDIS_VERSION.encode(),
            b"proto": version,
            b"id": ctx.id,
            b"mode": b"standalone",
            b"role": b"master",
            b"modules": [],
        }
    )


@command("reset", 1, "noscript loading stale fast no-auth allow-busy", group="connection", summary="Resets the connection.", since="6.2.0")
def reset(ctx, argv):
    """RESET: back to a fresh connection's state (Redis's clearClientConnectionState)."""
    server = ctx.server
    ctx.multi = None
    ctx.multi_error = False
    ctx.unwatch()
    server.pubsub.drop(ctx)
    ctx.db = server.keyspace[0]
    ctx.set_resp(2)
    ctx.logged_in = ctx.authenticated = not server.default_user.auth_required  # Redis's clearClientConnectionState
    ctx.reader.unauthenticated = not ctx.authenticated
    ctx.name = b""
    if ctx.reply_mode is not SKIP:  # Redis clears OFF and a pending SKIP, not the skip of this reply
        ctx.reply_mode = ON
    ctx.flags_no_evict = False
    ctx.no_touch = False
    if ctx.monitor:
        ctx.monitor = False
        ctx.update_subscribed()
        if ctx in server.monitors:
            server.monitors.remove(ctx)
    return Simple(b"RESET")


@command("time", 1, "fast loading stale", group="server", summary="Returns the server time.", since="2.6.0")
def time_(ctx, argv):
    """TIME -> [unix seconds, microseconds] as bulk strings."""
    now = time.time_ns() // 1000
    return [str(now // 1_000_000).encode(), str(now % 1_000_000).encode()]
