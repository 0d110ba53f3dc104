"""One client connection: the asyncio Protocol and the context handlers receive.

The hot path stays flat, as uvicorn's does: parse what arrived, execute each
command (a read of one request, the usual read of a request/reply client,
skips the batch loop), encode each reply into one list, and queue it; the server writes each
client's queued replies once per event-loop turn, after all reads (Redis's
beforeSleep), so one wake-up of a client carries every reply it is owed.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from collections import deque
from time import perf_counter
from time import time_ns as _time_ns

from protocol.encoder import encode2, encode3
from protocol.errors import ProtocolError
from protocol.reader import UNAUTH_MAX_ARGS, RequestBounds, RequestReader, unauthenticated_error
from protocol.reply import OK, PONG, QUEUED, Error, Raw, Simple

from . import output_limits
from .process import VERBOSE
from .protected import DENIED, denied
from .server import BLOCKED, Server

_STATUS = {status: b"+%s\r\n" % status for status in (OK, PONG, QUEUED)}  # the usual status replies, encoded once
_BULK = [b"$%d\r\n" % size for size in range(64)]  # bulk string headers: concatenation is cheaper than % formatting
_NIL = (b"", b"", b"$-1\r\n", b"_\r\n")  # None by protocol version, as encode2 and encode3 write it
ON, OFF, SKIP = "on", "off", "skip"  # CLIENT REPLY modes, compared by identity
SKIP_NEXT = "skip-next"  # CLIENT REPLY SKIP itself: its own reply is dropped, then the next one
# An HTTP request line and header where a command is due: a web page talking to the server
# (cross protocol scripting). Never commands, so looked for only on the path of unknown names.
CROSS_PROTOCOL = (b"post", b"host:")
SECURITY_ATTACK = (
    "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or Host: commands to Redis. "
    "This is likely due to an attacker attempting to use Cross Protocol Scripting to compromise your Redis instance. "
    "Connection aborted."
)
# One client's commands run at most this long before the others' events are served (a slice
# ends after the command that passes it): Redis gets the same from reading 16 KB per event.
SLICE_SECONDS = 0.005
log = logging.getLogger("millrace")
_AUTH_OR_HELLO = re.compile(rb"(?i)auth|hello")  # where a request may be one that authenticates
_attack_logged = -61.0  # monotonic time of the last SECURITY_ATTACK line: one a minute at most, as Redis logs it


def keep_alive(sock, interval: int) -> None:
    """tcp-keepalive, as Redis's anetKeepAlive: probes after `interval` idle seconds, then every third of
    it, three unanswered ones closing the link, so a peer that vanished frees its client."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):  # (Linux; elsewhere the system's timers apply)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, interval)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, max(interval // 3, 1))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)


