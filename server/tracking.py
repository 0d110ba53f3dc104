"""Client-side caching: the tracking table and invalidation delivery (Redis's tracking.c).

A client that turned `CLIENT TRACKING ON` has the keys of its read-only commands remembered in
one server-wide table, key -> ids of the clients that may cache it (the table knows no database,
as Redis's). The first modification of such a key (a write's effect, an expiry, a flush) sends
each of them one invalidation and forgets the key. In BCAST mode nothing is remembered: every
modified key matching a client's prefixes is collected and sent once per event-loop turn (Redis's
beforeSleep trackingBroadcastInvalidationMessages).

Delivery is a RESP3 push `>2 invalidate [keys]` (`_` or `$-1` for a flush), or with REDIRECT the
same push to the other client, or a `__redis__:invalidate` message when that client is a RESP2
subscriber. Ordering follows Redis: the invalidations a client's own command causes follow its
reply (Redis's tracking_pending_keys), except a top-level synchronous flush's, which precede it
(Redis 8 runs FLUSHALL/FLUSHDB SYNC in a background job and replies when it ends).

`Server.tracking` is None until a client first enables tracking (Redis's TrackingTable == NULL),
so a server where nobody tracks pays one attribute check per command.
"""

from __future__ import annotations

import random

from protocol.errors import SYNTAX, ReplyError, arg_text
from protocol.reply import Raw

INVALIDATE = b">2\r\n$10\r\ninvalidate\r\n"
MESSAGE = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n"  # TrackingChannelName, RESP2 subscriber
NULLS = (b"", b"", b"$-1\r\n", b"_\r\n")  # shared.null by the *tracking* client's protocol, as Redis sends it


class ClientTracking:
    """One client's tracking state: Redis's CLIENT_TRACKING_* flags, redirection and BCAST prefixes."""

    __slots__ = ("redirect", "bcast", "optin", "optout", "noloop", "caching", "broken_redir", "prefixes")

    def __init__(self, redirect: int) -> None:
        self.redirect = redirect  # client_tracking_redirection: 0 for none
        self.bcast = self.optin = self.optout = self.noloop = False
        self.caching = False  # CLIENT CACHING given for the next command (CLIENT_TRACKING_CACHING)
        self.broken_redir = False  # an invalidation found the redirect client gone (flag R)
        self.prefixes: dict[bytes, None] = {}  # client_tracking_prefixes (BCAST)

    def flags(self) -> list[bytes]:
        """CLIENT TRACKINGINFO's flags, in Redis's order."""
        out = [b"on"]
        if self.bcast:
            out.append(b"bcast")
        if self.optin:
            out.append(b"optin")
            if self.caching:
                out.append(b"caching-yes")
        if self.optout:
            out.append(b"optout")
            if self.caching:
                out.append(b"caching-no")
        if self.noloop:
            out.append(b"noloop")
        if self.broken_redir:
            out.append(b"broken_redirect")
        return out


class BcastState:
    """A prefix's keys modified this loop turn (with their last modifier, for NOLOOP) and its clients."""

    __slots__ = ("keys", "clients")

    def __init__(self) -> None:
        self.keys: dict[bytes, object] = {}
        self.clients: dict[object, None] = {}


