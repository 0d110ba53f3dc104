"""client-output-buffer-limit: how much unread reply a client may hold before it is dropped.

As Redis's checkClientOutputBufferLimits (networking.c): three classes, normal,
slave (replica) and pubsub, each with a hard limit in bytes (over it: closed at
once), a soft limit in bytes and its seconds (over it for longer than that:
closed), 0 turning a limit off. A client that must authenticate and has not is
closed as soon as more than 1024 bytes of its replies pile up beyond Redis's
16 KB reply buffer, whatever the configuration (the CVE-2025-21605 fix): a
client that pipelines password guesses without reading can no longer make the
server hold their answers. The class limits bind that client too: Redis tests
the 1024-byte rule first and, when it does not fire, goes on to the class.

The parameter is kept as Redis prints it (CONFIG GET): all three classes on one
line in bytes, `slave` for the replica class. A CONFIG SET or directive names
some classes and leaves the others as they were; all of it is valid or nothing
changes.
"""

from __future__ import annotations

import logging
import re
import time

from .config import INT_MAX, PARAMS, ConfigError, parse_memory

log = logging.getLogger("millrace")

CLASSES = ("normal", "slave", "pubsub")
DEFAULT = PARAMS["client-output-buffer-limit"].default  # declared once, in config.py
_NAMES = {"normal": "normal", "slave": "slave", "replica": "slave", "pubsub": "pubsub"}  # getClientTypeByName; master refused
_SECONDS = re.compile(r"|[\t\n\v\f\r ]*[+-]?[0-9]+")  # strtoll over the whole word (nothing at all is 0)
REPLY_CHUNK_BYTES = 16 * 1024  # PROTO_REPLY_CHUNK_BYTES: the reply buffer every client has before its reply list
UNAUTH_LIMIT = 1024  # bytes of reply list an unauthenticated client may hold (Redis 7.4.3+, 7.2.8+, 8.0.1+)
CLOSING = "Client %s scheduled to be closed ASAP for overcoming of output buffer limits."

Limits = tuple[int, int, int]  # hard bytes, soft bytes, soft seconds


