"""Replication commands: REPLICAOF/SLAVEOF, PSYNC, REPLCONF, WAIT, WAITAOF, ROLE."""

from __future__ import annotations

import time

from protocol.errors import ReplyError, arg_text
from protocol.reply import OK, Simple

from ..blocking import Block
from ..command import command
from .args import to_int
from .client import NO_REPLY

WAIT_KEY = b"\x00wait"  # the pseudo key WAIT/WAITAOF clients block on; replica ACKs touch it


def _replication(ctx):
    replication = ctx.server.replication
    if replication is None:
        raise ReplyError("ERR replication is not available in this server")
    return replication


def _replicaof(ctx, argv):
    """REPLICAOF host port | NO ONE."""
    from ..replica_link import become_primary, become_replica

    server = ctx.server
    replication = _replication(ctx)
    if replication.failover is not None:  # before NO ONE too: the failover owns the role change
        raise ReplyError("ERR REPLICAOF not allowed while failing over.")
    if argv[1].lower() == b"no" and argv[2].lower() == b"one":
        if replication.master is not None:
            become_primary(server)
            server.config.values["replicaof"] = server.config.values["slaveof"] = ""
        return OK
    if ctx.replica is not None:
        raise ReplyError("ERR Command is not valid when client is a replica.")
    port = to_int(argv[2], "ERR Invalid master port")  # string2ll's rules: no spaces, '+', '_' or leading zeros
    if not 0 <= port <= 65535:
        raise ReplyError("ERR Invalid master port")
    host = argv[1].decode(errors="replace")
    master = replication.master
    if master is not None and master.host.encode().lower() == host.encode().lower() and master.port == port:  # strcasecmp
        return Simple(b"OK Already connected to specified master")
    become_replica(server, host, port)
    server.config.values["replicaof"] = server.config.values["slaveof"] = f"{host} {port}"
    return OK


@command("replicaof", 3, "admin noscript stale no-async-loading", group="server", summary="Configures a server as replica of another, or promotes it to a master.", since="5.0.0")
def replicaof(ctx, argv):
    return _replicaof(ctx, argv)


@command("slaveof", 3, "admin noscript stale no-async-loading", group="server", summary="Sets a Redis server as a replica of another, or promotes it to being a master.")
def slaveof(ctx, argv):
    return _replicaof(ctx, argv)


@command("psync", -3, "admin noscript no-async-loading no-multi", group="server", summary="An internal command used in replication.", since="2.8.0", complexity=None)
def psync(ctx, argv):
    """PSYNC replid offset [FAILOVER]: +CONTINUE and the backlog, or +FULLRESYNC and a snapshot, then the stream.

    FAILOVER comes from our own primary handing over (its FAILOVER command): we become the
    primary first, keeping its history as replid2, so it continues from us."""
    from ..replica_link import become_primary

    replication = _replication(ctx)
    if ctx.replica is not None:
        return NO_REPLY  # already a replica: Redis ignores a second SYNC
    if len(argv) > 3 and argv[3].lower() == b"failover":  # any other extra argument is ignored, as Redis
        if replication.master is None:
            raise ReplyError("ERR PSYNC FAILOVER can't be sent to a master.")
        if argv[1].decode(errors="replace") != ctx.server.replid:
            raise ReplyError("ERR PSYNC FAILOVER replid must match my replid.")
        become_primary(ctx.server)
    master = replication.master
    if master is not None and master.state != "connected":
        raise ReplyError("NOMASTERLINK Can't SYNC while not connected with my master")
    offset = to_int(argv[2])
    replication.psync(ctx, argv[1].decode(errors="replace"), offset)
    return NO_REPLY


@command("replconf", -1, "admin noscript loading stale allow-busy", group="server", summary="An internal command for configuring the replication stream.", since="3.0.0")
def replconf(ctx, argv):
    """REPLCONF listening-port p | ip-address a | capa c... | ack offset [FACK aof-offset] | getack."""
    if len(argv) % 2 == 0:
        raise ReplyError("ERR syntax error")
    replication = _replication(ctx)
    index = 1
    while index < len(argv):
        option, value = argv[index].lower(), argv[index + 1]
        if option == b"listening-port":
            ctx.repl_port = to_int(value)
        elif option == b"ip-address":
            ctx.repl_ip = value.decode(errors="replace")
        elif option == b"capa":
            if value.lower() == b"eof":  # else a full sync goes through the disk, sent as `$<length>` (as Redis)
                ctx.repl_eof = True
        elif option == b"ack":
            if ctx.replica is None:
                return NO_REPLY
            aof = to_int(argv[index + 3]) if len(argv) > index + 3 and argv[index + 2].lower() == b"fack" else None
            replication.ack(ctx, to_int(value), aof)
            return NO_REPLY  # ACKs are never answered
        elif option == b"getack":
            return NO_REPLY  # only a replica answers it, on its link to the primary
        else:
            raise ReplyError(f"ERR Unrecognized REPLCONF option: {arg_text(argv[index])}")
        index += 2
    return OK


def _request_acks(server, replication) -> None:
    """REPLCONF GETACK * once this turn's commands ran (Redis sends it before sleeping): the GETACK
    is not the caller's write, so it must not move the caller's woff (Server.call)."""
    if server.loop is None:
        replication.request_acks()
    else:
        server.loop.call_soon(replication.request_acks)


def _wait_timeout(arg: bytes) -> int:
    timeout = to_int(arg, "ERR timeout is not an integer or out of range")
    if timeout < 0:
        raise ReplyError("ERR timeout is negative")
    return timeout


