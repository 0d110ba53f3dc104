"""Pub/Sub state: who listens to which channel or pattern, and delivery to them.

As Redis's pubsub.c: a server-wide map of channel -> subscribers and pattern ->
subscribers (insertion-ordered, so PUBLISH delivers in subscription order),
mirrored on each client as its own channels and patterns. Shard channels
(SSUBSCRIBE, SPUBLISH: Redis's pubsubshard_channels) are a third map, apart from
both: a standalone Redis checks no slots, a shard message (`smessage`) reaches
only that channel's shard subscribers, and keyspace events never go there. A
message is encoded
once per protocol version and queued on each receiver like any reply; a
subscriber whose unread output passes `client-output-buffer-limit pubsub` is
dropped as Redis's checkClientOutputBufferLimits drops it.

Keyspace notifications (notify.c) are publishes too: `notify` builds the
`__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>` messages for the
classes `notify-keyspace-events` enables.
"""

from __future__ import annotations

import logging

from storage.glob import compile_pattern

log = logging.getLogger("millrace")

# Keyspace event classes, Redis's NOTIFY_* bits by their notify-keyspace-events characters.
NOTIFY_KEYSPACE, NOTIFY_KEYEVENT = 1, 2
NOTIFY_CLASSES = {"K": 1, "E": 2, "g": 4, "$": 8, "l": 16, "s": 32, "h": 64, "z": 128, "x": 256, "e": 512,
                  "n": 1024, "t": 2048, "m": 4096, "d": 8192, "o": 16384, "c": 32768}
NOTIFY_ALL = sum(NOTIFY_CLASSES[c] for c in "g$lshzxetd")
GENERIC, STRING, EXPIRED, NEW, STREAM, KEY_MISS, OVERWRITTEN, TYPE_CHANGED = (NOTIFY_CLASSES[c] for c in "g$xntmoc")


def notify_flags(text: str) -> int:
    """notify-keyspace-events as Redis's keyspaceEventsStringToFlags reads it (already validated);
    the classes it was set with where the printed form lost some (config.NotifyClasses)."""
    flags = 0
    for char in getattr(text, "classes", text):
        flags |= NOTIFY_ALL if char == "A" else NOTIFY_CLASSES.get(char, 0)
    return flags


def _message(channel: bytes, message: bytes) -> tuple[bytes, bytes]:
    """A message's RESP2 array and RESP3 push form (they differ in the first byte only)."""
    array = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(channel), channel, len(message), message)
    return array, b">" + array[1:]


def _smessage(channel: bytes, message: bytes) -> tuple[bytes, bytes]:
    array = b"*3\r\n$8\r\nsmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (len(channel), channel, len(message), message)
    return array, b">" + array[1:]


def _pmessage(pattern: bytes, channel: bytes, message: bytes) -> tuple[bytes, bytes]:
    array = b"*4\r\n$8\r\npmessage\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n" % (
        len(pattern), pattern, len(channel), channel, len(message), message)
    return array, b">" + array[1:]