def parse(raw: str) -> dict[str, Limits]:
    """The classes a value sets, as Redis's setConfigClientOutputBufferLimitOption reads them."""
    words = raw.split(" ") if raw else []
    if len(words) % 4:
        raise ConfigError("Wrong number of arguments in buffer limit configuration.")
    limits: dict[str, Limits] = {}
    for index in range(0, len(words), 4):
        name = _NAMES.get(words[index].lower())
        if name is None:
            raise ConfigError("Invalid client class specified in buffer limit configuration.")
        hard, soft = parse_memory(words[index + 1]), parse_memory(words[index + 2])
        seconds = words[index + 3]
        if hard is None or soft is None or not _SECONDS.fullmatch(seconds) or not 0 <= int(seconds or 0) <= INT_MAX:
            raise ConfigError("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
        limits[name] = (hard, soft, int(seconds or 0))
    return limits


def validate(raw: str) -> str:
    """CONFIG SET's check: ConfigError with Redis's reason, else the value as given (merged when stored)."""
    parse(raw)
    return raw


def classes(value: str) -> dict[str, Limits]:
    """The stored (full) value, class by class."""
    return parse(value)


def merge(current: str, value: str) -> str:
    """The stored value after setting `value` (already valid): the classes it names change."""
    limits = classes(current)
    limits.update(parse(value))
    return " ".join(f"{name} {hard} {soft} {seconds}" for name, (hard, soft, seconds) in ((n, limits[n]) for n in CLASSES))


def _memory_text(size: int) -> str:
    """Redis's rewriteConfigFormatMemory: the largest of gb, mb, kb that divides it, else bytes."""
    for unit, scale in (("gb", 1 << 30), ("mb", 1 << 20), ("kb", 1 << 10)):
        if size and size % scale == 0:
            return f"{size // scale}{unit}"
    return str(size)


def rewrite_lines(value: str, existing: int = 0) -> list[str]:
    """CONFIG REWRITE's lines, as Redis's rewriteConfigClientOutputBufferLimitOption: a class off its
    default always, one at its default too while the file had more of these lines to replace
    (`existing`); `replica` for slave, memory in gb/mb/kb where it divides."""
    default = classes(DEFAULT)
    lines = []
    for name, (hard, soft, seconds) in classes(value).items():
        if (hard, soft, seconds) != default[name] or len(lines) < existing:
            label = "replica" if name == "slave" else name
            lines.append(f"client-output-buffer-limit {label} {_memory_text(hard)} {_memory_text(soft)} {seconds}")
    return lines


def client_class(client) -> str:
    """Redis's getClientType for the limits: a replica link, a subscriber, or normal (a primary link too)."""
    if client.replica is not None:
        return "slave"
    if client.channels or client.patterns or client.shard_channels:
        return "pubsub"
    return "normal"


def over_limit(limits: Limits, size: int, state, now: float | None = None) -> bool:
    """Is `size` past the hard limit, or past the soft one for longer than its seconds? `state`
    keeps obuf_soft_since (0: under the soft limit), reset by any look under it, as Redis's."""
    hard, soft, seconds = limits
    if hard and size >= hard:
        return True
    if soft and size >= soft:
        now = time.monotonic() if now is None else now
        if not state.obuf_soft_since:
            state.obuf_soft_since = now
            return False
        return now - state.obuf_soft_since > seconds
    state.obuf_soft_since = 0.0
    return False


def pending_bytes(client) -> int:
    """Reply bytes the client has not read: queued for this turn and held by the transport."""
    transport = client.transport
    queued = sum(map(len, client.output)) if client.output else 0
    return queued + (transport.get_write_buffer_size() if transport is not None else 0)


def close(client, server) -> None:
    """Redis's closeClientOnOutputBufferLimitReached: logged, counted, dropped with what it was owed."""
    from .commands.client import client_info

    log.warning(CLOSING, client_info(client))
    stats = server.stats
    stats["client_output_buffer_limit_disconnections"] = stats.get("client_output_buffer_limit_disconnections", 0) + 1
    client.output = []
    client.pending.clear()
    client.close_after_reply = True
    if client.transport is not None:
        client.transport.abort()


def check(client, server, limits: Limits) -> bool:
    """Close client if its unread replies are past `limits`; True if it was closed."""
    if client.transport is None or not over_limit(limits, pending_bytes(client), client):
        return False
    close(client, server)
    return True


def unauthenticated_over(size: int) -> bool:
    """authRequired(c) && used_mem > 1024: `size` counts every reply byte not yet read."""
    return size - REPLY_CHUNK_BYTES > UNAUTH_LIMIT


def normal_limits(config) -> Limits | None:
    """The normal class's limits, None while both are off (the usual case: nothing to check)."""
    limits = classes(config["client-output-buffer-limit"])["normal"]
    return limits if limits[0] or limits[1] else None


def after_write(client, server) -> None:
    """After a client's replies went to its transport (flush_writes): the unauthenticated rule
    however the replies piled up (many small reads do it as one pipeline does), then its class's
    limits, which bind a client before AUTH too: Redis's checkClientOutputBufferLimits tests
    `used_mem > 1024 && authRequired(c)` first and goes on to the class limits when it is not met."""
    if not client.authenticated and unauthenticated_over(pending_bytes(client)):
        close(client, server)
        return
    limits = server.normal_output_limits
    if limits is not None and client_class(client) == "normal":
        check(client, server, limits)


def cron(server) -> None:
    """Redis's clientsCron look at each client: a soft limit runs out on a client no reply reaches."""
    limits = server.normal_output_limits
    if limits is None or not limits[1]:
        return
    for client in list(server.clients.values()):
        if client.obuf_soft_since and client_class(client) == "normal":
            check(client, server, limits)
