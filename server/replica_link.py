"""Replication, the replica's side: the link to the primary (Redis's replicationCron and syncWithMaster).

The link connects, runs Redis's handshake (PING, AUTH with masteruser /
masterauth, REPLCONF listening-port and capa eof psync2, PSYNC with this
server's replication ID and offset, so a restarted or promoted-and-demoted
server can continue), loads a full sync's snapshot only once it has arrived
whole (a link dropped mid-snapshot leaves the previous data in place), then
applies the stream through the command table with a loading client (rule 5)
and passes the same bytes on to its own replicas. A command it cannot apply
ends the link, to resynchronize, rather than letting the data diverge.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque

from persistence import aof as aoffile
from persistence import snapshot
from protocol.reader import RequestReader
from protocol.reply import Error
from storage.keyspace import Database

from .client import LoadingClient
from .config import propagation_error_panics
from .process import set_oom_score_adj_for_role

log = logging.getLogger("millrace")


class ReplicationError(Exception):
    """The primary answered something the protocol does not allow: drop the link and start again."""


class MasterLink:
    """This server follows host:port."""

    def __init__(self, server, host: str, port: int, cached: bool = True) -> None:
        self.server = server
        self.host, self.port = host, port
        self.state = "connect"  # connect, connecting (TCP), handshake (PING .. PSYNC's reply), sync (the snapshot), connected
        # Redis's server.master or server.cached_master exists: there is a history whose offset INFO shows
        # (without one, Redis's INFO says 1); gone from +FULLRESYNC or a bad stream until the link is up
        self.cached = cached
        self.task: asyncio.Task | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.last_io = time.time()
        self.down_since = time.time()
        self.up_since: float | None = None  # the link's last "up", None before the first
        self.disconnected = 0.0  # seconds down since it was first up (INFO total_disconnect_time_sec)
        self.attempts = self.total_attempts = 0  # syncs tried since the link was last up, and in all
        self.sync_bytes = self.sync_read = 0
        self.last_ack = 0.0
        self.full_resync = False  # set when the stream could not be applied: the next PSYNC asks for a snapshot
        self.failover = False  # FAILOVER: the next PSYNC asks the target to take over
        self.ack_asked = False  # the primary sent REPLCONF GETACK in the read being applied
        self.disk_warned = 0  # when "applying a command even though it is unable to write to disk" was last logged (ms)
        self.client = LoadingClient(server)  # applies the stream; kept across partial resyncs, with its db
        if server.replication.stream_db >= 0:  # restarted from a snapshot taken as a replica
            self.client.db = server.keyspace[server.replication.stream_db]

    def start(self) -> None:
        self.task = self.server.loop.create_task(self._run())

    def stop(self) -> None:
        self.detach()
        if self.task is not None:
            self.task.cancel()
            self.task = None
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def attach(self, writer: asyncio.StreamWriter) -> None:
        """The link is up: its client joins the client table, as Redis's server.master (CLIENT LIST
        flags=M, TYPE master, counted in connected_clients). A partial resync brings back the same
        client and ID, as Redis resurrects its cached master; a full sync makes a new one."""
        client, server = self.client, self.server
        if not client.id:
            client.id = server.next_client_id
            server.next_client_id += 1
            client.created = time.time()
        client.note_addresses(writer)
        client.last_interaction = server.clock()
        client.master_link = self
        server.clients[client.id] = client

    def detach(self) -> None:
        """The link is down: its client leaves the client table (kept, for a partial resync)."""
        client = self.client
        if client.master_link is not None:
            client.master_link = None
            self.server.clients.pop(client.id, None)

    def drop(self) -> None:
        """CLIENT KILL of our primary's client: the link closes and is made again, as Redis caches its
        master and resynchronizes (partially, where the primary still has the history)."""
        self.detach()
        if self.writer is not None:
            self.writer.transport.abort()

    async def _run(self) -> None:
        while True:
            try:
                await self._sync()
            except asyncio.CancelledError:
                raise
            except (OSError, EOFError, asyncio.IncompleteReadError, ReplicationError, snapshot.SnapshotError, aoffile.AofError) as exc:
                if isinstance(exc, (ReplicationError, aoffile.AofError)) and self.state == "connected":
                    # the stream had something we cannot apply: continuing would meet it again, or
                    # diverge silently; ask for a full resync instead
                    log.warning("Bad stream from the master (%s): asking for a full resynchronization", exc)
                    self.full_resync = True
                    self.cached = False  # (Redis does not cache a master that sent what it could not apply)
                if self.state == "connected":
                    log.warning("Connection with master lost: %s", exc or type(exc).__name__)
                else:
                    log.warning("Error condition on socket for SYNC: %s", exc or type(exc).__name__)
            self.detach()
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            if self.state == "connected":
                self.down_since = time.time()
                self.attempts = 0
            self.state = "connect"
            await asyncio.sleep(1)

    async def _sync(self) -> None:
        server = self.server
        config = server.config
        self.state = "connecting"
        self.attempts += 1
        self.total_attempts += 1
        log.info("Connecting to MASTER %s:%d", self.host, self.port)
        source = config["bind-source-addr"]  # as Redis's connConnect: the link's own address, when set
        connect = asyncio.open_connection(self.host, self.port, local_addr=(source, 0) if source else None)
        reader, writer = await asyncio.wait_for(connect, config["repl-timeout"])
        self.writer = writer
        self.state = "handshake"  # Redis's ROLE from the first PING until PSYNC is answered
        log.info("MASTER <-> REPLICA sync started")

        async def call(*argv: bytes) -> bytes:
            writer.write(aoffile.encode(list(argv)))
            line = await asyncio.wait_for(reader.readline(), config["repl-timeout"])
            if not line:
                raise EOFError("the primary closed the connection")
            return line.rstrip(b"\r\n")

        reply = await call(b"PING")
        if reply[:1] == b"-" and not reply.startswith((b"-NOAUTH", b"-NOPERM", b"-ERR operation not permitted")):
            raise ReplicationError(f"Error reply to PING from master: '{reply.decode(errors='replace')}'")
        if config["masterauth"]:
            auth = [b"AUTH"] + ([config["masteruser"].encode()] if config["masteruser"] else []) + [config["masterauth"].encode()]
            reply = await call(*auth)
            if reply[:1] == b"-":
                raise ReplicationError(f"Unable to AUTH to MASTER: {reply.decode(errors='replace')}")
        await call(b"REPLCONF", b"listening-port", b"%d" % (config["replica-announce-port"] or server.port))
        if config["replica-announce-ip"]:  # what the primary (and Sentinel, through its INFO) tells others
            await call(b"REPLCONF", b"ip-address", config["replica-announce-ip"].encode())
        await call(b"REPLCONF", b"capa", b"eof", b"capa", b"psync2")
        if self.full_resync or (server.master_repl_offset == 0 and not self.failover and self.up_since is None):
            # (no history: nothing to continue; Redis's replica without a cached master asks `? -1` too.
            # A link that was up has one, at offset 0 too: cut before the first write, it continues)
            log.info("Partial resynchronization not possible (no cached master)")
            reply = await call(b"PSYNC", b"?", b"-1")
        else:
            replid, offset = server.replid, server.master_repl_offset
            log.info("Trying a partial resynchronization (request %s:%d).", replid, offset + 1)
            extra = [b"FAILOVER"] if self.failover else []
            reply = await call(b"PSYNC", replid.encode(), b"%d" % (offset + 1), *extra)
        replication = server.replication
        if reply.startswith(b"+FULLRESYNC"):
            _, new_id, new_offset = reply.split()
            log.info("Full resync from master: %s:%s", new_id.decode(), new_offset.decode())
            self.state = "sync"
            self.cached = False  # Redis discards its cached master for a full sync
            data, leftover = await self._read_payload(reader)
            stream_db = self._load(data, new_id.decode(), int(new_offset))
            self.full_resync = False
            self.client = LoadingClient(server)
            if stream_db >= 0:  # a replica's snapshot: its stream goes on in that db without a SELECT
                self.client.db = server.keyspace[stream_db]
        elif reply.startswith(b"+CONTINUE"):
            words = reply.split()
            if len(words) > 1 and words[1].decode() != server.replid:
                replication.shift_replid()
                server.replid = words[1].decode()
                log.info("Master replication ID changed to %s", server.replid)
            leftover = b""
            log.info("Successful partial resynchronization with master.")
            replication.create_backlog()
            self.client.multi = None  # a transaction cut by the lost link comes again whole
        else:
            if self.failover:  # the target refused to take over: stay the primary
                log.warning("FAILOVER target refused PSYNC FAILOVER: %s; aborting the failover", reply.decode(errors="replace"))
                self.failover = False
                server.loop.call_soon(replication.failover_refused)
            raise ReplicationError(f"Unexpected reply to PSYNC from master: {reply.decode(errors='replace')}")
        self.state = "connected"
        self.cached = True
        self.last_io = time.time()
        if self.up_since is not None:  # a link that was up before: the time it was down counts
            self.disconnected += self.last_io - self.down_since
        self.up_since = self.last_io
        log.info("MASTER <-> REPLICA sync: Finished with success")
        self.attach(writer)
        if self.failover:
            self.failover = False
            replication.failover_done()
        await self._stream(reader, writer, leftover)

    async def _read_payload(self, reader: asyncio.StreamReader) -> tuple[bytes | bytearray, bytes]:
        """The snapshot after +FULLRESYNC (`$EOF:<mark>` ... mark, or `$<length>` and that many bytes),
        and any stream bytes read past its end."""
        line = await reader.readline()
        while line == b"\n":  # the primary's keep-alive newlines while it prepares the snapshot
            line = await reader.readline()
        line = line.rstrip(b"\r\n")
        if line.startswith(b"$EOF:"):
            mark = line[5:]
            if len(mark) != 40:
                raise ReplicationError("bad EOF mark from master")
            data = bytearray()
            while True:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    raise EOFError("the link was dropped during the snapshot")
                data += chunk
                self.sync_read = len(data)
                end = data.find(mark, max(0, len(data) - len(chunk) - len(mark)))
                if end >= 0:  # the stream may follow in the same read: it is the stream's
                    rest = bytes(data[end + len(mark) :])
                    del data[end:]  # the snapshot is parsed in place, not copied (a copy would double a big one)
                    return data, rest
        if line.startswith(b"$"):
            size = int(line[1:])
            self.sync_bytes = size
            return await reader.readexactly(size), b""
        raise ReplicationError(f"Bad protocol from MASTER, the first byte is not '$': {line[:20]!r}")

    def _load(self, data: bytes | bytearray, replid: str, offset: int) -> int:
        """Replace the dataset with the snapshot (checked whole before anything is replaced)."""
        server = self.server
        loaded = snapshot.parse(data, f"<snapshot from {self.host}:{self.port}>")
        log.info("MASTER <-> REPLICA sync: Flushing old data")
        persistence = server.persistence
        persistence._install(loaded, expire=False)
        server.replid = replid
        server.master_repl_offset = offset
        replication = server.replication
        replication.replid2, replication.second_offset = "0" * 40, -1
        replication.backlog = None
        replication.create_backlog()
        replication.disconnect_replicas()  # their history is not ours any more
        server.blocking.ready.update(server.blocking.waiters)
        server.serve_ready()
        if persistence.aof is not None:  # Redis rewrites the AOF after a full sync: the old one describes other data
            persistence.rewrite_scheduled = True
        log.info("MASTER <-> REPLICA sync: Loading DB in memory done (%d keys)", loaded.keys)
        return loaded.stream_db

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, first: bytes) -> None:
        """Apply what the primary sends, count its bytes, pass them on."""
        server = self.server
        replication = server.replication
        client = self.client
        # Our primary's stream is canonical RESP (each command's size is computed): read as a client's
        # requests are, so a big argument is held once (protocol.bigarg), with no limit on lengths or
        # on what is buffered, which Redis does not apply to its primary either.
        parser = RequestReader(max_bulk_len=_UNLIMITED, max_query_buffer=_UNLIMITED)
        raw: deque[bytes] = deque()  # stream bytes not yet counted in our offset, as read
        parsed = 0  # of them, those of commands already applied (inside an open MULTI)
        self.send_ack()
        while True:
            chunk, first = (first, b"") if first else (await reader.read(1 << 16), b"")
            if not chunk:
                raise EOFError("the primary closed the connection")
            self.last_io = time.time()
            client.last_interaction = server.clock()
            client.net_in += len(chunk)
            raw.append(chunk)
            commands, error = parser.feed(chunk)
            counted = 0
            self.ack_asked = False
            try:
                for argv in commands:
                    self._apply(client, argv)
                    parsed += _encoded_size(argv)
                    if client.multi is None:
                        # Counted only outside a transaction, as Redis's reploff: a link lost between
                        # MULTI and EXEC asks for the whole transaction again.
                        counted = parsed
                if error is not None:
                    raise ReplicationError(f"protocol error in the replication stream: {error}")
            finally:
                if counted:  # counted and passed on once per read, read by read (no copy of a big command)
                    _pass_on(replication, raw, counted)
                    parsed -= counted
            replication.flush()
            if self.ack_asked:  # GETACK: answered with the offset of everything this read applied
                self.send_ack()
            if server.blocking.ready:
                server.serve_ready()

    def _apply(self, client, argv: list[bytes]) -> None:
        client.last_command = argv
        name = argv[0].lower()
        if name == b"replconf" and len(argv) > 1 and argv[1].lower() == b"getack":
            self.ack_asked = True
            client.commands_processed += 1
            return
        if name == b"ping":
            client.commands_processed += 1
            return
        server = self.server
        if server.oom and not server.config["replica-ignore-maxmemory"]:
            server.evictor.evict(server.memory_meter)  # (replica-ignore-maxmemory no: this replica evicts too, as Redis's)
        cmd = server.commands.get(argv[0]) or server.lookup_command(argv[0])
        if cmd is None:
            raise ReplicationError(f"unknown command '{argv[0].decode(errors='replace')}' from the primary")
        if server.disk_error is not None and cmd.write:
            self._write_despite_disk_error()
        previous, Database.expiry = Database.expiry, "keep"  # the primary's commands find every key it has, its DELs too
        try:
            if not cmd.subcommands and client.multi is None and cmd.min_args <= len(argv) <= cmd.max_args:
                reply = server.call(client, cmd, argv)  # what execute() would check cannot stop a loading client
            else:
                reply = server.execute(client, argv)
        finally:
            if Database.expiry == "keep":  # (unless the command changed the role)
                Database.expiry = previous  # "hide": to this server's own clients a key past its TTL is missing
        if type(reply) is Error:
            log.warning("A command from the primary failed: %s (%s)", reply, b" ".join(argv[:3]).decode(errors="replace"))
        if propagation_error_panics(server.config, True, reply):
            log.critical("Guru Meditation: This replica panicked sending an error to its master after processing the command '%s'", cmd.name)
            os._exit(1)  # as Redis's serverPanic: no save, no cleanup

    def _write_despite_disk_error(self) -> None:
        """A write from the primary while our own disk refuses writes (our AOF failed): the replica stops
        rather than diverge from what it could persist, unless replica-ignore-disk-write-errors (Redis 7's
        processCommand for its master client; a warning at most every 10 s then)."""
        server = self.server
        if not server.config["replica-ignore-disk-write-errors"]:
            log.critical("Guru Meditation: Replica was unable to write command to disk.")
            logging.shutdown()
            os._exit(1)  # as Redis's serverPanic: no save, no cleanup
        now = server.clock()
        if now > self.disk_warned + 10_000:
            self.disk_warned = now
            log.warning("Replica is applying a command even though it is unable to write to disk.")

    def send_ack(self) -> None:
        """REPLCONF ACK <offset> FACK <offset fsynced to our AOF>."""
        writer = self.writer
        if writer is None or self.state != "connected":
            return
        server = self.server
        offset = server.master_repl_offset
        aof = server.aof
        fsynced = offset if aof is not None and not aof.buffer and aof.synced >= aof.size else 0
        writer.write(aoffile.encode([b"REPLCONF", b"ACK", b"%d" % offset, b"FACK", b"%d" % fsynced]))
        self.last_ack = time.time()

    def cron(self) -> None:
        now = time.time()
        if self.state == "connected":
            if now - self.last_ack >= 1:
                self.send_ack()
            if now - self.last_io > self.server.config["repl-timeout"]:
                log.warning("MASTER timeout: no data nor PING received...")
                if self.writer is not None:
                    self.writer.transport.abort()

    # -- INFO, ROLE --------------------------------------------------------------------

    def info(self) -> list[tuple[str, object]]:
        server = self.server
        up = self.state == "connected"
        offset = server.master_repl_offset if self.cached else 1  # Redis's default with no master nor cached master
        fields: list[tuple[str, object]] = [
            ("role", "slave"),
            ("master_host", self.host),
            ("master_port", self.port),
            ("master_link_status", "up" if up else "down"),
            ("master_last_io_seconds_ago", int(time.time() - self.last_io) if up else -1),
            ("master_sync_in_progress", 1 if self.state == "sync" else 0),
            ("slave_read_repl_offset", offset),
            ("slave_repl_offset", offset),
        ]
        if self.state == "sync":
            fields += [("master_sync_total_bytes", self.sync_bytes or -1), ("master_sync_read_bytes", self.sync_read)]
        now = time.time()
        fields += [
            ("replica_full_sync_buffer_size", 0),  # (no separate RDB channel: nothing buffered beside the sync)
            ("replica_full_sync_buffer_peak", 0),
            ("master_current_sync_attempts", self.attempts),
            ("master_total_sync_attempts", self.total_attempts),
        ]
        down = now - self.down_since if not up and self.up_since is not None else 0.0
        if not up:  # -1 until the link was first up, as Redis
            fields.append(("master_link_down_since_seconds", int(down) if self.up_since is not None else -1))
        else:
            fields.append(("master_link_up_since_seconds", int(now - self.up_since)))
        fields.append(("total_disconnect_time_sec", int(self.disconnected + down)))
        fields += [
            ("slave_priority", server.config["replica-priority"]),
            ("slave_read_only", 1 if server.config["replica-read-only"] else 0),
            ("replica_announced", 1 if server.config["replica-announced"] else 0),
        ]
        return fields

    def role(self) -> list:
        state = self.state.encode()
        return [b"slave", self.host.encode(), self.port, state, self.server.master_repl_offset if self.state == "connected" else -1]


def become_replica(server, host: str, port: int, failover: bool = False) -> None:
    """REPLICAOF host port: follow that primary (keeping our data until a full sync replaces it).

    `failover`: FAILOVER's last step; our PSYNC asks the target, our replica, to take over first.
    """
    replication = server.replication
    previous = replication.master
    if previous is not None:
        previous.stop()
        cached = previous.cached  # Redis keeps its master (cached) across REPLICAOF
    elif server.config["replicaof"]:  # at startup (REPLICAOF names the primary in the config only after this)
        cached = server.master_repl_offset > 0  # a snapshot's recorded history, else none (Redis's rsi)
    else:
        cached = True  # a primary turning replica caches itself (replicationCacheMasterUsingMyself)
    replication.disconnect_replicas()
    _disconnect_blocked_clients(server)
    Database.expiry = "hide"  # a replica never expires keys by its own clock: the primary's DELs do
    if server.replica_keys_with_expire is None:
        server.replica_keys_with_expire = set()  # except those its own clients write (replica-read-only no)
    replication.master = MasterLink(server, host, port, cached)
    set_oom_score_adj_for_role(server)  # as Redis's replicationSetMaster
    replication.master.failover = failover
    server.update_refusing()
    if server.loop is not None:
        replication.master.start()


UNBLOCKED_ROLE_CHANGE = "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"


def _disconnect_blocked_clients(server) -> None:
    """Redis's disconnectAllBlockedClients (replicationSetMaster): every blocked client (XREAD,
    XREADGROUP, WAIT, WAITAOF) gets the UNBLOCKED error and its link closes after that reply; none
    of what it sent after the blocked command runs. Clients CLIENT PAUSE postponed are left to
    run their command from the start when the pause ends, where it is served or refused."""
    from .pause import is_postponed

    for client in list(server.clients.values()):
        block = client.blocked
        if block is None or is_postponed(block) or block.internal:
            continue
        client.pending.clear()
        client.close_after_reply = True
        if client.transport is not None:  # nothing it sends before the close runs either
            client.transport.pause_reading()
        server.unblock(block, server.error(UNBLOCKED_ROLE_CHANGE))
        client.send([])  # queued for the write that closes it, even under CLIENT REPLY OFF


def become_primary(server) -> None:
    """REPLICAOF NO ONE: keep the data, start a new history that continues this one (replid2)."""
    replication = server.replication
    if replication.master is None:
        return
    replication.master.stop()
    replication.master = None
    Database.expiry = "delete"
    server.replica_keys_with_expire = None  # a primary expires every key
    replication.shift_replid()
    replication.disconnect_replicas()
    server._propagated_db = -1
    server.update_refusing()
    log.info("MASTER MODE enabled (user request from '%s')", "REPLICAOF NO ONE")
    set_oom_score_adj_for_role(server)  # as Redis's replicationUnsetMaster


_UNLIMITED = 1 << 62  # proto-max-bulk-len and client-query-buffer-limit do not bind the primary's stream


def _pass_on(replication, raw: deque[bytes], size: int) -> None:
    """Count and pass on the first `size` bytes held in `raw` (the reads since the last count)."""
    while size:
        part = raw[0]
        if len(part) <= size:
            raw.popleft()
        else:
            raw[0] = part[size:]
            part = part[:size]
        replication.feed_bytes(part)
        size -= len(part)


def _encoded_size(argv: list[bytes]) -> int:
    """Bytes of argv as a canonical RESP array of bulk strings (what the primary sent)."""
    size = 3 + 5 * len(argv) + len(str(len(argv)))  # *<count>\r\n, and $ \r\n \r\n around each
    for arg in argv:
        n = len(arg)
        size += n + (1 if n < 10 else 2 if n < 100 else len(str(n)))  # the usual lengths need no str()
    return size
