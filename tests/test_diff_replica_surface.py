"""Replication's client-visible surface against Redis 8.2.3: the same steps on a Redis pair and a Millrace pair.

REPLICAOF's checks (a FAILOVER in progress, string2ll's port, strcasecmp's host),
a replica's ROLE and INFO offsets before it ever linked, min-replicas-max-lag in
whole seconds, the keyspace events a replica emits applying the stream, and WAIT
counting against the caller's own last write (Redis's c->woff).

A replica is stopped with SIGSTOP where a test needs an ACK that never comes;
every wait is for a condition with a generous deadline, never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time

import pytest

from persistence import aof as aoffile
from tests.rawclient import RawConn
from tests.servers import free_port, require_redis, start_millrace, start_redis, wait_for


def call(port: int, *argv):
    """One command on a fresh connection: errors come back as values, as bytes."""
    conn = RawConn(port)
    try:
        reply = conn.call(*argv)
    finally:
        conn.sock.close()
    return str(reply).encode() if isinstance(reply, Exception) else reply


def replication(server) -> dict:
    return server.client().info("replication")


def link_up(primary, replica) -> bool:
    """The replica's link is up and the primary sees it online."""
    fields = replication(primary)
    return replication(replica).get("master_link_status") == "up" and "online" in str(fields.get("slave0", ""))