class Client(asyncio.Protocol):
    """Connection state: Redis's `client` struct, passed to handlers as `ctx`."""

    # Slots, not an instance dict: the request path reads and writes these on every
    # command, and CPython 3.11 keeps at most 30 attributes in its fast dict-less
    # layout (a Client has more, which made each access a dict operation).
    __slots__ = (
        "server", "transport", "reader", "id", "name", "lib_name", "lib_ver", "db", "resp", "encode",
        "authenticated", "logged_in", "multi", "multi_error", "in_exec", "loading", "watched", "dirty_cas", "blocked",
        "pending", "reply_mode", "close_after_reply", "monitor", "paused", "addr", "laddr", "fd", "created", "auth_bounds",
        "last_interaction", "last_command", "flags_no_evict", "no_touch", "output", "replica", "repl_port", "repl_ip", "repl_eof",
        "channels", "patterns", "shard_channels", "subscribed", "obuf_soft_since", "pushes", "net_in", "net_out", "commands_processed",
        "restricted", "watch_expired",
        "woff", "tracking", "master_link",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        config = server.config
        self.reader = RequestReader(config["proto-max-bulk-len"], config["client-query-buffer-limit"])
        self.id = 0
        self.name = b""
        self.lib_name = b""
        self.lib_ver = b""
        self.db = server.keyspace[0]
        self.resp = 2
        self.encode = encode2
        # logged_in is Redis's c->authenticated (set at connect while the default user needs no password);
        # authenticated is whether commands run now: logged in, or no password asked (Server.auth_changed)
        self.logged_in = self.authenticated = not server.default_user.auth_required
        self.reader.unauthenticated = not self.authenticated
        self.multi: list | None = None  # queued (command, argv) while in MULTI
        self.multi_error = False
        self.in_exec = False
        self.loading = False
        self.watched: set[tuple[int, bytes]] = set()
        self.dirty_cas = False
        self.blocked = None  # the Block this client waits on
        self.pending: deque[list[bytes]] = deque()  # commands read while blocked
        self.reply_mode = ON  # CLIENT REPLY ON / OFF / SKIP
        self.auth_bounds: RequestBounds | None = None  # where requests end, while reads come before AUTH
        self.pushes: list[bytes] | None = None  # pushes for this client while its command runs: sent after its reply
        self.close_after_reply = False
        self.monitor = False
        self.paused = False
        self.addr = "?:0"
        self.laddr = "?:0"
        self.fd = -1
        self.created = time.time()
        self.last_interaction = int(self.created * 1000)  # ms, as server.now
        self.last_command: list[bytes] | str = [b"NULL"]  # for CLIENT LIST cmd=
        self.flags_no_evict = False
        self.no_touch = False
        self.output: list[bytes] = []  # replies not yet written: flushed once per loop turn
        self.replica = None  # the ReplicaLink once this connection is a replica (after PSYNC)
        self.repl_port = 0  # REPLCONF listening-port / ip-address, before PSYNC
        self.repl_ip = ""
        self.repl_eof = False  # REPLCONF capa eof: it reads a diskless snapshot's `$EOF:<mark>` framing
        self.channels: dict[bytes, None] = {}  # SUBSCRIBEd channels, in order (server.pubsub holds the reverse map)
        self.patterns: dict[bytes, None] = {}  # PSUBSCRIBEd patterns
        self.shard_channels: dict[bytes, None] = {}  # SSUBSCRIBEd shard channels
        self.subscribed = False  # RESP2 with a subscription: only (P|S)(UN)SUBSCRIBE, PING, QUIT, RESET run
        self.restricted = False  # subscribed or MONITOR: execute() filters its commands (no fast path)
        self.watch_expired: set[tuple[int, bytes]] | None = None  # WATCHed keys already past their TTL then
        self.obuf_soft_since = 0.0  # over client-output-buffer-limit's soft limit since (monotonic), or 0
        self.net_in = self.net_out = self.commands_processed = 0  # CLIENT LIST tot-net-in, tot-net-out, tot-cmds
        self.woff = 0  # Redis's c->woff: the stream offset after this client's last propagated write (WAIT, WAITAOF)
        self.tracking = None  # server.tracking.ClientTracking while CLIENT TRACKING is on
        self.master_link = None  # the MasterLink whose stream this client applies, while that link is up

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport) -> None:
        server = self.server
        self.transport = transport
        if len(server.clients) >= server.config["maxclients"]:  # refused before it is a client: no ID, not counted
            transport.write(b"-ERR max number of clients reached\r\n")
            server.stats["rejected_connections"] += 1
            transport.close()
            self.transport = None
            return
        self.id = server.next_client_id
        server.next_client_id += 1
        server.clients[self.id] = self
        # judged now, as Redis's createClient at accept: a requirepass changed since the object was made counts
        self.logged_in = self.authenticated = not server.default_user.auth_required
        self.reader.unauthenticated = not self.authenticated
        server.stats["total_connections_received"] += 1
        peer, sock = self.note_addresses(transport)
        if sock is not None:
            keepalive = server.config["tcp-keepalive"]
            if keepalive and sock.family in (socket.AF_INET, socket.AF_INET6):
                keep_alive(sock, keepalive)
        if log.isEnabledFor(VERBOSE):
            log.log(VERBOSE, "Accepted %s", self.addr)
        if denied(server.config, server.default_user, peer[0] if peer else None):
            transport.write(DENIED)
            server.stats["rejected_connections"] += 1
            transport.close()

    def note_addresses(self, link) -> tuple:
        """addr, laddr and fd for CLIENT LIST from a transport or stream writer; (peer, socket)."""
        peer, local = link.get_extra_info("peername"), link.get_extra_info("sockname")
        if peer:
            self.addr = f"{peer[0]}:{peer[1]}"
        if local:
            self.laddr = f"{local[0]}:{local[1]}"
        sock = link.get_extra_info("socket")
        if sock is not None:
            self.fd = sock.fileno()
        return peer, sock

    def eof_received(self) -> None:
        """The peer closed its side: Redis counts the read that saw it. None: the transport closes."""
        self.server.reads_processed += 1

    def connection_lost(self, exc) -> None:
        server = self.server
        if self.transport is None:  # refused in connection_made: never a client
            return
        if log.isEnabledFor(VERBOSE):
            from .commands.client import client_info

            log.log(VERBOSE, "Client closed connection %s", client_info(self))
        server.clients.pop(self.id, None)
        if self.blocked is not None:
            server.blocking.unpark(self.blocked)
            self.blocked = None
        self.unwatch()
        if self.tracking is not None:
            server.tracking.disable(self)
        if self.channels or self.patterns or self.shard_channels:
            server.pubsub.drop(self)
        if self.monitor and self in server.monitors:
            server.monitors.remove(self)
        if self.replica is not None:
            server.replication.drop(self)
        self.transport = None

    # pause_writing / resume_writing are asyncio.Protocol's no-ops: a client that reads slower than
    # we answer still has its requests read and run, as Redis reads them (a client that writes a
    # whole pipeline before it reads a reply would wait for us as we waited for it).
    # client-output-buffer-limit bounds what piles up.

    def data_received(self, data: bytes) -> None:
        server = self.server
        self.last_interaction = server.now = _time_ns() // 1_000_000
        server.net_input_bytes += len(data)
        self.net_in += len(data)
        server.reads_processed += 1
        argv = self.reader.request(data) if self.multi is None and self.blocked is None and self.authenticated and not self.pending and not self.restricted else None
        if argv is None:
            if self.authenticated:
                self._feed_and_run(data)
            else:
                self._feed_before_auth(data)
            return
        # One request from a client outside MULTI, not blocked, authenticated: the usual
        # read of a request/reply client. run([argv]) unrolled, calling `call` when
        # execute() has nothing to check.
        cmd = server.commands.get(argv[0])
        server.caller = self  # pushes to this client wait for the reply (run() does the same)
        if cmd is not None and not cmd.subcommands and cmd.min_args <= len(argv) <= cmd.max_args and server.pause is None and not server.refusing:
            reply = server.call(self, cmd, argv)
        else:
            if cmd is None and argv[0].lower() in CROSS_PROTOCOL:
                server.caller = None
                self.cross_protocol_attack()
                return
            reply = server.execute(self, argv)
        server.caller = None
        self.last_command = argv
        if reply is BLOCKED:
            if self.pushes:
                self.send(self.pushes)
                self.pushes = None
            return
        if self.reply_mode is ON:
            kind = type(reply)  # as run() encodes
            if kind is Simple:
                out = [_STATUS.get(reply) or b"+%s\r\n" % reply]
            elif kind is bytes:
                size = len(reply)
                out = [_BULK[size] + reply + b"\r\n" if size < 64 else b"$%d\r\n%s\r\n" % (size, reply)]
            elif kind is Raw:
                out = [reply]
            elif kind is int:
                out = [b":%d\r\n" % reply]
            elif reply is None:  # a missing key's nil
                out = [_NIL[self.resp]]
            else:
                out = []
                self.encode(reply, out)
            if self.output:
                self.output += out
            elif self.transport is not None:  # send(), inlined as in run()
                self.output = out
                if not server.pending_writes:
                    server.loop.call_soon(server.flush_writes)
                server.pending_writes.append(self)
        else:
            self.skip_reply()
        if self.pushes:  # what the command published to its own client, after its reply
            self.send(self.pushes)
            self.pushes = None
        if server.blocking.ready:
            server.serve_ready()
        if self.close_after_reply:
            self.send([])

    def cross_protocol_attack(self) -> None:
        """`POST` or `Host:` where a command is due, before AUTH too, in MULTI too: as Redis's
        securityWarningCommand (called first thing in processCommand), the connection is dropped
        at once, with none of the replies still due, and the attempt logged at most once a minute."""
        global _attack_logged
        now = time.monotonic()
        if now - _attack_logged > 60:
            log.warning(SECURITY_ATTACK)
            _attack_logged = now
        self.output = []
        self.pending.clear()
        if self.transport is not None:
            self.transport.abort()

    def skip_reply(self) -> None:
        """A reply dropped under CLIENT REPLY OFF or SKIP (which then lasts one more command)."""
        if self.reply_mode is SKIP:
            self.reply_mode = ON
        elif self.reply_mode is SKIP_NEXT:
            self.reply_mode = SKIP

    def _feed_before_auth(self, data: bytes) -> None:
        """A read before AUTH. Redis parses one request at a time, judged by the client's state at that
        moment: a request after a successful AUTH (or HELLO ... AUTH) is free of the pre-AUTH limits,
        one after a failed AUTH is not. So the reader gets the read up to the end of each request that
        may be an AUTH or a HELLO (its bytes spell either name, or an earlier read began it), which
        runs before the bytes after it are parsed. RequestBounds finds where requests end, skipping
        payloads whole: a read costs about what the reader's own parse of it costs."""
        bounds = self.auth_bounds
        if bounds is None:
            if not self.reader.at_boundary:  # (unauthenticated again, RESET say, in the middle of a request)
                self._feed_and_run(data)
                return
            bounds = self.auth_bounds = RequestBounds()
        pos = fed = 0
        end = len(data)
        while pos < end:
            begun = not bounds.at_boundary
            try:
                stop = bounds.end(data, pos)
            except ProtocolError:
                bounds.reset()  # a header Redis refuses: the reader answers it
                stop = -1
            if stop < 0:
                break
            if begun or _AUTH_OR_HELLO.search(data, pos, stop) is not None:
                if not self._feed_and_run(data[fed:stop]):
                    return
                fed = stop
                if self.authenticated:  # the rest is parsed as any authenticated client's
                    self.auth_bounds = None
                    if fed < end:
                        self._feed_and_run(data[fed:])
                    return
            pos = stop
        if fed < end:
            self._feed_and_run(data[fed:])

    def _feed_and_run(self, data: bytes) -> bool:
        """Parse data and run what it completes (data_received's general path); False once the
        link is going away, so nothing more of the read is parsed."""
        commands, error = self.reader.feed(data)
        if error is not None or not self.authenticated:
            self._refuse(commands, error)
        if self.blocked is not None or self.pending:
            self.pending.extend(commands)
        elif commands:
            self.run(commands)
        transport = self.transport
        return error is None and not self.close_after_reply and transport is not None and not transport.is_closing()

    def _refuse(self, commands: list, error: str | None) -> None:
        """Queue a protocol error (answered in turn, then the link closes); Redis's pre-AUTH limits."""
        if not self.authenticated and commands:
            over = unauthenticated_error(commands, self.reader.inline_ids)
            self.reader.inline_ids.clear()  # (filled by this feed only: the reader notes them before AUTH)
            if over >= 0:  # Redis refuses big requests before AUTH, at the protocol level
                argv = commands[over]
                del commands[over:]
                big = len(argv) > UNAUTH_MAX_ARGS
                error = f"ERR Protocol error: unauthenticated {'multibulk' if big else 'bulk'} length"
        if error is not None:
            commands.append(error)

    # -- execution ---------------------------------------------------------

    def run(self, commands: list) -> None:
        """Execute commands in order and queue their replies; stop if one blocks.

        An item that is a `str` is a protocol error the reader found after
        the commands before it: it is answered and the connection closed.
        """
        server = self.server
        caller, server.caller = server.caller, self  # pushes to this client wait for the reply they follow
        try:
            self._run(commands, server)
        finally:
            server.caller = caller

    def _run(self, commands: list, server) -> None:
        execute, call, lookup = server.execute, server.call, server.commands.get
        out: list[bytes] = []
        remaining = iter(commands)
        deadline = perf_counter() + SLICE_SECONDS
        for argv in remaining:
            if type(argv) is str:
                if argv:  # counted in INFO's error stats, as Redis counts every error reply
                    error = b"-%s\r\n" % server.error(argv)
                    if self.reply_mode is ON:  # CLIENT REPLY OFF or SKIP drops it too
                        out.append(error)
                else:  # client-query-buffer-limit: Redis closes without a word
                    stats = server.stats
                    stats["client_query_buffer_limit_disconnections"] = stats.get("client_query_buffer_limit_disconnections", 0) + 1
                self.close_after_reply = True
                break
            cmd = lookup(argv[0])
            if (
                cmd is not None and not cmd.subcommands and cmd.min_args <= len(argv) <= cmd.max_args
                and self.multi is None and self.authenticated and server.pause is None and not server.refusing
                and not self.restricted
            ):
                reply = call(self, cmd, argv)
            else:
                if cmd is None and argv[0].lower() in CROSS_PROTOCOL:
                    self.cross_protocol_attack()
                    return
                reply = execute(self, argv)
            if reply is BLOCKED:
                self.pending.extend(remaining)
                break
            if self.reply_mode is ON:
                kind = type(reply)
                if kind is Simple:  # OK, PONG: the same in both protocols
                    out.append(_STATUS.get(reply) or b"+%s\r\n" % reply)
                elif kind is bytes:
                    size = len(reply)
                    out.append(_BULK[size] + reply + b"\r\n" if size < 64 else b"$%d\r\n%s\r\n" % (size, reply))
                elif kind is Raw:  # stream ranges, already encoded (the same in both protocols)
                    out.append(reply)
                elif kind is int:  # counts and counters (not bool, a subclass): the same in both protocols
                    out.append(b":%d\r\n" % reply)
                elif reply is None:
                    out.append(_NIL[self.resp])
                else:
                    self.encode(reply, out)
            else:
                self.skip_reply()
            if server.blocking.ready:
                server.serve_ready()
            if self.pushes:  # what this command published to its own client, after its reply (Redis 7.2+)
                out += self.pushes
                self.pushes = None
            if self.close_after_reply:
                break
            if not self.authenticated and self.unauthenticated_over(out):
                return
            if perf_counter() > deadline:
                self.pending.extend(remaining)  # the rest after the other clients' events
                if self.pending:
                    self.continue_later()
                break
        self.last_command = argv
        if self.pushes:  # (a command that blocked, or one stopped by a protocol error)
            out += self.pushes
            self.pushes = None
        if out and self.transport is not None:
            if self.output:
                self.output += out
            else:  # send(), inlined: this is the path every reply takes
                self.output = out
                if not server.pending_writes:
                    server.loop.call_soon(server.flush_writes)
                server.pending_writes.append(self)
        elif self.close_after_reply:
            self.send([])

    @property
    def cannot_block(self) -> bool:
        """Redis's client that cannot wait: inside MULTI/EXEC or loading (AOF, a replica's primary).
        A command that would wait answers at once instead (Server.block, SCAN, FLUSHALL SYNC)."""
        return self.multi is not None or self.in_exec or self.loading

    def resume(self, reply) -> None:
        """Called when the Block this client waited on is served or times out."""
        self.blocked = None
        if self.transport is None:
            return
        if self.reply_mode is ON:
            out: list[bytes] = []
            self.encode(reply, out)
            self.send(out)
        if self.pending:
            # the queue is emptied only when the scheduled run starts: what arrives
            # meanwhile must go behind it (data_received queues while pending is not empty)
            self.server.loop.call_soon(self.run_pending)

    def run_pending(self) -> None:
        """Run the commands read while this client was blocked or its last slice ran out, in arrival order."""
        if self.blocked is None and self.pending and self.transport is not None:
            commands = list(self.pending)
            self.pending.clear()
            self.run(commands)
        if self.paused and (self.blocked is not None or not self.pending) and self.transport is not None:
            self.paused = False  # a blocked client's link is read again: its QUIT or hang-up is seen
            self.transport.resume_reading()

    def continue_later(self) -> None:
        """A slice of this client's commands used its time: the rest runs after the other clients'
        events, and its socket waits until then (what it holds unread stays in the kernel)."""
        self.server.loop.call_soon(self.run_pending)
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def unauthenticated_over(self, out: list[bytes]) -> bool:
        """Redis's limit for a client that must AUTH (CVE-2025-21605): past 1 KB of replies beyond
        its 16 KB reply buffer it is closed, with none of them, before another command runs."""
        size = sum(map(len, out)) + output_limits.pending_bytes(self)
        if not output_limits.unauthenticated_over(size):
            return False
        output_limits.close(self, self.server)
        return True

    def push(self, data: bytes, after_reply: bool = False) -> None:
        """Pre-encoded bytes outside the request/reply flow (a Pub/Sub message, a MONITOR line, an
        invalidation): queued now, or, for the client whose command is running, after its reply."""
        if not after_reply:
            self.send([data])
        elif self.pushes is None:
            self.pushes = [data]
        else:
            self.pushes.append(data)

    def send(self, chunks: list[bytes]) -> None:
        """Queue reply bytes; the server writes them when this loop turn's reads are done.

        Redis answers in beforeSleep (handleClientsWithPendingWrites), not from
        the read handler: one wake-up of a client that sent many requests, and
        one system call per client and turn however many commands it sent.
        """
        if self.transport is None:
            return
        if not self.output:
            self.server.queue_write(self)
        self.output += chunks

    # -- state used by handlers -------------------------------------------

    def set_resp(self, version: int) -> None:
        self.resp = version
        self.encode = encode3 if version == 3 else encode2
        self.update_subscribed()

    def update_subscribed(self) -> None:
        """Redis's RESP2 subscribed context: any subscription (shard ones too), over RESP2 (RESP3 pushes beside replies)."""
        self.subscribed = self.resp == 2 and bool(self.channels or self.patterns or self.shard_channels)
        self.restricted = self.subscribed or self.monitor

    def queue(self, cmd, argv: list[bytes]):
        self.multi.append((cmd, argv))
        return QUEUED

    def watch(self, key: bytes, expired: bool = False) -> None:
        """WATCH one key; `expired`: past its TTL already (Redis's wk->expired): its removal is no change."""
        entry = (self.db.id, key)
        if entry not in self.watched:
            self.watched.add(entry)
            self.server.watched.setdefault(entry, set()).add(self)
            if expired:
                self.note_expired(entry)

    def note_expired(self, entry: tuple[int, bytes]) -> None:
        """A WATCHed key that is past its TTL: its removal will be no change."""
        if self.watch_expired is None:
            self.watch_expired = set()
        self.watch_expired.add(entry)

    def unwatch(self) -> None:
        watched = self.server.watched
        for entry in self.watched:
            clients = watched.get(entry)
            if clients is not None:
                clients.discard(self)
                if not clients:
                    del watched[entry]
        self.watched.clear()
        self.watch_expired = None
        self.dirty_cas = False

    def kill(self) -> None:
        """Close the link; replies to commands already run still go out first.

        Redis frees the client at once (freeClient): its wait ends now, not when the transport reports
        the close on a later loop turn, so a write that follows in the same pipeline or EXEC serves the
        next waiter, never this client; nor does anything it sent after the blocked command run.
        """
        if self.transport is not None:
            self.server.flush_writes()
            self.transport.close()
        elif self.master_link is not None:
            self.master_link.drop()
        block = self.blocked
        if block is not None:
            self.blocked = None
            self.server.blocking.unpark(block)
        self.pending.clear()


class LoadingClient(Client):
    """A client with no socket: the AOF loader and the replica apply effects through it."""

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.loading = True
        self.logged_in = self.authenticated = True


__all__ = ["Client", "LoadingClient", "OK", "Error"]
