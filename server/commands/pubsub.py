"""Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, PUBSUB, and the
shard channel ones, SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH.

(Un)subscribe confirmations are one reply per channel, as Redis sends them: a
RESP2 array or a RESP3 push (`>`), so a subscribing command answers with
several replies, pre-encoded for its connection. Their count is the client's
channels and patterns, or for the shard commands its shard channels alone
(Redis's subscriptionCount of each pubSubType). PUBLISH and SPUBLISH are no
writes (they change no key), yet Redis sends them to replicas (not to the AOF):
they go out through `Server.propagate_replicas`.

The shard commands declare their channels as Redis's key specs do (NOT_KEY), so
COMMAND INFO shows their positions; no key is looked up, so no keymiss event.
"""

from __future__ import annotations

from protocol.errors import ReplyError, arg_text
from protocol.reply import Push, Raw

from ..client import ON
from ..command import command, container
from ..notify import KEYMISS_LOOKUPS
from .args import help_reply
from .introspection import KEY_SPECS


def _confirm(ctx, out: list[bytes], kind: bytes, name: bytes | None, count: int | None = None) -> None:
    """One confirmation: [kind, channel or pattern, the client's subscription count] (channels and
    patterns; `count` for the shard commands, which count shard channels alone)."""
    ctx.encode(Push([kind, name, len(ctx.channels) + len(ctx.patterns) if count is None else count]), out)


def _confirmations(ctx, out: list[bytes]):
    """The reply; under CLIENT REPLY OFF or SKIP still sent, in the dropped reply's place: Redis
    writes confirmations as pushes, which those modes do not silence."""
    if ctx.reply_mode is ON:
        return Raw(b"".join(out))
    ctx.pushes = out if ctx.pushes is None else ctx.pushes + out
    return None


def _check_deny(ctx, name: str) -> None:
    """Redis refuses a subscription from a client that may not block (a loader, a primary's stream); MULTI may."""
    if ctx.loading:
        raise ReplyError(f"ERR {name} isn't allowed for a DENY BLOCKING client")


@command("subscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         summary="Listens for messages published to channels.",
         complexity="O(N) where N is the number of channels to subscribe to.")
def subscribe(ctx, argv):
    """SUBSCRIBE channel [channel ...]"""
    _check_deny(ctx, "SUBSCRIBE")
    pubsub, out = ctx.server.pubsub, []
    for channel in argv[1:]:
        pubsub.subscribe(ctx, channel)
        _confirm(ctx, out, b"subscribe", channel)
    return _confirmations(ctx, out)


@command("psubscribe", -2, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         summary="Listens for messages published to channels that match one or more patterns.",
         complexity="O(N) where N is the number of patterns to subscribe to.")
def psubscribe(ctx, argv):
    """PSUBSCRIBE pattern [pattern ...]"""
    _check_deny(ctx, "PSUBSCRIBE")
    pubsub, out = ctx.server.pubsub, []
    for pattern in argv[1:]:
        pubsub.psubscribe(ctx, pattern)
        _confirm(ctx, out, b"psubscribe", pattern)
    return _confirmations(ctx, out)


@command("unsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         summary="Stops listening to messages posted to channels.",
         complexity="O(N) where N is the number of channels to unsubscribe.")
def unsubscribe(ctx, argv):
    """UNSUBSCRIBE [channel ...]: none named is all of them (one reply with a nil channel if there are none)."""
    pubsub, out = ctx.server.pubsub, []
    channels = argv[1:] or list(ctx.channels)
    for channel in channels:
        pubsub.unsubscribe(ctx, channel)
        _confirm(ctx, out, b"unsubscribe", channel)
    if not channels:
        _confirm(ctx, out, b"unsubscribe", None)
    return _confirmations(ctx, out)


@command("punsubscribe", -1, "pubsub noscript loading stale", group="pubsub", since="2.0.0",
         summary="Stops listening to messages published to channels that match one or more patterns.",
         complexity="O(N) where N is the number of patterns to unsubscribe.")
def punsubscribe(ctx, argv):
    """PUNSUBSCRIBE [pattern ...]"""
    pubsub, out = ctx.server.pubsub, []
    patterns = argv[1:] or list(ctx.patterns)
    for pattern in patterns:
        pubsub.punsubscribe(ctx, pattern)
        _confirm(ctx, out, b"punsubscribe", pattern)
    if not patterns:
        _confirm(ctx, out, b"punsubscribe", None)
    return _confirmations(ctx, out)


@command("publish", 3, "pubsub loading stale fast", group="pubsub", since="2.0.0",
         summary="Posts a message to a channel.",
         complexity="O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client).")
def publish(ctx, argv):
    """PUBLISH channel message -> the number of clients that received it."""
    server = ctx.server
    receivers = server.pubsub.publish(argv[1], argv[2])
    server.propagate_replicas([[b"PUBLISH", argv[1], argv[2]]])
    return receivers


@command("ssubscribe", -2, "pubsub noscript loading stale", keys=(1, -1, 1), group="pubsub", since="7.0.0",
         summary="Listens for messages published to shard channels.",
         complexity="O(N) where N is the number of shard channels to subscribe to.")