@contextlib.contextmanager
def stopped(replica):
    """The replica process frozen (SIGSTOP): it reads and ACKs nothing until resumed."""
    os.kill(replica.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(replica.proc.pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def pairs():
    """{"redis": (primary, replica), "millrace": (primary, replica)}, links up."""
    require_redis()
    procs = []
    try:
        mp = start_millrace()
        procs.append(mp)
        procs.append(start_millrace("--replicaof", "127.0.0.1", str(mp.port)))
        rp = start_redis("--repl-diskless-sync-delay", "0")
        procs.append(rp)
        procs.append(start_redis("--replicaof", "127.0.0.1", str(rp.port)))
        found = {"millrace": (procs[0], procs[1]), "redis": (procs[2], procs[3])}
        for primary, replica in found.values():
            wait_for(lambda p=primary, r=replica: link_up(p, r), what="the link up")
        yield found
    finally:
        for proc in reversed(procs):
            proc.stop()


def settled(primary, replica) -> None:
    """Back to normal after a test: the link up and a write of ours acknowledged (WAIT counts the caller's writes)."""
    wait_for(lambda: link_up(primary, replica), what="the link up")
    conn = RawConn(primary.port)
    try:
        assert conn.call("SET", "settled", "1") == b"OK"
        wait_for(lambda: conn.call("WAIT", 1, 1000) == 1, what="the replica's ACK")
    finally:
        conn.sock.close()


class FakePrimary:
    """A listener that a replica connects to: `silent` accepts and never answers; `stall` answers the
    handshake and +FULLRESYNC, then sends no snapshot (the replica stays in its transfer)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        buffer = b""
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            if self.mode == "silent":
                continue
            buffer += data
            try:
                commands = list(aoffile.parse_commands(buffer, "replica"))
            except aoffile.AofError:
                continue
            buffer = buffer[commands[-1][1] :] if commands else buffer
            for argv, _ in commands:
                name = argv[0].upper()
                if name == b"PING":
                    conn.sendall(b"+PONG\r\n")
                elif name in (b"REPLCONF", b"AUTH"):
                    conn.sendall(b"+OK\r\n")
                elif name in (b"PSYNC", b"SYNC"):
                    conn.sendall(b"+FULLRESYNC " + b"f" * 40 + b" 100\r\n")

    def close(self) -> None:
        self.listener.close()
        for conn in self.conns:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture(scope="module")
def unlinked():
    """{"redis": server, "millrace": server}, both started as replicas of a port where nothing listens."""
    require_redis()
    dead = free_port()
    procs = []
    try:
        procs.append(start_millrace("--replicaof", "127.0.0.1", str(dead)))
        procs.append(start_redis("--replicaof", "127.0.0.1", str(dead)))
        yield {"millrace": procs[0], "redis": procs[1], "dead": dead}
    finally:
        for proc in procs:
            proc.stop()


# -- REPLICAOF ------------------------------------------------------------------------------


OFFSETS = ("slave_read_repl_offset", "slave_repl_offset", "master_link_status", "master_sync_in_progress")


def _link_view(server, state: str):
    """ROLE's state and offset and INFO's offsets, once ROLE shows `state` (if it never does, ROLE as it is)."""
    try:
        wait_for(lambda: call(server.port, "ROLE")[3] == state.encode(), timeout=15, what=f"ROLE {state}")
    except AssertionError:
        return call(server.port, "ROLE")[3:]
    fields = replication(server)
    return call(server.port, "ROLE")[3:], {key: fields[key] for key in OFFSETS}


def test_a_replica_that_never_linked_shows_redis_states_and_offsets(unlinked):
    """Redis's ROLE says `handshake` from the first PING until PSYNC is answered and `sync` in the transfer;
    its INFO offsets are 1 while it has neither a primary nor a cached one (before any link, and from
    +FULLRESYNC on), and its own offset once a primary turned replica caches itself."""
    silent, stall = FakePrimary("silent"), FakePrimary("stall")
    try:
        views = {}
        for name in ("redis", "millrace"):
            server = unlinked[name]
            steps = [_link_view(server, "connect")]
            assert call(server.port, "REPLICAOF", "127.0.0.1", str(silent.port)) == b"OK"
            steps.append(_link_view(server, "handshake"))
            assert call(server.port, "REPLICAOF", "127.0.0.1", str(stall.port)) == b"OK"
            steps.append(_link_view(server, "sync"))
            assert call(server.port, "REPLICAOF", "NO", "ONE") == b"OK"
            assert call(server.port, "REPLICAOF", "127.0.0.1", str(silent.port)) == b"OK"
            steps.append(_link_view(server, "handshake"))
            views[name] = steps
        assert views["millrace"] == views["redis"]
        assert views["redis"][0][1]["slave_repl_offset"] == 1  # the oracle says what the test is about
    finally:
        silent.close()
        stall.close()
        for name in ("redis", "millrace"):
            call(unlinked[name].port, "REPLICAOF", "127.0.0.1", str(unlinked["dead"]))


@pytest.mark.parametrize("port", [" {p}", "{p} ", "+{p}", "{h}_{t}", "\t{p}\n", "0{p}", "-0", "65536"])
def test_replicaof_port_follows_string2ll(unlinked, port):
    """`ERR Invalid master port` for what string2ll refuses (Python's int() took spaces, '+', '_', leading zeros)."""
    p = str(free_port())
    arg = port.format(p=p, h=p[:2], t=p[2:])
    replies = {}
    for name in ("redis", "millrace"):
        server = unlinked[name]
        replies[name] = (call(server.port, "REPLICAOF", "127.0.0.1", arg), call(server.port, "ROLE")[1:3])
        call(server.port, "REPLICAOF", "127.0.0.1", str(unlinked["dead"]))  # where it was, had it followed
    assert replies["millrace"] == replies["redis"]
    assert replies["redis"][0] == b"ERR Invalid master port"


def test_replicaof_compares_the_host_ignoring_case(unlinked):
    """Redis's strcasecmp: the same primary in other letters is `Already connected`, no new link, the host as first given."""
    port = str(unlinked["dead"])
    seen = {}
    for name in ("redis", "millrace"):
        server = unlinked[name]
        first = call(server.port, "REPLICAOF", "localhost", port)
        again = call(server.port, "REPLICAOF", "LocalHost", port)
        seen[name] = (first, again, replication(server)["master_host"])
        call(server.port, "REPLICAOF", "127.0.0.1", port)
    assert seen["millrace"] == seen["redis"]
    assert seen["redis"][1] == b"OK Already connected to specified master"


def test_replicaof_is_refused_while_failing_over(pairs):
    """While FAILOVER waits for its (stopped) target, REPLICAOF and SLAVEOF, NO ONE too, are refused."""
    replies = {}
    try:
        for name in ("redis", "millrace"):
            primary, replica = pairs[name]
            settled(primary, replica)
            with stopped(replica):
                primary.client().set("failover-key", "v")  # an offset the stopped replica cannot acknowledge
                started = call(primary.port, "FAILOVER", "TIMEOUT", "600000")
                state = replication(primary)["master_failover_state"]
                dead = str(free_port())
                got = [call(primary.port, *argv) for argv in (("REPLICAOF", "NO", "ONE"), ("REPLICAOF", "127.0.0.1", dead), ("SLAVEOF", "127.0.0.1", dead))]
                role = call(primary.port, "ROLE")[0]
                aborted = call(primary.port, "FAILOVER", "ABORT")
            replies[name] = (started, state, got, role, aborted)
        assert replies["millrace"] == replies["redis"]
        assert replies["redis"][2][0] == b"ERR REPLICAOF not allowed while failing over."
    finally:
        for name in ("redis", "millrace"):
            primary, replica = pairs[name]
            if call(primary.port, "ROLE")[0] != b"master":  # (a REPLICAOF that got through)
                call(primary.port, "REPLICAOF", "NO", "ONE")
            settled(primary, replica)


# -- min-replicas-max-lag ---------------------------------------------------------------------


def _lag_refusals(primary, replica, max_lag: int) -> list[tuple[int, int]]:
    """Stop the replica; write every 0.1 s until a write is refused for its lag (and a few after):
    each refused write with the lag and good-replica count INFO shows just after it."""
    p = primary.client()
    p.config_set("min-replicas-to-write", 1)
    p.config_set("min-replicas-max-lag", max_lag)
    refused: list[tuple[int, int]] = []
    try:
        settled(primary, replica)
        with stopped(replica):
            deadline = time.monotonic() + max_lag + 30
            while len(refused) < 5:
                assert time.monotonic() < deadline, "writes were never refused"
                reply = call(primary.port, "SET", "lag-key", "v")
                if reply.startswith(b"NOREPLICAS"):
                    fields = p.info("replication")  # after the write: the lag can only have grown since
                    refused.append((fields["slave0"]["lag"], fields["min_slaves_good_slaves"]))
                time.sleep(0.1)
    finally:
        p.config_set("min-replicas-to-write", 0)
        p.config_set("min-replicas-max-lag", 10)
    settled(primary, replica)
    return refused


def test_min_replicas_max_lag_counts_whole_seconds(pairs):
    """Redis compares `unixtime - repl_ack_time` in whole seconds, as INFO's `lag=` shows it: a write
    refused for the lag comes with INFO showing a lag past min-replicas-max-lag, never one within it."""
    for name in ("redis", "millrace"):
        primary, replica = pairs[name]
        refused = _lag_refusals(primary, replica, 2)
        assert all(lag > 2 and good == 0 for lag, good in refused), (name, refused)


# -- keyspace events on a replica ---------------------------------------------------------------


REPLICA_EVENTS = [
    ("XADD", "es", "1-1", "f", "v"),
    ("XADD", "es", "2-1", "f", "v"),
    ("XGROUP", "CREATE", "es", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "c1", "COUNT", "1", "STREAMS", "es", ">"),  # a new consumer, a delivery
    ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "es", ">"),  # an existing one
    ("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "es", ">"),  # nothing left to read
    ("XCLAIM", "es", "g", "c3", "0", "2-1"),
    ("XAUTOCLAIM", "es", "g", "c4", "0", "0"),
    ("XGROUP", "CREATECONSUMER", "es", "g", "c9"),
    ("XGROUP", "CREATECONSUMER", "es", "g", "c9"),
    ("APPEND", "ea", "x"),  # creates the key: Redis propagates APPEND itself, not a SET
    ("APPEND", "ea", "y"),
    ("SETRANGE", "ea", "1", "z"),
]


def _replica_events(primary, replica) -> list[tuple[bytes, bytes]]:
    r = replica.client()
    r.config_set("notify-keyspace-events", "KEAn")
    listener = r.pubsub()
    listener.psubscribe("__key*@0__:*")
    assert listener.get_message(timeout=10)["type"] == "psubscribe"
    p = primary.client()
    try:
        for argv in REPLICA_EVENTS:
            p.execute_command(*argv)
        p.set("events-end", "1")  # its `set` ends what the replica emits for the commands above
        events: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while (b"__keyevent@0__:set", b"events-end") not in events:
            assert time.monotonic() < deadline, f"the replica's events did not arrive: {events}"
            message = listener.get_message(timeout=1)
            if message is not None and message["type"] == "pmessage":
                events.append((message["channel"], message["data"]))
        return events
    finally:
        listener.close()
        r.config_set("notify-keyspace-events", "")


def test_a_replica_applying_the_stream_emits_redis_events(pairs):
    """An `XGROUP CREATECONSUMER` effect that only pins an existing consumer's times emits nothing on the
    replica, and APPEND that creates its key emits `new` and `append` there, as the Redis replica does."""
    events = {name: _replica_events(*pairs[name]) for name in ("redis", "millrace")}
    assert events["millrace"] == events["redis"]
    assert events["redis"].count((b"__keyevent@0__:xgroup-createconsumer", b"es")) == 4  # c1, c3, c4, c9


# -- WAIT, WAITAOF: the caller's own writes ------------------------------------------------------


def _wait_replies(primary, replica) -> list:
    """Writers and a client that never wrote ask WAIT/WAITAOF while the replica is stopped."""
    writer, fresh, exec_writer, reader, other = (RawConn(primary.port) for _ in range(5))
    try:
        got = [writer.call("SET", "wk", "1"), writer.call("WAIT", 1, 5000)]
        got.append(fresh.call("WAITAOF", 0, 1, 500))
        got += [writer.call("XGROUP", "CREATE", "ws", "g", "$", "MKSTREAM"), writer.call("WAIT", 1, 5000)]
        reader.send(aoffile.encode([b"XREADGROUP", b"GROUP", b"g", b"rc", b"BLOCK", b"0", b"STREAMS", b"ws", b">"]))
        wait_for(lambda: primary.client().info("clients")["blocked_clients"] == 1, what="the reader blocked")
        got += [writer.call("SET", "wk", "0"), writer.call("WAIT", 1, 5000)]  # all so far acknowledged, the reader's too
        with stopped(replica):
            got.append(writer.call("SET", "wk", "2"))
            got.append(fresh.call("WAIT", 1, 500))  # it wrote nothing: at once, whatever others wrote
            got.append(writer.call("WAIT", 1, 300))  # its write is not acknowledged
            got += [exec_writer.call("MULTI"), exec_writer.call("SET", "wk", "3"), exec_writer.call("EXEC")]
            got.append(exec_writer.call("WAIT", 1, 300))  # a write through EXEC counts
            other.call("XADD", "ws", "1-1", "f", "v")
            got.append(reader.read()[0][0])  # served: its delivery is propagated now
            got.append(reader.call("WAIT", 1, 300))  # Redis does not count it as the reader's write (served outside its call())
            got += [fresh.call("WAITAOF", 0, 1, 300), writer.call("WAITAOF", 0, 1, 300)]
            got.append(fresh.call("WAIT", 2, 100))  # times out, having asked for ACKs: the GETACK is not its write
            got.append(fresh.call("WAIT", 1, 300))
        return got
    finally:
        for conn in (writer, fresh, exec_writer, reader, other):
            conn.sock.close()
        settled(primary, replica)


def test_wait_counts_against_the_callers_last_write(pairs):
    """Redis's c->woff: WAIT and WAITAOF wait for the caller's own last propagated write (0 for a client
    that never wrote), not for the server's offset; EXEC's writes count, a served blocked XREADGROUP's do not."""
    for name in ("redis", "millrace"):
        settled(*pairs[name])
    replies = {name: _wait_replies(*pairs[name]) for name in ("redis", "millrace")}
    assert replies["millrace"] == replies["redis"]
    assert replies["redis"][8:10] == [1, 0]  # the fresh client's WAIT, then the writer's
