"""String commands: applications keep offsets and flags beside their streams."""

from __future__ import annotations

from protocol.reply import OK

from ..command import command


@command("get", 2, "readonly fast", keys=(1, 1, 1), group="string", summary="Returns the string value of a key.")
def get(ctx, argv):
    return ctx.db.lookup_type(argv[1], ctx.server.now, bytes)


@command("set", -3, "write denyoom", keys=(1, 1, 1), group="string", summary="Sets the string value of a key, ignoring its type.")
def set_(ctx, argv):
    """SET key value (options to come)."""
    ctx.db.set(argv[1], argv[2])
    return OK, [argv]
