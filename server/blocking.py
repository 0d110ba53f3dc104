"""Clients blocked on keys (XREAD/XREADGROUP BLOCK), served in the order they blocked.

A handler that must wait returns a `Block`. Whenever a write touches one of
its keys, the server calls `attempt()` again once the command (or EXEC) has
finished: it returns the reply (for write commands a `(reply, effects)` pair),
None to keep waiting, or raises ReplyError to release the client with an
error (a deleted stream under XREADGROUP, a destroyed group...).
A write command that changed something before deciding to wait (XREADGROUP
creates its consumer first) puts those changes' effects in `effects`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from protocol.reply import NULL_ARRAY


@dataclass(slots=True, eq=False)
class Block:
    keys: list[bytes]
    timeout_ms: int  # 0: for ever
    attempt: Callable[[], object]
    on_timeout: object = NULL_ARRAY
    effects: list = field(default_factory=list)  # changes made before waiting (write commands)
    # set when the client is parked
    db: int = 0
    client: object = None
    timer: object = None
    write: bool = False  # the blocked command is a write: attempt() returns (reply, effects)
    command: object = None  # its Command, counted in INFO commandstats when the wait ends
    argv: list = field(default_factory=list)  # the command line, for the slowlog then
    duration_ns: int = 0  # time spent running it: the first call and each attempt
    # a time (ms) at which attempt() may succeed with no key touched (XREADGROUP ... CLAIM: an
    # entry becomes idle enough); attempt() updates it when it keeps waiting
    wake_at: int | None = None
    wake_timer: object = None
    # XREAD: each key's last ID when it blocked, what its `$` stood for. Redis rewrites `$` so in the
    # blocked command's argv, and a woken XREAD that CLIENT PAUSE postpones runs again with them.
    last_ids: list | None = None
    # Millrace's own wait, not a blocking command (SCAN's snapshot sorted in slices): Redis's client would
    # not be waiting, so INFO, CLIENT LIST, CLIENT UNBLOCK and CLIENT PAUSE do not see it; Server.finish_wait ends it
    internal: bool = False

    def timeout_reply(self):
        """The reply when the wait ends without attempt() succeeding (timeout, CLIENT UNBLOCK, MULTI):
        on_timeout itself, or what it returns when callable (WAIT counts the replicas at that moment)."""
        reply = self.on_timeout
        return reply() if callable(reply) else reply


class ReadyKeys(dict):
    """An insertion-ordered set of (db, key): a dict whose values are unused, with set's `add`."""

    __slots__ = ()

    def add(self, key: tuple[int, bytes]) -> None:
        self[key] = None


class BlockingManager:
    """Waiters per (db, key), FIFO, plus the keys touched since the last serve.

    Each key's waiters are a dict used as an ordered set: blocks in the order
    they blocked, and any one removed in O(1) (serving M waiters of one key
    unparks each of them: a list would make that O(M^2)). `ready` is one too:
    keys in the order they became ready, as Redis's server.ready_keys list, so
    readers blocked on different keys are served in the order the keys were
    written (a set's order would depend on the hash seed).
    """

    __slots__ = ("waiters", "ready", "count")

    def __init__(self) -> None:
        self.waiters: dict[tuple[int, bytes], dict[Block, None]] = {}
        self.ready = ReadyKeys()
        self.count = 0  # blocked clients, for INFO blocked_clients

    def park(self, block: Block) -> None:
        for key in dict.fromkeys(block.keys):
            self.waiters.setdefault((block.db, key), {})[block] = None
        self.count += not block.internal

    def unpark(self, block: Block) -> None:
        for key in dict.fromkeys(block.keys):
            queue = self.waiters.get((block.db, key))
            if queue is not None:
                queue.pop(block, None)
                if not queue:
                    del self.waiters[(block.db, key)]
        self.count -= not block.internal
        if block.timer is not None:
            block.timer.cancel()
            block.timer = None
        if block.wake_timer is not None:
            block.wake_timer.cancel()
            block.wake_timer = None

    def touch(self, db: int, key: bytes) -> None:
        if (db, key) in self.waiters:
            self.ready[(db, key)] = None

    def touch_db(self, db: int) -> None:
        """A whole database changed (FLUSHDB, SWAPDB): every waiter in it re-checks."""
        for wdb, key in self.waiters:
            if wdb == db:
                self.ready[(wdb, key)] = None