class Tracking:
    """The server-wide tables: `server.tracking` once any client has enabled tracking."""

    __slots__ = ("server", "table", "total_items", "prefix_table", "tracking_clients", "broadcast_scheduled", "before_reply")

    def __init__(self, server) -> None:
        self.server = server
        self.table: dict[bytes, dict[int, None]] = {}  # TrackingTable: key -> ids of clients caching it
        self.total_items = 0  # TrackingTableTotalItems: (key, client) pairs
        self.prefix_table: dict[bytes, BcastState] = {}  # PrefixTable
        self.tracking_clients = 0  # server.tracking_clients
        self.broadcast_scheduled = False
        self.before_reply: list[bytes] = []  # messages for the running client that precede its reply

    # -- enabling ------------------------------------------------------------------

    def enable(self, client, redirect: int, bcast: bool, optin: bool, optout: bool, noloop: bool, prefixes: list[bytes]) -> None:
        """Redis's enableTracking: flags are replaced, BCAST prefixes added to those the client has."""
        state = client.tracking
        if state is None:
            self.tracking_clients += 1
            state = client.tracking = ClientTracking(redirect)
        state.redirect = redirect
        state.broken_redir = False
        state.bcast, state.optin, state.optout, state.noloop = bcast, optin, optout, noloop
        if bcast:
            for prefix in prefixes or [b""]:
                bs = self.prefix_table.get(prefix)
                if bs is None:
                    bs = self.prefix_table[prefix] = BcastState()
                if client not in bs.clients:
                    bs.clients[client] = None
                    state.prefixes[prefix] = None

    def disable(self, client) -> None:
        """Redis's disableTracking (CLIENT TRACKING OFF, RESET, disconnection): the keys it read stay
        in the table until modified, as in Redis; its BCAST prefixes go."""
        state = client.tracking
        if state is None:
            return
        for prefix in state.prefixes:
            bs = self.prefix_table.get(prefix)
            if bs is not None:
                bs.clients.pop(client, None)
                if not bs.clients:
                    del self.prefix_table[prefix]
        client.tracking = None
        self.tracking_clients -= 1
        if not self.tracking_clients and not self.prefix_table:
            # The last tracking client went: every hook's cost goes with the state (Server's hooks test
            # `tracking is not None`). Redis keeps the keys its table remembers until they change, so its
            # tracking_total_keys can stay above 0 with nobody tracking; here it is 0.
            self.server.tracking = None

    # -- after each command ----------------------------------------------------------

    def after_call(self, client, cmd, argv: list[bytes], result):
        """Server.call's hook: remember a read's keys (trackingRememberKeys), end a one-shot CLIENT
        CACHING (resetClient), turn tracking off on RESET, and put messages due before the reply first."""
        state = client.tracking
        if state is not None:
            if "readonly" in cmd.flags and not state.bcast and not client.loading:
                if not ((state.optin and not state.caching) or (state.optout and state.caching)):
                    self.remember_keys(client, cmd.get_keys(argv))
            if not client.in_exec:
                if cmd.name == "reset":
                    self.disable(client)
                elif state.caching and client.multi is None and not cmd.name.startswith("client|"):
                    state.caching = False
        if self.before_reply and type(result) is not object:  # not BLOCKED (a bare object())
            before, self.before_reply = self.before_reply, []
            out: list[bytes] = []
            client.encode(result, out)
            return Raw(b"".join(before) + b"".join(out))
        return result

    def rejected(self, client, cmd) -> None:
        """A command refused before it ran still ends a one-shot CLIENT CACHING (Redis's resetClient),
        unless it is a CLIENT subcommand or the client is in MULTI."""
        state = client.tracking
        if state is not None and state.caching and client.multi is None and not (cmd is not None and cmd.name.startswith("client|")):
            state.caching = False

    def remember_keys(self, client, keys: list[bytes]) -> None:
        table, cid = self.table, client.id
        for key in keys:
            ids = table.get(key)
            if ids is None:
                ids = table[key] = {}
            if cid not in ids:
                ids[cid] = None
                self.total_items += 1
        limit = self.server.config["tracking-table-max-keys"]
        if limit and len(table) > limit:
            self.limit_used_slots(limit)

    def limit_used_slots(self, limit: int) -> None:
        """Redis's trackingLimitUsedSlots: over tracking-table-max-keys, invalidate random keys until under."""
        excess = len(self.table) - limit
        if excess > 0:  # at most 100 a call, as Redis's effort; one sample, not a list of the table per key
            for key in random.sample(list(self.table), min(excess, 100)):
                self.invalidate_key(key, bcast=False)

    # -- invalidation ------------------------------------------------------------------

    def invalidate_key(self, key: bytes, bcast: bool = True) -> None:
        """Redis's trackingInvalidateKey, for each key signalModifiedKey names."""
        server = self.server
        caller = server.caller
        if bcast and self.prefix_table:
            scheduled = False
            for prefix, bs in self.prefix_table.items():
                if key.startswith(prefix):
                    bs.keys[key] = caller
                    scheduled = True
            if scheduled and not self.broadcast_scheduled and server.loop is not None:
                self.broadcast_scheduled = True
                server.loop.call_soon(self.broadcast)
        ids = self.table.pop(key, None)
        if ids is None:
            return
        self.total_items -= len(ids)
        payload = b"*1\r\n$%d\r\n%b\r\n" % (len(key), key)
        clients = server.clients
        for cid in ids:
            target = clients.get(cid)
            if target is None or target.tracking is None or target.tracking.bcast:
                continue
            if target is caller:
                if target.tracking.noloop:
                    continue
                self.send(target, payload, pending=True)
            else:
                self.send(target, payload)

    def invalidate_on_flush(self, client, argv: list[bytes]) -> None:
        """Redis's trackingInvalidateKeysOnFlush (FLUSHDB and FLUSHALL, whatever they emptied; and with no
        client, emptyData: a replica's full sync, DEBUG RELOAD): a null invalidation to every tracking
        client, NOLOOP or not, and the table is emptied."""
        server = self.server
        caller = server.caller
        if self.tracking_clients:
            if client is None:
                pending = False  # emptyData is synchronous
            else:
                mode = argv[1].lower() if len(argv) > 1 else (b"async" if server.config["lazyfree-lazy-user-flush"] else b"sync")
                # a top-level SYNC flush replies after its background job: its own client hears first
                pending = client.in_exec or mode == b"async"
            for target in list(server.clients.values()):
                if target.tracking is not None:
                    null = NULLS[target.resp]
                    if target is caller:
                        self.send(target, null, pending=pending, before=not pending)
                    else:
                        self.send(target, null)
        self.table = {}
        self.total_items = 0

    def send(self, client, payload: bytes, pending: bool = False, before: bool = False) -> None:
        """Redis's sendTrackingMessage: `payload` is the keys part, already encoded."""
        state = client.tracking
        target = client
        if state.redirect:
            target = self.server.clients.get(state.redirect)
            if target is None or target.transport is None:
                state.broken_redir = True
                if client.resp == 3:
                    self.deliver(client, b">2\r\n$21\r\ntracking-redir-broken\r\n:%d\r\n" % state.redirect, pending, before)
                return
            if target.resp == 3:
                data = INVALIDATE + payload
            elif target.channels or target.patterns or target.shard_channels:  # Redis: any subscription (CLIENT_PUBSUB)
                data = MESSAGE + payload
            else:
                return
        elif client.resp == 3:
            data = INVALIDATE + payload
        else:
            return  # RESP2 without REDIRECT: nowhere to send it, as in Redis
        self.deliver(target, data, pending, before)

    def deliver(self, target, data: bytes, pending: bool, before: bool) -> None:
        """Into target's output; for the running client after its reply (pending) or before it."""
        caller = target is self.server.caller
        if caller and (before or not pending):
            self.before_reply.append(data)
        else:
            target.push(data, caller)

    # -- BCAST ---------------------------------------------------------------------------

    def broadcast(self) -> None:
        """Redis's trackingBroadcastInvalidationMessages: per prefix, its keys of this turn in order."""
        self.broadcast_scheduled = False
        caller, self.server.caller = self.server.caller, None
        try:
            for prefix in sorted(self.prefix_table):
                bs = self.prefix_table[prefix]
                if not bs.keys:
                    continue
                keys, bs.keys = bs.keys, {}
                ordered = sorted(keys)
                common = _keys_reply(ordered)
                for client in list(bs.clients):
                    if client.tracking is None:
                        continue
                    if client.tracking.noloop:
                        own = [key for key in ordered if keys[key] is not client]
                        if own:
                            self.send(client, _keys_reply(own))
                    else:
                        self.send(client, common)
        finally:
            self.server.caller = caller


