"""Server commands: INFO, CONFIG, COMMAND, DEBUG, MONITOR, SHUTDOWN..."""

from __future__ import annotations

from protocol.errors import ReplyError


def check_password(ctx, username: bytes, password: bytes) -> None:
    required = ctx.server.config["requirepass"].encode()
    if username.lower() != b"default" or not required or password != required:
        raise ReplyError("WRONGPASS invalid username-password pair or user is disabled.")
    ctx.authenticated = True


def monitor_line(client, argv: list[bytes], now: float) -> bytes:
    args = " ".join('"' + a.decode("latin-1").replace("\\", "\\\\").replace('"', '\\"') + '"' for a in argv)
    return f"+{now:.6f} [{client.db.id} {client.addr}] {args}\r\n".encode("latin-1")
