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
    """The pause in force: the most restrictive of its holds (Redis's pause purposes).

    CLIENT PAUSE ("client", with a deadline), FAILOVER ("failover") and a shutdown waiting for its
    replicas ("shutdown") each hold writes, or everything, for their own reasons: ending one (CLIENT
    UNPAUSE, a deadline, a failover done) leaves the others in force, as Redis's unpauseActions.
    """

    write_only: bool
    end_ms: int  # CLIENT PAUSE's deadline (0 when it holds nothing)
    timer: object = None
    waiting: list[tuple[Block, list[bytes]]] = field(default_factory=list)
    holds: dict[str, bool] = field(default_factory=dict)  # purpose -> holds writes only

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


def pause(server, write_only: bool, end_ms: int = 0, purpose: str = "client") -> None:
    """Hold clients for `purpose`: CLIENT PAUSE starts a pause or extends its own (the more restrictive
    mode, the later end); the others hold until release(). The pause in force is the most restrictive."""
    current = server.pause
    holds = dict(current.holds) if current is not None else {}
    waiting = current.waiting if current is not None else []
    client_end = current.end_ms if current is not None else 0
    if current is not None and current.timer is not None:
        current.timer.cancel()
    if purpose == "client":
        if "client" in holds:
            write_only = write_only and holds["client"]
            end_ms = max(end_ms, client_end)
        client_end = end_ms
    holds[purpose] = write_only
    state = Pause(all(holds.values()), client_end, waiting=waiting, holds=holds)
    if "client" in holds:
        delay = max(0.0, (client_end - server.clock()) / 1000)
        state.timer = server.loop.call_later(delay, release, server, "client")
    server.pause = state
    Database.expire_paused = True  # either mode pauses expiry, as Redis's PAUSE_ACTION_EXPIRE


def release(server, purpose: str) -> None:
    """End purpose's hold: the pause ends with the last hold; a pause left less restrictive (writes
    only) lets the held clients go again, those still held waiting anew, as Redis's unblockPostponedClients."""
    state = server.pause
    if state is None or purpose not in state.holds:
        return
    holds = {name: writes for name, writes in state.holds.items() if name != purpose}
    if not holds:
        unpause(server)
        return
    if state.timer is not None and purpose == "client":
        state.timer.cancel()
    client_end = state.end_ms if "client" in holds else 0
    server.pause = Pause(all(holds.values()), client_end, timer=state.timer if "client" in holds else None, holds=holds)
    if server.pause.write_only and not state.write_only:
        _release_held(server, state.waiting)
    else:
        server.pause.waiting = state.waiting


def unpause(server) -> None:
    """End the pause, every hold of it: release the postponed clients in the order they were held.

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
    _release_held(server, state.waiting)


def _release_held(server, waiting: list[tuple[Block, list[bytes]]]) -> None:
    """Run the held clients again, in the order they were held (unpause's docstring); any still held waits anew."""
    server.clock()
    for block, argv in waiting:
        client = block.client
        if client.blocked is not block or client.transport is None:
            continue
        server.blocking.unpark(block)
        client.blocked = None
        client.pending.appendleft(argv)  # first in line: what the client sent meanwhile is behind it
        client.run_pending()
