"""CLIENT PAUSE: hold clients' commands (all of them, or writes) until a deadline.

A paused command is postponed as Redis's blockPostponeClient does: the client
waits, parked with no keys (it counts in blocked_clients), and the command runs
when the pause ends, its reply written then; what the client sent after it
waits behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .blocking import Block


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
        if cmd.write or "may-replicate" in cmd.flags:
            return True
        if cmd.name == "exec" and client.multi:
            return any(queued.write or "may-replicate" in queued.flags for queued, _ in client.multi)
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


def unpause(server) -> None:
    """End the pause: run each postponed command, in the order they arrived."""
    state = server.pause
    if state is None:
        return
    server.pause = None
    if state.timer is not None:
        state.timer.cancel()
    server.clock()
    for block, argv in state.waiting:
        client = block.client
        if client.blocked is not block or client.transport is None:
            continue
        server.blocking.unpark(block)
        client.blocked = None
        reply = server.execute(client, argv)
        from .server import BLOCKED

        if reply is not BLOCKED:
            client.resume(reply)
    if server.blocking.ready:  # the postponed writes may wake readers: not at the next command or tick
        server.serve_ready()
