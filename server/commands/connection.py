"""Connection commands: PING, ECHO, HELLO, SELECT, QUIT, RESET, AUTH, CLIENT, TIME."""

from __future__ import annotations

from protocol.errors import ReplyError
from protocol.reply import OK, PONG, Map, Simple

from .. import REDIS_VERSION
from ..command import command
from .args import to_int


@command("ping", -1, "fast", group="connection", summary="Returns the server's liveliness response.")
def ping(ctx, argv):
    """PING [message] -> +PONG, or the message as a bulk string."""
    if len(argv) > 2:
        raise ReplyError("ERR wrong number of arguments for 'ping' command")
    return argv[1] if len(argv) == 2 else PONG


@command("echo", 2, "fast", group="connection", summary="Returns the given string.")
def echo(ctx, argv):
    return argv[1]


@command("select", 2, "fast loading stale", group="connection", summary="Changes the selected database.", since="1.0.0")
def select(ctx, argv):
    index = to_int(argv[1], "ERR value is not an integer or out of range")
    if not 0 <= index < len(ctx.server.keyspace):
        raise ReplyError("ERR DB index is out of range")
    ctx.db = ctx.server.keyspace[index]
    return OK


@command("quit", -1, "no-auth fast", group="connection", summary="Closes the connection.")
def quit_(ctx, argv):
    ctx.close_after_reply = True
    return OK


@command("hello", -1, "no-auth fast", group="connection", summary="Handshakes with the Redis server.", since="6.0.0")
def hello(ctx, argv):
    """HELLO [protover [AUTH username password] [SETNAME clientname]] -> server info map."""
    version = ctx.resp
    if len(argv) > 1:
        try:
            version = int(argv[1])
        except ValueError:
            raise ReplyError("ERR Protocol version is not an integer or out of range") from None
        if version not in (2, 3):
            raise ReplyError("NOPROTO unsupported protocol version")
    index = 2
    name = None
    while index < len(argv):
        option = argv[index].upper()
        if option == b"AUTH" and index + 2 < len(argv):
            from .server import check_password

            check_password(ctx, argv[index + 1], argv[index + 2])
            index += 3
        elif option == b"SETNAME" and index + 1 < len(argv):
            name = argv[index + 1]
            index += 2
        else:
            raise ReplyError(f"ERR Syntax error in HELLO option '{argv[index].decode(errors='replace')}'")
    if not ctx.authenticated:
        raise ReplyError("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
    if name is not None:
        from .client import validate_name

        validate_name(name)
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


__all__ = ["Simple"]
