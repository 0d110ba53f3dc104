"""SHUTDOWN and the shutdown signals: lagging replicas get `shutdown-timeout` to catch up first (Redis 7).

As Redis's prepareForShutdown: unless NOW is given, `shutdown-timeout` is 0, or
every replica has acknowledged the whole replication offset, a primary pauses
writes (a "shutdown" hold, server/pause.py), asks its replicas for an ACK (unless
writes were held already: CLIENT PAUSE, FAILOVER) and
waits up to `shutdown-timeout` seconds, the SHUTDOWN caller blocked meanwhile.
The cron finishes the shutdown once every replica has acknowledged the offset
or the time is up (finishShutdown: the lagging ones are logged, the final save
made, the loop stopped). A failed save (without FORCE) or SHUTDOWN ABORT
cancels it: the waiting SHUTDOWN callers get "ERR Errors trying to SHUTDOWN.
Check logs.", writes go on, and INFO's `shutdown_in_milliseconds` goes away.
So a replica promoted after a planned shutdown has every acknowledged write.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from .blocking import Block
from .pause import pause, release

log = logging.getLogger("millrace")

FAILED = "ERR Errors trying to SHUTDOWN. Check logs."


@dataclass(slots=True)
class Flags:
    """SHUTDOWN's flags (or shutdown-on-sigterm / -sigint's)."""

    save: bool = False
    nosave: bool = False
    now: bool = False
    force: bool = False


@dataclass(slots=True)
class Shutdown:
    """A shutdown waiting for its replicas (Redis's shutdown_mstime != 0)."""

    flags: Flags
    deadline_ms: int
    # the SHUTDOWN callers waiting (parked on no key: Redis's BLOCKED_SHUTDOWN counts in blocked_clients,
    # not in total_blocking_keys); one may have gone since (closed, or unblocked by a role change)
    callers: list[Block] = field(default_factory=list)


def _never() -> None:
    return None


def in_progress(server) -> bool:
    return server.shutdown_wait is not None


def remaining_ms(server) -> int:
    """INFO's shutdown_in_milliseconds: what is left of the wait."""
    return max(0, server.shutdown_wait.deadline_ms - server.clock())


def ready(server) -> bool:
    """Redis's isReadyToShutdown: every replica has acknowledged the whole offset."""
    replication = server.replication
    if replication is None:
        return True
    return all(link.ack_offset == server.master_repl_offset for link in replication.replicas)


def prepare(server, flags: Flags) -> bool | None:
    """prepareForShutdown: True when the server stops now, None when it waits for its replicas, False
    when the shutdown failed (logged; the server goes on)."""
    if in_progress(server):
        return None  # the shutdown under way decides
    log.info("User requested shutdown...")
    timeout = server.config["shutdown-timeout"]
    if not flags.now and timeout and not ready(server):
        server.shutdown_wait = Shutdown(flags, server.clock() + timeout * 1000)
        if server.pause is None:  # as Redis: no GETACK while writes are held already (CLIENT PAUSE, FAILOVER)
            server.replication.request_acks()
        pause(server, True, purpose="shutdown")
        log.info("Waiting for replicas before shutting down.")
        return None
    return finish(server, flags)


def finish(server, flags: Flags) -> bool:
    """finishShutdown: the lagging replicas logged, the final save made, then the loop stops; a failed
    save without FORCE cancels (False)."""
    replication = server.replication
    replicas = list(replication.replicas) if replication is not None else []
    offset = server.master_repl_offset
    lagging = [link for link in replicas if link.ack_offset != offset]
    now = server.clock() // 1000
    for link in lagging:
        lag = now - int(link.ack_time) if link.state == "online" else 0
        log.warning("Lagging replica %s:%d reported offset %d behind master, lag=%d, state=%s.",
                    link.addr, link.port, offset - link.ack_offset, lag, link.state)  # fmt: skip
    if replicas:
        log.info("%d of %d replicas are in sync when shutting down.", len(replicas) - len(lagging), len(replicas))
    save = flags.save or (not flags.nosave and bool(server.config["save"]))
    server.shutdown_save, server.shutdown_nosave = save, flags.nosave
    persistence = server.persistence
    if persistence is not None and not persistence.prepare_shutdown(save=save, force=flags.force):  # (logged there)
        cancel(server)
        return False
    server.shutdown()
    return True


def cancel(server) -> int:
    """cancelShutdown: the wait ends, its SHUTDOWN callers get the error, writes go on; how many callers
    were answered. As Redis's replyToClientsBlockedOnShutdown, their SHUTDOWN is not counted (INFO
    commandstats, LATENCY HISTOGRAM, the slowlog): the error is the command running now's (ABORT's)."""
    wait = server.shutdown_wait
    server.shutdown_wait = None
    server.shutdown_asap = False
    callers = [block for block in wait.callers if block.client is not None and block.client.blocked is block] if wait else []
    for block in callers:
        block.command = None
        server.unblock(block, server.error(FAILED))
    release(server, "shutdown")
    return len(callers)


def abort(server) -> int | None:
    """SHUTDOWN ABORT: None if no shutdown was under way, else how many waiting callers got the error."""
    if not in_progress(server):
        return None
    answered = cancel(server)
    log.info("Shutdown manually aborted.")
    return answered


def is_caller(server, block: Block) -> bool:
    """Whether block is a SHUTDOWN caller's wait: CLIENT UNBLOCK leaves it (Redis's BLOCKED_SHUTDOWN cannot time out)."""
    wait = server.shutdown_wait
    return wait is not None and block in wait.callers


def wait_block(server) -> Block:
    """What a SHUTDOWN caller waits on while the replicas catch up (no key): the shutdown ends the wait,
    by exiting or by cancel()'s error."""
    block = Block([], 0, _never)
    server.shutdown_wait.callers.append(block)
    return block


def cron(server, now: int) -> None:
    """The wait's end: every replica caught up, or shutdown-timeout spent (Redis's serverCron)."""
    wait = server.shutdown_wait
    if wait is not None and (now >= wait.deadline_ms or ready(server)):
        finish(server, wait.flags)


def on_signal(server, sigint: bool) -> None:
    """SIGTERM / SIGINT: SHUTDOWN with shutdown-on-sigterm's / -sigint's flags; a second SIGINT while a
    shutdown is under way exits at once, as Redis's "You insist..."."""
    name = "SIGINT" if sigint else "SIGTERM"
    if server.shutdown_asap and sigint:
        log.warning("You insist... exiting now.")
        logging.shutdown()
        os._exit(1)
    log.warning("Received %s scheduling shutdown...", name)
    server.shutdown_asap = True
    if in_progress(server):
        return
    words = server.config["shutdown-on-sigint" if sigint else "shutdown-on-sigterm"].split()
    flags = Flags(save="save" in words, nosave="nosave" in words, now="now" in words, force="force" in words)
    prepare(server, flags)  # a failure is logged, and cancel()led: shutdown_asap is cleared
