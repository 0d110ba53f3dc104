"""Persistence commands: SAVE, BGSAVE, BGREWRITEAOF (LASTSAVE and DEBUG RELOAD live with the server commands)."""

from __future__ import annotations

from protocol.errors import SYNTAX, ReplyError
from protocol.reply import OK, Simple

from ..command import command


def _persistence(ctx):
    persistence = ctx.server.persistence
    if persistence is None:
        raise ReplyError("ERR persistence is not available in this server")
    return persistence


@command("save", 1, "admin noscript no-async-loading no-multi", group="server", summary="Synchronously saves the database(s) to disk.", complexity="O(N) where N is the total number of keys in all databases")
def save(ctx, argv):
    persistence = _persistence(ctx)
    if persistence.child is not None and persistence.child.kind == "rdb":
        raise ReplyError("ERR Background save already in progress")
    persistence.rdb_saves += 1  # counted before trying, as Redis's rdbSave (a failed SAVE counts)
    if not persistence.save():
        raise ReplyError("ERR")
    return OK


@command("bgsave", -1, "admin noscript no-async-loading", group="server", summary="Asynchronously saves the database(s) to disk.")
def bgsave(ctx, argv):
    """BGSAVE [SCHEDULE]: fork a child that writes the snapshot; SCHEDULE waits for a running rewrite."""
    schedule = False
    if len(argv) > 1:
        if len(argv) == 2 and argv[1].lower() == b"schedule":
            schedule = True
        else:
            raise ReplyError(SYNTAX)
    persistence = _persistence(ctx)
    child = persistence.child
    if child is not None and child.kind == "rdb":
        raise ReplyError("ERR Background save already in progress")
    if child is not None or ctx.in_exec:  # Redis never forks inside EXEC: its cron starts it
        if not schedule and not ctx.in_exec:
            raise ReplyError(
                "ERR Another child process is active (AOF?): can't BGSAVE right now. "
                "Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible."
            )
        persistence.bgsave_scheduled = True
        return Simple(b"Background saving scheduled")
    persistence.bgsave()  # Redis's bare ERR if the fork fails (logged)
    return Simple(b"Background saving started")


@command("bgrewriteaof", 1, "admin noscript no-async-loading", group="server", summary="Asynchronously rewrites the append-only file to disk.")
def bgrewriteaof(ctx, argv):
    persistence = _persistence(ctx)
    child = persistence.child
    if child is not None and child.kind == "aof":
        raise ReplyError("ERR Background append only file rewriting already in progress")
    if child is not None or ctx.in_exec:  # as BGSAVE: never a fork inside EXEC
        persistence.rewrite_scheduled = True
        return Simple(b"Background append only file rewriting scheduled")
    persistence.rewrite()  # Redis's text if it cannot start (logged)
    return Simple(b"Background append only file rewriting started")