def _keys_reply(keys: list[bytes]) -> bytes:
    return b"*%d\r\n" % len(keys) + b"".join(b"$%d\r\n%b\r\n" % (len(key), key) for key in keys)


def tracking_command(ctx, argv: list[bytes]) -> None:
    """CLIENT TRACKING's parsing and checks, in Redis's order; raises Redis's errors.

    Returns the error text Redis sends *before* its OK when a later prefix overlaps a later one
    (checkPrefixCollisionsOrReply returns the index, which is true past the first), else None."""
    server = ctx.server
    redirect = 0
    bcast = optin = optout = noloop = False
    prefixes: list[bytes] = []
    index = 3
    while index < len(argv):
        option = argv[index].lower()
        more = index + 1 < len(argv)
        if option == b"redirect" and more:
            index += 1
            if redirect:
                raise ReplyError("ERR A client can only redirect to a single other client")
            from .commands.args import to_int  # (commands import this module)

            redirect = to_int(argv[index])
            if redirect not in server.clients:
                raise ReplyError("ERR The client ID you want redirect to does not exist")
        elif option == b"bcast":
            bcast = True
        elif option == b"optin":
            optin = True
        elif option == b"optout":
            optout = True
        elif option == b"noloop":
            noloop = True
        elif option == b"prefix" and more:
            index += 1
            prefixes.append(argv[index])
        else:
            raise ReplyError(SYNTAX)
        index += 1
    mode = argv[2].lower()
    if mode == b"off":
        if server.tracking is not None:
            server.tracking.disable(ctx)
        return None
    if mode != b"on":
        raise ReplyError(SYNTAX)
    state = ctx.tracking
    if not bcast and prefixes:
        raise ReplyError("ERR PREFIX option requires BCAST mode to be enabled")
    if state is not None and state.bcast != bcast:
        raise ReplyError(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, "
            "and then re-enabling it with a different mode."
        )
    if bcast and (optin or optout):
        raise ReplyError("ERR OPTIN and OPTOUT are not compatible with BCAST")
    if optin and optout:
        raise ReplyError("ERR You can't specify both OPTIN mode and OPTOUT mode")
    if state is not None and ((optin and state.optout) or (optout and state.optin)):
        raise ReplyError(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, "
            "and then re-enabling it with a different mode."
        )
    late_error = None
    if bcast:
        late_error = _prefix_collision(state.prefixes if state is not None else {}, prefixes)
    if server.tracking is None:
        server.tracking = Tracking(server)
    server.tracking.enable(ctx, redirect, bcast, optin, optout, noloop, prefixes)
    return late_error


def _prefix_collision(existing: dict[bytes, None], prefixes: list[bytes]) -> str | None:
    """Redis's checkPrefixCollisionsOrReply: an overlap with an existing prefix, or between the first
    given prefix and a later one, is an error; between two later ones Redis replies the error and
    goes on (it returns the index as its success flag), which is returned here."""
    for i, prefix in enumerate(prefixes):
        for old in existing:
            if old.startswith(prefix) or prefix.startswith(old):
                raise ReplyError(
                    f"ERR Prefix '{_text(prefix)}' overlaps with an existing prefix '{_text(old)}'. "
                    "Prefixes for a single client must not overlap."
                )
        for other in prefixes[i + 1:]:
            if other.startswith(prefix) or prefix.startswith(other):
                message = (
                    f"ERR Prefix '{_text(prefix)}' overlaps with another provided prefix '{_text(other)}'. "
                    "Prefixes for a single client must not overlap."
                )
                if i == 0:
                    raise ReplyError(message)
                return message
    return None


def _text(arg: bytes) -> str:
    return arg_text(arg.partition(b"\0")[0])  # '%s' of the C string
