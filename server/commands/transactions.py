"""MULTI/EXEC/DISCARD/WATCH/UNWATCH, with Redis's rules.

- While `client.multi` is a list, dispatch (Server.execute) queues every
  command except EXEC, DISCARD, MULTI, WATCH, QUIT and RESET; a command
  rejected while queuing (unknown, wrong arity, NOAUTH) sets
  `client.multi_error` and EXEC then answers EXECABORT.
- Errors raised while EXEC runs the queue are replies in the array; the
  other commands still run.
- A WATCHed key touched by any write (effects touch keys, see
  Server.after_write), by lazy or active expiry, by FLUSHDB/FLUSHALL/SWAPDB
  (when the key exists, as Redis's touchAllWatchedKeysInDb), or that expired
  since WATCH makes EXEC answer the null array and run nothing.
- The effects of the commands run by EXEC are propagated once, wrapped in
  MULTI/EXEC (Server.begin_exec/end_exec); an aborted EXEC propagates nothing.
"""

from __future__ import annotations

from protocol.errors import ReplyError
from protocol.reply import NULL_ARRAY, OK, Raw

from ..command import command


def discard_transaction(client) -> None:
    """Leave MULTI state and forget WATCHes (Redis's discardTransaction)."""
    client.multi = None
    client.multi_error = False
    client.unwatch()


def exec_abort(client, message: str) -> str:
    """EXEC itself was rejected (arity, NOAUTH...): the transaction ends with this error text."""
    discard_transaction(client)
    return "EXECABORT Transaction discarded because of: " + message.removeprefix("ERR ")


@command("multi", 1, "noscript loading stale fast allow-busy", group="transactions", since="1.2.0",
         summary="Starts a transaction.")
def multi(ctx, argv):
    """MULTI"""
    if ctx.multi is not None:
        raise ReplyError("ERR MULTI calls can not be nested")
    ctx.multi = []
    ctx.multi_error = False
    return OK


@command("discard", 1, "noscript loading stale fast allow-busy", group="transactions", since="2.0.0",
         summary="Discards a transaction.", complexity="O(N), when N is the number of queued commands")
def discard(ctx, argv):
    """DISCARD"""
    if ctx.multi is None:
        raise ReplyError("ERR DISCARD without MULTI")
    discard_transaction(ctx)
    return OK


def _watched_key_expired(client) -> bool:
    """Did a WATCHed key, alive when watched, reach its expiry time without being removed yet?"""
    server = client.server
    now = server.now
    dbs = server.keyspace.dbs
    before = client.watch_expired or ()
    return any(dbs[db].is_expired(key, now) for db, key in client.watched if (db, key) not in before)


@command("exec", 1, "noscript loading stale skip-slowlog", group="transactions", since="1.2.0",
         summary="Executes all commands in a transaction.", complexity="Depends on commands in the transaction")
def exec_(ctx, argv):
    """EXEC -> the array of the queued commands' replies; EXECABORT; or the null array (WATCH)."""
    queued = ctx.multi
    if queued is None:
        raise ReplyError("ERR EXEC without MULTI")
    if ctx.multi_error:
        discard_transaction(ctx)
        raise ReplyError("EXECABORT Transaction discarded because of previous errors.")
    if ctx.dirty_cas or (ctx.watched and _watched_key_expired(ctx)):
        discard_transaction(ctx)
        return NULL_ARRAY
    ctx.unwatch()  # first: our own writes must not matter
    server = ctx.server
    call = server.call
    replies = []
    encoders = []  # the protocol each reply was made in: a queued HELLO switches it midway
    ctx.in_exec = True  # MULTI state stays visible (CLIENT INFO flags=x) while the queue runs
    server.begin_exec()
    try:
        for cmd, args in queued:
            replies.append(call(ctx, cmd, args))
            encoders.append(ctx.encode)
    finally:
        ctx.in_exec = False
        discard_transaction(ctx)
        server.end_exec()
    if any(encode is not ctx.encode for encode in encoders):  # each reply in its own protocol, as Redis writes them
        replies = [Raw(b"".join(_encoded(reply, encode))) for reply, encode in zip(replies, encoders, strict=True)]
    return replies


def _encoded(reply, encode) -> list[bytes]:
    out: list[bytes] = []
    encode(reply, out)
    return out


@command("watch", -2, "noscript loading stale fast allow-busy", keys=(1, -1, 1), group="transactions", since="2.2.0",
         summary="Monitors changes to keys to determine the execution of a transaction.",
         complexity="O(1) for every key.")
def watch(ctx, argv):
    """WATCH key [key ...]: EXEC fails if one of them changes (or expires) before it."""
    if ctx.multi is not None:
        raise ReplyError("ERR WATCH inside MULTI is not allowed")
    if ctx.dirty_cas:
        return OK  # no point in watching: EXEC will fail anyway
    db, now = ctx.db, ctx.server.now
    for key in argv[1:]:  # a key already past its TTL is noted, not removed: its removal will be no change
        ctx.watch(key, db.is_expired(key, now))
    return OK


@command("unwatch", 1, "noscript loading stale fast allow-busy", group="transactions", since="2.2.0",
         summary="Forgets about watched keys of a transaction.")
def unwatch(ctx, argv):
    """UNWATCH"""
    ctx.unwatch()
    return OK
