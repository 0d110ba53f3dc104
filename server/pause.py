"""CLIENT PAUSE: hold clients' commands (all of them, or writes) until a deadline.

A paused command is postponed as Redis's blockPostponeClient does: the client
waits, parked with no keys (it counts in blocked_clients), and the command runs
when the pause ends, its reply written then; what the client sent after it
waits behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.keyspace import Database

from .blocking import Block
from .command import Command

# Redis's commands flagged MAY_REPLICATE (src/commands/*.json): a WRITE pause holds them as it holds writes.
# COMMAND INFO does not show the flag in Redis 8, so it is kept here, not among a Command's flags.
# Of these Millrace implements PUBLISH and SPUBLISH.
MAY_REPLICATE = frozenset({"publish", "spublish", "pfcount", "eval", "evalsha", "fcall", "script|load", "script|flush"})


def may_replicate(cmd: Command) -> bool:
    """Held by a WRITE pause: Redis's `cmd->flags & (CMD_WRITE | CMD_MAY_REPLICATE)`."""
    return cmd.write or cmd.name in MAY_REPLICATE


def _postponed() -> None:
    return None  # never ready by itself: only the end of the pause releases it


@dataclass(slots=True, eq=False)
class Pause:
    write_only: bool
    end_ms: int
    timer: object = None
    waiting: list[tuple[Block, list[bytes]]] = field(default_factory=list)

    def applies(self, client, cmd) -> bool:
        if not self.write_only:
            return True
        if may_replicate(cmd):
            return True
        if cmd.name == "exec" and client.multi:
            return any(may_replicate(queued) for queued, _ in client.multi)
        return False


def is_postponed(block: Block) -> bool:
    return block.attempt is _postponed


def postpone(server, client, argv: list[bytes]):
    """Park client until the pause ends; returns BLOCKED for the caller."""
    from .server import BLOCKED

    block = Block([], 0, _postponed)
    block.db = client.db.id
    block.client = client
    server.blocking.park(block)
    client.blocked = block
    server.pause.waiting.append((block, argv))
    return BLOCKED


def pause(server, write_only: bool, end_ms: int) -> None:
    """Start a pause or extend the one in force (the most restrictive mode, the later end)."""
    current = server.pause
    if current is not None:
        write_only = write_only and current.write_only
        end_ms = max(end_ms, current.end_ms)
        current.timer.cancel()
        waiting = current.waiting
    else:
        waiting = []
    state = Pause(write_only, end_ms, waiting=waiting)
    delay = max(0.0, (end_ms - server.clock()) / 1000)
    state.timer = server.loop.call_later(delay, unpause, server)
    server.pause = state
    Database.expire_paused = True  # either mode pauses expiry, as Redis's PAUSE_ACTION_EXPIRE


def unpause(server) -> None:
    """End the pause: release the postponed clients in the order they were held.

    As Redis's processUnblockedClients, each released client runs its postponed command and then
    what it sent after it (a command held again, or one that blocks, stops it) before the next
    client: Client.run serves the clients blocked on keys after each command, so a reader sees each
    released write, not only the state after all of them. A client whose slice runs out goes on
    later (continue_later), as at any other time.
    """
    state = server.pause
    if state is None:
        return
    server.pause = None
    Database.expire_paused = False
    if state.timer is not None:
        state.timer.cancel()
    server.clock()
    for block, argv in state.waiting:
        client = block.client
        if client.blocked is not block or client.transport is None:
            continue
        server.blocking.unpark(block)
        client.blocked = None
        client.pending.appendleft(argv)  # first in line: what the client sent meanwhile is behind it
        client.run_pending()
