"""Replication, the primary's side: the backlog, replica links, full and partial syncs.

The replication stream is the effects the server propagates, encoded as RESP
exactly as the AOF holds them (rule 4: one normalized form for both), plus the
primary's periodic PINGs and `REPLCONF GETACK *`. Offsets count those bytes on
both sides. A replica that asks `PSYNC replid offset` with a history this
server has (its replication ID, or the previous one up to `second_repl_offset`,
PSYNC2) and an offset still in the backlog continues from there; any other is
sent a snapshot by a forked child (straight over the socket with Redis's
`$EOF:<mark>` framing when `repl-diskless-sync yes`, else written to disk
first and sent as `$<length>`) while the stream produced meanwhile waits in
that replica's buffer. A replica of a replica passes on the bytes it receives
unchanged, so chained replicas share the primary's IDs and offsets.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import time
from dataclasses import dataclass, field

from persistence import snapshot
from persistence.aof import encode_batch

from .fork import fork, reap
from .output_limits import classes, close, over_limit

log = logging.getLogger("millrace")
NULL_ID = "0" * 40
EOF_MARK_SIZE = 40


def new_replid() -> str:
    return os.urandom(20).hex()


@dataclass(eq=False)
class ReplicaLink:
    """A connected replica (Redis's client with the SLAVE flag)."""

    client: object
    state: str = "wait_bgsave"  # then "online"
    ack_offset: int = 0
    aof_offset: int = 0  # REPLCONF ACK ... FACK: what the replica's AOF has fsynced
    ack_time: float = field(default_factory=time.time)
    port: int = 0
    ip: str = ""
    pending: list[bytes] = field(default_factory=list)  # the stream while its snapshot is being sent
    pending_size: int = 0
    sent: int = 0  # the stream offset this replica has been sent up to, once online
    child: int = 0  # the pid sending its snapshot

    @property
    def addr(self) -> str:
        return self.ip or self.client.addr.rsplit(":", 1)[0]

    def lag(self, now: float) -> int:
        """Seconds since its last ACK as Redis counts them: whole unix seconds (`unixtime - repl_ack_time`),
        so min-replicas-max-lag, INFO's `lag=` and repl-timeout agree with each other and with Redis."""
        return int(now) - int(self.ack_time)


@dataclass(eq=False)
class Failover:
    """A FAILOVER in progress: its state as INFO's master_failover_state names it."""

    state: str  # waiting-for-sync, failover-in-progress
    target: ReplicaLink
    host: str
    port: int
    deadline: float | None  # TIMEOUT, as time.time()
    force: bool


class Replication:
    """Replication state of one server: `server.replication`."""

    def __init__(self, server) -> None:
        self.server = server
        self.replicas: list[ReplicaLink] = []
        self.backlog: bytearray | None = None  # None until a replica first asks (Redis's createReplicationBacklog)
        self.backlog_off = 1  # offset of the backlog's first byte
        self.replid2 = NULL_ID
        self.second_offset = -1
        self.master = None  # the replica side's link (server.replica_link.MasterLink) when this is a replica
        self.no_replicas_since = time.time()
        self.last_ping = time.time()  # as Redis's cron (loops % period): the first PING a period after start
        self.good_replicas = 0
        self.stats = {"sync_full": 0, "sync_partial_ok": 0, "sync_partial_err": 0}
        self.stream_db = -1  # a replica's: the db its primary's stream had selected when a snapshot was taken
        self.failover: Failover | None = None
        self.flushed = 0  # the stream offset every replica has been sent (or buffered) up to

    def install(self) -> None:
        server = self.server
        server.replication = self
        server.effect_listeners.append(self.feed)
        server.replication_info = self.info

    # -- the stream ---------------------------------------------------------------

    def feed(self, batch: list[list[bytes]]) -> None:
        """Effects of this server's own writes (a replica passes its primary's bytes on instead)."""
        if self.backlog is None or self.master is not None:
            return
        self.feed_bytes(encode_batch(batch))

    def feed_bytes(self, data: bytes) -> None:
        """Append to the stream; replicas get it in one write per loop turn (`flush`)."""
        backlog = self.backlog
        self.server.master_repl_offset += len(data)
        if backlog is None:
            self.flushed = self.server.master_repl_offset
            return
        backlog += data
        size = self.server.config["repl-backlog-size"]
        if len(backlog) > 2 * size:  # trim in steps: deleting from the front costs a copy
            self.flush()  # nothing unsent may be cut
            cut = len(backlog) - size
            del backlog[:cut]
            self.backlog_off += cut

    def flush(self) -> None:
        """Send what the stream gained since the last flush: to online replicas, or into the buffer
        of those still receiving their snapshot (Redis writes replicas in beforeSleep too)."""
        end = self.server.master_repl_offset
        if self.flushed >= end:
            return
        backlog = self.backlog
        if backlog is None:
            self.flushed = end
            return
        chunk = bytes(backlog[self.flushed + 1 - self.backlog_off :])
        for link in self.replicas:
            if link.state == "online":
                if link.sent < end:
                    data = chunk if link.sent == self.flushed else bytes(backlog[link.sent + 1 - self.backlog_off :])
                    link.client.send([data])
                    link.sent = end
            else:
                link.pending.append(chunk)
                link.pending_size += len(chunk)
        self.flushed = end

    def create_backlog(self) -> None:
        if self.backlog is None:
            self.backlog = bytearray()
            self.backlog_off = self.server.master_repl_offset + 1
            self.flushed = self.server.master_repl_offset
            self.server._propagated_db = -1  # the stream a replica reads starts with a SELECT

    def backlog_has(self, offset: int) -> bool:
        backlog = self.backlog
        if backlog is None:
            return False
        trimmed = self.backlog_off + max(0, len(backlog) - self.server.config["repl-backlog-size"])
        return trimmed <= offset <= self.server.master_repl_offset + 1

    # -- PSYNC ---------------------------------------------------------------------

    def psync(self, client, replid: str, offset: int) -> None:
        """Answer PSYNC: +CONTINUE and the backlog, or +FULLRESYNC and a snapshot."""
        server = self.server
        link = self._link(client)
        self.create_backlog()
        self.flush()  # what the others are owed goes first: this one starts from here
        same_history = replid == server.replid or (replid == self.replid2 and offset <= self.second_offset)
        if same_history and self.backlog_has(offset):
            start = offset - self.backlog_off
            client.send([b"+CONTINUE %s\r\n" % server.replid.encode(), bytes(self.backlog[start:])])
            link.state = "online"
            link.sent = server.master_repl_offset
            self.refresh_good_replicas()
            self.stats["sync_partial_ok"] += 1
            log.info("Partial resynchronization request from %s accepted. Sending %d bytes of backlog starting from offset %d.",
                     client.addr, server.master_repl_offset + 1 - offset, offset)
            return
        if replid != "?":
            self.stats["sync_partial_err"] += 1
            log.info("Partial resynchronization not accepted: %s", "Replication ID mismatch" if not same_history else "offset out of the backlog")
        self.stats["sync_full"] += 1
        log.info("Full resync requested by replica %s", client.addr)
        link.state = "wait_bgsave"
        # repl-disable-tcp-nodelay: fewer, larger packets to it from now on (Redis's syncCommand). Redis's
        # diskless transfer leaves TCP_NODELAY on all the same (measured on 8.2.3): a disk-based sync only.
        if server.config["repl-disable-tcp-nodelay"] and not (server.config["repl-diskless-sync"] and client.repl_eof):
            with contextlib.suppress(OSError, AttributeError):  # not critical, as in Redis
                client.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        server._propagated_db = -1  # the replica applies what follows the snapshot from db 0: name the db again
        server.flush_writes()  # nothing of ours may follow the child's bytes out of order
        client.transport.write(b"+FULLRESYNC %s %d\r\n" % (server.replid.encode(), server.master_repl_offset))
        self._send_snapshot_when_drained(link)

    def _link(self, client) -> ReplicaLink:
        for link in self.replicas:
            if link.client is client:
                return link
        link = ReplicaLink(client, port=getattr(client, "repl_port", 0), ip=getattr(client, "repl_ip", ""))
        self.replicas.append(link)
        client.replica = link
        return link

    def _send_snapshot_when_drained(self, link: ReplicaLink) -> None:
        transport = link.client.transport
        if transport is None:
            return
        if transport.get_write_buffer_size():  # +FULLRESYNC must be on the wire before the child writes
            self.server.loop.call_later(0.001, self._send_snapshot_when_drained, link)
            return
        server = self.server
        diskless = bool(server.config["repl-diskless-sync"]) and link.client.repl_eof  # a replica without capa eof: disk
        fd = transport.get_extra_info("socket").fileno()
        dbs = snapshot.keyspace_dbs(server.keyspace)
        path = os.path.join(server.config["dir"], server.config["dbfilename"])
        header = server.snapshot_header()

        def work() -> None:
            if diskless:
                _send_diskless(fd, snapshot.iter_chunks(dbs, header))
            else:
                snapshot.write(path, dbs, header)
                _send_file(fd, path)

        pid = fork(work, server.config, server.config["bgsave-cpulist"], "millrace-rdb-to-replicas")  # Redis's rdbSaveToSlavesSockets
        link.child = pid
        log.info("Starting BGSAVE for SYNC with target: %s (pid %d)", "replicas sockets" if diskless else "disk", pid)

    def check_children(self) -> None:
        for link in list(self.replicas):
            if not link.child:
                continue
            code = reap(link.child)
            if code is None:
                continue
            link.child = 0
            if code != 0:
                log.warning("Snapshot transfer to replica %s failed", link.client.addr)
                link.client.kill()
                continue
            self.flush()  # up to now into its buffer, then all of it at once
            link.state = "online"
            link.ack_time = time.time()
            link.sent = self.flushed
            self.refresh_good_replicas()
            log.info("Synchronization with replica %s succeeded", link.client.addr)
            if link.pending:
                link.client.send(link.pending)
                link.pending, link.pending_size = [], 0

    def refresh_good_replicas(self, now: float | None = None) -> None:
        """Redis's refreshGoodSlavesCount: online replicas within min-replicas-max-lag, counted by the cron
        and at once when a replica goes or comes online, so min-replicas-to-write never trusts a link that closed."""
        now = time.time() if now is None else now
        lag = self.server.config["min-replicas-max-lag"]
        self.good_replicas = sum(1 for link in self.replicas if link.state == "online" and link.lag(now) <= lag)

    def drop(self, client) -> None:
        """A replica's connection closed."""
        link = getattr(client, "replica", None)
        if link is None or link not in self.replicas:
            return
        self.replicas.remove(link)
        self.refresh_good_replicas()
        if link.child:
            try:
                os.kill(link.child, signal.SIGKILL)
                os.waitpid(link.child, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if not self.replicas:
            self.no_replicas_since = time.time()
        log.info("Connection with replica %s lost.", client.addr)

    def disconnect_replicas(self) -> None:
        for link in list(self.replicas):
            link.client.kill()

    # -- ACKs, WAIT ------------------------------------------------------------------

    def ack(self, client, offset: int, aof_offset: int | None) -> None:
        link = getattr(client, "replica", None)
        if link is None:
            return
        link.ack_offset = max(link.ack_offset, offset)
        if aof_offset is not None:
            link.aof_offset = max(link.aof_offset, aof_offset)
        link.ack_time = time.time()
        self.wake_waiters()
        if self.failover is not None:
            self.check_failover()

    def acked(self, offset: int, aof: bool = False) -> int:
        return sum(1 for link in self.replicas if link.state == "online" and (link.aof_offset if aof else link.ack_offset) >= offset)

    def request_acks(self) -> None:
        """REPLCONF GETACK * into the stream (Redis does it before sleeping when clients WAIT)."""
        if self.replicas and self.master is None:
            self.feed_bytes(encode_batch([[b"REPLCONF", b"GETACK", b"*"]]))
            self.flush()

    def wake_waiters(self) -> None:
        from .commands.replication import WAIT_KEY

        blocking = self.server.blocking
        for db, key in list(blocking.waiters):
            if key == WAIT_KEY:
                blocking.ready.add((db, key))
        if blocking.ready:
            self.server.serve_ready()

    # -- the cron --------------------------------------------------------------------

    def cron(self) -> None:
        server = self.server
        self.check_children()
        self.flush()
        if self.failover is not None:
            self.check_failover()
        now = time.time()
        config = server.config
        if self.master is None and self.replicas and now - self.last_ping >= config["repl-ping-replica-period"]:
            self.last_ping = now
            self.feed_bytes(encode_batch([[b"PING"]]))
            self.flush()
        timeout = config["repl-timeout"]
        limits = _replica_limits(config)
        for link in list(self.replicas):
            if link.state == "online" and link.lag(now) > timeout:
                log.warning("Disconnecting timedout replica: %s", link.client.addr)
                link.client.kill()
                continue
            size = link.pending_size + (link.client.transport.get_write_buffer_size() if link.client.transport else 0)
            if over_limit(limits, size, link.client):
                close(link.client, server)
        ttl = config["repl-backlog-ttl"]
        if self.backlog is not None and not self.replicas and self.master is None and ttl and now - self.no_replicas_since > ttl:
            self.backlog = None
            log.info("Replication backlog freed after %d seconds without connected replicas.", ttl)
        self.refresh_good_replicas(now)
        if self.master is not None:
            self.master.cron()

    # -- FAILOVER (Redis 6.2's coordinated failover) -----------------------------------------

    def start_failover(self, target: ReplicaLink, host: str, port: int, deadline: float | None, force: bool) -> None:
        """Pause writes, wait for the target to have everything, then hand over (check_failover)."""
        from .pause import pause

        self.failover = Failover("waiting-for-sync", target, host, port, deadline, force)
        pause(self.server, True, purpose="failover")
        log.info("FAILOVER requested to %s:%d.", host, port)
        self.request_acks()

    def check_failover(self) -> None:
        failover = self.failover
        if failover is None or failover.state != "waiting-for-sync":
            return
        synced = failover.target.ack_offset >= self.server.master_repl_offset and failover.target in self.replicas
        if not synced and failover.deadline is not None and time.time() > failover.deadline:
            if not failover.force:
                log.warning("FAILOVER to %s:%d timed out.", failover.host, failover.port)
                self.abort_failover()
                return
            synced = True
        if synced:
            from .replica_link import become_replica

            log.info("Failover target %s:%d is synced, failing over.", failover.host, failover.port)
            failover.state = "failover-in-progress"
            become_replica(self.server, failover.host, failover.port, failover=True)
        else:
            self.request_acks()

    def failover_done(self) -> None:
        from .pause import release

        if self.failover is not None:
            log.info("Failover target %s:%d is now the primary.", self.failover.host, self.failover.port)
        self.failover = None
        self.server.loop.call_soon(release, self.server, "failover")  # the held clients run after this turn, not inside it

    def failover_refused(self) -> None:
        from .replica_link import become_primary

        become_primary(self.server)
        self.abort_failover()

    def abort_failover(self) -> None:
        from .pause import release

        self.failover = None
        self.server.loop.call_soon(release, self.server, "failover")  # after FAILOVER ABORT's reply, as CLIENT UNPAUSE

    # -- role changes ------------------------------------------------------------------

    def shift_replid(self) -> None:
        """Start a new history that continues the current one (PSYNC2): the old ID becomes replid2."""
        server = self.server
        self.replid2 = server.replid
        self.second_offset = server.master_repl_offset + 1
        server.replid = new_replid()
        log.info("Setting secondary replication ID to %s, valid up to offset: %d. New replication ID is %s",
                 self.replid2, self.second_offset, server.replid)

    # -- INFO, ROLE ------------------------------------------------------------------------

    def info(self) -> list[tuple[str, object]]:
        server = self.server
        fields: list[tuple[str, object]] = []
        master = self.master
        if master is not None:
            fields += master.info()
        else:
            fields.append(("role", "master"))
        fields.append(("connected_slaves", len(self.replicas)))
        if master is None and server.config["min-replicas-to-write"] and server.config["min-replicas-max-lag"]:
            fields.append(("min_slaves_good_slaves", self.good_replicas))
        now = time.time()
        for index, link in enumerate(self.replicas):
            online = link.state == "online"
            lag = link.lag(now) if online else 0  # Redis counts a lag only for an online replica
            fields.append((f"slave{index}", f"ip={link.addr},port={link.port},state={'online' if online else 'wait_bgsave'},offset={link.ack_offset},lag={lag}"))
        backlog = self.backlog
        fields += [
            ("master_failover_state", self.failover.state if self.failover is not None else "no-failover"),
            ("master_replid", server.replid),
            ("master_replid2", self.replid2),
            ("master_repl_offset", server.master_repl_offset),
            ("second_repl_offset", self.second_offset),
            ("repl_backlog_active", 0 if backlog is None else 1),
            ("repl_backlog_size", server.config["repl-backlog-size"]),
            ("repl_backlog_first_byte_offset", self.backlog_off if backlog is not None else 0),
            ("repl_backlog_histlen", len(backlog) if backlog is not None else 0),
        ]
        return fields


def _replica_limits(config) -> tuple[int, int, int]:
    """client-output-buffer-limit's replica class: hard, soft bytes and soft seconds."""
    return classes(config["client-output-buffer-limit"])["slave"]


def _send_all(fd: int, data) -> None:
    """Write all of data to a non-blocking socket from the child, waiting until it can take more."""
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            sent = os.write(fd, view)
        except BlockingIOError:
            poller.poll(1000)
            continue
        view = view[sent:]


def _send_diskless(fd: int, chunks) -> None:
    mark = os.urandom(EOF_MARK_SIZE // 2).hex().encode()
    _send_all(fd, b"$EOF:" + mark + b"\r\n")
    for chunk in chunks:
        _send_all(fd, chunk)
    _send_all(fd, mark)


def _send_file(fd: int, path: str) -> None:
    with open(path, "rb") as handle:  # the size of the file opened: a save renaming over the path cannot change it
        _send_all(fd, b"$%d\r\n" % os.fstat(handle.fileno()).st_size)
        while chunk := handle.read(1 << 20):
            _send_all(fd, chunk)