class PubSub:
    """Channel and pattern subscriptions of all clients: `server.pubsub`."""

    __slots__ = ("server", "channels", "patterns", "shard_channels", "matchers", "flags", "active", "output_limits", "to_check")

    def __init__(self, server) -> None:
        self.server = server
        self.channels: dict[bytes, dict] = {}  # channel -> {client: None}, in subscription order
        self.patterns: dict[bytes, dict] = {}  # pattern -> {client: None}
        self.shard_channels: dict[bytes, dict] = {}  # shard channel -> {client: None} (no keyspace events here)
        self.matchers: dict[bytes, object] = {}  # pattern -> its compiled glob
        self.flags = notify_flags(server.config["notify-keyspace-events"])
        self.active = 0  # `flags` while anyone is subscribed, else 0: commands skip their events then
        self.output_limits = self.limits()
        self.to_check: set = set()  # subscribers sent messages this loop turn: their output is checked once

    def config_changed(self, name: str) -> None:
        """CONFIG SET of a parameter read here: cached, as reading it per message would cost."""
        if name == "notify-keyspace-events":
            self.flags = notify_flags(self.server.config[name])
            self.update_active()
        elif name == "client-output-buffer-limit":
            self.output_limits = self.limits()

    def update_active(self) -> None:
        """Events go nowhere while nobody is subscribed: working them out can wait until someone is."""
        self.active = self.flags if self.channels or self.patterns else 0

    # -- subscriptions -------------------------------------------------------------

    def subscribe(self, client, channel: bytes) -> bool:
        """Add a subscription; False if client already had it."""
        if channel in client.channels:
            return False
        client.channels[channel] = None
        if not self.channels and not self.patterns:
            self.active = self.flags
        self.channels.setdefault(channel, {})[client] = None
        client.update_subscribed()
        return True

    def unsubscribe(self, client, channel: bytes) -> bool:
        if client.channels.pop(channel, 0) is not None:
            return False
        subscribers = self.channels[channel]
        del subscribers[client]
        if not subscribers:
            del self.channels[channel]
            self.update_active()
        client.update_subscribed()
        return True

    def psubscribe(self, client, pattern: bytes) -> bool:
        if pattern in client.patterns:
            return False
        client.patterns[pattern] = None
        if not self.channels and not self.patterns:
            self.active = self.flags
        subscribers = self.patterns.get(pattern)
        if subscribers is None:
            subscribers = self.patterns[pattern] = {}
            self.matchers[pattern] = compile_pattern(pattern)
        subscribers[client] = None
        client.update_subscribed()
        return True

    def punsubscribe(self, client, pattern: bytes) -> bool:
        if client.patterns.pop(pattern, 0) is not None:
            return False
        subscribers = self.patterns[pattern]
        del subscribers[client]
        if not subscribers:
            del self.patterns[pattern]
            del self.matchers[pattern]
            self.update_active()
        client.update_subscribed()
        return True

    def ssubscribe(self, client, channel: bytes) -> bool:
        """A shard channel subscription; False if client already had it."""
        if channel in client.shard_channels:
            return False
        client.shard_channels[channel] = None
        self.shard_channels.setdefault(channel, {})[client] = None
        client.update_subscribed()
        return True

    def sunsubscribe(self, client, channel: bytes) -> bool:
        if client.shard_channels.pop(channel, 0) is not None:
            return False
        subscribers = self.shard_channels[channel]
        del subscribers[client]
        if not subscribers:
            del self.shard_channels[channel]
        client.update_subscribed()
        return True

    def drop(self, client) -> None:
        """A client leaves (disconnect, RESET): its subscriptions go, with no replies."""
        for channel in list(client.channels):
            self.unsubscribe(client, channel)
        for pattern in list(client.patterns):
            self.punsubscribe(client, pattern)
        for channel in list(client.shard_channels):
            self.sunsubscribe(client, channel)

    # -- delivery --------------------------------------------------------------------

    def publish(self, channel: bytes, message: bytes) -> int:
        """Deliver to the channel's subscribers, then to matching patterns' (Redis's order); the receiver count."""
        receivers = 0
        subscribers = self.channels.get(channel)
        if subscribers:
            self.deliver(subscribers, _message(channel, message))
            receivers += len(subscribers)
        if self.patterns:
            matchers = self.matchers
            for pattern, subscribers in self.patterns.items():
                if matchers[pattern](channel):
                    self.deliver(subscribers, _pmessage(pattern, channel, message))
                    receivers += len(subscribers)
        return receivers

    def spublish(self, channel: bytes, message: bytes) -> int:
        """SPUBLISH: to the shard channel's subscribers only (no pattern sees it); the receiver count."""
        subscribers = self.shard_channels.get(channel)
        if not subscribers:
            return 0
        self.deliver(subscribers, _smessage(channel, message))
        return len(subscribers)

    def deliver(self, subscribers, forms: tuple[bytes, bytes]) -> None:
        """Queue a message on each subscriber as a reply; their output is checked against the limits
        once this turn's replies are written (Redis checks at each reply: here a turn may overshoot)."""
        to_check = self.to_check
        limited = self.output_limits[0] or self.output_limits[1]
        caller = self.server.caller
        for client in subscribers:
            if client.transport is None:
                continue
            # its own PUBLISH (or write's event): after the command's reply, as Redis
            client.push(forms[client.resp == 3], client is caller)
            if limited and client not in to_check:
                if not to_check:
                    self.server.loop.call_soon(self.check_output_limits)
                to_check.add(client)

    def check_output_limits(self) -> None:
        """After the turn's writes (flush_writes was queued before this): the subscribers' unread output."""
        clients, self.to_check = self.to_check, set()
        for client in clients:
            if client.transport is not None:
                self.check_output_limit(client)

    def check_output_limit(self, client) -> None:
        """client-output-buffer-limit pubsub: drop a subscriber whose unread output passes the hard
        limit, or stays over the soft limit past its seconds (Redis's checkClientOutputBufferLimits)."""
        from .output_limits import check

        if check(client, self.server, self.output_limits):
            self.drop(client)

    def limits(self) -> tuple[int, int, int]:
        """client-output-buffer-limit's pubsub class: hard and soft bytes, soft seconds."""
        from .output_limits import classes

        return classes(self.server.config["client-output-buffer-limit"])["pubsub"]

    # -- keyspace notifications --------------------------------------------------------

    def notify(self, cls: int, event: str, key: bytes, db: int) -> None:
        """Redis's notifyKeyspaceEvent: publish the event if its class is enabled."""
        flags = self.flags
        if not flags & cls:
            return
        if flags & NOTIFY_KEYSPACE:
            self.publish(b"__keyspace@%d__:%s" % (db, key), event.encode())
        if flags & NOTIFY_KEYEVENT:
            self.publish(b"__keyevent@%d__:%s" % (db, event.encode()), key)