@command("wait", 3, "blocking", group="generic", summary="Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.", since="3.0.0")
def wait(ctx, argv):
    """WAIT numreplicas timeout -> how many replicas acknowledged this connection's writes (up to its woff,
    Redis's c->woff: a connection that never wrote is answered at once)."""
    server = ctx.server
    replication = _replication(ctx)
    if replication.master is not None:
        raise ReplyError(
            "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is "
            "configured to be writable (which is not the default) writes to replicas are just local and are not propagated."
        )
    wanted = to_int(argv[1])
    timeout = _wait_timeout(argv[2])
    target = ctx.woff

    def count() -> int:
        return replication.acked(target)

    if count() >= wanted or ctx.multi is not None or ctx.in_exec:
        return count()
    _request_acks(server, replication)
    return Block([WAIT_KEY], timeout, lambda: (n if (n := count()) >= wanted else None), on_timeout=count)


@command("waitaof", 4, "blocking", group="generic", summary="Blocks until all of the preceding write commands sent by the connection are written to the append-only file of the master and/or replicas.", since="7.2.0")
def waitaof(ctx, argv):
    """WAITAOF numlocal numreplicas timeout -> [local fsynced (0/1), replicas that fsynced]."""
    server = ctx.server
    replication = _replication(ctx)
    if replication.master is not None:
        raise ReplyError("ERR WAITAOF cannot be used with replica instances. Please also note that writes to replicas are just local and are not propagated.")
    numlocal = to_int(argv[1])
    if not 0 <= numlocal <= 1:  # getRangeLongFromObjectOrReply(0, 1)
        raise ReplyError("ERR value is out of range, value must between 0 and 1")
    wanted = to_int(argv[2])
    if wanted < 0:  # getPositiveLongFromObjectOrReply
        raise ReplyError("ERR value is out of range, must be positive")
    timeout = _wait_timeout(argv[3])
    if numlocal and server.aof is None:
        raise ReplyError("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
    target = ctx.woff

    def local() -> int:
        """Redis's fsynced_reploff >= c->woff: a sync now makes everything up to master_repl_offset durable,
        unless the AOF is not yet one a restart loads (appendonly being turned on: its first base is being
        written) or the disk refuses it (logged by the writer)."""
        persistence = server.persistence
        if server.aof is None or (persistence is not None and persistence.aof_waiting_rewrite):
            return 0
        try:
            server.aof.sync()
        except OSError:
            return 0
        return 1

    def reply():
        return [local(), replication.acked(target, aof=True)]

    def done():
        answer = reply()
        return answer if answer[0] >= numlocal and answer[1] >= wanted else None

    answer = done()
    if answer is not None or ctx.multi is not None or ctx.in_exec:
        return answer or reply()
    _request_acks(server, replication)
    return Block([WAIT_KEY], timeout, done, on_timeout=reply)


@command("role", 1, "noscript loading stale fast", group="server", summary="Returns the replication role.", since="2.8.12")
def role(ctx, argv):
    replication = _replication(ctx)
    if replication.master is not None:
        return replication.master.role()
    replicas = [
        [link.addr.encode(), b"%d" % link.port, b"%d" % link.ack_offset] for link in replication.replicas if link.state == "online"
    ]
    return [b"master", ctx.server.master_repl_offset, replicas]


@command("failover", -1, "admin noscript stale", group="server", summary="Starts a coordinated failover from a server to one of its replicas.", since="6.2.0")
def failover(ctx, argv):
    """FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: pause writes, let a replica catch up, swap roles.

    ABORT only alone (with anything else a syntax error); checks in Redis's order (failoverCommand), so
    the same wrong call gets the same error."""
    server = ctx.server
    replication = _replication(ctx)
    if server.config["cluster-enabled"]:
        raise ReplyError("ERR FAILOVER not allowed in cluster mode.")
    if len(argv) == 2 and argv[1].lower() == b"abort":  # ABORT only alone: with anything else a syntax error
        if replication.failover is None:
            raise ReplyError("ERR No failover in progress.")
        replication.abort_failover()
        return OK
    host = port = None
    force = False
    timeout = 0
    index = 1
    while index < len(argv):
        option = argv[index].lower()
        if option == b"to" and index + 2 < len(argv) and host is None:
            port = to_int(argv[index + 2])
            host = argv[index + 1].decode(errors="replace")
            index += 3
        elif option == b"force" and not force:
            force = True
            index += 1
        elif option == b"timeout" and index + 1 < len(argv) and not timeout:
            timeout = to_int(argv[index + 1])
            if timeout <= 0:
                raise ReplyError("ERR FAILOVER timeout must be greater than 0")
            index += 2
        else:
            raise ReplyError("ERR syntax error")
    if replication.failover is not None:
        raise ReplyError("ERR FAILOVER already in progress.")
    if replication.master is not None:
        raise ReplyError("ERR FAILOVER is not valid when server is a replica.")
    if not replication.replicas:
        raise ReplyError("ERR FAILOVER requires connected replicas.")
    if force and (not timeout or host is None):
        raise ReplyError("ERR FAILOVER with force option requires both a timeout and target HOST and IP.")
    online = [link for link in replication.replicas if link.state == "online"]
    if host is not None:
        target = next((link for link in replication.replicas if link.addr == host and link.port == port), None)
        if target is None:
            raise ReplyError("ERR FAILOVER target HOST and PORT is not a replica.")
        if target.state != "online":
            raise ReplyError("ERR FAILOVER target replica is not online.")
    elif online:
        target = max(online, key=lambda link: link.ack_offset)
    else:  # every replica still in its handshake (Redis would wait for one to catch up)
        raise ReplyError("ERR FAILOVER requires connected replicas.")
    replication.start_failover(target, target.addr, target.port, time.time() + timeout / 1000 if timeout else None, force)
    return OK