def ssubscribe(ctx, argv):
    """SSUBSCRIBE shardchannel [shardchannel ...]: standalone, so channels of any slots together (no CROSSSLOT)."""
    if ctx.loading or ctx.in_exec:  # Redis's ssubscribeCommand makes no exception for MULTI
        raise ReplyError("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client")
    pubsub, out, shard = ctx.server.pubsub, [], ctx.shard_channels
    for channel in argv[1:]:
        pubsub.ssubscribe(ctx, channel)
        _confirm(ctx, out, b"ssubscribe", channel, len(shard))
    return _confirmations(ctx, out)


@command("sunsubscribe", -1, "pubsub noscript loading stale", keys=(1, -1, 1), group="pubsub", since="7.0.0",
         summary="Stops listening to messages posted to shard channels.",
         complexity="O(N) where N is the number of shard channels to unsubscribe.")
def sunsubscribe(ctx, argv):
    """SUNSUBSCRIBE [shardchannel [shardchannel ...]]: none named is all of them."""
    pubsub, out, shard = ctx.server.pubsub, [], ctx.shard_channels
    channels = argv[1:] or list(shard)
    for channel in channels:
        pubsub.sunsubscribe(ctx, channel)
        _confirm(ctx, out, b"sunsubscribe", channel, len(shard))
    if not channels:
        _confirm(ctx, out, b"sunsubscribe", None, 0)
    return _confirmations(ctx, out)


@command("spublish", 3, "pubsub loading stale fast", keys=(1, 1, 1), group="pubsub", since="7.0.0",
         summary="Post a message to a shard channel",
         complexity="O(N) where N is the number of clients subscribed to the receiving shard channel.")
def spublish(ctx, argv):
    """SPUBLISH shardchannel message -> the number of clients that received it; replicas get it as PUBLISH's."""
    server = ctx.server
    receivers = server.pubsub.spublish(argv[1], argv[2])
    server.propagate_replicas([[b"SPUBLISH", argv[1], argv[2]]])
    return receivers


# Redis's key specs of the shard commands: the channels, flagged NOT_KEY (COMMAND GETKEYS finds none).
_NOT_KEY_ALL = ((("not_key",), 1, (-1, 1, 0), None),)
KEY_SPECS.update(ssubscribe=_NOT_KEY_ALL, sunsubscribe=_NOT_KEY_ALL, spublish=((("not_key",), 1, (0, 1, 0), None),))
KEYMISS_LOOKUPS.update(ssubscribe=0, sunsubscribe=0, spublish=0)  # channels, never looked up as keys


container("pubsub", group="pubsub", summary="A container for Pub/Sub commands.", since="2.8.0")

PUBSUB_HELP = (
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Print this help.",
)


def _syntax(argv: list[bytes]) -> ReplyError:
    """Redis's addReplySubcommandSyntaxError, the subcommand as sent."""
    return ReplyError(f"ERR unknown subcommand or wrong number of arguments for '{arg_text(argv[1][:128])}'. Try PUBSUB HELP.")


def _active(channels, argv: list[bytes]) -> list[bytes]:
    from storage.glob import compile_pattern

    if len(argv) == 2:
        return list(channels)
    match = compile_pattern(argv[2])
    return [channel for channel in channels if match(channel)]


@command("pubsub|channels", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="Returns the active channels.",
         complexity="O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)")
def pubsub_channels(ctx, argv):
    """PUBSUB CHANNELS [pattern]"""
    if len(argv) > 3:
        raise _syntax(argv)
    return _active(ctx.server.pubsub.channels, argv)


@command("pubsub|numsub", -2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="Returns a count of subscribers to channels.",
         complexity="O(N) for the NUMSUB subcommand, where N is the number of requested channels")
def pubsub_numsub(ctx, argv):
    """PUBSUB NUMSUB [channel ...] -> channel, count, ... (a flat array, as Redis's in both protocols)"""
    channels = ctx.server.pubsub.channels
    reply: list = []
    for channel in argv[2:]:
        reply += [channel, len(channels.get(channel, ()))]
    return reply


@command("pubsub|numpat", 2, "pubsub loading stale", group="pubsub", since="2.8.0",
         summary="Returns a count of unique pattern subscriptions.")
def pubsub_numpat(ctx, argv):
    """PUBSUB NUMPAT: patterns with at least one subscriber (Redis counts distinct patterns)."""
    return len(ctx.server.pubsub.patterns)


@command("pubsub|shardchannels", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         summary="Returns the active shard channels.",
         complexity="O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels).")
def pubsub_shardchannels(ctx, argv):
    """PUBSUB SHARDCHANNELS [pattern]"""
    if len(argv) > 3:
        raise _syntax(argv)
    return _active(ctx.server.pubsub.shard_channels, argv)


@command("pubsub|shardnumsub", -2, "pubsub loading stale", group="pubsub", since="7.0.0",
         summary="Returns the count of subscribers of shard channels.",
         complexity="O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels")
def pubsub_shardnumsub(ctx, argv):
    """PUBSUB SHARDNUMSUB [shardchannel ...] -> shardchannel, count, ... (a flat array, as NUMSUB's)"""
    channels = ctx.server.pubsub.shard_channels
    reply: list = []
    for channel in argv[2:]:
        reply += [channel, len(channels.get(channel, ()))]
    return reply


@command("pubsub|help", 2, "loading stale", group="pubsub", since="6.2.0",
         summary="Returns helpful text about the different subcommands.")
def pubsub_help(ctx, argv):
    """PUBSUB HELP"""
    return help_reply(PUBSUB_HELP)
